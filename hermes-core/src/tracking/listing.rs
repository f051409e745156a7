//! Reading the kept job records a page at a time: what
//! [`JobStore::records`](crate::driver::JobStore::records) is asked for and answers.

use super::{GroupState, JobRecord, JobState};
use crate::Priority;
use crate::paging::FILTER_READS;

/// Which job records [`JobStore::records`](crate::driver::JobStore::records) reads: up to
/// `limit` of them, from where an earlier page ended, of some states, one priority and one
/// type, or of all.
///
/// ```
/// use hermes_core::tracking::{JobState, RecordRequest};
///
/// let succeeded = RecordRequest::new(50).in_state(JobState::Succeeded).of_type("mail");
/// assert_eq!(succeeded.cursor, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordRequest {
    /// At most this many records.
    pub limit: usize,
    /// Where the page starts: the [`RecordPage::next`] of the page before, `None` for the
    /// first.
    pub cursor: Option<String>,
    /// Only records in one of these states; every state when empty.
    pub states: Vec<JobState>,
    /// Only records of jobs of this priority.
    pub priority: Option<Priority>,
    /// Only records of jobs of this type.
    pub message_type: Option<String>,
}

impl RecordRequest {
    /// The first page of up to `limit` records, of every state, priority and type.
    pub fn new(limit: usize) -> Self {
        RecordRequest {
            limit,
            cursor: None,
            states: Vec::new(),
            priority: None,
            message_type: None,
        }
    }

    /// The page starting at `cursor`, a [`RecordPage::next`] the same backend returned.
    #[must_use]
    pub fn after(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }

    /// Adds `state` to the states read (only those then).
    #[must_use]
    pub fn in_state(mut self, state: JobState) -> Self {
        if !self.states.contains(&state) {
            self.states.push(state);
        }
        self
    }

    /// Only records of jobs of `priority`.
    #[must_use]
    pub fn of_priority(mut self, priority: Priority) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Only records of jobs of `message_type`.
    #[must_use]
    pub fn of_type(mut self, message_type: impl Into<String>) -> Self {
        self.message_type = Some(message_type.into());
        self
    }

    /// Whether `record` passes the filters.
    pub fn selects(&self, record: &JobRecord) -> bool {
        (self.states.is_empty() || self.states.contains(&record.state))
            && self.priority.is_none_or(|p| record.priority == p)
            && self
                .message_type
                .as_deref()
                .is_none_or(|t| record.message_type == t)
    }

    /// How many records a backend reads for this page, in its order: the limit without
    /// filters, else up to [`FILTER_READS`] (the page then holds those that pass, and its
    /// cursor goes on from the last read).
    pub fn reads(&self) -> usize {
        let limit = self.limit.max(1);
        if self.states.is_empty() && self.priority.is_none() && self.message_type.is_none() {
            limit
        } else {
            FILTER_READS.max(limit)
        }
    }

    /// The page made of `read`, what a backend read in its order after the cursor (at most
    /// [`reads`](Self::reads) entries), each with the cursor that goes on after it and its
    /// record (`None` for one that was not a record: expired meanwhile, or written by another
    /// program); `more` says whether the backend holds records after the last one read.
    pub fn page_of(&self, read: Vec<(String, Option<JobRecord>)>, more: bool) -> RecordPage {
        let limit = self.limit.max(1);
        let count = read.len();
        let mut records = Vec::new();
        let mut next = None;
        for (i, (cursor, record)) in read.into_iter().enumerate() {
            let last = i + 1 == count;
            if let Some(record) = record.filter(|r| self.selects(r)) {
                records.push(record);
            }
            if records.len() >= limit || last {
                if !last || more {
                    next = Some(cursor);
                }
                break;
            }
        }
        RecordPage { records, next }
    }
}

/// One page of job records, and where the next one starts.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RecordPage {
    /// The records, those kept longest first.
    pub records: Vec<JobRecord>,
    /// The cursor of the next page; `None` when this page is the last.
    pub next: Option<String>,
}

impl RecordPage {
    /// A page of `records` followed by the one at `next`.
    pub fn new(records: Vec<JobRecord>, next: Option<String>) -> Self {
        RecordPage { records, next }
    }
}

/// Which batches and workflows [`JobStore::groups`](crate::driver::JobStore::groups) reads:
/// up to `limit` of them, from where an earlier page ended.
///
/// ```
/// use hermes_core::tracking::GroupRequest;
///
/// let first = GroupRequest::new(20);
/// assert_eq!(first.cursor, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupRequest {
    /// At most this many groups.
    pub limit: usize,
    /// Where the page starts: the [`GroupPage::next`] of the page before, `None` for the
    /// first.
    pub cursor: Option<String>,
}

impl GroupRequest {
    /// The first page of up to `limit` groups.
    pub fn new(limit: usize) -> Self {
        GroupRequest {
            limit,
            cursor: None,
        }
    }

    /// The page starting at `cursor`, a [`GroupPage::next`] the same backend returned.
    #[must_use]
    pub fn after(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }
}

