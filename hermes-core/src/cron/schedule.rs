//! A cron expression in a time zone: when its ticks fall.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;

use crate::Error;

/// How many ticks of the repeated hour `next_after` steps over at most (one per second of it).
const MAX_OVERLAP_STEPS: usize = 3_700;

/// A cron expression read in an IANA time zone: 5 fields as crontab writes them (minute, hour,
/// day of month, month, day of week), or 6 with seconds first.
///
/// Ticks follow the zone's wall clock. Across a daylight-saving change, a time the clocks skip
/// fires at the first time after the gap, and a time they pass twice fires once, the first
/// time; a schedule of every minute or second has no ticks in the second pass of that hour.
///
/// ```
/// use hermes_core::cron::CronSchedule;
///
/// let nightly = CronSchedule::new("0 3 * * *", "Europe/Bratislava")?;
/// // 2026-07-01 00:00 UTC is 02:00 in Bratislava: the next tick is 03:00 there, 01:00 UTC.
/// assert_eq!(nightly.next_after(1782864000.0), Some(1782867600.0));
/// # Ok::<(), hermes_core::Error>(())
/// ```
#[derive(Clone)]
pub struct CronSchedule {
    cron: Cron,
    zone: Tz,
    expression: String,
}

impl CronSchedule {
    /// `expression` read in the time zone `zone` (`"UTC"`, `"Europe/Bratislava"`).
    ///
    /// # Errors
    /// [`Error::InvalidSchedule`] for an expression croner cannot read or an unknown zone.
    pub fn new(expression: &str, zone: &str) -> Result<Self, Error> {
        let cron = Cron::from_str(expression).map_err(|e| {
            Error::InvalidSchedule(format!(
                "the cron expression {:?} cannot be read: {e}",
                crate::error::excerpt(expression)
            ))
        })?;
        let zone = Tz::from_str(zone).map_err(|_| {
            Error::InvalidSchedule(format!(
                "{:?} is not an IANA time zone name",
                crate::error::excerpt(zone)
            ))
        })?;
        Ok(CronSchedule {
            cron,
            zone,
            expression: expression.to_owned(),
        })
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The time zone's IANA name.
    pub fn zone(&self) -> &str {
        self.zone.name()
    }

    /// The first tick strictly after `unix` (seconds since the epoch), as seconds since the
    /// epoch; `None` when there is none (a date that never comes).
    ///
    /// In the hour the clocks pass twice, a tick of the first pass is not repeated in the
    /// second: from inside the second pass, the next tick is the first one after it.
    pub fn next_after(&self, unix: f64) -> Option<f64> {
        let after = unix.floor();
        let mut from = self.at(after)?;
        // Searching by wall-clock time, croner answers a time of the repeated hour with its
        // first pass, which may lie before `from`: step on until the answer is later.
        for _ in 0..MAX_OVERLAP_STEPS {
            let next = self.cron.find_next_occurrence(&from, false).ok()?;
            if next.timestamp() as f64 > after {
                return Some(next.timestamp() as f64);
            }
            from = next;
        }
        None
    }

    /// The last tick at or before `unix`; `None` when there is none.
    pub fn last_at_or_before(&self, unix: f64) -> Option<f64> {
        let from = self.at(unix.floor())?;
        let previous = self.cron.find_previous_occurrence(&from, true).ok()?;
        let previous = previous.timestamp() as f64;
        // In the repeated hour croner may answer with an earlier time than the last tick: the
        // ticks after it, up to `unix`, are found forwards.
        let mut last = previous;
        while let Some(next) = self.next_after(last).filter(|next| *next <= unix.floor()) {
            last = next;
        }
        Some(last)
    }

    fn at(&self, unix: f64) -> Option<DateTime<Tz>> {
        let utc = DateTime::<Utc>::from_timestamp(unix as i64, 0)?;
        Some(self.zone.from_utc_datetime(&utc.naive_utc()))
    }
}

impl fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSchedule")
            .field("expression", &self.expression)
            .field("zone", &self.zone.name())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds since the epoch of a UTC time.
    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> f64 {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .unwrap()
            .timestamp() as f64
    }

    #[test]
    fn five_fields_tick_on_the_minute_six_on_the_second() {
        let minute = CronSchedule::new("* * * * *", "UTC").unwrap();
        assert_eq!(minute.next_after(90.5), Some(120.0));
        let second = CronSchedule::new("* * * * * *", "UTC").unwrap();
        assert_eq!(second.next_after(90.5), Some(91.0));
        assert_eq!(second.next_after(91.0), Some(92.0), "strictly after");
        assert_eq!(second.last_at_or_before(91.0), Some(91.0));
    }

