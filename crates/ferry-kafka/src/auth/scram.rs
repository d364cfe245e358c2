//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them: the server's
//! side of the three-message exchange.
//!
//! Written here over `sha2`, `hmac`, `pbkdf2` and `base64` (RustCrypto, already in the tree)
//! because no well-kept crate offers SCRAM's server side over those: the exchange is a few
//! string splits around the primitives, which are not hand-written.
//!
//! **Stored credentials.** A server keeps, per user, a salt, an iteration count, StoredKey
//! and ServerKey — never the password. Ferry keeps only the SHA-256 of an API token, from
//! which SCRAM's keys cannot be derived, so a token offered to SCRAM brings its secret at
//! start (see `auth/mod.rs`); the keys are derived once then, with a fresh random salt per
//! token and mechanism, and the secret is dropped. The iteration count is 4096: RFC 7677's
//! minimum and Kafka's own default and minimum. It is the cost a guesser pays per try
//! against a captured exchange (salt, nonce and proof are all on the wire without TLS), and
//! the client pays it once per connection, so a higher count slows every connect without
//! helping tokens, which are long and random: there is no dictionary to slow down.
//!
//! **What is refused.** Channel binding (`p=`; Kafka has none), an authorization identity
//! other than the user (`a=`), extensions (Kafka's `tokenauth=true` is for delegation
//! tokens, which Ferry has not), and the reserved `m=`. Passwords are used as their UTF-8
//! bytes without SASLprep, as Kafka's own SCRAM does.
//!
//! **An unknown user** gets a server-first message like any other — a salt derived from
//! the user name and a per-start secret, so the same name gets the same salt within a
//! start — and fails at the proof, as a wrong password does: the exchange does not tell
//! which user names exist.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Kafka's (and RFC 7677's) iteration count.
pub const ITERATIONS: u32 = 4096;
/// Bytes of a salt and of the server's part of the nonce.
const SALT_BYTES: usize = 16;
const NONCE_BYTES: usize = 24;

/// Random bytes, from the operating system in a server and fixed in tests.
pub trait Random: Send + Sync {
    fn fill(&self, out: &mut [u8]);
}

/// The operating system's random source.
pub struct OsRandom;

impl Random for OsRandom {
    fn fill(&self, out: &mut [u8]) {
        getrandom::fill(out).expect("the operating system's random source is readable");
    }
}

/// The two SCRAM mechanisms served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    pub fn mechanism(self) -> &'static str {
        match self {
            Hash::Sha256 => "SCRAM-SHA-256",
            Hash::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => Sha256::digest(data).to_vec(),
            Hash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes keys of any length, so `new_from_slice` cannot fail.
        match self {
            Hash::Sha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            Hash::Sha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    /// RFC 5802's Hi(): PBKDF2 with HMAC of this hash.
    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            Hash::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password, salt, iterations).to_vec()
            }
            Hash::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password, salt, iterations).to_vec()
            }
        }
    }
}

/// What a server keeps of one user's password for one mechanism.
#[derive(Clone)]
pub struct StoredCredential {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl std::fmt::Debug for StoredCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredCredential { .. }")
    }
}

impl StoredCredential {
    /// The keys of `password` under `salt`.
    pub fn derive(hash: Hash, password: &[u8], salt: Vec<u8>, iterations: u32) -> Self {
        let salted = hash.salted_password(password, &salt, iterations);
        let client_key = hash.hmac(&salted, b"Client Key");
        StoredCredential {
            stored_key: hash.digest(&client_key),
            server_key: hash.hmac(&salted, b"Server Key"),
            salt,
            iterations,
        }
    }

    /// The keys of `password` under a fresh random salt.
    pub fn new(hash: Hash, password: &[u8], random: &dyn Random) -> Self {
        let mut salt = vec![0u8; SALT_BYTES];
        random.fill(&mut salt);
        StoredCredential::derive(hash, password, salt, ITERATIONS)
    }
}

