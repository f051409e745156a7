//! The direct lane: a connection of its own on which a command sent while no other call uses
//! it is written and answered on the caller's own task.
//!
//! A multiplexed connection hands every command to its task and the answer back, two wake-ups
//! of other tasks per command, which cost a single caller about as much as Redis itself. A
//! caller that finds the lane free skips them; callers meanwhile (concurrent emits) and
//! pipelines go on the multiplexed connection, which pipelines them.

use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Waker};
use std::time::Duration;

use redis::{Client, ConnectionAddr, ErrorKind, ProtocolVersion, RedisError, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// The free room kept in the read buffer before each read: on Linux and the BSDs a read that
/// does not fill it tells the runtime that the socket is drained, so that
/// [`Open::server_closed`] rarely needs a read of its own.
const READ_ROOM: usize = 16 * 1024;

/// A connection used by one call at a time, opened when first used and again after it broke.
pub(crate) struct DirectLane {
    host: String,
    port: u16,
    /// `AUTH` and `SELECT`, packed, sent first on each new connection. Holds the password:
    /// never printed.
    hello: Vec<u8>,
    hello_replies: usize,
    slot: Mutex<Slot>,
}

enum Slot {
    /// No connection: the next call opens one.
    Closed,
    /// A connection no call uses.
    Idle(Open),
    /// A call uses the connection.
    Busy,
}

/// An open connection.
struct Open {
    io: Io,
    /// Cuts a call that waits too long, at `until`. Set again only when a call's own limit
    /// is earlier, or more than [`REARM_AFTER`] later, so that most calls register no timer
    /// of their own.
    deadline: Pin<Box<Sleep>>,
    until: Instant,
    /// The runtime the socket and the timer are registered with; a call on another one opens
    /// a new connection.
    runtime: tokio::runtime::Id,
    /// The tag the connection was opened with (see [`Lease::call`]).
    era: u64,
}

/// A socket and its buffers.
struct Io {
    stream: TcpStream,
    read: Vec<u8>,
    write: Vec<u8>,
}

/// How much before its limit a call on the lane may give up: the connection's deadline is
/// kept while it falls within that much before the call's limit.
pub(crate) const REARM_AFTER: Duration = Duration::from_secs(1);

/// Above this capacity, a buffer is given back after the answer that grew it.
const KEEP_AT_MOST: usize = 1 << 20;

impl DirectLane {
    /// A lane to the server of `client`, when it is one the lane speaks to: plain TCP and
    /// RESP2 (the default). `None` for TLS, Unix sockets and RESP3.
    pub(crate) fn for_client(client: &Client) -> Option<DirectLane> {
        let info = client.get_connection_info();
        let ConnectionAddr::Tcp(host, port) = info.addr() else {
            return None;
        };
        let settings = info.redis_settings();
        if settings.protocol() != ProtocolVersion::RESP2 {
            return None;
        }
        let mut hello = Vec::new();
        let mut hello_replies = 0;
        if let Some(password) = settings.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(username) = settings.username() {
                auth.arg(username);
            }
            auth.arg(password).write_packed_command(&mut hello);
            hello_replies += 1;
        }
        if settings.db() != 0 {
            redis::cmd("SELECT")
                .arg(settings.db())
                .write_packed_command(&mut hello);
            hello_replies += 1;
        }
        Some(DirectLane {
            host: host.clone(),
            port: *port,
            hello,
            hello_replies,
            slot: Mutex::new(Slot::Closed),
        })
    }

    /// The lane for one call, or `None` while another call uses it.
    pub(crate) fn take(&self) -> Option<Lease<'_>> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *slot, Slot::Busy) {
            Slot::Busy => None,
            Slot::Closed => Some(Lease {
                lane: self,
                open: None,
            }),
            Slot::Idle(open) => Some(Lease {
                lane: self,
                open: Some(open),
            }),
        }
    }

    /// A new connection, ready for commands (authenticated, its database selected), by
    /// `until`.
    async fn connect(&self, era: u64, until: Instant) -> Result<Open, RedisError> {
        let connecting = async {
            let stream = TcpStream::connect((self.host.as_str(), self.port)).await?;
            stream.set_nodelay(true)?;
            let mut io = Io {
                stream,
                read: Vec::with_capacity(READ_ROOM),
                write: Vec::new(),
            };
            if self.hello_replies > 0 {
                io.stream.write_all(&self.hello).await?;
                for _ in 0..self.hello_replies {
                    io.reply().await?.extract_error()?;
                }
            }
            Ok::<_, RedisError>(io)
        };
        let io = tokio::time::timeout_at(until, connecting)
            .await
            .map_err(|_| no_answer())??;
        Ok(Open {
            io,
            deadline: Box::pin(tokio::time::sleep_until(until)),
            until,
            runtime: tokio::runtime::Handle::current().id(),
            era,
        })
    }
}

