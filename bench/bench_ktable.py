"""The keyspace's table (pyrepl/keyspace/_ktable.c) against a dict: cost per operation, memory.

    .venv/bin/python bench/bench_ktable.py [--keys 500000] [--rounds 5] [--ops get,...]
        [--instr] [--instr-keys 20000] [--instr-n 20000]

For each operation (``get``: ``t.get(k)``; ``getitem``: ``t[k]``; ``set``: ``t[k] = v`` of an
existing key; ``setnew``: ``t[k] = v`` of new keys into an empty table, growth included;
``del``: ``del t[k]`` down to empty; ``contains``: ``k in t``; ``iter``: ``for k in t``;
``peek``: ``t.peek(k)``, the table only) the best of ``--rounds`` runs over ``--keys`` bytes keys
(``b"key:%d"``, in a shuffled order for the lookups), in ns per operation, the Python loop
around it included (the same for both). ``--instr`` also counts instructions per operation under
``valgrind --tool=callgrind`` (perf's counters are not available on this VM): the difference
between 3N and N operations on a table of ``--instr-keys`` keys (the same set-up in both
runs), divided by 2N (start-up, the build and the keys' making excluded); the count hardly depends on the size, the time does (cache misses).

Memory at ``--keys``: the container's own bytes per key (``sys.getsizeof``: a dict's index and
entries; the table's index, entries and header), and the peak traced by tracemalloc while it is
built key by key (a dict resizes into a new block while the old one lives; the table grows its
entries by realloc).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import time
import tracemalloc
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

OPS = ["get", "getitem", "set", "setnew", "del", "contains", "iter", "peek"]


def _table_type() -> Any:
    from pyrepl import native

    mod = native.load("pyrepl.keyspace._ktable")
    if mod is None:
        raise SystemExit(f"the C KeyTable is not loaded ({native.WHY_PURE})")
    return mod.KeyTable


def _make(kind: str) -> Any:
    return {} if kind == "dict" else _table_type()()


def _keys(n: int, prefix: bytes = b"key:") -> list[bytes]:
    return [prefix + b"%d" % i for i in range(n)]


def _loop(op: str, t: Any, keys: list[bytes]) -> None:
    """One pass of ``op`` over ``keys`` (t prepared by _prepare)."""
    if op == "get":
        get = t.get
        for k in keys:
            get(k)
    elif op == "peek":
        peek = t.peek
        for k in keys:
            peek(k)
    elif op == "getitem":
        for k in keys:
            t[k]
    elif op in ("set", "setnew"):
        for k in keys:
            t[k] = k
    elif op == "del":
        for k in keys:
            del t[k]
    elif op == "contains":
        for k in keys:
            k in t  # noqa: B015
    elif op == "iter":
        for _ in t:
            pass
    else:
        raise ValueError(op)


def _prepare(kind: str, op: str, n: int, base: int) -> tuple[Any, list[bytes]]:
    """A table of ``base`` keys and the ``n`` keys the op runs over."""
    t = _make(kind)
    for k in _keys(base):
        t[k] = k
    if op == "setnew":
        return t, _keys(n, b"new:")
    if op == "del":
        extra = _keys(n, b"del:")
        for k in extra:
            t[k] = k
        return t, extra
    if op == "iter":
        t = _make(kind)
        keys = _keys(n)
        for k in keys:
            t[k] = k
        return t, keys
    keys = _keys(min(n, base))
    keys = (keys * (n // len(keys) + 1))[:n]
    random.Random(1).shuffle(keys)
    return t, keys


def timed(kind: str, op: str, nkeys: int, rounds: int) -> float:
    """Best ns per operation over ``rounds`` fresh runs."""
    best = float("inf")
    for _ in range(rounds):
        base = 0 if op in ("setnew", "iter") else nkeys
        t, keys = _prepare(kind, op, nkeys, base)
        gc.disable()
        t0 = time.perf_counter_ns()
        _loop(op, t, keys)
        dt = time.perf_counter_ns() - t0
        gc.enable()
        best = min(best, dt / len(keys))
        del t, keys
    return best


def memory(kind: str, nkeys: int) -> tuple[float, float]:
    """(container bytes per key, tracemalloc peak of the build per key, the keys excluded)."""
    keys = _keys(nkeys)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t = _make(kind)
    for k in keys:
        t[k] = None
    cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del cur
    return sys.getsizeof(t) / nkeys, (peak - base) / nkeys


def _instr_run(kind: str, op: str, reps: int, n: int, base: int) -> None:
    """The measured program: the same set-up whatever ``reps`` (three batches of ``n`` keys),
    then ``op`` over ``reps`` of them; so the 3-rep run minus the 1-rep run is 2n ops."""
    if op in ("setnew", "del", "iter"):
        t = _make(kind)
        for k in _keys(base):
            t[k] = k
        batches = [_keys(n, b"b%d:" % j) for j in range(3)]
        if op == "del":
            for b in batches:
                for k in b:
                    t[k] = k
        if op == "iter":
            t = _make(kind)
            for k in batches[0]:
                t[k] = k
            batches = [batches[0]] * 3
    else:
        t, keys = _prepare(kind, op, n, base)
        batches = [keys] * 3
    for j in range(reps):
        _loop(op, t, batches[j])


def instructions(kind: str, op: str, n: int, base: int) -> float:
    sys.path.insert(0, HERE)
    from common import callgrind_instructions

    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONHASHSEED="0")
    counts = []
    for reps in (1, 3):
        counts.append(callgrind_instructions(
            [sys.executable, os.path.abspath(__file__), "--run", kind, op, str(reps), str(n),
             str(base)], env=env, cwd=ROOT, timeout=900))
    return (counts[1] - counts[0]) / (2 * n)


def main() -> int:
    if len(sys.argv) == 7 and sys.argv[1] == "--run":
        _instr_run(sys.argv[2], sys.argv[3], *map(int, sys.argv[4:]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--instr", action="store_true", help="count instructions (callgrind)")
    ap.add_argument("--instr-keys", type=int, default=20_000)
    ap.add_argument("--instr-n", type=int, default=20_000)
    args = ap.parse_args()
    ops = args.ops.split(",")
    print(f"{'op':9} {'dict ns':>8} {'table ns':>9} {'ratio':>6}"
          + (f" {'dict instr':>11} {'table instr':>12}" if args.instr else ""))
    for op in ops:
        d = timed("dict", op, args.keys, args.rounds) if op != "peek" else float("nan")
        t = timed("table", op, args.keys, args.rounds)
        line = f"{op:9} {d:8.1f} {t:9.1f} {t / d:6.2f}"
        if args.instr:
            di = instructions("dict", op, args.instr_n, args.instr_keys) \
                if op != "peek" else float("nan")
            ti = instructions("table", op, args.instr_n, args.instr_keys)
            line += f" {di:11.0f} {ti:12.0f}"
        print(line, flush=True)
    for kind in ("dict", "table"):
        own, peak = memory(kind, args.keys)
        print(f"memory {kind:5}: {own:5.1f} B/key own (getsizeof), "
              f"{peak:5.1f} B/key peak while built", flush=True)
    st = _make("table")
    for k in _keys(args.keys):
        st[k] = None
    print("table layout at", args.keys, "keys:", st._stats())
    return 0


if __name__ == "__main__":
    sys.exit(main())
