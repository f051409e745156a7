//! Job records and groups, per default queue: the tables `<schema>.job_records` (a message's
//! record by id, until it expires), `<schema>.job_groups` (a group's spec, counts and release
//! marks) and `<schema>.job_group_members` (each member's outcome, NULL while pending).
//! Settling and releasing are functions that lock the group's row, so a member is counted once
//! and a message is inserted once, in the transaction that marks it released.

use std::time::Duration;

use hermes_core::driver::{JobStore, UNFINISHED_GROUP_KEPT, async_trait, claim_mark, claimant_in};
use hermes_core::tracking::{
    GroupPage, GroupRequest, GroupSpec, GroupState, JobRecord, RecordPage, RecordRequest, Settled,
    Tally, listing_cursor, parse_listing_cursor,
};
use hermes_core::{DEFAULT_PRIORITY, Error, Message, Priority};

use crate::core::Core;

/// The group of a row of `spec, total, succeeded, failed, released, finished`.
fn group_of(row: &tokio_postgres::Row, group: &str) -> Result<GroupState, Error> {
    let Some(spec) = GroupSpec::decode(row.get::<_, &str>(0).as_bytes()) else {
        return Err(Error::Driver {
            driver: crate::NAME,
            message: format!("group {group} has a spec that cannot be read"),
            temporary: false,
            source: None,
        });
    };
    let mut released: Vec<String> = row.get(4);
    released.sort();
    Ok(GroupState::new(
        spec,
        Tally::new(count(row.get(1)), count(row.get(2)), count(row.get(3))),
        released,
        row.get(5),
    ))
}

/// A count read from the database (never negative there).
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Core {
    /// The scope of records and groups: the driver's default queue, as for uniqueness keys.
    fn tracking_scope(&self) -> Result<String, Error> {
        self.queues.get(DEFAULT_PRIORITY)
    }
}

#[async_trait]
impl JobStore for Core {
    async fn put(&self, record: &JobRecord, keep: Duration) -> Result<(), Error> {
        let scope = self.tracking_scope()?;
        let json = record.encode()?;
        let keep = keep.as_secs_f64();
        self.on_connection("storing a job record", |client| async move {
            let statement = client.prepare_cached(&self.sql.put_record).await?;
            client
                .execute(&statement, &[&scope, &record.id, &json, &keep])
                .await
                .map(drop)
        })
        .await
    }

    async fn get(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        let scope = self.tracking_scope()?;
        let row = self
            .on_connection("reading a job record", |client| async move {
                let statement = client.prepare_cached(&self.sql.get_record).await?;
                client.query_opt(&statement, &[&scope, &id]).await
            })
            .await?;
        // A record another program wrote wrongly reads as none.
        Ok(row.and_then(|row| JobRecord::decode(row.get::<_, &str>(0).as_bytes())))
    }

    async fn records(&self, request: &RecordRequest) -> Result<RecordPage, Error> {
        let scope = self.tracking_scope()?;
        let (expires, id) = match request.cursor.as_deref() {
            Some(cursor) => parse_listing_cursor(cursor).ok_or_else(|| {
                Error::InvalidMessage("not a cursor of PostgreSQL's records".to_owned())
            })?,
            None => (f64::INFINITY, ""),
        };
        let reads = request.reads();
        let limit = i64::try_from(reads + 1).unwrap_or(i64::MAX);
        let rows = self
            .on_connection("reading job records", |client| async move {
                let statement = client.prepare_cached(&self.sql.list_records).await?;
                client
                    .query(&statement, &[&scope, &expires, &id, &limit])
                    .await
            })
            .await?;
        let more = rows.len() > reads;
        let read = rows
            .iter()
            .take(reads)
            .map(|row| {
                let id: &str = row.get(0);
                let record: &str = row.get(1);
                let expires: f64 = row.get(2);
                // A record another program wrote wrongly is passed over.
                (
                    listing_cursor(expires, id),
                    JobRecord::decode(record.as_bytes()),
                )
            })
            .collect();
        Ok(request.page_of(read, more))
    }

    async fn open(
        &self,
        spec: &GroupSpec,
        members: &[String],
        keep: Duration,
    ) -> Result<(), Error> {
        let scope = self.tracking_scope()?;
        let json = spec.encode()?;
        let keep = keep.as_secs_f64();
        let unfinished = UNFINISHED_GROUP_KEPT.as_secs_f64();
        self.on_connection("opening a group", |client| async move {
            let statement = client.prepare_cached(&self.sql.group_open).await?;
            client
                .execute(
                    &statement,
                    &[&scope, &spec.id, &json, &members, &keep, &unfinished],
                )
                .await
                .map(drop)
        })
        .await
    }

    async fn join(&self, group: &str, members: &[String]) -> Result<(), Error> {
        let scope = self.tracking_scope()?;
        let unfinished = UNFINISHED_GROUP_KEPT.as_secs_f64();
        let row = self
            .on_connection("joining a group", |client| async move {
                let statement = client.prepare_cached(&self.sql.group_join).await?;
                client
                    .query_one(&statement, &[&scope, &group, &members, &unfinished])
                    .await
            })
            .await?;
        match row.get::<_, i64>(0) {
            -1 => Err(Error::Group(format!("there is no group {group}"))),
            -2 => Err(Error::Group(format!(
                "group {group} is finished: every member is done, nothing more can join"
            ))),
            _ => Ok(()),
        }
    }

