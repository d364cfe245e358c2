//! ListPartitionReassignments: Ferry is one node, the only replica of every partition, so
//! no partition is ever being moved and the true answer is always an empty list — for the
//! partitions named as for all of them (Kafka too lists nothing for a partition it does not
//! know).

use kafka_protocol::messages::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

pub fn list(_request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
}