/// Why an exchange failed. The message goes to the client in SaslAuthenticate's
/// `error_message`: it never says whether the user exists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("the SCRAM message is malformed: {0}")]
    Malformed(&'static str),
    #[error("SCRAM channel binding is not supported: send the gs2 header `n,,`")]
    ChannelBinding,
    #[error("SCRAM extensions are not supported (delegation tokens are not either)")]
    Extensions,
    #[error("the SCRAM authorization identity must be empty or the user name")]
    AuthorizationIdentity,
    #[error("the client's final nonce is not the one the exchange began with")]
    NonceMismatch,
    #[error("authentication failed: wrong user name or token")]
    BadProof,
}

/// Where the server's side of one exchange stands.
#[derive(Debug)]
pub enum Exchange {
    /// The server-first message was sent; the client-final one is awaited.
    Challenged {
        hash: Hash,
        user: String,
        /// `None` when the user is unknown: the proof then fails whatever it is.
        credential: Option<StoredCredential>,
        client_first_bare: String,
        server_first: String,
        gs2_header: String,
        nonce: String,
    },
}

/// The user a client-first message names, unescaped (`=2C` is `,` and `=3D` is `=`).
fn sasl_name(escaped: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(ScramError::Malformed("a user name holds a bare `=`")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(ScramError::Malformed("the user name is empty"));
    }
    Ok(out)
}

/// The value of `key=value`.
fn attribute(part: Option<&str>, key: char) -> Result<&str, ScramError> {
    part.and_then(|p| p.strip_prefix(key))
        .and_then(|p| p.strip_prefix('='))
        .ok_or(ScramError::Malformed(
            "an attribute is missing or out of order",
        ))
}

/// The client-first message: its user, its nonce, its gs2 header and the bare message.
pub struct ClientFirst {
    pub user: String,
    pub nonce: String,
    pub gs2_header: String,
    pub bare: String,
}

pub fn parse_client_first(message: &[u8]) -> Result<ClientFirst, ScramError> {
    let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))?;
    let mut parts = text.splitn(3, ',');
    let cbind = parts.next().unwrap_or_default();
    let authzid = parts.next().ok_or(ScramError::Malformed("no gs2 header"))?;
    let bare = parts.next().ok_or(ScramError::Malformed(
        "no client-first message after the gs2 header",
    ))?;
    match cbind {
        "n" | "y" => {}
        p if p.starts_with("p=") => return Err(ScramError::ChannelBinding),
        _ => {
            return Err(ScramError::Malformed(
                "the gs2 header starts with n, y or p=",
            ));
        }
    }
    let mut fields = bare.split(',');
    let first = fields.next();
    if first.is_some_and(|f| f.starts_with("m=")) {
        return Err(ScramError::Extensions);
    }
    let user = sasl_name(attribute(first, 'n')?)?;
    let nonce = attribute(fields.next(), 'r')?;
    if nonce.is_empty()
        || !nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
    {
        return Err(ScramError::Malformed("the nonce is not printable ASCII"));
    }
    if fields.next().is_some() {
        return Err(ScramError::Extensions);
    }
    if !authzid.is_empty() {
        let named = sasl_name(authzid.strip_prefix("a=").ok_or(ScramError::Malformed(
            "the gs2 header's identity is not a=…",
        ))?)?;
        if named != user {
            return Err(ScramError::AuthorizationIdentity);
        }
    }
    Ok(ClientFirst {
        user,
        nonce: nonce.to_owned(),
        gs2_header: format!("{cbind},{authzid},"),
        bare: bare.to_owned(),
    })
}

