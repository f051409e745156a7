//! The driver's SQL statements, written once per schema: the schema's name is the only text put
//! into them, quoted (and checked before); everything else is a parameter.

use crate::naming::quoted;

/// The server's clock, in Unix seconds.
pub(crate) const NOW: &str = "extract(epoch FROM clock_timestamp())::float8";

/// Every statement the driver sends, with the schema's name in it.
#[derive(Debug)]
pub(crate) struct Sql {
    /// `$1` queue, `$2` priority, `$3` due, `$4` body, `$5` channel, `$6` message id.
    pub(crate) insert: String,
    /// `$1` queue, `$2` priority, `$3` dues, `$4` bodies, `$5` channel, `$6` message ids.
    pub(crate) insert_batch: String,
    /// As `insert`, then `$7` key, `$8` window in seconds: a row when queued.
    pub(crate) insert_unique: String,
    pub(crate) claim: String,
    pub(crate) ack_many: String,
    /// `$1` row, `$2` lease, `$3` channel.
    pub(crate) nack: String,
    /// `$1` rows, `$2` leases, `$3` channel.
    pub(crate) nack_many: String,
    pub(crate) extend: String,
    pub(crate) postpone: String,
    pub(crate) next_due: String,
    /// `$1` row, `$2` lease, `$3` message id, `$4` reason, `$5` when, `$6` max count,
    /// `$7` oldest kept.
    pub(crate) bury: String,
    pub(crate) stats: String,
    /// Per state: waiting, delayed, in flight.
    pub(crate) purge: [String; 3],
    pub(crate) purge_dead: String,
    /// Per state: waiting, delayed, in flight.
    pub(crate) peek: [String; 3],
    pub(crate) peek_dead: String,
    /// A page: `$1` queue, `$2` limit, `$3` due time and `$4` row id after which it starts;
    /// per state: waiting, delayed (rows in due order), in flight (rows in id order, `$3`
    /// ignored).
    pub(crate) page: [String; 3],
    /// A page of dead letters: `$1` queue, `$2` limit, `$3` ignored, `$4` the row id after
    /// which it starts.
    pub(crate) page_dead: String,
    pub(crate) delete: String,
    /// `$1` queue, `$2` bucket, `$3` names, `$4` counts, `$5` kept until, `$6` now. Also drops
    /// a few expired buckets of the queue.
    pub(crate) counters_add: String,
    /// `$1` queue, `$2` buckets, `$3` now.
    pub(crate) counters_read: String,
    pub(crate) dead_letters: String,
    pub(crate) unbury: String,
    pub(crate) notify: String,
    pub(crate) announce: String,
    pub(crate) withdraw: String,
    pub(crate) workers: String,
    pub(crate) release: String,
    /// Removes what has expired: uniqueness keys, limit slots and starts, cancellations older
    /// than `$1`.
    pub(crate) sweep: String,
    /// `$1` holder, `$2` lease, `$3` bounds, `$4` kinds, `$5` maxima, `$6` periods.
    pub(crate) admit: String,
    /// `$1` holder, `$2` bounds, `$3` lease in seconds.
    pub(crate) renew_slots: String,
    /// `$1` holder, `$2` bounds.
    pub(crate) release_slots: String,
    /// `$1` bound: the slots not expired.
    pub(crate) slots_used: String,
    /// `$1` bound, `$2` period: the starts within it.
    pub(crate) starts_used: String,
    /// `$1` queue, `$2` target.
    pub(crate) pause: String,
    /// `$1` queue, `$2` target: a row when it was paused.
    pub(crate) resume: String,
    /// `$1` queue.
    pub(crate) paused: String,
    /// `$1` queue, `$2` message id, `$3` by, `$4` at.
    pub(crate) cancel: String,
    /// `$1` queue, `$2` from.
    pub(crate) cancellations: String,
    /// `$1` queue, `$2` message id, `$3` record, `$4` seconds kept.
    pub(crate) put_record: String,
    /// `$1` queue, `$2` message id.
    pub(crate) get_record: String,
    /// `$1` queue, then the cursor: `$2` expiry, `$3` message id; `$4` limit. Latest expiry
    /// first.
    pub(crate) list_records: String,
    /// `$1` queue, `$2` group, `$3` spec, `$4` members, `$5` kept finished, `$6` unfinished.
    pub(crate) group_open: String,
    /// `$1` queue, `$2` group, `$3` members, `$4` kept unfinished.
    pub(crate) group_join: String,
    /// `$1` queue, `$2` group, `$3` member, `$4` outcome, `$5` succeeded, `$6` unfinished,
    /// `$7` record id, `$8` record, `$9` record kept.
    pub(crate) group_settle: String,
    /// `$1` queue, `$2` group, `$3` name, then the row: `$4` queue, `$5` priority, `$6` due,
    /// `$7` body, `$8` channel, `$9` message id.
    pub(crate) group_release: String,
    /// `$1` queue, `$2` group, `$3` name, `$4` released: one row changed when the mark did.
    pub(crate) group_mark: String,
    /// `$1` queue, `$2` group, `$3` the claim mark's prefix, `$4` the copy: appends the
    /// claim unless one with that prefix is there.
    pub(crate) group_claim: String,
    /// `$1` queue, `$2` group.
    pub(crate) group: String,
    /// `$1` queue, then the cursor: `$2` creation time, `$3` group id; `$4` limit. The last
    /// created first.
    pub(crate) list_groups: String,
    /// `$1` queue, `$2` group, `$3` members.
    pub(crate) group_outcomes: String,
}

