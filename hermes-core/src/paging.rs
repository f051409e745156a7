//! Reading a queue's messages a page at a time: what [`Browse::page`] is asked for and answers.
//!
//! [`Browse::page`]: crate::driver::Browse::page

use crate::driver::Browse;
use crate::inspect::QueueState;
use crate::{Error, Message, Priority};

/// How many messages a page with a type filter reads at most, when the backend reads messages
/// to filter them: the page then holds fewer than asked, and its cursor goes on from there.
pub const FILTER_READS: usize = 1_000;

/// Which messages [`Browse::page`](crate::driver::Browse::page) reads: up to `limit` messages of
/// one state of a queue, from where an earlier page ended, of one type or every type.
///
/// ```
/// use hermes_core::inspect::{PageRequest, QueueState};
///
/// let first = PageRequest::new(QueueState::Waiting, 50).of_type("report.export");
/// assert_eq!(first.cursor, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PageRequest {
    /// The state whose messages are read.
    pub state: QueueState,
    /// At most this many messages.
    pub limit: usize,
    /// Where the page starts: the [`Page::next`] of the page before, `None` for the first.
    pub cursor: Option<String>,
    /// Only messages of this type.
    pub message_type: Option<String>,
}

impl PageRequest {
    /// The first page of up to `limit` messages in `state`, of every type.
    pub fn new(state: QueueState, limit: usize) -> Self {
        PageRequest {
            state,
            limit,
            cursor: None,
            message_type: None,
        }
    }

    /// The page starting at `cursor`, a [`Page::next`] the same backend returned.
    #[must_use]
    pub fn after(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }

    /// Only messages of `message_type`.
    #[must_use]
    pub fn of_type(mut self, message_type: impl Into<String>) -> Self {
        self.message_type = Some(message_type.into());
        self
    }

    /// Whether `message` passes the type filter.
    pub fn selects(&self, message: &Message) -> bool {
        self.message_type
            .as_deref()
            .is_none_or(|t| message.message_type() == t)
    }
}

/// One page of messages, and where the next one starts.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Page {
    /// The messages, in the backend's order for the state.
    pub messages: Vec<Message>,
    /// The cursor of the next page; `None` when this page is the last.
    pub next: Option<String>,
}

impl Page {
    /// A page of `messages` followed by the one at `next`.
    pub fn new(messages: Vec<Message>, next: Option<String>) -> Self {
        Page { messages, next }
    }
}

/// The cursor as a position in the backend's order, as [`offset_page`] writes it.
///
/// # Errors
/// [`Error::InvalidCursor`] when it is not a number.
pub fn offset_of(cursor: Option<&str>) -> Result<usize, Error> {
    match cursor {
        None => Ok(0),
        Some(text) => text.parse().map_err(|_| Error::InvalidCursor),
    }
}

/// A page cut from `read`, the messages of the state from the position `offset` on, in order,
/// of which there are more after the last when `more`: up to `request.limit` of those the
/// request selects, among at most [`FILTER_READS`] read when filtering by type. The cursor is
/// the position after the last message looked at.
pub fn offset_page(
    read: impl IntoIterator<Item = Message>,
    offset: usize,
    more: bool,
    request: &PageRequest,
) -> Page {
    let budget = if request.message_type.is_some() {
        FILTER_READS.max(request.limit)
    } else {
        request.limit
    };
    let mut messages = Vec::new();
    let mut looked = 0;
    let mut read = read.into_iter().peekable();
    while messages.len() < request.limit && looked < budget {
        let Some(message) = read.next() else {
            break;
        };
        looked += 1;
        if request.selects(&message) {
            messages.push(message);
        }
    }
    let next = (more || read.peek().is_some()).then(|| (offset + looked).to_string());
    Page { messages, next }
}

/// [`Browse::page`]'s default: the state read with [`Browse::peek`] up to the page's end, the
/// cursor a position in that order. For a backend's own `page` to fall back on for the states
/// it reads no other way.
///
/// # Errors
/// [`Error::InvalidCursor`] for a cursor that is not a position; as `peek`.
pub async fn peeked_page<B: Browse + ?Sized>(
    browse: &B,
    priority: Priority,
    request: &PageRequest,
) -> Result<Page, Error> {
    let offset = offset_of(request.cursor.as_deref())?;
    let window = if request.message_type.is_some() {
        FILTER_READS.max(request.limit)
    } else {
        request.limit
    };
    let read = browse
        .peek(
            priority,
            request.state,
            offset.saturating_add(window).saturating_add(1),
        )
        .await?;
    Ok(offset_page(
        read.into_iter().skip(offset),
        offset,
        false,
        request,
    ))
}

/// [`Browse::find`]'s default: the pages of each state in turn, until the id turns up. A state
/// the backend cannot read ([`Error::Unsupported`]) is passed over.
///
/// # Errors
/// As [`Browse::page`].
pub async fn found_by_pages<B: Browse + ?Sized>(
    browse: &B,
    priority: Priority,
    id: &str,
) -> Result<Option<(QueueState, Message)>, Error> {
    for state in QueueState::ALL {
        let mut request = PageRequest::new(state, FILTER_READS);
        loop {
            let page = match browse.page(priority, &request).await {
                Ok(page) => page,
                Err(Error::Unsupported { .. }) => break,
                Err(e) => return Err(e),
            };
            if let Some(found) = page.messages.into_iter().find(|m| m.id() == id) {
                return Ok(Some((state, found)));
            }
            match page.next {
                Some(next) => request.cursor = Some(next),
                None => break,
            }
        }
    }
    Ok(None)
}
