//! The server's configuration from an arbitrary config file, `FERRY_*` variables and flags:
//! parsing, layering and checking never panic, and whatever is accepted
//! - takes each value from the first of its flag, its variable, the file and the default,
//!   and says so;
//! - has no limit of 0 and never a certificate without its key;
//! - is described without any token's hash.
//!
//! Input: the config file's text, then optionally a NUL byte and lines of `NAME=value`
//! (variables) and `--flag[=value]` (flags), e.g.
//!     [grpc]\naddr = "127.0.0.1:1"\n\0FERRY_HTTP_ADDR=127.0.0.1:2\n--no-http
//!
//! Run (from crates/ferry-cli; nightly):
//!     cargo fuzz run config_parser -- -max_total_time=600

#![no_main]

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferry_cli::config::{self, Flags, Source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (file_text, rest) = text.split_once('\0').unwrap_or((&text, ""));
    let mut vars = BTreeMap::new();
    let mut flags = Flags::default();
    for line in rest.lines() {
        if let Some(flag) = line.strip_prefix("--") {
            set_flag(&mut flags, flag);
        } else if let Some((name, value)) = line.split_once('=') {
            vars.insert(name.to_owned(), value.to_owned());
        }
    }
    // As the process's environment reads: a variable set to "" counts as unset.
    let env = |name: &str| vars.get(name).filter(|v| !v.is_empty()).cloned();

    let Ok(file) = config::parse_file(file_text) else {
        return;
    };
    let file_grpc = file.grpc.addr;
    let file_dir = file.data.dir.clone();
    let file_max_batch = file.limits.max_batch;
    let hashes: Vec<String> = file
        .auth
        .iter()
        .flat_map(|a| a.tokens.iter().map(|t| t.sha256.clone()))
        .collect();
    let Ok(effective) = config::resolve(file, &env, &flags) else {
        return;
    };

    let expected_grpc = match (flags.grpc, env("FERRY_GRPC_ADDR"), file_grpc) {
        (Some(_), _, _) => Source::Flag("--grpc"),
        (None, Some(_), _) => Source::Env("FERRY_GRPC_ADDR"),
        (None, None, Some(_)) => Source::File,
        (None, None, None) => Source::Default,
    };
    assert_eq!(effective.grpc.source, expected_grpc);
    if let Some(addr) = flags.grpc {
        assert_eq!(effective.grpc.value, addr);
    }
    let expected_dir = match (&flags.data_dir, env("FERRY_DATA_DIR"), &file_dir) {
        (Some(d), _, _) => (Source::Flag("--data-dir"), d.clone()),
        (None, Some(d), _) => (Source::Env("FERRY_DATA_DIR"), PathBuf::from(d)),
        (None, None, Some(d)) => (Source::File, d.clone()),
        (None, None, None) => (Source::Default, PathBuf::from(config::DEFAULT_DATA_DIR)),
    };
    assert_eq!(
        (effective.data_dir.source, effective.data_dir.value.clone()),
        expected_dir
    );
    if env("FERRY_LIMITS_MAX_BATCH").is_none() {
        assert_eq!(effective.max_batch.value, file_max_batch);
    }
    assert_ne!(effective.max_batch.value, Some(0));
    assert_ne!(effective.max_connections.value, Some(0));
    assert_eq!(
        effective.tls_cert.value.is_some(),
        effective.tls_key.value.is_some()
    );
    if flags.no_http {
        assert!(!effective.http_enabled.value);
    }

    let described = config::describe(&effective);
    // The tokens' part: paths and addresses above it may spell anything.
    let auth_part = &described[described.rfind("\nauth:").expect("an auth line")..];
    let named: Vec<String> = effective
        .auth
        .iter()
        .flat_map(|a| a.tokens.iter())
        .flat_map(|t| {
            std::iter::once(t.name.clone()).chain(t.permissions.iter().map(ToString::to_string))
        })
        .collect();
    for hash in hashes {
        // A hash is 64 hex digits; one that a token's own name or permission spells out
        // is in the description for that reason, not as a leak.
        if !named
            .iter()
            .any(|n| n.to_lowercase().contains(&hash.to_lowercase()))
        {
            assert!(
                !auth_part.to_lowercase().contains(&hash.to_lowercase()),
                "the description shows a token hash:\n{described}"
            );
        }
    }
});

/// One flag as `ferry serve` takes it; a value clap would refuse leaves the flag unset.
fn set_flag(flags: &mut Flags, flag: &str) {
    let (name, value) = flag.split_once('=').unwrap_or((flag, ""));
    match name {
        "grpc" => flags.grpc = value.parse().ok(),
        "http" => flags.http = value.parse().ok(),
        "no-http" => flags.no_http = true,
        "data-dir" if !value.is_empty() => flags.data_dir = Some(value.into()),
        "tls-cert" if !value.is_empty() => flags.tls_cert = Some(value.into()),
        "tls-key" if !value.is_empty() => flags.tls_key = Some(value.into()),
        _ => {}
    }
}
