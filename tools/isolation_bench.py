#!/usr/bin/env python3
"""Issue 36's N1 and N2 reproductions, measured against a real daemon.

N1: a sync line-protocol writer paced at --rate rows/s, and /health probed
every 50 ms, first alone, then while `SELECT count(*) FROM readings a,
readings b` runs over --rows rows; then the query's client closes its
socket and we time how long until /metrics shows no query running, and
how much CPU the daemon burns in the second after.

N2: --idle connections opened to the HTTP port that never send a byte,
while the same writer goes on; then they close and writes still go on.

Standard library only. Usage:

    cargo build --release
    python3 tools/isolation_bench.py --bin target/release/telestore

Prints one JSON object; benches/RESULTS.md quotes it.
"""

import argparse
import http.client
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK


class Writer(threading.Thread):
    """Paced sync writes of `batch` rows; rows acknowledged per phase."""

    def __init__(self, port, rate, batch=100):
        super().__init__(daemon=True)
        self.port, self.rate, self.batch = port, rate, batch
        self.acked = 0
        self.errors = 0
        self.stop = False
        self.ts = 1_800_000_000_000

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        period = self.batch / self.rate
        due = time.monotonic()
        while not self.stop:
            lines = []
            for i in range(self.batch):
                self.ts += 1
                lines.append(f"readings,device=writer-{i % 10} latitude=1,longitude=2,"
                             f"elevation=3,velocity=4,heading=5,grade=6,fuel_consumption=7 {self.ts}")
            body = "\n".join(lines).encode()
            try:
                conn.request("POST", "/api/v2/write?bucket=b&precision=ms&durability=sync", body)
                r = conn.getresponse()
                r.read()
                if r.status == 204:
                    self.acked += self.batch
                else:
                    self.errors += 1
            except OSError:
                self.errors += 1
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            due += period
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                due = time.monotonic()


class Prober(threading.Thread):
    """GET /health every 50 ms on a fresh connection; latencies in ms."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.lat = []
        self.failures = 0
        self.stop = False

    def run(self):
        while not self.stop:
            t0 = time.monotonic()
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                c.request("GET", "/health")
                c.getresponse().read()
                c.close()
                self.lat.append((time.monotonic() - t0) * 1000)
            except OSError:
                self.failures += 1
            time.sleep(0.05)

    def take(self):
        lat, self.lat = sorted(self.lat), []
        if not lat:
            return {"n": 0, "failures": self.failures}
        return {"n": len(lat), "p50_ms": round(lat[len(lat) // 2], 1),
                "p99_ms": round(lat[int(len(lat) * 0.99)], 1), "max_ms": round(lat[-1], 1),
                "failures": self.failures}


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def phase(writer, prober, seconds, pid):
    a0, c0, t0 = writer.acked, cpu_seconds(pid), time.monotonic()
    prober.take()
    time.sleep(seconds)
    dt = time.monotonic() - t0
    rows = writer.acked - a0
    cpu = cpu_seconds(pid) - c0
    return {"rows_per_s": round(rows / dt), "daemon_cpu_s": round(cpu, 2),
            "daemon_cpu_us_per_row": round(cpu * 1e6 / max(rows, 1), 1),
            "health": prober.take()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/telestore")
    ap.add_argument("--rows", type=int, default=400_000, help="rows in the table the cross join reads")
    ap.add_argument("--rate", type=int, default=10_000, help="the writer's pace, rows/s")
    ap.add_argument("--seconds", type=float, default=10, help="length of each phase")
    ap.add_argument("--idle", type=int, default=10_000, help="N2's idle connections")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    work = tempfile.mkdtemp(prefix="isolation-")
    http_port, bin_port = free_port(), free_port()
    log = open(os.path.join(work, "serve.log"), "w")
    daemon = subprocess.Popen(
        [args.bin, "serve", "--dir", os.path.join(work, "data"),
         "--listen", f"127.0.0.1:{bin_port}", "--http-listen", f"127.0.0.1:{http_port}",
         "--connections-max", str(args.idle + 1000)],
        stdout=log, stderr=log)
    try:
        out = run(args, daemon, http_port, bin_port)
    finally:
        daemon.kill()
        daemon.wait()
        shutil.rmtree(work, ignore_errors=True)
    json.dump(out, sys.stdout, indent=2)
    print()


def run(args, daemon, http_port, bin_port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", http_port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    trucks = max(1, args.rows // 360)
    subprocess.run([args.bin, "load", "--addr", f"127.0.0.1:{bin_port}", "--http",
                    f"http://127.0.0.1:{http_port}", "--trucks", str(trucks), "--duration", "1h"],
                   check=True, stdout=subprocess.DEVNULL)
    rows = trucks * 360
    pid = daemon.pid
    writer, prober = Writer(http_port, args.rate), Prober(http_port)
    writer.start()
    prober.start()
    time.sleep(1)
    out = {"rows_in_table": rows, "writer_target_rows_per_s": args.rate, "cores": os.cpu_count()}
    out["n1_alone"] = phase(writer, prober, args.seconds, pid)

    # N1: the cross join, from a client that leaves after --seconds.
    q = socket.create_connection(("127.0.0.1", http_port))
    body = b"SELECT count(*) FROM readings a, readings b"
    q.sendall(b"POST /api/v1/sql HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    time.sleep(0.5)
    running = metric(http_port, "telestore_queries_running")
    during = phase(writer, prober, args.seconds, pid)
    during["queries_running_at_start"] = running
    out["n1_during_cross_join"] = during
    out["n1_writer_ratio"] = round(during["rows_per_s"] / max(out["n1_alone"]["rows_per_s"], 1), 3)
    q.close()
    t0 = time.monotonic()
    gone = None
    while time.monotonic() - t0 < 30:
        if metric(http_port, "telestore_queries_running") == 0:
            gone = time.monotonic() - t0
            break
        time.sleep(0.01)
    c0 = cpu_seconds(pid)
    time.sleep(1)
    out["n1_query_gone_after_close_s"] = None if gone is None else round(gone, 3)
    out["n1_daemon_cpu_s_in_the_second_after"] = round(cpu_seconds(pid) - c0, 2)

    # N2: idle connections that never send a byte.
    idle = []
    refused = 0
    for _ in range(args.idle):
        try:
            idle.append(socket.create_connection(("127.0.0.1", http_port), timeout=5))
        except OSError:
            refused += 1
    time.sleep(1)
    n2 = phase(writer, prober, args.seconds, pid)
    n2["idle_open"] = len(idle)
    n2["idle_refused_by_client_os"] = refused
    n2["daemon_fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    out["n2_with_idle"] = n2
    for s in idle:
        s.close()
    time.sleep(1)
    out["n2_after_close"] = phase(writer, prober, args.seconds / 2, pid)
    writer.stop = prober.stop = True
    writer.join()
    out["writer_errors"] = writer.errors
    out["health_failures"] = prober.failures
    return out


if __name__ == "__main__":
    main()
