#!/usr/bin/env python3
"""The order-events example end to end, against any SQS + SNS endpoint:

1. the topology (topology.py): a FIFO SNS topic, four SQS queues each with its DLQ;
2. the order service (order_service.py) writes orders and their events to SQLite in one
   transaction each -- and one order whose transaction fails before its commit leaves
   neither an order nor an event;
3. the outbox relay (outbox_relay.py) publishes with PublishBatch, group id the order,
   deduplication id the outbox row; it first "dies" after publishing a batch without
   marking it, so the rows are published twice and the topic deduplicates them;
4. the four services (consumers.py) process and delete; one order's payment keeps timing
   out, so after 3 receives its message is in payment-processing-dlq.fifo;
5. the checks: every queue processed exactly the events it should, per order in order, every
   queue is empty, the one dead letter is where it should be -- with its dead-letter reason
   read from Ferry's own HTTP API when `--ferry-http` answers.

Usage: run.py [--endpoint-url URL] [--ferry-http URL] [--db FILE]
The endpoint defaults to $AWS_ENDPOINT_URL, else http://127.0.0.1:4566 (`ferry serve`).
Run it against a fresh server: it expects the queues to start empty. Ends with
"every check passed", exit status 0; a failed check exits 1 saying which.
"""

import argparse
import concurrent.futures
import json
import os
import sys
import tempfile
import urllib.error
import urllib.request

import consumers
import order_service
import outbox_relay
import topology


class CheckFailed(Exception):
    pass


def check(condition, what):
    if not condition:
        raise CheckFailed(what)
    print(f"  ok: {what}")


