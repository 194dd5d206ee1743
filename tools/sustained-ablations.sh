#!/bin/sh
# Ack latency at a fixed ingest rate (half of the peak) with the
# background-work measures of `telestore-lab sustained` switched off one at a
# time, and with background work paused (no compaction worker, memstores
# big enough that nothing flushes during the run). Each configuration
# runs for SECONDS and prints its summary line and its latest-after-flush
# line. Build first: cargo build --release.
#
#   tools/sustained-ablations.sh [RATE_ROWS_PER_S] [SECONDS] [ROUNDS]
#
# The disk's own fdatasync p50/p99 is in every summary line (the floor an
# ack at `sync` cannot beat).
set -eu
BIN=${BIN:-target/release/telestore-lab}
RATE=${1:-600000}
SECS=${2:-120}
ROUNDS=${3:-1}
run() {
    name=$1
    shift
    echo "== $name: $*"
    "$BIN" sustained --seconds "$SECS" --every "$SECS" --samples 50 \
        --rate "$RATE" "$@" 2>&1 | grep -E '^(summary|latest after|options)'
}
r=1
while [ "$r" -le "$ROUNDS" ]; do
    echo "# round $r, rate $RATE rows/s, $SECS s each"
    run "all measures (defaults)"
    run "background paused" --compaction-threads 0 --flush-mib 2047 --memstore-global-mib 16384
    run "io priority normal" --background-io-priority normal
    run "background nice 0" --background-nice 0
    run "no slowdown" --slowdown-file-count 0 --compaction-debt-slowdown-mib 0
    run "no young rows compactions" --columnar-min-compaction-mib 0
    run "flushed blocks not cached" --cache-flushed-blocks false
    run "rate limiter 64 MiB/s, auto" --background-write-mib-s 64
    run "two subcompactions" --subcompactions 2
    r=$((r + 1))
done