impl Exchange {
    /// The answer to a client-first message: the exchange and the server-first message.
    /// `credential` is the user's, `None` for an unknown user, whose salt then comes from
    /// `decoy_salt`.
    pub fn start(
        hash: Hash,
        first: ClientFirst,
        credential: Option<StoredCredential>,
        decoy_salt: impl FnOnce() -> Vec<u8>,
        random: &dyn Random,
    ) -> (Exchange, String) {
        let mut server_nonce = [0u8; NONCE_BYTES];
        random.fill(&mut server_nonce);
        let nonce = format!("{}{}", first.nonce, BASE64.encode(server_nonce));
        let (salt, iterations) = match &credential {
            Some(c) => (c.salt.clone(), c.iterations),
            None => (decoy_salt(), ITERATIONS),
        };
        let server_first = format!("r={nonce},s={},i={iterations}", BASE64.encode(salt));
        let exchange = Exchange::Challenged {
            hash,
            user: first.user,
            credential,
            client_first_bare: first.bare,
            server_first: server_first.clone(),
            gs2_header: first.gs2_header,
            nonce,
        };
        (exchange, server_first)
    }

    /// The client-final message checked: the user it proved and the server-final
    /// message, or why the proof fails.
    pub fn finish(self, message: &[u8]) -> Result<(String, String), ScramError> {
        let Exchange::Challenged {
            hash,
            user,
            credential,
            client_first_bare,
            server_first,
            gs2_header,
            nonce,
        } = self;
        let text = std::str::from_utf8(message).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or(ScramError::Malformed("no proof (p=)"))?;
        let mut fields = without_proof.split(',');
        let binding = attribute(fields.next(), 'c')?;
        let final_nonce = attribute(fields.next(), 'r')?;
        if fields.next().is_some() {
            return Err(ScramError::Extensions);
        }
        if BASE64.decode(binding).ok().as_deref() != Some(gs2_header.as_bytes()) {
            return Err(ScramError::Malformed(
                "the channel binding (c=) is not the gs2 header sent first",
            ));
        }
        if final_nonce != nonce {
            return Err(ScramError::NonceMismatch);
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|_| ScramError::Malformed("the proof is not base64"))?;
        let Some(credential) = credential else {
            return Err(ScramError::BadProof);
        };
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = hash.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(ScramError::BadProof);
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        if !same_bytes(&hash.digest(&client_key), &credential.stored_key) {
            return Err(ScramError::BadProof);
        }
        let server_signature = hash.hmac(&credential.server_key, auth_message.as_bytes());
        Ok((user, format!("v={}", BASE64.encode(server_signature))))
    }
}

