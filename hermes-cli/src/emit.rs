//! `hermes emit`: queue messages from the command line.

use std::path::Path;
use std::time::{Duration, SystemTime};

use hermes_core::{Emitter, Message, Priority};

use crate::Failure;

/// What to emit.
pub(crate) struct EmitArgs<'a> {
    pub(crate) message_type: &'a str,
    pub(crate) payload: Option<&'a str>,
    pub(crate) payload_file: Option<&'a Path>,
    pub(crate) priority: Priority,
    pub(crate) delay: Option<Duration>,
    pub(crate) at: Option<SystemTime>,
    pub(crate) count: u32,
    /// The longest one send may take.
    pub(crate) timeout: Duration,
}

/// Sends `count` messages and prints each id.
pub(crate) async fn emit(emitter: &Emitter, args: EmitArgs<'_>) -> Result<(), Failure> {
    let payload = match (args.payload, args.payload_file) {
        (Some(text), _) => Some(text.to_owned()),
        (None, Some(path)) => Some(std::fs::read_to_string(path).map_err(|e| {
            Failure::usage(format!(
                "cannot read the payload file {}: {e}",
                path.display()
            ))
        })?),
        (None, None) => None,
    };
    let payload: Option<serde_json::Value> = payload
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(|e| Failure::usage(format!("the payload is not JSON: {e}")))?;
    for _ in 0..args.count {
        let mut builder = Message::builder(args.message_type);
        if let Some(payload) = &payload {
            builder = builder.payload(payload);
        }
        if let Some(delay) = args.delay.filter(|d| !d.is_zero()) {
            builder = builder.delay(delay);
        }
        if let Some(at) = args.at {
            builder = builder.execute_at_time(at);
        }
        let message = builder.build().map_err(|e| Failure::usage(e.to_string()))?;
        tokio::time::timeout(args.timeout, emitter.emit(&message, args.priority))
            .await
            .map_err(|_| {
                Failure::failed(format!(
                    "emit: no answer within {} (--timeout); the ids printed were queued",
                    crate::table::seconds(args.timeout)
                ))
            })??;
        println!("{}", message.id());
    }
    Ok(())
}
