"""Benchmark of ``metrics --follow``'s driver-side merge (pyrepl/analytics/fstate.py): the time
a row of a micro-batch's aggregate takes in ``rows_of`` and ``FollowState.add``, and a sample
in a redraw to a bigger modulus, against a base version of the module, in the same run.

Theory of operation: the aggregates are made once with Spark, as ``follow.Follower.on_batch``
makes a batch's (``parse_text``, ``classify``, ``aggregate_all`` at FINE_BUCKET_S with the
batch's ``every``, ``fstate.collect_arrow``), over the first lines of a bench fleet
(``bench_follow.py``'s, 750 nodes; batch i is the next ``--lines``[i] lines, every file its
share, as that bench's writer appends them), and kept as Arrow files under ``--cache``, named
for the fleet and the cuts (Spark runs only when they are missing: remove them after a change
to the pass). The defaults make batches of ~126k, ~71k and ~26k rows, as the follow bench's
first triggers merged (136k, 74k, 31k). Then, without Spark, each version of the module
(``--base``: a git revision's fstate.py, loaded from ``git show``; and the working tree's), in
turn, ``--rounds`` times: a fresh state, ``rows_of`` and ``add`` of each batch in order (each
with its ``every``; after each, a trigger's reads: the lag series per its bucket and the
samples per link, which the next ``add`` keeps up to date), then ``redraw`` to ``--redraw``.
Reported: the best round's and the median round's µs a row (rows_of, add, both: summed per
round), and µs a sample for the redraw (the samples before it). The last round's states of the
two versions must be the same, in the same order (groups, samples, events, counts, series,
samples per link), or the run fails.

    .venv/bin/python bench/bench_fstate.py [--src DIR] [--lines 500000,280000,200000]
        [--every 4,4,8] [--redraw 64] [--rounds 7] [--base HEAD] [--cache DIR] [--json FILE]

(``--base HEAD`` is the committed module: once this tree is committed, name the commit
before it.)
"""

from __future__ import annotations

import argparse
import gc
import glob
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

SRC = "/tmp/pyrepl-bfollow/src-9000000-250-30"
CACHE = "/tmp/pyrepl-bfstate"


def batch_lines(src: str, cuts: list[int]) -> list[list[bytes]]:
    """Batch i: the next ``cuts[i]`` lines of the fleet under ``src``, every file its share
    (as ``bench_follow.py``'s writer appends them: in proportion to its lines)."""
    files = sorted(glob.glob(os.path.join(src, "**", "*.ndjson"), recursive=True))
    if not files:
        raise SystemExit(f"no fleet under {src} (bench/bench_follow.py --seconds 30 makes one)")
    sizes = []
    for f in files:
        with open(f, "rb") as fh:
            sizes.append(sum(b.count(b"\n") for b in iter(lambda fh=fh: fh.read(1 << 20), b"")))
    total = sum(sizes)
    out: list[list[bytes]] = [[] for _ in cuts]
    for f, n in zip(files, sizes, strict=True):
        ends = [round(sum(cuts[:i + 1]) * n / total) for i in range(len(cuts))]
        with open(f, "rb") as fh:
            i = 0
            for k, line in enumerate(fh):
                while i < len(ends) and k >= ends[i]:
                    i += 1
                if i == len(ends):
                    break
                out[i].append(line)
    return out


def make_cache(src: str, cuts: list[int], everys: list[int], path: str) -> None:
    """The batches' aggregates, collected as ``on_batch`` collects them, as Arrow files."""
    import pyarrow as pa

    from pyrepl.analytics import fstate
    from pyrepl.analytics.read import FINE_BUCKET_S, aggregate_all, classify, parse_text
    from pyrepl.analytics.session import build_session, stop

    spark = build_session("local[2]", app_name="bench-fstate", progress=False)
    tmp = tempfile.mkdtemp(prefix="bench-fstate-")
    os.makedirs(path + ".tmp", exist_ok=True)
    try:
        for i, (lines, every) in enumerate(zip(batch_lines(src, cuts), everys, strict=True)):
            text = os.path.join(tmp, f"batch{i}.ndjson")
            with open(text, "wb") as f:
                f.writelines(lines)
            agg = aggregate_all(classify(parse_text(spark, spark.read.text(text))),
                                FINE_BUCKET_S, every)
            table = fstate.collect_arrow(agg)
            with pa.OSFile(os.path.join(path + ".tmp", f"batch{i}.arrow"), "wb") as sink, \
                    pa.ipc.new_file(sink, table.schema) as w:
                w.write_table(table)
            print(f"batch {i}: {len(lines):,} lines, every {every}: {table.num_rows:,} rows",
                  flush=True)
    finally:
        stop(spark)
        subprocess.run(["rm", "-rf", tmp], check=False)
    os.rename(path + ".tmp", path)


def load_cache(path: str, n: int) -> list[Any]:
    import pyarrow as pa

    out = []
    for i in range(n):
        with pa.memory_map(os.path.join(path, f"batch{i}.arrow")) as src:
            out.append(pa.ipc.open_file(src).read_all())
    return out


def base_module(rev: str) -> Any:
    """``pyrepl/analytics/fstate.py`` as of git revision ``rev``, as a module of its own."""
    text = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:pyrepl/analytics/fstate.py"],
                          capture_output=True, check=True).stdout
    mod = types.ModuleType("fstate_base")
    exec(compile(text, f"{rev}:pyrepl/analytics/fstate.py", "exec"), mod.__dict__)
    return mod


