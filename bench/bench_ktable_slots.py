"""The keyspace table's per-slot index (KeyTable.track_slots, pyrepl/keyspace/_ktable.c): what it
costs off and on, against the table as it was before the index, in the same run; its memory;
and the key -> hash slot function in C and in Python.

    .venv/bin/python bench/bench_ktable_slots.py [--keys 200000] [--rounds 7]
        [--ops get,set,del,setnew,churn] [--before REV] [--instr] [--instr-n 20000]

Three tables, each op's work timed on each in turn a tenth at a time, round after round (the
machine's drift lands on all three alike): each one's best round of ``--rounds`` in ns per
operation, the Python loop around it included, and the ratios as the median of each round's
(their range after them; on a shared machine they move by several %, the instruction counts
do not):

* ``before``: _ktable.c of ``--before`` (default: the newest commit whose _ktable.c has no
  track_slots), built into build/bench_ktable_slots/ and loaded beside the current one;
* ``off``: the current table, the index off (the default);
* ``on``: the current table after ``track_slots()``.

Ops over ``--keys`` keys of redis-benchmark's form (``key:%012d``, 16 bytes): ``get``
(``t.get(k)``, shuffled), ``set`` (overwrite), ``del`` (``del t[k]`` of ``--keys`` keys added
to a table of ``--keys``), ``setnew`` (new keys into an empty table, growth included) and
``churn`` (a table of ``--keys`` keys: each op adds a new key and deletes the oldest, so the
C table compacts as it goes: the insert+delete cost). ``--instr``: instructions per operation
under callgrind (3N minus N operations, over 2N; noise-free, where the timings on a shared
machine move by a few %).

Memory at ``--keys``: the index's bytes per key (``sys.getsizeof`` on minus off: an 8 B link
per entry allocated, and the 128 KB of slot heads, shown apart) and tracemalloc's peak while a
table is built key by key, on and off (Redis 7.0: 16 B a key, two pointers in the dictEntry's
metadata, and 256 KB of slot heads). Last, ``key_hash_slot`` per call from Python, the C one
(pyrepl/keyspace/_hashslot.h by _ktable) and the reference (hashslot.py).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import random
import statistics
import subprocess
import sys
import tarfile
import time
import tracemalloc
from io import BytesIO
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

OPS = ["get", "set", "del", "setnew", "churn"]
VARIANTS = ["before", "off", "on"]
BUILD = os.path.join(ROOT, "build", "bench_ktable_slots")


# -- the tables --------------------------------------------------------------------------------

def default_before() -> str:
    """The newest commit whose _ktable.c has no per-slot index: HEAD while the index is not
    committed, else the parent of the commit that brought it."""
    out = subprocess.run(["git", "log", "-1", "--format=%H", "-S", "track_slots", "--",
                          "pyrepl/keyspace/_ktable.c"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    return f"{out}~1" if out else "HEAD"


def build_before(rev: str) -> str:
    """The .so of _ktable.c at ``rev`` (built once per commit), its path."""
    sha = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    out = os.path.join(BUILD, sha[:12])
    for dirpath, _, files in os.walk(out):
        for f in files:
            if f.startswith("_ktable") and f.endswith(".so"):
                return os.path.join(dirpath, f)
    src = os.path.join(out, "src")
    os.makedirs(src, exist_ok=True)
    blob = subprocess.run(["git", "archive", sha, "pyrepl/keyspace"], cwd=ROOT,
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(src, filter="data")
    from setuptools import Distribution, Extension

    kdir = os.path.join(src, "pyrepl", "keyspace")
    dist = Distribution({"ext_modules": [Extension(
        "pyrepl.keyspace._ktable", [os.path.join(kdir, "_ktable.c")], include_dirs=[kdir],
        extra_compile_args=["-O2"])]})
    cmd: Any = dist.get_command_obj("build_ext")
    cmd.build_lib = os.path.join(out, "lib")
    cmd.build_temp = os.path.join(out, "tmp")
    cmd.ensure_finalized()
    cmd.run()
    return build_before(rev)


def load_before(path: str) -> Any:
    """The module of an older _ktable .so, beside the current one: loading a single-phase
    extension puts it in sys.modules under its name, where the current one is put back."""
    name = "pyrepl.keyspace._ktable"
    was = sys.modules.get(name)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if was is not None:
        sys.modules[name] = was
    else:
        sys.modules.pop(name, None)
    return mod


def current() -> Any:
    from pyrepl import native

    mod = native.load("pyrepl.keyspace._ktable")
    if mod is None:
        raise SystemExit(f"the C KeyTable is not loaded ({native.WHY_PURE})")
    return mod


def make(variant: str, types: dict[str, Any]) -> Any:
    t = types[variant]()
    if variant == "on":
        t.track_slots()
    return t


def keys(n: int, prefix: bytes = b"key:") -> list[bytes]:
    return [prefix + b"%012d" % i for i in range(n)]


# -- the ops -------------------------------------------------------------------------------------

def prepare(variant: str, types: dict[str, Any], op: str, n: int) -> tuple[Any, Any]:
    """A table and what the op runs over."""
    t = make(variant, types)
    if op == "setnew":
        return t, keys(n, b"new:")
    for k in keys(n):
        t[k] = k
    if op == "del":
        extra = keys(n, b"del:")
        for k in extra:
            t[k] = k
        return t, extra
    if op == "churn":
        return t, list(zip(keys(n, b"new:"), keys(n), strict=True))
    ks = keys(n)
    random.Random(1).shuffle(ks)
    return t, ks


def loop(op: str, t: Any, xs: Any) -> None:
    if op == "get":
        get = t.get
        for k in xs:
            get(k)
    elif op in ("set", "setnew"):
        for k in xs:
            t[k] = k
    elif op == "del":
        for k in xs:
            del t[k]
    elif op == "churn":
        for new, old in xs:
            t[new] = new
            del t[old]
    else:
        raise ValueError(op)


def timings(types: dict[str, Any], ops: list[str], n: int, rounds: int,
            chunks: int = 10) -> dict[str, dict[str, Any]]:
    """Per op: each variant's best ns per op, and the ratios off/before and on/off of each round
    (the median is what the table shows). In a round the three tables are made, then the op's
    work runs a chunk at a time on each in turn (another order each chunk), so that they share
    whatever else the machine runs."""
    out: dict[str, dict[str, Any]] = {}
    order = list(types)
    for op in ops:
        out[op] = {"best": dict.fromkeys(order, float("inf")), "off/before": [], "on/off": []}
    for r in range(rounds):
        for op in ops:
            # (made in another order each round: where a table and its keys land in memory moved
            # a random-access op by up to 20 % between tables of the same code)
            prepared = {v: prepare(v, types, op, n) for v in order[r % 3:] + order[:r % 3]}
            spent = dict.fromkeys(order, 0)
            size = -(-n // chunks)
            gc.disable()
            for c in range(chunks):
                for v in order[c % 3:] + order[:c % 3]:
                    t, xs = prepared[v]
                    part = xs[c * size:(c + 1) * size]
                    t0 = time.perf_counter_ns()
                    loop(op, t, part)
                    spent[v] += time.perf_counter_ns() - t0
            gc.enable()
            res = out[op]
            for v in order:
                res["best"][v] = min(res["best"][v], spent[v] / n)
            res["off/before"].append(spent["off"] / spent["before"])
            res["on/off"].append(spent["on"] / spent["off"])
            del prepared
    return out


def _instr_run(variant: str, before: str, op: str, reps: int, n: int) -> None:
    """The program callgrind counts: the same set-up whatever ``reps``, then ``reps`` batches
    of ``n`` operations (3 minus 1: 2n of them)."""
    types = {variant: load_before(before).KeyTable if variant == "before"
             else current().KeyTable}
    if op in ("setnew", "del", "churn"):
        t = make(variant, types)
        if op != "setnew":
            for k in keys(n):
                t[k] = k
        batches: list[Any] = []
        for j in range(3):
            if op == "churn":
                batches.append(list(zip(keys(n, b"n%d:" % j), keys(n) if j == 0 else
                                        keys(n, b"n%d:" % (j - 1)), strict=True)))
            else:
                batches.append(keys(n, b"b%d:" % j))
        if op == "del":
            for b in batches:
                for k in b:
                    t[k] = k
    else:
        t, xs = prepare(variant, types, op, n)
        batches = [xs] * 3
    for j in range(reps):
        loop(op, t, batches[j])


def instructions(variant: str, before: str, op: str, n: int) -> float:
    sys.path.insert(0, HERE)
    from common import callgrind_instructions

    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONHASHSEED="0")
    counts = [callgrind_instructions(
        [sys.executable, os.path.abspath(__file__), "--run", variant, before, op, str(reps),
         str(n)], env=env, cwd=ROOT, timeout=1200) for reps in (1, 3)]
    return (counts[1] - counts[0]) / (2 * n)


# -- memory and the slot function ------------------------------------------------------------

def memory(types: dict[str, Any], n: int) -> dict[str, tuple[int, float]]:
    """variant -> (getsizeof of a table of n keys, tracemalloc peak of its build per key)."""
    ks = keys(n)
    out = {}
    for variant in ("off", "on"):
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        t = make(variant, types)
        for k in ks:
            t[k] = None
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out[variant] = (sys.getsizeof(t), (peak - base) / n, t._stats()["capacity"])
        del t
    return out


def slot_fn_ns(n: int = 200_000) -> dict[str, float]:
    from pyrepl.keyspace.hashslot import key_hash_slot_reference

    mod = current()
    plain = keys(n)
    tagged = [b"{user%d}.followers" % (i % 1000) for i in range(n)]
    out = {}
    for name, fn in (("C", mod.key_hash_slot), ("Python", key_hash_slot_reference)):
        for kind, ks in (("key:%012d", plain), ("{tag}.suffix", tagged)):
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter_ns()
                for k in ks:
                    fn(k)
                best = min(best, (time.perf_counter_ns() - t0) / n)
            out[f"{name} {kind}"] = best
    return out


def main() -> int:
    if len(sys.argv) == 7 and sys.argv[1] == "--run":
        _instr_run(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--before", default=None, help="the revision without the index")
    ap.add_argument("--instr", action="store_true", help="count instructions (callgrind)")
    ap.add_argument("--instr-n", type=int, default=20_000)
    args = ap.parse_args()
    ops = args.ops.split(",")
    rev = args.before or default_before()
    before_so = build_before(rev)
    cur = current().KeyTable
    types = {"before": load_before(before_so).KeyTable, "off": cur, "on": cur}
    assert types["before"] is not cur and hasattr(cur, "track_slots")
    print(f"before = _ktable.c at {rev}; {args.keys} keys, best of {args.rounds} rounds")
    print(f"{'op':7} {'before ns':>9} {'off ns':>7} {'on ns':>7} {'off/before':>10} "
          f"{'on/off':>7}" + (f" {'before in':>9} {'off in':>7} {'on in':>7} "
                               f"{'off/bef':>7} {'on/off':>7}" if args.instr else ""))
    res = timings(types, ops, args.keys, args.rounds)
    for op in ops:
        b, f, o = (res[op]["best"][v] for v in VARIANTS)
        fb = statistics.median(res[op]["off/before"])
        of = statistics.median(res[op]["on/off"])
        spread = (f"  (rounds: off/before {min(res[op]['off/before']):.3f}-"
                  f"{max(res[op]['off/before']):.3f}, on/off {min(res[op]['on/off']):.3f}-"
                  f"{max(res[op]['on/off']):.3f})")
        line = f"{op:7} {b:9.1f} {f:7.1f} {o:7.1f} {fb:10.3f} {of:7.3f}"
        if args.instr:
            bi, fi, oi = (instructions(v, before_so, op, args.instr_n) for v in VARIANTS)
            line += f" {bi:9.1f} {fi:7.1f} {oi:7.1f} {fi / bi:7.4f} {oi / fi:7.4f}"
        print(line + spread, flush=True)
    mem = memory(types, args.keys)
    (off_size, off_peak, cap), (on_size, on_peak, _) = mem["off"], mem["on"]
    heads = 16384 * 8
    print(f"memory at {args.keys} keys: the index {(on_size - off_size) / args.keys:.2f} B/key "
          f"(getsizeof on - off), of which links {(on_size - off_size - heads) / args.keys:.2f} "
          f"B/key ({cap} entries allocated) and slot heads {heads} B; build peak "
          f"{off_peak:.1f} B/key off, {on_peak:.1f} B/key on (tracemalloc)")
    for name, ns in slot_fn_ns().items():
        print(f"key_hash_slot {name:26} {ns:6.1f} ns/call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
