//! Arbitrary requests (request line, headers, body) through the SQS decoders (AWS JSON 1.0
//! and query, chosen by the headers as the endpoint chooses) and SNS's query decoder: none
//! panics, and whatever is refused is answered with a typed error in the protocol's own
//! shape. See `src/lib.rs` for the input format and the checks.
//!
//! Run (from crates/ferry-aws; nightly):
//!     cargo fuzz run request_decoders -- -max_total_time=600

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferry_aws_fuzz::check(data);
});
