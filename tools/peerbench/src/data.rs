//! The dataset every system gets: a TSBS-IoT-like fleet of trucks, one
//! reading every 10 s, seven `f64` fields at sensor precision
//! (`telestore::testkit::Truck`, seeded per truck), sent in batches of
//! `batch` rows in time order, with a fraction of readings arriving late
//! (held back a few batches, as a truck that lost its link would send
//! them).

use telestore::key::{encode, DeviceId, RowKey};
use telestore::testkit::{Truck, Values, FLEET_T0_MS};

/// Milliseconds between a truck's readings.
pub const INTERVAL_MS: i64 = 10_000;
/// The seven fields, as in `telestore::testkit::readings_schema`.
pub const FIELDS: [&str; 7] = telestore::testkit::READINGS_FIELDS;
/// Bytes of a reading's fields.
pub const VALUE_LEN: usize = 56;

/// One reading.
#[derive(Clone, Copy)]
pub struct Reading {
    pub device: u64,
    pub ts: i64,
    /// The seven fields, little-endian f64s.
    pub fields: [u8; VALUE_LEN],
}

impl Reading {
    /// The telestore row key (hash prefix | device | reversed ts), which
    /// the key-value stores use too.
    pub fn key(&self) -> RowKey {
        encode(DeviceId(self.device), self.ts)
    }
}

/// The fleet's shape.
#[derive(Clone, Copy, Debug)]
pub struct Fleet {
    pub devices: u64,
    pub readings: u64,
    pub batch: usize,
    /// Readings in a thousand that arrive late.
    pub late_per_mille: u64,
    pub seed: u64,
}

impl Fleet {
    pub fn rows(&self) -> u64 {
        self.devices * self.readings
    }

    /// Timestamp of reading `r`.
    pub fn ts(r: u64) -> i64 {
        FLEET_T0_MS + r as i64 * INTERVAL_MS
    }

    /// Newest timestamp of the fleet.
    pub fn last_ts(&self) -> i64 {
        Self::ts(self.readings - 1)
    }

    /// Every reading, in batches in the order they are sent.
    pub fn batches(&self) -> Vec<Vec<Reading>> {
        let mut trucks: Vec<Truck> = (0..self.devices)
            .map(|d| Truck::new(self.seed, d))
            .collect();
        let mut late: Vec<(usize, Reading)> = Vec::new();
        let mut out: Vec<Vec<Reading>> = Vec::new();
        let mut cur = Vec::with_capacity(self.batch);
        let mut n = 0u64;
        for r in 0..self.readings {
            for (d, truck) in trucks.iter_mut().enumerate() {
                let reading = Reading {
                    device: d as u64,
                    ts: Self::ts(r),
                    fields: truck.next_fields(Values::Sensor),
                };
                n += 1;
                if telestore::testkit::mix(n ^ self.seed) % 1000 < self.late_per_mille {
                    // Held back five batches.
                    late.push((out.len() + 5, reading));
                } else {
                    cur.push(reading);
                }
                if cur.len() == self.batch {
                    flush_late(&mut late, out.len(), &mut cur);
                    out.push(std::mem::replace(&mut cur, Vec::with_capacity(self.batch)));
                }
            }
        }
        late.sort_by_key(|l| l.0);
        cur.extend(late.into_iter().map(|l| l.1));
        for chunk in cur.chunks(self.batch) {
            out.push(chunk.to_vec());
        }
        out
    }
}

/// Add the late readings due by batch `at` to `cur`.
fn flush_late(late: &mut Vec<(usize, Reading)>, at: usize, cur: &mut Vec<Reading>) {
    let mut i = 0;
    while i < late.len() {
        if late[i].0 <= at {
            cur.push(late.swap_remove(i).1);
        } else {
            i += 1;
        }
    }
}
