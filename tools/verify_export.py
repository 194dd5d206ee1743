#!/usr/bin/env python3
"""Check telestore exports with real Arrow consumers (pyarrow, duckdb).

Usage: verify_export.py EXPECTED.jsonl TABLE FILE:FORMAT...

EXPECTED.jsonl holds one object per row as ingested (device_id, device,
ts as RFC 3339, then the fields), in any order. FORMAT is arrow,
arrow-stream or parquet. Every file must have the schema of
formats/arrow.md and hold exactly the expected rows, value for value.
Exits non-zero with a message naming the file and the difference.
"""
import datetime as dt
import json
import sys

import duckdb
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

FIELD_TYPES = {
    "f": pa.float64(), "g": pa.float32(), "i": pa.int64(), "j": pa.int32(),
    "u": pa.uint64(), "w": pa.uint32(), "b": pa.bool_(),
}


def fail(msg):
    print(f"verify_export: {msg}", file=sys.stderr)
    sys.exit(1)


def read(path, fmt):
    if fmt == "arrow":
        with pa.memory_map(path) as src:
            return ipc.open_file(src).read_all()
    if fmt == "arrow-stream":
        with open(path, "rb") as f:
            return ipc.open_stream(f).read_all()
    if fmt == "parquet":
        return pq.read_table(path)
    fail(f"unknown format {fmt}")


def check_schema(path, t, table):
    s = t.schema
    want = ["device_id", "device", "ts"] + list(FIELD_TYPES)
    if s.names != want:
        fail(f"{path}: columns {s.names} != {want}")
    if s.field("device_id").type != pa.uint64():
        fail(f"{path}: device_id is {s.field('device_id').type}")
    dev = s.field("device").type
    if not (pa.types.is_dictionary(dev) and dev.value_type == pa.string()
            and dev.index_type == pa.uint32()):
        fail(f"{path}: device is {dev}, want dictionary<uint32, string>")
    if s.field("ts").type != pa.timestamp("ms", tz="UTC"):
        fail(f"{path}: ts is {s.field('ts').type}")
    for name, ty in FIELD_TYPES.items():
        if s.field(name).type != ty:
            fail(f"{path}: {name} is {s.field(name).type}, want {ty}")
    meta = {k.decode(): v.decode() for k, v in (s.metadata or {}).items()}
    if meta.get("telestore.table") != table or meta.get("telestore.version") != "1":
        fail(f"{path}: metadata {meta}")


def key(r):
    return (r["device_id"], r["ts"])


def normalize(rows):
    out = []
    for r in rows:
        r = dict(r)
        ts = r["ts"]
        if isinstance(ts, str):
            ts = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
        r["ts"] = round(ts.timestamp() * 1000)
        out.append(r)
    return sorted(out, key=key)


def main():
    if len(sys.argv) < 4:
        fail(__doc__)
    expected_path, table = sys.argv[1], sys.argv[2]
    with open(expected_path) as f:
        expected = normalize(json.loads(line) for line in f if line.strip())
    for spec in sys.argv[3:]:
        path, fmt = spec.rsplit(":", 1)
        t = read(path, fmt)
        check_schema(path, t, table)
        got = normalize(t.to_pylist())
        if len(got) != len(expected):
            fail(f"{path}: {len(got)} rows, want {len(expected)}")
        for g, e in zip(got, expected):
            if g != e:
                fail(f"{path}: row {g} != expected {e}")
        # duckdb over the same data: counts and sums agree.
        con = duckdb.connect()
        con.register("t", t)
        n, s = con.execute("select count(*), sum(u) from t").fetchone()
        if n != len(expected) or s != sum(r["u"] for r in expected):
            fail(f"{path}: duckdb count/sum {n}/{s}")
        if fmt == "parquet":
            n2 = con.execute(f"select count(*) from read_parquet('{path}')").fetchone()[0]
            if n2 != len(expected):
                fail(f"{path}: duckdb read_parquet count {n2}")
        print(f"{path}: {len(got)} rows ok ({fmt})")


main()
