//! Deterministic data generators shared by the CLI benchmarks, the crash
//! helper, tests and criterion benches. Not a test double: these build
//! real ingest batches.

use crate::schema::batch::push_row;

pub use crate::util::hash::splitmix64 as mix;

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
/// fuel_consumption), deterministic in (device, round) without state: the
/// synthetic fleet of the micro-benchmarks. `load` and `bench ingest`
/// use [`Truck`]'s random walks instead.
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

/// How generated fleet readings look (`load --values`, `bench ingest
/// --values`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Values {
    /// TSBS-like: each reading rounded to what a sensor reports (the
    /// decimals of [`READINGS_WALKS`]): decimals in disguise.
    #[default]
    Sensor,
    /// The walks' full-precision doubles (`latitude 0.043512814005200115`):
    /// the adversarial case for compression.
    FullPrecision,
}

impl Values {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "sensor" => Ok(Values::Sensor),
            "full-precision" => Ok(Values::FullPrecision),
            other => Err(format!("{other:?}: use sensor or full-precision")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Values::Sensor => "sensor",
            Values::FullPrecision => "full-precision",
        }
    }
}

/// One reading's clamped random walk: bounds, largest step per reading,
/// and the decimals a sensor reports.
#[derive(Clone, Copy, Debug)]
pub struct Walk {
    pub lo: f64,
    pub hi: f64,
    pub step: f64,
    pub decimals: i32,
}

/// The `readings` fields' walks, in field order (TSBS-IoT's truck
/// readings): latitude and longitude in degrees at 5 decimals (about 1 m;
/// a step of 0.002° is about 220 m per reading), elevation in m, velocity
/// in km/h, heading in degrees and grade in % as whole numbers, fuel
/// consumption in l/100 km at 1 decimal.
pub const READINGS_WALKS: [Walk; 7] = [
    Walk {
        lo: -90.0,
        hi: 90.0,
        step: 0.002,
        decimals: 5,
    },
    Walk {
        lo: -180.0,
        hi: 180.0,
        step: 0.002,
        decimals: 5,
    },
    Walk {
        lo: 0.0,
        hi: 5000.0,
        step: 5.0,
        decimals: 0,
    },
    Walk {
        lo: 0.0,
        hi: 100.0,
        step: 2.0,
        decimals: 0,
    },
    Walk {
        lo: 0.0,
        hi: 360.0,
        step: 5.0,
        decimals: 0,
    },
    Walk {
        lo: -10.0,
        hi: 10.0,
        step: 0.5,
        decimals: 0,
    },
    Walk {
        lo: 0.0,
        hi: 50.0,
        step: 0.5,
        decimals: 1,
    },
];

/// `x` rounded to `decimals` places: the double nearest to that decimal,
/// as a parser would read it (`-0.0` becomes `0.0`).
pub fn round_to(x: f64, decimals: i32) -> f64 {
    let p = 10f64.powi(decimals);
    (x * p).round() / p + 0.0
}

/// One truck's readings: the seven walks of [`READINGS_WALKS`], each
/// starting at a uniform point of its bounds and moving by a uniform step
/// in `±step` per reading, clamped. Deterministic in `(seed, truck)`: the
/// random numbers are splitmix64 ([`mix`]) of a counter seeded by
/// `mix(seed ^ mix(truck))`, the same on every platform and build.
#[derive(Clone, Debug)]
pub struct Truck {
    now: [f64; 7],
    counter: u64,
}

impl Truck {
    pub fn new(seed: u64, truck: u64) -> Self {
        let mut t = Truck {
            now: [0.0; 7],
            counter: mix(seed ^ mix(truck)),
        };
        for (i, w) in READINGS_WALKS.iter().enumerate() {
            t.now[i] = w.lo + (w.hi - w.lo) * t.unit();
        }
        t
    }

    /// A uniform double in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        self.counter = self.counter.wrapping_add(1);
        (mix(self.counter) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next reading, one interval after the last.
    pub fn next_reading(&mut self, values: Values) -> [f64; 7] {
        let mut out = [0.0; 7];
        for (i, w) in READINGS_WALKS.iter().enumerate() {
            let step = (2.0 * self.unit() - 1.0) * w.step;
            self.now[i] = (self.now[i] + step).clamp(w.lo, w.hi);
            out[i] = match values {
                Values::Sensor => round_to(self.now[i], w.decimals),
                Values::FullPrecision => self.now[i],
            };
        }
        out
    }

    /// [`Truck::next_reading`] as the 56 field bytes of a `readings` row.
    pub fn next_fields(&mut self, values: Values) -> [u8; 56] {
        let mut bytes = [0u8; 56];
        for (i, v) in self.next_reading(values).iter().enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        bytes
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trucks_are_deterministic_clamped_and_at_sensor_precision() {
        let mut a = Truck::new(7, 3);
        let mut b = Truck::new(7, 3);
        let mut other = Truck::new(7, 4);
        let mut differs = false;
        for _ in 0..10_000 {
            let r = a.next_reading(Values::Sensor);
            assert_eq!(r, b.next_reading(Values::Sensor));
            differs |= r != other.next_reading(Values::Sensor);
            for (v, w) in r.iter().zip(&READINGS_WALKS) {
                assert!((w.lo..=w.hi).contains(v), "{v} outside {w:?}");
                // The shortest text of the value has at most `decimals`.
                let text = format!("{v}");
                let frac = text.split_once('.').map_or(0, |(_, f)| f.len());
                assert!(frac as i32 <= w.decimals, "{text} for {w:?}");
                assert_ne!(v.to_bits(), (-0.0f64).to_bits(), "negative zero");
            }
        }
        assert!(differs, "two trucks gave the same readings");
        let full = Truck::new(7, 3).next_reading(Values::FullPrecision);
        assert!(format!("{}", full[0]).len() > 10, "{full:?}");
    }
}
