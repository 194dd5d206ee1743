//! Fuzz entry points of the engine's on-disk decoders. Each takes arbitrary bytes and must never panic; the
//! cargo-fuzz targets in `fuzz/` and the seeded smoke tests in
//! `crates/server/tests/it/fuzz_smoke.rs` call exactly these functions.

use crate::hfile::{block, columnar, columns, sections};
use crate::{key, wal};

/// Row key decoding.
pub fn key_decode(data: &[u8]) {
    if let Ok(k) = key::decode(data) {
        // A key that decodes is exactly the encoding of what it decodes to.
        assert_eq!(key::encode(k.device, k.ts).as_slice(), data);
    }
}

/// A run of WAL frames.
pub fn wal_frames(data: &[u8]) {
    let _ = fuzz_decode_frames(data);
}

/// A whole WAL segment through the recovery decisions (as the last
/// segment and as a sealed one); a `Torn` verdict must leave only valid
/// entries before the cut.
pub fn wal_segment(data: &[u8]) {
    let p = std::path::Path::new("fuzz.wal");
    let no = data.get(8..16).map_or(0, crate::util::bin::le_u64_slice);
    for last in [true, false] {
        if let Ok(scan) = wal::scan_segment(data, p, no, last, 0) {
            let mut end = wal::segment::SEGMENT_HEADER_LEN;
            for (pos, e) in &scan.entries {
                assert_eq!(*pos, end, "entries are contiguous");
                end += e.encoded_len();
            }
            if let wal::Verdict::Torn(pos) | wal::Verdict::Corrupt(pos, _) = scan.verdict {
                assert_eq!(pos, end, "the verdict is at the first bad frame");
                assert!(last || matches!(scan.verdict, wal::Verdict::Corrupt(..)));
            }
        }
    }
}

/// A WAL segment header.
pub fn wal_segment_header(data: &[u8]) {
    let _ = wal::segment::decode_header(data, std::path::Path::new("fuzz"));
}

/// One HFile data block; the first byte picks the field width.
pub fn hfile_block(data: &[u8]) {
    let Some((w, rest)) = data.split_first() else {
        return;
    };
    let width = crate::cell::cell_width(usize::from(*w));
    let _ = block::decode(rest, width);
    let _ = block::decode_heads(rest, width);
    let _ = block::decode_parts(rest, width, fuzz_want());
}

/// Keys, seq and two fields (an f64 and an f32 at the start of the
/// fields): what the column decoders are fuzzed with.
fn fuzz_want() -> columns::Want<'static> {
    const SLOTS: [columns::FieldSlot; 2] = [
        columns::FieldSlot {
            index: 0,
            offset: crate::cell::CELL_HEAD_LEN,
            width: 8,
        },
        columns::FieldSlot {
            index: 1,
            offset: crate::cell::CELL_HEAD_LEN + 8,
            width: 4,
        },
    ];
    columns::Want {
        keys: true,
        seq: true,
        fields: &SLOTS,
    }
}

/// A columnar block body without the block's checksum in the way: the
/// first byte picks the cell count (1..=256), the second the field width.
pub fn columnar_block(data: &[u8]) {
    let [n, w, body @ ..] = data else {
        return;
    };
    let width = crate::cell::cell_width(usize::from(*w));
    let _ = columnar::decode(body, usize::from(*n) + 1, width);
    let _ = columnar::run_head_cells(body, usize::from(*n) + 1, width);
    if let Ok(p) = columns::decode_parts(body, usize::from(*n) + 1, width, fuzz_want()) {
        // Decoded keys must answer lookups without panicking.
        let cols = columns::BlockColumns {
            keys: std::sync::Arc::new(p.keys.expect("asked for")),
            seq: None,
            fields: Vec::new(),
        };
        for i in 0..cols.rows() {
            let k = cols.key(i);
            assert!(cols.seek(&k) <= i, "a row's key seeks to it or before");
        }
    }
}

/// An HFile trailer.
pub fn hfile_trailer(data: &[u8]) {
    let _ = sections::Trailer::decode(data, data.len() as u64 + 1_000_000);
}

/// A whole HFile image; the first byte picks the field width.
pub fn hfile_file(data: &[u8]) {
    let Some((w, rest)) = data.split_first() else {
        return;
    };
    let _ = fuzz_decode_file(rest, usize::from(*w));
}

