//! Messages Rust writes, read and written again by PHP as Hermes 6's `MessageSerializer` does
//! (`tests/php/message_serializer.php`): a key PHP does not know, the `traceparent`, is ignored
//! and dropped, and what PHP writes is byte for byte what Rust writes without it.
//!
//! Needs the `php` command; without it the test is skipped with a note, or fails under
//! `HERMES_TEST_STRICT=1`.

use std::io::Write as _;
use std::process::{Command, Stdio};

use hermes_core::{JsonSerializer, Message, Serializer};
use hermes_testkit::suite::{available_or_skip, strict};
use serde_json::json;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/php/message_serializer.php"
);
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Whether the `php` command runs.
fn php_available() -> Result<(), String> {
    match Command::new("php").arg("--version").output() {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(format!("`php --version` exited with {}", output.status)),
        Err(e) => Err(format!("`php` cannot be run: {e}")),
    }
}

/// What the PHP script writes for `input`, with `args`; panics unless it exits 0.
fn php(input: &[u8], args: &[&str]) -> Vec<u8> {
    let mut child = Command::new("php")
        .args(["-d", "display_errors=stderr", SCRIPT])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("php starts");
    child
        .stdin
        .take()
        .expect("php's standard input")
        .write_all(input)
        .expect("the message is written to php");
    let output = child.wait_with_output().expect("php ends");
    assert!(
        output.status.success(),
        "php exited with {}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Two messages with a traceparent: one with every field set (a payload PHP must escape, a due
/// time, retries), one with the nulls.
fn messages() -> Vec<Message> {
    let full = Message::builder("send-email")
        .id("id-1")
        .created(1637617498.172724)
        .payload(&json!({"to": "a/b@x.sk", "name": "Žltý kôň", "n": 1, "f": 1.5, "list": [1, 2], "empty": []}))
        .execute_at(1700000100.5)
        .retries(2)
        .traceparent(TRACEPARENT)
        .build()
        .unwrap();
    let bare = Message::builder("t")
        .id("0")
        .created(1700000000.0)
        .traceparent(TRACEPARENT)
        .build()
        .unwrap();
    vec![full, bare]
}

/// `message` as Rust writes it when it carries no traceparent.
fn without_traceparent(message: &Message) -> Vec<u8> {
    let mut builder = Message::builder(message.message_type())
        .id(message.id())
        .created(message.created())
        .retries(message.retries());
    if let Some(payload) = message.payload() {
        builder = builder.payload(payload);
    }
    if let Some(at) = message.execute_at() {
        builder = builder.execute_at(at);
    }
    JsonSerializer.serialize(&builder.build().unwrap()).unwrap()
}

#[test]
fn php_reads_a_message_with_a_traceparent_and_writes_it_as_rust_does_without() {
    if !available_or_skip(strict(), "php_round_trip", php_available()) {
        return;
    }
    for message in messages() {
        let bytes = JsonSerializer.serialize(&message).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.ends_with(&format!(
                ",\"retries\":{},\"traceparent\":\"{TRACEPARENT}\"}}}}",
                message.retries()
            )),
            "{text}"
        );

        let from_php = php(&bytes, &[]);
        assert_eq!(
            String::from_utf8_lossy(&from_php),
            String::from_utf8_lossy(&without_traceparent(&message)),
            "PHP writes what Rust writes without the traceparent"
        );
        let back = JsonSerializer.deserialize(&from_php).unwrap();
        assert_eq!(back.id(), message.id());
        assert_eq!(back.message_type(), message.message_type());
        assert_eq!(back.created(), message.created());
        assert_eq!(back.payload(), message.payload());
        assert_eq!(back.execute_at(), message.execute_at());
        assert_eq!(back.retries(), message.retries());
        assert_eq!(back.traceparent(), None, "PHP dropped the key");
    }
}

#[test]
fn a_php_retry_copy_of_a_message_with_a_traceparent_drops_it() {
    if !available_or_skip(strict(), "php_retry_copy", php_available()) {
        return;
    }
    for message in messages() {
        let bytes = JsonSerializer.serialize(&message).unwrap();
        let from_php = php(&bytes, &["1700000200.25"]);
        let copy = JsonSerializer.deserialize(&from_php).unwrap();
        assert_eq!(copy.id(), message.id());
        assert_eq!(copy.created(), message.created());
        assert_eq!(copy.payload(), message.payload());
        assert_eq!(copy.retries(), message.retries() + 1);
        assert_eq!(copy.execute_at(), Some(1700000200.25));
        assert_eq!(copy.traceparent(), None);
        assert_eq!(
            from_php,
            without_traceparent(&message.retry_copy(1700000200.25)),
            "PHP's retry copy is Rust's without the traceparent"
        );
    }
}

/// A message of a unique emit carries its key after the traceparent; PHP ignores it as well
/// and writes the message as Rust does without either key.
#[test]
fn php_reads_a_message_with_a_unique_key_and_writes_it_as_rust_does_without() {
    if !available_or_skip(strict(), "php_round_trip", php_available()) {
        return;
    }
    for message in messages() {
        let plain = String::from_utf8(JsonSerializer.serialize(&message).unwrap()).unwrap();
        let with_key = format!(
            "{},\"unique_key\":\"report:\\/7\"}}}}",
            plain.strip_suffix("}}").unwrap()
        );
        let held = JsonSerializer.deserialize(with_key.as_bytes()).unwrap();
        assert_eq!(held.unique_key(), Some("report:/7"));
        assert_eq!(
            JsonSerializer.serialize(&held).unwrap(),
            with_key.as_bytes(),
            "Rust writes the key back as it read it"
        );
        assert_eq!(
            held.retry_copy(1700000200.25).unique_key(),
            Some("report:/7"),
            "a retry keeps holding the key"
        );
        assert_eq!(held.replay_copy(false).unique_key(), None);

        let from_php = php(with_key.as_bytes(), &[]);
        assert_eq!(
            String::from_utf8_lossy(&from_php),
            String::from_utf8_lossy(&without_traceparent(&message)),
            "PHP writes what Rust writes without the traceparent and the key"
        );
    }
}

/// Times written by Rust are the text PHP writes for the same number: 20,000 random `created`
/// values (any double, and times with microseconds), as many due times, and a tie between two
/// shortest forms, which both write with the even digit.
#[test]
fn php_writes_every_time_as_rust_does() {
    if !available_or_skip(strict(), "php_round_trip", php_available()) {
        return;
    }
    let microseconds = || (rand::random::<f64>() * 2e15).round() / 1e6;
    // 1655314117 + 61/256: a tie between two shortest forms.
    let mut created = vec![
        1_655_314_117.0 + 61.0 / 256.0,
        1700000000.0,
        0.1 + 0.2,
        1e-7,
        1e21,
    ];
    for _ in 0..10_000 {
        created.push(microseconds());
        let any = f64::from_bits(rand::random::<u64>());
        created.push(if any.is_finite() { any } else { 0.5 });
    }
    let mut lines = Vec::new();
    for created in created {
        let message = Message::builder("t")
            .id("1")
            .created(created)
            .execute_at(microseconds())
            .build()
            .unwrap();
        lines.extend(JsonSerializer.serialize(&message).unwrap());
        lines.push(b'\n');
    }
    let output = Command::new("php")
        .args([
            "-r",
            "while (($line = fgets(STDIN)) !== false) { \
             echo json_encode(json_decode(rtrim($line, \"\\n\"), true)), \"\\n\"; }",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            // Written meanwhile, so that PHP's output never waits for a reader.
            let mut stdin = child.stdin.take().expect("stdin");
            let input = lines.clone();
            let writer = std::thread::spawn(move || stdin.write_all(&input));
            let output = child.wait_with_output();
            writer.join().expect("the writer ends")?;
            output
        })
        .expect("php runs");
    assert!(output.status.success());
    let ours = String::from_utf8(lines).unwrap();
    let theirs = String::from_utf8(output.stdout).unwrap();
    assert_eq!(ours.lines().count(), theirs.lines().count());
    for (ours, theirs) in ours.lines().zip(theirs.lines()) {
        assert_eq!(ours, theirs);
    }
}
