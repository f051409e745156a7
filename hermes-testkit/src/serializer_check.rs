//! Checking that a driver uses the serializer it was given, on both sides.

use std::time::Duration;

use hermes_core::{
    DEFAULT_PRIORITY, DecodeError, Driver, Error, JsonSerializer, Message, Serializer,
};

/// Hermes' JSON behind the tag `tagged:`: bytes no JSON decoder reads, for testing that a
/// driver encodes and decodes with the serializer it was given.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaggedSerializer;

const TAG: &[u8] = b"tagged:";

impl Serializer for TaggedSerializer {
    fn serialize(&self, message: &Message) -> Result<Vec<u8>, Error> {
        let mut bytes = TAG.to_vec();
        bytes.extend(JsonSerializer.serialize(message)?);
        Ok(bytes)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Message, DecodeError> {
        match bytes.strip_prefix(TAG) {
            Some(json) => JsonSerializer.deserialize(json),
            // Let the JSON decoder say why it cannot be read.
            None => JsonSerializer.deserialize(b"untagged"),
        }
    }
}

/// Checks that `tagged` (a driver given [`TaggedSerializer`]) and `plain` (one on the same
/// queue with Hermes' JSON) each use their own serializer: what `tagged` sends, `plain` reports
/// undecodable; what `tagged` sends, `tagged` receives intact.
///
/// # Panics
/// When either driver does otherwise.
pub async fn check_serializer_is_used(plain: &impl Driver, tagged: &impl Driver) {
    let wait = Duration::from_secs(10);
    let first = Message::builder("tagged").build().expect("a valid message");
    tagged
        .send(&first, DEFAULT_PRIORITY)
        .await
        .expect("sending through the tagged driver");
    match plain.receive(&[], wait).await {
        Err(Error::Undecodable { .. }) => {}
        Ok(Some(d)) => panic!(
            "the plain driver decoded tagged bytes as #{}",
            d.message().id()
        ),
        other => panic!("expected an undecodable message, got {other:?}"),
    }
    // Whatever the plain driver holds ahead goes back for the tagged one.
    plain.flush().await.expect("flushing the plain driver");
    let second = Message::builder("tagged").build().expect("a valid message");
    tagged
        .send(&second, DEFAULT_PRIORITY)
        .await
        .expect("sending through the tagged driver");
    let delivery = tagged
        .receive(&[], wait)
        .await
        .expect("receiving through the tagged driver")
        .expect("the tagged message");
    assert_eq!(delivery.message().id(), second.id());
    tagged.ack(&delivery).await.expect("acknowledging");
}
