//! W3C trace context in a message: the value of its `traceparent` key, and with the
//! `opentelemetry` feature the span contexts it carries from an emitter to a worker.

/// Whether `value` is a W3C `traceparent` header value of version 00:
/// `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`, lower-case hex, neither id all zeros.
pub(crate) fn is_valid(value: &str) -> bool {
    parts(value).is_some()
}

/// The trace id, span id and flags of a valid `traceparent`, as hex.
fn parts(value: &str) -> Option<(&str, &str, &str)> {
    let bytes = value.as_bytes();
    // ASCII first, so that the slices below fall on character boundaries.
    if bytes.len() != 55
        || !value.is_ascii()
        || !value.starts_with("00-")
        || bytes[35] != b'-'
        || bytes[52] != b'-'
    {
        return None;
    }
    let (trace_id, span_id, flags) = (&value[3..35], &value[36..52], &value[53..]);
    let hex = |s: &str| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let zero = |s: &str| s.bytes().all(|b| b == b'0');
    (hex(trace_id) && hex(span_id) && hex(flags) && !zero(trace_id) && !zero(span_id))
        .then_some((trace_id, span_id, flags))
}

#[cfg(feature = "opentelemetry")]
mod otel {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    /// The remote span context a valid `traceparent` names.
    pub(crate) fn span_context(traceparent: &str) -> Option<SpanContext> {
        let (trace_id, span_id, flags) = super::parts(traceparent)?;
        Some(SpanContext::new(
            TraceId::from_hex(trace_id).ok()?,
            SpanId::from_hex(span_id).ok()?,
            TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
            true,
            TraceState::default(),
        ))
    }

    /// The `traceparent` of `context`, when it is valid.
    pub(crate) fn format(context: &SpanContext) -> Option<String> {
        context.is_valid().then(|| {
            format!(
                "00-{}-{}-{:02x}",
                context.trace_id(),
                context.span_id(),
                context.trace_flags().to_u8()
            )
        })
    }

    /// The `traceparent` of `span`'s OpenTelemetry span context, when the subscriber has an
    /// OpenTelemetry layer and the span is enabled.
    pub(crate) fn of_span(span: &tracing::Span) -> Option<String> {
        format(span.context().span().span_context())
    }

    /// Makes the remote span `traceparent` names the parent of `span`, which must not have
    /// been entered yet. Does nothing without an OpenTelemetry layer or for an invalid value.
    pub(crate) fn continue_trace(span: &tracing::Span, traceparent: &str) {
        if let Some(parent) = span_context(traceparent) {
            // Fails only without an OpenTelemetry layer or for a disabled span: nothing to do.
            let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(parent));
        }
    }
}

#[cfg(feature = "opentelemetry")]
pub(crate) use otel::{continue_trace, of_span};

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn only_version_00_with_lower_case_hex_and_non_zero_ids_is_valid() {
        assert!(is_valid(VALID));
        assert!(is_valid(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        ));
        for invalid in [
            "",
            "00",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-é",
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902é-01",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(!is_valid(invalid), "{invalid}");
        }
    }

    #[cfg(feature = "opentelemetry")]
    #[test]
    fn a_traceparent_reads_as_a_remote_span_context_and_back() {
        let context = otel::span_context(VALID).unwrap();
        assert!(context.is_valid());
        assert!(context.is_remote());
        assert!(context.is_sampled());
        assert_eq!(
            context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(context.span_id().to_string(), "00f067aa0ba902b7");
        assert_eq!(otel::format(&context).as_deref(), Some(VALID));
        assert!(otel::span_context("00-zz").is_none());
        assert_eq!(
            otel::format(&opentelemetry::trace::SpanContext::empty_context()),
            None
        );
    }
}
