//! What was sent and what was handled: the emits that returned Ok, the log the handlers append
//! to, and the counts the run reports.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use crate::handler::Span;

/// The emits of a run: for each sequence number, the message id when its emit returned Ok.
#[derive(Debug, Default)]
pub struct Sent {
    ids: Vec<Option<String>>,
    attempted: Vec<String>,
    how: Vec<String>,
}

impl Sent {
    /// Room for `n` messages.
    pub fn new(n: u64) -> Self {
        let n = usize::try_from(n).expect("the message count fits in memory");
        Sent {
            ids: vec![None; n],
            attempted: vec![String::new(); n],
            how: vec![String::new(); n],
        }
    }

    /// Records the emit of `seq` as message `id`, whether it returned Ok, and how it was sent
    /// (its priority and due time), to show if it is lost.
    pub fn record(&mut self, seq: u64, id: &str, ok: bool, how: String) {
        let at = usize::try_from(seq).expect("a sequence number of this run");
        id.clone_into(&mut self.attempted[at]);
        self.how[at] = how;
        if ok {
            self.ids[at] = Some(id.to_owned());
        }
    }

    /// How many emits returned Ok.
    pub fn ok(&self) -> u64 {
        self.ids.iter().filter(|i| i.is_some()).count() as u64
    }
}

/// A log that worker processes append whole lines to, read as it grows.
#[derive(Debug)]
pub struct LogTail {
    path: PathBuf,
    offset: u64,
    partial: String,
}

impl LogTail {
    /// The log at `path` (which may not exist yet), read from its start.
    pub fn new(path: &Path) -> Self {
        LogTail {
            path: path.to_path_buf(),
            offset: 0,
            partial: String::new(),
        }
    }

    /// The whole lines appended since the last call, without their line ends; a line still
    /// being written is kept for the next call.
    ///
    /// # Errors
    /// When the log cannot be read.
    pub fn read_lines(&mut self) -> io::Result<Vec<String>> {
        let mut file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        self.offset += bytes.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&bytes));
        let mut lines = Vec::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            lines.push(line.trim_end().to_owned());
        }
        Ok(lines)
    }
}

/// The handlers' log, read as it grows.
#[derive(Debug)]
pub struct Ledger {
    tail: LogTail,
    handled: HashMap<u64, u32>,
    ids: HashMap<u64, String>,
    corrupt_lines: u64,
    spans: Vec<Span>,
}

/// The figures of a run's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    /// Emits that returned Ok.
    pub sent: u64,
    /// Messages emitted with Ok that were handled at least once.
    pub handled: u64,
    /// Handlings beyond the first, of every message.
    pub duplicates: u64,
    /// Messages emitted with Ok that were never handled.
    pub lost: u64,
    /// Handlings of a message that did not arrive intact: a bad checksum, an id other than
    /// the one emitted, a number never emitted, or a log line that cannot be read.
    pub corrupt: u64,
    /// Messages whose emit failed but which were handled all the same (the broker took them
    /// before the error): allowed, and not counted as sent.
    pub handled_unconfirmed: u64,
}

impl Ledger {
    /// A ledger of the log at `path` (which may not exist yet).
    pub fn new(path: &Path) -> Self {
        Ledger {
            tail: LogTail::new(path),
            handled: HashMap::new(),
            ids: HashMap::new(),
            corrupt_lines: 0,
            spans: Vec::new(),
        }
    }

    /// Reads what was appended since the last call; returns how many lines it read.
    ///
    /// # Errors
    /// When the log cannot be read.
    pub fn read_new(&mut self) -> io::Result<usize> {
        let lines = self.tail.read_lines()?;
        for line in &lines {
            self.ingest(line);
        }
        Ok(lines.len())
    }

    fn ingest(&mut self, line: &str) {
        let fields: Vec<&str> = line.split(' ').collect();
        let [seq, id, _worker, state, start, end] = fields.as_slice() else {
            self.corrupt_lines += 1;
            return;
        };
        if let (Ok(start), Ok(end)) = (start.parse(), end.parse()) {
            self.spans.push(Span { start, end });
        }
        match (*state, seq.parse::<u64>()) {
            ("ok", Ok(seq)) => {
                *self.handled.entry(seq).or_default() += 1;
                if self.ids.entry(seq).or_insert_with(|| (*id).to_owned()) != id {
                    self.corrupt_lines += 1;
                }
            }
            _ => self.corrupt_lines += 1,
        }
    }

