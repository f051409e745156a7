-- Limits: the slots of concurrency limits (a holder until the end of its lease) and the starts
-- of rates (until they leave the window), per bound (`<default queue>:<bound name>`), on the
-- server's clock in Unix seconds. Rows past their end are removed by the next admission of
-- their bound and by the driver's sweep, so idle bounds leave nothing behind.
CREATE TABLE {schema}.limit_slots (
    bound text NOT NULL,
    holder text NOT NULL,
    held_until double precision NOT NULL,
    PRIMARY KEY (bound, holder)
);
CREATE INDEX limit_slots_end ON {schema}.limit_slots (held_until);

CREATE TABLE {schema}.limit_starts (
    bound text NOT NULL,
    started_at double precision NOT NULL,
    counts_until double precision NOT NULL
);
CREATE INDEX limit_starts_bound ON {schema}.limit_starts (bound, started_at);
CREATE INDEX limit_starts_end ON {schema}.limit_starts (counts_until);

-- Pauses: per default queue, what is paused (`priority:<n>`, `type:<name>`).
CREATE TABLE {schema}.paused (
    queue text NOT NULL,
    target text NOT NULL,
    PRIMARY KEY (queue, target)
);

-- Requests to cancel a message, per default queue, kept 30 days.
CREATE TABLE {schema}.cancellations (
    queue text NOT NULL,
    message_id text NOT NULL,
    requested_by text NOT NULL,
    requested_at double precision NOT NULL,
    PRIMARY KEY (queue, message_id)
);
CREATE INDEX cancellations_time ON {schema}.cancellations (queue, requested_at);

-- Admits `p_holder` under every bound of `p_bounds` or under none: kind `s` takes a slot of at
-- most `p_maxes[i]` for `p_lease` seconds, kind `r` records a start of at most `p_maxes[i]` per
-- `p_periods[i]` seconds. Returns (0, 0) when admitted; else the first full bound's place and,
-- for a rate, the seconds until a start leaves its window (-1 for slots). The bounds are locked
-- in name order, so admissions never wait for one another in a circle.
CREATE FUNCTION {schema}.admit(p_holder text, p_lease double precision, p_bounds text[],
                               p_kinds text[], p_maxes integer[], p_periods double precision[])
RETURNS TABLE (refused integer, wait_for double precision)
LANGUAGE plpgsql AS $$
DECLARE
    now_s double precision;
    i integer;
    held integer;
    leaving double precision;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(b.name, 0))
       FROM unnest(p_bounds) AS b(name) ORDER BY b.name;
    -- The time once the bounds are ours: an admission that waited for them starts now.
    now_s := extract(epoch FROM clock_timestamp());
    FOR i IN 1 .. coalesce(cardinality(p_bounds), 0) LOOP
        IF p_kinds[i] = 's' THEN
            DELETE FROM {schema}.limit_slots
             WHERE bound = p_bounds[i] AND held_until <= now_s;
            SELECT count(*) INTO held FROM {schema}.limit_slots
             WHERE bound = p_bounds[i] AND holder <> p_holder;
            IF held >= p_maxes[i] THEN
                RETURN QUERY SELECT i, -1.0::float8;
                RETURN;
            END IF;
        ELSE
            DELETE FROM {schema}.limit_starts
             WHERE bound = p_bounds[i] AND started_at <= now_s - p_periods[i];
            SELECT count(*) INTO held FROM {schema}.limit_starts WHERE bound = p_bounds[i];
            IF held >= p_maxes[i] THEN
                SELECT started_at INTO leaving FROM {schema}.limit_starts
                 WHERE bound = p_bounds[i] ORDER BY started_at OFFSET held - p_maxes[i] LIMIT 1;
                RETURN QUERY SELECT i, leaving + p_periods[i] - now_s;
                RETURN;
            END IF;
        END IF;
    END LOOP;
    FOR i IN 1 .. coalesce(cardinality(p_bounds), 0) LOOP
        IF p_kinds[i] = 's' THEN
            INSERT INTO {schema}.limit_slots (bound, holder, held_until)
            VALUES (p_bounds[i], p_holder, now_s + p_lease)
            ON CONFLICT (bound, holder) DO UPDATE SET held_until = EXCLUDED.held_until;
        ELSE
            INSERT INTO {schema}.limit_starts (bound, started_at, counts_until)
            VALUES (p_bounds[i], now_s, now_s + p_periods[i]);
        END IF;
    END LOOP;
    RETURN QUERY SELECT 0, 0.0::float8;
END
$$;