/// The lane, taken for one call: dropped, it gives the connection back when the call ended
/// with an answer, and closes it otherwise (an error, or a call dropped mid-way, after which
/// an answer may still be on its way).
pub(crate) struct Lease<'a> {
    lane: &'a DirectLane,
    open: Option<Open>,
}

impl Lease<'_> {
    /// Sends the command `pack` writes (a RESP2 array of bulk strings) and reads its answer
    /// (a server error is a `Value::ServerError`, as on the multiplexed connection), giving up
    /// with a timeout error at `until` at the latest, and at `until` less [`REARM_AFTER`] at
    /// the earliest. A connection that the server closed while idle, or that belongs to
    /// another runtime, is replaced before anything is sent, so the command is sent once at
    /// most. A new connection is tagged with `era()`.
    ///
    /// `lost` is told, as soon as it is known, the tag of a connection of the lane that the
    /// server closed, that failed, or whose server turned into a replica (`READONLY`):
    /// connections to the same server opened before it are likely gone too.
    ///
    /// # Cancellation safety
    /// Dropping the future closes the lane's connection; the command may have been sent.
    pub(crate) async fn call(
        mut self,
        pack: impl FnOnce(&mut Vec<u8>),
        until: Instant,
        era: impl FnOnce() -> u64,
        lost: impl Fn(u64),
    ) -> Result<Value, RedisError> {
        let reusable = match self.open.take() {
            Some(mut open) if open.in_this_runtime() => {
                if open.server_closed() {
                    lost(open.era);
                    None
                } else {
                    Some(open)
                }
            }
            // Of another runtime: replaced, the multiplexed connection kept (the other
            // runtime may well run on).
            _ => None,
        };
        let mut open = match reusable {
            Some(open) => open,
            // Boxed: rare, and its future is larger than the call's.
            None => Box::pin(self.lane.connect(era(), until)).await?,
        };
        open.arm(until);
        let Open { io, deadline, .. } = &mut open;
        io.write.clear();
        pack(&mut io.write);
        let exchange = async {
            io.stream.write_all(&io.write).await?;
            io.reply().await
        };
        let answer = tokio::select! {
            biased;
            answer = exchange => answer,
            () = deadline.as_mut() => Err(no_answer()),
        };
        match answer {
            // More than was asked for: the connection is out of step; answer, and close it.
            Ok(value) if !open.io.read.is_empty() => Ok(value),
            // A failover behind the same address: this server takes no writes any more.
            Ok(Value::ServerError(e)) if e.code() == "READONLY" => {
                lost(open.era);
                Ok(Value::ServerError(e))
            }
            Ok(value) => {
                open.io.shrink();
                self.open = Some(open);
                Ok(value)
            }
            Err(e) => {
                if e.is_unrecoverable_error() && !e.is_timeout() {
                    lost(open.era);
                }
                Err(e)
            }
        }
    }
}

/// The error of a call that got no answer within its bound.
fn no_answer() -> RedisError {
    RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let mut slot = self
            .lane
            .slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *slot = match self.open.take() {
            Some(open) => Slot::Idle(open),
            None => Slot::Closed,
        };
    }
}

impl Open {
    /// Whether the socket belongs to the runtime the caller runs on; one that does not is
    /// not used (it may not outlive its runtime).
    fn in_this_runtime(&self) -> bool {
        tokio::runtime::Handle::try_current().is_ok_and(|h| h.id() == self.runtime)
    }

    /// Whether the server closed the connection, or sent something unasked, since the last
    /// answer. Asks the runtime first, which costs no system call; only when it saw the
    /// socket readable does a read tell (it may have seen the last answer's bytes only).
    fn server_closed(&mut self) -> bool {
        let mut context = Context::from_waker(Waker::noop());
        if self.io.stream.poll_read_ready(&mut context).is_pending() {
            return false;
        }
        let mut probe = [0u8; 1];
        !matches!(
            self.io.stream.try_read(&mut probe),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
        )
    }

