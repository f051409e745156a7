//! Delays without a broker plugin and without a consumer hop: a ladder of dead-lettering delay
//! queues and topic exchanges per target queue, where the routing key spells out the remaining
//! delay in binary.
//!
//! Level `n` has an exchange and a queue, both called `<queue>.delay.level<n>`. The queue holds
//! messages for `DELAY_UNIT_MS × 2ⁿ` (its `x-message-ttl`), then dead-letters them to the
//! exchange of level `n - 1`, keeping their routing key; level 0 dead-letters to the arrival
//! exchange `<queue>.delay.arrive`. A message's routing key has one word per level, highest
//! first, `1` where its delay (in units) has that bit set, then a destination word. The exchange
//! of level `n` routes a `1` in word `n` to its queue and a `0` on to the exchange below (level
//! 0: to the arrival exchange), so a message waits exactly the sum of its set bits and passes
//! only through the queues of those bits. The arrival exchange routes destination `t` to the
//! target queue, which it reaches when due, for every consumer of that queue, and never before.
//!
//! The broker caps a queue's TTL at 2³² − 1 ms, which bounds the ladder at about 62 days. A
//! longer delay goes down the whole ladder with destination `l`, into `<queue>.delay.long`,
//! which only Hermes for Rust workers consume: they send it down the ladder again with what is
//! left, so it never reaches the target queue early.

/// The unit of delays in milliseconds: a delay is rounded up to a multiple of it.
pub const DELAY_UNIT_MS: u64 = 10;

/// The number of levels: the ladder holds a message up to `DELAY_UNIT_MS × (2^DELAY_LEVELS − 1)`
/// ms, about 62 days (the top level's TTL, 31 days, is within the broker's cap); longer delays
/// make several trips.
pub const DELAY_LEVELS: usize = 29;

/// The destination word of a message that reaches the target queue.
const TO_TARGET: &str = "t";
/// The destination word of a message that goes to the long-delay queue.
const TO_LONG: &str = "l";

/// The binding keys of the arrival exchange: to the target queue, and (`true`) to the
/// long-delay queue.
pub(crate) fn arrival_keys() -> [(&'static str, bool); 2] {
    [("#.t", false), ("#.l", true)]
}

/// How long the delay queue of `level` holds a message, in milliseconds.
pub(crate) fn level_ttl_ms(level: usize) -> u64 {
    DELAY_UNIT_MS << level
}

/// A trip down the ladder: how many units it waits, and whether it ends in the long-delay
/// queue because the delay is longer than the ladder holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trip {
    pub(crate) units: u64,
    pub(crate) long: bool,
}

impl Trip {
    /// The trip for a remaining delay in milliseconds: rounded up to the unit (never early),
    /// at least one unit; the whole ladder, to the long-delay queue, when it holds less.
    pub(crate) fn for_delay(remaining_ms: f64) -> Trip {
        let max = (1u64 << DELAY_LEVELS) - 1;
        let units = (remaining_ms / DELAY_UNIT_MS as f64).ceil();
        if units > max as f64 {
            Trip {
                units: max,
                long: true,
            }
        } else {
            Trip {
                units: (units as u64).max(1),
                long: false,
            }
        }
    }

    /// The level it enters the ladder at: the highest set bit.
    pub(crate) fn entry_level(&self) -> usize {
        (63 - self.units.leading_zeros()) as usize
    }

    /// Its routing key: one word per level, highest level first, then the destination.
    pub(crate) fn routing_key(&self) -> String {
        let mut words: Vec<&str> = (0..DELAY_LEVELS)
            .rev()
            .map(|level| {
                if self.units >> level & 1 == 1 {
                    "1"
                } else {
                    "0"
                }
            })
            .collect();
        words.push(if self.long { TO_LONG } else { TO_TARGET });
        words.join(".")
    }
}

/// The binding key matching routing keys whose word for `level` is `bit`, whatever the
/// destination.
pub(crate) fn binding_key(level: usize, bit: bool) -> String {
    let mut words: Vec<&str> = (0..DELAY_LEVELS)
        .rev()
        .map(|l| match (l == level, bit) {
            (false, _) => "*",
            (true, true) => "1",
            (true, false) => "0",
        })
        .collect();
    words.push("*");
    words.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Follows a routing key down the ladder as the broker would: the time spent is the sum
    /// of the levels whose word is 1.
    fn waited_ms(key: &str, entry: usize) -> u64 {
        let words: Vec<&str> = key.split('.').collect();
        assert_eq!(words.len(), DELAY_LEVELS + 1);
        (0..=entry)
            .rev()
            .filter(|level| words[DELAY_LEVELS - 1 - level] == "1")
            .map(level_ttl_ms)
            .sum()
    }

    #[test]
    fn a_delay_waits_its_time_rounded_up_to_the_unit() {
        let day_ms = 24.0 * 3600.0 * 1000.0;
        for ms in [
            0.5,
            10.0,
            10.1,
            999.0,
            3000.0,
            7_300.0,
            day_ms,
            62.0 * day_ms,
        ] {
            let trip = Trip::for_delay(ms);
            assert!(!trip.long, "{ms}");
            assert!(trip.routing_key().ends_with(".t"));
            let waited = waited_ms(&trip.routing_key(), trip.entry_level()) as f64;
            assert!(waited >= ms, "{ms} ms waits {waited}");
            assert!(
                waited < ms.max(10.0) + DELAY_UNIT_MS as f64,
                "{ms} ms waits {waited}"
            );
        }
        for ms in [63.0 * day_ms, 365.0 * day_ms, 2.5e14] {
            let trip = Trip::for_delay(ms);
            assert!(trip.long && trip.routing_key().ends_with(".l"), "{ms}");
            let waited = waited_ms(&trip.routing_key(), trip.entry_level()) as f64;
            assert!(
                waited < ms && waited > 62.0 * day_ms,
                "{ms} ms waits {waited}"
            );
        }
    }

    #[test]
    fn every_level_is_within_the_brokers_ttl_cap() {
        assert!(level_ttl_ms(DELAY_LEVELS - 1) <= u64::from(u32::MAX));
        assert!(
            level_ttl_ms(DELAY_LEVELS) > u64::from(u32::MAX),
            "no level is left unused"
        );
    }

    #[test]
    fn binding_keys_look_at_one_word() {
        let key = binding_key(2, true);
        let words: Vec<&str> = key.split('.').collect();
        assert_eq!(words.len(), DELAY_LEVELS + 1);
        assert_eq!(words[DELAY_LEVELS - 3], "1");
        assert_eq!(words.iter().filter(|w| **w == "*").count(), DELAY_LEVELS);
        assert_eq!(Trip::for_delay(5.0).entry_level(), 0);
        assert_eq!(Trip::for_delay(3000.0).entry_level(), 8);
        assert_eq!(Trip::for_delay(f64::MAX).units, (1 << DELAY_LEVELS) - 1);
    }
}
