//! Unit and property tests of the columnar block codec (`columnar.rs`):
//! bit-exact round trips of every codec configuration, run heads, chosen
//! codecs, and damaged bodies that must be errors, never panics.

use super::*;
use crate::cell::{self, CellKind};
use crate::key::{encode as key, DeviceId};
use proptest::prelude::*;

const TYPES: [FieldType; 7] = FieldType::ALL;
const WIDTH: usize = CELL_HEAD_LEN + 8 + 4 + 8 + 4 + 8 + 4 + 1;

/// Cells in cell order from `(device, ts, seq, delete, field bits)`.
fn cells(rows: &mut [(u64, i64, u64, bool, u64)]) -> Vec<u8> {
    rows.sort_by(|a, b| {
        key(DeviceId(a.0), a.1)
            .cmp(&key(DeviceId(b.0), b.1))
            .then(b.2.cmp(&a.2))
    });
    let mut dedup: Vec<(u64, i64, u64, bool, u64)> = Vec::new();
    for r in rows.iter() {
        if dedup
            .last()
            .is_none_or(|l| (l.0, l.1, l.2) != (r.0, r.1, r.2))
        {
            dedup.push(*r);
        }
    }
    let mut out = Vec::new();
    for &(d, ts, seq, del, bits) in &dedup {
        let mut f = Vec::new();
        f.extend_from_slice(&bits.to_le_bytes());
        f.extend_from_slice(&(bits as u32).to_le_bytes());
        f.extend_from_slice(&bits.rotate_left(7).to_le_bytes());
        f.extend_from_slice(&((bits >> 32) as u32).to_le_bytes());
        f.extend_from_slice(&bits.swap_bytes().to_le_bytes());
        f.extend_from_slice(&(bits as u32 ^ 0xdead_beef).to_le_bytes());
        f.push((bits >> 56) as u8 & if bits & 1 == 0 { 1 } else { 0xff });
        let kind = if del { CellKind::Delete } else { CellKind::Put };
        cell::push(&mut out, &key(DeviceId(d), ts), seq, kind, &f);
    }
    out
}

fn configs() -> Vec<ColumnarConfig> {
    let mut v = Vec::new();
    for compression in [Compression::None, Compression::Snappy, Compression::Zstd(3)] {
        for pco_level in [0, 4, 8] {
            v.push(ColumnarConfig {
                pco_level,
                compression,
            });
        }
    }
    v
}

fn round_trip(raw: &[u8]) {
    for cfg in configs() {
        let mut body = Vec::new();
        encode(raw, WIDTH, &TYPES, cfg, &mut body).unwrap();
        let back = decode(&body, raw.len() / WIDTH, WIDTH).unwrap();
        assert!(back == raw, "round trip with {cfg:?}");
        let stats = describe(&body).unwrap();
        assert_eq!(stats.len(), 5 + TYPES.len());
        let heads = run_head_cells(&body, raw.len() / WIDTH, WIDTH).unwrap();
        let firsts: Vec<u8> = raw
            .chunks_exact(WIDTH)
            .enumerate()
            .filter(|(i, c)| *i == 0 || raw[(i - 1) * WIDTH..(i - 1) * WIDTH + 10] != c[..10])
            .flat_map(|(_, c)| c.to_vec())
            .collect();
        let runs = firsts.len() / WIDTH;
        match heads {
            Some(h) => assert!(h == firsts, "heads are the runs' first cells"),
            None => assert!(
                runs * HEADS_MIN_RUN_ROWS > raw.len() / WIDTH,
                "heads left out"
            ),
        }
        assert_eq!(stats.iter().map(|s| s.bytes).sum::<usize>() + 6, body.len());
    }
}

/// Field bits that a float codec must keep exactly.
const ADVERSARIAL: [u64; 12] = [
    0x7ff8_0000_0000_0001, // quiet NaN with a payload
    0xfff0_0000_dead_beef, // negative signalling NaN with a payload
    0x8000_0000_0000_0000, // -0.0
    0x0000_0000_0000_0000, // 0.0
    0x7ff0_0000_0000_0000, // +inf
    0xfff0_0000_0000_0000, // -inf
    0x0000_0000_0000_0001, // smallest subnormal
    0x000f_ffff_ffff_ffff, // largest subnormal
    0x7fff_ffff_ffff_ffff, // i64::MAX bits
    0x8000_0000_0000_0001, // near i64::MIN
    u64::MAX,
    0x3ff0_0000_0000_0000, // 1.0
];

#[test]
fn adversarial_values_round_trip_bit_exact() {
    let mut rows: Vec<_> = (0..600)
        .map(|i| {
            (
                1 + (i % 3) as u64,
                1_000 * i as i64,
                i as u64 + 1,
                i % 17 == 0,
                ADVERSARIAL[i % 12],
            )
        })
        .collect();
    round_trip(&cells(&mut rows));
    // i64::MIN / MAX timestamps and seqs, one device.
    let mut rows = vec![
        (7, i64::MIN, 1, false, 0),
        (7, i64::MAX, u64::MAX, true, u64::MAX),
        (7, 0, 0, false, 1),
    ];
    round_trip(&cells(&mut rows));
}

