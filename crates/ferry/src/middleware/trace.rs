//! W3C Trace Context propagation: each message is handled in a `tracing` span that
//! continues the producer's trace (from the message's `traceparent` header), and a
//! handler publishing onward injects a child `traceparent` so the trace goes on.
//!
//! The header is parsed by hand — four dash-separated hex fields — rather than through the
//! `opentelemetry` crates, to keep their build cost out of every application; an
//! OpenTelemetry subscriber (e.g. `tracing-opentelemetry`) still sees the ids as span
//! fields under their OpenTelemetry names.
//!
//! Span fields: `trace_id`, `span_id`, `parent_span_id` (hex, as OpenTelemetry writes
//! them), `messaging.system` (`ferry`), `messaging.operation.type` (`process`),
//! `messaging.destination.name` (the source), `messaging.message.id`,
//! `messaging.delivery.attempt`, and `outcome` once known (`ack`, `retry`, `reject`,
//! `deferred`).

use std::fmt::Write;
use std::task::{Context, Poll};

use tower::{Layer, Service, ServiceExt};
use tracing::Instrument;

use crate::message::Message;

use super::{HandlerContext, HandlerError, HandlerFuture};

/// The header that carries the trace context.
pub const TRACEPARENT: &str = "traceparent";

/// A position in a trace: the trace, the span, and the sampled flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceContext {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    flags: u8,
}

impl TraceContext {
    /// Parses a `traceparent` per W3C Trace Context: `version-traceid-parentid-flags`,
    /// lowercase hex of 2, 32, 16 and 2 digits. `None` when malformed: version `ff`, an
    /// all-zero trace or parent id, uppercase or wrong lengths. A version above `00` may
    /// carry more fields after a dash; they are ignored, as the spec asks.
    pub fn parse(traceparent: &str) -> Option<TraceContext> {
        let header = traceparent.trim_matches(|c| c == ' ' || c == '\t');
        let bytes = header.as_bytes();
        if bytes.len() < 55 {
            return None;
        }
        let version = hex_byte(&bytes[0..2])?;
        if version == 0xff
            || (version == 0 && bytes.len() != 55)
            || (bytes.len() > 55 && bytes[55] != b'-')
        {
            return None;
        }
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let mut trace_id = [0u8; 16];
        for (i, byte) in trace_id.iter_mut().enumerate() {
            *byte = hex_byte(&bytes[3 + 2 * i..5 + 2 * i])?;
        }
        let mut span_id = [0u8; 8];
        for (i, byte) in span_id.iter_mut().enumerate() {
            *byte = hex_byte(&bytes[36 + 2 * i..38 + 2 * i])?;
        }
        let flags = hex_byte(&bytes[53..55])?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceContext {
            trace_id,
            span_id,
            flags,
        })
    }

    /// The start of a new trace, sampled.
    pub fn new_root() -> TraceContext {
        TraceContext {
            trace_id: nonzero_random(),
            span_id: nonzero_random(),
            flags: SAMPLED,
        }
    }

    /// A new span in the same trace, with the same flags.
    pub fn child(&self) -> TraceContext {
        TraceContext {
            span_id: nonzero_random(),
            ..*self
        }
    }

    pub fn trace_id(&self) -> String {
        hex(&self.trace_id)
    }

    pub fn span_id(&self) -> String {
        hex(&self.span_id)
    }

    pub fn sampled(&self) -> bool {
        self.flags & SAMPLED != 0
    }

    /// This context as a version-00 `traceparent`: the flags other than `sampled` are not
    /// propagated, as the spec asks of a version-00 writer.
    pub fn to_traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            self.trace_id(),
            self.span_id(),
            self.flags & SAMPLED
        )
    }

    /// Sets `message`'s `traceparent` to a child of this span: a message published while
    /// handling continues the handler's trace.
    pub fn inject(&self, message: &mut Message) {
        message
            .headers
            .insert(TRACEPARENT.to_owned(), self.to_traceparent());
    }
}

const SAMPLED: u8 = 0x01;

fn hex_byte(pair: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(digit(pair[0])? << 4 | digit(pair[1])?)
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

fn nonzero_random<const N: usize>() -> [u8; N] {
    loop {
        let mut id = [0u8; N];
        fastrand::fill(&mut id);
        if id != [0; N] {
            return id;
        }
    }
}

/// Opens a span per message continuing its trace; the handler finds its own span's
/// context in [`HandlerContext::trace`].
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceLayer;

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;
    fn layer(&self, inner: S) -> Trace<S> {
        Trace { inner }
    }
}

/// See [`TraceLayer`].
#[derive(Debug, Clone)]
pub struct Trace<S> {
    inner: S,
}

impl<S> Service<HandlerContext> for Trace<S>
where
    S: Service<HandlerContext, Response = (), Error = HandlerError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = ();
    type Error = HandlerError;
    type Future = HandlerFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), HandlerError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, ctx: HandlerContext) -> HandlerFuture {
        let inner = self.inner.clone();
        let parent = ctx.header(TRACEPARENT).and_then(TraceContext::parse);
        if parent.is_none() && ctx.header(TRACEPARENT).is_some() {
            tracing::debug!(message.id = %ctx.id, "malformed traceparent ignored; a new trace starts");
        }
        let own = parent.map_or_else(TraceContext::new_root, |p| p.child());
        let parent_span_id = parent.map(|p| p.span_id());
        let span = tracing::info_span!(
            "ferry.handle",
            otel.kind = "consumer",
            trace_id = %own.trace_id(),
            span_id = %own.span_id(),
            parent_span_id = parent_span_id.as_deref(),
            messaging.system = "ferry",
            messaging.operation.type = "process",
            messaging.destination.name = ctx.source(),
            messaging.message.id = %ctx.id,
            messaging.delivery.attempt = ctx.attempt,
            outcome = tracing::field::Empty,
        );
        let ctx = ctx.with_trace(own);
        let recorder = span.clone();
        Box::pin(
            async move {
                let result = inner.oneshot(ctx).await;
                let outcome = match &result {
                    Ok(()) => "ack",
                    Err(e) => e.outcome(),
                };
                recorder.record("outcome", outcome);
                result
            }
            .instrument(span),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_survives_a_round_trip() {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let parsed = TraceContext::parse(header).unwrap();
        assert_eq!(parsed.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parsed.span_id(), "00f067aa0ba902b7");
        assert!(parsed.sampled());
        assert_eq!(parsed.to_traceparent(), header);
    }
}