/// The time the statement began, in Unix seconds: stable within a statement, so that a
/// condition on it can bound an index scan (one on [`NOW`], volatile, cannot).
const STATEMENT_TIME: &str = "extract(epoch FROM statement_timestamp())::float8";

/// The conditions of the rows of queue `$1` waiting, delayed and in flight. A claim whose
/// lease ran out is waiting (the next claim returns it to its queue): its row matches the
/// fourth condition, which the first three leave out.
const STATES: [&str; 4] = [
    "queue = $1 AND leased_until IS NULL AND due_at <= {STATEMENT_TIME}",
    "queue = $1 AND leased_until IS NULL AND due_at > {STATEMENT_TIME}",
    "queue = $1 AND leased_until >= {STATEMENT_TIME}",
    "queue = $1 AND leased_until < {STATEMENT_TIME}",
];

impl Sql {
    pub(crate) fn new(schema: &str) -> Self {
        let s = quoted(schema);
        let state = |i: usize| STATES[i].replace("{STATEMENT_TIME}", STATEMENT_TIME);
        let insert_row = format!(
            "INSERT INTO {s}.jobs (queue, priority, due_at, body, message_id) \
             VALUES ($1, $2, GREATEST($3, {NOW}), $4, $6)"
        );
        Sql {
            insert: format!("WITH j AS ({insert_row} RETURNING 1) SELECT pg_notify($5, $1) FROM j"),
            insert_batch: format!(
                "WITH j AS (INSERT INTO {s}.jobs (queue, priority, due_at, body, message_id) \
                 SELECT $1, $2, GREATEST(u.d, {NOW}), u.b, u.m \
                 FROM unnest($3::float8[], $4::bytea[], $6::text[]) WITH ORDINALITY AS u(d, b, m, n) \
                 ORDER BY u.n RETURNING 1) \
                 SELECT pg_notify($5, $1) FROM j LIMIT 1"
            ),
            insert_unique: format!(
                "WITH k AS (INSERT INTO {s}.unique_keys AS k (key, holder, held_until) \
                 VALUES ($7, $6, {NOW} + $8) \
                 ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, \
                 held_until = EXCLUDED.held_until WHERE k.held_until <= {NOW} RETURNING 1), \
                 j AS (INSERT INTO {s}.jobs (queue, priority, due_at, body, message_id) \
                 SELECT $1, $2, GREATEST($3, {NOW}), $4, $6 FROM k RETURNING 1) \
                 SELECT pg_notify($5, $1) FROM j"
            ),
            claim: format!(
                "SELECT job_id, job_rank, job_due, job_body FROM {s}.claim($1, $2, $3, $4, $5, $6) \
                 ORDER BY job_rank, job_due, job_id"
            ),
            ack_many: format!(
                "DELETE FROM {s}.jobs j USING unnest($1::int8[], $2::int8[]) AS u(id, lease) \
                 WHERE j.id = u.id AND j.lease = u.lease"
            ),
            nack: format!(
                "WITH n AS (UPDATE {s}.jobs SET leased_until = NULL, lease = NULL \
                 WHERE id = $1 AND lease = $2 RETURNING queue) \
                 SELECT pg_notify($3, queue) FROM n"
            ),
            nack_many: format!(
                "WITH n AS (UPDATE {s}.jobs j SET leased_until = NULL, lease = NULL \
                 FROM unnest($1::int8[], $2::int8[]) AS u(id, lease) \
                 WHERE j.id = u.id AND j.lease = u.lease RETURNING j.queue) \
                 SELECT pg_notify($3, q) FROM (SELECT DISTINCT queue AS q FROM n) d"
            ),
            extend: format!(
                "UPDATE {s}.jobs SET leased_until = {NOW} + $3 \
                 WHERE id = $1 AND lease = $2 AND leased_until >= {NOW}"
            ),
            postpone: format!(
                "UPDATE {s}.jobs SET due_at = $3, leased_until = NULL, lease = NULL \
                 WHERE id = $1 AND lease = $2"
            ),
            next_due: format!(
                "SELECT least(\
                 (SELECT min(due_at) FROM unnest($1::text[]) q, LATERAL (\
                   SELECT due_at FROM {s}.jobs WHERE queue = q AND leased_until IS NULL \
                   ORDER BY due_at LIMIT 1) w), \
                 (SELECT min(leased_until) FROM unnest($1::text[]) q, LATERAL (\
                   SELECT leased_until FROM {s}.jobs \
                   WHERE queue = q AND leased_until IS NOT NULL \
                   ORDER BY leased_until LIMIT 1) l)) - {NOW}"
            ),
            bury: format!("SELECT {s}.bury($1, $2, $3, $4, $5, $6, $7)"),
            stats: format!(
                "SELECT \
                 (SELECT count(*) FROM {s}.jobs WHERE {waiting}) \
                 + (SELECT count(*) FROM {s}.jobs WHERE {expired}), \
                 (SELECT count(*) FROM {s}.jobs WHERE {delayed}), \
                 (SELECT count(*) FROM {s}.jobs WHERE {in_flight}), \
                 (SELECT count(*) FROM {s}.dead_letters WHERE queue = $1), \
                 {STATEMENT_TIME} - least(\
                   (SELECT due_at FROM {s}.jobs WHERE {waiting} ORDER BY due_at LIMIT 1), \
                   (SELECT min(due_at) FROM {s}.jobs WHERE {expired}))",
                waiting = state(0),
                delayed = state(1),
                in_flight = state(2),
                expired = state(3),
            ),
            purge: [
                format!(
                    "DELETE FROM {s}.jobs WHERE ({}) OR ({})",
                    state(0),
                    state(3)
                ),
                format!("DELETE FROM {s}.jobs WHERE {}", state(1)),
                format!("DELETE FROM {s}.jobs WHERE {}", state(2)),
            ],
            purge_dead: format!("DELETE FROM {s}.dead_letters WHERE queue = $1"),
            peek: [
                format!(
                    "SELECT body FROM (\
                     (SELECT body, due_at, id FROM {s}.jobs WHERE {} \
                      ORDER BY due_at, id LIMIT $2) \
                     UNION ALL \
                     (SELECT body, due_at, id FROM {s}.jobs WHERE {} \
                      ORDER BY leased_until LIMIT $2)) p \
                     ORDER BY due_at, id LIMIT $2",
                    state(0),
                    state(3)
                ),
                format!(
                    "SELECT body FROM {s}.jobs WHERE {} ORDER BY due_at, id LIMIT $2",
                    state(1)
                ),
                format!(
                    "SELECT body FROM {s}.jobs WHERE {} ORDER BY id LIMIT $2",
                    state(2)
                ),
            ],
            peek_dead: format!(
                "SELECT body FROM {s}.dead_letters WHERE queue = $1 ORDER BY id LIMIT $2"
            ),
            page: [
                format!(
                    "SELECT body, due_at, id FROM (\
                     (SELECT body, due_at, id FROM {s}.jobs WHERE {} \
                      AND (due_at, id) > ($3::float8, $4::int8) ORDER BY due_at, id LIMIT $2) \
                     UNION ALL \
                     (SELECT body, due_at, id FROM {s}.jobs WHERE {} \
                      AND (due_at, id) > ($3::float8, $4::int8) ORDER BY due_at, id LIMIT $2)) p \
                     ORDER BY due_at, id LIMIT $2",
                    state(0),
                    state(3)
                ),
                format!(
                    "SELECT body, due_at, id FROM {s}.jobs WHERE {} \
                     AND (due_at, id) > ($3::float8, $4::int8) ORDER BY due_at, id LIMIT $2",
                    state(1)
                ),
                format!(
                    "SELECT body, due_at, id FROM {s}.jobs WHERE {} \
                     AND id > $4::int8 AND $3::float8 IS NOT NULL ORDER BY id LIMIT $2",
                    state(2)
                ),
            ],
            page_dead: format!(
                "SELECT body, 0::float8, id FROM {s}.dead_letters WHERE queue = $1 \
                 AND id > $4::int8 AND $3::float8 IS NOT NULL ORDER BY id LIMIT $2"
            ),
            counters_add: format!(
                "WITH gone AS (DELETE FROM {s}.counters WHERE ctid IN (SELECT ctid FROM \
                 {s}.counters WHERE queue = $1::text AND expires_at < $6::float8 AND bucket <> $2::text \
                 LIMIT 100)), \
                 up AS (INSERT INTO {s}.counters (queue, bucket, name, count, expires_at) \
                 SELECT $1::text, $2::text, u.n, u.c, $5::float8 \
                 FROM unnest($3::text[], $4::int8[]) AS u(n, c) \
                 ON CONFLICT (queue, bucket, name) DO UPDATE SET \
                 count = {s}.counters.count + excluded.count, \
                 expires_at = GREATEST({s}.counters.expires_at, excluded.expires_at) RETURNING 1) \
                 SELECT count(*) FROM up"
            ),
            counters_read: format!(
                "SELECT bucket, name, count FROM {s}.counters WHERE queue = $1 \
                 AND bucket = ANY($2::text[]) AND expires_at > $3"
            ),
            delete: format!(
                "WITH j AS (DELETE FROM {s}.jobs WHERE queue = $1 AND message_id = $2 \
                 AND (leased_until IS NULL OR leased_until < {STATEMENT_TIME}) RETURNING 1), \
                 d AS (DELETE FROM {s}.dead_letters WHERE queue = $1 \
                 AND (message_id = $2 OR id = $3) RETURNING 1) \
                 SELECT (SELECT count(*) FROM j) + (SELECT count(*) FROM d)"
            ),
            dead_letters: format!(
                "SELECT id, message_id, body, reason FROM {s}.dead_letters WHERE queue = $1 \
                 ORDER BY id LIMIT $2"
            ),
            unbury: format!(
                "WITH d AS (DELETE FROM {s}.dead_letters WHERE queue = $1 AND id = ANY ($3) \
                 RETURNING id), \
                 j AS (INSERT INTO {s}.jobs (queue, priority, due_at, body, message_id) \
                 SELECT $1, $2, {NOW}, u.b, u.m \
                 FROM unnest($3::int8[], $4::bytea[], $5::text[]) WITH ORDINALITY AS u(i, b, m, n) \
                 JOIN d ON d.id = u.i ORDER BY u.n RETURNING 1) \
                 SELECT count(*) FROM j"
            ),
            notify: "SELECT pg_notify($1, $2)".to_owned(),
            announce: format!(
                "INSERT INTO {s}.workers AS w (id, info, expires_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (id) DO UPDATE SET info = EXCLUDED.info, \
                 expires_at = EXCLUDED.expires_at"
            ),
            withdraw: format!("DELETE FROM {s}.workers WHERE id = $1"),
            workers: format!(
                "WITH gone AS (DELETE FROM {s}.workers WHERE expires_at < $1) \
                 SELECT info FROM {s}.workers WHERE expires_at >= $1"
            ),
            release: format!("DELETE FROM {s}.unique_keys WHERE key = $1 AND holder = $2"),
            sweep: format!(
                "WITH k AS (DELETE FROM {s}.unique_keys WHERE held_until < {NOW}), \
                 jr AS (DELETE FROM {s}.job_records WHERE expires_at < {NOW}), \
                 jg AS (DELETE FROM {s}.job_groups WHERE expires_at < {NOW}), \
                 l AS (DELETE FROM {s}.limit_slots WHERE held_until < {NOW}), \
                 r AS (DELETE FROM {s}.limit_starts WHERE counts_until < {NOW}), \
                 c AS (DELETE FROM {s}.cancellations WHERE requested_at < $1) \
                 SELECT 1"
            ),
            admit: format!("SELECT refused, wait_for FROM {s}.admit($1, $2, $3, $4, $5, $6)"),
            put_record: format!(
                "INSERT INTO {s}.job_records (queue, message_id, record, expires_at) \
                 VALUES ($1, $2, $3, {NOW} + $4) ON CONFLICT (queue, message_id) \
                 DO UPDATE SET record = EXCLUDED.record, expires_at = EXCLUDED.expires_at"
            ),
            get_record: format!(
                "SELECT record FROM {s}.job_records \
                 WHERE queue = $1 AND message_id = $2 AND expires_at > {NOW}"
            ),
            list_records: format!(
                "SELECT message_id, record, expires_at FROM {s}.job_records \
                 WHERE queue = $1 AND expires_at > {NOW} \
                 AND (expires_at < $2 OR (expires_at = $2 AND message_id < $3)) \
                 ORDER BY expires_at DESC, message_id DESC LIMIT $4"
            ),
            group_open: format!("SELECT {s}.group_open($1, $2, $3, $4, $5, $6)"),
            group_join: format!("SELECT {s}.group_join($1, $2, $3, $4)"),
            group_settle: format!(
                "SELECT total, succeeded, failed, counted \
                 FROM {s}.group_settle($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            ),
            group_release: format!("SELECT {s}.group_release($1, $2, $3, $4, $5, $6, $7, $8, $9)"),
            group_mark: format!(
                "UPDATE {s}.job_groups SET released = CASE WHEN $4 \
                 THEN array_append(released, $3) ELSE array_remove(released, $3) END \
                 WHERE queue = $1 AND group_id = $2 AND expires_at > {NOW} \
                 AND ($3 = ANY(released)) <> $4"
            ),
            group_claim: format!(
                "UPDATE {s}.job_groups SET released = array_append(released, $3 || $4) \
                 WHERE queue = $1 AND group_id = $2 AND expires_at > {NOW} \
                 AND NOT EXISTS (SELECT 1 FROM unnest(released) AS r(mark) \
                 WHERE starts_with(r.mark, $3))"
            ),
            group: format!(
                "SELECT spec, total, succeeded, failed, released, finished FROM {s}.job_groups \
                 WHERE queue = $1 AND group_id = $2 AND expires_at > {NOW}"
            ),
            list_groups: format!(
                "SELECT spec, total, succeeded, failed, released, finished, group_id, created \
                 FROM (SELECT *, (spec::jsonb ->> 'created')::float8 AS created \
                 FROM {s}.job_groups WHERE queue = $1) g \
                 WHERE expires_at > {NOW} AND (created < $2 OR (created = $2 AND group_id < $3)) \
                 ORDER BY created DESC, group_id DESC LIMIT $4"
            ),
            group_outcomes: format!(
                "SELECT u.member, m.outcome FROM unnest($3::text[]) AS u(member) \
                 LEFT JOIN {s}.job_group_members m \
                 ON m.queue = $1 AND m.group_id = $2 AND m.member = u.member"
            ),
            renew_slots: format!(
                "UPDATE {s}.limit_slots SET held_until = GREATEST(held_until, {NOW} + $3) \
                 WHERE holder = $1 AND bound = ANY($2) AND held_until > {NOW}"
            ),
            release_slots: format!(
                "DELETE FROM {s}.limit_slots WHERE holder = $1 AND bound = ANY($2)"
            ),
            slots_used: format!(
                "SELECT count(*) FROM {s}.limit_slots WHERE bound = $1 AND held_until > {NOW}"
            ),
            starts_used: format!(
                "SELECT count(*) FROM {s}.limit_starts WHERE bound = $1 AND started_at > {NOW} - $2"
            ),
            pause: format!(
                "INSERT INTO {s}.paused (queue, target) VALUES ($1, $2) ON CONFLICT DO NOTHING"
            ),
            resume: format!("DELETE FROM {s}.paused WHERE queue = $1 AND target = $2 RETURNING 1"),
            paused: format!("SELECT target FROM {s}.paused WHERE queue = $1"),
            cancel: format!(
                "INSERT INTO {s}.cancellations AS c (queue, message_id, requested_by, requested_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (queue, message_id) DO UPDATE \
                 SET requested_by = EXCLUDED.requested_by, requested_at = EXCLUDED.requested_at"
            ),
            cancellations: format!(
                "SELECT message_id, requested_by, requested_at FROM {s}.cancellations \
                 WHERE queue = $1 AND requested_at >= $2 ORDER BY requested_at LIMIT 1000"
            ),
        }
    }
}
