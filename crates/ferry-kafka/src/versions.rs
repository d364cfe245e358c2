//! The APIs and versions this front end answers, the only ones ApiVersions advertises.
//! A version range is what every handler here was written and tested for; a request outside
//! it is refused (ApiVersions with UNSUPPORTED_VERSION, the others by closing the
//! connection, as Kafka does).

use kafka_protocol::messages::ApiKey;

/// `(api, min, max)` for every API served.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 8),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 6),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 4),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::DeleteRecords, 0, 2),
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
            assert!(codec.min <= min && max <= codec.max, "{api:?} {min}..{max}");
        }
        assert!(is_supported(ApiKey::Fetch, 12));
        assert!(!is_supported(ApiKey::Fetch, 13));
        assert!(!is_supported(ApiKey::JoinGroup, 0));
    }
}
