//! Job records and groups, in the queue's hash slot: a record is the string
//! `<default set>_job:<id>` (its JSON, expiring with its retention); a group is the hash
//! `<default set>_group:<id>` (its spec, counts, release marks) beside the hash
//! `<default set>_group:<id>:members` (member → its outcome, empty while pending); the sorted set
//! `<key>_records` lists the records' keys by when each expires, and `<key>_groups` the groups'
//! hashes by when each was created (both negated: the latest first). Settling and
//! releasing are scripts, so each is one atomic step.

use std::time::Duration;

use hermes_core::driver::{JobStore, Settle, UNFINISHED_GROUP_KEPT, async_trait};
use hermes_core::time::unix_now;
use hermes_core::tracking::{
    GroupPage, GroupRequest, GroupSpec, GroupState, JobRecord, RecordPage, RecordRequest, Settled,
    Tally, listing_cursor, parse_listing_cursor,
};
use hermes_core::{Error, Message, Priority};

use crate::client::Write;
use crate::core::Core;
use crate::scripts::Script;
use crate::unique::Placed;

/// A duration in whole milliseconds, at least one, as Redis takes it.
fn millis(duration: Duration) -> String {
    duration.as_millis().clamp(1, i64::MAX as u128).to_string()
}

impl Core {
    fn record_key(&self, id: &str) -> String {
        format!("{}_job:{id}", self.keys.default_set)
    }

    fn group_keys(&self, id: &str) -> (String, String) {
        let group = format!("{}_group:{id}", self.keys.default_set);
        let members = format!("{group}:members");
        (group, members)
    }
}

#[async_trait]
impl JobStore for Core {
    async fn put(&self, record: &JobRecord, keep: Duration) -> Result<(), Error> {
        let key = self.record_key(&record.id);
        let json = record.encode()?;
        let keep = millis(keep);
        self.client
            .eval(
                Script::RecordPut,
                &[&key, &self.keys.records],
                &[json.as_bytes(), keep.as_bytes()],
            )
            .await?;
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        let key = self.record_key(id);
        let reply = self.client.command("GET", &[key.as_bytes()]).await?;
        // A record another program wrote wrongly reads as none.
        Ok(reply.into_bytes().and_then(|b| JobRecord::decode(&b)))
    }

