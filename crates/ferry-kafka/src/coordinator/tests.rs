//! The group state machine with a clock the tests hold: join rounds, the leader and what
//! it is given, rebalances on join, leave and session expiry, the rebalance deadline,
//! static members, stale generations and protocol checks.

use bytes::Bytes;

use super::calls::*;
use super::group::*;

mod initial_delay;

const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

fn request(member_id: &str, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        member_id: member_id.to_owned(),
        instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|p| (p.to_string(), Bytes::from(format!("{member_id}:{p}"))))
            .collect(),
        require_known_member_id: false,
    }
}

/// Kafka's limits without the initial rebalance delay: a first round ends as soon as
/// everyone known has joined (the delay has tests of its own, in `initial_delay.rs`).
fn prompt() -> Limits {
    Limits {
        initial_rebalance_delay_ms: 0,
        ..Limits::default()
    }
}

fn ids() -> impl FnMut(&str) -> String {
    let mut n = 0;
    move |prefix: &str| {
        n += 1;
        format!("{prefix}-{n}")
    }
}

/// Joins a new member that gets id `id`; the step it got.
fn join_as(group: &mut Group, id: &str, protocols: &[&str], now: i64) -> Step<JoinReply> {
    let id = id.to_owned();
    group.join(request("", protocols), now, move |_| id)
}

fn joins(replies: &[Reply]) -> Vec<(&str, &JoinReply)> {
    replies
        .iter()
        .filter_map(|r| match r {
            Reply::Join(id, answer) => Some((id.as_str(), answer)),
            Reply::Sync(..) => None,
        })
        .collect()
}

fn syncs(replies: &[Reply]) -> Vec<(&str, &SyncReply)> {
    replies
        .iter()
        .filter_map(|r| match r {
            Reply::Sync(id, answer) => Some((id.as_str(), answer)),
            Reply::Join(..) => None,
        })
        .collect()
}

fn sync(id: &str, generation: i32, assignments: &[(&str, &str)]) -> SyncRequest {
    SyncRequest {
        member_id: id.into(),
        instance_id: None,
        generation,
        protocol_type: None,
        protocol: None,
        assignments: assignments
            .iter()
            .map(|(m, a)| (m.to_string(), Bytes::from(a.to_string())))
            .collect(),
    }
}

/// A stable group of `a` (leader) and `b` at generation 2, assigned "A" and "B".
fn stable_pair(group: &mut Group) {
    join_as(group, "a", &["range"], 0);
    group.take_replies();
    group.sync(sync("a", 1, &[("a", "all")]), 0);
    group.take_replies();
    join_as(group, "b", &["range"], 100);
    assert_eq!(group.state(), State::PreparingRebalance);
    assert_eq!(
        group.heartbeat("a", None, 1, 200),
        Err(GroupError::RebalanceInProgress)
    );
    let again = group.join(request("a", &["range"]), 300, ids());
    assert_eq!(
        again,
        Step::Wait {
            member_id: "a".into()
        }
    );
    group.take_replies();
    group.sync(sync("b", 2, &[]), 400);
    group.sync(sync("a", 2, &[("a", "A"), ("b", "B")]), 400);
    group.take_replies();
    assert_eq!(group.state(), State::Stable);
}

#[test]
fn a_v4_first_join_gets_member_id_required_then_joins_with_that_id_and_leads() {
    let mut group = Group::new(prompt());
    let mut first = request("", &["range"]);
    first.require_known_member_id = true;
    let Step::Answer(answer) = group.join(first, 0, ids()) else {
        panic!("a first v4 join is answered at once");
    };
    assert_eq!(answer.error, Some(GroupError::MemberIdRequired));
    assert_eq!(answer.member_id, "client-1");
    assert_eq!(group.state(), State::Empty);
    let step = group.join(request("client-1", &["range"]), 10, ids());
    assert_eq!(
        step,
        Step::Wait {
            member_id: "client-1".into()
        }
    );
    let replies = group.take_replies();
    let [(id, answer)] = joins(&replies)[..] else {
        panic!("one answer: {replies:?}");
    };
    assert_eq!(id, "client-1");
    assert_eq!((answer.generation, answer.leader.as_str()), (1, "client-1"));
    assert_eq!(answer.protocol.as_deref(), Some("range"));
    assert_eq!(answer.members.len(), 1);
    assert_eq!(group.state(), State::CompletingRebalance);
}

