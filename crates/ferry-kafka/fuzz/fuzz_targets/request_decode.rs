//! Arbitrary bytes as one Kafka request frame's body (api key, version, correlation id,
//! client id, body) through the connection's decode path: the header, the guard's count
//! checks, the request's decode and, for Produce, the record batches' decode and
//! decompression. Nothing may panic or abort; garbage is refused with the typed error. See
//! `src/lib.rs` for the checks.
//!
//! Run (from crates/ferry-kafka; nightly):
//!     cargo fuzz run request_decode -- -max_total_time=600

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferry_kafka_fuzz::check(data);
});