#[test]
fn shapes_round_trip() {
    let one = cells(&mut [(1, 5, 9, false, 0x4059_0000_0000_0000)]);
    round_trip(&one);
    let constant: Vec<_> = (0..5000).map(|i| (3, i * 10_000, 1, false, 42)).collect();
    round_trip(&cells(&mut constant.clone()));
    let alternating: Vec<_> = (0..999)
        .map(|i| {
            (
                3,
                i * 10,
                i as u64,
                false,
                if i % 2 == 0 { 0 } else { u64::MAX },
            )
        })
        .collect();
    round_trip(&cells(&mut alternating.clone()));
    let many: Vec<_> = (0..2000)
        .map(|i| (i as u64, 77, 1, false, i as u64))
        .collect();
    round_trip(&cells(&mut many.clone()));
}

#[test]
fn constant_and_bits_columns_are_chosen() {
    let rows: Vec<_> = (0..4096).map(|i| (3, i * 10_000, 1, false, 0)).collect();
    let raw = cells(&mut rows.clone());
    let mut body = Vec::new();
    let cfg = ColumnarConfig {
        pco_level: 8,
        compression: Compression::None,
    };
    encode(&raw, WIDTH, &TYPES, cfg, &mut body).unwrap();
    let s = describe(&body).unwrap();
    assert_eq!(s[2].codec, CODEC_CONST, "ts at a constant interval: {s:?}");
    assert_eq!(s[4].codec, CODEC_CONST, "all puts");
    // 4096 rows of 64 bytes in well under 1 byte per row.
    assert!(body.len() < 1000, "{} bytes", body.len());
}

#[test]
fn decimal_is_chosen_for_sensor_readings() {
    // Three devices' walks at 5 decimals in the one f64 field, as a
    // compaction merges them; the codec is for f64 fields only.
    let mut v = [4_512_345i64, -7_300_001, 12];
    let rows: Vec<_> = (0..3000)
        .map(|i| {
            let d = i % 3;
            v[d] += (i as i64 * 7919) % 41 - 20;
            let x = v[d] as f64 / 1e5;
            (d as u64, 10_000 * i as i64, i as u64, false, x.to_bits())
        })
        .collect();
    let raw = cells(&mut rows.clone());
    round_trip(&raw);
    for cfg in configs() {
        let mut body = Vec::new();
        encode(&raw, WIDTH, &TYPES, cfg, &mut body).unwrap();
        let s = describe(&body).unwrap();
        assert_eq!(s[5].codec, CODEC_DECIMAL, "{cfg:?}: {s:?}");
        let others = s.iter().enumerate().filter(|(i, _)| *i != 5);
        assert!(others.into_iter().all(|(_, c)| c.codec != CODEC_DECIMAL));
        // 6 bits per difference of at most 20, a few bytes per run.
        assert!(s[5].bytes < 3000 * 6 / 8 + 64, "{cfg:?}: {s:?}");
    }
}

#[test]
fn damaged_bodies_are_errors_not_panics() {
    let rows: Vec<_> = (0..300)
        .map(|i| {
            (
                1 + (i % 4) as u64,
                i as i64 * 7,
                i as u64,
                i % 9 == 0,
                (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            )
        })
        .collect();
    let raw = cells(&mut rows.clone());
    let n = raw.len() / WIDTH;
    for cfg in [configs()[0], configs()[8]] {
        let mut body = Vec::new();
        encode(&raw, WIDTH, &TYPES, cfg, &mut body).unwrap();
        for cut in 0..body.len() {
            assert!(decode(&body[..cut], n, WIDTH).is_err(), "cut at {cut}");
            let _ = run_head_cells(&body[..cut], n, WIDTH);
        }
        for i in 0..body.len() {
            for bit in [0x01u8, 0x80] {
                let mut b = body.clone();
                b[i] ^= bit;
                let _ = decode(&b, n, WIDTH); // any result but a panic
                let _ = run_head_cells(&b, n, WIDTH);
            }
        }
        assert!(decode(&body, n + 1, WIDTH).is_err());
        assert!(decode(&body, n, WIDTH + 1).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_cells_round_trip(
        mut rows in proptest::collection::vec(
            (0u64..6, any::<i64>(), any::<u64>(), any::<bool>(), any::<u64>()),
            1..400,
        )
    ) {
        round_trip(&cells(&mut rows));
    }

    #[test]
    fn walks_round_trip(
        start in any::<i64>(),
        steps in proptest::collection::vec(-3i64..4, 1..300),
        devices in 1u64..4,
    ) {
        let mut v = start;
        let mut rows: Vec<_> = steps.iter().enumerate().map(|(i, s)| {
            v = v.wrapping_add(*s);
            (i as u64 % devices, 10_000 * i as i64, i as u64, false, (v as f64 / 100.0).to_bits())
        }).collect();
        round_trip(&cells(&mut rows));
    }
}
