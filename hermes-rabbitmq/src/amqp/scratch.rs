//! A channel of its own for one inspection: it looks at queues that may not exist (the broker
//! closes a channel that names a missing queue; the next call opens another), takes messages
//! with `basic.get` without acknowledging them, and gives back what it holds when done.

use hermes_core::Error;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicNackOptions, QueueDeclareOptions, QueuePurgeOptions,
};
use lapin::types::FieldTable;
use lapin::{Acker, Channel};

use super::{Session, lift};
use crate::error::{lapin_error, reply_code};

/// NOT_FOUND: the queue does not exist.
const NOT_FOUND: u16 = 404;
/// PRECONDITION_FAILED: the queue exists with other settings.
const PRECONDITION_FAILED: u16 = 406;

/// A channel on a session for one inspection. Every call is bounded like the driver's others.
/// Messages it took and did not acknowledge go back to their places in their queue when it
/// [finishes](Scratch::finish), or when it is dropped (its channel closes then).
pub(crate) struct Scratch<'s> {
    session: &'s Session,
    channel: Option<Channel>,
    /// Whether it holds messages taken and not acknowledged.
    holds: bool,
}

impl<'s> Scratch<'s> {
    /// A scratch channel on `session`, opened on first use.
    pub(crate) fn new(session: &'s Session) -> Self {
        Scratch {
            session,
            channel: None,
            holds: false,
        }
    }

    async fn channel(&mut self) -> Result<Channel, Error> {
        if let Some(channel) = &self.channel
            && channel.status().connected()
        {
            return Ok(channel.clone());
        }
        // A closed channel gave back what it held.
        self.holds = false;
        let open = self.session.channel();
        let channel = self.session.bounded("opening a channel", open).await?;
        self.channel = Some(channel.clone());
        Ok(channel)
    }

    /// How many messages wait in `queue`, ready for delivery; `None` when it does not exist.
    pub(crate) async fn ready(&mut self, queue: &str) -> Result<Option<u32>, Error> {
        Ok(self.counts(queue).await?.map(|(ready, _)| ready))
    }

    /// How many messages wait in `queue`, ready for delivery, and how many consumers it has;
    /// `None` when it does not exist.
    pub(crate) async fn counts(&mut self, queue: &str) -> Result<Option<(u32, u32)>, Error> {
        let channel = self.channel().await?;
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declare = async {
            channel
                .queue_declare(queue.into(), passive, FieldTable::default())
                .await
        };
        match self
            .session
            .bounded("counting a queue", lift(declare))
            .await?
        {
            Ok(declared) => Ok(Some((declared.message_count(), declared.consumer_count()))),
            Err(e) if reply_code(&e) == Some(NOT_FOUND) => Ok(None),
            Err(e) => Err(lapin_error(e)),
        }
    }

    /// Declares `queue` with `arguments` (`durable` or not, of the session's queue type):
    /// `false` when it exists with other arguments, and is left as it is.
    pub(crate) async fn declare(
        &mut self,
        queue: &str,
        durable: bool,
        arguments: FieldTable,
    ) -> Result<bool, Error> {
        let channel = self.channel().await?;
        let options = QueueDeclareOptions {
            durable,
            ..QueueDeclareOptions::default()
        };
        let declare = async {
            channel
                .queue_declare(queue.into(), options, self.session.typed(arguments))
                .await
        };
        match self
            .session
            .bounded("declaring a queue", lift(declare))
            .await?
        {
            Ok(_) => Ok(true),
            Err(e) if reply_code(&e) == Some(PRECONDITION_FAILED) => Ok(false),
            Err(e) => Err(lapin_error(e)),
        }
    }

    /// Removes every ready message of `queue`: how many; `None` when it does not exist.
    pub(crate) async fn purge(&mut self, queue: &str) -> Result<Option<u32>, Error> {
        let channel = self.channel().await?;
        let purge = async {
            channel
                .queue_purge(queue.into(), QueuePurgeOptions::default())
                .await
        };
        match self.session.bounded("purging a queue", lift(purge)).await? {
            Ok(count) => Ok(Some(count)),
            Err(e) if reply_code(&e) == Some(NOT_FOUND) => Ok(None),
            Err(e) => Err(lapin_error(e)),
        }
    }

    /// Takes the oldest ready message of `queue` without acknowledging it, with how many are
    /// left ready after it; `None` when none is ready or the queue does not exist.
    pub(crate) async fn take(&mut self, queue: &str) -> Result<Option<(Delivery, u32)>, Error> {
        let channel = self.channel().await?;
        let get = async {
            channel
                .basic_get(queue.into(), BasicGetOptions { no_ack: false })
                .await
        };
        match self.session.bounded("getting a message", lift(get)).await? {
            Ok(Some(got)) => {
                self.holds = true;
                Ok(Some((got.delivery, got.message_count)))
            }
            Ok(None) => Ok(None),
            Err(e) if reply_code(&e) == Some(NOT_FOUND) => Ok(None),
            Err(e) => Err(lapin_error(e)),
        }
    }

    /// Acknowledges the message of `acker`, taken by [`take`](Scratch::take): the broker
    /// removes it.
    pub(crate) async fn remove(&mut self, acker: &Acker) -> Result<(), Error> {
        let ack = async { acker.ack(BasicAckOptions::default()).await };
        self.session
            .bounded("acknowledging a message", lift(ack))
            .await?
            .map(drop)
            .map_err(lapin_error)
    }

    /// Gives back every message taken and not acknowledged, each to its place in its queue,
    /// and closes the channel.
    pub(crate) async fn finish(mut self) -> Result<(), Error> {
        let Some(channel) = self.channel.take() else {
            return Ok(());
        };
        if !channel.status().connected() {
            return Ok(());
        }
        let give_back = async {
            if self.holds {
                // Tag 0 with `multiple`: every message of the channel not yet settled.
                let all = BasicNackOptions {
                    multiple: true,
                    requeue: true,
                };
                channel.basic_nack(0, all).await?;
            }
            channel.close(200, "done".into()).await
        };
        self.session
            .bounded("giving messages back", lift(give_back))
            .await?
            .map_err(lapin_error)
    }
}
