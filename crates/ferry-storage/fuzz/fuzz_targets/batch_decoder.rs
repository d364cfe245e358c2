//! Arbitrary bytes into the batch decoder: decoding must never panic, and whatever decodes
//! must survive a re-encode unchanged.
//!
//! Run (from crates/ferry-storage; nightly, or stable with RUSTC_BOOTSTRAP=1):
//!     cargo fuzz run batch_decoder -- -max_total_time=60
//! The seed corpus in corpus/batch_decoder/ holds valid batches (see gen_seed_corpus.py).

#![no_main]

use bytes::{Bytes, BytesMut};
use ferry_storage::batch::{self, RecordBatch};
use ferry_storage::{NewRecord, Record};
use libfuzzer_sys::fuzz_target;

const MAX_BATCH: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    check(data);
    // Mutations almost never keep the CRC32C right, which would leave the record parser
    // behind the checksum unexplored: also try the input with a valid frame and checksum.
    if data.len() >= batch::HEADER_LEN && data.len() <= MAX_BATCH {
        let mut framed = data.to_vec();
        framed[0..4].copy_from_slice(&(data.len() as u32).to_le_bytes());
        framed[4..6].copy_from_slice(&batch::MAGIC.to_le_bytes());
        framed[6] = batch::VERSION;
        framed[7] &= batch::ATTR_GROUP_END;
        let crc = batch::checksum(&framed);
        framed[8..12].copy_from_slice(&crc.to_le_bytes());
        check(&framed);
    }
});

fn check(data: &[u8]) {
    let Ok(decoded) = RecordBatch::decode(Bytes::copy_from_slice(data), MAX_BATCH) else {
        return;
    };
    let header = *decoded.header();
    assert_eq!(decoded.bytes().len(), header.length as usize);
    let records: Vec<Record> = decoded.records().collect();
    // `records` promises to yield every record once `decode` accepted the batch.
    assert_eq!(records.len(), header.record_count as usize);
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record.offset, header.base_offset + i as u64);
    }

    let again: Vec<NewRecord> = records
        .iter()
        .map(|r| NewRecord {
            timestamp: Some(r.timestamp),
            key: r.key.clone(),
            headers: r.headers.clone(),
            value: r.value.clone(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let written = batch::encode(&mut buf, header.base_offset, &again, 0);
    // Same records, same fixed-width framing: the same size.
    assert_eq!(written.length, header.length);
    let redecoded = RecordBatch::decode(buf.freeze(), MAX_BATCH)
        .unwrap_or_else(|e| panic!("a re-encoded batch must decode: {e}"));
    let round_tripped: Vec<Record> = redecoded.records().collect();
    assert_eq!(round_tripped, records);
}
