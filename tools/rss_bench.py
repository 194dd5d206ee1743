#!/usr/bin/env python3
"""Daemon memory under repeated exports and queries (a macro benchmark).

Starts `telestore serve` on a fresh data directory, loads a truck fleet
through the binary protocol (`telestore load`), flushes it to HFiles
(`POST /api/v1/flush`), then runs rounds of: one
full-table export over HTTP (Arrow IPC stream, read and discarded) and a
batch of `latest` and `range` queries on one kept-alive connection. After
each round it records the daemon's resident set (VmRSS) and peak (VmHWM)
from /proc. Prints one line per round and a JSON summary line.

    tools/rss_bench.py --bin target/release/telestore [--trucks 1000]
        [--duration 10h] [--rounds 12] [--queries 200] [--parallel 1]
        [--env K=V ...] [--label NAME]

`--env MALLOC_ARENA_MAX=2` runs the daemon with that environment (to compare
glibc settings). Only the Python standard library is needed.
"""

import argparse
import concurrent.futures
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    """(VmRSS, VmHWM) of `pid` in KiB."""
    vals = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                vals[k] = int(v.split()[0])
    return vals["VmRSS"], vals["VmHWM"]


def wait_http(port, proc, timeout_s=60):
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        if proc.poll() is not None:
            sys.exit(f"daemon exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("daemon did not answer /health")


def export_once(port):
    """A full export, streamed and discarded; returns (bytes, seconds)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("GET", "/api/v1/export?table=readings")
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"export: HTTP {r.status}: {r.read()[:200]!r}")
    n = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
    return n, time.perf_counter() - t0


def queries(conn, trucks, n, rng):
    """`n` queries on one kept-alive connection; returns per-query ms."""
    lat = []
    for i in range(n):
        d = rng.randrange(trucks)
        if i % 2 == 0:
            path = f"/api/v1/query?kind=latest&table=readings&device={d}&n=1&format=csv"
        else:
            path = (f"/api/v1/query?kind=range&table=readings&device={d}"
                    f"&from=1700000000s&to=1700003600s&format=csv")
        t0 = time.perf_counter()
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            sys.exit(f"query: HTTP {r.status}")
        lat.append((time.perf_counter() - t0) * 1000)
    return lat


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--trucks", type=int, default=1000)
    ap.add_argument("--duration", default="10h")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--parallel", type=int, default=1,
                    help="exports run at once in each round (as several analysts would)")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    env = dict(os.environ)
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    tmp = tempfile.mkdtemp(prefix="rss-bench-")
    port, http_port = free_port(), free_port()
    daemon = subprocess.Popen(
        [a.bin, "serve", "--dir", os.path.join(tmp, "data"),
         "--listen", f"127.0.0.1:{port}", "--http-listen", f"127.0.0.1:{http_port}", "--flight-listen", "off",
         "--shutdown-flush", "false"],
        env=env, stderr=subprocess.DEVNULL)
    try:
        wait_http(http_port, daemon)
        subprocess.run(
            [a.bin, "load", "--addr", f"127.0.0.1:{port}", "--http", f"http://127.0.0.1:{http_port}",
             "--trucks", str(a.trucks), "--duration", a.duration],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Exports then read HFiles through the block cache and the
        # read-ahead threads, as a long-running daemon's do.
        c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=600)
        c.request("POST", "/api/v1/flush")
        if c.getresponse().status != 200:
            sys.exit("flush failed")
        base, _ = rss_kib(daemon.pid)
        print(f"{a.label} after load: rss {base // 1024} MiB")
        rng = random.Random(7)
        conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=60)
        rounds = []
        for i in range(a.rounds):
            with concurrent.futures.ThreadPoolExecutor(a.parallel) as pool:
                done = list(pool.map(lambda _: export_once(http_port), range(a.parallel)))
            nbytes, secs = done[0][0], max(d[1] for d in done)
            lat = queries(conn, a.trucks, a.queries, rng)
            rss, hwm = rss_kib(daemon.pid)
            rounds.append({"rss_mib": rss // 1024, "hwm_mib": hwm // 1024, "export_s": round(secs, 2),
                           "q_p50_ms": round(pct(lat, 50), 2), "q_p99_ms": round(pct(lat, 99), 2)})
            print(f"{a.label} round {i + 1}: export {nbytes >> 20} MiB in {secs:.2f} s, "
                  f"queries p50 {pct(lat, 50):.2f} ms p99 {pct(lat, 99):.2f} ms, "
                  f"rss {rss // 1024} MiB (peak {hwm // 1024})", flush=True)
        summary = {
            "label": a.label, "rss_after_load_mib": base // 1024,
            "rss_last_mib": rounds[-1]["rss_mib"], "rss_peak_mib": rounds[-1]["hwm_mib"],
            "export_s_median": sorted(r["export_s"] for r in rounds)[len(rounds) // 2],
            "q_p50_ms_median": sorted(r["q_p50_ms"] for r in rounds)[len(rounds) // 2],
        }
        print(json.dumps(summary))
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
