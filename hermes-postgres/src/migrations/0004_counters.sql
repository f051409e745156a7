-- The counters behind the dashboard's history: per queue, a bucket (a minute or an hour) of
-- named counts, kept until it expires.
CREATE TABLE {schema}.counters (
    queue text NOT NULL,
    bucket text NOT NULL,
    name text NOT NULL,
    count bigint NOT NULL,
    -- Unix seconds: dropped after.
    expires_at double precision NOT NULL,
    PRIMARY KEY (queue, bucket, name)
);
CREATE INDEX counters_end ON {schema}.counters (queue, expires_at);
