//! The APIs and versions this front end answers, the only ones ApiVersions advertises.
//! A version range is what every handler here was written and tested for; a request outside
//! it is refused (ApiVersions with UNSUPPORTED_VERSION, the others by closing the
//! connection, as Kafka does).

use kafka_protocol::messages::ApiKey;

/// `(api, min, max)` for every API served.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 0, 8),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 6),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 4),
    (ApiKey::DeleteTopics, 1, 5),
    // Consumer groups (`api/groups.rs`, `api/group_offsets.rs`). OffsetCommit v0–1 and
    // OffsetFetch v0 are older than the codec's oldest.
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 8),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::ListConfigResources, 0, 1),
    (ApiKey::DescribeTopicPartitions, 0, 0),
];

/// The served range of `api`, `None` when the API is not served at all.
pub fn supported(api: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(key, _, _)| *key == api)
        .map(|&(_, min, max)| (min, max))
}

/// Whether `api` is served at `version`.
pub fn is_supported(api: ApiKey, version: i16) -> bool {
    supported(api).is_some_and(|(min, max)| (min..=max).contains(&version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_range_is_one_the_codec_knows() {
        for &(api, min, max) in SUPPORTED {
            let codec = api.valid_versions();
            assert!(min <= max, "{api:?}");
            // Produce v0–2 are decoded and encoded by `api/produce.rs` itself: the codec
            // dropped them with Kafka 4.
            let min = if api == ApiKey::Produce {
                min.max(3)
            } else {
                min
            };
            assert!(codec.min <= min && max <= codec.max, "{api:?} {min}..{max}");
        }
        assert!(is_supported(ApiKey::Fetch, 12));
        assert!(!is_supported(ApiKey::Fetch, 13));
        assert!(is_supported(ApiKey::JoinGroup, 0));
        assert!(!is_supported(ApiKey::JoinGroup, 8));
        assert!(is_supported(ApiKey::InitProducerId, 4));
        assert!(!is_supported(ApiKey::EndTxn, 0));
    }
}
