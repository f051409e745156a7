//! The waiting messages a page at a time: the due scheduled ones and those claimed ahead first,
//! then the queue's set in `SSCAN` steps, so a page never reads the whole set.

use hermes_core::inspect::{FILTER_READS, Page, PageRequest};
use hermes_core::{Error, Message, Priority};

use crate::client::Reply;
use crate::core::Core;

/// Where a page of waiting messages starts: the `SSCAN` cursor, and how many of the members
/// that step returns the pages before took.
struct Position {
    scan: Vec<u8>,
    skip: usize,
}

impl Position {
    fn parse(cursor: &str) -> Result<Position, Error> {
        let (scan, skip) = cursor
            .strip_prefix('s')
            .and_then(|rest| rest.split_once('/'))
            .ok_or(Error::InvalidCursor)?;
        if scan.is_empty() || !scan.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::InvalidCursor);
        }
        Ok(Position {
            scan: scan.as_bytes().to_vec(),
            skip: skip.parse().map_err(|_| Error::InvalidCursor)?,
        })
    }

    fn write(&self) -> String {
        format!("s{}/{}", String::from_utf8_lossy(&self.scan), self.skip)
    }
}

impl Core {
    /// A page of the waiting messages of the queue of `priority`, in no set order (the queue
    /// is a Redis set). The first page opens with the due scheduled messages and those this
    /// process claimed ahead; the cursor is a step of `SSCAN` over the set, and how many of
    /// that step's members were taken. Walking the pages of a set that changes meanwhile may
    /// meet a message twice or miss one, as `SSCAN` itself may.
    pub(crate) async fn waiting_page(
        &self,
        priority: Priority,
        request: &PageRequest,
    ) -> Result<Page, Error> {
        let set = self.sets.get(priority)?;
        let mut messages: Vec<Message> = Vec::new();
        let mut position = match &request.cursor {
            Some(cursor) => Position::parse(cursor)?,
            None => {
                let mut first = self
                    .scheduled(priority, "due", request.limit, false)
                    .await?;
                first.extend(self.ahead_bodies(&set));
                messages.extend(
                    self.decoded(&first)
                        .into_iter()
                        .filter(|m| request.selects(m))
                        .take(request.limit),
                );
                Position {
                    scan: b"0".to_vec(),
                    skip: 0,
                }
            }
        };
        let budget = FILTER_READS.max(request.limit);
        let count = request.limit.clamp(10, 1_000).to_string();
        let mut looked = 0;
        while messages.len() < request.limit && looked < budget {
            let reply = self
                .client
                .command(
                    "SSCAN",
                    &[set.as_bytes(), &position.scan, b"COUNT", count.as_bytes()],
                )
                .await?;
            let mut parts = reply.into_items().into_iter();
            let (Some(next), Some(Reply::Array(found))) = (parts.next(), parts.next()) else {
                return Err(self.reply_error("SSCAN"));
            };
            let found: Vec<Vec<u8>> = found.into_iter().filter_map(Reply::into_bytes).collect();
            let mut taken = position.skip;
            for body in found.iter().skip(position.skip) {
                if messages.len() == request.limit || looked == budget {
                    break;
                }
                taken += 1;
                looked += 1;
                if let Ok(message) = self.serializer.deserialize(body)
                    && request.selects(&message)
                {
                    messages.push(message);
                }
            }
            if taken < found.len() {
                position.skip = taken;
                return Ok(Page::new(messages, Some(position.write())));
            }
            let next = next.into_bytes().unwrap_or_default();
            if next.is_empty() || next == b"0" {
                return Ok(Page::new(messages, None));
            }
            position = Position {
                scan: next,
                skip: 0,
            };
        }
        Ok(Page::new(messages, Some(position.write())))
    }
}
