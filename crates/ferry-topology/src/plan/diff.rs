//! The diff itself: channel by channel, setting by setting, then ordered so that every
//! step finds what it depends on (see the module head for the order).

use std::collections::BTreeMap;

use super::change::{Action, Change, Loss};
use super::channel::{Channel, Channels, Kind};
use super::setting::{Setting, Value};
use super::{Options, Plan, PlanError, Unmanaged};
use crate::Topology;

/// The plan that makes `current` (read from the server) into `desired` (the file).
pub fn plan(desired: &Topology, current: &Topology, options: Options) -> Result<Plan, PlanError> {
    let want = Channels::of(desired)?;
    let have = Channels::of(current)?;
    if !want.foreign.is_empty() && !options.skip_foreign {
        return Err(PlanError::Foreign {
            channels: want.foreign.clone(),
        });
    }
    let mut steps: Vec<(Order, Change)> = Vec::new();
    for w in want.iter() {
        let order = Order::build(w, &want);
        match have.get(w.kind, &w.name) {
            None => steps.push((order, create(w))),
            Some(h) if h.kind != w.kind => {
                // A queue becoming a subscription or back: the name must be freed first.
                steps.push((order.before(), delete(h)));
                steps.push((order, create(w)));
            }
            Some(h) => {
                for (setting, to) in &w.settings {
                    let from = h.settings.get(setting);
                    if from == Some(to) {
                        continue;
                    }
                    let loses_data = update_loss(w, *setting, from, to)?;
                    steps.push((
                        order,
                        Change {
                            kind: w.kind,
                            name: w.name.clone(),
                            action: Action::Update {
                                setting: *setting,
                                from: from.cloned(),
                                to: to.clone(),
                            },
                            loses_data,
                        },
                    ));
                }
            }
        }
    }
    let mut unmanaged = Vec::new();
    for h in have.iter() {
        if want.get(h.kind, &h.name).is_some() || sends_here(h, &have, &want) {
            continue;
        }
        if options.prune {
            steps.push((Order::deleting(h, &have), delete(h)));
        } else {
            unmanaged.push(Unmanaged {
                kind: h.kind,
                name: h.name.clone(),
            });
        }
    }
    // Stable: the updates of one channel keep their setting order.
    steps.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Plan {
        changes: steps.into_iter().map(|(_, c)| c).collect(),
        unmanaged,
        skipped: want.foreign.clone(),
        desired: want,
    })
}

fn create(channel: &Channel) -> Change {
    Change {
        kind: channel.kind,
        name: channel.name.clone(),
        action: Action::Create {
            settings: channel.settings.clone(),
        },
        loses_data: None,
    }
}

fn delete(channel: &Channel) -> Change {
    Change {
        kind: channel.kind,
        name: channel.name.clone(),
        action: Action::Delete,
        loses_data: Some(Loss::DeletesMessages),
    }
}

fn update_loss(
    channel: &Channel,
    setting: Setting,
    from: Option<&Value>,
    to: &Value,
) -> Result<Option<Loss>, PlanError> {
    if setting == Setting::Partitions {
        return match (from, to) {
            (Some(Value::Count(current)), Value::Count(desired)) if desired < current => {
                Err(PlanError::FewerPartitions {
                    topic: channel.name.clone(),
                    current: *current,
                    desired: *desired,
                })
            }
            // More partitions: added in place, every record stays where it is.
            _ => Ok(None),
        };
    }
    if !changes_in_place(channel.kind, setting) {
        return Ok(Some(Loss::Recreates));
    }
    // No value on the server is no bound: any bound is shorter. A queue's default TTL is
    // not here: a message keeps the TTL it was published with.
    let shorter = from.is_none_or(|from| to.shorter_than(from) == Some(true));
    let expires_stored = matches!(setting, Setting::Retention | Setting::DeadLetterRetention);
    Ok((expires_stored && shorter).then_some(Loss::ShortensRetention))
}

/// Whether the server changes `setting` of a `kind` in place — a queue's and a topic's
/// settings that the broker reads event by event (UpdateQueue, UpdateTopic) and a
/// topic's partitions (AddPartitions) — rather than only by recreating the channel: what
/// shaped a queue's delivery state (ordering, dedup window, priority levels) and every
/// setting of a subscription, whose delivery settings change only with it.
pub fn changes_in_place(kind: Kind, setting: Setting) -> bool {
    match kind {
        Kind::Queue => !matches!(
            setting,
            Setting::Ordering | Setting::DedupWindow | Setting::Priorities
        ),
        Kind::Topic => matches!(setting, Setting::Retention | Setting::Partitions),
        Kind::Subscription => false,
    }
}

/// Whether a channel absent from the file is the dead-letter queue of a channel the file
/// keeps: pruning it would fail on the server, or leave the sender without one.
fn sends_here(channel: &Channel, have: &Channels, want: &Channels) -> bool {
    have.iter().any(|sender| {
        sender.dead_letter() == Some(channel.name.as_str())
            && want.get(sender.kind, &sender.name).is_some()
    })
}

/// Where a step goes: phase, then depth in the dead-letter chain, then name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Order<'a> {
    phase: Phase,
    /// Creates: dead-letter queues (shallow) first. Deletes: stored inverted, senders first.
    depth: i64,
    name: &'a str,
    /// A delete that frees a name goes before the create that takes it.
    step: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Topics,
    Queues,
    DeleteQueues,
    DeleteTopics,
}

impl<'a> Order<'a> {
    fn build(channel: &'a Channel, side: &Channels) -> Order<'a> {
        let phase = match channel.kind {
            Kind::Topic => Phase::Topics,
            Kind::Queue | Kind::Subscription => Phase::Queues,
        };
        Order {
            phase,
            depth: depth(channel, &side.queues),
            name: &channel.name,
            step: 1,
        }
    }

    fn before(self) -> Order<'a> {
        Order { step: 0, ..self }
    }

    fn deleting(channel: &'a Channel, side: &Channels) -> Order<'a> {
        let phase = match channel.kind {
            Kind::Topic => Phase::DeleteTopics,
            Kind::Queue | Kind::Subscription => Phase::DeleteQueues,
        };
        Order {
            phase,
            depth: -depth(channel, &side.queues),
            name: &channel.name,
            step: 1,
        }
    }
}

/// How many dead-letter hops lead from `channel` to a queue that sends nowhere; bounded by
/// the number of queues, so a cycle (which the server refuses) cannot loop.
fn depth(channel: &Channel, queues: &BTreeMap<String, Channel>) -> i64 {
    let mut depth = 0;
    let mut at = channel;
    while let Some(next) = at.dead_letter().and_then(|d| queues.get(d)) {
        depth += 1;
        if depth > queues.len() as i64 {
            break;
        }
        at = next;
    }
    depth
}
