//! `telestore-lab`: the studies and macro benchmarks that measure
//! telestore (benches/RESULTS.md records what they printed), kept out of
//! the shipped `telestore` binary. Each runs on an embedded store it
//! creates; none talks to a daemon.
//!
//! ```sh
//! cargo run --release -p telestore-lab -- ingest --devices 1000 --rows-per-device 100 --scan-rows 100000
//! cargo run --release -p telestore-lab -- key-design --devices 1000 --hours 1 --no-engine
//! cargo run --release -p telestore-lab -- compaction-sim --flushes 200 --every 50
//! cargo run --release -p telestore-lab -- sustained --seconds 5 --every 5 --devices 1000
//! cargo run --release -p telestore-lab -- query --dir bench-query --devices 100 --rows-per-device 1000 --latest 1000 --ranges 20 --exports 1 --clean
//! ```

// The same global allocator as the `telestore` binary, so that what the
// studies measure is what the daemon does.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// The background-work flags `serve` takes, generated from the same
// settings declaration, shared with the CLI by path.
mod bench;
mod bench_query;
mod compaction_sim;
mod keydesign;
#[path = "../../../src/cli/settings.rs"]
mod settings;
mod sustained;

use clap::Parser;

/// Studies and macro benchmarks of telestore on an embedded store.
#[derive(Parser, Debug)]
#[command(name = "telestore-lab", version)]
struct Lab {
    #[command(subcommand)]
    cmd: bench::BenchCmd,
}

fn main() -> std::process::ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    match bench::run(Lab::parse().cmd) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
