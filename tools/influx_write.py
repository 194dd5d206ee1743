#!/usr/bin/env python3
"""Write points to telestore's InfluxDB-compatible endpoint with the official
`influxdb-client` package, as an existing InfluxDB client would.

Usage: influx_write.py URL TABLE N [--defaults]
Writes N points of measurement TABLE for devices "py-0".."py-4" with a
`fleet` tag and fields temp (float), count (int), ok (bool), timestamps in
ms from 1700000000000 one second apart, in two batches (one gzip-compressed).
First the client's own probes: ping() must be True and health() "pass".
With --defaults, as an agent would with the client's defaults instead: the
default (batching) write API, no timestamps (the server's clock), no device
tag (one `host` tag per point, so each point is a series of its own), fields
load (float) and procs (int), into a measurement that need not exist; the
batching API only logs a refused write, so the caller checks the data.
Prints nothing on success; otherwise raises on any error."""
import sys

from influxdb_client import InfluxDBClient, Point, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS


def points(table, lo, hi):
    for i in range(lo, hi):
        yield (
            Point(table)
            .tag("device", f"py-{i % 5}")
            .tag("fleet", "east" if i % 5 < 3 else "west")
            .field("temp", 20.0 + i / 4)
            .field("count", i)
            .field("ok", i % 2 == 0)
            .time(1_700_000_000_000 + i * 1000, WritePrecision.MS)
        )


def agent_points(table, n):
    for i in range(n):
        yield Point(table).tag("host", f"h-{i}").field("load", i / 2).field("procs", i)


def main():
    url, table, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if "--defaults" in sys.argv[4:]:
        with InfluxDBClient(url=url, token="unused", org="telestore") as c:
            with c.write_api() as w:
                w.write(bucket="telemetry", record=list(agent_points(table, n)))
        return
    half = n // 2
    with InfluxDBClient(url=url, token="unused", org="telestore") as c:
        assert c.ping(), "ping() is False"
        h = c.health()
        assert h.status == "pass", f"health() is {h}"
        assert c.version().startswith("telestore-"), c.version()
    for gzip, lo, hi in [(False, 0, half), (True, half, n)]:
        with InfluxDBClient(url=url, token="unused", org="telestore", enable_gzip=gzip) as c:
            c.write_api(write_options=SYNCHRONOUS).write(
                bucket="telemetry", record=list(points(table, lo, hi))
            )


if __name__ == "__main__":
    main()