    /// The most handlers that ran at once, over every worker: a handler that ended at the
    /// microsecond another started did not overlap it.
    pub fn most_at_once(&self) -> usize {
        hermes_testkit::most_at_once(self.spans.iter().map(|span| (span.start, span.end)))
    }

    /// Whether every message emitted with Ok was handled.
    pub fn has_all(&self, sent: &Sent) -> bool {
        sent.ids
            .iter()
            .enumerate()
            .all(|(seq, id)| id.is_none() || self.handled.contains_key(&(seq as u64)))
    }

    /// Whether message `seq` was handled.
    pub fn contains(&self, seq: u64) -> bool {
        self.handled.contains_key(&seq)
    }

    /// The first `limit` messages emitted with Ok and never handled, each described.
    pub fn lost(&self, sent: &Sent, limit: usize) -> Vec<String> {
        sent.ids
            .iter()
            .enumerate()
            .filter(|(seq, id)| {
                // Handled means handled as the message emitted, with its id.
                id.is_some() && self.ids.get(&(*seq as u64)) != id.as_ref()
            })
            .take(limit)
            .map(|(seq, id)| {
                let id = id.as_deref().unwrap_or_default();
                format!("#{seq} (id {id}, {})", sent.how[seq])
            })
            .collect()
    }

    /// How many distinct messages were handled so far.
    pub fn distinct(&self) -> usize {
        self.handled.len()
    }

    /// The figures, against what was sent.
    pub fn counts(&self, sent: &Sent) -> Counts {
        let mut counts = Counts {
            sent: sent.ok(),
            handled: 0,
            duplicates: 0,
            lost: 0,
            corrupt: self.corrupt_lines,
            handled_unconfirmed: 0,
        };
        for (seq, times) in &self.handled {
            counts.duplicates += u64::from(times.saturating_sub(1));
            let at = usize::try_from(*seq).ok();
            let emitted = at.and_then(|at| sent.attempted.get(at));
            let id = &self.ids[seq];
            match (emitted, at.and_then(|at| sent.ids.get(at))) {
                (Some(emitted), _) if emitted != id => counts.corrupt += u64::from(*times),
                (_, Some(Some(_))) => counts.handled += 1,
                (Some(_), _) => counts.handled_unconfirmed += 1,
                (None, _) => counts.corrupt += u64::from(*times),
            }
        }
        counts.lost = counts.sent - counts.handled;
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::{Span, log_line};

    fn ms(start: u64, end: u64) -> Span {
        Span {
            start: start * 1000,
            end: end * 1000,
        }
    }

    #[test]
    fn the_counts_tell_lost_duplicated_and_corrupt_messages_apart() {
        let dir = std::env::temp_dir().join(format!("hermes-soak-ledger-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("handled.log");
        let mut sent = Sent::new(6);
        for seq in 0..6 {
            sent.record(
                seq,
                &format!("id{seq}"),
                seq != 5,
                "priority 100".to_owned(),
            );
        }
        let lines = [
            log_line(Some(0), "id0", "w1", true, ms(0, 10)),
            log_line(Some(0), "id0", "w2", true, ms(5, 15)), // a duplicate
            log_line(Some(1), "id1", "w1", true, ms(10, 20)),
            log_line(Some(2), "other", "w1", true, ms(12, 13)), // not the id emitted
            log_line(Some(3), "id3", "w1", false, ms(30, 40)),  // a bad checksum
            log_line(Some(5), "id5", "w1", true, ms(40, 50)),   // its emit failed
            log_line(Some(9), "id9", "w1", true, ms(50, 60)),   // never emitted
            "garbage\n".to_owned(),
        ];
        std::fs::write(&log, lines.concat()).unwrap();
        let mut ledger = Ledger::new(&log);
        assert_eq!(ledger.read_new().unwrap(), 8);
        assert!(!ledger.has_all(&sent));
        assert_eq!(
            ledger.lost(&sent, 2),
            ["#2 (id id2, priority 100)", "#3 (id id3, priority 100)"]
        );
        // 5..15 overlaps 0..10, then 10..20 (starting as 0..10 ends) and 12..13.
        assert_eq!(ledger.most_at_once(), 3);
        let counts = ledger.counts(&sent);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            counts,
            Counts {
                sent: 5,
                handled: 2,
                duplicates: 1,
                lost: 3,
                corrupt: 4,
                handled_unconfirmed: 1,
            }
        );
    }
}