    /// Sets the deadline for a call that must end by `until`, unless the one set falls within
    /// [`REARM_AFTER`] before it.
    fn arm(&mut self, until: Instant) {
        let kept =
            self.until <= until && self.until + REARM_AFTER >= until && !self.deadline.is_elapsed();
        if !kept {
            self.deadline.as_mut().reset(until);
            self.until = until;
        }
    }
}

impl Io {
    /// Gives back the memory a large answer or command left in the buffers.
    fn shrink(&mut self) {
        if self.read.capacity() > KEEP_AT_MOST {
            self.read = Vec::with_capacity(READ_ROOM);
        }
        if self.write.capacity() > KEEP_AT_MOST {
            self.write = Vec::new();
        }
    }

    /// Reads one whole answer.
    async fn reply(&mut self) -> Result<Value, RedisError> {
        let mut scan = Scan::default();
        loop {
            if let Some(length) = scan.frame_length(&self.read)? {
                let value = if scan.has_error {
                    // Server errors are built by the redis crate's own parser.
                    redis::parse_redis_value(&self.read[..length])
                } else {
                    Ok(value_at(&self.read, 0)?.0)
                };
                self.read.drain(..length);
                return value;
            }
            self.read.reserve(READ_ROOM);
            if self.stream.read_buf(&mut self.read).await? == 0 {
                return Err(RedisError::from(std::io::Error::from(
                    std::io::ErrorKind::UnexpectedEof,
                )));
            }
        }
    }
}

