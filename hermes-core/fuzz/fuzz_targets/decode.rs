//! Any bytes given to the decoder: it never panics or hangs; a refusal is short and measures
//! the input rather than quoting it; a message it accepts and `check` passes encodes again to
//! bytes that decode to the same message.

#![no_main]

use hermes_core::{JsonSerializer, Serializer as _};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    match JsonSerializer.deserialize(bytes) {
        Ok(message) => {
            if message.check().is_ok() {
                let again = JsonSerializer.serialize(&message).expect("re-encoding");
                let back = JsonSerializer.deserialize(&again).expect("decoding our own bytes");
                assert_eq!(back.id(), message.id());
                assert_eq!(back.message_type(), message.message_type());
                assert_eq!(back.payload(), message.payload());
            }
        }
        Err(error) => {
            assert!(error.to_string().len() < 400, "a long refusal");
            assert_eq!(error.len(), bytes.len());
        }
    }
});
