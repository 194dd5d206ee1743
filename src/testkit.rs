//! Deterministic data generators shared by the CLI benchmarks, the crash
//! helper, tests and criterion benches. Not a test double: these build
//! real ingest batches.

use crate::schema::batch::push_row;

/// A 64-bit mix (splitmix64 finaliser) for deterministic values.
pub fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Rows of crash-test batch `b`: row `i` is device `(b·rows + i) mod
/// devices`, ts `b·16 + i`, fields `value = mix(b·16 + i)` (u64) and
/// `check = value as f64`.
pub fn crash_batch(b: u64, rows: u64, devices: u64) -> Vec<u8> {
    assert!(rows <= 16);
    let mut out = Vec::with_capacity(rows as usize * 32);
    for i in 0..rows {
        let (d, ts, f) = crash_row(b, i, rows, devices);
        push_row(&mut out, d, ts, &f);
    }
    out
}

/// Row `i` of crash batch `b`: `(device, ts, fields)`.
pub fn crash_row(b: u64, i: u64, rows: u64, devices: u64) -> (u64, i64, Vec<u8>) {
    let ts = (b * 16 + i) as i64;
    let v = mix(ts as u64);
    let mut f = v.to_le_bytes().to_vec();
    f.extend_from_slice(&(v as f64).to_le_bytes());
    ((b * rows + i) % devices, ts, f)
}

/// First timestamp of generated fleets: 2023-11-14T22:13:20Z in ms.
pub const FLEET_T0_MS: i64 = 1_700_000_000_000;

/// One fleet reading's seven f64 fields (TSBS-IoT `readings` shape:
/// latitude, longitude, elevation, velocity, heading, grade,
/// fuel_consumption), deterministic in (device, round).
pub fn fleet_fields(device: u64, round: u64) -> [f64; 7] {
    let h = mix(device.wrapping_mul(1_000_003) ^ round);
    let jitter = (h % 1000) as f64 / 1000.0;
    [
        40.0 + (device % 1000) as f64 * 0.01 + round as f64 * 1e-5,
        -70.0 - (device % 700) as f64 * 0.01 - round as f64 * 1e-5,
        100.0 + jitter * 10.0,
        (h >> 10) as f64 % 120.0,
        (h >> 20) as f64 % 360.0,
        jitter * 5.0,
        10.0 + jitter,
    ]
}

/// Append the fleet row of `(device, round)` at `interval_ms` spacing.
pub fn push_fleet_row(out: &mut Vec<u8>, device: u64, round: u64, interval_ms: i64) {
    let ts = FLEET_T0_MS + round as i64 * interval_ms;
    let f = fleet_fields(device, round);
    let mut bytes = [0u8; 56];
    for (i, v) in f.iter().enumerate() {
        bytes[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    push_row(out, device, ts, &bytes);
}

/// Field names of the `readings` schema, in order (all f64).
pub const READINGS_FIELDS: [&str; 7] = [
    "latitude",
    "longitude",
    "elevation",
    "velocity",
    "heading",
    "grade",
    "fuel_consumption",
];

/// The 7-field `readings` schema used by fleet benchmarks.
pub fn readings_schema(name: &str) -> crate::TableSchema {
    use crate::schema::{Field, FieldType, TableOptions, TableSchema};
    let names = READINGS_FIELDS;
    TableSchema::new(
        name,
        names
            .iter()
            .map(|n| Field::new(n, FieldType::F64))
            .collect(),
        TableOptions::default(),
    )
    .expect("valid schema")
}

/// Crash-test hook: when the environment variable `TELESTORE_PAUSE_AT`
/// names this point, print `PAUSED <point>` to stderr and stop here for
/// good (the test then `SIGKILL`s the process). Costs one load otherwise.
pub fn pause_point(point: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| std::env::var("TELESTORE_PAUSE_AT").ok());
    if at.as_deref() == Some(point) {
        eprintln!("PAUSED {point}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}