#[test]
fn a_join_starts_a_round_that_ends_when_every_member_joined_again() {
    let mut group = Group::new(prompt());
    join_as(&mut group, "a", &["range", "roundrobin"], 0);
    group.take_replies();
    group.sync(sync("a", 1, &[("a", "all")]), 0);
    assert_eq!(syncs(&group.take_replies()).len(), 1);
    // b joins: a round starts, and waits for a.
    assert_eq!(
        join_as(&mut group, "b", &["roundrobin", "range"], 100),
        Step::Wait {
            member_id: "b".into()
        }
    );
    assert!(group.take_replies().is_empty());
    assert_eq!(group.state(), State::PreparingRebalance);
    assert_eq!(
        group.heartbeat("a", None, 1, 150),
        Err(GroupError::RebalanceInProgress)
    );
    group.join(request("a", &["range", "roundrobin"]), 200, ids());
    let replies = group.take_replies();
    let answers = joins(&replies);
    assert_eq!(answers.len(), 2);
    for (id, answer) in &answers {
        assert_eq!(answer.generation, 2);
        assert_eq!(answer.leader, "a", "the first member keeps leading");
        // One vote each: the tie goes to the leader's preference.
        assert_eq!(answer.protocol.as_deref(), Some("range"));
        if *id == "a" {
            let metadata: Vec<(&str, &[u8])> = answer
                .members
                .iter()
                .map(|m| (m.member_id.as_str(), &m.metadata[..]))
                .collect();
            assert_eq!(
                metadata,
                vec![("a", &b"a:range"[..]), ("b", &b":range"[..])]
            );
        } else {
            assert!(answer.members.is_empty(), "followers get no metadata");
        }
    }
    // b syncs first and waits for the leader's assignment.
    assert_eq!(
        group.sync(sync("b", 2, &[]), 300),
        Step::Wait {
            member_id: "b".into()
        }
    );
    assert_eq!(
        group.sync(sync("a", 2, &[("a", "A"), ("b", "B")]), 300),
        Step::Wait {
            member_id: "a".into()
        }
    );
    let replies = group.take_replies();
    let mut got: Vec<(&str, Bytes)> = syncs(&replies)
        .into_iter()
        .map(|(id, r)| (id, r.clone().unwrap().assignment))
        .collect();
    got.sort();
    assert_eq!(got, vec![("a", Bytes::from("A")), ("b", Bytes::from("B"))]);
    assert_eq!(group.state(), State::Stable);
    // Stable: a sync is answered at once with the member's assignment.
    let Step::Answer(Ok(again)) = group.sync(sync("b", 2, &[]), 400) else {
        panic!("answered at once");
    };
    assert_eq!(again.assignment, Bytes::from("B"));
}

#[test]
fn a_leaving_member_makes_the_other_take_everything_in_a_new_generation() {
    let mut group = Group::new(prompt());
    stable_pair(&mut group);
    assert_eq!(group.leave(&[("b".into(), None)], 1_000), vec![Ok(())]);
    assert_eq!(group.state(), State::PreparingRebalance);
    assert_eq!(
        group.heartbeat("a", None, 2, 1_100),
        Err(GroupError::RebalanceInProgress)
    );
    group.join(request("a", &["range"]), 1_200, ids());
    let replies = group.take_replies();
    let [(_, answer)] = joins(&replies)[..] else {
        panic!("{replies:?}");
    };
    assert_eq!((answer.generation, answer.leader.as_str()), (3, "a"));
    assert_eq!(answer.members.len(), 1);
    assert_eq!(
        group.leave(&[("b".into(), None)], 1_300),
        vec![Err(GroupError::UnknownMemberId)]
    );
    // The last member leaving empties the group.
    group.leave(&[("a".into(), None)], 1_400);
    assert_eq!(group.state(), State::Empty);
    assert_eq!(group.generation(), 4);
    assert_eq!(group.protocol_type(), Some("consumer"));
}

