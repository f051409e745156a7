//! Sending: a message due now is added to its priority's set (`SADD`), a delayed one to the
//! schedule; idle workers are woken by a poke the send carries when one is due, or by one sent
//! soon after (see the wake-ups).

use hermes_core::time::unix_now;
use hermes_core::{Error, Message, Priority};

use crate::client::{Reply, Write};
use crate::core::Core;
use crate::scripts::Script;
use crate::wake::{Carried, token_pushed};

impl Core {
    pub(crate) async fn send(&self, message: &Message, priority: Priority) -> Result<(), Error> {
        message.check()?;
        let key = self.sets.get(priority)?;
        let body = self.serializer.serialize(message)?;
        let carried = self.carry();
        let pushed = match message.execute_at() {
            Some(at) if at > unix_now() => {
                self.schedule(at, &body, priority, &[], carried.is_some())
                    .await?;
                None
            }
            _ if carried.is_some() => Some(self.send_and_wake(&key, &[&body]).await?),
            _ => {
                self.emit_write(Write::Command("SADD", &[key.as_bytes(), &body]))
                    .await?;
                None
            }
        };
        self.woken(carried, pushed);
        Ok(())
    }

    /// One round trip for the whole batch, as the driver's `send_batch` tells.
    pub(crate) async fn send_batch(
        &self,
        messages: &[Message],
        priority: Priority,
    ) -> Result<(), Error> {
        let key = self.sets.get(priority)?;
        let now = unix_now();
        let mut due_now: Vec<Vec<u8>> = Vec::new();
        let mut later: Vec<(f64, Vec<u8>)> = Vec::new();
        for message in messages {
            message.check()?;
            let body = self.serializer.serialize(message)?;
            match message.execute_at() {
                Some(at) if at > now => later.push((at, body)),
                _ => due_now.push(body),
            }
        }
        if messages.is_empty() {
            return Ok(());
        }
        // The set's messages carry a poke due now; delayed ones alone get it once all are in,
        // so the woken worker sees the earliest due time among them.
        let carried = self.carry();
        let carried_by_add = carried.is_some() && !due_now.is_empty() && later.is_empty();
        let add = async {
            if due_now.is_empty() {
                return Ok(None);
            }
            let bodies: Vec<&[u8]> = due_now.iter().map(Vec::as_slice).collect();
            if carried_by_add {
                return self.send_and_wake(&key, &bodies).await.map(Some);
            }
            let mut args: Vec<&[u8]> = Vec::with_capacity(due_now.len() + 1);
            args.push(key.as_bytes());
            args.extend(bodies);
            self.emit_write(Write::Command("SADD", &args))
                .await
                .map(|_| None)
        };
        let schedule = futures_util::future::try_join_all(
            later
                .iter()
                .map(|(at, body)| self.schedule(*at, body, priority, &[], false)),
        );
        let (mut pushed, _) = futures_util::try_join!(add, schedule)?;
        if carried.is_some() && !carried_by_add {
            pushed = Some(self.wakes.poke_now().await?);
        }
        self.woken(carried, pushed);
        Ok(())
    }

    /// Adds `bodies` to the set `key` and pokes the wake list in one script: whether the poke
    /// put a token in.
    async fn send_and_wake(&self, key: &str, bodies: &[&[u8]]) -> Result<bool, Error> {
        let reply = self
            .emit_write(Write::Script(Script::Send, &[key, &self.keys.wake], bodies))
            .await?;
        Ok(token_pushed(&reply))
    }

    /// A poke for the send about to go to carry, when wake-ups are on and one is due.
    pub(crate) fn carry(&self) -> Option<Carried> {
        if self.options.wake_ups {
            self.wakes.carry()
        } else {
            None
        }
    }

    /// Ends a send: its carried poke went (`pushed`: whether it put a token in, when known),
    /// or, when it carried none, a poke is asked for.
    pub(crate) fn woken(&self, carried: Option<Carried>, pushed: Option<bool>) {
        match carried {
            Some(carried) => carried.sent(pushed),
            None => self.wake_workers(),
        }
    }
}

impl Core {
    /// Runs a write of an emit: on its own, or followed by a wait for replicas when
    /// [`RedisOptions::replica_wait`](crate::RedisOptions::replica_wait) asks for one.
    ///
    /// # Errors
    /// The write's; with a wait, a temporary error when fewer replicas than asked for
    /// acknowledged it within the wait's timeout (it was written on the master).
    pub(crate) async fn emit_write(&self, write: Write<'_>) -> Result<Reply, Error> {
        let Some(wait) = self.options.replica_wait else {
            return match write {
                Write::Script(script, keys, args) => self.client.eval(script, keys, args).await,
                Write::Command(name, args) => self.client.command(name, args).await,
            };
        };
        let (reply, acknowledged) = self
            .client
            .write_then_wait(write, wait.replicas, wait.timeout)
            .await?;
        if acknowledged < u64::from(wait.replicas) {
            return Err(Error::driver(
                self.name(),
                format!(
                    "the message was written on the master, but {acknowledged} of the {} \
                     replicas asked for acknowledged it within {} ms: a failover now may lose it",
                    wait.replicas,
                    wait.timeout.as_millis()
                ),
                true,
            ));
        }
        Ok(reply)
    }
}
