//! Profiling aid (not a benchmark): load a truck fleet like
//! tools/peerbench, settle it, then time `latest` lookups and report the
//! tail with block-cache misses per lookup.
#![allow(
    clippy::unwrap_used,
    clippy::too_many_lines,
    reason = "a benchmark or example: a failed unwrap stops it, and it reads top to bottom"
)]
use std::time::Instant;
use telestore::query::{Kind, Params, Plan, Prepared};
use telestore::testkit::{mix, readings_schema, Truck, Values};
use telestore::{Durability, Options, Store};

fn main() {
    let dir = std::env::args().nth(1).unwrap_or("/tmp/lt".into());
    let settle = std::env::var("SETTLE").map(|v| v == "1").unwrap_or(true);
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir, Options::default()).unwrap();
    store.create_table(readings_schema("r")).unwrap();
    let (devices, readings) = (500u64, 8640u64);
    let mut trucks: Vec<Truck> = (0..devices).map(|d| Truck::new(1, d)).collect();
    let t0 = 1_700_000_000_000i64;
    let mut b = Vec::new();
    let t = Instant::now();
    for round in 0..readings {
        for (d, tr) in trucks.iter_mut().enumerate() {
            let f = tr.next_fields(Values::Sensor);
            telestore::schema::batch::push_row(&mut b, d as u64, t0 + round as i64 * 10_000, &f);
            if b.len() >= 1000 * 72 {
                store.write("r", &b, Durability::Sync).unwrap();
                b.clear();
            }
        }
    }
    if !b.is_empty() {
        store.write("r", &b, Durability::Sync).unwrap();
    }
    let loaded = t.elapsed();
    let _ = store.stats();
    eprintln!(
        "loaded in {loaded:?}, applied {:?} later",
        t.elapsed() - loaded
    );
    if settle {
        store.flush().unwrap();
        store.compact("r", true).unwrap();
    }
    let store = if std::env::var("REOPEN").is_ok() {
        drop(store);
        Store::open(&dir, Options::default()).unwrap()
    } else {
        store
    };
    if std::env::var("CAT").is_ok() {
        let st = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("find {dir}/tables -type f | xargs cat > /dev/null"))
            .status()
            .unwrap();
        assert!(st.success());
    }
    if std::env::var("WAIT").is_ok() {
        eprintln!("pid {}: press enter", std::process::id());
        let mut l = String::new();
        std::io::stdin().read_line(&mut l).unwrap();
    }
    let pick = |i: usize| mix(i as u64 ^ 1) % devices;
    let last = t0 + (readings as i64 - 1) * 10_000;
    let query = |p: &Params| {
        let plan = Plan::resolve(&store, p, store.now_ms()).unwrap();
        let mut n = 0u64;
        Prepared::new(&store, plan)
            .run(&store, &mut |b| {
                n += b.num_rows() as u64;
                Ok(())
            })
            .unwrap();
        n
    };
    for pass in 0..2 {
        let st = store.stats();
        let regs = store.regions("r").unwrap();
        eprintln!(
            "before reads {pass}: {} hfiles, memstores {} MB, compactions running {}, queued {}",
            st.hfiles,
            st.memstore_bytes >> 20,
            regs.iter().filter(|r| r.compaction_running).count(),
            regs.iter().filter(|r| r.compaction_queued).count()
        );
        let t = Instant::now();
        let mut n = 0;
        for i in 0..100 {
            n += query(&Params {
                kind: Kind::Range,
                table: "r".into(),
                device: Some(pick(i).to_string()),
                from: Some(format!("{}ms", last - 86_400_000 + 1)),
                to: Some(format!("{}ms", last + 1)),
                ..Params::default()
            });
        }
        let range = n as f64 / t.elapsed().as_secs_f64();
        let t = Instant::now();
        let w = query(&Params {
            kind: Kind::Scan,
            table: "r".into(),
            from: Some(format!("{}ms", last - 3_600_000 + 1)),
            to: Some(format!("{}ms", last + 1)),
            ..Params::default()
        });
        let window = w as f64 / t.elapsed().as_secs_f64();
        eprintln!(
            "reads {pass}: ranges {n} rows at {:.2} M rows/s; window {w} rows at {:.2} M rows/s",
            range / 1e6,
            window / 1e6
        );
    }
    for pass in 0..3 {
        let mut lat = Vec::new();
        for i in 0..5000 {
            let m0 = store.stats().cache;
            let t = Instant::now();
            let r = store.latest("r", pick(i + 100), 1).unwrap();
            let ns = t.elapsed().as_nanos() as u64;
            let m1 = store.stats().cache;
            assert_eq!(r.len(), 1);
            lat.push((ns, m1.misses - m0.misses, m1.hits - m0.hits));
        }
        let mut s = lat.clone();
        s.sort();
        let p = |q: f64| s[((s.len() as f64 * q) as usize).min(s.len() - 1)].0 as f64 / 1e3;
        let slow: Vec<_> = s.iter().rev().take(50).collect();
        let miss_slow = slow.iter().filter(|x| x.1 > 0).count();
        eprintln!(
            "pass {pass}: p50 {:.1} p90 {:.1} p99 {:.1} max {:.1} µs; of the 50 slowest {} had misses; misses total {}; cache {:?}",
            p(0.5), p(0.9), p(0.99), p(1.0), miss_slow,
            lat.iter().map(|x| x.1).sum::<u64>(), store.stats().cache
        );
        let hits_slow: Vec<_> = slow
            .iter()
            .take(8)
            .map(|x| (x.0 / 1000, x.1, x.2))
            .collect();
        eprintln!("  slowest (µs, misses, hits): {hits_slow:?}");
    }
}
