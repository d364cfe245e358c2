//! `ferry token hash`: the token from the argument, or from stdin so that it stays out of
//! the shell's history and `ps`.

use std::io::Write;
use std::process::{Command, Stdio};

/// `sha256("s3cret-token")`, from `printf %s s3cret-token | sha256sum`.
const HASH: &str = "a81e611a041b13f078bf8ebe5dab4d4fd63fcc5594661c918bec093a2f416a7e";

fn hash(args: &[&str], stdin: Option<&[u8]>) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["token", "hash"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

#[test]
fn the_token_is_hashed_from_the_argument_or_from_stdin() {
    let want = HASH;
    assert_eq!(hash(&["s3cret-token"], None), want);
    // `printf %s "$TOKEN" | ferry token hash`: no newline.
    assert_eq!(hash(&[], Some(b"s3cret-token")), want);
    // `ferry token hash < token.txt`: the file's one trailing newline is not the token's.
    assert_eq!(hash(&[], Some(b"s3cret-token\n")), want);
    assert_eq!(hash(&[], Some(b"s3cret-token\r\n")), want);
}

#[test]
fn an_empty_stdin_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["token", "hash"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stdin"), "{stderr}");
}
