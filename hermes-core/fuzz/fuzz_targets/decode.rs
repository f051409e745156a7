//! Any bytes given to the decoder: it never panics or hangs; a refusal is short and measures
//! the input rather than quoting it; a message it accepts and `check` passes encodes to bytes
//! that decode to the same id and type and encode to the same bytes again. (Not always to the
//! same payload value: as PHP's `json_encode`, the encoder writes a whole float such as 2.0 as
//! `2`, which reads back as an integer.)

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
                let third = JsonSerializer.serialize(&back).expect("re-encoding");
                assert_eq!(third, again, "the encoding is stable after one round");
            }
        }
        Err(error) => {
            assert!(error.to_string().len() < 400, "a long refusal");
            assert_eq!(error.len(), bytes.len());
        }
    }
});