def depth(sqs, url):
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return sum(
        int(a[k])
        for k in [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
    )


def ferry_dead_letters(ferry_http, dlq):
    """The dead letters of `dlq` through Ferry's HTTP API (a peek: nothing is consumed),
    or None when no Ferry HTTP API answers there."""
    try:
        url = f"{ferry_http}/v1/queues/{dlq}/dead-letters?max=20"
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)["letters"]
    except (urllib.error.URLError, OSError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--endpoint-url",
        default=os.environ.get("AWS_ENDPOINT_URL", "http://127.0.0.1:4566"),
        help="the SQS + SNS endpoint (default $AWS_ENDPOINT_URL, else http://127.0.0.1:4566)",
    )
    parser.add_argument(
        "--ferry-http",
        default=os.environ.get("FERRY_HTTP_URL", "http://127.0.0.1:7071"),
        help="Ferry's HTTP API, for the dead-letter reason (default $FERRY_HTTP_URL, "
        "else http://127.0.0.1:7071)",
    )
    parser.add_argument("--db", help="the SQLite database (default: a temporary file)")
    args = parser.parse_args()

    sns, sqs = topology.clients(args.endpoint_url)

    print(f"topology on {args.endpoint_url}")
    topic, urls, dlq_urls, subscriptions = topology.create(sns, sqs)
    listed = sns.list_subscriptions_by_topic(TopicArn=topic)["Subscriptions"]
    check(
        sorted(s["Endpoint"] for s in listed)
        == sorted(topology.queue_arn(q) for q in topology.QUEUES),
        f"{topic} has the four queues subscribed",
    )
    for q in topology.QUEUES:
        if depth(sqs, urls[q]) or depth(sqs, dlq_urls[q]):
            print(f"{q} or its DLQ already holds messages: run this against a fresh server")
            return 2

    db = args.db or os.path.join(tempfile.mkdtemp(prefix="order-events-"), "orders.db")
    conn = order_service.connect(db)
    print(f"orders and outbox in {db}")
    items = [{"sku": "WIDGET-001", "quantity": 2, "unit_price_cents": 1999}]
    orders = [order_service.place_order(conn, topic, f"cust_{i}", items) for i in range(5)]
    poison = order_service.place_order(
        conn, topic, "cust_poison", items, payment_token="tok_timeout"
    )
    order_service.cancel_order(conn, topic, orders[1], "customer request")

    def crash():
        raise RuntimeError("the order service died before its commit")

    try:
        order_service.place_order(conn, topic, "cust_lost", items, before_commit=crash)
    except RuntimeError:
        pass
    def count(sql):
        return conn.execute(sql).fetchone()[0]

    check(
        count("SELECT COUNT(*) FROM orders WHERE customer_id = 'cust_lost'") == 0
        and count("SELECT COUNT(*) FROM outbox_events WHERE payload LIKE '%cust_lost%'") == 0,
        "an order whose transaction failed left neither the order nor its event",
    )
    outbox = conn.execute("SELECT id, seq, payload FROM outbox_events ORDER BY seq").fetchall()
    events = [json.loads(r["payload"]) for r in outbox]
    check(len(events) == 7, "7 events in the outbox: 6 OrderPlaced, 1 OrderCancelled")

    print("outbox relay")
    # The relay publishes the first batch and dies before marking it processed...
    published, failed, first_ids = outbox_relay.relay_once(conn, sns, mark=False)
    check(published == 7 and failed == 0, "the first relay run published 7 rows (not marked)")
    # ... so the next run publishes the same rows again: duplicates, answered as such.
    total, ids = outbox_relay.drain(conn, sns)
    check(total == 7 and ids == first_ids, "the rows published again got their first MessageIds")
    check(
        count("SELECT COUNT(*) FROM outbox_events WHERE processed_at IS NULL") == 0,
        "every outbox row is marked processed",
    )

    print("consumers")
    services = [
        consumers.Inventory(),
        consumers.Payment(),
        consumers.Email(),
        consumers.Analytics(),
    ]
    with concurrent.futures.ThreadPoolExecutor(len(services)) as pool:
        for f in [
            pool.submit(consumers.consume, topology.clients(args.endpoint_url)[1], urls[s.queue], s)
            for s in services
        ]:
            f.result()

    print("checks")
    all_ids = [e["id"] for e in events]
    poison_event = next(e["id"] for e in events if e["payload"]["order_id"] == poison)
    expected = {
        "inventory": all_ids,
        "payment": [i for i in all_ids if i != poison_event],
        "email": all_ids,
        "analytics": all_ids,
    }
    order_of = {e["id"]: e["payload"]["order_id"] for e in events}
    for s in services:
        check(
            sorted(s.processed) == sorted(expected[s.name]),
            f"{s.name} processed its {len(expected[s.name])} events, each once",
        )
        if s.queue.endswith(".fifo"):
            out_of_order = [
                order
                for order in set(order_of.values())
                if [i for i in s.processed if order_of[i] == order]
                != [i for i in expected[s.name] if order_of[i] == order]
            ]
            check(not out_of_order, f"{s.name} processed each order's events in outbox order")
        check(depth(sqs, urls[s.queue]) == 0, f"{s.queue} is empty")
    payment = services[1]
    check(
        [(f[0], f[1]) for f in payment.failures] == [(poison_event, n) for n in (1, 2, 3)],
        "payment failed the poison order's event on receives 1, 2 and 3 (maxReceiveCount 3)",
    )
    check(orders[1] not in services[0].reserved, "inventory released the cancelled order")
    for q, url in dlq_urls.items():
        want = 1 if q == "payment-processing.fifo" else 0
        check(depth(sqs, url) == want, f"{topology.dlq_name(q)} holds {want} message(s)")

    payment_dlq = topology.dlq_name("payment-processing.fifo")
    letters = ferry_dead_letters(args.ferry_http, payment_dlq)
    if letters is None:
        print(f"  (no Ferry HTTP API at {args.ferry_http}: the dead-letter reason is not read)")
    else:
        check(len(letters) == 1, f"Ferry lists one dead letter in {payment_dlq}")
        letter = letters[0]
        info = letter["dead_letter"]
        print(f"  Ferry's dead-letter record: {json.dumps(info)}")
        check(info.get("reason") == "max_deliveries", "its reason is max_deliveries")
        check(info.get("deliveries") == 3, "after 3 deliveries")
        check(info.get("origin_queue") == "payment-processing.fifo", "from payment-processing.fifo")

    # The same letter as an SQS consumer of the DLQ sees it; it stays there for triage.
    dlq_url = dlq_urls["payment-processing.fifo"]
    out = sqs.receive_message(QueueUrl=dlq_url, WaitTimeSeconds=2, AttributeNames=["All"])
    (m,) = out["Messages"]
    check(
        json.loads(json.loads(m["Body"])["Message"])["id"] == poison_event,
        "the dead letter is the poison order's event",
    )
    source = m["Attributes"].get("DeadLetterQueueSourceArn")
    check(
        source == topology.queue_arn("payment-processing.fifo"),
        "DeadLetterQueueSourceArn names payment-processing.fifo",
    )
    check(m["Attributes"]["MessageGroupId"] == poison, "its message group is the order")
    sqs.change_message_visibility(
        QueueUrl=dlq_url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
    )
    print("every check passed")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except CheckFailed as e:
        print(f"CHECK FAILED: {e}", file=sys.stderr)
        sys.exit(1)
