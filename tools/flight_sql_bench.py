"""Macro benchmarks of Flight and SQL against a running daemon
(benches/RESULTS.md, "Arrow Flight and SQL", gives the commands that
build the 50 M-row fleet and run this).

Usage: flight_sql_bench.py HTTP_URL FLIGHT_URL TABLE PARQUET DEVICES_CSV RUNS

For each run, in turn:
  http      GET /api/v1/export?table=TABLE, one Arrow IPC stream read by pyarrow
  flight    GetFlightInfo(TABLE) then DoGet of every endpoint in parallel
            (one thread and connection per endpoint), read by pyarrow
  sql       POST /api/v1/sql: hourly average velocity per fleet (DataFusion
            in the daemon), answer as an Arrow stream
  duckdb    the same query in DuckDB over PARQUET (the table exported) joined
            with DEVICES_CSV (the registry, for the fleet tag)
Rows are counted batch by batch (nothing is kept). Prints one JSON line per
measurement.
"""
import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import duckdb
import pyarrow as pa
import pyarrow.flight as fl

SQL = ("SELECT date_bin(INTERVAL '1 hour', ts) AS hour, fleet, avg(velocity) AS velocity "
       "FROM {t} GROUP BY hour, fleet ORDER BY hour, fleet")
DUCK = ("SELECT time_bucket(INTERVAL '1 hour', r.ts) AS hour, d.fleet, avg(r.velocity) AS velocity "
        "FROM read_parquet('{p}') r LEFT JOIN read_csv_auto('{d}') d ON r.device_id = d.device_id "
        "GROUP BY hour, d.fleet ORDER BY hour, d.fleet")


def http_export(http, table):
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"{http}/api/v1/export?table={table}") as resp:
        n = sum(b.num_rows for b in pa.ipc.open_stream(resp))
    return n, time.perf_counter() - t0


def flight_pull(url, table):
    t0 = time.perf_counter()
    info = fl.connect(url).get_flight_info(fl.FlightDescriptor.for_path(table))

    def pull(e):
        reader = fl.connect(url).do_get(e.ticket)
        return sum(chunk.data.num_rows for chunk in reader)

    with ThreadPoolExecutor(max_workers=len(info.endpoints)) as pool:
        n = sum(pool.map(pull, info.endpoints))
    return n, time.perf_counter() - t0, len(info.endpoints)


def sql(http, table):
    body = json.dumps({"query": SQL.format(t=table), "format": "arrow"}).encode()
    req = urllib.request.Request(f"{http}/api/v1/sql", data=body,
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req) as resp:
        rows = pa.ipc.open_stream(resp).read_all().to_pylist()
    return rows, time.perf_counter() - t0


def duck(parquet, devices):
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    t0 = time.perf_counter()
    rows = con.sql(DUCK.format(p=parquet, d=devices)).fetchall()
    return rows, time.perf_counter() - t0


def main():
    http, url, table, parquet, devices, runs = sys.argv[1:7]
    for run in range(int(runs)):
        n, s = http_export(http, table)
        print(json.dumps({"run": run, "what": "http export", "rows": n, "s": round(s, 2),
                          "rows_per_s": round(n / s)}), flush=True)
        n, s, ends = flight_pull(url, table)
        print(json.dumps({"run": run, "what": "flight parallel", "endpoints": ends, "rows": n,
                          "s": round(s, 2), "rows_per_s": round(n / s)}), flush=True)
        ours, s = sql(http, table)
        print(json.dumps({"run": run, "what": "sql hourly avg per fleet", "groups": len(ours),
                          "s": round(s, 2)}), flush=True)
        theirs, s = duck(parquet, devices)
        print(json.dumps({"run": run, "what": "duckdb hourly avg per fleet", "groups": len(theirs),
                          "s": round(s, 2)}), flush=True)
        a = [(r["fleet"], round(r["velocity"], 6)) for r in ours]
        b = [(r[1], round(r[2], 6)) for r in theirs]
        assert a == b, "the two engines disagree"


if __name__ == "__main__":
    main()
