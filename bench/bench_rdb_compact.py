"""RDB load of compact encodings (listpack hashes and sorted sets): the decoder's cost per file,
shallow (sanitize-dump-payload no, the default) or deep (yes: every listpack entry's
back-length checked too). Before/after a change to the decoder: run it once per tree.

    PYREPL_PURE=1 PYTHONPATH=<tree> .venv/bin/python bench/bench_rdb_compact.py [--deep]
        [--chunk BYTES]

It writes /tmp/lp-bench.rdb (100,000 hashes of 8 fields and 50,000 sorted sets of 8 members,
listpack-encoded) with the tree's encoder if missing, then prints the best of 3 loads (s).
``--chunk``: the bytes read at a time (load_rdb_file's default, 8 MB, unless given; the load at
start reads loading-process-events-interval-bytes, 2 MB, at a time).
"""

from __future__ import annotations

import os
import sys
import time

from pyrepl.keyspace.lphash import compact as compact_hash
from pyrepl.keyspace.zset import compact as compact_zset
from pyrepl.rdb.decoder import load_rdb_file
from pyrepl.rdb.encoder import save_rdb_file

PATH = "/tmp/lp-bench.rdb"


class Db:
    def __init__(self) -> None:
        self.data: dict[bytes, object] = {}
        self.expires: dict[bytes, int] = {}


def make() -> None:
    db = Db()
    for i in range(100000):
        db.data[b"h:%d" % i] = compact_hash({b"f%d" % j: b"value-%d" % (i * j) for j in range(8)})
    for i in range(50000):
        db.data[b"z:%d" % i] = compact_zset([(b"m%d" % j, float(j)) for j in range(8)])
    save_rdb_file(PATH, [db] + [Db() for _ in range(15)], now_ms=0)


def main() -> None:
    deep = "--deep" in sys.argv
    chunk = int(sys.argv[sys.argv.index("--chunk") + 1]) if "--chunk" in sys.argv else 8 << 20
    if not os.path.exists(PATH):
        make()
    best = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        r = load_rdb_file(PATH, 16, now_ms=None, deep=deep, chunk_size=chunk)
        best = min(best, time.perf_counter() - t0)
    print(f"{'deep' if deep else 'shallow'} load, {chunk} B chunks: {best:.3f} s, "
          f"{r.keys_loaded} keys")


if __name__ == "__main__":
    main()
