"""The replica's apply loop in process: a master's stream of SETs through a real replica side.

    .venv/bin/python bench/bench_replica_apply.py [--sets 200000] [--chunk 16384 | --per-read K]
                                                  [--instr] [--value 3] [--tx]

A real ServerCore + Replication, a replica of a (recorded) master: the Redis 7 handshake and a
full sync of an empty RDB go through ``ReplicaSide.on_data`` as the I/O shell would deliver
them, then the stream (``SET key:<i> xxx``, a SELECT first, as redis-benchmark's load makes it)
arrives in chunks of ``--chunk`` bytes, each applied the way a socket read is
(``on_data``: reader, execute, offsets, passing on to the backlog); ``--per-read K`` makes each
read K whole SETs instead (the first with the SELECT), as a master's stream arrives under an
unpipelined load: a few commands a read, none cut. Prints microseconds per
SET (best of 5) beside the bare floor of the same work: a hiredis parse and a dict store per
command. ``--instr`` counts instructions per SET with callgrind instead (N and 3N SETs, the
difference), which do not drift with the machine's load. Issue 15's goal: <= 1 us per SET.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from array import array
from itertools import accumulate

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import hiredis  # noqa: E402

import pyrepl.commands  # noqa: E402,F401
from pyrepl.config import Config  # noqa: E402
from pyrepl.core.server import ServerCore  # noqa: E402
from pyrepl.rdb.encoder import encode_rdb_bytes  # noqa: E402
from tests.support.cores import cmd  # noqa: E402
from tests.support.replica_side import ReplicaNode  # noqa: E402

MASTER_ID = "a05af3755f57545a48bd356f49c00cb6f3d914fa"


class _IO:
    """The replica side's I/O port: a connection that is always up, nothing recorded."""

    def __init__(self) -> None:
        self.token = 0

    def connect(self, token: int, host: str, port: int) -> None:
        self.token = token

    def connect_rdb(self, token: int, host: str, port: int) -> None:
        pass

    def send(self, token: int, data: bytes) -> None:
        pass

    def close(self, token: int) -> None:
        pass

    def pause_reading(self, token: int) -> None:
        pass

    def resume_reading(self, token: int) -> None:
        pass

    def request_drain(self, token: int) -> None:
        pass

    def link_info(self, token: int) -> None:
        return None


def online_replica() -> ReplicaNode:
    """A replica side that has done its handshake and full sync (an empty dataset)."""
    n = ReplicaNode(_IO(), [("repl-rdb-channel", ["no"])])
    n.side.start()
    n.side.on_connected(n.io.token)
    empty = ServerCore(Config.load(None, [("save", [""])]), now_ms=n.core.now_ms)
    rdb = encode_rdb_bytes(empty.dbs, aux={"repl-stream-db": 0, "repl-id": MASTER_ID,
                                           "repl-offset": 0}, now_ms=n.core.now_ms)
    n.side.on_data(n.io.token, b"+PONG\r\n+OK\r\n+OK\r\n+FULLRESYNC %s 0\r\n$%d\r\n"
                   % (MASTER_ID.encode(), len(rdb)) + rdb)
    assert n.repl.info_fields() and n.side.stream.master is not None, "the replica is not online"
    return n


VALUE = b"xxx"
TX = False    # (--tx: each item a transaction)


def item(i: int) -> bytes:
    if TX:
        return (cmd("MULTI") + cmd("SET", b"tx:key", VALUE) +
                cmd("PEXPIREAT", b"tx:key", b"%d" % (4_000_000_000_000 + i)) + cmd("EXEC"))
    return cmd("SET", b"key:%d" % i, VALUE)


def stream(sets: int) -> bytes:
    return cmd("SELECT", "0") + b"".join(item(i) for i in range(sets))


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def read_sizes(sets: int, per_read: int) -> list[int]:
    """The sizes of reads of ``per_read`` whole SETs each (the SELECT with the first)."""
    sizes = [len(cmd("SELECT", "0"))]
    for i in range(sets):
        if i % per_read == 0 and i:
            sizes.append(0)
        sizes[-1] += len(item(i))
    return sizes


def cut(data: bytes, sizes: list[int]) -> list[bytes]:
    """``data`` cut into reads of ``sizes`` (C-level: a few hundred instructions a read)."""
    ends = list(accumulate(sizes))
    return list(map(data.__getitem__, map(slice, [0, *ends[:-1]], ends)))


