//! W3C `traceparent` propagation through the handler middleware: parsing by the spec, the
//! span per message with its OpenTelemetry-named fields, a malformed header ignored, and a
//! message published while handling continuing the trace — across the embedded broker.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry::middleware::trace::{TRACEPARENT, TraceContext, TraceLayer};
use ferry::middleware::{HandlerContext, HandlerError, Worker, handler_fn, stack};
use ferry::{ConsumerOptions, Destination, Ferry, Message, QueueDecl, Received, Source};
use tower::{Layer, ServiceExt};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const PARENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

#[test]
fn traceparent_parsing_follows_the_w3c_format() {
    let parsed = TraceContext::parse(PARENT).expect("the spec's own example");
    assert_eq!(parsed.trace_id(), PARENT_TRACE);
    assert_eq!(parsed.span_id(), PARENT_SPAN);
    assert!(parsed.sampled());
    let unsampled = TraceContext::parse(&PARENT.replace("-01", "-00")).unwrap();
    assert!(!unsampled.sampled());
    // A later version may append fields after a dash; the four known ones still count.
    let future = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next";
    assert_eq!(
        TraceContext::parse(future).unwrap().trace_id(),
        PARENT_TRACE
    );
    for malformed in [
        "",
        "garbage",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // uppercase
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero parent id
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  // short trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // v00 with more
        "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01", // not a dash
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01", // not hex
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", // no dash after
    ] {
        assert_eq!(TraceContext::parse(malformed), None, "{malformed:?}");
    }
}

#[test]
fn a_child_keeps_the_trace_and_takes_a_new_span() {
    let parent = TraceContext::parse(PARENT).unwrap();
    let child = parent.child();
    assert_eq!(child.trace_id(), PARENT_TRACE);
    assert_ne!(child.span_id(), PARENT_SPAN);
    let mut message = Message::new("x");
    child.inject(&mut message);
    assert_eq!(
        message.headers[TRACEPARENT],
        format!("00-{PARENT_TRACE}-{}-01", child.span_id())
    );
    let root = TraceContext::new_root();
    assert_ne!(root.trace_id(), PARENT_TRACE);
    assert_eq!(TraceContext::parse(&root.to_traceparent()), Some(root));
}

/// A span's name and fields.
type SpanSeen = (String, HashMap<String, String>);

