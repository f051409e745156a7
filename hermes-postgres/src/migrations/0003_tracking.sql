-- Job records: per default queue, the record of a message by its id (JSON), until it expires.
CREATE TABLE {schema}.job_records (
    queue text NOT NULL,
    message_id text NOT NULL,
    record text NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (queue, message_id)
);
CREATE INDEX job_records_end ON {schema}.job_records (expires_at);

-- Groups (batches, workflows): per default queue, a group's spec (JSON), counts, the names of
-- the messages it released, when its last member was settled, and how long it is kept then.
CREATE TABLE {schema}.job_groups (
    queue text NOT NULL,
    group_id text NOT NULL,
    spec text NOT NULL,
    total bigint NOT NULL,
    succeeded bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    released text[] NOT NULL DEFAULT '{}',
    finished double precision,
    keep_s double precision NOT NULL,
    expires_at double precision NOT NULL,
    PRIMARY KEY (queue, group_id)
);
CREATE INDEX job_groups_end ON {schema}.job_groups (expires_at);

-- The members of a group: its outcome (JSON) once settled, NULL while pending.
CREATE TABLE {schema}.job_group_members (
    queue text NOT NULL,
    group_id text NOT NULL,
    member text NOT NULL,
    outcome text,
    PRIMARY KEY (queue, group_id, member),
    FOREIGN KEY (queue, group_id) REFERENCES {schema}.job_groups ON DELETE CASCADE
);

-- Creates the group unless it exists (or has not expired): returns whether it did.
CREATE FUNCTION {schema}.group_open(p_queue text, p_group text, p_spec text, p_members text[],
                                    p_keep float8, p_unfinished float8)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    now_s float8 := extract(epoch FROM clock_timestamp());
BEGIN
    DELETE FROM {schema}.job_groups
     WHERE queue = p_queue AND group_id = p_group AND expires_at <= now_s;
    INSERT INTO {schema}.job_groups (queue, group_id, spec, total, keep_s, expires_at)
    VALUES (p_queue, p_group, p_spec, 0, p_keep, now_s + p_unfinished)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO {schema}.job_group_members (queue, group_id, member)
    SELECT DISTINCT p_queue, p_group, m FROM unnest(p_members) AS m;
    UPDATE {schema}.job_groups SET total = coalesce(cardinality(ARRAY(
        SELECT DISTINCT m FROM unnest(p_members) AS m)), 0)
     WHERE queue = p_queue AND group_id = p_group;
    RETURN true;
END
$$;

-- Adds the members not there yet: returns how many, -1 without the group, -2 when it is
-- finished.
CREATE FUNCTION {schema}.group_join(p_queue text, p_group text, p_members text[],
                                    p_unfinished float8)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    now_s float8 := extract(epoch FROM clock_timestamp());
    g record;
    added bigint;
BEGIN
    SELECT finished INTO g FROM {schema}.job_groups
     WHERE queue = p_queue AND group_id = p_group AND expires_at > now_s FOR UPDATE;
    IF NOT FOUND THEN
        RETURN -1;
    END IF;
    IF g.finished IS NOT NULL THEN
        RETURN -2;
    END IF;
    INSERT INTO {schema}.job_group_members (queue, group_id, member)
    SELECT DISTINCT p_queue, p_group, m FROM unnest(p_members) AS m
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS added = ROW_COUNT;
    UPDATE {schema}.job_groups SET total = total + added, expires_at = now_s + p_unfinished
     WHERE queue = p_queue AND group_id = p_group;
    RETURN added;
END
$$;

-- Stores the record `p_record` (when given) and settles `p_member` once: no row without the
-- group, else its counts after, and whether this call counted the member.
CREATE FUNCTION {schema}.group_settle(p_queue text, p_group text, p_member text, p_outcome text,
                                      p_succeeded boolean, p_unfinished float8,
                                      p_record_id text, p_record text, p_record_keep float8)
RETURNS TABLE (total bigint, succeeded bigint, failed bigint, counted boolean)
LANGUAGE plpgsql AS $$
DECLARE
    now_s float8 := extract(epoch FROM clock_timestamp());
    g record;
    hit boolean;
BEGIN
    IF p_record IS NOT NULL THEN
        INSERT INTO {schema}.job_records (queue, message_id, record, expires_at)
        VALUES (p_queue, p_record_id, p_record, now_s + p_record_keep)
        ON CONFLICT (queue, message_id)
        DO UPDATE SET record = EXCLUDED.record, expires_at = EXCLUDED.expires_at;
    END IF;
    SELECT * INTO g FROM {schema}.job_groups
     WHERE queue = p_queue AND group_id = p_group AND expires_at > now_s FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE {schema}.job_group_members SET outcome = p_outcome
     WHERE queue = p_queue AND group_id = p_group AND member = p_member AND outcome IS NULL;
    hit := FOUND;
    IF hit THEN
        IF p_succeeded THEN
            g.succeeded := g.succeeded + 1;
        ELSE
            g.failed := g.failed + 1;
        END IF;
        IF g.succeeded + g.failed >= g.total THEN
            g.finished := now_s;
        END IF;
        UPDATE {schema}.job_groups j SET succeeded = g.succeeded, failed = g.failed,
               finished = g.finished,
               expires_at = now_s + CASE WHEN g.finished IS NULL THEN p_unfinished ELSE g.keep_s END
         WHERE j.queue = p_queue AND j.group_id = p_group;
    END IF;
    RETURN QUERY SELECT g.total, g.succeeded, g.failed, hit;
END
$$;

-- Queues a job row and marks `p_name` released, unless it was: 1 when queued, 0 when released
-- already, -1 without the group.
CREATE FUNCTION {schema}.group_release(p_queue text, p_group text, p_name text,
                                       p_job_queue text, p_priority integer, p_due float8,
                                       p_body bytea, p_channel text, p_message_id text)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    now_s float8 := extract(epoch FROM clock_timestamp());
    names text[];
BEGIN
    SELECT released INTO names FROM {schema}.job_groups
     WHERE queue = p_queue AND group_id = p_group AND expires_at > now_s FOR UPDATE;
    IF NOT FOUND THEN
        RETURN -1;
    END IF;
    IF p_name = ANY(names) THEN
        RETURN 0;
    END IF;
    UPDATE {schema}.job_groups SET released = array_append(released, p_name)
     WHERE queue = p_queue AND group_id = p_group;
    INSERT INTO {schema}.jobs (queue, priority, due_at, body, message_id)
    VALUES (p_job_queue, p_priority, GREATEST(p_due, now_s), p_body, p_message_id);
    PERFORM pg_notify(p_channel, p_job_queue);
    RETURN 1;
END
$$;