def apply_all(sets: int, size: int, data: bytes | None = None,
              sizes: list[int] | None = None) -> float:
    """Seconds to apply ``sets`` SETs (the stream ``data``, made here when None) on a fresh
    online replica (set-up excluded), in reads of ``size`` bytes or of ``sizes``."""
    n = online_replica()
    data = stream(sets) if data is None else data
    parts = chunks(data, size) if sizes is None else cut(data, sizes)
    on_data, token = n.side.on_data, n.io.token
    t0 = time.perf_counter()
    for p in parts:
        on_data(token, p)
    dt = time.perf_counter() - t0
    assert len(n.core.dbs[0].data) == (1 if TX else sets), "the stream was not applied"
    return dt


def floor(sets: int, size: int, sizes: list[int] | None = None) -> float:
    """The bare work: hiredis parses the same reads, a dict takes the SETs."""
    data = stream(sets)
    parts = chunks(data, size) if sizes is None else cut(data, sizes)
    data: dict[bytes, bytes] = {}
    t0 = time.perf_counter()
    r = hiredis.Reader()
    for p in parts:
        r.feed(p)
        while (req := r.gets()) is not False:
            if req[0] in (b"SET", b"PEXPIREAT"):
                data[req[1]] = req[2]
    return time.perf_counter() - t0


def instructions(sets: int, size: int, per_read: int = 0) -> int:
    """Instructions of a process that reads the stream of ``sets`` SETs from a file (made
    here: encoding it costs more than applying it) and applies it; with ``per_read``, the
    reads' sizes come from a second file."""
    import tempfile

    from common import callgrind_instructions

    with tempfile.NamedTemporaryFile(prefix="stream-", suffix=".resp") as f, \
            tempfile.NamedTemporaryFile(prefix="reads-", suffix=".u32") as r:
        f.write(stream(sets))
        f.flush()
        if per_read:
            r.write(array("I", read_sizes(sets, per_read)).tobytes())
            r.flush()
        return callgrind_instructions(
            [sys.executable, os.path.abspath(__file__), "--run", str(sets), str(size), f.name,
             r.name if per_read else "-"],
            env=dict(os.environ, PYTHONHASHSEED="0", BENCH_TX="1" if TX else ""))


def main() -> int:
    global VALUE, TX
    if len(sys.argv) == 6 and sys.argv[1] == "--run":
        TX = os.environ.get("BENCH_TX") == "1"
        with open(sys.argv[4], "rb") as f:
            data = f.read()
        sizes = None
        if sys.argv[5] != "-":
            with open(sys.argv[5], "rb") as f:
                sizes = array("I", f.read()).tolist()
        apply_all(int(sys.argv[2]), int(sys.argv[3]), data, sizes)
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", type=int, default=200_000)
    ap.add_argument("--chunk", type=int, default=16384, help="bytes per socket read")
    ap.add_argument("--per-read", type=int, default=0,
                    help="reads of this many whole SETs instead of --chunk bytes")
    ap.add_argument("--instr", action="store_true", help="callgrind instructions per SET")
    ap.add_argument("--value", type=int, default=3,
                    help="bytes per value (1024: the partial resync benchmark's SETs)")
    ap.add_argument("--tx", action="store_true",
                    help="each item a transaction (MULTI, SET, PEXPIREAT, EXEC) of one key")
    args = ap.parse_args()
    VALUE = b"x" * args.value
    TX = args.tx
    what = "transaction" if TX else "SET"
    if args.instr:
        n = max(args.sets // 10, 2000)
        if args.per_read:
            n -= n % args.per_read    # (N and 3N: whole reads only)
        per = (instructions(3 * n, args.chunk, args.per_read)
               - instructions(n, args.chunk, args.per_read)) / (2 * n)
        reads = f"{args.per_read} SETs a read" if args.per_read else f"chunks of {args.chunk} B"
        print(f"replica apply: {per:,.0f} instructions per {what} ({reads})")
        return 0
    sizes = read_sizes(args.sets, args.per_read) if args.per_read else None
    best_apply = min(apply_all(args.sets, args.chunk, sizes=sizes) for _ in range(5))
    best_floor = min(floor(args.sets, args.chunk, sizes) for _ in range(5))
    a, f = best_apply * 1e6 / args.sets, best_floor * 1e6 / args.sets
    reads = f"{args.per_read} SETs a read" if args.per_read else f"chunks of {args.chunk} B"
    print(f"replica apply: {a:.2f} us per {what}, floor {f:.2f} us, {a / f:.1f}x the floor "
          f"(values of {args.value} B, {reads}, best of 5; goal <= 1 us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
