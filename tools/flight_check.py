"""pyarrow.flight against a running telestore daemon (crates/server/tests/it/flight.rs runs it).

Usage: flight_check.py grpc+tcp://HOST:PORT EXPORT.arrow TABLE REGIONS
  (FLIGHT_TOKEN in the environment when the daemon needs a token)

Checks: authentication by handshake (authenticate_basic_token); the table's
flight has REGIONS endpoints; DoGet of every endpoint in parallel gives,
in endpoint order, exactly the rows of EXPORT.arrow (floats bit for bit);
DoPut of a pyarrow table (new device names, ns timestamps) reads back
exactly. Prints what it checked; exits non-zero on the first difference.
"""
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.flight as fl


def comparable(table):
    """Columns as lists, floats as their bit patterns (NaN payloads too)."""
    out = {}
    for name in table.column_names:
        col = table.column(name).combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        if pa.types.is_float64(col.type):
            out[name] = col.view(pa.uint64()).to_pylist()
        elif pa.types.is_float32(col.type):
            out[name] = col.view(pa.uint32()).to_pylist()
        else:
            out[name] = col.to_pylist()
    return out


def main():
    url, export, table, regions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    client = fl.connect(url)
    token = os.environ.get("FLIGHT_TOKEN")
    headers = []
    if token:
        headers = [client.authenticate_basic_token(b"telestore", token.encode())]
    opts = fl.FlightCallOptions(headers=headers)

    info = client.get_flight_info(fl.FlightDescriptor.for_path(table), opts)
    assert len(info.endpoints) == regions, (len(info.endpoints), regions)

    def pull(endpoint):
        c = fl.connect(url)
        return c.do_get(endpoint.ticket, opts).read_all()

    with ThreadPoolExecutor(max_workers=len(info.endpoints)) as pool:
        parts = list(pool.map(pull, info.endpoints))
    got = pa.concat_tables(parts)
    want = pa.ipc.open_file(export).read_all()
    assert got.schema.names == want.schema.names, (got.schema, want.schema)
    assert got.num_rows == want.num_rows, (got.num_rows, want.num_rows)
    assert comparable(got) == comparable(want), "rows differ from the export"
    print(f"DoGet: {len(parts)} endpoints in parallel, {got.num_rows} rows = the export")

    n = 3000
    names = [f"py-{i % 3}" for i in range(n)]
    ts = pa.array([1_900_000_000_000_000_000 + i * 1_000_000 for i in range(n)],
                  pa.timestamp("ns", tz="UTC"))
    put = pa.table({
        "device": pa.array(names),
        "ts": ts,
        "f": pa.array([float(i) / 7 for i in range(n)], pa.float64()),
        "g": pa.array([float(i) for i in range(n)], pa.float32()),
        "i": pa.array([-i for i in range(n)], pa.int64()),
        "j": pa.array([i for i in range(n)], pa.int32()),
        "u": pa.array([2**64 - 1 - i for i in range(n)], pa.uint64()),
        "w": pa.array([i for i in range(n)], pa.uint32()),
        "b": pa.array([i % 2 == 0 for i in range(n)]),
    })
    desc = fl.FlightDescriptor.for_command(json.dumps({"table": table, "durability": "sync"}))
    writer, reader = client.do_put(desc, put.schema, opts)
    writer.write_table(put, max_chunksize=1000)
    writer.done_writing()
    acks = 0
    while True:
        buf = reader.read()
        if buf is None:
            break
        assert json.loads(buf.to_pybytes())["rows"] == 1000
        acks += 1
    writer.close()
    assert acks == 3, acks

    cmd = json.dumps({"table": table, "devices": "py-0,py-1,py-2"})
    info = client.get_flight_info(fl.FlightDescriptor.for_command(cmd), opts)
    back = pa.concat_tables([client.do_get(e.ticket, opts).read_all() for e in info.endpoints])
    back = back.sort_by([("ts", "ascending")])
    assert back.num_rows == n, back.num_rows
    b = comparable(back)
    p = comparable(put)
    for col in ["f", "g", "i", "j", "u", "w", "b"]:
        assert b[col] == p[col], col
    assert b["device"] == names
    assert [t.value for t in back.column("ts")] == \
        [v.value // 1_000_000 for v in put.column("ts")]
    print(f"DoPut: {n} rows in 3 acknowledged batches, read back exactly")


if __name__ == "__main__":
    main()