/// Spans as a subscriber saw them, by span id.
#[derive(Clone, Default)]
struct Spans {
    spans: Arc<Mutex<HashMap<u64, SpanSeen>>>,
    next: Arc<AtomicU64>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl Spans {
    fn named(&self, name: &str) -> Vec<HashMap<String, String>> {
        let spans = self.spans.lock().unwrap();
        let mut ids: Vec<_> = spans.keys().copied().collect();
        ids.sort();
        ids.iter()
            .filter(|id| spans[id].0 == name)
            .map(|id| spans[id].1.clone())
            .collect()
    }
}

impl Subscriber for Spans {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.spans
            .lock()
            .unwrap()
            .insert(id, (attrs.metadata().name().to_owned(), fields));
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        if let Some((_, fields)) = self.spans.lock().unwrap().get_mut(&span.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn received(headers: BTreeMap<String, String>) -> Received {
    Received {
        id: "01JMESSAGE0000000000000000".into(),
        key: None,
        headers,
        payload: "{}".into(),
        priority: 0,
        published_at_ms: 0,
        attempt: 2,
        dead_letter: None,
    }
}

/// Runs one message with `headers` through the trace layer; the handler's view of the
/// trace, and the span's fields.
async fn traced(headers: BTreeMap<String, String>) -> (TraceContext, HashMap<String, String>) {
    let spans = Spans::default();
    let _guard = tracing::subscriber::set_default(spans.clone());
    let seen = Arc::new(Mutex::new(None));
    let handler = {
        let seen = seen.clone();
        handler_fn(move |ctx: HandlerContext| {
            *seen.lock().unwrap() = ctx.trace().copied();
            async { Ok::<(), HandlerError>(()) }
        })
    };
    let ctx = HandlerContext::new(
        received(headers),
        &Source::subscription("orders", "billing"),
    );
    TraceLayer.layer(handler).oneshot(ctx).await.unwrap();
    let own = seen.lock().unwrap().expect("the handler sees its trace");
    let mut spans = spans.named("ferry.handle");
    assert_eq!(spans.len(), 1, "one span per message");
    (own, spans.remove(0))
}

#[tokio::test]
async fn a_handled_message_continues_the_producers_trace_in_its_span() {
    let headers = BTreeMap::from([(TRACEPARENT.to_owned(), PARENT.to_owned())]);
    let (own, span) = traced(headers).await;
    assert_eq!(own.trace_id(), PARENT_TRACE);
    assert_ne!(own.span_id(), PARENT_SPAN);
    assert_eq!(span["trace_id"], PARENT_TRACE);
    assert_eq!(span["span_id"], own.span_id());
    assert_eq!(span["parent_span_id"], PARENT_SPAN);
    assert_eq!(span["messaging.message.id"], "01JMESSAGE0000000000000000");
    assert_eq!(span["messaging.destination.name"], "orders/billing");
    assert_eq!(span["messaging.delivery.attempt"], "2");
    assert_eq!(span["messaging.system"], "ferry");
    assert_eq!(span["outcome"], "ack");
}

#[tokio::test]
async fn a_malformed_traceparent_is_ignored_and_a_new_trace_started() {
    let bad = PARENT.replace("4bf9", "XXXX");
    let headers = BTreeMap::from([(TRACEPARENT.to_owned(), bad)]);
    let (own, span) = traced(headers).await;
    assert_ne!(own.trace_id(), PARENT_TRACE);
    assert_eq!(own.trace_id().len(), 32);
    assert_eq!(span["trace_id"], own.trace_id());
    assert!(
        !span.contains_key("parent_span_id"),
        "no parent: a new trace"
    );

    let (without, _) = traced(BTreeMap::new()).await;
    assert_ne!(
        without.trace_id(),
        own.trace_id(),
        "each new trace is its own"
    );
}

#[tokio::test]
async fn a_message_published_while_handling_continues_the_trace_across_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Ferry::connect(&format!("embedded:{}", dir.path().display()))
        .await
        .unwrap();
    for name in ["orders", "invoices"] {
        ferry.declare_queue(&QueueDecl::new(name)).await.unwrap();
    }
    ferry
        .publisher(Destination::queue("orders"))
        .send(Message::new("order 7").with_header(TRACEPARENT, PARENT))
        .await
        .unwrap();

    let handler_span = Arc::new(Mutex::new(None));
    let handler = {
        let (ferry, handler_span) = (ferry.clone(), handler_span.clone());
        handler_fn(move |ctx: HandlerContext| {
            let (ferry, handler_span) = (ferry.clone(), handler_span.clone());
            async move {
                let trace = *ctx.trace().expect("traced");
                *handler_span.lock().unwrap() = Some(trace);
                let mut invoice = Message::new("invoice for order 7");
                trace.inject(&mut invoice);
                ferry
                    .publisher(Destination::queue("invoices"))
                    .send(invoice)
                    .await?;
                Ok(())
            }
        })
    };
    let consumer = ferry
        .consumer(Source::queue("orders"), ConsumerOptions::default())
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(
        Worker::new(consumer, stack().build(handler))
            .poll(Duration::from_millis(50))
            .run(async move {
                let _ = stopped.await;
            }),
    );

    let mut invoices = ferry
        .consumer(Source::queue("invoices"), ConsumerOptions::default())
        .await
        .unwrap();
    let invoice = invoices
        .next_within(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the handler published onward");
    let sent = TraceContext::parse(invoice.header(TRACEPARENT).unwrap()).unwrap();
    let handler_span = handler_span.lock().unwrap().unwrap();
    assert_eq!(sent.trace_id(), PARENT_TRACE, "the same trace");
    assert_eq!(
        sent.span_id(),
        handler_span.span_id(),
        "a child of the handler's span"
    );
    invoice.ack().await.unwrap();
    stop.send(()).unwrap();
    worker.await.unwrap().unwrap();
    ferry.close().await.unwrap();
}
