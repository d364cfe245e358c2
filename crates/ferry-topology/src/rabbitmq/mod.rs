//! RabbitMQ definitions (`rabbitmqctl export_definitions`, or the management API's
//! `GET /api/definitions`) as a topology.
//!
//! | RabbitMQ | topology |
//! | --- | --- |
//! | exchange (any type but the default and `amq.*`) | topic, `broker: rabbitmq`, `type: exchange` |
//! | queue bound to an exchange | subscription of that exchange's topic |
//! | binding routing key (topic, direct exchange) | the subscription's `filter` (`#` is none) |
//! | queue bound to no exchange | queue, `type: queue` (`stream` for `x-queue-type: stream`) |
//! | `x-dead-letter-exchange` + `x-dead-letter-routing-key` | `dead_letter.name`: the queue the exchange routes the key to |
//! | the dead-letter queue's `x-message-ttl` | `dead_letter.retention` |
//! | `x-message-ttl` | `delivery.ttl` |
//! | `x-max-length` | `limits.max_length` |
//! | `x-max-priority` | `delivery.priorities` |
//! | `x-delivery-limit` | `delivery.max_deliveries` (the limit + 1) |
//! | `x-single-active-consumer: true` | `delivery.ordering.mode: exclusive` |
//! | `x-max-age` (streams) | `retention` |
//!
//! Policies count as arguments the way RabbitMQ applies them (see `policy`). Everything
//! else (a quorum queue's replication, `x-max-length-bytes`, `x-expires`, `x-overflow:
//! reject-publish`, exchange types other than topic, exchange-to-exchange bindings,
//! shovels) is listed in [`Imported::notes`](crate::Imported), never dropped silently.
//!
//! ```
//! let definitions = r#"{
//!   "queues": [
//!     {"name": "orders", "vhost": "/", "durable": true, "auto_delete": false,
//!      "arguments": {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "orders.dlq"}},
//!     {"name": "orders.dlq", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {}}
//!   ],
//!   "exchanges": [], "bindings": []
//! }"#;
//! let imported = ferry_topology::rabbitmq::from_definitions(definitions).unwrap();
//! let queue = &imported.topology.queues[0];
//! assert_eq!(queue.dead_letter.as_ref().unwrap().name, "orders.dlq");
//! assert!(imported.notes.is_empty());
//! ```

mod arguments;
mod convert;
mod dead_letter;
mod definitions;
mod error;
mod policy;

pub use error::Error;

use crate::Imported;
use definitions::Definitions;

/// Reads definitions whose queues and exchanges are all in one vhost (any vhost).
/// Definitions spanning several vhosts are refused with [`Error::SeveralVhosts`]: read
/// them one vhost at a time with [`from_vhost_definitions`].
pub fn from_definitions(text: &str) -> Result<Imported, Error> {
    let definitions = Definitions::parse(text)?;
    let vhosts = definitions.vhosts();
    match vhosts.as_slice() {
        [] => Ok(convert::convert(&definitions, "/")),
        [vhost] => Ok(convert::convert(&definitions, vhost)),
        _ => Err(Error::SeveralVhosts { vhosts }),
    }
}

/// Reads the queues, exchanges, bindings and policies of one vhost of the definitions.
pub fn from_vhost_definitions(text: &str, vhost: &str) -> Result<Imported, Error> {
    let definitions = Definitions::parse(text)?;
    let known = definitions.vhosts();
    if !known.iter().any(|v| v == vhost) {
        return Err(Error::UnknownVhost {
            vhost: vhost.to_owned(),
            known,
        });
    }
    Ok(convert::convert(&definitions, vhost))
}
