//! What a job type declares: how many may run at once and how often they may start, over all
//! of them and per limit key.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Bound;
use crate::Error;

/// The longest [limit key](crate::Message::limit_key) a message can carry, in bytes.
pub const MAX_LIMIT_KEY_LEN: usize = 256;

/// The most a concurrency limit or a rate may allow: a million.
pub const MAX_LIMIT: u32 = 1_000_000;

/// The most starts a rate may count in its period: ten thousand (each start in the period is
/// kept until it leaves the window, so this bounds what one key holds).
pub const MAX_RATE: u32 = 10_000;

/// The shortest period of a rate: one millisecond.
pub const MIN_RATE_PERIOD: Duration = Duration::from_millis(1);

/// The longest period of a rate: one day.
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(24 * 3600);

/// At most `max` starts in any window of `period`, across every worker: a sliding window, so
/// no stretch of time of that length ever holds more, whenever it begins.
///
/// ```
/// use std::time::Duration;
/// use hermes_core::flow::Rate;
///
/// assert_eq!(Rate::per_minute(50), Rate::new(50, Duration::from_secs(60)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    max: u32,
    #[serde(rename = "period_ms", with = "millis")]
    period: Duration,
}

/// A duration as whole milliseconds, as a worker announces a rate's period.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

impl Rate {
    /// At most `max` starts in any `period`. [`Limits::check`] refuses a `max` of 0 or over
    /// [`MAX_RATE`], and a period under [`MIN_RATE_PERIOD`] or over [`MAX_RATE_PERIOD`].
    pub const fn new(max: u32, period: Duration) -> Self {
        Rate { max, period }
    }

    /// At most `max` starts in any second.
    pub const fn per_second(max: u32) -> Self {
        Rate::new(max, Duration::from_secs(1))
    }

    /// At most `max` starts in any minute.
    pub const fn per_minute(max: u32) -> Self {
        Rate::new(max, Duration::from_secs(60))
    }

    /// At most `max` starts in any hour.
    pub const fn per_hour(max: u32) -> Self {
        Rate::new(max, Duration::from_secs(3600))
    }

    /// How many starts the period allows.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// The length of the window.
    pub fn period(&self) -> Duration {
        self.period
    }

    fn check(&self, what: &str) -> Result<(), String> {
        if self.max == 0 {
            return Err(format!("{what} allows 0 starts: nothing would ever run"));
        }
        if self.max > MAX_RATE {
            return Err(format!(
                "{what} allows {} starts per period, more than {MAX_RATE}",
                self.max
            ));
        }
        if self.period < MIN_RATE_PERIOD || self.period > MAX_RATE_PERIOD {
            return Err(format!(
                "{what} has a period of {:?}: it must be from {MIN_RATE_PERIOD:?} to {MAX_RATE_PERIOD:?}",
                self.period
            ));
        }
        Ok(())
    }
}

/// The limits of one job type, across every worker that shares the backend: how many run at
/// once and how often they start, over all jobs of the type and per
/// [limit key](crate::Message::limit_key) (a tenant, a customer, a remote host). A job over a
/// limit is not failed and uses no retry: the worker puts it back to run a little later.
///
/// Declared by [`Job::limits`](crate::Job::limits) or with
/// [`Dispatcher::limit`](crate::Dispatcher::limit).
///
/// ```
/// use hermes_core::flow::{Limits, Rate};
///
/// // At most 5 at once over all customers, and 50 a minute for each customer.
/// let limits = Limits::new().concurrency(5).rate_per_key(Rate::per_minute(50));
/// assert!(limits.check().is_ok());
/// assert!(Limits::new().concurrency(0).check().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
#[must_use]
pub struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrency: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrency_per_key: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate: Option<Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_per_key: Option<Rate>,
}

impl Limits {
    /// No limits.
    pub const fn new() -> Self {
        Limits {
            concurrency: None,
            concurrency_per_key: None,
            rate: None,
            rate_per_key: None,
        }
    }

    /// At most `max` jobs of the type running at once.
    pub const fn concurrency(mut self, max: u32) -> Self {
        self.concurrency = Some(max);
        self
    }

    /// At most `max` jobs of the type with one limit key running at once (jobs without a key
    /// are not counted here).
    pub const fn concurrency_per_key(mut self, max: u32) -> Self {
        self.concurrency_per_key = Some(max);
        self
    }

    /// At most `rate` starts of the type.
    pub const fn rate(mut self, rate: Rate) -> Self {
        self.rate = Some(rate);
        self
    }

    /// At most `rate` starts of the type per limit key (jobs without a key are not counted
    /// here).
    pub const fn rate_per_key(mut self, rate: Rate) -> Self {
        self.rate_per_key = Some(rate);
        self
    }

    /// The concurrency limit over all jobs of the type.
    pub fn concurrency_limit(&self) -> Option<u32> {
        self.concurrency
    }

    /// The concurrency limit per limit key.
    pub fn concurrency_per_key_limit(&self) -> Option<u32> {
        self.concurrency_per_key
    }

    /// The rate over all jobs of the type.
    pub fn rate_limit(&self) -> Option<Rate> {
        self.rate
    }

    /// The rate per limit key.
    pub fn rate_per_key_limit(&self) -> Option<Rate> {
        self.rate_per_key
    }

