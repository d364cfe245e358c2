//! The first round of an empty group held open for `group.initial.rebalance.delay.ms`, as
//! Kafka's `InitialDelayedJoin` holds it.

use super::*;

const DELAY: i32 = 3_000;

fn delayed() -> Group {
    Group::new(Limits {
        initial_rebalance_delay_ms: DELAY,
        ..Limits::default()
    })
}

/// The generations the answers in `replies` give, by member.
fn generations(replies: &[Reply]) -> Vec<(&str, i32)> {
    joins(replies)
        .into_iter()
        .map(|(id, answer)| (id, answer.generation))
        .collect()
}

#[test]
fn kafkas_default_delay_is_three_seconds() {
    assert_eq!(Limits::default().initial_rebalance_delay_ms, 3_000);
}

#[test]
fn a_lone_first_member_gets_its_generation_when_the_delay_expires() {
    let mut group = delayed();
    let step = join_as(&mut group, "a", &["range"], 0);
    assert_eq!(
        step,
        Step::Wait {
            member_id: "a".into()
        }
    );
    assert_eq!(group.state(), State::PreparingRebalance);
    group.tick(2_999);
    assert!(group.take_replies().is_empty());
    group.tick(3_000);
    assert_eq!(generations(&group.take_replies()), vec![("a", 1)]);
    assert_eq!(group.state(), State::CompletingRebalance);
}

#[test]
fn members_joining_during_the_delay_share_one_generation_after_another_delay() {
    let mut group = delayed();
    join_as(&mut group, "a", &["range"], 0);
    join_as(&mut group, "b", &["range"], 2_000);
    // Everyone known has joined, yet the round stays open until the delay expires.
    assert!(group.take_replies().is_empty());
    group.tick(3_000);
    // A member joined during the delay: it waits one delay more.
    assert!(group.take_replies().is_empty());
    join_as(&mut group, "c", &["range"], 4_000);
    group.tick(5_999);
    assert!(group.take_replies().is_empty());
    group.tick(6_000);
    // c joined during the second delay, so there is a third.
    assert!(group.take_replies().is_empty());
    group.tick(9_000);
    let replies = group.take_replies();
    assert_eq!(generations(&replies), vec![("a", 1), ("b", 1), ("c", 1)]);
    let leader: Vec<&str> = joins(&replies)
        .iter()
        .map(|(_, answer)| answer.leader.as_str())
        .collect();
    assert_eq!(leader, vec!["a", "a", "a"]);
}

#[test]
fn the_delays_end_when_the_rebalance_timeout_is_used_up() {
    let mut group = delayed();
    let short = |id: &str| JoinRequest {
        rebalance_timeout_ms: 5_000,
        ..request(id, &["range"])
    };
    let a = "a".to_owned();
    group.join(short(""), 0, move |_| a);
    let b = "b".to_owned();
    group.join(short(""), 1_000, move |_| b);
    group.tick(3_000);
    assert!(group.take_replies().is_empty());
    // The second delay is what remains of the 5 s: 2 s, and nothing remains after it.
    let c = "c".to_owned();
    group.join(short(""), 4_000, move |_| c);
    group.tick(4_999);
    assert!(group.take_replies().is_empty());
    group.tick(5_000);
    assert_eq!(
        generations(&group.take_replies()),
        vec![("a", 1), ("b", 1), ("c", 1)]
    );
}

#[test]
fn a_known_member_joining_again_does_not_end_the_delay() {
    let mut group = delayed();
    join_as(&mut group, "a", &["range"], 0);
    let again = group.join(request("a", &["range"]), 100, ids());
    assert_eq!(
        again,
        Step::Wait {
            member_id: "a".into()
        }
    );
    assert!(group.take_replies().is_empty());
    // Not a new member: the delay is not extended.
    group.tick(3_000);
    assert_eq!(generations(&group.take_replies()), vec![("a", 1)]);
}

#[test]
fn later_rounds_of_a_group_with_members_are_not_delayed() {
    let mut group = delayed();
    join_as(&mut group, "a", &["range"], 0);
    group.tick(3_000);
    group.take_replies();
    group.sync(sync("a", 1, &[("a", "all")]), 3_100);
    group.take_replies();
    assert_eq!(group.state(), State::Stable);
    join_as(&mut group, "b", &["range"], 4_000);
    group.join(request("a", &["range"]), 4_100, ids());
    // Everyone known joined: the round ends at once.
    assert_eq!(generations(&group.take_replies()), vec![("a", 2), ("b", 2)]);
}

#[test]
fn a_group_emptied_then_joined_again_delays_its_next_first_round() {
    let mut group = delayed();
    join_as(&mut group, "a", &["range"], 0);
    group.tick(3_000);
    group.take_replies();
    group.leave(&[("a".into(), None)], 3_100);
    group.take_replies();
    assert_eq!(group.state(), State::Empty);
    join_as(&mut group, "b", &["range"], 5_000);
    group.tick(7_999);
    assert!(group.take_replies().is_empty());
    group.tick(8_000);
    // Generation 2 was the round a's leaving ended, empty.
    assert_eq!(generations(&group.take_replies()), vec![("b", 3)]);
}
