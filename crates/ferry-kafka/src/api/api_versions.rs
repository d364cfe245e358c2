//! ApiVersions: the APIs and versions of `versions.rs`, nothing more.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::messages::api_versions_response::ApiVersion;

use crate::versions::{self, SUPPORTED};
use kafka_protocol::messages::ApiKey;

/// The answer and the version to encode it at: the request's, or v0 with
/// UNSUPPORTED_VERSION when the request's version is not served (Kafka's rule, so that a
/// newer client learns which versions it may use).
pub fn answer(version: i16) -> (i16, ApiVersionsResponse) {
    let api_keys = SUPPORTED
        .iter()
        .map(|&(api, min, max)| {
            ApiVersion::default()
                .with_api_key(api as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    let response = ApiVersionsResponse::default().with_api_keys(api_keys);
    if versions::is_supported(ApiKey::ApiVersions, version) {
        (version, response)
    } else {
        (
            0,
            response.with_error_code(ResponseError::UnsupportedVersion.code()),
        )
    }
}