#[test]
fn a_silent_member_is_removed_after_its_session_timeout() {
    let mut group = Group::new(prompt());
    stable_pair(&mut group);
    // a heartbeats, b is silent.
    for t in (1_000..=SESSION as i64 + 400).step_by(1_000) {
        group.heartbeat("a", None, 2, t).unwrap();
        group.tick(t);
    }
    assert_eq!(group.state(), State::Stable, "b was heard from at 400");
    group.heartbeat("a", None, 2, SESSION as i64 + 400).unwrap();
    group.tick(SESSION as i64 + 401);
    assert_eq!(group.state(), State::PreparingRebalance);
    assert!(group.members().all(|m| m.id == "a"));
    assert_eq!(
        group.heartbeat("b", None, 2, SESSION as i64 + 500),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn members_that_do_not_join_by_the_rebalance_deadline_are_removed() {
    let mut group = Group::new(prompt());
    stable_pair(&mut group);
    join_as(&mut group, "c", &["range"], 1_000);
    // a joins again; b only heartbeats (and is told a round is on), never joining.
    group.join(request("a", &["range"]), 1_100, ids());
    for t in (2_000..REBALANCE as i64 + 1_000).step_by(2_000) {
        let _ = group.heartbeat("b", None, 2, t);
        group.tick(t);
        assert_eq!(group.state(), State::PreparingRebalance, "at {t}");
    }
    group.tick(REBALANCE as i64 + 1_000);
    let replies = group.take_replies();
    let mut answered: Vec<&str> = joins(&replies).iter().map(|(id, _)| *id).collect();
    answered.sort();
    assert_eq!(answered, vec!["a", "c"]);
    assert_eq!(group.state(), State::CompletingRebalance);
    assert_eq!(group.generation(), 3);
    assert!(group.members().all(|m| m.id != "b"));
}

#[test]
fn a_static_member_rejoining_with_a_new_id_keeps_its_assignment_and_fences_the_old_id() {
    let mut group = Group::new(prompt());
    let mut first = request("", &["range"]);
    first.instance_id = Some("instance-1".into());
    first.require_known_member_id = true;
    // A static member needs no second round trip.
    assert_eq!(
        group.join(first.clone(), 0, |_| "old".into()),
        Step::Wait {
            member_id: "old".into()
        }
    );
    group.take_replies();
    group.sync(sync("old", 1, &[("old", "P0,P1")]), 10);
    group.take_replies();
    // The process restarts and joins again without its member id.
    let Step::Answer(answer) = group.join(first, 5_000, |_| "new".into()) else {
        panic!("a stable group answers a static rejoin at once");
    };
    assert_eq!((answer.error, answer.generation), (None, 1));
    assert_eq!(answer.leader, "new");
    assert_eq!(group.state(), State::Stable);
    let Step::Answer(Ok(synced)) = group.sync(sync("new", 1, &[]), 5_100) else {
        panic!("stable");
    };
    assert_eq!(synced.assignment, Bytes::from("P0,P1"));
    assert_eq!(
        group.heartbeat("old", Some("instance-1"), 1, 5_200),
        Err(GroupError::FencedInstanceId)
    );
    assert_eq!(group.heartbeat("new", Some("instance-1"), 1, 5_200), Ok(()));
}

#[test]
fn a_stale_generation_or_an_unknown_member_is_refused() {
    let mut group = Group::new(prompt());
    stable_pair(&mut group);
    assert_eq!(
        group.heartbeat("a", None, 1, 500),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        group.check_commit("a", None, 1, 500),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(group.check_commit("a", None, 2, 500), Ok(()));
    assert_eq!(
        group.heartbeat("z", None, 2, 500),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        group.sync(sync("a", 1, &[]), 500),
        Step::Answer(Err(GroupError::IllegalGeneration))
    );
    // A simple consumer's commit (no member, generation -1) is for empty groups only.
    assert_eq!(
        group.check_commit("", None, -1, 500),
        Err(GroupError::UnknownMemberId)
    );
    group.leave(&[("a".into(), None), ("b".into(), None)], 600);
    assert_eq!(group.state(), State::Empty);
    assert_eq!(group.check_commit("", None, -1, 700), Ok(()));
}

#[test]
fn a_join_without_a_common_protocol_or_type_is_inconsistent() {
    let mut group = Group::new(prompt());
    join_as(&mut group, "a", &["range"], 0);
    let Step::Answer(answer) = join_as(&mut group, "b", &["roundrobin"], 10) else {
        panic!("refused at once");
    };
    assert_eq!(answer.error, Some(GroupError::InconsistentGroupProtocol));
    let mut other_type = request("", &["range"]);
    other_type.protocol_type = "connect".into();
    let Step::Answer(answer) = group.join(other_type, 20, ids()) else {
        panic!("refused at once");
    };
    assert_eq!(answer.error, Some(GroupError::InconsistentGroupProtocol));
    let mut short = request("", &["range"]);
    short.session_timeout_ms = 10;
    let Step::Answer(answer) = group.join(short, 30, ids()) else {
        panic!("refused at once");
    };
    assert_eq!(answer.error, Some(GroupError::InvalidSessionTimeout));
    assert_eq!(group.members().count(), 1);
}

#[test]
fn a_full_group_refuses_new_members() {
    let limits = Limits {
        max_size: 1,
        ..prompt()
    };
    let mut group = Group::new(limits);
    join_as(&mut group, "a", &["range"], 0);
    let Step::Answer(answer) = join_as(&mut group, "b", &["range"], 10) else {
        panic!("refused at once");
    };
    assert_eq!(answer.error, Some(GroupError::GroupMaxSizeReached));
}

#[test]
fn a_member_leaving_while_followers_wait_for_their_assignment_restarts_the_round() {
    let mut group = Group::new(prompt());
    join_as(&mut group, "a", &["range"], 0);
    join_as(&mut group, "b", &["range"], 0);
    group.join(request("a", &["range"]), 0, ids());
    group.take_replies();
    assert_eq!(group.state(), State::CompletingRebalance);
    assert_eq!(
        group.sync(sync("b", 2, &[]), 10),
        Step::Wait {
            member_id: "b".into()
        }
    );
    // The leader dies before assigning.
    group.tick(SESSION as i64 + 1);
    let replies = group.take_replies();
    assert_eq!(
        syncs(&replies),
        vec![("b", &Err(GroupError::RebalanceInProgress))]
    );
}

/// A JoinGroup from member `id` with the metadata `join_as` gave it (`request("")`'s).
fn unchanged(id: &str, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        member_id: id.to_owned(),
        ..request("", protocols)
    }
}

/// A pair at generation 2 between the round's end and the leader's assignment.
fn completing_pair(group: &mut Group) {
    join_as(group, "a", &["range"], 0);
    group.take_replies();
    group.sync(sync("a", 1, &[("a", "all")]), 0);
    join_as(group, "b", &["range"], 100);
    group.join(request("a", &["range"]), 200, ids());
    group.take_replies();
    assert_eq!(group.state(), State::CompletingRebalance);
    assert_eq!(group.generation(), 2);
}

#[test]
fn joining_again_unchanged_before_the_assignment_gets_the_current_generation() {
    // As Kafka: a member that missed its JoinGroup answer asks again, and must not start
    // another round (its metadata is the same).
    let mut group = Group::new(prompt());
    completing_pair(&mut group);
    let Step::Answer(follower) = group.join(unchanged("b", &["range"]), 300, ids()) else {
        panic!("answered at once");
    };
    assert_eq!((follower.error, follower.generation), (None, 2));
    assert_eq!(follower.leader, "a");
    assert!(follower.members.is_empty());
    let Step::Answer(leader) = group.join(request("a", &["range"]), 300, ids()) else {
        panic!("answered at once");
    };
    assert_eq!((leader.error, leader.generation), (None, 2));
    assert_eq!(
        leader.members.len(),
        2,
        "the leader gets the members to assign"
    );
    assert_eq!(group.state(), State::CompletingRebalance);
    assert!(group.take_replies().is_empty());
    // Heartbeats of the round's generation are fine while the assignment is awaited.
    assert_eq!(group.heartbeat("b", None, 2, 350), Ok(()));
    // Changed metadata is a new round.
    assert_eq!(
        group.join(unchanged("b", &["range", "roundrobin"]), 400, ids()),
        Step::Wait {
            member_id: "b".into()
        }
    );
    assert_eq!(group.state(), State::PreparingRebalance);
}

#[test]
fn in_a_stable_group_a_follower_joining_again_unchanged_keeps_the_generation_and_the_leader_starts_a_round()
 {
    let mut group = Group::new(prompt());
    stable_pair(&mut group);
    let Step::Answer(follower) = group.join(unchanged("b", &["range"]), 1_000, ids()) else {
        panic!("answered at once");
    };
    assert_eq!((follower.error, follower.generation), (None, 2));
    assert_eq!(group.state(), State::Stable);
    let Step::Answer(Ok(synced)) = group.sync(sync("b", 2, &[]), 1_100) else {
        panic!("stable: answered at once");
    };
    assert_eq!(synced.assignment, Bytes::from("B"));
    // The leader joining again, even unchanged, assigns again (Kafka's rule: how a
    // consumer leader reassigns after a topic's partitions changed): a round for all.
    assert_eq!(
        group.join(request("a", &["range"]), 1_200, ids()),
        Step::Wait {
            member_id: "a".into()
        }
    );
    assert_eq!(group.state(), State::PreparingRebalance);
    assert_eq!(
        group.heartbeat("b", None, 2, 1_300),
        Err(GroupError::RebalanceInProgress)
    );
    group.join(unchanged("b", &["range"]), 1_400, ids());
    let replies = group.take_replies();
    let answers = joins(&replies);
    assert_eq!(answers.len(), 2);
    assert!(
        answers
            .iter()
            .all(|(_, a)| a.generation == 3 && a.leader == "a")
    );
}

#[test]
fn a_lone_leader_joining_again_gets_a_new_generation_at_once_and_its_old_one_is_stale() {
    let mut group = Group::new(prompt());
    join_as(&mut group, "a", &["range"], 0);
    group.take_replies();
    group.sync(sync("a", 1, &[("a", "all")]), 0);
    group.take_replies();
    assert_eq!(group.state(), State::Stable);
    // Nobody else to wait for: the round ends with the join itself.
    group.join(request("a", &["range"]), 100, ids());
    let replies = group.take_replies();
    let [(id, answer)] = joins(&replies)[..] else {
        panic!("{replies:?}");
    };
    assert_eq!((id, answer.generation), ("a", 2));
    assert_eq!(group.state(), State::CompletingRebalance);
    assert_eq!(
        group.heartbeat("a", None, 1, 150),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        group.sync(sync("a", 1, &[("a", "all")]), 150),
        Step::Answer(Err(GroupError::IllegalGeneration))
    );
    group.sync(sync("a", 2, &[("a", "all")]), 200);
    assert_eq!(group.state(), State::Stable);
}
