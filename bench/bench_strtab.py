"""StrSet and StrDict (pyrepl/keyspace/_strtab.c) against a Python set and dict of bytes:
memory, and cost per operation.

    .venv/bin/python bench/bench_strtab.py [--fields 500000] [--keys 100000] [--rounds 5]

Memory, as the two workloads of bench/RESULTS.md's memory table that are hashtables in Redis:

* a set of 10 seven-byte members (``b"member0"`` .. ``b"member9"``, sets-50k-x10): the bytes as
  pymalloc hands them out (``sys.getsizeof``: the set's table and each bytes object; the StrSet
  answers its object, index, entries and blobs at pymalloc's 16-byte granularity), and what
  tracemalloc traces (requested bytes) for 50,000 such sets, per set;
* one hash of ``--fields`` fields ``field:J`` -> ``value:J`` (hash-500k-fields): per field, what
  tracemalloc traces while the container and its values live (the value bytes objects included,
  the keys a dict keeps included; a StrDict keeps none), and the pymalloc-rounded equivalent.

Operations (ns per operation, the Python loop included, the same for both; best of
``--rounds``) over ``--keys`` keys ``b"key:%d"``: ``in`` with the stored key objects (whose
hash is cached) and with equal fresh ones (as a request's arguments are), ``add`` / ``d[k] = v``
of new keys into an empty container (growth included), of present ones, ``get``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def _types() -> tuple[Any, Any]:
    from pyrepl.keyspace import strtab

    if strtab.NATIVE_SET is None:
        raise SystemExit("the C StrSet / StrDict are not loaded (pyrepl runs as plain Python)")
    return strtab.NATIVE_SET, strtab.NATIVE_DICT


def _pymalloc(n: int) -> int:
    return (n + 15) & ~15 if n <= 512 else n


def _traced(build: Any) -> tuple[int, Any]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    obj = build()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, obj


def small_sets() -> None:
    StrSet, _ = _types()
    members = [b"member%d" % i for i in range(10)]
    py = set(members)
    py_size = _pymalloc(sys.getsizeof(py)) + sum(_pymalloc(sys.getsizeof(m)) for m in members)
    print(f"set of 10 x 7-byte members: StrSet {sys.getsizeof(StrSet(members))} B, "
          f"set {py_size} B (Redis 7.0: 842 B a key, the key included)")
    n = 50000
    traced, keep = _traced(lambda: [StrSet([b"member%d" % i for i in range(10)])
                                    for _ in range(n)])
    del keep
    traced_py, keep = _traced(lambda: [{b"member%d" % i for i in range(10)} for _ in range(n)])
    del keep
    print(f"  {n} of them, tracemalloc per set: StrSet {traced / n:.0f} B, "
          f"set {traced_py / n:.0f} B (requested bytes, pymalloc's rounding aside)")


def big_hash(fields: int) -> None:
    _, StrDict = _types()

    def build(d: Any) -> Any:
        for j in range(fields):
            d[b"field:%d" % j] = b"value:%d" % j
        return d

    traced, d = _traced(lambda: build(StrDict()))
    values = sum(_pymalloc(sys.getsizeof(v)) for v in d.values())
    rounded = sys.getsizeof(d) + values
    stats = d._stats()
    del d
    traced_py, py = _traced(lambda: build({}))
    rounded_py = _pymalloc(sys.getsizeof(py)) + sum(
        _pymalloc(sys.getsizeof(k)) + _pymalloc(sys.getsizeof(v)) for k, v in py.items())
    del py
    print(f"hash of {fields} fields field:J -> value:J, per field (values included):")
    print(f"  tracemalloc: StrDict {traced / fields:.1f} B, dict {traced_py / fields:.1f} B")
    print(f"  pymalloc-rounded: StrDict {rounded / fields:.1f} B, dict {rounded_py / fields:.1f} B"
          f" (Redis 7.0: 83 B)   StrDict layout {stats}")


def _best(rounds: int, fn: Any, n: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e9


def operations(n: int, rounds: int) -> None:
    StrSet, StrDict = _types()
    keys = [b"key:%d" % i for i in range(n)]
    fresh = [bytes(bytearray(k)) for k in keys]
    for k in fresh:
        hash(k)             # (a request's argument is hashed once, by the first lookup)
    rows = []
    for label, make_set, make_dict in (("C", StrSet, StrDict), ("Python", set, dict)):
        s, d = make_set(keys), make_dict((k, k) for k in keys)

        def contains(ks: list[bytes] = keys, s: Any = s) -> None:
            for k in ks:
                k in s  # noqa: B015

        def add_new(make: Any = make_set) -> None:
            t = make()
            add = t.add
            for k in keys:
                add(k)

        def add_present(s: Any = s) -> None:
            add = s.add
            for k in fresh:
                add(k)

        def get(d: Any = d) -> None:
            g = d.get
            for k in fresh:
                g(k)

        def setitem_new(make: Any = make_dict) -> None:
            t = make()
            for k in keys:
                t[k] = k

        def setitem_present(d: Any = d) -> None:
            for k in fresh:
                d[k] = k

        rows.append((label, [
            _best(rounds, contains, n),
            _best(rounds, lambda s=s: contains(fresh, s), n),
            _best(rounds, add_new, n),
            _best(rounds, add_present, n),
            _best(rounds, get, n),
            _best(rounds, setitem_new, n),
            _best(rounds, setitem_present, n),
        ]))
    heads = ["in (stored keys)", "in (fresh keys)", "add new", "add present", "get",
             "d[k]=v new", "d[k]=v present"]
    print(f"ns per operation, {n} keys (best of {rounds}):")
    print("  " + " | ".join(f"{h:>16}" for h in ["", *heads]))
    for label, vals in rows:
        print("  " + " | ".join([f"{label:>16}", *(f"{v:16.1f}" for v in vals)]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fields", type=int, default=500000)
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    small_sets()
    big_hash(a.fields)
    operations(a.keys, a.rounds)


if __name__ == "__main__":
    main()