    /// The bounds a message of `message_type` with the limit key `key` must fit in to start,
    /// named so that no type or key can make two share a name: the kind, then the type and
    /// the key as a JSON array (`concurrency["call-api"]`, `rate["call-api","acme"]`).
    /// Per-key limits bind only messages with a key.
    pub fn bounds(&self, message_type: &str, key: Option<&str>) -> Vec<Bound> {
        let mut bounds = Vec::with_capacity(4);
        if let Some(max) = self.concurrency {
            bounds.push(Bound::Slots {
                name: bound_name("concurrency", message_type, None),
                max,
            });
        }
        if let Some(rate) = self.rate {
            bounds.push(Bound::Starts {
                name: bound_name("rate", message_type, None),
                rate,
            });
        }
        if let Some(key) = key {
            if let Some(max) = self.concurrency_per_key {
                bounds.push(Bound::Slots {
                    name: bound_name("concurrency", message_type, Some(key)),
                    max,
                });
            }
            if let Some(rate) = self.rate_per_key {
                bounds.push(Bound::Starts {
                    name: bound_name("rate", message_type, Some(key)),
                    rate,
                });
            }
        }
        bounds
    }

    /// Whether nothing is limited.
    pub fn is_empty(&self) -> bool {
        *self == Limits::new()
    }

    /// Whether a limit counts jobs by their limit key.
    pub fn uses_keys(&self) -> bool {
        self.concurrency_per_key.is_some() || self.rate_per_key.is_some()
    }

    /// Checks the values.
    ///
    /// # Errors
    /// [`Error::Config`] naming the limit: a concurrency of 0 or over [`MAX_LIMIT`], a rate
    /// of 0 starts or over [`MAX_RATE`], a period under [`MIN_RATE_PERIOD`] or over
    /// [`MAX_RATE_PERIOD`].
    pub fn check(&self) -> Result<(), Error> {
        let concurrency = |max: Option<u32>, what: &str| match max {
            Some(0) => Err(format!("{what} is 0: nothing would ever run")),
            Some(max) if max > MAX_LIMIT => Err(format!("{what} is {max}, more than {MAX_LIMIT}")),
            _ => Ok(()),
        };
        let rate = |rate: Option<Rate>, what: &str| rate.map_or(Ok(()), |r| r.check(what));
        concurrency(self.concurrency, "the concurrency limit")
            .and_then(|()| concurrency(self.concurrency_per_key, "the concurrency limit per key"))
            .and_then(|()| rate(self.rate, "the rate"))
            .and_then(|()| rate(self.rate_per_key, "the rate per key"))
            .map_err(|message| Error::Config {
                driver: "limits",
                message,
            })
    }
}

/// Why `key` cannot be a limit key: empty, or longer than [`MAX_LIMIT_KEY_LEN`] bytes.
pub(crate) fn check_limit_key(key: &str) -> Result<(), String> {
    if key.is_empty() {
        return Err("the limit key is empty".into());
    }
    if key.len() > MAX_LIMIT_KEY_LEN {
        return Err(format!(
            "the limit key has {} bytes, more than {MAX_LIMIT_KEY_LEN}",
            key.len()
        ));
    }
    Ok(())
}

/// The name of a bound of `kind` on `message_type` (and `key`): the kind, then the type and the
/// key as a JSON array.
fn bound_name(kind: &str, message_type: &str, key: Option<&str>) -> String {
    let parts: Vec<&str> = std::iter::once(message_type).chain(key).collect();
    let json = serde_json::to_string(&parts).unwrap_or_default();
    format!("{kind}{json}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_limits_are_refused_and_say_which() {
        let refused = [
            (Limits::new().concurrency(0), "the concurrency limit is 0"),
            (
                Limits::new().concurrency_per_key(MAX_LIMIT + 1),
                "the concurrency limit per key is 1000001",
            ),
            (Limits::new().rate(Rate::per_second(0)), "the rate allows 0"),
            (
                Limits::new().rate_per_key(Rate::new(5, Duration::ZERO)),
                "the rate per key has a period of 0ns",
            ),
            (
                Limits::new().rate(Rate::new(5, Duration::from_secs(90_000))),
                "a period of 90000s",
            ),
            (
                Limits::new().rate(Rate::new(MAX_RATE + 1, Duration::from_secs(1))),
                "more than 10000",
            ),
        ];
        for (limits, text) in refused {
            let error = limits.check().unwrap_err().to_string();
            assert!(error.contains(text), "{error}");
        }
        let fine = Limits::new()
            .concurrency(MAX_LIMIT)
            .concurrency_per_key(1)
            .rate(Rate::new(MAX_RATE, MAX_RATE_PERIOD))
            .rate_per_key(Rate::new(1, MIN_RATE_PERIOD));
        assert!(fine.check().is_ok());
        assert!(!fine.is_empty() && fine.uses_keys());
        assert!(Limits::new().is_empty());
    }

    #[test]
    fn bounds_follow_the_limits_and_the_key_and_never_share_a_name() {
        let limits = Limits::new()
            .concurrency(5)
            .rate_per_key(Rate::per_minute(50));
        let names = |key| -> Vec<String> {
            limits
                .bounds("call-api", key)
                .iter()
                .map(|b| b.name().to_owned())
                .collect()
        };
        assert_eq!(
            names(Some("acme")),
            [r#"concurrency["call-api"]"#, r#"rate["call-api","acme"]"#]
        );
        assert_eq!(names(None), [r#"concurrency["call-api"]"#]);
        assert_ne!(
            bound_name("rate", "a\",\"b", None),
            bound_name("rate", "a", Some("b"))
        );
    }
}
