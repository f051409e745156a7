-- Reading job records and groups a page at a time, newest first: records by when each
-- expires, groups by when each was created (in their spec).
CREATE INDEX job_records_listed ON {schema}.job_records (queue, expires_at DESC, message_id DESC);
CREATE INDEX job_groups_listed ON {schema}.job_groups
    (queue, ((spec::jsonb ->> 'created')::float8) DESC, group_id DESC);