    async fn settle(
        &self,
        group: &str,
        member: &str,
        outcome: &Settled,
        record: Option<(&JobRecord, Duration)>,
    ) -> Result<Option<(Tally, bool)>, Error> {
        let scope = self.tracking_scope()?;
        let json = outcome.encode()?;
        let succeeded = outcome.succeeded();
        let unfinished = UNFINISHED_GROUP_KEPT.as_secs_f64();
        let (record_id, record_json, record_keep) = match record {
            Some((record, keep)) => (
                Some(record.id.clone()),
                Some(record.encode()?),
                keep.as_secs_f64(),
            ),
            None => (None, None, 0.0),
        };
        let row = self
            .on_connection("settling a member of a group", |client| async move {
                let statement = client.prepare_cached(&self.sql.group_settle).await?;
                client
                    .query_opt(
                        &statement,
                        &[
                            &scope,
                            &group,
                            &member,
                            &json,
                            &succeeded,
                            &unfinished,
                            &record_id,
                            &record_json,
                            &record_keep,
                        ],
                    )
                    .await
            })
            .await?;
        Ok(row.map(|row| {
            let tally = Tally::new(count(row.get(0)), count(row.get(1)), count(row.get(2)));
            (tally, row.get::<_, bool>(3))
        }))
    }

    async fn release(
        &self,
        group: &str,
        name: &str,
        message: &Message,
        priority: Priority,
    ) -> Result<bool, Error> {
        let scope = self.tracking_scope()?;
        let row = self.encode(message, priority)?;
        let answer = self
            .on_connection("releasing a message of a group", |client| async move {
                let statement = client.prepare_cached(&self.sql.group_release).await?;
                let [queue, priority, due, body, channel, id] = row.params(&self.channel);
                client
                    .query_one(
                        &statement,
                        &[
                            &scope, &group, &name, queue, priority, due, body, channel, id,
                        ],
                    )
                    .await
            })
            .await?;
        match answer.get::<_, i32>(0) {
            1 => Ok(true),
            -1 => Err(Error::Group(format!("there is no group {group}"))),
            _ => Ok(false),
        }
    }

    async fn mark(&self, group: &str, name: &str, released: bool) -> Result<bool, Error> {
        let scope = self.tracking_scope()?;
        let changed = self
            .on_connection("marking a message of a group", |client| async move {
                let statement = client.prepare_cached(&self.sql.group_mark).await?;
                client
                    .execute(&statement, &[&scope, &group, &name, &released])
                    .await
            })
            .await?;
        Ok(changed == 1)
    }

    async fn claim_run(&self, group: &str, name: &str, copy: &str) -> Result<bool, Error> {
        let scope = self.tracking_scope()?;
        let prefix = claim_mark(name, "");
        let row = self
            .on_connection(
                "claiming the run of a message of a group",
                |client| async move {
                    // The row's lock orders claims: a second one sees the first and adds nothing.
                    let statement = client.prepare_cached(&self.sql.group_claim).await?;
                    client
                        .execute(&statement, &[&scope, &group, &prefix, &copy])
                        .await?;
                    let statement = client.prepare_cached(&self.sql.group).await?;
                    client.query_opt(&statement, &[&scope, &group]).await
                },
            )
            .await?;
        let Some(row) = row else {
            return Ok(true);
        };
        let released: Vec<String> = row.get(4);
        Ok(claimant_in(&released, name).is_none_or(|claimant| claimant == copy))
    }

    async fn group(&self, group: &str) -> Result<Option<GroupState>, Error> {
        let scope = self.tracking_scope()?;
        let row = self
            .on_connection("reading a group", |client| async move {
                let statement = client.prepare_cached(&self.sql.group).await?;
                client.query_opt(&statement, &[&scope, &group]).await
            })
            .await?;
        row.map(|row| group_of(&row, group)).transpose()
    }

    async fn groups(&self, request: &GroupRequest) -> Result<GroupPage, Error> {
        let scope = self.tracking_scope()?;
        let (created, id) = match request.cursor.as_deref() {
            Some(cursor) => parse_listing_cursor(cursor).ok_or_else(|| {
                Error::InvalidMessage("not a cursor of PostgreSQL's groups".to_owned())
            })?,
            None => (f64::INFINITY, ""),
        };
        let limit = request.limit.max(1);
        let asked = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let rows = self
            .on_connection("reading groups", |client| async move {
                let statement = client.prepare_cached(&self.sql.list_groups).await?;
                client
                    .query(&statement, &[&scope, &created, &id, &asked])
                    .await
            })
            .await?;
        let more = rows.len() > limit;
        let mut groups = Vec::with_capacity(limit.min(rows.len()));
        let mut next = None;
        for row in rows.iter().take(limit) {
            let id: &str = row.get(6);
            let created: f64 = row.get(7);
            if more {
                next = Some(listing_cursor(created, id));
            }
            // A group whose spec another program wrote wrongly is passed over.
            if let Ok(group) = group_of(row, id) {
                groups.push(group);
            }
        }
        Ok(GroupPage::new(groups, next))
    }

    async fn outcomes(
        &self,
        group: &str,
        members: &[String],
    ) -> Result<Vec<Option<Settled>>, Error> {
        let scope = self.tracking_scope()?;
        let rows = self
            .on_connection("reading the outcomes of a group", |client| async move {
                let statement = client.prepare_cached(&self.sql.group_outcomes).await?;
                client.query(&statement, &[&scope, &group, &members]).await
            })
            .await?;
        let found: std::collections::HashMap<String, Option<Settled>> = rows
            .iter()
            .map(|row| {
                let outcome: Option<&str> = row.get(1);
                (
                    row.get::<_, String>(0),
                    outcome.and_then(|o| Settled::decode(o.as_bytes())),
                )
            })
            .collect();
        Ok(members
            .iter()
            .map(|m| found.get(m).cloned().flatten())
            .collect())
    }
}
