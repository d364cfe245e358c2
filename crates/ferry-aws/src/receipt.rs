//! Receipt handles: an opaque, tamper-proof encoding of a delivery — queue, seq and lease
//! token — so that DeleteMessage and ChangeMessageVisibility reach the broker's ack and
//! extend with exactly what the receive handed out.
//!
//! A handle is base64url(`seq` ‖ `token` ‖ queue name ‖ HMAC-SHA256 of those). The key is
//! 32 random bytes kept in the front end's directory (`receipt-key`, created once, owner
//! read-only), so handles stay valid across a restart — the broker keeps the lease too —
//! and a handle altered in any bit, or made up, fails the HMAC and is refused as
//! `ReceiptHandleIsInvalid` before the broker is asked anything.

use std::io::Read;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const KEY_FILE: &str = "receipt-key";
const KEY_BYTES: usize = 32;
const MAC_BYTES: usize = 32;
/// Binds a MAC to this use of the key, should the key ever sign anything else.
const CONTEXT: &[u8] = b"ferry sqs receipt v1";

/// What a receipt handle stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub queue: String,
    pub seq: u64,
    pub token: u64,
}

/// The key receipt handles are signed with.
#[derive(Clone)]
pub struct ReceiptKey([u8; KEY_BYTES]);

impl std::fmt::Debug for ReceiptKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReceiptKey(..)")
    }
}

impl ReceiptKey {
    /// The key in `dir`, made from the system's random source the first time. Written to
    /// a temporary file, synced and renamed, so a crash leaves either no key or a whole one.
    pub fn load_or_create(dir: &Path) -> std::io::Result<ReceiptKey> {
        let path = dir.join(KEY_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let key: [u8; KEY_BYTES] = bytes.try_into().map_err(|_| {
                    std::io::Error::other(format!(
                        "{} is not a {KEY_BYTES}-byte key; delete it to make a new one \
                         (receipt handles handed out before become invalid)",
                        path.display()
                    ))
                })?;
                Ok(ReceiptKey(key))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut key = [0u8; KEY_BYTES];
                std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
                crate::durable_file::replace(&path, &key, crate::durable_file::Access::OwnerOnly)?;
                Ok(ReceiptKey(key))
            }
            Err(e) => Err(e),
        }
    }

    /// A key given directly (tests).
    #[cfg(test)]
    pub fn from_bytes(key: [u8; KEY_BYTES]) -> ReceiptKey {
        ReceiptKey(key)
    }

    fn mac(&self, payload: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key size");
        mac.update(CONTEXT);
        mac.update(payload);
        mac
    }

    pub fn encode(&self, receipt: &Receipt) -> String {
        let mut bytes = Vec::with_capacity(16 + receipt.queue.len() + MAC_BYTES);
        bytes.extend_from_slice(&receipt.seq.to_be_bytes());
        bytes.extend_from_slice(&receipt.token.to_be_bytes());
        bytes.extend_from_slice(receipt.queue.as_bytes());
        let tag = self.mac(&bytes).finalize().into_bytes();
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// What `handle` stands for, if this key signed it; `None` for anything else.
    pub fn decode(&self, handle: &str) -> Option<Receipt> {
        // A queue name is at most 200 bytes: anything longer is no handle of ours.
        if handle.len() > 512 {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(handle).ok()?;
        if bytes.len() < 16 + 1 + MAC_BYTES {
            return None;
        }
        let (payload, tag) = bytes.split_at(bytes.len() - MAC_BYTES);
        self.mac(payload).verify_slice(tag).ok()?;
        let seq = u64::from_be_bytes(payload[..8].try_into().ok()?);
        let token = u64::from_be_bytes(payload[8..16].try_into().ok()?);
        let queue = String::from_utf8(payload[16..].to_vec()).ok()?;
        Some(Receipt { queue, seq, token })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receipt() -> Receipt {
        Receipt {
            queue: "orders".into(),
            seq: 42,
            token: 7 << 40,
        }
    }

    #[test]
    fn a_handle_decodes_to_what_it_was_made_from() {
        let key = ReceiptKey::from_bytes([3; 32]);
        assert_eq!(key.decode(&key.encode(&receipt())), Some(receipt()));
    }

    #[test]
    fn a_handle_with_any_byte_changed_is_refused() {
        let key = ReceiptKey::from_bytes([3; 32]);
        let handle = key.encode(&receipt());
        let mut bytes = URL_SAFE_NO_PAD.decode(&handle).unwrap();
        for i in 0..bytes.len() {
            bytes[i] ^= 1;
            assert_eq!(
                key.decode(&URL_SAFE_NO_PAD.encode(&bytes)),
                None,
                "byte {i}"
            );
            bytes[i] ^= 1;
        }
    }

    #[test]
    fn another_keys_handle_is_refused() {
        let handle = ReceiptKey::from_bytes([1; 32]).encode(&receipt());
        assert_eq!(ReceiptKey::from_bytes([2; 32]).decode(&handle), None);
        assert_eq!(ReceiptKey::from_bytes([2; 32]).decode("not base64!"), None);
    }

    #[test]
    fn the_key_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let first = ReceiptKey::load_or_create(dir.path()).unwrap();
        let handle = first.encode(&receipt());
        let again = ReceiptKey::load_or_create(dir.path()).unwrap();
        assert_eq!(again.decode(&handle), Some(receipt()));
    }
}
