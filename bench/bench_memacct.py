"""Memory accounting for maxmemory (issue 37, part 1): allocator options measured side by side.

    .venv/bin/python bench/bench_memacct.py [--parts calls,instr,memory,throughput]
        [--modes pymalloc,malloc,malloc+hook,jemalloc+hook] [--rounds 3] [--json PATH]

Builds bench/memacct/_memacct.c (a hook on CPython's RAW/MEM/OBJ allocator domains that adds
malloc_usable_size of every block allocated and subtracts it of every block freed: Redis's
zmalloc on libc) into a temporary tree with the interpreter's own compiler and flags, beside
bench/memacct/sitecustomize.py and a link to this checkout's pyrepl. Every pyrepl below runs
from that tree (PYTHONPATH), in one of the modes:

    pymalloc       the default (CPython's small-object allocator)
    pymalloc+hook  the same + the size-class hook (pymalloc's blocks counted at their size
                   class, found from their pool's header in the arenas the hook saw allocated;
                   libc's blocks with malloc_usable_size)
    malloc         PYTHONMALLOC=malloc (every domain on glibc malloc)
    malloc+hook    the same + the counting hook (MEMACCT_HOOK=1: sitecustomize imports
                   _memacct before pyrepl is imported)
    jemalloc+hook  the same with jemalloc LD_PRELOADed (libjemalloc2), the hook sizing blocks
                   with jemalloc's malloc_usable_size: Redis's default allocator
    poolwalk       pymalloc untouched (MEM/OBJ not wrapped); only the arena allocator and the
                   RAW domain hooked; used() walks the known arenas' pool headers

Parts, each mode beside the others in the same run:

calls       MEM/OBJ allocator calls per command in pymalloc+hook (a build with call counters,
            bench_dispatch_instr's cases run in-process): what the hook's cost is paid on.
instr       bench/bench_dispatch_instr.py (callgrind) --tree <the tree> with the mode's
            environment (inherited by its subprocess): --cases SET,GET,INCR -P 1 -n 1000 and
            --cases SET,GET -P 16 -n 4000.
memory      a fresh `pyrepl master` per mode, then redis-server 7.0.15, loaded with pipelined
            redis-py: 500k strings, 50k hashes of 10 fields, 50k sorted sets of 10, then
            FLUSHALL; RSS (and the counted bytes in the hooked modes, Redis's used_memory) at
            each step.
bound       poolwalk only, in-process: the cost of the bounded-walk check (_memacct.check) per
            call, then 500k dict stores of SET-like strings each followed by a check against
            a limit 30 MB above the start, per walk interval, stopping 20k stores past the
            first "over": walks made, their total time, and the exact overshoot (a walk)
            when the check first says "over"; then, per eviction margin, 1M unique stores
            held at the limit by evicting the oldest keys (a forced walk per batch, batches
            sized from the bytes a key freed so far).
throughput  redis-benchmark -t set,get -n 200000 -P 16 -c 50 against each mode's server,
            interleaved, --rounds rounds, medians, as a ratio to pymalloc.

The whole run takes ~16 minutes on the project's machine (instr ~13 of them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from common import (  # noqa: E402
    ServerProcess,
    free_port,
    median,
    pyrepl_argv,
    redis_benchmark,
    rss_bytes,
    start_redis,
)

JEMALLOC = "/lib/x86_64-linux-gnu/libjemalloc.so.2"
MODES: dict[str, dict[str, str]] = {
    "pymalloc": {},
    "pymalloc+hook": {"MEMACCT_HOOK": "1"},
    "malloc": {"PYTHONMALLOC": "malloc"},
    "malloc+hook": {"PYTHONMALLOC": "malloc", "MEMACCT_HOOK": "1"},
    "jemalloc+hook": {"PYTHONMALLOC": "malloc", "MEMACCT_HOOK": "1", "LD_PRELOAD": JEMALLOC},
    "poolwalk": {"MEMACCT_HOOK": "1", "MEMACCT_DESIGN": "poolwalk"},
}
INSTR_RUNS = (("SET,GET,INCR", 1, 1000), ("SET,GET", 16, 4000))
LOADS = ("500k strings", "50k hashes x10", "50k zsets x10")


def build(tree: str, *defines: str) -> None:
    """_memacct built into ``tree`` with the flags CPython was built with, beside
    sitecustomize.py and a link to this checkout's pyrepl (its C extensions built in place)."""
    src = os.path.join(HERE, "memacct")
    cc = shlex.split(sysconfig.get_config_var("CC"))
    cflags = shlex.split(sysconfig.get_config_var("CFLAGS") or "")
    ccshared = shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
    out = os.path.join(tree, "_memacct" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([*cc, *cflags, *ccshared, *defines, "-shared",
                    "-I", sysconfig.get_paths()["include"],
                    os.path.join(src, "_memacct.c"), "-o", out, "-ldl"], check=True)
    shutil.copy(os.path.join(src, "sitecustomize.py"), tree)
    os.symlink(os.path.join(ROOT, "pyrepl"), os.path.join(tree, "pyrepl"))


def mode_env(tree: str, mode: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONMALLOC", "MEMACCT_HOOK", "MEMACCT_PORT", "LD_PRELOAD")}
    env.update(MODES[mode], PYTHONPATH=tree, **extra)
    return env


def check_modes(tree: str, modes: list[str]) -> None:
    """Each mode's interpreter as set up: the allocator asked for, the hook in place or not."""
    code = ("import sys; pre = '_memacct' in sys.modules; import _memacct; "
            "print(pre and _memacct.installed(), _memacct.used(), "
            "open('/proc/self/maps').read().count('jemalloc') > 0)")
    for mode in modes:
        out = subprocess.run([sys.executable, "-c", code], env=mode_env(tree, mode), cwd=tree,
                             capture_output=True, text=True, check=True).stdout.split()
        hooked, jem = out[0] == "True", out[2] == "True"
        assert hooked == ("hook" in mode or mode == "poolwalk"), (mode, out)   # (pymalloc+hook: its self-test passed)
        assert jem == mode.startswith("jemalloc"), (mode, out)
        print(f"# {mode}: hook installed={hooked} (used() at start {int(out[1]):,} B), "
              f"jemalloc={jem}", flush=True)


# -- instructions -----------------------------------------------------------------------------

def part_instr(tree: str, modes: list[str]) -> dict[str, dict[str, float]]:
    res: dict[str, dict[str, float]] = {}
    for cases, pipeline, n in INSTR_RUNS:
        for mode in modes:
            argv = [sys.executable, os.path.join(HERE, "bench_dispatch_instr.py"), "--tree", tree,
                    "--cases", cases, "-P", str(pipeline), "-n", str(n)]
            t0 = time.time()
            out = subprocess.run(argv, env=mode_env(tree, mode), capture_output=True,
                                 text=True, timeout=3600, check=True).stdout
            for m in re.finditer(r"^(\S+)\s+-P(\d+)\s+([\d,]+) instructions", out, re.M):
                key = f"{m.group(1)} -P{m.group(2)}"
                res.setdefault(key, {})[mode] = float(m.group(3).replace(",", ""))
                print(f"# instr {mode:14} {key:10} {m.group(3):>8}", flush=True)
            print(f"#   ({time.time() - t0:.0f} s)", flush=True)
    return res


# -- allocator calls per command ---------------------------------------------------------------

CALLS_CODE = """
import sys, _memacct
sys.path.insert(0, %r)
import bench_dispatch_instr as d
for cases, P, n in %r:
    for c in cases.split(","):
        core, protos, chunks = d.shell_setup(c, 0, P)
        d.shell_run(core, protos, chunks, 4096, P, 0)
        a = _memacct.calls()
        d.shell_run(core, protos, chunks, 16384, P, 0)
        print(c, P, *[(y - x) / 16384 for x, y in zip(a, _memacct.calls())])
"""


def _counted_calls(mode: str, fields: slice) -> dict[str, list[float]]:
    """Allocator calls per command in ``mode``, built with -DMEMACCT_CALLS (counters the
    measured builds do not have): bench_dispatch_instr's cases run in-process (no valgrind);
    ``fields`` picks the counters of each line the run prints."""
    tree = tempfile.mkdtemp(prefix="memacct-calls-")
    try:
        build(tree, "-DMEMACCT_CALLS")
        out = subprocess.run([sys.executable, "-c", CALLS_CODE % (HERE, INSTR_RUNS)],
                             env=mode_env(tree, mode, PYTHONHASHSEED="0"), cwd=tree,
                             capture_output=True, text=True, timeout=600, check=True).stdout
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    res = {}
    for line in out.splitlines():
        case, p, *nums = line.split()
        res[f"{case} -P{p}"] = [float(x) for x in nums[fields]]
    return res


def part_raw_calls() -> dict[str, list[float]]:
    """RAW-domain calls per command in poolwalk (malloc+calloc, realloc, free): all the
    poolwalk design's hot-path hook calls (MEM/OBJ are not wrapped)."""
    return _counted_calls("poolwalk", slice(3, 6))


def part_calls() -> dict[str, list[float]]:
    """Allocator calls per command with pymalloc+hook (malloc+calloc, realloc, free)."""
    return _counted_calls("pymalloc+hook", slice(0, 3))


# -- memory -----------------------------------------------------------------------------------

def _load(port: int, which: str) -> None:
    import redis

    r = redis.Redis(port=port)
    batch = 1000
    n = 500_000 if which == LOADS[0] else 50_000
    for start in range(0, n, batch):
        p = r.pipeline(transaction=False)
        for i in range(start, start + batch):
            if which == LOADS[0]:
                p.set(f"string:{i}", f"value:{i}")
            elif which == LOADS[1]:
                p.hset(f"hash:{i}", mapping={f"field{j}": f"v{j}" for j in range(10)})
            else:
                p.zadd(f"zset:{i}", {f"member{j}": j for j in range(10)})
        p.execute()
    r.close()


def _settle() -> None:
    time.sleep(1.5)


def _acct(port: int) -> dict[str, int]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


def _flushall(port: int) -> None:
    import redis

    r = redis.Redis(port=port)
    r.flushall()
    r.close()


def measure_memory(tree: str, mode: str) -> list[dict[str, int]]:
    """RSS (and the hook's figures) of a fresh pyrepl at each step."""
    port, aport = free_port(), free_port()
    tmp = tempfile.mkdtemp(prefix="memacct-")
    env = mode_env(tree, mode, MEMACCT_PORT=str(aport))
    server = ServerProcess(pyrepl_argv("master", port, tmp), port, tmp, f"pyrepl-{mode}",
                           env=env).start()
    steps = []
    try:
        for step in ("start", *LOADS, "FLUSHALL"):
            if step == "FLUSHALL":
                _flushall(port)
            elif step != "start":
                _load(port, step)
            _settle()
            row = {"rss": rss_bytes(server.proc.pid)}
            if "hook" in mode or mode == "poolwalk":
                a = _acct(aport)
                row.update(used=a["used"], heap=a["heap"], heap_ns=a["heap_ns"],
                           walk=a["walk"], walk_ns=a["walk_ns"], walk_arenas=a["walk_arenas"],
                           dbg_bytes=a["dbg_bytes"], dbg_ns=a["dbg_ns"])
                if mode == "poolwalk":   # the walk's cost, again, warm: 20 walks, min/median
                    ns = sorted(_acct(aport)["walk_ns"] for _ in range(20))
                    row.update(walk_ns_min=ns[0], walk_ns_med=ns[10])
            steps.append(row)
            print(f"# memory {mode:14} {step:16} " + " ".join(f"{k}={v:,}" for k, v in
                  row.items()), flush=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return steps


def measure_redis() -> list[dict[str, int]]:
    import redis

    server = start_redis("--save", "")
    steps = []
    try:
        r = redis.Redis(port=server.port)
        for step in ("start", *LOADS, "FLUSHALL"):
            if step == "FLUSHALL":
                _flushall(server.port)
            elif step != "start":
                _load(server.port, step)
            _settle()
            info = r.info("memory")
            row = {"rss": rss_bytes(server.proc.pid), "used": int(info["used_memory"])}
            steps.append(row)
            print(f"# memory {'redis-7.0':14} {step:16} " + " ".join(f"{k}={v:,}" for k, v in
                  row.items()), flush=True)
        r.close()
    finally:
        server.stop()
    return steps


def part_memory(tree: str, modes: list[str]) -> dict[str, list[dict[str, int]]]:
    res = {mode: measure_memory(tree, mode) for mode in modes}
    res["redis-7.0"] = measure_redis()
    return res


# -- the bounded walk -------------------------------------------------------------------------

BOUND_CODE = """
import time, _memacct as m
N, LIMIT_UP, INTERVALS, EVICT_INTERVAL, MARGINS = 500_000, 30_000_000, %r, %r, %r
t = time.perf_counter_ns()
for i in range(1_000_000):
    m.check(1 << 62, 0)
per_far = (time.perf_counter_ns() - t) / 1e6
t = time.perf_counter_ns()
for i in range(1_000_000):
    pass
per_empty = (time.perf_counter_ns() - t) / 1e6
print("cost", per_far, per_empty)
for interval in INTERVALS:
    d = {}
    m.check(1 << 62, 0, True)
    start = m.used()
    limit = start + LIMIT_UP
    w0 = m.check_state()[2]
    t0 = time.perf_counter_ns()
    walk_ns = 0
    hit = None
    for i in range(N):
        d[b"string:%%d" %% i] = b"value:%%d" %% i
        t = time.perf_counter_ns()
        over, walked = m.check(limit, interval)
        if walked:
            walk_ns += time.perf_counter_ns() - t
        if over and hit is None:
            est, free, _ = m.check_state()
            hit = (i, m.used() - limit, est - limit, free)
        if hit is not None and i >= hit[0] + 20_000:   # 20k writes past the limit, then stop
            break
    el = time.perf_counter_ns() - t0
    walks = m.check_state()[2] - w0
    print("run", interval, walks, walk_ns, el, *(hit or (-1, 0, 0, 0)))
    del d
import collections
for margin in MARGINS:
    # steady state at the limit: 1M unique stores; when the check says over, evict the oldest
    # keys down to limit - margin in batches sized from the bytes per key the walks saw freed,
    # a forced walk after each batch
    d, q = {}, collections.deque()
    m.check(1 << 62, 0, True)
    limit = m.used() + LIMIT_UP
    w0 = m.check_state()[2]
    walk_ns = evicted = 0
    per_key = 64.0
    worst = -(1 << 62)
    t0 = time.perf_counter_ns()
    for i in range(1_000_000):
        k = b"string:%%d" %% i
        d[k] = b"value:%%d" %% i
        q.append(k)
        t = time.perf_counter_ns()
        over, walked = m.check(limit, EVICT_INTERVAL)
        if walked:
            walk_ns += time.perf_counter_ns() - t
        while over:
            # a batch sized from the bytes a key freed so far (what the last walks saw)
            est = m.check_state()[0]
            n = min(len(q), max(1, int((est - (limit - margin)) / per_key) + 1))
            for _ in range(n):
                del d[q.popleft()]
            evicted += n
            t = time.perf_counter_ns()
            over = m.check(limit - margin, 0, True)[0]
            walk_ns += time.perf_counter_ns() - t
            freed = est - m.check_state()[0]
            if freed > 0:
                per_key = (per_key + freed / n) / 2
        if i %% 1000 == 999:
            t = time.perf_counter_ns()
            worst = max(worst, m.used() - limit)
            t0 += time.perf_counter_ns() - t    # the sampling walk is not the scheme's
    el = time.perf_counter_ns() - t0
    print("evict", margin, m.check_state()[2] - w0, walk_ns, el, evicted, worst)
"""
BOUND_INTERVALS = (0, 100_000, 1_000_000, 10_000_000, 100_000_000)
EVICT_INTERVAL, MARGINS = 1_000_000, (0, 262_144, 1_048_576)


def part_bound(tree: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", BOUND_CODE % (BOUND_INTERVALS, EVICT_INTERVAL, MARGINS)],
                         env=mode_env(tree, "poolwalk"), cwd=tree, capture_output=True,
                         text=True, timeout=900, check=True).stdout
    res: dict[str, object] = {"runs": []}
    for line in out.splitlines():
        f = line.split()
        if f[0] == "cost":
            res["check_ns"], res["empty_loop_ns"] = float(f[1]), float(f[2])
        elif f[0] == "run":
            res["runs"].append(dict(zip(("interval_ns", "walks", "walk_ns", "elapsed_ns", "at",
                                         "overshoot", "est_minus_limit", "free_at_walk"),
                                        map(int, f[1:]), strict=True)))
        elif f[0] == "evict":
            res.setdefault("evict", []).append(dict(zip(
                ("margin", "walks", "walk_ns", "elapsed_ns", "evicted", "worst_overshoot"),
                map(int, f[1:]), strict=True)))
        print("# bound " + line, flush=True)
    return res


# -- throughput -------------------------------------------------------------------------------

def part_throughput(tree: str, modes: list[str], rounds: int) -> dict[str, dict[str, float]]:
    servers = {}
    try:
        for mode in modes:
            port = free_port()
            tmp = tempfile.mkdtemp(prefix="memacct-")
            servers[mode] = ServerProcess(pyrepl_argv("master", port, tmp), port, tmp,
                                          f"pyrepl-{mode}", env=mode_env(tree, mode)).start()
        got: dict[str, dict[str, list[float]]] = {m: {} for m in modes}
        for rnd in range(rounds):
            for mode in modes:
                r = redis_benchmark(servers[mode].port, "set,get", 200_000, 50, 16)
                for test, rps in r.items():
                    got[mode].setdefault(test, []).append(rps)
                print(f"# throughput round {rnd + 1} {mode:14} " +
                      " ".join(f"{t}={v:,.0f}" for t, v in r.items()), flush=True)
        return {m: {t: median(v) for t, v in got[m].items()} for m in modes}
    finally:
        for s in servers.values():
            s.stop()
            shutil.rmtree(s.dir, ignore_errors=True)


# -- report -----------------------------------------------------------------------------------

def _mb(b: float) -> str:
    return f"{b / 1e6:,.1f}"


def report(res: dict, modes: list[str]) -> None:
    if "calls" in res:
        print("\nMEM/OBJ allocator calls per command (pymalloc): malloc+calloc, free, realloc")
        for case, (ma, fr, re_) in res["calls"].items():
            print(f"  {case:10} {ma:5.1f} {fr:5.1f} {re_:5.1f}   total {ma + fr + re_:5.1f}")
    if "raw_calls" in res:
        print("\nRAW-domain calls per command (poolwalk): malloc+calloc, realloc, free")
        for case, (ma, re_, fr) in res["raw_calls"].items():
            print(f"  {case:10} {ma:5.2f} {re_:5.2f} {fr:5.2f}   total {ma + re_ + fr:5.2f}")
    if "instr" in res:
        print("\n| case | " + " | ".join(modes) + " |")
        print("|---|" + "---:|" * len(modes))
        for case, per in res["instr"].items():
            base = per.get("pymalloc")
            cells = []
            for m in modes:
                v = per.get(m)
                if v is None:
                    cells.append("")
                elif base and m != "pymalloc":
                    cells.append(f"{v:,.0f} ({(v / base - 1) * 100:+.1f} %)")
                else:
                    cells.append(f"{v:,.0f}")
            print(f"| {case} | " + " | ".join(cells) + " |")
    if "memory" in res:
        mem = res["memory"]
        names = list(mem)
        print("\nRSS growth per load, MB (counted bytes growth in the hooked modes, "
              "used_memory for Redis):")
        print("\n| load | " + " | ".join(names) + " |")
        print("|---|" + "---:|" * len(names))
        for i, load in enumerate(LOADS, start=1):
            cells = []
            for name in names:
                s = mem[name]
                cell = _mb(s[i]["rss"] - s[i - 1]["rss"])
                if "used" in s[i]:
                    cell += f" ({_mb(s[i]['used'] - s[i - 1]['used'])})"
                cells.append(cell)
            print(f"| {load} | " + " | ".join(cells) + " |")
        print("\nAbsolute, MB: RSS / counted (used_memory) at start, after the loads, after "
              "FLUSHALL:")
        print("\n| server | start | loaded | FLUSHALL | counted ÷ RSS loaded |")
        print("|---|---:|---:|---:|---:|")
        for name in names:
            s = mem[name]

            def cell(row: dict[str, int]) -> str:
                return _mb(row["rss"]) + (f" / {_mb(row['used'])}" if "used" in row else "")
            ratio = f"{s[-2]['used'] / s[-2]['rss']:.2f}" if "used" in s[-2] else ""
            print(f"| {name} | {cell(s[0])} | {cell(s[-2])} | {cell(s[-1])} | {ratio} |")
        for name in names:
            s = mem[name]
            if "heap_ns" in s[-2]:
                what = ("jemalloc stats.allocated" if name.startswith("jemalloc") else
                        "glibc mallinfo2 uordblks+hblkhd" + (" (libc's heap only: not the "
                                                             "arenas)" if "pymalloc" in name
                                                             else ""))
                print(f"# {name}: the allocator's own figure, {what}, loaded: "
                      f"{_mb(s[-2]['heap'])} MB, one call {s[-2]['heap_ns']:,} ns")
    if "memory" in res:
        print("\nPool walk, per step: arenas walked, walk sum MB, walk us (min/median warm), "
              "CPython's _PyObject_DebugMallocStats bytes MB and us (all arenas)")
        for name, s in res["memory"].items():
            for step, row in zip(("start", *LOADS, "FLUSHALL"), s, strict=False):  # (a run cut short has fewer)
                if "walk" in row and name in ("pymalloc+hook", "poolwalk"):
                    warm = (f" warm {row['walk_ns_min'] / 1e3:.1f}/{row['walk_ns_med'] / 1e3:.1f}"
                            if "walk_ns_min" in row else "")
                    print(f"  {name:14} {step:16} arenas {row['walk_arenas']:4} walk "
                          f"{_mb(row['walk'])} MB {row['walk_ns'] / 1e3:7.1f} us{warm}; "
                          f"dbg {_mb(row['dbg_bytes'])} MB {row['dbg_ns'] / 1e3:.0f} us")
    if "bound" in res:
        b = res["bound"]
        print(f"\nbounded-walk check, far from the limit: {b['check_ns']:.0f} ns a call from "
              f"Python (empty loop {b['empty_loop_ns']:.0f} ns)")
        print("| interval | walks | walk time | run time | over at | exact overshoot | "
              "est - limit | free in arenas at last walk |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in b["runs"]:
            print(f"| {r['interval_ns'] / 1e6:g} ms | {r['walks']:,} | "
                  f"{r['walk_ns'] / 1e6:.1f} ms | {r['elapsed_ns'] / 1e6:.0f} ms | {r['at']:,} | "
                  f"{r['overshoot']:,} B | {r['est_minus_limit']:,} B | "
                  f"{_mb(r['free_at_walk'])} MB |")
        print(f"\nat the limit, 1M unique stores, evicting the oldest keys down to "
              f"limit - margin in batches sized from the bytes per key freed so far, a forced "
              f"walk per batch, the check's interval "
              f"{EVICT_INTERVAL / 1e6:g} ms:")
        print("| margin | walks | walks per 1k stores | walk time | run time | evicted | "
              "worst sampled overshoot (every 1k stores) |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for r in b.get("evict", []):
            print(f"| {r['margin'] / 1024:g} KiB | {r['walks']:,} | {r['walks'] / 1000:.1f} | "
                  f"{r['walk_ns'] / 1e6:.1f} ms ({r['walk_ns'] / r['elapsed_ns'] * 100:.1f} %) | "
                  f"{r['elapsed_ns'] / 1e6:.0f} ms | {r['evicted']:,} | "
                  f"{r['worst_overshoot']:,} B |")
    if "throughput" in res:
        thr = res["throughput"]
        base = thr.get("pymalloc", {})
        print("\n| redis-benchmark -P16 | " + " | ".join(thr) + " |")
        print("|---|" + "---:|" * len(thr))
        for test in base:
            cells = []
            for m in thr:
                v = thr[m].get(test, float("nan"))
                cells.append(f"{v:,.0f}" + (f" ({v / base[test]:.3f}x)" if m != "pymalloc"
                                             else ""))
            print(f"| {test} | " + " | ".join(cells) + " |")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="calls,instr,memory,bound,throughput")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--throughput-modes", default="pymalloc,pymalloc+hook,poolwalk,malloc+hook,jemalloc+hook")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    modes = args.modes.split(",")
    parts = args.parts.split(",")
    tree = tempfile.mkdtemp(prefix="memacct-tree-")
    res: dict[str, object] = {}
    try:
        build(tree)
        check_modes(tree, modes)
        if "calls" in parts:
            res["calls"] = part_calls()
            if "poolwalk" in modes:
                res["raw_calls"] = part_raw_calls()
        if "bound" in parts:
            res["bound"] = part_bound(tree)
        if "instr" in parts:
            res["instr"] = part_instr(tree, modes)
        if "memory" in parts:
            res["memory"] = part_memory(tree, modes)
        if "throughput" in parts:
            tmodes = [m for m in args.throughput_modes.split(",") if m in modes]
            res["throughput"] = part_throughput(tree, tmodes, args.rounds)
    finally:
        shutil.rmtree(tree, ignore_errors=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
    report(res, modes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
