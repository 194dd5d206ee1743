//! Guards the lab's studies: each runs its documented example (scaled
//! down) to the end, and `ingest` checks every value it reads back.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

/// `telestore-lab ingest` writes, reads back and checks its fleet, at
/// sensor precision and at full precision.
#[test]
fn bench_ingest_verifies_both_kinds_of_values() {
    for values in ["sensor", "full-precision"] {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_telestore-lab"))
            .args(["ingest", "--devices", "40", "--rows-per-device", "30"])
            .args(["--scan-rows", "500", "--batch", "100", "--values", values])
            .arg("--dir")
            .arg(dir.path().join("b"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1200 rows read back and equal"), "{text}");
        assert!(
            text.contains(&format!("({values} values, seed 1)")),
            "{text}"
        );
    }
}

/// Every study runs to the end on a small fleet and prints its report.
#[test]
fn every_study_runs_a_small_example() {
    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("q");
    let s = dir.path().join("s");
    let runs: [(&[&str], &str); 4] = [
        (
            &[
                "key-design",
                "--devices",
                "100",
                "--hours",
                "1",
                "--no-engine",
            ],
            "",
        ),
        (&["compaction-sim", "--flushes", "40", "--every", "20"], ""),
        (
            &[
                "query",
                "--devices",
                "20",
                "--rows-per-device",
                "100",
                "--latest",
                "100",
                "--ranges",
                "5",
                "--exports",
                "1",
                "--clean",
                "--dir",
            ],
            "q",
        ),
        (
            &[
                "sustained",
                "--seconds",
                "2",
                "--every",
                "1",
                "--devices",
                "100",
                "--dir",
            ],
            "s",
        ),
    ];
    for (args, dir_arg) in runs {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_telestore-lab"));
        c.args(args);
        match dir_arg {
            "q" => c.arg(&q),
            "s" => c.arg(&s),
            _ => &mut c,
        };
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.trim().is_empty(), "{args:?} printed nothing");
    }
}
