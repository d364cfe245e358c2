//! The input format of the `recovery_scan` target: a log directory as one byte string, so
//! that libFuzzer can mutate whole directories and the seed generator
//! (`examples/gen_recovery_seeds.rs`) can write real ones.
//!
//! ```text
//! u8   flags: bit 0 = open with repair, bit 1 = fix checksums (see below)
//! then up to MAX_FILES entries, each
//!   u8      kind % 4: 0 segment log, 1 segment index, 2 recovery checkpoint, 3 leftover .tmp
//!   u32 LE  the segment's base offset (names the file; ignored for the checkpoint)
//!   u16 LE  length
//!   bytes   contents (cut short if the input ends first)
//! ```
//!
//! Mutations almost never keep a CRC32C right, which would leave everything recovery does
//! after a checksum passes unexplored. With "fix checksums" the image is patched as it is
//! written: each batch that a segment's length fields chain together gets a valid magic,
//! version and checksum; index entries and footers get valid checksums; a checkpoint of
//! the right size gets its magic and checksum. Offsets, lengths, counts and positions stay
//! whatever the fuzzer made them.

use std::path::Path;

use ferry_storage::batch;
use ferry_storage::index::{ENTRY_LEN, FOOTER_LEN, Footer, IndexEntry};

pub const FLAG_REPAIR: u8 = 1;
pub const FLAG_FIX_CHECKSUMS: u8 = 2;
pub const MAX_FILES: usize = 8;

/// The recovery checkpoint's file name, magic and size (private to ferry-storage; see its
/// `checkpoint.rs`, whose layout this mirrors).
pub const CHECKPOINT_FILE: &str = "recovery.checkpoint";
const CHECKPOINT_MAGIC: u32 = 0xFE77_C4EC;
const CHECKPOINT_LEN: usize = 48;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Log,
    Index,
    Checkpoint,
    Leftover,
}

impl Kind {
    fn from_byte(b: u8) -> Kind {
        match b % 4 {
            0 => Kind::Log,
            1 => Kind::Index,
            2 => Kind::Checkpoint,
            _ => Kind::Leftover,
        }
    }

    fn byte(self) -> u8 {
        match self {
            Kind::Log => 0,
            Kind::Index => 1,
            Kind::Checkpoint => 2,
            Kind::Leftover => 3,
        }
    }