/// One page of batches and workflows, and where the next one starts.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct GroupPage {
    /// The groups, the last created first.
    pub groups: Vec<GroupState>,
    /// The cursor of the next page; `None` when this page is the last.
    pub next: Option<String>,
}

impl GroupPage {
    /// A page of `groups` followed by the one at `next`.
    pub fn new(groups: Vec<GroupState>, next: Option<String>) -> Self {
        GroupPage { groups, next }
    }

    /// The page of up to `limit` of `groups`, sorted here (the last created first, then by
    /// id, last first) and left to those after `cursor` (a [`listing_cursor`] of a creation
    /// time and an id): for a backend that reads every group it keeps.
    ///
    /// # Errors
    /// [`Error::InvalidMessage`](crate::Error::InvalidMessage) for a cursor of another kind.
    pub fn of_all(
        mut groups: Vec<GroupState>,
        request: &GroupRequest,
    ) -> Result<GroupPage, crate::Error> {
        let cursor = match request.cursor.as_deref() {
            Some(cursor) => Some(parse_listing_cursor(cursor).ok_or_else(|| {
                crate::Error::InvalidMessage("not a cursor of this backend's groups".to_owned())
            })?),
            None => None,
        };
        groups.retain(|g| after_listing_cursor(cursor, g.spec.created, &g.spec.id));
        groups.sort_by(|a, b| {
            b.spec
                .created
                .total_cmp(&a.spec.created)
                .then_with(|| b.spec.id.cmp(&a.spec.id))
        });
        let limit = request.limit.max(1);
        let next = (groups.len() > limit)
            .then(|| listing_cursor(groups[limit - 1].spec.created, &groups[limit - 1].spec.id));
        groups.truncate(limit);
        Ok(GroupPage { groups, next })
    }
}

/// The cursor after an entry of a listing ordered by a time, `at` (Unix seconds, or any
/// number a backend orders by), latest first, then by `key`, last first: for records, when
/// each expires and its id or the name it is kept under; for groups, when each was created
/// and its id.
pub fn listing_cursor(at: f64, key: &str) -> String {
    format!("{at}/{key}")
}

/// The time and key of a cursor [`listing_cursor`] made; `None` for anything else.
pub fn parse_listing_cursor(cursor: &str) -> Option<(f64, &str)> {
    let (at, key) = cursor.split_once('/')?;
    let at: f64 = at.parse().ok()?;
    at.is_finite().then_some((at, key))
}

/// Whether an entry at `at` under `key` comes after `cursor` in the order
/// [`listing_cursor`] describes (every entry does without a cursor).
pub fn after_listing_cursor(cursor: Option<(f64, &str)>, at: f64, key: &str) -> bool {
    cursor.is_none_or(|(c_at, c_key)| at < c_at || (at == c_at && key < c_key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, state: JobState) -> JobRecord {
        JobRecord::new(id, "t", 100, state)
    }

    #[test]
    fn a_page_stops_at_its_limit_and_goes_on_after_the_last_taken() {
        let read: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|id| (format!("c-{id}"), Some(record(id, JobState::Succeeded))))
            .collect();
        let page = RecordRequest::new(2).page_of(read.clone(), false);
        assert_eq!(page.records.len(), 2);
        assert_eq!(page.next.as_deref(), Some("c-b"));
        let all = RecordRequest::new(3).page_of(read.clone(), false);
        assert_eq!((all.records.len(), all.next), (3, None));
        let more = RecordRequest::new(3).page_of(read, true);
        assert_eq!(more.next.as_deref(), Some("c-c"));
    }

    #[test]
    fn filters_skip_records_and_the_cursor_follows_what_was_read() {
        let read = vec![
            ("1".to_owned(), Some(record("a", JobState::Dead))),
            ("2".to_owned(), Some(record("b", JobState::Succeeded))),
            ("3".to_owned(), None),
        ];
        let request = RecordRequest::new(5).in_state(JobState::Succeeded);
        assert!(request.reads() >= FILTER_READS);
        let page = request.page_of(read.clone(), true);
        assert_eq!(page.records.len(), 1);
        assert_eq!(page.next.as_deref(), Some("3"));
        assert!(request.page_of(read, false).next.is_none());
    }

    #[test]
    fn cursors_round_trip_and_order_latest_first() {
        let cursor = listing_cursor(1700000000.25, "ab/c");
        let parsed = parse_listing_cursor(&cursor).unwrap();
        assert_eq!(parsed, (1700000000.25, "ab/c"));
        assert!(after_listing_cursor(Some(parsed), 1700000000.0, "z"));
        assert!(after_listing_cursor(Some(parsed), 1700000000.25, "ab"));
        assert!(!after_listing_cursor(Some(parsed), 1700000000.25, "ab/c"));
        assert!(!after_listing_cursor(Some(parsed), 1700000001.0, "a"));
        assert!(parse_listing_cursor("nonsense").is_none());
    }
}
