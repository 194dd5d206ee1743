#!/usr/bin/env bash
# The whole test suite: formatting, lints, and every test of every crate
# in the workspace (unit, integration, and each criterion bench run once)
# on the io_uring backend; then the storage engine's tests and the
# kill -9 crash test again on the std backend.
# Usage: tools/test-all.sh   (from anywhere; only Rust is needed)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

step() { printf '\n==> %s\n' "$*"; }

# Compatibility tests drive real Python consumers: the official InfluxDB
# client (writes), pyarrow + duckdb (they read our exports) and
# prometheus-client's parsers (they read /metrics), and
# openapi-spec-validator (it checks docs/openapi.json). Install them
# in a virtualenv under target/ (skipped, and said so, without python3).
if command -v python3 >/dev/null 2>&1; then
  step "python influxdb-client, pyarrow, duckdb, prometheus-client, openapi-spec-validator (virtualenv in target/pyenv)"
  if [ ! -x target/pyenv/bin/python ] || ! target/pyenv/bin/python -c "import influxdb_client, pyarrow, duckdb, prometheus_client, openapi_spec_validator" 2>/dev/null; then
    python3 -m venv target/pyenv
    target/pyenv/bin/pip install --quiet --disable-pip-version-check influxdb-client pyarrow duckdb prometheus-client openapi-spec-validator
  fi
  export TELESTORE_PYTHON="$PWD/target/pyenv/bin/python"
else
  echo "python3 not found: the Python compatibility tests (influxdb-client, pyarrow, duckdb) will be skipped"
fi

# apt_install WHAT PACKAGE...: install Debian packages where apt-get and
# root are at hand; elsewhere the tests needing them are skipped and say so.
apt_install() {
  what=$1; shift
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    step "apt-get install $* ($what)"
    log=target/apt-$1.log
    mkdir -p target
    if ! { apt-get install -y -q "$@" >"$log" 2>&1 ||
           { apt-get update -q >>"$log" 2>&1 && apt-get install -y -q "$@" >>"$log" 2>&1; }; }; then
      echo "could not install $* (see $log): $what will be skipped"
    fi
  else
    echo "$* missing and not installable here: $what will be skipped"
  fi
}

# The console's browser test (tests/it/console.rs) drives Debian's Chromium
# through ChromeDriver.
if ! command -v chromedriver >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then
  apt_install "the console's browser test" chromium chromium-driver
fi

# The MQTT tests (tests/it/mqtt.rs, and docs/ingest.md's examples in
# tests/it/doc_examples.rs) start Debian's Mosquitto broker, publish with its
# mosquitto_pub, and make TLS certificates with openssl.
if ! { command -v mosquitto || test -x /usr/sbin/mosquitto; } >/dev/null 2>&1 ||
   ! command -v mosquitto_pub >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1; then
  apt_install "the MQTT tests" mosquitto mosquitto-clients openssl
fi

# The TLS test (tests/it/tls.rs) makes certificates with openssl and speaks
# HTTPS through curl.
if ! command -v curl >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1; then
  apt_install "the TLS test" curl openssl
fi

step "cargo fmt --check"
cargo fmt --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings

# The benches are built and run once by `cargo test --all-targets` below
# (criterion's test mode), so no separate optimized build of them here:
# with DataFusion in the graph that build alone took ~20 minutes.

# io_uring must really be used when requested: io_backend (engine) asserts
# that the store reports the uring backend and that io_uring ops were
# completed; TELESTORE_IO=uring on a machine without io_uring fails the run.
step "cargo test (TELESTORE_IO=uring)"
TELESTORE_IO=uring cargo test --all-targets

# The I/O backend sits under the engine only: the frontends, SQL and CLI
# reach it through `Store`, so running their tests a second time would
# test the same engine calls again. The engine's own tests (every WAL,
# HFile, manifest, compaction and region path) and the SIGKILL crash test
# run on std too.
step "cargo test -p telestore-engine + the crash test (TELESTORE_IO=std)"
TELESTORE_IO=std cargo test -p telestore-engine
TELESTORE_IO=std cargo test -p telestore --test it crash_kill9::

step "all tests passed (the engine on both I/O backends)"
