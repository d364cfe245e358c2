"""The outbox relay: publishes unprocessed outbox rows to their SNS topic, ten at a time
with PublishBatch, then marks them processed.

MessageGroupId is the order id (every queue sees one order's events in order) and
MessageDeduplicationId the outbox row's id: a relay that published a batch and died before
marking it publishes the same rows again, and the FIFO topic answers them as duplicates
within its 5-minute window instead of delivering them twice.
"""

import json

from order_service import now

BATCH = 10  # PublishBatch's limit


def relay_once(conn, sns, mark=True):
    """Publishes up to one batch of the oldest unprocessed rows. Returns
    (rows published, rows failed, {row id: MessageId}). With `mark=False` the rows stay
    unprocessed: a relay that died between publishing and marking."""
    rows = conn.execute(
        "SELECT id, seq, event_type, aggregate_id, payload, sns_topic_arn FROM outbox_events"
        " WHERE processed_at IS NULL ORDER BY seq LIMIT ?",
        (BATCH,),
    ).fetchall()
    if not rows:
        return 0, 0, {}
    by_topic = {}
    for row in rows:
        by_topic.setdefault(row["sns_topic_arn"], []).append(row)
    published, failed, message_ids = 0, 0, {}
    for topic_arn, topic_rows in by_topic.items():
        entries = [
            {
                "Id": f"row-{row['seq']}",
                "Message": row["payload"],
                "MessageGroupId": json.loads(row["payload"])["payload"]["order_id"],
                "MessageDeduplicationId": row["id"],
                "MessageAttributes": {
                    "event_type": {"DataType": "String", "StringValue": row["event_type"]}
                },
            }
            for row in topic_rows
        ]
        out = sns.publish_batch(TopicArn=topic_arn, PublishBatchRequestEntries=entries)
        row_of = {f"row-{row['seq']}": row for row in topic_rows}
        conn.execute("BEGIN")
        for ok in out.get("Successful", []):
            row = row_of[ok["Id"]]
            message_ids[row["id"]] = ok["MessageId"]
            if mark:
                conn.execute(
                    "UPDATE outbox_events SET processed_at = ?, error_message = NULL"
                    " WHERE id = ?",
                    (now(), row["id"]),
                )
            published += 1
        for bad in out.get("Failed", []):
            conn.execute(
                "UPDATE outbox_events SET error_message = ? WHERE id = ?",
                (f"{bad['Code']}: {bad.get('Message', '')}", row_of[bad["Id"]]["id"]),
            )
            failed += 1
        conn.execute("COMMIT")
    return published, failed, message_ids


def drain(conn, sns):
    """Relays until the outbox has no unprocessed row (or a batch fails); the totals."""
    total, message_ids = 0, {}
    while True:
        published, failed, ids = relay_once(conn, sns)
        total += published
        message_ids.update(ids)
        if failed:
            raise RuntimeError(f"{failed} outbox rows failed to publish; see error_message")
        if published == 0:
            return total, message_ids
