//! Names: of queue folders, of the folders beside them, and of files: `<due>-<16 hex>.json`
//! for waiting messages, `<claim time>~<name>` while claimed.

use hermes_core::Error;
use hermes_core::driver::LATEST_DUE;

/// The folder of the workers' announcements, beside the queues.
pub(crate) const WORKERS_FOLDER: &str = "workers";

/// The folder of the held uniqueness keys, beside the queues.
pub(crate) const UNIQUE_FOLDER: &str = ".unique";

/// The folder of pauses and cancellations, beside the queues; limits are in its `limits/`.
pub(crate) const FLOW_FOLDER: &str = ".flow";

/// The folder of job records and groups, beside the queues.
pub(crate) const JOBS_FOLDER: &str = ".jobs";

/// The folder of the counters behind the dashboard's history, in the driver's directory: a
/// file per bucket. PHP reads no folder starting with `.`.
pub(crate) const COUNTERS_FOLDER: &str = ".counters";

/// Hermes' rules for a queue name, and not `workers`, the folder of the workers'
/// announcements.
pub(crate) fn validate_queue_name(name: &str) -> Result<(), Error> {
    hermes_core::driver::validate_queue_name(name)?;
    if name == WORKERS_FOLDER {
        return Err(Error::InvalidQueueName {
            name: name.to_owned(),
            reason: "the folder workers/ holds the workers' announcements",
        });
    }
    Ok(())
}

/// The name of a new message file due at Unix time `due`: the time zero-padded to a fixed width
/// with six decimals, so that name order is due order up to the year 2286 (readers order by the
/// parsed time, so later ones work too). Times past [`LATEST_DUE`] are written as that.
pub(crate) fn message_file(due: f64) -> String {
    format!("{}-{:016x}.json", timestamp(due), rand::random::<u64>())
}

/// A Unix time as it appears in file names: `0001700000000.250000`-style fixed width.
pub(crate) fn timestamp(time: f64) -> String {
    format!("{:017.6}", time.clamp(0.0, LATEST_DUE))
}

/// The due time of a message file, or `None` when `name` is not a message file name.
pub(crate) fn due_of(name: &str) -> Option<f64> {
    let rest = name.strip_suffix(".json")?;
    let (due, suffix) = rest.split_once('-')?;
    if suffix.is_empty()
        || name.contains('~')
        || !due.bytes().all(|b| b.is_ascii_digit() || b == b'.')
    {
        return None;
    }
    due.parse::<f64>().ok().filter(|d| d.is_finite())
}

/// The name of the file holding the reason of the dead letter `name` in `failed/`.
pub(crate) fn reason_file(name: &str) -> String {
    format!("{name}.reason")
}

/// Whether `name` in `failed/` is a reason file (or a reason file being written).
pub(crate) fn is_reason_file(name: &str) -> bool {
    name.ends_with(".reason") || (name.starts_with('.') && name.ends_with(".reason.tmp"))
}

/// The name of a claimed file.
pub(crate) fn claimed_file(claim_time: f64, name: &str) -> String {
    format!("{}~{name}", timestamp(claim_time))
}

/// The claim time and original name of a claimed file.
pub(crate) fn parse_claimed(name: &str) -> Option<(f64, &str)> {
    let (claim, original) = name.split_once('~')?;
    let claim = claim.parse::<f64>().ok().filter(|c| c.is_finite())?;
    due_of(original).map(|_| (claim, original))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_due_time() {
        let a = message_file(999.5);
        let b = message_file(1700000000.25);
        let c = message_file(1700000000.250001);
        assert!(a < b && b < c, "{a} {b} {c}");
        assert!(b.starts_with("1700000000.250000-"), "{b}");
        assert_eq!(b.len(), "1700000000.250000-3f9c1a2b7d4e5f60.json".len());
        assert_eq!(due_of(&b), Some(1700000000.25));
    }

    #[test]
    fn foreign_names_are_not_messages() {
        for name in [
            "notes.txt",
            "x.json",
            "-1.json",
            "12-.json",
            "1.5-abc",
            "1~2-a.json",
            "1e5-a.json",
        ] {
            assert_eq!(due_of(name), None, "{name}");
        }
        assert_eq!(
            due_of("1700000000.250000-3f9c1a2b7d4e5f60.json"),
            Some(1700000000.25)
        );
    }

    #[test]
    fn claimed_names_round_trip() {
        let name = message_file(10.0);
        let claimed = claimed_file(20.5, &name);
        assert_eq!(parse_claimed(&claimed), Some((20.5, name.as_str())));
        assert_eq!(parse_claimed(&name), None);
        assert_eq!(parse_claimed("abc~def"), None);
    }
}
