//! Subscription filters from arbitrary text: parsing never panics; whatever parses prints
//! back to text that parses to the same filter; matching never panics.
//!
//! Run from crates/ferry-broker: `cargo fuzz run filter_parser` (nightly, or
//! `RUSTC_BOOTSTRAP=1`), starting from the seed corpus in `fuzz/corpus/filter_parser`.

#![no_main]

use ferry_broker::Headers;
use ferry_broker::filter::Filter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(filter) = Filter::parse(text) else {
        return;
    };
    let printed = filter.to_string();
    let again = Filter::parse(&printed).expect("a printed filter parses");
    assert_eq!(again, filter, "{printed}");
    let headers: Headers = [
        ("subject", "orders.eu.created"),
        ("type", "order.created"),
        ("region", "eu"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let _ = filter.matches(&headers);
});
