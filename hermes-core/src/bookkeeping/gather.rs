//! Settles of runs that end together, gathered into one call of the store: while one call is
//! on its way, the settles that arrive wait and go together in the next.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::Error;
use crate::driver::{JobStore, Settle};
use crate::tracking::{JobRecord, Settled, Tally};

type Answer = Result<Option<(Tally, bool)>, Error>;

/// One settle waiting for its call.
struct Waiting {
    group: String,
    member: String,
    outcome: Settled,
    record: Option<(JobRecord, Duration)>,
    answer: oneshot::Sender<Answer>,
}

/// The settles of one dispatcher, gathered.
#[derive(Default)]
pub(crate) struct Gatherer {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    waiting: Vec<Waiting>,
    /// A caller is sending calls: the others leave their settles to it.
    sending: bool,
}

/// Clears `sending` when the caller sending calls is dropped before it is done: the settles
/// still waiting are dropped, and their callers get an error (and settle again).
struct Sending<'a>(Option<&'a Gatherer>);

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        if let Some(gatherer) = self.0 {
            let mut state = gatherer.lock();
            state.sending = false;
            state.waiting.clear();
        }
    }
}

impl Gatherer {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Settles `member` of `group` in `store` as [`JobStore::settle`] does, in one call with
    /// the settles that arrive meanwhile.
    pub(crate) async fn settle(
        &self,
        store: &dyn JobStore,
        group: &str,
        member: &str,
        outcome: &Settled,
        record: Option<(&JobRecord, Duration)>,
    ) -> Answer {
        let (answer, answered) = oneshot::channel();
        let send = {
            let mut state = self.lock();
            state.waiting.push(Waiting {
                group: group.to_owned(),
                member: member.to_owned(),
                outcome: outcome.clone(),
                record: record.map(|(r, keep)| (r.clone(), keep)),
                answer,
            });
            !std::mem::replace(&mut state.sending, true)
        };
        if send {
            let mut sending = Sending(Some(self));
            loop {
                let batch = {
                    let mut state = self.lock();
                    if state.waiting.is_empty() {
                        // Done, under the lock: a settle arriving now sends its own call.
                        state.sending = false;
                        sending.0 = None;
                        break;
                    }
                    std::mem::take(&mut state.waiting)
                };
                Self::send(store, batch).await;
            }
        }
        answered.await.unwrap_or_else(|_| {
            Err(Error::Driver {
                driver: "jobs",
                message: "a settle was dropped with the call it waited for".into(),
                temporary: true,
                source: None,
            })
        })
    }

    /// Sends `batch` in one call and answers each; when the call fails, each is sent alone,
    /// so each gets its own answer.
    async fn send(store: &dyn JobStore, batch: Vec<Waiting>) {
        let settles: Vec<Settle<'_>> = batch
            .iter()
            .map(|w| {
                Settle::new(
                    &w.group,
                    &w.member,
                    &w.outcome,
                    w.record.as_ref().map(|(r, keep)| (r, *keep)),
                )
            })
            .collect();
        let answers = match store.settle_many(&settles).await {
            Ok(answers) if answers.len() == batch.len() => Some(answers),
            _ => None,
        };
        drop(settles);
        match answers {
            Some(answers) => {
                for (waiting, answer) in batch.into_iter().zip(answers) {
                    let _ = waiting.answer.send(Ok(answer));
                }
            }
            None => {
                for w in batch {
                    let record = w.record.as_ref().map(|(r, keep)| (r, *keep));
                    let answer = store.settle(&w.group, &w.member, &w.outcome, record).await;
                    let _ = w.answer.send(answer);
                }
            }
        }
    }
}
