//! Daemon CPU of the line protocol before the write: `lineproto::prepare`
//! (parse, table and series lookup, field encoding) of one 1,000-line
//! request, with every series already registered (the steady state).
//! Two shapes: the sensor fleet as `telestore load --line-protocol` sends
//! it (`readings,device=truck-N,fleet=F` and seven floats), and agent
//! lines whose series is their whole tag set (Telegraf's
//! `cpu,cpu=cpuK,host=H` and three floats, no `device` tag).
//!
//! `cargo bench --bench lineproto` measures; `cargo test --benches` runs
//! each once.
#![allow(clippy::unwrap_used, reason = "a benchmark: a failed unwrap stops it")]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::fmt::Write as _;
use telestore::ingest::lineproto::{apply, prepare, Precision, Rules};
use telestore::testkit::{readings_schema, Truck, Values, READINGS_FIELDS};
use telestore::{Durability, Options, Store};

const LINES: usize = 1000;
const FLEETS: [&str; 4] = ["East", "West", "North", "South"];

/// 1,000 lines of 1,000 trucks, one reading each, milliseconds.
fn fleet_body() -> String {
    let mut text = String::new();
    for dev in 0..LINES as u64 {
        let fleet = FLEETS[(dev % 4) as usize];
        let _ = write!(text, "readings,device=truck-{dev},fleet={fleet} ");
        let values = Truck::new(1, dev).next_reading(Values::Sensor);
        for (i, (name, v)) in READINGS_FIELDS.iter().zip(values).enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(text, "{sep}{name}={v}");
        }
        let _ = writeln!(text, " {}", 1_700_000_000_000 + dev as i64);
    }
    text
}

/// 1,000 agent lines: 250 hosts × 4 CPUs, nanoseconds.
fn agent_body() -> String {
    let mut text = String::new();
    for i in 0..LINES {
        let (host, cpu) = (i / 4, i % 4);
        let user = (i % 97) as f64 / 3.0;
        let _ = writeln!(
            text,
            "cpu,cpu=cpu{cpu},host=truck-{host} usage_user={user},usage_system=1.25,usage_idle=70.5 1700000000000000000"
        );
    }
    text
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), Options::default()).unwrap();
    store.create_table(readings_schema("readings")).unwrap();
    let rules = Rules::new("device");
    let mut g = c.benchmark_group("lineproto_prepare");
    g.throughput(Throughput::Elements(LINES as u64));
    for (name, body, precision) in [
        ("fleet_device_tag", fleet_body(), Precision::Ms),
        ("agent_tag_sets", agent_body(), Precision::Ns),
    ] {
        // The first request creates the table and registers the series.
        let p = prepare(&store, &body, precision, &rules, 0).unwrap();
        apply(&store, p, Durability::Skip).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| prepare(&store, &body, precision, &rules, 0).unwrap().lines)
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
