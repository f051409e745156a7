//! Random input on each driver's raw path, from the bytes a foreign producer puts on the queue
//! to a [`Delivery`](hermes_core::driver::Delivery) or a quarantine: random bytes, valid messages with
//! random bytes changed, and valid messages with a field of another JSON type.
//!
//! One round runs in the test suite. `HERMES_FUZZ_SECONDS` runs rounds for that long (the fuzz
//! script does), and `HERMES_FUZZ_SEED` replays a round's inputs; the seed is printed.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use hermes_core::time::unix_now;
use hermes_core::{DEFAULT_PRIORITY, Driver as _, Error, JsonSerializer, Message, Serializer as _};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::support::{PATIENCE, ack, message, open, send};
use super::{Harness, Outcome};

/// How many inputs one round pushes, before the harness's scale.
const ROUND: usize = 24;

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

/// A random JSON value, nested at most `depth` deep.
fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..if depth == 0 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(rng.random::<i64>()),
        3 => json!(rng.random::<f64>() * 10f64.powi(rng.random_range(-5..300))),
        4 => json!(""),
        5 => {
            let len = rng.random_range(0..12);
            json!((0..len).map(|_| rng.random::<char>()).collect::<String>())
        }
        6 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| random_value(rng, depth - 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.random_range(0..4))
                .map(|i| (format!("k{i}"), random_value(rng, depth - 1)))
                .collect(),
        ),
    }
}

/// A valid message's bytes, as the driver's own serializer writes them.
fn valid_bytes(rng: &mut StdRng) -> Vec<u8> {
    let message = Message::builder("fuzz")
        .payload(&json!({ "v": random_value(rng, 2) }))
        .retries(rng.random_range(0..5))
        .build()
        .expect("a valid message");
    JsonSerializer.serialize(&message).expect("encoding")
}

/// One random input.
fn random_input(rng: &mut StdRng) -> Vec<u8> {
    match rng.random_range(0..4) {
        // Random bytes.
        0 => (0..rng.random_range(0..200))
            .map(|_| rng.random())
            .collect(),
        // A valid message with a few bytes changed, put in or taken out.
        1 => {
            let mut bytes = valid_bytes(rng);
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(0..bytes.len());
                match rng.random_range(0..4) {
                    0 => bytes[at] = rng.random(),
                    1 => bytes.insert(at, rng.random()),
                    2 => {
                        bytes.remove(at);
                    }
                    _ => bytes.truncate(at.max(1)),
                }
                if bytes.is_empty() {
                    break;
                }
            }
            bytes
        }
        // A valid message with one field of a random JSON type.
        2 => {
            let mut value: Value = serde_json::from_slice(&valid_bytes(rng)).expect("our JSON");
            let fields = ["id", "type", "created", "execute_at", "retries", "payload"];
            let field = fields[rng.random_range(0..fields.len())];
            value["message"][field] = random_value(rng, 2);
            serde_json::to_vec(&value).expect("encoding")
        }
        // A valid message.
        _ => valid_bytes(rng),
    }
}

/// What a driver must do with `bytes`: deliver the message it decodes to (`Some(id)`), report it
/// undecodable (`None`). Inputs that decode to a message due later or one `check` refuses are
/// not used (`Err`), as their fate is another scenario's; nor are those without an id, which
/// get a new one at each decoding.
fn expected(bytes: &[u8]) -> Result<Option<String>, ()> {
    match JsonSerializer.deserialize(bytes) {
        Err(_) => Ok(None),
        Ok(m) if m.check().is_ok() && m.is_due_at(unix_now()) => {
            let again = JsonSerializer.deserialize(bytes).map_err(|_| ())?;
            (again.id() == m.id())
                .then(|| Some(m.id().to_owned()))
                .ok_or(())
        }
        Ok(_) => Err(()),
    }
}