/// A manifest image: decode its records and apply them to a state.
pub fn manifest_log(data: &[u8]) {
    let _ = fuzz_decode_manifest(data);
    let _ = fuzz_apply_manifest(data);
}

/// A named fuzz entry point (for the smoke tests and `fuzz/`).
pub type Target = (&'static str, fn(&[u8]));

/// Every entry point of the engine's decoders, by name (the frontends'
/// wire decoders are in `telestore_server::fuzzing`).
pub const TARGETS: &[Target] = &[
    ("key_decode", key_decode),
    ("wal_frames", wal_frames),
    ("wal_segment", wal_segment),
    ("wal_segment_header", wal_segment_header),
    ("hfile_block", hfile_block),
    ("columnar_block", columnar_block),
    ("hfile_trailer", hfile_trailer),
    ("hfile_file", hfile_file),
    ("manifest_log", manifest_log),
];

// The whole-image decoders the entry points above and the format tests
// share (they were in their modules; kept here so that no fuzz code sits
// in a production module).

/// Fuzz entry point: decode a sequence of frames; must never panic.
pub fn fuzz_decode_frames(data: &[u8]) -> crate::error::Result<usize> {
    use crate::error::Error;
    use crate::wal::frame::*;
    let mut pos = 0;
    let mut n = 0;
    while pos < data.len() {
        match decode(&data[pos..]) {
            Decoded::Entry(_, used) => {
                pos += used;
                n += 1;
            }
            Decoded::Incomplete => break,
            other => return Err(Error::decode("wal frame", format!("{other:?}"))),
        }
    }
    Ok(n)
}

/// Fuzz entry point: decode a manifest image (header + records).
pub fn fuzz_decode_manifest(data: &[u8]) -> crate::error::Result<usize> {
    use crate::error::Error;
    use crate::manifest::record::*;
    let version = decode_header(data)?;
    let mut pos = MANIFEST_HEADER_LEN;
    let mut n = 0;
    while pos < data.len() {
        match decode_framed_v(&data[pos..], version) {
            Framed::Record(_, used) => {
                pos += used;
                n += 1;
            }
            Framed::Incomplete => break,
            other => return Err(Error::decode("manifest record", format!("{other:?}"))),
        }
    }
    Ok(n)
}

/// Fuzz entry point: decode a manifest image and apply every record to a
/// state, as `Manifest::open` does. Returns the number of records applied.
pub fn fuzz_apply_manifest(data: &[u8]) -> crate::error::Result<usize> {
    use crate::error::Error;
    use crate::manifest::record::{self, decode_framed_v, Framed, MANIFEST_HEADER_LEN};
    use crate::manifest::State;
    let version = record::decode_header(data)?;
    let mut state = State::default();
    let mut pos = MANIFEST_HEADER_LEN;
    let mut n = 0;
    while pos < data.len() {
        match decode_framed_v(&data[pos..], version) {
            Framed::Record(r, used) => {
                state
                    .apply(&r)
                    .map_err(|m| Error::decode("manifest edit", m))?;
                pos += used;
                n += 1;
            }
            _ => break,
        }
    }
    Ok(n)
}

/// Fuzz entry point: parse a whole HFile image and decode every block.
pub fn fuzz_decode_file(data: &[u8], fields_width: usize) -> crate::error::Result<u64> {
    use crate::cell;
    use crate::error::Error;
    use crate::hfile::reader::*;
    use crate::hfile::sections::{Trailer, TRAILER_LEN};
    if data.len() < TRAILER_LEN {
        return Err(Error::decode("hfile", "short"));
    }
    let toff = data.len() - TRAILER_LEN;
    let t = Trailer::decode(&data[toff..], data.len() as u64)?;
    let p = parse_sections(&t, |s| {
        data.get(s.offset as usize..(s.offset + u64::from(s.len)) as usize)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Error::decode("hfile", "section outside"))
    })?;
    if p.info.fields_width as usize != fields_width {
        return Err(Error::decode("hfile", "fields width differs"));
    }
    let width = cell::cell_width(fields_width);
    let mut cells = 0;
    for e in &p.index {
        let b = data
            .get(e.offset as usize..(e.offset + u64::from(e.len)) as usize)
            .ok_or_else(|| Error::decode("hfile", "block outside"))?;
        cells += (check_block(e, b, width)?.len() / width) as u64;
    }
    Ok(cells)
}
