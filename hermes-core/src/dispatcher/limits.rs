//! The limits of the registered types, as a worker applies them: the bounds a message must fit
//! in, its admission against the backend's store, and how long a refused one waits.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::flow::{Admission, Bound, Limits};
use crate::{Error, Message};

/// The shortest wait of a message refused by a full concurrency limit.
const FIRST_WAIT: Duration = Duration::from_millis(100);

/// The most bounds whose refusals in a row a worker counts.
const MAX_TRACKED: usize = 10_000;

/// The longest wait of a refused message.
const LONGEST_WAIT: Duration = Duration::from_secs(10);

/// The limits of each registered type, checked when declared.
#[derive(Debug, Clone, Default)]
pub(super) struct LimitRules {
    by_type: HashMap<String, Limits>,
    /// The first limit refused when declared, reported when the dispatcher starts.
    refused: Option<String>,
}

impl LimitRules {
    /// Sets the limits of `message_type`, replacing any; `Err` when [`Limits::check`] refuses
    /// them (they are not set then).
    pub(super) fn set(&mut self, message_type: &str, limits: Limits) -> Result<(), Error> {
        if let Err(error) = limits.check() {
            let error = Error::Config {
                driver: "limits",
                message: format!("the limits of {message_type}: {error}"),
            };
            self.refused.get_or_insert(error.to_string());
            return Err(error);
        }
        if limits.is_empty() {
            self.by_type.remove(message_type);
        } else {
            self.by_type.insert(message_type.to_owned(), limits);
        }
        Ok(())
    }

    /// The first limit refused when declared, as the error `handle` returns.
    pub(super) fn refused(&self) -> Option<Error> {
        self.refused.as_ref().map(|message| Error::Config {
            driver: "limits",
            message: message.clone(),
        })
    }

    /// The limits of each type, by type name.
    pub(super) fn announced(&self) -> Vec<crate::workers::TypeLimits> {
        let mut all: Vec<_> = self
            .by_type
            .iter()
            .map(|(message_type, limits)| crate::workers::TypeLimits::new(message_type, *limits))
            .collect();
        all.sort_by(|a, b| a.message_type.cmp(&b.message_type));
        all
    }

    /// Whether any type has limits.
    pub(super) fn is_empty(&self) -> bool {
        self.by_type.is_empty()
    }

    /// The bounds `message` must fit in to start: none when its type has no limits.
    pub(super) fn bounds(&self, message: &Message) -> Vec<Bound> {
        self.by_type
            .get(message.message_type())
            .map(|limits| limits.bounds(message.message_type(), message.limit_key()))
            .unwrap_or_default()
    }
}

/// How long refused messages wait, growing while a bound stays full: per bound, the refusals in
/// a row in this process since its last admission.
#[derive(Debug, Default)]
pub(super) struct Waits {
    refusals: Mutex<HashMap<String, u32>>,
}

impl Waits {
    /// Counts an admission under `bounds`: their waits start over.
    pub(super) fn admitted(&self, bounds: &[Bound]) {
        let mut refusals = self.lock();
        if refusals.is_empty() {
            return;
        }
        for bound in bounds {
            refusals.remove(bound.name());
        }
    }

    /// How long a message refused by `refusal` waits before it is tried again: for a rate,
    /// until a start leaves the window, spread over more of the period the longer the rate
    /// stays full; for slots, 100 ms doubling with each refusal in a row. Up to 10 s, with a
    /// random part so refused messages do not come back together.
    pub(super) fn refused(&self, refusal: &Admission) -> Duration {
        let Admission::Refused { name, retry_after } = refusal else {
            return Duration::ZERO;
        };
        let in_a_row = {
            let mut refusals = self.lock();
            if refusals.len() >= MAX_TRACKED && !refusals.contains_key(name) {
                // Bounds admitted elsewhere never start over here: forget them all at once.
                refusals.clear();
            }
            let count = refusals.entry(name.clone()).or_insert(0);
            *count = count.saturating_add(1);
            *count
        };
        let growth = 2u32.saturating_pow(in_a_row.saturating_sub(1).min(7));
        let wait = match retry_after {
            Some(after) => *after + FIRST_WAIT.mul_f64(f64::from(growth) * rand::random::<f64>()),
            None => FIRST_WAIT
                .saturating_mul(growth)
                .mul_f64(0.5 + rand::random::<f64>()),
        };
        wait.clamp(Duration::from_millis(5), LONGEST_WAIT)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.refusals.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::Rate;

    #[test]
    fn rules_give_the_bounds_of_a_type_and_keep_the_first_refusal() {
        let mut rules = LimitRules::default();
        rules
            .set(
                "call-api",
                Limits::new()
                    .concurrency(5)
                    .rate_per_key(Rate::per_minute(50)),
            )
            .unwrap();
        let keyed = Message::builder("call-api")
            .limit_key("acme")
            .build()
            .unwrap();
        assert_eq!(rules.bounds(&keyed).len(), 2);
        assert_eq!(rules.bounds(&Message::new("call-api")).len(), 1);
        assert!(rules.bounds(&Message::new("other")).is_empty());
        assert!(rules.refused().is_none());

        let error = rules.set("bad", Limits::new().concurrency(0)).unwrap_err();
        assert!(error.to_string().contains("the limits of bad"), "{error}");
        assert!(rules.refused().is_some());
    }

    #[test]
    fn waits_grow_while_refused_and_start_over_once_admitted() {
        let waits = Waits::default();
        let full = Admission::Refused {
            name: "n".into(),
            retry_after: None,
        };
        let first = waits.refused(&full);
        assert!(first <= FIRST_WAIT * 2, "{first:?}");
        for _ in 0..10 {
            waits.refused(&full);
        }
        let late = waits.refused(&full);
        assert!(late >= Duration::from_secs(5), "{late:?}");
        waits.admitted(&[Bound::Slots {
            name: "n".into(),
            max: 1,
        }]);
        assert!(waits.refused(&full) <= FIRST_WAIT * 2);
    }
}
