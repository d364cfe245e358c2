//! Parked keys: the key a park or unpark names, and a parked key as the wire lists it.

use ferry_broker::ParkedKey;
use ferry_proto::v1;

use super::ConvertError;

/// The key to park or unpark. An empty one is refused: over gRPC it is what an unset field
/// looks like, and over HTTP it cannot be written in a path, so it is never what was meant.
pub fn parked_key(key: &[u8]) -> Result<&[u8], ConvertError> {
    if key.is_empty() {
        return Err(ConvertError::Missing {
            field: "key",
            why: "name the ordering key to park or unpark",
        });
    }
    Ok(key)
}

pub fn parked(p: ParkedKey) -> v1::ParkedKey {
    v1::ParkedKey {
        key: p.key,
        held: p.held as u64,
    }
}
