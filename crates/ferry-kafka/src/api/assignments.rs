//! Explicit replica assignments on one node: Ferry is node 0, the only replica of every
//! partition, so an assignment that places each new partition on exactly `[0]` says what
//! Ferry does anyway and is taken; any other (another broker, several replicas, none) is
//! INVALID_REPLICA_ASSIGNMENT, as Kafka answers an assignment it cannot follow.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::BrokerId;

/// Checks that every partition's replicas are exactly this node.
pub fn on_this_node<'a>(
    replicas: impl IntoIterator<Item = &'a [BrokerId]>,
) -> Result<(), (ResponseError, String)> {
    for (i, brokers) in replicas.into_iter().enumerate() {
        if brokers != [BrokerId(0)] {
            let ids: Vec<i32> = brokers.iter().map(|b| b.0).collect();
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "assignment {i} places replicas on brokers {ids:?}; Ferry is one node, \
                     broker 0, the only replica of every partition"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_node_alone_is_taken() {
        let zero = [BrokerId(0)];
        assert!(on_this_node([&zero[..], &zero[..]]).is_ok());
        for bad in [&[][..], &[BrokerId(1)][..], &[BrokerId(0), BrokerId(0)][..]] {
            let (code, _) = on_this_node([bad]).unwrap_err();
            assert_eq!(code, ResponseError::InvalidReplicaAssignment);
        }
    }
}
