//! The cost of sealing: encode and decode µs per message with `SealingSerializer` (sealed;
//! sealed and compressed; compressed alone) beside plain `JsonSerializer` in the same run, for
//! a small payload (about 100 bytes) and a large one (about 10 KB).
//!
//! `cargo bench -p hermes-seal --bench seal` (`HERMES_BENCH_N` messages per figure, default
//! 100,000 small and a tenth of that large).

use std::hint::black_box;
use std::time::Instant;

use hermes_core::{JsonSerializer, Message, Serializer};
use hermes_seal::{SealKey, SealKeys, SealingSerializer};

fn small() -> Message {
    Message::builder("send-email")
        .payload(&serde_json::json!({"to": "someone@example.com", "user_id": 12345, "template": "welcome"}))
        .build()
        .unwrap()
}

fn large() -> Message {
    let rows: Vec<String> = (0..400).map(|i| format!("row {i}: some text")).collect();
    Message::builder("report")
        .payload(&serde_json::json!({ "rows": rows }))
        .build()
        .unwrap()
}

/// µs per encode and per decode of `message` with `serializer`, over `n` rounds.
fn measure(serializer: &dyn Serializer, message: &Message, n: usize) -> (f64, f64, usize) {
    let bytes = serializer.serialize(message).unwrap();
    let start = Instant::now();
    for _ in 0..n {
        black_box(serializer.serialize(black_box(message)).unwrap());
    }
    let encode = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    let start = Instant::now();
    for _ in 0..n {
        black_box(serializer.deserialize(black_box(&bytes)).unwrap());
    }
    let decode = start.elapsed().as_secs_f64() * 1e6 / n as f64;
    (encode, decode, bytes.len())
}

fn main() {
    let n: usize = std::env::var("HERMES_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let keys = SealKeys::new(SealKey::generate("bench").unwrap());
    let serializers: [(&str, Box<dyn Serializer>); 4] = [
        ("JsonSerializer (plain)", Box::new(JsonSerializer)),
        ("sealed", Box::new(SealingSerializer::new(keys.clone()))),
        (
            "sealed, compressed over 1 KiB",
            Box::new(SealingSerializer::new(keys).compress_over(1024)),
        ),
        (
            "compressed over 1 KiB",
            Box::new(SealingSerializer::compress_only(1024)),
        ),
    ];
    for (label, message, rounds) in [
        ("small payload", small(), n),
        ("large payload", large(), n / 10),
    ] {
        println!("-- {label} ({rounds} messages per figure)");
        let (plain_encode, plain_decode, _) = measure(&JsonSerializer, &message, rounds);
        for (name, serializer) in &serializers {
            let (encode, decode, len) = measure(serializer.as_ref(), &message, rounds);
            println!(
                "{name:<32} encode {encode:>7.2} µs ({:>5.2}x plain) | decode {decode:>7.2} µs ({:>5.2}x plain) | {len} bytes",
                encode / plain_encode,
                decode / plain_decode
            );
        }
    }
}