/// Rounds of random inputs pushed raw, then a good message: each input that decodes is
/// delivered, each that does not is reported undecodable (briefly, never panicking or hanging)
/// and quarantined, and the good message behind them arrives.
pub async fn random_raw_inputs_are_delivered_or_quarantined<H: Harness>(
    h: &H,
    queue: &str,
) -> Outcome {
    let seed = env_number("HERMES_FUZZ_SEED").unwrap_or_else(rand::random);
    let budget = Duration::from_secs(env_number("HERMES_FUZZ_SECONDS").unwrap_or(0));
    eprintln!("random raw inputs: seed {seed} (HERMES_FUZZ_SEED replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let per_round = ((ROUND as f64 * h.scale()).ceil() as usize).max(4);
    let driver = open(h, queue).await;
    let started = Instant::now();
    let (mut rounds, mut quarantined) = (0usize, 0usize);
    loop {
        let mut pushed = HashSet::new();
        let mut inputs = HashMap::new();
        let (mut delivered_ids, mut undecodable_inputs) = (Vec::new(), 0);
        while pushed.len() < per_round {
            let bytes = random_input(&mut rng);
            let Ok(expectation) = expected(&bytes) else {
                continue;
            };
            if !h.carries_raw(&bytes) || !pushed.insert(bytes.clone()) {
                continue;
            }
            h.push_raw(queue, &bytes).await.expect("pushing raw bytes");
            match expectation {
                Some(id) => {
                    inputs.insert(id.clone(), bytes);
                    delivered_ids.push(id);
                }
                None => undecodable_inputs += 1,
            }
        }
        let good = message("good", rounds);
        send(&driver, &good, DEFAULT_PRIORITY).await;
        delivered_ids.push(good.id().to_owned());

        let (mut got, mut undecodable) = (Vec::new(), 0);
        while got.len() < delivered_ids.len() || undecodable < undecodable_inputs {
            match driver.receive(&[], PATIENCE).await {
                Ok(Some(d)) => {
                    got.push(d.message().id().to_owned());
                    ack(&driver, &d).await;
                }
                Ok(None) => break,
                Err(Error::Undecodable { source, .. }) => {
                    let text = source.to_string();
                    assert!(text.len() < 400, "a long error: {text}");
                    undecodable += 1;
                }
                Err(e) => panic!("unexpected error (seed {seed}): {e}"),
            }
        }
        got.sort();
        delivered_ids.sort();
        let missing: Vec<String> = delivered_ids
            .iter()
            .filter(|id| !got.contains(id))
            .map(|id| {
                inputs
                    .get(id)
                    .map_or(id.clone(), |b| String::from_utf8_lossy(b).into())
            })
            .collect();
        assert_eq!(
            got, delivered_ids,
            "the decodable inputs (seed {seed}); not delivered: {missing:?}"
        );
        assert_eq!(
            undecodable, undecodable_inputs,
            "each undecodable input is reported once (seed {seed})"
        );
        quarantined += undecodable;
        rounds += 1;
        if started.elapsed() >= budget {
            break;
        }
    }
    assert_eq!(
        h.quarantined(queue).await.expect("counting the quarantine"),
        quarantined,
        "every undecodable input is quarantined (seed {seed})"
    );
    eprintln!("random raw inputs: {rounds} rounds of {per_round}, {quarantined} quarantined");
    Outcome::Passed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inputs_mix_decodable_and_undecodable_ones() {
        let mut rng = StdRng::seed_from_u64(7);
        let outcomes: Vec<_> = (0..400)
            .map(|_| expected(&random_input(&mut rng)))
            .collect();
        let delivered = outcomes.iter().filter(|o| matches!(o, Ok(Some(_)))).count();
        let undecodable = outcomes.iter().filter(|o| matches!(o, Ok(None))).count();
        assert!(delivered > 50, "{delivered} decodable inputs");
        assert!(undecodable > 150, "{undecodable} undecodable inputs");
    }
}