/// Equal keys, compared in a time that does not depend on where they differ.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// A salt for an unknown user: the same for the same name within a start, and unlike a
/// real one in nothing a client can see.
pub fn decoy_salt(hash: Hash, secret: &[u8], user: &str) -> Vec<u8> {
    let mut salt = hash.hmac(secret, user.as_bytes());
    salt.truncate(SALT_BYTES);
    salt
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns fixed bytes: the RFC's server nonce or salt.
    struct Fixed(Vec<u8>);

    impl Random for Fixed {
        fn fill(&self, out: &mut [u8]) {
            out.copy_from_slice(&self.0[..out.len()]);
        }
    }

    /// A client's side, from the RFC's formulas, for exchanges the RFCs give no vector
    /// for (SHA-512, wrong passwords).
    fn client_final(
        hash: Hash,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
    ) -> String {
        let mut fields = server_first.split(',');
        let nonce = fields.next().unwrap().strip_prefix("r=").unwrap();
        let salt = BASE64
            .decode(fields.next().unwrap().strip_prefix("s=").unwrap())
            .unwrap();
        let iterations: u32 = fields.next().unwrap()[2..].parse().unwrap();
        let salted = hash.salted_password(password.as_bytes(), &salt, iterations);
        let client_key = hash.hmac(&salted, b"Client Key");
        let stored_key = hash.digest(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = hash.hmac(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    /// RFC 7677 section 3: user `user`, password `pencil`.
    #[test]
    fn rfc_7677_sha_256_exchange_verifies() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = StoredCredential::derive(Hash::Sha256, b"pencil", salt, 4096);
        let first = parse_client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
        assert_eq!(first.user, "user");
        // The RFC's server nonce is printable text, not base64 of random bytes: the
        // exchange is built from the RFC's server-first message directly.
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                            s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let exchange = Exchange::Challenged {
            hash: Hash::Sha256,
            user: first.user,
            credential: Some(credential),
            client_first_bare: first.bare,
            server_first: server_first.to_owned(),
            gs2_header: first.gs2_header,
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".to_owned(),
        };
        let (user, server_final) = exchange
            .finish(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                  p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            )
            .unwrap();
        assert_eq!(user, "user");
        assert_eq!(
            server_final,
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    /// RFC 5802 section 5's client nonce with SHA-512 (no RFC gives a SHA-512 vector) and
    /// a client computing its own proof; the wrong password fails with the same error as
    /// an unknown user.
    #[test]
    fn sha_512_exchange_succeeds_with_the_password_and_fails_without() {
        let random = Fixed(vec![7; 64]);
        let credential = StoredCredential::new(Hash::Sha512, b"s3cret-token", &random);
        let start = |credential: Option<StoredCredential>| {
            let first = parse_client_first(b"n,,n=orders,r=fyko+d2lbbFgONRv9qkxdawL").unwrap();
            let bare = first.bare.clone();
            let (exchange, server_first) =
                Exchange::start(Hash::Sha512, first, credential, || vec![1; 16], &random);
            assert!(server_first.starts_with("r=fyko+d2lbbFgONRv9qkxdawL"));
            assert!(server_first.ends_with(",i=4096"));
            (exchange, bare, server_first)
        };
        let (exchange, bare, server_first) = start(Some(credential.clone()));
        let good = client_final(Hash::Sha512, "s3cret-token", &bare, &server_first);
        let (user, server_final) = exchange.finish(good.as_bytes()).unwrap();
        assert_eq!(user, "orders");
        assert!(server_final.starts_with("v="));

        let (exchange, bare, server_first) = start(Some(credential));
        let bad = client_final(Hash::Sha512, "guess", &bare, &server_first);
        assert_eq!(exchange.finish(bad.as_bytes()), Err(ScramError::BadProof));

        let (exchange, bare, server_first) = start(None);
        let any = client_final(Hash::Sha512, "s3cret-token", &bare, &server_first);
        assert_eq!(exchange.finish(any.as_bytes()), Err(ScramError::BadProof));
    }

    #[test]
    fn client_first_messages_outside_what_kafka_sends_are_refused() {
        let refused = |m: &str| parse_client_first(m.as_bytes()).err();
        assert_eq!(
            refused("p=tls-unique,,n=u,r=abc"),
            Some(ScramError::ChannelBinding)
        );
        assert_eq!(
            refused("n,,n=u,r=abc,tokenauth=true"),
            Some(ScramError::Extensions)
        );
        assert_eq!(refused("n,,m=x,n=u,r=abc"), Some(ScramError::Extensions));
        assert_eq!(
            refused("n,a=other,n=u,r=abc"),
            Some(ScramError::AuthorizationIdentity)
        );
        assert!(matches!(
            refused("n,,r=abc,n=u"),
            Some(ScramError::Malformed(_))
        ));
        assert!(matches!(
            refused("n,,n=a=b,r=abc"),
            Some(ScramError::Malformed(_))
        ));
        let escaped = parse_client_first(b"n,a=a=2Cb=3D,n=a=2Cb=3D,r=abc").unwrap();
        assert_eq!(escaped.user, "a,b=");
    }

    #[test]
    fn a_final_message_with_another_nonce_or_binding_is_refused() {
        let random = Fixed(vec![3; 64]);
        let credential = StoredCredential::new(Hash::Sha256, b"t", &random);
        let first = parse_client_first(b"n,,n=u,r=abc").unwrap();
        let (exchange, _) =
            Exchange::start(Hash::Sha256, first, Some(credential), Vec::new, &random);
        assert_eq!(
            exchange.finish(b"c=biws,r=abcX,p=AAAA"),
            Err(ScramError::NonceMismatch)
        );
    }
}
