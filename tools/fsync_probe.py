#!/usr/bin/env python3
"""fdatasync latency of a WAL-like writer beside background file writes.

One thread appends 72 KB (a 1,000-row group commit) to a zero-filled
256 MiB file and fdatasyncs it, every 2 ms. Another writes 32 MiB files at
70 MB/s (an LSM's flushes and compactions at half load), fsyncing each:

  none      no background writes
  buffered  plain write(2) of 1 MiB chunks (the kernel writes them back)
  direct    O_DIRECT write(2) of 1 MiB aligned chunks

Prints the sync's p50/p99/p999. Used for benches/RESULTS.md, "Direct
HFile writes":  python3 tools/fsync_probe.py buffered 20 [DIR]
"""
import mmap
import os
import sys
import threading
import time

CHUNK = 1 << 20
FILE_CHUNKS = 32
BACKGROUND_BYTES_PER_S = 70e6
GROUP = 72 * 1000
SEGMENT = 256 << 20


def zero_filled(path):
    if os.path.exists(path) and os.path.getsize(path) == SEGMENT:
        return
    with open(path, "wb") as f:
        zeros = bytes(CHUNK)
        for _ in range(SEGMENT // CHUNK):
            f.write(zeros)
        f.flush()
        os.fsync(f.fileno())


def wal(path, stop, lat):
    fd = os.open(path, os.O_WRONLY)
    group = os.urandom(GROUP)
    off = 0
    while not stop.is_set():
        t = time.perf_counter()
        os.pwrite(fd, group, off)
        os.fdatasync(fd)
        lat.append(time.perf_counter() - t)
        off = (off + GROUP) % (SEGMENT - GROUP)
        time.sleep(0.002)
    os.close(fd)


def background(mode, d, stop):
    if mode == "none":
        return
    buf = mmap.mmap(-1, CHUNK)  # page-aligned, as O_DIRECT needs
    buf.write(os.urandom(CHUNK))
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    if mode == "direct":
        flags |= os.O_DIRECT
    start, sent, i = time.perf_counter(), 0, 0
    while not stop.is_set():
        fd = os.open(os.path.join(d, f"bg{i % 4}"), flags, 0o644)
        i += 1
        for _ in range(FILE_CHUNKS):
            if stop.is_set():
                break
            os.write(fd, buf)
            sent += CHUNK
            while sent > BACKGROUND_BYTES_PER_S * (time.perf_counter() - start):
                time.sleep(0.001)
        os.fsync(fd)
        os.close(fd)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "buffered"
    if mode not in ("none", "buffered", "direct"):
        sys.exit(f"mode {mode!r}: expected none, buffered or direct")
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 20
    d = sys.argv[3] if len(sys.argv) > 3 else "fsync-probe"
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "wal")
    zero_filled(path)
    stop, lat = threading.Event(), []
    threads = [
        threading.Thread(target=wal, args=(path, stop, lat)),
        threading.Thread(target=background, args=(mode, d, stop)),
    ]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    lat.sort()
    n = len(lat)

    def ms(q):
        return lat[min(n - 1, int(n * q))] * 1e3

    print(f"{mode}: {n} syncs, p50 {ms(0.5):.2f} ms, p99 {ms(0.99):.2f} ms, "
          f"p999 {ms(0.999):.2f} ms, max {lat[-1] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
