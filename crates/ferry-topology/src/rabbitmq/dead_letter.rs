//! Where a queue's dead letters go: its dead-letter exchange and routing key (from its
//! arguments or policy), followed through that exchange's bindings the way RabbitMQ
//! routes them.

use super::definitions::{BindingDefinition, ExchangeDefinition, QueueDefinition};
use super::policy::Settings;
use crate::format::Duration;
use crate::imported::Note;

/// The queue a queue's dead letters land in: through its dead-letter exchange, the
/// binding whose key the dead-letter routing key matches (the message's own routing key
/// when none is set, which the definitions cannot know).
pub fn target(
    queue: &QueueDefinition,
    settings: &Settings,
    exchanges: &[&ExchangeDefinition],
    bindings: &[&BindingDefinition],
    notes: &mut Vec<Note>,
) -> Option<String> {
    let exchange_name = settings.str("dead-letter-exchange")?;
    let routing_key = settings.str("dead-letter-routing-key");
    let subject = format!("queue \"{}\"", queue.name);
    if exchange_name.is_empty() {
        // The default exchange routes to the queue named by the routing key.
        return match routing_key {
            Some(key) => Some(key.to_owned()),
            None => {
                notes.push(Note::new(
                    &subject,
                    "dead-letters through the default exchange with each message's own routing key; the dead-letter queue cannot be named",
                ));
                None
            }
        };
    }
    let Some(exchange) = exchanges.iter().find(|e| e.name == exchange_name) else {
        notes.push(Note::new(
            &subject,
            format!("its dead-letter exchange \"{exchange_name}\" is not declared: dead letters are dropped"),
        ));
        return None;
    };
    let candidates: Vec<&str> = bindings
        .iter()
        .filter(|b| b.source == exchange.name && b.destination_type == "queue")
        .filter(|b| match (exchange.kind.as_str(), routing_key) {
            ("fanout" | "headers", _) | (_, None) => true,
            ("topic", Some(key)) => topic_matches(&b.routing_key, key),
            (_, Some(key)) => b.routing_key == key,
        })
        .map(|b| b.destination.as_str())
        .collect();
    match candidates.as_slice() {
        [] => {
            notes.push(Note::new(
                &subject,
                format!("its dead-letter exchange \"{exchange_name}\" routes its dead letters to no queue: they are dropped"),
            ));
            None
        }
        [only] => Some((*only).to_owned()),
        [first, rest @ ..] => {
            notes.push(Note::new(
                &subject,
                format!(
                    "dead letters also go to {}; the format names one dead-letter queue",
                    rest.iter()
                        .map(|q| format!("\"{q}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
            Some((*first).to_owned())
        }
    }
}

/// How long a dead-letter queue keeps messages: its message TTL.
pub fn retention(
    name: &str,
    queues: &[&QueueDefinition],
    settings: &[Settings],
    notes: &mut Vec<Note>,
) -> Option<Duration> {
    let index = queues.iter().position(|q| q.name == name)?;
    let settings = &settings[index];
    for (key, _, origin) in settings.iter() {
        if key != "message-ttl" && key != "queue-type" {
            notes.push(Note::new(
                format!("queue \"{name}\""),
                format!("{origin} of the dead-letter queue is not carried over"),
            ));
        }
    }
    settings.u64("message-ttl").map(Duration::from_millis)
}

/// AMQP topic matching: `*` is one word, `#` zero or more.
fn topic_matches(pattern: &str, key: &str) -> bool {
    fn go(pattern: &[&str], key: &[&str]) -> bool {
        match pattern.split_first() {
            None => key.is_empty(),
            Some((&"#", rest)) => (0..=key.len()).any(|skip| go(rest, &key[skip..])),
            Some((word, rest)) => key
                .split_first()
                .is_some_and(|(k, krest)| (*word == "*" || word == k) && go(rest, krest)),
        }
    }
    let pattern: Vec<&str> = pattern.split('.').collect();
    let key: Vec<&str> = key.split('.').collect();
    go(&pattern, &key)
}

#[cfg(test)]
mod tests {
    use super::topic_matches;

    #[test]
    fn topic_patterns_match_like_amqp() {
        assert!(topic_matches("orders.*", "orders.placed"));
        assert!(!topic_matches("orders.*", "orders.placed.eu"));
        assert!(topic_matches("orders.#", "orders"));
        assert!(topic_matches("#.failed", "a.b.failed"));
        assert!(!topic_matches("orders.placed", "orders.paid"));
    }
}
