//! The shop's vocabulary: orders, the events the order service publishes, and the fault plan
//! that decides which orders misbehave.

use serde::{Deserialize, Serialize};

/// A line of an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    pub sku: String,
    pub quantity: i64,
}

/// `OrderPlaced`, written through the outbox with the order itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderPlaced {
    pub order_id: String,
    pub customer: String,
    pub lines: Vec<Line>,
    pub total_cents: i64,
}

/// `OrderConfirmed` / `OrderCancelled`, written through the outbox when the saga ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderSettled {
    pub order_id: String,
    pub customer: String,
}

pub const ORDER_PLACED: &str = "OrderPlaced";
pub const ORDER_CONFIRMED: &str = "OrderConfirmed";
pub const ORDER_CANCELLED: &str = "OrderCancelled";

/// Which orders misbehave, and how. Deterministic, so a run's summary can be checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    pub orders: u32,
}

/// What happens to order `n` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Reserved, charged, confirmed.
    Confirmed,
    /// Its event cannot be read: every consumer of it dead-letters it; no saga starts.
    Poison,
    /// The card is declined: the reservation is released and the order cancelled.
    Declined,
}

impl FaultPlan {
    pub fn fate(&self, n: u32) -> Fate {
        if n % 10 == 7 {
            Fate::Poison
        } else if n % 5 == 3 {
            Fate::Declined
        } else {
            Fate::Confirmed
        }
    }

    pub fn count(&self, fate: Fate) -> u32 {
        (1..=self.orders).filter(|&n| self.fate(n) == fate).count() as u32
    }

    /// The email service crashes after sending and before acking the first delivery of
    /// these orders' events: the redelivery must not send a second email.
    pub fn email_crashes(&self, n: u32) -> bool {
        n % 4 == 1
    }

    /// The analytics handler panics on the first delivery of these orders' events.
    pub fn analytics_panics(&self, n: u32) -> bool {
        n % 6 == 2
    }
}

pub fn order_id(run: &str, n: u32) -> String {
    format!("order-{run}-{n:04}")
}

/// The order's number back from its id.
pub fn order_number(order_id: &str) -> Option<u32> {
    order_id.rsplit('-').next()?.parse().ok()
}

pub fn placed(run: &str, n: u32) -> OrderPlaced {
    OrderPlaced {
        order_id: order_id(run, n),
        customer: format!("customer-{}", n % 7),
        lines: vec![
            Line {
                sku: "kettle".into(),
                quantity: 1,
            },
            Line {
                sku: format!("mug-{}", n % 3),
                quantity: 2,
            },
        ],
        total_cents: 2500 + 450 * 2,
    }
}
