//! What the client commands print and parse: tables or JSON, durations, `k=v` pairs, and
//! errors turned into one line that says what to do.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use ferry_client::ClientError;

/// A table with a header row, in the house look.
pub fn table<const N: usize>(header: [&str; N]) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header(header);
    table
}

/// A two-column table of field and value, for one thing described.
pub fn fields(rows: &[(&str, String)]) -> Table {
    let mut table = table(["field", "value"]);
    for (name, value) in rows {
        table.add_row([name.to_string(), value.clone()]);
    }
    table
}

pub fn print_json(value: &serde_json::Value) {
    out!("{value}");
}

/// Writes a line to stdout. A closed pipe (`ferry consume | head -1`) ends the command
/// quietly, as for other Unix tools, instead of a panic; what was not printed was not
/// settled either, so it is delivered again after its lease.
pub fn write_line(line: std::fmt::Arguments) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_fmt(line)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("ferry: error: could not write the output: {e}");
            std::process::exit(1);
        }
    }
}

/// A proto enum's name as a user writes it: `ORDERING_MODE_KEY_SHARED` → `key-shared`.
pub fn enum_name(name: &str, prefix: &str) -> String {
    name.strip_prefix(prefix)
        .unwrap_or(name)
        .to_lowercase()
        .replace('_', "-")
}

/// `--watch 5` (seconds, as `watch -n`) or a duration with a unit.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds.is_finite() => Ok(Duration::from_secs_f64(seconds)),
        Ok(_) => Err("the interval must be more than 0".into()),
        Err(_) => parse_duration(text),
    }
}

/// `30s`, `5m`, `2h`, `1d`, `250ms`, or a sum like `1h30m`. A bare number is refused:
/// seconds and milliseconds are both plausible, and a wrong guess is silent.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let hint = "use a number and a unit: 250ms, 30s, 5m, 2h, 1d";
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(format!("empty duration ({hint})"));
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(|| format!("{text:?} has no unit ({hint})"))?;
        let (number, tail) = rest.split_at(digits);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("{text:?} is not a duration ({hint})"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let seconds = match unit {
            "ms" => value / 1000.0,
            "s" => value,
            "m" => value * 60.0,
            "h" => value * 3600.0,
            "d" => value * 86_400.0,
            _ => return Err(format!("{text:?}: unknown unit {unit:?} ({hint})")),
        };
        total += Duration::from_secs_f64(seconds);
        rest = tail;
    }
    Ok(total)
}

pub fn millis(duration: Duration) -> u64 {
    duration.as_millis().try_into().unwrap_or(u64::MAX)
}

/// `name=value` (the value may contain `=`).
pub fn parse_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not name=value")),
    }
}

/// A short human form of a duration: `850ms`, `12s`, `5m03s`, `2h10m`, `3d4h`.
pub fn human(duration: Duration) -> String {
    let ms = duration.as_millis();
    let s = duration.as_secs();
    if ms < 1000 {
        format!("{ms}ms")
    } else if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d{}h", s / 86_400, (s % 86_400) / 3600)
    }
}

pub fn human_ms(ms: Option<u64>) -> String {
    ms.map_or_else(|| "-".to_owned(), |ms| human(Duration::from_millis(ms)))
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// How long ago `at_ms` (epoch milliseconds) was.
pub fn age(at_ms: i64) -> String {
    human(Duration::from_millis(
        (now_ms() - at_ms).max(0).try_into().unwrap_or(0),
    ))
}

/// A payload as text: UTF-8 as is, anything else as hex.
pub fn payload_text(payload: &[u8]) -> String {
    match std::str::from_utf8(payload) {
        Ok(text) => text.to_owned(),
        Err(_) => format!("0x{}", hex(payload)),
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A client error with what to do about it, for the one line the binary prints.
pub fn explain(error: ClientError, server: &str) -> anyhow::Error {
    use ferry_client::ClientError as E;
    use tonic::Code;
    let hint = match &error {
        // The failure says what is wrong and the fix; the flags to change it with are ours.
        E::Tls { failure, .. } => match failure {
            ferry_client::TlsFailure::UnknownIssuer => "check --tls-ca / FERRY_TLS_CA".to_owned(),
            ferry_client::TlsFailure::NoApplicationProtocol => {
                format!("point --server / FERRY_SERVER at its gRPC port (now {server})")
            }
            _ => String::new(),
        },
        // The failure's own text has the root cause; the hint says what to change.
        E::Connect { error: cause, .. } if is_tls_failure(cause) => format!(
            "check --tls-ca / FERRY_TLS_CA (the CA that signed the server's certificate) \
             and that the server at {server} speaks TLS"
        ),
        E::Connect { .. } => format!(
            "is `ferry serve` running there? Start it, or point --server / FERRY_SERVER \
             at it (now {server})"
        ),
        E::BadTls(_) => "give the CA file with --tls-ca or FERRY_TLS_CA".to_owned(),
        E::BadUrl { .. } => "fix --server or FERRY_SERVER".to_owned(),
        E::BadToken(_) => "fix --token or FERRY_TOKEN".to_owned(),
        // The server's own messages say what to do for bad names and arguments.
        E::Server { code, .. } => match code {
            Code::Unavailable => format!(
                "the server at {server} is unreachable or stopping; try again when it is up \
                 (if it serves TLS, give its CA with --tls-ca or FERRY_TLS_CA)"
            ),
            // A plaintext client at a TLS listener sees the connection break like this.
            Code::Internal | Code::Unknown | Code::Cancelled
                if ["h2 protocol error", "transport error", "connection closed"]
                    .iter()
                    .any(|broken| error.to_string().contains(broken)) =>
            {
                format!(
                    "the connection to {server} broke: if the server serves TLS, give its CA \
                     with --tls-ca or FERRY_TLS_CA"
                )
            }
            Code::Unauthenticated => {
                "give a token the server knows with --token or FERRY_TOKEN".into()
            }
            Code::PermissionDenied => "use a token with that permission".into(),
            Code::ResourceExhausted => {
                "a limit was reached: consume, raise the queue's limits, or slow down".into()
            }
            _ => String::new(),
        },
        E::Closed => String::new(),
    };
    let text = error.to_string();
    if hint.is_empty() {
        anyhow::anyhow!(text)
    } else {
        anyhow::anyhow!("{text}: {hint}")
    }
}

/// Whether a connection failed in its TLS handshake rather than reaching the server.
fn is_tls_failure(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string().to_lowercase();
        if [
            "certificate",
            "tls",
            "handshake",
            "alert",
            "corrupt message",
        ]
        .iter()
        .any(|w| text.contains(w))
        {
            return true;
        }
        source = cause.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit_and_add_up() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn pairs_split_at_the_first_equals() {
        assert_eq!(parse_pair("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_pair("=x").is_err());
        assert!(parse_pair("novalue").is_err());
    }
}
