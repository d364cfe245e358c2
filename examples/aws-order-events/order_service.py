"""The order service: an order and its event written in one database transaction (the
transactional outbox), in SQLite here where the design has PostgreSQL.

The service never calls SNS. A crash after the commit leaves the event in the outbox for
the relay; a failure before it leaves neither the order nor the event.
"""

import json
import sqlite3
import uuid
from datetime import datetime, timezone

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    id          TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL,
    items       TEXT NOT NULL,
    subtotal_cents INTEGER NOT NULL CHECK (subtotal_cents > 0),
    status      TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox_events (
    id            TEXT PRIMARY KEY,
    seq           INTEGER NOT NULL UNIQUE,
    event_type    TEXT NOT NULL,
    aggregate_id  TEXT NOT NULL,
    payload       TEXT NOT NULL,
    sns_topic_arn TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    processed_at  TEXT NULL,
    error_message TEXT NULL
);
CREATE INDEX IF NOT EXISTS idx_outbox_unprocessed
    ON outbox_events (seq) WHERE processed_at IS NULL;
"""


def connect(path):
    conn = sqlite3.connect(path, isolation_level=None)  # transactions are explicit
    conn.row_factory = sqlite3.Row
    conn.executescript(SCHEMA)
    return conn


def now():
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _event(event_type, order_id, payload):
    return {
        "id": str(uuid.uuid4()),
        "type": event_type,
        "version": "1.0",
        "source": "order-service",
        "timestamp": now(),
        "correlation_id": f"req-{uuid.uuid4()}",
        "payload": {"order_id": order_id, **payload},
        "metadata": {"retry_count": 0, "original_queue": None},
    }


def _append_outbox(conn, topic_arn, event):
    seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM outbox_events").fetchone()[0]
    conn.execute(
        "INSERT INTO outbox_events (id, seq, event_type, aggregate_id, payload, sns_topic_arn,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            str(uuid.uuid4()),
            seq,
            event["type"],
            event["payload"]["order_id"],
            json.dumps(event),
            topic_arn,
            now(),
        ),
    )


def place_order(conn, topic_arn, customer_id, items, payment_token="tok_visa", before_commit=None):
    """Inserts the order and its OrderPlaced event in one transaction; the order id.
    `before_commit` runs between the writes and the commit (a place to fail in)."""
    order_id = f"ord_{uuid.uuid4().hex[:12]}"
    subtotal = sum(i["quantity"] * i["unit_price_cents"] for i in items)
    conn.execute("BEGIN")
    try:
        conn.execute(
            "INSERT INTO orders (id, customer_id, items, subtotal_cents, status)"
            " VALUES (?, ?, ?, ?, 'PLACED')",
            (order_id, customer_id, json.dumps(items), subtotal),
        )
        _append_outbox(
            conn,
            topic_arn,
            _event(
                "OrderPlaced",
                order_id,
                {
                    "customer_id": customer_id,
                    "items": items,
                    "subtotal_cents": subtotal,
                    "currency": "USD",
                    "payment_token": payment_token,
                },
            ),
        )
        if before_commit:
            before_commit()
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return order_id


def cancel_order(conn, topic_arn, order_id, reason):
    """Marks the order cancelled and appends its OrderCancelled event, in one transaction."""
    conn.execute("BEGIN")
    try:
        conn.execute("UPDATE orders SET status = 'CANCELLED' WHERE id = ?", (order_id,))
        _append_outbox(conn, topic_arn, _event("OrderCancelled", order_id, {"reason": reason}))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
