//! The metrics layer's counters, histogram and gauge, read back from a recorder installed
//! for this test's thread only.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use ferry::middleware::metrics::{DURATION, HANDLED, IN_FLIGHT, MetricsLayer};
use ferry::middleware::{HandlerContext, HandlerError, handler_fn};
use ferry::{Received, Source};
use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use tower::{Layer, ServiceExt};

/// Every value recorded, by `name{label=value,...}` with the labels sorted.
#[derive(Clone, Default)]
struct Recorded {
    counters: Arc<Mutex<HashMap<String, u64>>>,
    gauges: Arc<Mutex<HashMap<String, f64>>>,
    histograms: Arc<Mutex<HashMap<String, Vec<f64>>>>,
}

impl Recorded {
    fn counter(&self, key: &str) -> u64 {
        self.counters.lock().unwrap().get(key).copied().unwrap_or(0)
    }
    fn gauge(&self, key: &str) -> f64 {
        self.gauges.lock().unwrap().get(key).copied().unwrap_or(0.0)
    }
    fn samples(&self, key: &str) -> Vec<f64> {
        self.histograms
            .lock()
            .unwrap()
            .get(key)
            .cloned()
            .unwrap_or_default()
    }
}

fn key_text(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

struct Handle {
    recorded: Recorded,
    key: String,
}

impl CounterFn for Handle {
    fn increment(&self, value: u64) {
        *self
            .recorded
            .counters
            .lock()
            .unwrap()
            .entry(self.key.clone())
            .or_default() += value;
    }
    fn absolute(&self, value: u64) {
        self.recorded
            .counters
            .lock()
            .unwrap()
            .insert(self.key.clone(), value);
    }
}

impl GaugeFn for Handle {
    fn increment(&self, value: f64) {
        *self
            .recorded
            .gauges
            .lock()
            .unwrap()
            .entry(self.key.clone())
            .or_default() += value;
    }
    fn decrement(&self, value: f64) {
        *self
            .recorded
            .gauges
            .lock()
            .unwrap()
            .entry(self.key.clone())
            .or_default() -= value;
    }
    fn set(&self, value: f64) {
        self.recorded
            .gauges
            .lock()
            .unwrap()
            .insert(self.key.clone(), value);
    }
}

impl HistogramFn for Handle {
    fn record(&self, value: f64) {
        self.recorded
            .histograms
            .lock()
            .unwrap()
            .entry(self.key.clone())
            .or_default()
            .push(value);
    }
}

impl Recorder for Recorded {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(Arc::new(self.handle(key)))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(Arc::new(self.handle(key)))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(Arc::new(self.handle(key)))
    }
}

impl Recorded {
    fn handle(&self, key: &Key) -> Handle {
        Handle {
            recorded: self.clone(),
            key: key_text(key),
        }
    }
}

fn message(payload: &'static str, source: &Source) -> HandlerContext {
    let received = Received {
        id: ferry::message::new_id(),
        key: None,
        headers: BTreeMap::new(),
        payload: payload.into(),
        priority: 0,
        published_at_ms: 0,
        attempt: 1,
        dead_letter: None,
    };
    HandlerContext::new(received, source)
}

#[tokio::test]
async fn handled_messages_are_counted_by_outcome_and_timed_per_source() {
    let recorded = Recorded::default();
    let _guard = metrics::set_default_local_recorder(&recorded);
    let gauge_inside = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let (recorded, gauge_inside) = (recorded.clone(), gauge_inside.clone());
        handler_fn(move |ctx: HandlerContext| {
            gauge_inside
                .lock()
                .unwrap()
                .push(recorded.gauge(&format!("{IN_FLIGHT}{{source={}}}", ctx.source())));
            async move {
                match &ctx.payload[..] {
                    b"fine" => Ok(()),
                    b"flaky" => Err(HandlerError::transient("db down")),
                    b"bad" => Err(HandlerError::permanent("unknown customer")),
                    _ => Err(HandlerError::deferred("later", std::time::Duration::ZERO)),
                }
            }
        })
    };
    let svc = MetricsLayer.layer(handler);
    let orders = Source::queue("orders");
    for payload in ["fine", "fine", "flaky", "bad", "busy"] {
        let _ = svc.clone().oneshot(message(payload, &orders)).await;
    }
    let billing = Source::subscription("orders", "billing");
    svc.oneshot(message("fine", &billing)).await.unwrap();

    let handled = |source: &str, outcome: &str| {
        recorded.counter(&format!("{HANDLED}{{outcome={outcome},source={source}}}"))
    };
    assert_eq!(handled("orders", "ack"), 2);
    assert_eq!(handled("orders", "retry"), 1);
    assert_eq!(handled("orders", "reject"), 1);
    assert_eq!(handled("orders", "deferred"), 1);
    assert_eq!(handled("orders/billing", "ack"), 1);
    let durations = recorded.samples(&format!("{DURATION}{{source=orders}}"));
    assert_eq!(durations.len(), 5);
    assert!(durations.iter().all(|d| *d >= 0.0));
    assert_eq!(
        *gauge_inside.lock().unwrap(),
        vec![1.0; 6],
        "one in flight while handling"
    );
    assert_eq!(
        recorded.gauge(&format!("{IN_FLIGHT}{{source=orders}}")),
        0.0
    );
}
