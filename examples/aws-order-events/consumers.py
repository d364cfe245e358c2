"""The four services reading their queues: receive, process, delete.

Each message is SNS's JSON envelope around the outbox event. A handler that raises leaves
the message to SQS: it is made visible again at once (ChangeMessageVisibility 0, a failed
attempt) and retried until the queue's RedrivePolicy moves it to the dead-letter queue
after maxReceiveCount receives. Handlers are idempotent by event id, since delivery is
at least once.
"""

import json
import threading


class PaymentTimeout(Exception):
    """The payment provider did not answer; the design retries it 3 times."""


class Service:
    """What one queue's consumer did: event ids processed, in the order it processed them,
    and the failed attempts it saw."""

    # name, queue, receive batch size (the design: 1 for inventory and payment, 10 for
    # email and analytics)
    def __init__(self, name, queue, batch):
        self.name, self.queue, self.batch = name, queue, batch
        self.processed = []
        self.failures = []
        self._seen = set()
        self._lock = threading.Lock()

    def handle(self, event):
        raise NotImplementedError

    def process(self, event):
        with self._lock:
            if event["id"] in self._seen:
                return  # a redelivery of something already done
        self.handle(event)
        with self._lock:
            self._seen.add(event["id"])
            self.processed.append(event["id"])


class Inventory(Service):
    def __init__(self):
        super().__init__("inventory", "inventory-reservation.fifo", 1)
        self.reserved = {}  # order id -> items

    def handle(self, event):
        order = event["payload"]["order_id"]
        if event["type"] == "OrderPlaced":
            self.reserved.setdefault(order, event["payload"]["items"])
        elif event["type"] == "OrderCancelled":
            # Per order, in order: a cancellation always finds the reservation made.
            assert order in self.reserved, f"{order} cancelled before it was reserved"
            self.reserved.pop(order)


class Payment(Service):
    def __init__(self):
        super().__init__("payment", "payment-processing.fifo", 1)
        self.charged = {}

    def handle(self, event):
        order = event["payload"]["order_id"]
        if event["type"] == "OrderPlaced":
            if event["payload"].get("payment_token") == "tok_timeout":
                raise PaymentTimeout(f"payment provider timed out charging {order}")
            self.charged[order] = event["payload"]["subtotal_cents"]
        elif event["type"] == "OrderCancelled":
            self.charged.pop(order, None)  # a refund


class Email(Service):
    def __init__(self):
        super().__init__("email", "email-notifications", 10)
        self.sent = []

    def handle(self, event):
        self.sent.append((event["payload"]["order_id"], event["type"]))


class Analytics(Service):
    def __init__(self):
        super().__init__("analytics", "analytics-ingest", 10)
        self.rows = {}

    def handle(self, event):
        self.rows[event["id"]] = (event["type"], event["payload"]["order_id"])  # an upsert


def consume(sqs, url, service, idle_polls=2, wait=1):
    """Reads `url` until `idle_polls` long polls in a row come back empty."""
    idle = 0
    while idle < idle_polls:
        out = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=service.batch,
            WaitTimeSeconds=wait,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = out.get("Messages", [])
        idle = 0 if messages else idle + 1
        for m in messages:
            envelope = json.loads(m["Body"])
            event = json.loads(envelope["Message"])
            try:
                service.process(event)
            except Exception as e:  # noqa: BLE001 -- any failure is a failed attempt
                service.failures.append(
                    (event["id"], int(m["Attributes"]["ApproximateReceiveCount"]), str(e))
                )
                sqs.change_message_visibility(
                    QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
                )
                continue
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
