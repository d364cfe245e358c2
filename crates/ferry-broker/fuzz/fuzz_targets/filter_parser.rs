//! Subscription filters from arbitrary text, matched against arbitrary headers: parsing
//! never panics; whatever parses prints back to text that parses to the same filter;
//! matching never panics, stays fast, and every subject pattern agrees with a plain
//! dynamic-programming matcher written here from the documented rules.
//!
//! Input: the filter text, then optionally a NUL byte and lines of `name=value` (the
//! message's headers), e.g. `subject ~ orders.#\0subject=orders.eu.created`.
//!
//! Run from crates/ferry-broker: `cargo fuzz run filter_parser` (nightly, or
//! `RUSTC_BOOTSTRAP=1`), starting from the seed corpus in `fuzz/corpus/filter_parser`.

#![no_main]

use ferry_broker::Headers;
use ferry_broker::header::SUBJECT;
use ferry_broker::{Filter, Predicate, SubjectPattern};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let (text, header_lines) = input.split_once('\0').unwrap_or((input, ""));
    let Ok(filter) = Filter::parse(text) else {
        return;
    };
    let printed = filter.to_string();
    let again = Filter::parse(&printed).expect("a printed filter parses");
    assert_eq!(again, filter, "{printed}");

    let fixed: Headers = [
        ("subject", "orders.eu.created"),
        ("type", "order.created"),
        ("region", "eu"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let fuzzed: Headers = header_lines
        .split('\n')
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for headers in [&fixed, &fuzzed] {
        let all = filter.matches(headers);
        assert_eq!(all, filter.predicates.iter().all(|p| p.matches(headers)));
        if let Some(subject) = headers.get(SUBJECT) {
            let mut patterns = Vec::new();
            for p in &filter.predicates {
                subject_patterns(p, &mut patterns);
            }
            for pattern in patterns {
                assert_eq!(
                    pattern.matches(subject),
                    reference_match(pattern.as_str(), subject),
                    "pattern {:?} on subject {subject:?}",
                    pattern.as_str()
                );
            }
        }
    }
});

/// Every subject pattern in `p`, however deep in groups and `not`s.
fn subject_patterns<'a>(p: &'a Predicate, into: &mut Vec<&'a SubjectPattern>) {
    match p {
        Predicate::Subject(pattern) => into.push(pattern),
        Predicate::Not(inner) => subject_patterns(inner, into),
        Predicate::All(members) | Predicate::Any(members) => {
            for m in members {
                subject_patterns(m, into);
            }
        }
        _ => {}
    }
}

/// The rules as a table: `at[i][j]` says whether pattern segments `i..` match subject parts
/// `j..`. `*` takes exactly one part, `#` zero or more, a literal the same text.
fn reference_match(pattern: &str, subject: &str) -> bool {
    let segments: Vec<&str> = pattern.split('.').collect();
    let parts: Vec<&str> = subject.split('.').collect();
    let (m, n) = (segments.len(), parts.len());
    let mut at = vec![vec![false; n + 1]; m + 1];
    at[m][n] = true;
    for i in (0..m).rev() {
        for j in (0..=n).rev() {
            at[i][j] = match segments[i] {
                "#" => at[i + 1][j] || (j < n && at[i][j + 1]),
                "*" => j < n && at[i + 1][j + 1],
                literal => j < n && parts[j] == literal && at[i + 1][j + 1],
            };
        }
    }
    at[0][0]
}
