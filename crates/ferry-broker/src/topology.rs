//! Rules across queues: names are unique, named dead-letter queues exist, and dead letters
//! never travel in a circle.
//!
//! A dead-letter cycle (`a → b → a`, or `a → a`) would turn a poison message into one that
//! circulates forever, each lap resetting nothing and costing a full round of retries, and
//! would make "is this message dead?" unanswerable. It is refused when the queues are
//! declared, not discovered in production.

use std::collections::HashMap;

use crate::error::{BrokerError, Result};
use crate::name::Name;
use crate::spec::{DeadLetter, QueueSpec};

/// Checks a complete set of queues: each spec on its own, unique names, and the
/// dead-letter graph.
///
/// A [`DeadLetter::Default`] target that is not in the set is fine — the engine creates
/// `<name>.dlq` with the queue — but if it is in the set, its own dead-letter setting takes
/// part in the cycle check. A [`DeadLetter::Named`] target must be in the set.
pub fn validate_topology(queues: &[(Name, QueueSpec)]) -> Result<()> {
    let mut index = HashMap::with_capacity(queues.len());
    for (i, (name, _)) in queues.iter().enumerate() {
        if index.insert(name, i).is_some() {
            return Err(BrokerError::DuplicateQueue { name: name.clone() });
        }
    }
    // Each queue has at most one dead-letter target, so the graph is a set of chains that
    // may end in a loop; following each chain finds every cycle.
    let mut target: Vec<Option<usize>> = Vec::with_capacity(queues.len());
    for (name, spec) in queues {
        spec.validate()
            .map_err(|error| BrokerError::InvalidQueueSpec {
                queue: name.clone(),
                error: Box::new(error),
            })?;
        // Its errors name the queue already.
        let resolved = match spec.dead_letter_target(name)? {
            None => None,
            Some(dlq) => match (index.get(&dlq), &spec.dead_letter) {
                (Some(&i), _) => Some(i),
                (None, DeadLetter::Named(_)) => {
                    return Err(BrokerError::DeadLetterTargetMissing {
                        queue: name.clone(),
                        target: dlq,
                    });
                }
                (None, _) => None,
            },
        };
        target.push(resolved);
    }
    find_cycle(&target).map_or(Ok(()), |cycle| {
        Err(BrokerError::DeadLetterCycle {
            cycle: cycle.into_iter().map(|i| queues[i].0.clone()).collect(),
        })
    })
}

/// The first cycle in a graph where node `i` points to `target[i]`, as the nodes on it in
/// order, starting from the one reached first.
fn find_cycle(target: &[Option<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Seen {
        No,
        OnPath,
        Done,
    }
    let mut seen = vec![Seen::No; target.len()];
    for start in 0..target.len() {
        let mut path = Vec::new();
        let mut node = Some(start);
        while let Some(n) = node {
            match seen[n] {
                Seen::Done => break,
                Seen::OnPath => {
                    let at = path.iter().position(|&p| p == n).expect("n is on the path");
                    return Some(path.split_off(at));
                }
                Seen::No => {
                    seen[n] = Seen::OnPath;
                    path.push(n);
                    node = target[n];
                }
            }
        }
        for n in path {
            seen[n] = Seen::Done;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    fn queue(n: &str, dead_letter: DeadLetter) -> (Name, QueueSpec) {
        let spec = QueueSpec {
            dead_letter,
            ..QueueSpec::default()
        };
        (name(n), spec)
    }

    fn named(n: &str) -> DeadLetter {
        DeadLetter::Named(name(n))
    }

    fn cycle_of(queues: &[(Name, QueueSpec)]) -> Vec<String> {
        match validate_topology(queues) {
            Err(BrokerError::DeadLetterCycle { cycle }) => {
                cycle.iter().map(|n| n.to_string()).collect()
            }
            other => panic!("expected a dead-letter cycle, got {other:?}"),
        }
    }

    #[test]
    fn queues_with_default_dead_letter_queues_are_valid() {
        let dlq_spec = queue("orders.dlq", DeadLetter::Disabled);
        validate_topology(&[queue("orders", DeadLetter::Default), dlq_spec]).unwrap();
        // The derived DLQ need not be declared: the engine creates it.
        validate_topology(&[queue("payments", DeadLetter::Default)]).unwrap();
        validate_topology(&[]).unwrap();
    }

    #[test]
    fn shared_dead_letter_queue_and_chains_are_valid() {
        validate_topology(&[
            queue("a", named("failures")),
            queue("b", named("failures")),
            queue("failures", named("failures-of-failures")),
            queue("failures-of-failures", DeadLetter::Disabled),
        ])
        .unwrap();
    }

    #[test]
    fn dead_letter_cycle_is_rejected() {
        let queues = [queue("a", named("b")), queue("b", named("a"))];
        assert_eq!(cycle_of(&queues), ["a", "b"]);
        let e = validate_topology(&queues).unwrap_err();
        assert!(e.to_string().contains("a -> b -> a"), "{e}");
    }

    #[test]
    fn queue_dead_lettering_to_itself_is_rejected() {
        let queues = [queue("a", named("a"))];
        assert_eq!(cycle_of(&queues), ["a"]);
        let e = validate_topology(&queues).unwrap_err();
        assert!(e.to_string().contains("a -> a"), "{e}");
    }

    #[test]
    fn cycle_through_a_derived_dead_letter_queue_is_rejected() {
        let queues = [
            queue("orders", DeadLetter::Default),
            queue("orders.dlq", named("orders")),
        ];
        assert_eq!(cycle_of(&queues), ["orders", "orders.dlq"]);
    }

    #[test]
    fn long_cycle_behind_a_chain_is_found() {
        let queues = [
            queue("entry", named("c1")),
            queue("c1", named("c2")),
            queue("c2", named("c3")),
            queue("c3", named("c1")),
        ];
        assert_eq!(cycle_of(&queues), ["c1", "c2", "c3"]);
    }

    #[test]
    fn missing_named_dead_letter_target_is_rejected() {
        let e = validate_topology(&[queue("orders", named("nowhere"))]).unwrap_err();
        assert!(matches!(
            &e,
            BrokerError::DeadLetterTargetMissing { queue, target }
                if queue.as_str() == "orders" && target.as_str() == "nowhere"
        ));
    }

    #[test]
    fn duplicate_queue_names_are_rejected() {
        let queues = [
            queue("a", DeadLetter::Default),
            queue("a", DeadLetter::Disabled),
        ];
        assert!(matches!(
            validate_topology(&queues),
            Err(BrokerError::DuplicateQueue { .. })
        ));
    }

    #[test]
    fn invalid_spec_is_reported_with_its_queue() {
        let (n, mut spec) = queue("slow", DeadLetter::Default);
        spec.lease = std::time::Duration::ZERO;
        let e = validate_topology(&[(n, spec)]).unwrap_err();
        assert!(matches!(
            &e,
            BrokerError::InvalidQueueSpec { queue, error }
                if queue.as_str() == "slow"
                    && matches!(**error, BrokerError::InvalidSetting { setting: "lease", .. })
        ));
        assert!(e.to_string().starts_with("queue slow: lease"), "{e}");
    }

    #[test]
    fn dead_letter_queue_with_a_default_target_is_rejected() {
        let e = validate_topology(&[queue("x.dlq", DeadLetter::Default)]).unwrap_err();
        assert!(matches!(
            e,
            BrokerError::DeadLetterQueueNeedsExplicitTarget { .. }
        ));
    }
}
