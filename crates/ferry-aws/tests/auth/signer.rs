//! A SigV4 signer for tests, written from AWS's documentation apart from the verifier
//! (`ferry_aws::sigv4`), so that a mistake in one is not repeated in the other: the
//! canonical request (method, path encoded once more, sorted query, lower-cased sorted
//! headers, signed header list, body SHA-256), the string to sign, the derived key.
//! `crates/ferry-cli/tests/aws_auth.rs` includes this file too.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// An access key and where its signatures are scoped.
#[derive(Clone)]
pub struct Signer {
    pub key_id: String,
    pub secret: String,
    pub region: String,
    pub service: String,
}

impl Signer {
    pub fn new(key_id: &str, secret: &str, service: &str) -> Signer {
        Signer {
            key_id: key_id.into(),
            secret: secret.into(),
            region: "us-east-1".into(),
            service: service.into(),
        }
    }

    /// The headers to add to a request (`X-Amz-Date`, `Authorization`) so that it is
    /// signed at `time_ms`. `headers` are the request's other headers, `Host` included,
    /// all of them signed.
    pub fn sign(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        time_ms: i64,
    ) -> Vec<(String, String)> {
        let amz_date = amz_date(time_ms);
        let mut all: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        all.push(("x-amz-date".into(), amz_date.clone()));
        all.sort();
        let canonical_headers: String = all.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();
        let signed: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        let signed = signed.join(";");
        let canonical = format!(
            "{method}\n{}\n\n{canonical_headers}\n{signed}\n{}",
            encode_path(path),
            hex(&Sha256::digest(body))
        );
        let date = &amz_date[..8];
        let scope = format!("{date}/{}/{}/aws4_request", self.region, self.service);
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            hex(&Sha256::digest(canonical.as_bytes()))
        );
        let mut key = format!("AWS4{}", self.secret).into_bytes();
        for part in [date, &self.region, &self.service, "aws4_request"] {
            key = hmac(&key, part.as_bytes());
        }
        let signature = hex(&hmac(&key, to_sign.as_bytes()));
        vec![
            ("X-Amz-Date".into(), amz_date),
            (
                "Authorization".into(),
                format!(
                    "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, \
                     Signature={signature}",
                    self.key_id
                ),
            ),
        ]
    }
}

/// Now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn encode_path(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `yyyyMMddTHHmmssZ` of a time in milliseconds since the epoch.
fn amz_date(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