/// Writes the command of `parts` (its name first) as a RESP2 array of bulk strings.
pub(crate) fn pack<'a>(out: &mut Vec<u8>, parts: impl ExactSizeIterator<Item = &'a [u8]>) {
    let count = parts.len();
    out.push(b'*');
    push_decimal(out, count);
    out.extend_from_slice(b"\r\n");
    let mut written = 0;
    for part in parts {
        written += 1;
        out.push(b'$');
        push_decimal(out, part.len());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    debug_assert_eq!(written, count, "the parts were not as many as they said");
}

fn push_decimal(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// How far the frame at the start of a buffer was measured, so that a long answer that comes
/// in many reads is read through once.
#[derive(Default)]
struct Scan {
    /// Where the next element begins.
    at: usize,
    /// Elements still to read after it: the elements of the arrays met, less those read.
    after: u64,
    /// Whether an element was a server error.
    has_error: bool,
}

impl Scan {
    /// The length of the RESP2 frame at the start of `bytes`, or `None` while it is
    /// incomplete; called again with more bytes, it goes on where it stopped.
    fn frame_length(&mut self, bytes: &[u8]) -> Result<Option<usize>, RedisError> {
        loop {
            let Some((kind, header, mut end)) = line_at(bytes, self.at) else {
                return Ok(None);
            };
            let mut elements = 0;
            match kind {
                b'+' | b':' => {}
                b'-' => self.has_error = true,
                b'$' => {
                    if let Ok(length) = usize::try_from(number(header)?) {
                        end = end.saturating_add(length).saturating_add(2);
                        if end > bytes.len() {
                            return Ok(None);
                        }
                    }
                }
                b'*' => elements = u64::try_from(number(header)?).unwrap_or(0),
                _ => return Err(out_of_step()),
            }
            self.at = end;
            self.after = self.after.saturating_add(elements);
            if self.after == 0 {
                return Ok(Some(end));
            }
            self.after -= 1;
        }
    }
}

/// The type byte, header and end of the line at `at`, when it is whole.
fn line_at(bytes: &[u8], at: usize) -> Option<(u8, &[u8], usize)> {
    let kind = *bytes.get(at)?;
    let length = bytes[at + 1..].windows(2).position(|w| w == b"\r\n")?;
    Some((kind, &bytes[at + 1..at + 1 + length], at + length + 3))
}

/// Arrays in arrays deeper than this are refused (the driver's scripts answer two deep).
const DEEPEST: usize = 32;

/// The value of the whole RESP2 frame at `at`, which holds no server error, and where it
/// ends.
fn value_at(bytes: &[u8], at: usize) -> Result<(Value, usize), RedisError> {
    value_within(bytes, at, DEEPEST)
}

fn value_within(bytes: &[u8], at: usize, depth: usize) -> Result<(Value, usize), RedisError> {
    let (kind, header, end) = line_at(bytes, at).ok_or_else(out_of_step)?;
    Ok(match kind {
        b'+' if header == b"OK" => (Value::Okay, end),
        b'+' => (
            Value::SimpleString(String::from_utf8_lossy(header).into_owned()),
            end,
        ),
        b':' => (Value::Int(number(header)?), end),
        b'$' => match usize::try_from(number(header)?) {
            Ok(length) => {
                let content = bytes.get(end..end + length).ok_or_else(out_of_step)?;
                (Value::BulkString(content.to_vec()), end + length + 2)
            }
            Err(_) => (Value::Nil, end),
        },
        b'*' => match usize::try_from(number(header)?) {
            Ok(_) if depth == 0 => return Err(out_of_step()),
            Ok(count) => {
                let mut items = Vec::with_capacity(count.min(1024));
                let mut next = end;
                for _ in 0..count {
                    let (item, after) = value_within(bytes, next, depth - 1)?;
                    items.push(item);
                    next = after;
                }
                (Value::Array(items), next)
            }
            Err(_) => (Value::Nil, end),
        },
        _ => return Err(out_of_step()),
    })
}

fn number(header: &[u8]) -> Result<i64, RedisError> {
    std::str::from_utf8(header)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(out_of_step)
}

fn out_of_step() -> RedisError {
    RedisError::from((
        ErrorKind::Parse,
        "Redis answered with bytes that are not RESP2",
    ))
}

#[cfg(test)]
mod tests {
    use redis::Value;

    use super::{Scan, pack, value_at};

    #[test]
    fn commands_are_packed_as_the_redis_crate_packs_them() {
        let parts: [&[u8]; 4] = [b"SADD", b"key", b"", &[b'x'; 1234]];
        let mut ours = Vec::new();
        pack(&mut ours, parts.iter().copied());
        let mut theirs = redis::cmd("SADD");
        theirs.arg(parts[1]).arg(parts[2]).arg(parts[3]);
        assert_eq!(ours, theirs.get_packed_command());
    }

    fn length(bytes: &[u8]) -> Option<usize> {
        Scan::default().frame_length(bytes).unwrap()
    }

    #[test]
    fn whole_frames_are_measured_and_read() {
        for (frame, value) in [
            (&b"+OK\r\n"[..], Value::Okay),
            (b"+PONG\r\n", Value::SimpleString("PONG".to_owned())),
            (b":12\r\n", Value::Int(12)),
            (b":-3\r\n", Value::Int(-3)),
            (b"$3\r\nabc\r\n", Value::BulkString(b"abc".to_vec())),
            (b"$4\r\na\r\nb\r\n", Value::BulkString(b"a\r\nb".to_vec())),
            (b"$-1\r\n", Value::Nil),
            (b"$0\r\n\r\n", Value::BulkString(vec![])),
            (b"*-1\r\n", Value::Nil),
            (b"*0\r\n", Value::Array(vec![])),
            (
                b"*2\r\n$1\r\na\r\n*2\r\n:1\r\n$2\r\n\r\n\r\n",
                Value::Array(vec![
                    Value::BulkString(b"a".to_vec()),
                    Value::Array(vec![Value::Int(1), Value::BulkString(b"\r\n".to_vec())]),
                ]),
            ),
        ] {
            assert_eq!(length(frame), Some(frame.len()), "{frame:?}");
            let mut longer = frame.to_vec();
            longer.extend_from_slice(b":1\r\n");
            assert_eq!(length(&longer), Some(frame.len()));
            assert_eq!(value_at(&longer, 0).unwrap(), (value, frame.len()));
        }
    }

    #[test]
    fn incomplete_frames_wait_for_more_and_go_on_where_they_stopped() {
        let frame = b"*3\r\n$5\r\nab\r\nc\r\n*1\r\n:7\r\n-ERR x\r\n";
        for end in 0..frame.len() {
            assert_eq!(length(&frame[..end]), None, "{end}");
        }
        let mut scan = Scan::default();
        for end in 0..frame.len() {
            assert_eq!(scan.frame_length(&frame[..end]).unwrap(), None, "{end}");
        }
        assert_eq!(scan.frame_length(frame).unwrap(), Some(frame.len()));
        assert!(scan.has_error);
    }

    #[test]
    fn garbage_is_an_error() {
        for garbage in [&b"HTTP/1.1 400\r\n"[..], b"$x\r\n", b"*1\r\n!\r\n"] {
            assert!(
                Scan::default().frame_length(garbage).is_err(),
                "{garbage:?}"
            );
        }
    }
}