    #[test]
    fn a_nightly_tick_follows_bratislava_summer_and_winter_time() {
        let nightly = CronSchedule::new("0 3 * * *", "Europe/Bratislava").unwrap();
        // Winter (UTC+1): 03:00 local is 02:00 UTC; summer (UTC+2): 01:00 UTC.
        assert_eq!(
            nightly.next_after(utc(2026, 1, 15, 12, 0)),
            Some(utc(2026, 1, 16, 2, 0))
        );
        assert_eq!(
            nightly.next_after(utc(2026, 7, 15, 12, 0)),
            Some(utc(2026, 7, 16, 1, 0))
        );
    }

    #[test]
    fn the_spring_gap_fires_after_the_gap_once() {
        // 2026-03-29: at 02:00 local (01:00 UTC) the clocks jump to 03:00; 02:30 never is.
        let half_past_two = CronSchedule::new("30 2 * * *", "Europe/Bratislava").unwrap();
        let next = half_past_two.next_after(utc(2026, 3, 28, 12, 0)).unwrap();
        assert_eq!(
            next,
            utc(2026, 3, 29, 1, 0),
            "at 03:00 local, the first time after the gap"
        );
        assert_eq!(
            half_past_two.next_after(next),
            Some(utc(2026, 3, 30, 0, 30)),
            "then 02:30 local (UTC+2) the next day, nothing in between"
        );
        // An hourly tick has no 02:00 that day: 01:00 then 03:00 local, an hour apart.
        let hourly = CronSchedule::new("0 * * * *", "Europe/Bratislava").unwrap();
        let one = hourly.next_after(utc(2026, 3, 28, 23, 30)).unwrap();
        assert_eq!(one, utc(2026, 3, 29, 0, 0), "01:00 local");
        assert_eq!(
            hourly.next_after(one),
            Some(utc(2026, 3, 29, 1, 0)),
            "03:00 local"
        );
    }

    #[test]
    fn the_autumn_overlap_fires_once() {
        // 2026-10-25: at 03:00 local (01:00 UTC) the clocks go back to 02:00; 02:30 is twice.
        let half_past_two = CronSchedule::new("30 2 * * *", "Europe/Bratislava").unwrap();
        let first = half_past_two.next_after(utc(2026, 10, 24, 12, 0)).unwrap();
        assert_eq!(first, utc(2026, 10, 25, 0, 30), "the first 02:30 (UTC+2)");
        assert_eq!(
            half_past_two.next_after(first),
            Some(utc(2026, 10, 26, 1, 30)),
            "not again at the second 02:30, next the day after (UTC+1)"
        );
    }

    #[test]
    fn from_inside_the_repeated_hour_the_next_tick_is_later() {
        // 2026-10-25 01:30 UTC is 02:30 local in the second pass (UTC+1).
        let inside = utc(2026, 10, 25, 1, 30);
        for expression in ["* * * * *", "*/10 * * * * *", "30 2 * * *", "0 * * * *"] {
            let schedule = CronSchedule::new(expression, "Europe/Bratislava").unwrap();
            let next = schedule.next_after(inside).unwrap();
            assert!(next > inside, "{expression}: {next} after {inside}");
            let last = schedule.last_at_or_before(inside).unwrap();
            assert!(last <= inside, "{expression}");
            assert!(
                schedule.next_after(last).unwrap() > inside,
                "{expression}: no tick between the last and now"
            );
        }
        let minutely = CronSchedule::new("* * * * *", "Europe/Bratislava").unwrap();
        assert_eq!(
            minutely.next_after(inside),
            Some(utc(2026, 10, 25, 2, 0)),
            "03:00 local, after the second pass"
        );
    }

    #[test]
    fn bad_expressions_and_zones_are_refused() {
        for bad in ["", "* * *", "61 * * * *", "* * * * * * * *", "every day"] {
            let err = CronSchedule::new(bad, "UTC").unwrap_err();
            assert!(matches!(err, Error::InvalidSchedule(_)), "{bad}: {err}");
        }
        let err = CronSchedule::new("* * * * *", "Mars/Olympus").unwrap_err();
        assert!(err.to_string().contains("IANA"), "{err}");
    }
}
