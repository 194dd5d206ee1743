"""DuckDB as the oracle of telestore's SQL (tests/it/sql.rs runs it).

Usage: sql_oracle.py DIR
DIR holds m.parquet (the table's rows, exported), devices.parquet (the
device registry) and queries.json: [{"name", "ours": ARROW_FILE,
"duckdb": SQL}]. DuckDB sees `m` as the rows with the registry's `fleet`
tag joined on (telestore's tag column) and `devices` as the registry;
each query's answer must equal telestore's, row by row (times compared
in epoch ms, floats to 1e-9 relative). Exits non-zero on a difference.
"""
import datetime
import json
import math
import os
import sys

import duckdb
import pyarrow as pa


def norm(v):
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        return ("ts", round(v.timestamp() * 1000))
    return v


def same(a, b):
    a, b = norm(a), norm(b)
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def rows(table):
    cols = []
    for c in table.columns:
        c = c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
        if pa.types.is_dictionary(c.type):
            c = c.dictionary_decode()
        cols.append(c.to_pylist())
    return list(zip(*cols)) if cols else []


def main():
    d = sys.argv[1]
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    m = os.path.join(d, "m.parquet")
    dev = os.path.join(d, "devices.parquet")
    con.execute(f"CREATE VIEW devices AS SELECT * FROM read_parquet('{dev}')")
    con.execute(
        f"CREATE VIEW m AS SELECT r.*, d.fleet FROM read_parquet('{m}') r "
        "LEFT JOIN devices d ON r.device_id = d.device_id"
    )
    with open(os.path.join(d, "queries.json")) as f:
        queries = json.load(f)
    for q in queries:
        ours = rows(pa.ipc.open_file(q["ours"]).read_all())
        theirs = rows(con.sql(q["duckdb"]).to_arrow_table())
        assert len(ours) == len(theirs), (q["name"], len(ours), len(theirs))
        assert len(ours) > 0, (q["name"], "no rows: the query tests nothing")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert len(a) == len(b) and all(same(x, y) for x, y in zip(a, b)), \
                (q["name"], i, a, b)
        print(f"{q['name']}: {len(ours)} rows agree")


if __name__ == "__main__":
    main()
