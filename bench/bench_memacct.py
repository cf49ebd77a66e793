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
throughput  redis-benchmark -t set,get -n 200000 -P 16 -c 50 against each mode's server,
            interleaved, --rounds rounds, medians, as a ratio to pymalloc.

The whole run takes ~13 minutes on the project's machine (instr ~11 of them).
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
        assert hooked == ("hook" in mode), (mode, out)   # (pymalloc+hook: its self-test passed)
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


def part_calls() -> dict[str, list[float]]:
    """Allocator calls per command (pymalloc+hook, built with -DMEMACCT_CALLS: counters the
    measured builds do not have), bench_dispatch_instr's cases run in-process (no valgrind)."""
    tree = tempfile.mkdtemp(prefix="memacct-calls-")
    try:
        build(tree, "-DMEMACCT_CALLS")
        out = subprocess.run([sys.executable, "-c", CALLS_CODE % (HERE, INSTR_RUNS)],
                             env=mode_env(tree, "pymalloc+hook", PYTHONHASHSEED="0"), cwd=tree,
                             capture_output=True, text=True, timeout=600, check=True).stdout
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    res = {}
    for line in out.splitlines():
        case, p, *nums = line.split()
        res[f"{case} -P{p}"] = [float(x) for x in nums[:3]]
    return res


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
            if "hook" in mode:
                a = _acct(aport)
                row.update(used=a["used"], heap=a["heap"], heap_ns=a["heap_ns"])
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
    ap.add_argument("--parts", default="calls,instr,memory,throughput")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--throughput-modes", default="pymalloc,pymalloc+hook,malloc+hook,jemalloc+hook")
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
