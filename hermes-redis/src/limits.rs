//! The limit store: per bound, a sorted set `<default set>_limit:<bound name>` in the queue's
//! hash slot, of slots (holders scored by the end of their lease) or of starts (scored by their
//! time), on the server's clock, expiring once idle. An admission is one script.

use std::time::Duration;

use hermes_core::Error;
use hermes_core::driver::{LimitStore, async_trait};
use hermes_core::flow::{Admission, Bound};

use crate::core::Core;
use crate::scripts::Script;

impl Core {
    /// The Redis key of the bound called `name`.
    fn limit_key(&self, name: &str) -> String {
        format!("{}_limit:{name}", self.keys.default_set)
    }
}

/// Milliseconds, at least 1.
fn millis(duration: Duration) -> String {
    duration
        .as_millis()
        .clamp(1, u128::from(u64::MAX))
        .to_string()
}

/// A bound's kind and period as the scripts take them.
fn kind_and_period(bound: &Bound) -> (&'static str, String) {
    match bound.period() {
        Some(period) => ("r", millis(period)),
        None => ("s", "0".to_owned()),
    }
}

impl Core {
    /// The admission an admission script answered: `index` 0 when admitted, else the 1-based
    /// index of the full bound, with `wait` ms until a rate has room (-1 for slots).
    fn admission(&self, bounds: &[Bound], index: i64, wait: i64) -> Result<Admission, Error> {
        if index == 0 {
            return Ok(Admission::Admitted);
        }
        let bound = usize::try_from(index - 1)
            .ok()
            .and_then(|i| bounds.get(i))
            .ok_or_else(|| self.reply_error("the admission script"))?;
        Ok(Admission::Refused {
            name: bound.name().to_owned(),
            retry_after: u64::try_from(wait).ok().map(Duration::from_millis),
        })
    }
}

#[async_trait]
impl LimitStore for Core {
    async fn admit(
        &self,
        holder: &str,
        bounds: &[Bound],
        lease: Duration,
    ) -> Result<Admission, Error> {
        if bounds.is_empty() {
            return Ok(Admission::Admitted);
        }
        let keys: Vec<String> = bounds.iter().map(|b| self.limit_key(b.name())).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut args: Vec<String> = vec![holder.to_owned(), millis(lease)];
        for bound in bounds {
            let (kind, period) = kind_and_period(bound);
            args.extend([kind.to_owned(), bound.max().to_string(), period]);
        }
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let reply = self.client.eval(Script::Admit, &keys, &args).await?;
        let items = reply.into_items();
        let [index, wait] = &items[..] else {
            return Err(self.reply_error("the admission script"));
        };
        let (Some(index), Some(wait)) = (index.as_int(), wait.as_int()) else {
            return Err(self.reply_error("the admission script"));
        };
        self.admission(bounds, index, wait)
    }

    async fn admit_starts(
        &self,
        holder: &str,
        bounds: &[Bound],
        want: u32,
        within: Duration,
    ) -> Result<(Admission, u32), Error> {
        if bounds.is_empty() {
            return Ok((Admission::Admitted, want.max(1)));
        }
        let keys: Vec<String> = bounds.iter().map(|b| self.limit_key(b.name())).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let mut args: Vec<String> =
            vec![holder.to_owned(), want.max(1).to_string(), millis(within)];
        for bound in bounds {
            let Some(period) = bound.period() else {
                return Err(Error::Config {
                    driver: self.name(),
                    message: format!(
                        "admit_starts takes rates alone, {} is not one",
                        bound.name()
                    ),
                });
            };
            args.extend([bound.max().to_string(), millis(period)]);
        }
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let reply = self.client.eval(Script::AdmitStarts, &keys, &args).await?;
        let items = reply.into_items();
        let [index, wait, recorded] = &items[..] else {
            return Err(self.reply_error("the admission script"));
        };
        let (Some(index), Some(wait), Some(recorded)) =
            (index.as_int(), wait.as_int(), recorded.as_int())
        else {
            return Err(self.reply_error("the admission script"));
        };
        let admission = self.admission(bounds, index, wait)?;
        Ok((admission, u32::try_from(recorded).unwrap_or(0)))
    }

    async fn renew(&self, holder: &str, names: &[String], lease: Duration) -> Result<bool, Error> {
        if names.is_empty() {
            return Ok(true);
        }
        let keys: Vec<String> = names.iter().map(|n| self.limit_key(n)).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let lease = millis(lease);
        let held = self
            .client
            .eval(
                Script::RenewSlots,
                &keys,
                &[holder.as_bytes(), lease.as_bytes()],
            )
            .await?;
        Ok(held.count() == names.len() as u64)
    }

    async fn release(&self, holder: &str, names: &[String]) -> Result<(), Error> {
        for name in names {
            let key = self.limit_key(name);
            self.client
                .command("ZREM", &[key.as_bytes(), holder.as_bytes()])
                .await?;
        }
        Ok(())
    }

    async fn usage(&self, bound: &Bound) -> Result<u32, Error> {
        let key = self.limit_key(bound.name());
        let (kind, period) = kind_and_period(bound);
        let reply = self
            .client
            .eval(
                Script::LimitUsage,
                &[&key],
                &[kind.as_bytes(), period.as_bytes()],
            )
            .await?;
        Ok(u32::try_from(reply.count()).unwrap_or(u32::MAX))
    }
}
