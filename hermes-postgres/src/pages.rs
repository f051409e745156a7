//! A queue's messages a page at a time, by keyset: a page starts after the row the page before
//! ended on, in the order the state is read (waiting and delayed rows by due time then row id,
//! rows in flight and dead letters by row id), so a page reads only its own rows.

use hermes_core::inspect::{FILTER_READS, Page, PageRequest, QueueState};
use hermes_core::{Error, Priority};

use crate::core::Core;

/// Where a page starts: after the row of this due time and id. The due time is written as its
/// bits, so it reads back exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
struct After {
    due_at: f64,
    id: i64,
}

impl After {
    const START: After = After {
        due_at: f64::NEG_INFINITY,
        id: 0,
    };

    fn parse(cursor: Option<&str>) -> Result<After, Error> {
        let Some(cursor) = cursor else {
            return Ok(After::START);
        };
        let (bits, id) = cursor.split_once('/').ok_or(Error::InvalidCursor)?;
        Ok(After {
            due_at: f64::from_bits(
                u64::from_str_radix(bits, 16).map_err(|_| Error::InvalidCursor)?,
            ),
            id: id.parse().map_err(|_| Error::InvalidCursor)?,
        })
    }

    fn write(self) -> String {
        format!("{:x}/{}", self.due_at.to_bits(), self.id)
    }
}

impl Core {
    /// A page of the queue of `priority` in `request.state`: rows read in steps of the page's
    /// size (of [`FILTER_READS`] when filtering by type) until the page is full, the rows run
    /// out, or [`FILTER_READS`] rows were looked at.
    pub(crate) async fn read_page(
        &self,
        priority: Priority,
        request: &PageRequest,
    ) -> Result<Page, Error> {
        let queue = self.queues.get(priority)?;
        let sql = match request.state {
            QueueState::Waiting => &self.sql.page[0],
            QueueState::Delayed => &self.sql.page[1],
            QueueState::InFlight => &self.sql.page[2],
            QueueState::Dead => &self.sql.page_dead,
            _ => {
                return Err(Error::Unsupported {
                    driver: crate::NAME,
                    what: "a queue state it does not know",
                });
            }
        };
        self.settle_before_reading(Some(priority)).await?;
        let mut after = After::parse(request.cursor.as_deref())?;
        let step = if request.message_type.is_some() {
            FILTER_READS.max(request.limit)
        } else {
            request.limit
        };
        let budget = FILTER_READS.max(request.limit);
        let mut messages = Vec::new();
        let mut looked = 0;
        while messages.len() < request.limit && looked < budget {
            let want = step.min(budget - looked);
            // One row more than wanted tells whether another page follows.
            let limit = i64::try_from(want + 1).unwrap_or(i64::MAX);
            let (queue, due_at, id) = (&queue, after.due_at, after.id);
            let rows = self
                .on_connection("a page", |client| async move {
                    let statement = client.prepare_cached(sql).await?;
                    client
                        .query(&statement, &[queue, &limit, &due_at, &id])
                        .await
                })
                .await?;
            let more = rows.len() > want;
            for row in rows.iter().take(want) {
                if messages.len() == request.limit {
                    return Ok(Page::new(messages, Some(after.write())));
                }
                looked += 1;
                after = After {
                    due_at: row.get(1),
                    id: row.get(2),
                };
                if let Ok(message) = self.serializer.deserialize(row.get(0))
                    && request.selects(&message)
                {
                    messages.push(message);
                }
            }
            if !more {
                return Ok(Page::new(messages, None));
            }
        }
        Ok(Page::new(messages, Some(after.write())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_exactly_and_refuses_garbage() {
        let after = After {
            due_at: 1_765_000_000.123_456_7,
            id: 42,
        };
        assert_eq!(After::parse(Some(&after.write())).unwrap(), after);
        assert_eq!(After::parse(None).unwrap(), After::START);
        for bad in ["", "x/1", "1", "ff/x", "ff/1/2"] {
            assert!(
                matches!(After::parse(Some(bad)), Err(Error::InvalidCursor)),
                "{bad}"
            );
        }
    }
}
