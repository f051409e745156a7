-- The jobs: one row per message, waiting (no lease), delayed (due later) or claimed (leased).
-- A row is deleted when its message is acknowledged: the table holds only what is to be done.
CREATE TABLE {schema}.jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue text NOT NULL,
    priority integer NOT NULL,
    -- Unix seconds: not delivered before.
    due_at double precision NOT NULL,
    body bytea NOT NULL,
    -- The message's id, to find it by; null for a row another program wrote.
    message_id text,
    -- The claim holding the row, and until when (Unix seconds); both null while it waits.
    lease bigint,
    leased_until double precision,
    attempts integer NOT NULL DEFAULT 0
);

-- Every row is inserted, updated and deleted within a short time: vacuumed often and at full
-- speed, the space of the deleted rows is reused and the table stays the size of its backlog.
ALTER TABLE {schema}.jobs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0
);

-- A claim reads the first due rows of a queue in due order; claims are counted and their ends
-- found per queue; a message is found by its id.
CREATE INDEX jobs_waiting ON {schema}.jobs (queue, due_at, id) WHERE leased_until IS NULL;
CREATE INDEX jobs_leased ON {schema}.jobs (queue, leased_until) WHERE leased_until IS NOT NULL;
CREATE INDEX jobs_message ON {schema}.jobs (message_id);

-- Dead letters: messages whose handlers failed for good, and bodies that could not be decoded
-- (no message id), each with its reason as JSON.
CREATE TABLE {schema}.dead_letters (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue text NOT NULL,
    message_id text,
    body bytea NOT NULL,
    reason text NOT NULL,
    died_at double precision NOT NULL
);
CREATE INDEX dead_letters_queue ON {schema}.dead_letters (queue, id);
CREATE INDEX dead_letters_age ON {schema}.dead_letters (queue, died_at);

-- Live workers: each announcement until it expires (Unix seconds).
CREATE TABLE {schema}.workers (
    id text PRIMARY KEY,
    info bytea NOT NULL,
    expires_at double precision NOT NULL
);

-- Unique emits: a key, the message holding it, and until when (Unix seconds).
CREATE TABLE {schema}.unique_keys (
    key text PRIMARY KEY,
    holder text NOT NULL,
    held_until double precision NOT NULL
);

-- Deletes the acknowledged rows `done_ids` still held by the claims `done_leases`; then claims
-- up to `wanted` due rows of `queues`, the first queue's first, each in due order, for
-- `lease_for` seconds under the claim `token`; claims of those queues whose lease ran out go
-- back first. Rows other claims hold are skipped, never waited for.
CREATE FUNCTION {schema}.claim(queues text[], wanted integer, lease_for double precision,
                               token bigint, done_ids bigint[], done_leases bigint[])
RETURNS TABLE (job_id bigint, job_rank integer, job_due double precision, job_body bytea)
LANGUAGE plpgsql AS $$
DECLARE
    now_s double precision := extract(epoch FROM clock_timestamp());
    rank integer := 0;
    left_to_take integer := wanted;
    taken integer;
    q text;
BEGIN
    IF cardinality(done_ids) > 0 THEN
        DELETE FROM {schema}.jobs j USING unnest(done_ids, done_leases) AS d(id, lease)
         WHERE j.id = d.id AND j.lease = d.lease;
    END IF;
    FOREACH q IN ARRAY queues LOOP
        UPDATE {schema}.jobs j SET leased_until = NULL, lease = NULL
         WHERE j.id IN (
            SELECT e.id FROM {schema}.jobs e
             WHERE e.queue = q AND e.leased_until IS NOT NULL AND e.leased_until < now_s
             FOR UPDATE SKIP LOCKED);
    END LOOP;
    FOREACH q IN ARRAY queues LOOP
        RETURN QUERY
        WITH picked AS (
            SELECT w.id FROM {schema}.jobs w
             WHERE w.queue = q AND w.leased_until IS NULL AND w.due_at <= now_s
             ORDER BY w.due_at, w.id
             LIMIT left_to_take
             FOR UPDATE SKIP LOCKED)
        UPDATE {schema}.jobs j
           SET leased_until = now_s + lease_for, lease = token, attempts = j.attempts + 1
          FROM picked
         WHERE j.id = picked.id
        RETURNING j.id, rank, j.due_at, j.body;
        GET DIAGNOSTICS taken = ROW_COUNT;
        left_to_take := left_to_take - taken;
        EXIT WHEN left_to_take <= 0;
        rank := rank + 1;
    END LOOP;
END
$$;

-- Moves the row `job` claimed under `token` to the dead letters with `reason`, then keeps at
-- most `max_count` dead letters of its queue, none that died before `oldest_kept`. False when
-- the claim no longer holds the row (nothing changes).
CREATE FUNCTION {schema}.bury(job bigint, token bigint, message text, why text,
                              died double precision, max_count integer,
                              oldest_kept double precision)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    q text;
    b bytea;
    cut bigint;
BEGIN
    DELETE FROM {schema}.jobs WHERE id = job AND lease = token RETURNING queue, body INTO q, b;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF max_count > 0 THEN
        INSERT INTO {schema}.dead_letters (queue, message_id, body, reason, died_at)
        VALUES (q, message, b, why, died);
    END IF;
    SELECT d.id INTO cut FROM {schema}.dead_letters d WHERE d.queue = q
     ORDER BY d.id DESC OFFSET greatest(max_count, 0) LIMIT 1;
    IF cut IS NOT NULL THEN
        DELETE FROM {schema}.dead_letters WHERE queue = q AND id <= cut;
    END IF;
    DELETE FROM {schema}.dead_letters WHERE queue = q AND died_at < oldest_kept;
    RETURN true;
END
$$;
