//! `hermes dead`: list, show, replay and purge dead letters.

use hermes_core::inspect::{DeadLetter, QueueState, Replay};
use hermes_core::{Driver, Priority};
use serde_json::{Value, json};

use crate::Failure;
use crate::args::DeadCommand;
use hermes_dashboard::view::message_json;

/// How many dead letters one replay call takes: the progress bar moves by this much.
const REPLAY_CHUNK: usize = 500;

/// Runs one `hermes dead` command on the queue of `priority`.
pub(crate) async fn dead(
    driver: &dyn Driver,
    priority: Priority,
    command: &DeadCommand,
) -> Result<(), Failure> {
    match command {
        DeadCommand::Ls { limit, json } => {
            let letters = crate::facet::dead_letters(driver)?
                .list(priority, *limit)
                .await?;
            if *json {
                let list: Vec<Value> = letters.iter().map(letter_json).collect();
                println!("{}", Value::Array(list));
            } else {
                print!("{}", table(&letters));
            }
        }
        DeadCommand::Show { id } => {
            let letters = crate::facet::dead_letters(driver)?
                .list(priority, usize::MAX)
                .await?;
            let letter = letters
                .iter()
                .find(|l| &l.id == id)
                .ok_or_else(|| Failure::failed(format!("no dead letter {id}")))?;
            let mut shown = letter_json(letter);
            shown["message"] = letter.message.as_ref().map_or(Value::Null, message_json);
            println!(
                "{}",
                serde_json::to_string_pretty(&shown).unwrap_or_default()
            );
        }
        DeadCommand::Replay {
            ids,
            all,
            message_type,
            keep_retries,
        } => {
            if ids.is_empty() && !all {
                return Err(Failure::usage(
                    "name the dead letters to replay, or replay --all",
                ));
            }
            let narrowed = |mut replay: Replay| {
                if let Some(t) = message_type {
                    replay = replay.of_type(t.clone());
                }
                if *keep_retries {
                    replay = replay.keeping_retries();
                }
                replay
            };
            let chosen = narrowed(if *all {
                Replay::all()
            } else {
                Replay::ids(ids.iter().cloned())
            });
            let dead = crate::facet::dead_letters(driver)?;
            let selected: Vec<String> = dead
                .list(priority, usize::MAX)
                .await?
                .iter()
                .filter(|letter| chosen.selects(letter))
                .map(|letter| letter.id.clone())
                .collect();
            let bar = crate::progress::bar(selected.len() as u64, "replaying");
            let mut n = 0;
            for part in selected.chunks(REPLAY_CHUNK) {
                let replayed = dead
                    .replay(priority, &narrowed(Replay::ids(part.iter().cloned())))
                    .await;
                match replayed {
                    Ok(replayed) => n += replayed,
                    Err(e) => {
                        bar.abandon();
                        println!("replayed {n} dead letters before an error");
                        return Err(e.into());
                    }
                }
                bar.inc(part.len() as u64);
            }
            bar.finish_and_clear();
            println!("replayed {n} dead letters");
        }
        DeadCommand::Purge { yes } => {
            crate::peek::purge(driver, priority, QueueState::Dead, *yes).await?;
        }
    }
    Ok(())
}

fn table(letters: &[DeadLetter]) -> String {
    let mut rows = vec![[
        "id".to_owned(),
        "type".to_owned(),
        "kind".to_owned(),
        "handler".to_owned(),
        "retries".to_owned(),
        "error".to_owned(),
    ]];
    for l in letters {
        rows.push([
            l.id.clone(),
            l.message
                .as_ref()
                .map_or_else(|| "-".to_owned(), |m| m.message_type().to_owned()),
            l.reason.kind.to_string(),
            l.reason.handler.clone().unwrap_or_else(|| "-".to_owned()),
            l.reason.retries.to_string(),
            l.reason.error.clone(),
        ]);
    }
    crate::table::render(&rows)
}

fn letter_json(l: &DeadLetter) -> Value {
    json!({
        "id": l.id,
        "priority": l.priority,
        "type": l.message.as_ref().map(|m| m.message_type()),
        "kind": l.reason.kind.as_str(),
        "error": l.reason.error,
        "handler": l.reason.handler,
        "at": l.reason.at,
        "retries": l.reason.retries,
    })
}
