//! Temporary queues on RabbitMQ: an exclusive classic queue, which the broker deletes when
//! the connection that declared it closes — a crashed process's connection too, once the
//! socket goes or heartbeats stop — and, through `x-expires`, when nothing has used it
//! (no subscription, no get, no redeclare) for the idle timeout.
//!
//! Exclusive also means only this connection may consume it; every consumer of this
//! transport shares the connection, so the owner name is only for the SDK's API. Others
//! publish to it through the default exchange, which exclusivity does not restrict.
//! Not auto-delete: that deletes a queue when its last basic.consume subscriber leaves,
//! and this transport's consumers subscribe only while they fetch (`consume`), so the
//! queue would go with the first pause between fetches.

use std::sync::Arc;

use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable};

use super::engine::Inner;
use super::topology::{self, Settings};
use crate::error::Result;
use crate::message::new_id;
use crate::spec::DeliveryPolicy;
use crate::temporary::{TemporaryQueue, TemporaryQueueDecl, owner_name};

/// The name prefix of temporary queues, as on the Ferry broker.
const PREFIX: &str = "tmp.";

pub(super) async fn declare(inner: &Inner, decl: &TemporaryQueueDecl) -> Result<TemporaryQueue> {
    let name = format!("{PREFIX}{}", new_id().to_ascii_lowercase());
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), topology::long("classic"));
    let idle_ms = i64::try_from(decl.idle_timeout.as_millis()).unwrap_or(i64::MAX);
    args.insert("x-expires".into(), AMQPValue::LongLongInt(idle_ms));
    let options = QueueDeclareOptions {
        exclusive: true,
        durable: false,
        ..QueueDeclareOptions::default()
    };
    let ch = inner.channel().await?;
    ch.queue_declare(&name, options, args)
        .await
        .map_err(|e| inner.error(e, "queue", &name))?;
    let _ = ch.close(200, "done").await;
    // Not written to `name:settings` (that queue would outlive this one): this process is
    // the only one that consumes it, so its policy lives here. One delivery, no dead
    // letters: a reply nobody takes is worthless.
    let policy = DeliveryPolicy {
        max_deliveries: 1,
        dead_letter: false,
        ..DeliveryPolicy::default()
    };
    inner.remember_settings(&name, Arc::new(Settings::new(None, &policy, None)));
    Ok(TemporaryQueue {
        name,
        owner: owner_name(),
    })
}