    async fn records(&self, request: &RecordRequest) -> Result<RecordPage, Error> {
        let (expires, key) = match request.cursor.as_deref() {
            Some(cursor) => {
                let (expires, key) = parse_listing_cursor(cursor).ok_or_else(|| {
                    Error::InvalidMessage("not a cursor of Redis's records".to_owned())
                })?;
                (expires.to_string(), key)
            }
            None => (String::new(), ""),
        };
        let reads = request.reads().to_string();
        let reply = self
            .client
            .eval(
                Script::RecordPage,
                &[&self.keys.records],
                &[expires.as_bytes(), key.as_bytes(), reads.as_bytes()],
            )
            .await?;
        let mut items = reply.into_items().into_iter();
        let mut read = Vec::new();
        let mut more = false;
        while let Some(key) = items.next() {
            let key = String::from_utf8_lossy(&key.into_bytes().unwrap_or_default()).into_owned();
            let (Some(expires), Some(json)) = (items.next(), items.next()) else {
                // The key after the last one read: more follow.
                more = true;
                break;
            };
            let expires = expires
                .into_bytes()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|text| text.parse::<f64>().ok())
                .ok_or_else(|| self.reply_error("reading job records"))?;
            // A record another program wrote wrongly, or one expired since, is passed over.
            let record = json.into_bytes().and_then(|b| JobRecord::decode(&b));
            read.push((listing_cursor(expires, &key), record));
        }
        Ok(request.page_of(read, more))
    }

    async fn open(
        &self,
        spec: &GroupSpec,
        members: &[String],
        keep: Duration,
    ) -> Result<(), Error> {
        let (group, member_key) = self.group_keys(&spec.id);
        let created = ((spec.created * 1000.0) as i64).to_string();
        let spec = spec.encode()?;
        let keep = millis(keep);
        let unfinished = millis(UNFINISHED_GROUP_KEPT);
        let mut args: Vec<&[u8]> = vec![
            spec.as_bytes(),
            keep.as_bytes(),
            unfinished.as_bytes(),
            created.as_bytes(),
        ];
        args.extend(members.iter().map(|m| m.as_bytes()));
        self.client
            .eval(
                Script::GroupOpen,
                &[&group, &member_key, &self.keys.groups],
                &args,
            )
            .await?;
        Ok(())
    }

    async fn join(&self, group: &str, members: &[String]) -> Result<(), Error> {
        let (key, member_key) = self.group_keys(group);
        let unfinished = millis(UNFINISHED_GROUP_KEPT);
        let mut args: Vec<&[u8]> = vec![unfinished.as_bytes()];
        args.extend(members.iter().map(|m| m.as_bytes()));
        let reply = self
            .client
            .eval(Script::GroupJoin, &[&key, &member_key], &args)
            .await?;
        match reply.as_int() {
            Some(-1) => Err(Error::Group(format!("there is no group {group}"))),
            Some(-2) => Err(Error::Group(format!(
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
        let mut answers = self
            .settle_many(&[Settle::new(group, member, outcome, record)])
            .await?;
        Ok(answers.pop().flatten())
    }

    async fn settle_many(
        &self,
        settles: &[Settle<'_>],
    ) -> Result<Vec<Option<(Tally, bool)>>, Error> {
        if settles.is_empty() {
            return Ok(Vec::new());
        }
        let mut keys = Vec::with_capacity(settles.len() * 3);
        let mut values: Vec<Vec<u8>> = Vec::with_capacity(settles.len() * 5 + 1);
        values.push(unix_now().to_string().into_bytes());
        for settle in settles {
            let (group, members) = self.group_keys(settle.group);
            let (record_key, record, keep) = match settle.record {
                Some((record, keep)) => (
                    self.record_key(&record.id),
                    record.encode()?.into_bytes(),
                    millis(keep).into_bytes(),
                ),
                None => (group.clone(), Vec::new(), Vec::new()),
            };
            keys.extend([group, members, record_key]);
            values.extend([
                settle.member.as_bytes().to_vec(),
                settle.outcome.encode()?.into_bytes(),
                if settle.outcome.succeeded() {
                    b"1".to_vec()
                } else {
                    b"0".to_vec()
                },
                record,
                keep,
            ]);
        }
        keys.push(self.keys.records.clone());
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let args: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let reply = self.client.eval(Script::GroupSettle, &keys, &args).await?;
        let numbers: Vec<i64> = reply
            .into_items()
            .iter()
            .map(|n| n.as_int().unwrap_or(0))
            .collect();
        if numbers.len() != settles.len() * 4 {
            return Err(self.reply_error("settling members of groups"));
        }
        Ok(numbers
            .chunks(4)
            .map(|n| {
                let count = |i: usize| u64::try_from(n[i]).unwrap_or(0);
                (n[0] >= 0).then(|| (Tally::new(count(0), count(1), count(2)), n[3] == 1))
            })
            .collect())
    }

    async fn release(
        &self,
        group: &str,
        name: &str,
        message: &Message,
        priority: Priority,
    ) -> Result<bool, Error> {
        let Placed {
            set,
            body,
            due,
            priority: priority_arg,
        } = self.placed(message, priority)?;
        let (key, _) = self.group_keys(group);
        let carried = self.carry();
        let keys = self.placing_keys(&key, &set, carried.is_some());
        let reply = self
            .emit_write(Write::Script(
                Script::GroupRelease,
                &keys,
                &[
                    name.as_bytes(),
                    &body,
                    due.as_bytes(),
                    priority_arg.as_bytes(),
                ],
            ))
            .await?;
        match reply.as_int() {
            Some(1) => {
                self.woken(carried, None);
                Ok(true)
            }
            Some(-1) => Err(Error::Group(format!("there is no group {group}"))),
            _ => {
                if let Some(carried) = carried {
                    carried.unused();
                }
                Ok(false)
            }
        }
    }

    async fn mark(&self, group: &str, name: &str, released: bool) -> Result<bool, Error> {
        let (key, _) = self.group_keys(group);
        let flag: &[u8] = if released { b"1" } else { b"0" };
        let reply = self
            .client
            .eval(Script::GroupMark, &[&key], &[name.as_bytes(), flag])
            .await?;
        Ok(reply.as_int() == Some(1))
    }

    async fn claim_run(&self, group: &str, name: &str, copy: &str) -> Result<bool, Error> {
        let (key, _) = self.group_keys(group);
        let reply = self
            .client
            .eval(
                Script::GroupClaim,
                &[&key],
                &[name.as_bytes(), copy.as_bytes()],
            )
            .await?;
        Ok(reply.as_int() == Some(1))
    }

    /// Ties (groups created in the same millisecond) come in the order of their keys.
    async fn groups(&self, request: &GroupRequest) -> Result<GroupPage, Error> {
        let (score, key) = match request.cursor.as_deref() {
            Some(cursor) => {
                let (score, key) = parse_listing_cursor(cursor).ok_or_else(|| {
                    Error::InvalidMessage("not a cursor of Redis's groups".to_owned())
                })?;
                (score.to_string(), key)
            }
            None => (String::new(), ""),
        };
        let limit = request.limit.max(1);
        let asked = limit.to_string();
        let reply = self
            .client
            .eval(
                Script::GroupPage,
                &[&self.keys.groups],
                &[score.as_bytes(), key.as_bytes(), asked.as_bytes()],
            )
            .await?;
        let prefix = self.group_keys("").0;
        let mut items = reply.into_items().into_iter();
        let mut groups = Vec::new();
        let mut last = None;
        let mut more = false;
        while let Some(key) = items.next() {
            let key = String::from_utf8_lossy(&key.into_bytes().unwrap_or_default()).into_owned();
            let Some(score) = items.next() else {
                more = true;
                break;
            };
            let score = score
                .into_bytes()
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|text| text.parse::<f64>().ok())
                .ok_or_else(|| self.reply_error("reading groups"))?;
            last = Some(listing_cursor(score, &key));
            let Some(id) = key.strip_prefix(&prefix) else {
                continue;
            };
            match self.group(id).await {
                Ok(Some(found)) => groups.push(found),
                // Expired: no longer listed.
                Ok(None) => {
                    self.client
                        .command("ZREM", &[self.keys.groups.as_bytes(), key.as_bytes()])
                        .await?;
                }
                // A group whose spec another program wrote wrongly is passed over.
                Err(_) => {}
            }
        }
        Ok(GroupPage::new(groups, last.filter(|_| more)))
    }

    async fn group(&self, group: &str) -> Result<Option<GroupState>, Error> {
        let (key, _) = self.group_keys(group);
        let reply = self.client.command("HGETALL", &[key.as_bytes()]).await?;
        let items = reply.into_items();
        if items.is_empty() {
            return Ok(None);
        }
        let mut spec = None;
        let (mut total, mut succeeded, mut failed) = (0, 0, 0);
        let mut finished = None;
        let mut released = Vec::new();
        let mut fields = items.into_iter();
        while let (Some(field), Some(value)) = (fields.next(), fields.next()) {
            let count = value.count();
            let (Some(field), Some(value)) = (field.into_bytes(), value.into_bytes()) else {
                continue;
            };
            match &field[..] {
                b"spec" => spec = GroupSpec::decode(&value),
                b"total" => total = count,
                b"succeeded" => succeeded = count,
                b"failed" => failed = count,
                b"finished" => {
                    finished = std::str::from_utf8(&value)
                        .ok()
                        .and_then(|v| v.parse().ok());
                }
                name => {
                    if let Some(name) = name.strip_prefix(b"released:") {
                        released.push(String::from_utf8_lossy(name).into_owned());
                    }
                }
            }
        }
        let Some(spec) = spec else {
            return Err(self.reply_error(&format!("group {group} (its spec is not readable)")));
        };
        released.sort();
        Ok(Some(GroupState::new(
            spec,
            Tally::new(total, succeeded, failed),
            released,
            finished,
        )))
    }

    async fn outcomes(
        &self,
        group: &str,
        members: &[String],
    ) -> Result<Vec<Option<Settled>>, Error> {
        if members.is_empty() {
            return Ok(Vec::new());
        }
        let (_, member_key) = self.group_keys(group);
        let mut args: Vec<&[u8]> = vec![member_key.as_bytes()];
        args.extend(members.iter().map(|m| m.as_bytes()));
        let reply = self.client.command("HMGET", &args).await?;
        let mut outcomes: Vec<Option<Settled>> = reply
            .into_items()
            .into_iter()
            .map(|item| item.into_bytes().and_then(|b| Settled::decode(&b)))
            .collect();
        outcomes.resize(members.len(), None);
        Ok(outcomes)
    }
}