    /// The file's name inside the log directory, as ferry-storage names it.
    pub fn file_name(self, base: u32) -> String {
        match self {
            Kind::Log => format!("{:020}.log", base),
            Kind::Index => format!("{:020}.index", base),
            Kind::Checkpoint => CHECKPOINT_FILE.to_owned(),
            Kind::Leftover => format!("{:020}.log.tmp", base),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub kind: Kind,
    pub base: u32,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirImage {
    pub repair: bool,
    pub fix_checksums: bool,
    pub files: Vec<File>,
}

impl DirImage {
    pub fn parse(data: &[u8]) -> DirImage {
        let Some((&flags, mut rest)) = data.split_first() else {
            return DirImage::default();
        };
        let mut files = Vec::new();
        while files.len() < MAX_FILES && rest.len() >= 7 {
            let kind = Kind::from_byte(rest[0]);
            let base = u32::from_le_bytes(rest[1..5].try_into().expect("4 bytes"));
            let len = u16::from_le_bytes([rest[5], rest[6]]) as usize;
            let body = &rest[7..];
            let take = len.min(body.len());
            files.push(File {
                kind,
                base,
                bytes: body[..take].to_vec(),
            });
            rest = &body[take..];
        }
        DirImage {
            repair: flags & FLAG_REPAIR != 0,
            fix_checksums: flags & FLAG_FIX_CHECKSUMS != 0,
            files,
        }
    }

    /// The inverse of [`DirImage::parse`] for images whose files fit its limits.
    pub fn encode(&self) -> Vec<u8> {
        let mut flags = 0;
        if self.repair {
            flags |= FLAG_REPAIR;
        }
        if self.fix_checksums {
            flags |= FLAG_FIX_CHECKSUMS;
        }
        let mut out = vec![flags];
        for f in self.files.iter().take(MAX_FILES) {
            let len = u16::try_from(f.bytes.len()).expect("a file of at most 64 KiB");
            out.push(f.kind.byte());
            out.extend_from_slice(&f.base.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&f.bytes);
        }
        out
    }

    /// Writes the image's files into `dir` (later files of the same name win).
    pub fn write_to(&self, dir: &Path) -> std::io::Result<()> {
        for f in &self.files {
            let mut bytes = f.bytes.clone();
            if self.fix_checksums {
                match f.kind {
                    Kind::Log => fix_batches(&mut bytes),
                    Kind::Index => fix_index(&mut bytes),
                    Kind::Checkpoint => fix_checkpoint(&mut bytes),
                    Kind::Leftover => {}
                }
            }
            std::fs::write(dir.join(f.kind.file_name(f.base)), bytes)?;
        }
        Ok(())
    }
}

/// Gives each batch the length fields chain together a valid frame and checksum; stops at
/// the first length that cannot frame a batch (what follows stays as it was: a torn tail).
pub fn fix_batches(bytes: &mut [u8]) {
    let mut pos = 0;
    while bytes.len() - pos >= batch::HEADER_LEN {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        if len < batch::HEADER_LEN || len > bytes.len() - pos {
            return;
        }
        let framed = &mut bytes[pos..pos + len];
        framed[4..6].copy_from_slice(&batch::MAGIC.to_le_bytes());
        framed[6] = batch::VERSION;
        framed[7] &= batch::ATTR_GROUP_END;
        let crc = batch::checksum(framed);
        framed[8..12].copy_from_slice(&crc.to_le_bytes());
        pos += len;
    }
}

/// Re-checksums every whole entry, and the footer when the file is shaped like a sealed
/// index (entries then a footer).
pub fn fix_index(bytes: &mut [u8]) {
    let sealed = bytes.len() >= FOOTER_LEN && (bytes.len() - FOOTER_LEN).is_multiple_of(ENTRY_LEN);
    let entries_end = if sealed {
        bytes.len() - FOOTER_LEN
    } else {
        bytes.len() / ENTRY_LEN * ENTRY_LEN
    };
    for chunk in bytes[..entries_end].chunks_exact_mut(ENTRY_LEN) {
        let entry = IndexEntry {
            relative_offset: u32::from_le_bytes(chunk[0..4].try_into().expect("4 bytes")),
            position: u32::from_le_bytes(chunk[4..8].try_into().expect("4 bytes")),
            max_timestamp_before: i64::from_le_bytes(chunk[8..16].try_into().expect("8 bytes")),
        };
        let mut fixed = Vec::with_capacity(ENTRY_LEN);
        entry.encode(&mut fixed);
        chunk.copy_from_slice(&fixed);
    }
    if sealed {
        let (entries, footer) = bytes.split_at_mut(entries_end);
        let word = |at: usize| u64::from_le_bytes(footer[at..at + 8].try_into().expect("8 bytes"));
        let fixed = Footer {
            entry_count: word(0),
            next_offset: word(8),
            max_timestamp: word(16) as i64,
            segment_len: word(24),
            entries_crc: crc32c::crc32c(entries),
        };
        let mut out = Vec::with_capacity(FOOTER_LEN);
        fixed.encode(&mut out);
        footer.copy_from_slice(&out);
    }
}

/// A 48-byte checkpoint gets its magic and checksum; other sizes stay damaged.
pub fn fix_checkpoint(bytes: &mut [u8]) {
    if bytes.len() != CHECKPOINT_LEN {
        return;
    }
    bytes[0..4].copy_from_slice(&CHECKPOINT_MAGIC.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..44]);
    bytes[44..48].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_survives_encode_and_parse() {
        let image = DirImage {
            repair: true,
            fix_checksums: false,
            files: vec![
                File {
                    kind: Kind::Log,
                    base: 7,
                    bytes: vec![1, 2, 3],
                },
                File {
                    kind: Kind::Checkpoint,
                    base: 0,
                    bytes: vec![],
                },
            ],
        };
        assert_eq!(DirImage::parse(&image.encode()), image);
    }
}