def one_round(mod: Any, tables: list[Any], everys: list[int], redraw: int
              ) -> tuple[dict[str, float], Any]:
    """Seconds of rows_of, add and the redraw over the batches, and the state made. After
    each batch, what a trigger reads of the state (the lag series per its bucket, the samples
    per link), as the follower's triggers do: the next batches add to them."""
    from pyrepl.analytics.job import choose_bucket

    gc.collect()
    t = {"rows_of": 0.0, "add": 0.0, "redraw": 0.0}
    state = mod.FollowState()
    for table, every in zip(tables, everys, strict=True):
        t0 = time.perf_counter()
        rows = mod.rows_of(table)
        t1 = time.perf_counter()
        state.add(rows, every)
        t2 = time.perf_counter()
        t["rows_of"] += t1 - t0
        t["add"] += t2 - t1
        del rows
        mod.series_rows([state], choose_bucket(*state.span()))
        mod.samples_by_link([state])
    t["samples"] = float(len(state.samples))
    t0 = time.perf_counter()
    state.redraw(redraw)
    t["redraw"] = time.perf_counter() - t0
    return t, state


def canon(v: Any) -> Any:
    """A value as a comparable key (NaN one value; a -0.0 stays apart from 0.0)."""
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else (v, math.copysign(1.0, v))
    if isinstance(v, dict):
        return tuple(sorted((k, canon(x)) for k, x in v.items()))
    if isinstance(v, list | tuple):
        return tuple(canon(x) for x in v)
    if isinstance(v, set):
        return tuple(sorted(map(canon, v), key=repr))
    return v


def snapshot(mod: Any, state: Any) -> Any:
    """What a state holds, in its order (the groups', samples' and events' order too, and
    the series' and samples per link's as a finish reads them), to compare two versions'."""
    return canon((state.every, state.rows(), list(state.counts.acc.items()),
                  list(state.groups.items()), state.samples, state.events,
                  mod.series_rows([state], 60.0), list(state.link_samples().items())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=SRC)
    ap.add_argument("--lines", default="500000,280000,200000", help="the lines of each batch")
    ap.add_argument("--every", default="4,4,8", help="the sampling modulus of each batch")
    ap.add_argument("--redraw", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--base", default="HEAD", help="git revision of the version to compare")
    ap.add_argument("--cache", default=CACHE)
    ap.add_argument("--json")
    args = ap.parse_args()
    cuts = [int(x) for x in args.lines.split(",")]
    everys = [int(x) for x in args.every.split(",")]
    assert len(cuts) == len(everys)
    key = hashlib.sha1(repr((os.path.realpath(args.src), cuts, everys)).encode()).hexdigest()
    path = os.path.join(args.cache, key[:12])
    if not os.path.isdir(path):
        os.makedirs(args.cache, exist_ok=True)
        print(f"making the aggregates with Spark into {path}", flush=True)
        make_cache(args.src, cuts, everys, path)
    tables = load_cache(path, len(cuts))
    nrows = sum(t.num_rows for t in tables)
    print(f"{path}: {', '.join(f'{t.num_rows:,}' for t in tables)} rows (every "
          f"{args.every}), redraw to {args.redraw}")

    from pyrepl.analytics import fstate
    versions = {f"base {args.base}": base_module(args.base), "tree": fstate}
    per: dict[str, list[dict[str, float]]] = {name: [] for name in versions}
    snaps = {}
    for r in range(args.rounds):
        for name, mod in versions.items():
            t, state = one_round(mod, tables, everys, args.redraw)
            us = {"rows_of": t["rows_of"] / nrows * 1e6, "add": t["add"] / nrows * 1e6,
                  "redraw": t["redraw"] / max(1.0, t["samples"]) * 1e6}
            per[name].append(us | {"both": us["rows_of"] + us["add"]})
            if r == args.rounds - 1:
                snaps[name] = repr(snapshot(mod, state))
            del state
    same = len(set(snaps.values())) == 1
    cols = ("rows_of", "add", "both", "redraw")
    results: dict[str, Any] = {"rows": [t.num_rows for t in tables], "every": everys,
                               "redraw": args.redraw, "rounds": args.rounds,
                               "same_state": same, "versions": {}}
    print(f"{'µs a row':<16}" + "".join(f"{c:>16}" for c in cols) + "   (best / median of "
          f"{args.rounds} rounds; the redraw: µs a sample)")
    for name, rounds in per.items():
        got = {c: (min(x[c] for x in rounds), statistics.median(x[c] for x in rounds))
               for c in cols}
        results["versions"][name] = {c: {"best": b, "median": m} for c, (b, m) in got.items()}
        print(f"{name:<16}" + "".join(f"{b:>9.2f} /{m:>5.2f}" for b, m in got.values()))
    a, b = (results["versions"][n] for n in versions)
    print(f"{'speed-up':<16}" + "".join(
        f"{a[c]['best'] / b[c]['best']:>8.2f}x /{a[c]['median'] / b[c]['median']:>4.1f}x"
        for c in cols))
    print("the states are the same" if same else "THE STATES DIFFER")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
