#!/usr/bin/env python3
"""Writes the seed corpus of the batch_decoder fuzz target: a few valid record batches in
Ferry's on-disk format (see src/batch.rs), so the fuzzer starts from inputs that get past the
checksum. Run from anywhere; it rewrites corpus/batch_decoder/seed-*.

Pure Python on purpose (CRC32C included), so regenerating needs no build.
"""

import os
import struct

HEADER_LEN = 48
MAGIC = 0xFE77
VERSION = 1
NO_KEY = 0xFFFFFFFF


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def encode(base_offset, records):
    """records: list of (timestamp, key or None, [(name, value)], value)."""
    first_ts = records[0][0]
    max_ts = max(r[0] for r in records)
    body = b""
    for ts, key, headers, value in records:
        rec = struct.pack("<q", ts - first_ts)
        rec += struct.pack("<I", NO_KEY) if key is None else struct.pack("<I", len(key)) + key
        rec += struct.pack("<H", len(headers))
        for name, hvalue in headers:
            rec += struct.pack("<H", len(name)) + name + struct.pack("<I", len(hvalue)) + hvalue
        rec += struct.pack("<I", len(value)) + value
        body += struct.pack("<I", len(rec)) + rec
    length = HEADER_LEN + len(body)
    after_crc = struct.pack("<QIqqQ", base_offset, len(records), first_ts, max_ts, 0) + body
    # The CRC covers magic, version and attributes, then everything after the CRC field.
    crc = crc32c(struct.pack("<HBB", MAGIC, VERSION, 0) + after_crc)
    return struct.pack("<IHBBI", length, MAGIC, VERSION, 0, crc) + after_crc


SEEDS = {
    "seed-single-empty-value": encode(0, [(0, None, [], b"")]),
    "seed-key-and-header": encode(
        42,
        [(1_700_000_000_000, b"order-17", [(b"type", b"order.created")], b'{"id":17,"total":12.5}')],
    ),
    "seed-three-records": encode(
        1000,
        [
            (1_000, b"k1", [(b"trace", bytes(range(16)))], b"v1"),
            (900, None, [], b""),
            (1_500, b"", [(b"a", b""), (b"", b"b")], bytes([7]) * 300),
        ],
    ),
    "seed-negative-and-extreme-timestamps": encode(
        2**40,
        [(-5, None, [], b"x"), (2**62, b"k", [], b"y"), (-(2**62), None, [(b"h", b"v")], b"z")],
    ),
    "seed-many-small-records": encode(7, [(i, None if i % 3 else b"key", [], bytes([i]) * (i % 5)) for i in range(40)]),
}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "batch_decoder")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
