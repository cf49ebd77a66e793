"""Redis 7.0.15's own test suite with pyrepl standing in for ``src/redis-server`` (issue 38).

Theory of operation: Redis's tcl harness (``./runtest``) starts ``src/redis-server <config>
[--directive value...]`` from the root of a Redis source tree, waits for `` PID: <pid>`` in its
stdout (the banner ``always-show-logo yes`` prints) and talks to it. This script makes one such
tree per server kind under ``.cache/redis-suite/<kind>/`` from the 7.0.15 sources that
``scripts/redis-src.sh`` unpacks (its ``tests/`` and ``runtest`` copied afresh each run),
whose ``src/`` holds:

* ``redis-server``: for ``redis``, the real redis-server 7.0.15 (``/usr/bin``: the reference
  run); for ``pyrepl``, a wrapper that execs ``pyrepl master --config <config> <args>``: the
  arguments go through unchanged, so a directive pyrepl cannot take fails the start as it
  would for a user (nothing is dropped or mapped to hide a difference);
* ``redis-cli``, ``redis-benchmark``, ``redis-check-aof``, ``redis-check-rdb``: Redis's own
  tools (``/usr/bin``), for both kinds.

Each test file runs alone (``./runtest --single <file> --durable``) under a time limit, the
kinds side by side on separate port ranges; the harness's output is kept per file and parsed
for ``[ok]``, ``[err]``, ``[exception]``, ``[skip]`` / ``[ignore]`` and a killed run
(``timeout``). The table (per file: each kind's counts; then every test that passes on Redis
and not on pyrepl) is written to ``--out`` (the repository keeps the latest in
``tests/redis-suite/RESULTS.md``), and the raw results as JSON beside each tree.

The cluster harness (``./runtest-cluster``, tests/cluster/tests/NN-*.tcl) runs the same way,
one file at a time (``--single <NN-name>.tcl``, named here ``cluster/<NN-name>``), against the
20 instances of src/redis-server that tests/instances.tcl starts per run; its lines
(``HH:MM:SS> <test>: OK`` / ``FAILED: ...``) are parsed into the same counts, and its files
get a table of their own.

Usage: ``.venv/bin/python scripts/redis_suite.py [--kinds pyrepl,redis] [--files unit/type/incr,
cluster/00-base,...] [--limit 900] [--cluster-limit 600] [--out FILE]``; the default files are
tests/unit (with unit/type and unit/cluster), the non-replication integration files and the
cluster harness's files (:func:`default_files`).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import fcntl
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, ".cache", "redis-src", "redis-7.0.15")
WORK = os.path.join(ROOT, ".cache", "redis-suite")
TOOLS = ("redis-cli", "redis-benchmark", "redis-check-aof", "redis-check-rdb")
KINDS = ("pyrepl", "redis")
# each kind its own port range, so that the two runs can go side by side (--port-offset moves
# both, for a second run beside the first)
BASEPORT = {"pyrepl": 21111, "redis": 31111}
_LOCKS: list = []

# tests/unit (every file, unit/type included) and the non-replication integration files
INTEGRATION = ("integration/aof", "integration/aof-multi-part", "integration/rdb",
               "integration/corrupt-dump", "integration/corrupt-dump-fuzzer",
               "integration/convert-zipmap-hash-on-load",
               "integration/convert-ziplist-hash-on-load",
               "integration/convert-ziplist-zset-on-load", "integration/redis-cli",
               "integration/redis-benchmark", "integration/logging", "integration/shutdown")


def unit_files() -> list[str]:
    out = []
    base = os.path.join(SOURCE, "tests")
    for sub in ("unit", os.path.join("unit", "type"), os.path.join("unit", "cluster")):
        for name in sorted(os.listdir(os.path.join(base, sub))):
            if name.endswith(".tcl"):
                out.append(os.path.join(sub, name[:-4]))
    return out


# The cluster harness (``./runtest-cluster``, tests/cluster/run.tcl): each of its files is
# named here ``cluster/<NN-name>`` (tests/cluster/tests/<NN-name>.tcl), and runs alone
# (``--single <NN-name>.tcl``) against the harness's 20 instances of src/redis-server, all
# started afresh per file. The harness has no port option: each kind's copy of
# tests/instances.tcl gets its own ``::redis_base_port`` (bus ports: +10000), clear of the
# ranges ./runtest uses above.
CLUSTER_PREFIX = "cluster/"
CLUSTER_BASEPORT = {"pyrepl": 50000, "redis": 52000}


def cluster_files() -> list[str]:
    base = os.path.join(SOURCE, "tests", "cluster", "tests")
    return [CLUSTER_PREFIX + n[:-4] for n in sorted(os.listdir(base)) if n.endswith(".tcl")]


def default_files() -> list[str]:
    return unit_files() + list(INTEGRATION) + cluster_files()


WRAPPER = """#!/bin/sh
# pyrepl standing in for redis-server under Redis's test harness (scripts/redis_suite.py):
# redis-server's arguments, a config file then --directive value..., go to pyrepl unchanged,
# and the command is named as this stand-in was (its process title's {{title}}, as Redis's).
run='import sys; from pyrepl.cli.main import main; del sys.argv[0]; sys.exit(main())'
export PYTHONPATH={src}
if [ $# -ge 1 ] && [ "${{1#--}}" = "$1" ]; then
    conf="$1"
    shift
    exec {python} -c "$run" "$0" master --config "$conf" "$@"
fi
exec {python} -c "$run" "$0" master "$@"
"""


def make_tree(kind: str, work: str, src: str = ROOT) -> str:
    """``<work>/<kind>``: runtest, a fresh copy of the tests, src/ as above. The tree is
    locked for the run (a second run on the same ``--work`` stops at once rather than pull
    the tree from under the first)."""
    tree = os.path.join(work, kind)
    os.makedirs(work, exist_ok=True)
    lock = open(os.path.join(work, kind + ".lock"), "w")  # noqa: SIM115 - held for the run
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"{tree} is in use by another run (use --work elsewhere)") from None
    _LOCKS.append(lock)
    # everything afresh but the logs: a run of some files leaves the others' (--from-logs)
    if os.path.isdir(tree):
        for entry in os.listdir(tree):
            if entry != "logs":
                path = os.path.join(tree, entry)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
    os.makedirs(os.path.join(tree, "src"))
    shutil.copytree(os.path.join(SOURCE, "tests"), os.path.join(tree, "tests"),
                    ignore=shutil.ignore_patterns("tmp"))
    os.makedirs(os.path.join(tree, "tests", "tmp"))
    os.makedirs(os.path.join(tree, "tests", "cluster", "tmp"))
    shutil.copy2(os.path.join(SOURCE, "runtest"), tree)
    shutil.copy2(os.path.join(SOURCE, "runtest-cluster"), tree)
    set_cluster_baseport(os.path.join(tree, "tests", "instances.tcl"), CLUSTER_BASEPORT[kind])
    # the harness reads a few files beside src/ (e.g. src/valgrind.sup only under --valgrind)
    for tool in TOOLS:
        found = shutil.which(tool)
        if found is None:
            raise SystemExit(f"{tool} is not installed (apt-get install redis-tools)")
        os.symlink(found, os.path.join(tree, "src", tool))
    server = os.path.join(tree, "src", "redis-server")
    if kind == "redis":
        found = shutil.which("redis-server")
        if found is None:
            raise SystemExit("redis-server is not installed (apt-get install redis-server)")
        os.symlink(found, server)
    else:
        python = os.path.join(ROOT, ".venv", "bin", "python")
        if not os.path.exists(os.path.join(ROOT, ".venv", "bin", "pyrepl")):
            raise SystemExit(f"{ROOT}/.venv/bin/pyrepl is missing: make venv first")
        with open(server, "w") as f:
            f.write(WRAPPER.format(python=python, src=src))
        os.chmod(server, os.stat(server).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return tree


def set_cluster_baseport(path: str, port: int) -> None:
    """The one edit to Redis's harness: the cluster instances' first port (see above)."""
    with open(path) as f:
        text = f.read()
    old = "set ::redis_base_port 30000"
    if old not in text:
        raise SystemExit(f"{path}: no '{old}' to move")
    with open(path, "w") as f:
        f.write(text.replace(old, f"set ::redis_base_port {port}"))


@dataclass
class FileResult:
    file: str
    kind: str
    ok: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    exception: list[str] = field(default_factory=list)
    skipped: int = 0
    timeout: bool = False
    seconds: float = 0.0
    exit_code: int = 0


_OK = re.compile(r"^\[ok\]: (.*?)(?: \(\d+ ms\))?$")
_ERR = re.compile(r"^\[err\]: (.*?)(?: in tests/.*)?$")
_EXC = re.compile(r"^\[exception\]: (.*)$")
_SKIP = re.compile(r"^\[(?:skip|ignore)\]: ")
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def parse(out: str, res: FileResult) -> None:
    for line in _COLOUR.sub("", out).splitlines():
        line = line.rstrip()
        if m := _OK.match(line):
            res.ok.append(m.group(1))
        elif m := _ERR.match(line):
            res.err.append(m.group(1))
        elif m := _EXC.match(line):
            res.exception.append(m.group(1))
        elif _SKIP.match(line):
            res.skipped += 1


# the cluster harness: "HH:MM:SS> <test>: " then OK, or "FAILED: ..." (an assertion: the rest
# of the file is skipped), or an error caught by run_tests ("FAILED: caught an error in the
# test ..."); progress dots may come between
_CTEST = re.compile(r"^\d\d:\d\d:\d\d> (.*?): (.*)$")
_CDONE = re.compile(r"^(GOOD! No errors\.|WARNING \d+ test\(s\) failed\.)")


def parse_cluster(out: str, res: FileResult) -> None:
    pending: str | None = None
    for line in _COLOUR.sub("", out).splitlines():
        line = line.rstrip()
        if m := _CTEST.match(line):
            if pending is not None:        # a test whose end never came
                res.err.append(pending)
            pending, rest = m.group(1), m.group(2)
        else:
            rest = line
        if pending is None:
            continue
        if rest.startswith("FAILED: caught an error"):
            res.exception.append(pending)
            pending = None
        elif "FAILED:" in rest:
            res.err.append(pending)
            pending = None
        elif rest.endswith("OK"):
            res.ok.append(pending)
            pending = None
    if pending is not None:
        res.err.append(pending)


def is_cluster(name: str) -> bool:
    return name.startswith(CLUSTER_PREFIX)


def finished(name: str, log_text: str) -> bool:
    text = _COLOUR.sub("", log_text)
    if is_cluster(name):
        # (its cleanup stops the 20 instances one by one, up to 10 s each: a run cut short
        # there had run all its tests)
        return any(_CDONE.match(line) or line.startswith("Cleaning up...")
                   for line in text.splitlines())
    return "done]: " + name in text


def command(kind: str, name: str, limit: float, offset: int) -> list[str]:
    if is_cluster(name):
        # --dont-clean: the instances' logs stay in tests/cluster/tmp/redis_<n>/ (until the
        # next file's run makes them afresh)
        return ["./runtest-cluster", "--single", name[len(CLUSTER_PREFIX):] + ".tcl",
                "--dont-clean"]
    return ["./runtest", "--single", name, "--durable", "--clients", "1", "--timeout",
            str(int(limit)), "--baseport", str(BASEPORT[kind] + offset), "--portcount", "8000"]


def run_file(tree: str, kind: str, name: str, limit: float, offset: int = 0) -> FileResult:
    res = FileResult(name, kind)
    logdir = os.path.join(tree, "logs")
    os.makedirs(logdir, exist_ok=True)
    log = os.path.join(logdir, name.replace("/", "_") + ".log")
    cmd = command(kind, name, limit, offset)
    start = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=tree, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            res.exit_code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            res.timeout = True
            os.killpg(proc.pid, signal.SIGKILL)   # the harness, its clients and servers
            proc.wait()
            res.exit_code = -9
    res.seconds = round(time.monotonic() - start, 1)
    with open(log, errors="replace") as f:
        text = f.read()
    (parse_cluster if is_cluster(name) else parse)(text, res)
    if res.timeout and is_cluster(name) and finished(name, text):
        res.timeout = False
    with open(log[:-4] + ".rev", "w") as f:    # (what --from-logs says the log is of)
        f.write(git_rev(SRC[0]) + "\n")
    return res


# the pyrepl tree the stand-in runs (--pyrepl-src): its commit is the one a log is of
SRC = [ROOT]


def git_rev(tree: str = ROOT) -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True,
                          text=True).stdout.strip()


def log_rev(work: str, kind: str, name: str) -> str:
    """The commit a file's log was made at ("?" for a log from before the runner kept it)."""
    path = os.path.join(work, kind, "logs", name.replace("/", "_") + ".rev")
    try:
        with open(path) as f:
            return f.read().strip() or "?"
    except FileNotFoundError:
        return "?"


def table(results: dict[str, dict[str, FileResult]], kinds: list[str]) -> str:
    lines = ["| file | " + " | ".join(f"{k} ok | {k} failed" for k in kinds) + " |",
             "|---|" + "---:|---:|" * len(kinds)]
    for name, by_kind in results.items():
        cells = []
        for k in kinds:
            r = by_kind.get(k)
            if r is None:
                cells += ["", ""]
                continue
            bad = len(r.err) + len(r.exception)
            mark = " (timeout)" if r.timeout else (" (exception)" if r.exception else "")
            cells += [str(len(r.ok)), f"{bad}{mark}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    totals = []
    for k in kinds:
        rs = [by[k] for by in results.values() if k in by]
        totals += [str(sum(len(r.ok) for r in rs)),
                   str(sum(len(r.err) + len(r.exception) for r in rs))]
    lines.append("| **all** | " + " | ".join(totals) + " |")
    return "\n".join(lines)


# files whose tests are drawn at random per run (03-failover-loop kills a random instance 20
# times: its names, and how many follow a kill, differ from run to run): a run of one that
# neither failed nor hit its limit counts as passing what Redis passed, up to its count
RANDOMIZED = frozenset({CLUSTER_PREFIX + "03-failover-loop"})


def clean(r: FileResult) -> bool:
    return not (r.err or r.exception or r.timeout)


def summary(results: dict[str, dict[str, FileResult]]) -> str:
    """Issue 38's measures over the files both kinds ran: the share of Redis's passes pyrepl
    passes, and the files under 90 % of theirs."""
    both = [(n, by["pyrepl"], by["redis"]) for n, by in results.items()
            if "pyrepl" in by and "redis" in by]
    if not both:
        return ""
    def common(p: FileResult, r: FileResult) -> int:
        # A file may run one test name several times (scripting runs its cases as EVAL, as
        # FCALL and as SCRIPT): count names as a multiset, not a set.
        if p.file in RANDOMIZED and clean(p):
            return min(len(p.ok), len(r.ok))
        return sum((Counter(p.ok) & Counter(r.ok)).values())

    ref = sum(len(r.ok) for _, _, r in both)
    got = sum(common(p, r) for _, p, r in both)
    low = [f"`{n}` ({common(p, r)}/{len(r.ok)})" for n, p, r in both
           if r.ok and common(p, r) < 0.9 * len(r.ok)]
    timeouts = [f"`{n}`" for n, p, _ in both if p.timeout]
    return (f"Of the {ref} tests Redis passes in these files, pyrepl passes {got} "
            f"({100 * got / max(ref, 1):.1f} %). Files under 90 % of Redis's passes: "
            f"{', '.join(low) or 'none'}. Files that hit the time limit: "
            f"{', '.join(timeouts) or 'none'}.\n\n")


def differences(results: dict[str, dict[str, FileResult]]) -> str:
    """Every test Redis passes that pyrepl does not (failed, skipped or not reached), per file."""
    out = []
    for name, by_kind in results.items():
        ref, got = by_kind.get("redis"), by_kind.get("pyrepl")
        if ref is None or got is None:
            continue
        if name in RANDOMIZED:     # (its names differ per run: what pyrepl failed, if any)
            if not clean(got):
                why = " (the run hit its time limit)" if got.timeout else ""
                out.append(f"- `{name}`{why}: " + "; ".join(
                    f"`{t}`" for t in got.err + got.exception) + " (failed)")
            continue
        left = Counter(got.ok)
        missing = []
        for t in ref.ok:   # a multiset difference, in Redis's order
            if left[t]:
                left[t] -= 1
            else:
                missing.append(t)
        if missing or got.timeout:
            why = " (the run hit its time limit)" if got.timeout else ""
            out.append(f"- `{name}`{why}: " + "; ".join(f"`{t}`" for t in missing[:40]) +
                       (f"; and {len(missing) - 40} more" if len(missing) > 40 else ""))
    return "\n".join(out) or "none"


def from_log(work: str, kind: str, name: str) -> FileResult | None:
    """A file's result read back from its log in ``work`` (None without a log)."""
    log = os.path.join(work, kind, "logs", name.replace("/", "_") + ".log")
    if not os.path.exists(log):
        return None
    res = FileResult(name, kind)
    with open(log, errors="replace") as f:
        text = f.read()
    (parse_cluster if is_cluster(name) else parse)(text, res)
    res.timeout = not finished(name, text)
    return res


def write_from_logs(args: argparse.Namespace) -> int:
    kinds = [k for k in args.kinds.split(",") if k]
    files = [f for f in args.files.split(",") if f] or default_files()
    results: dict[str, dict[str, FileResult]] = {}
    for name in files:
        for k in kinds:
            r = from_log(args.work, k, name)
            if r is not None:
                results.setdefault(name, {})[k] = r
    revs: dict[str, list[str]] = {}
    for name in results:
        if "pyrepl" in results[name]:
            revs.setdefault(log_rev(args.work, "pyrepl", name), []).append(name)
    if len(revs) > 1:
        parts = [f"{rev} ({len(names)} files)" for rev, names in
                 sorted(revs.items(), key=lambda kv: -len(kv[1]))]
        write_table(args, results, kinds, "from the per-file logs of the latest runs",
                    ", ".join(parts))
    else:
        write_table(args, results, kinds, "from the per-file logs of the last run",
                    next(iter(revs), git_rev()))
    return 0


def write_table(args: argparse.Namespace, results: dict[str, dict[str, FileResult]],
                kinds: list[str], when: str, rev: str | None = None) -> None:
    """The table; ``rev``: the commit(s) pyrepl's logs were made at (HEAD by default)."""
    version = subprocess.run([os.path.join(ROOT, ".venv", "bin", "pyrepl"), "--version"],
                             capture_output=True, text=True).stdout.strip()
    rev = rev or git_rev(SRC[0])
    suite = {n: by for n, by in results.items() if not is_cluster(n)}
    harness = {n: by for n, by in results.items() if is_cluster(n)}
    text = (f"# Redis 7.0.15's test suite against pyrepl\n\n"
            f"`.venv/bin/python scripts/redis_suite.py` ({when}, pyrepl at {rev}: {version}; "
            f"the reference: redis-server 7.0.15, the same harness and files). Each file runs "
            f"alone (`./runtest --single <file> --durable`, at most {args.limit:.0f} s); "
            f"\"failed\" counts `[err]` and `[exception]` lines; a file whose run hit the time "
            f"limit says so, and counts only what ran before.\n\n")
    if suite:
        text += f"{summary(suite)}{table(suite, kinds)}\n\n"
    if harness:
        text += (f"## The cluster harness (`./runtest-cluster`)\n\n"
                 f"Each file of tests/cluster/tests runs alone (`./runtest-cluster --single "
                 f"<NN-name>.tcl`, at most {args.cluster_limit:.0f} s) against the harness's 20 "
                 f"instances (`cluster-enabled yes`, `appendonly yes`), started afresh per file. "
                 f"A test fails with a `FAILED` line; after a failed assertion the harness skips "
                 f"the rest of the file, so what follows it is not counted.\n\n"
                 f"{summary(harness)}{table(harness, kinds)}\n\n")
    text += f"## What Redis passes and pyrepl does not\n\n{differences(results)}\n"
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    print(f"written: {args.out}")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--kinds", default="pyrepl,redis")
    ap.add_argument("--files", default="", help="comma separated; default: tests/unit, "
                    "unit/type, unit/cluster, the non-replication integration files and the "
                    "cluster harness's files (cluster/00-base, ...)")
    ap.add_argument("--limit", type=float, default=900, help="seconds a file may run")
    ap.add_argument("--cluster-limit", type=float, default=600,
                    help="seconds a file of the cluster harness (cluster/NN-name) may run")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (one per kind at most)")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "redis-suite", "RESULTS.md"))
    ap.add_argument("--work", default=WORK, help="where the trees are made (default %(default)s)")
    ap.add_argument("--pyrepl-src", default=ROOT,
                    help="the pyrepl source tree the stand-in imports (PYTHONPATH; default: "
                         "this one); e.g. a `git worktree` of a commit, its extensions built "
                         "in place (setup.py build_ext --inplace), to test a commit while the "
                         "tree is being edited")
    ap.add_argument("--port-offset", type=int, default=0,
                    help="added to the base ports (a second run beside another: e.g. 2000)")
    ap.add_argument("--from-logs", action="store_true",
                    help="run nothing: the table from the per-file logs the last run left in "
                         "--work (a file whose log has no end counts as hitting the limit)")
    args = ap.parse_args()
    if args.from_logs:
        return write_from_logs(args)
    if not os.path.isdir(SOURCE):
        subprocess.run(["bash", os.path.join(ROOT, "scripts", "redis-src.sh")], check=True,
                       env=dict(os.environ, REDIS8_BUILD="no"))
    if shutil.which("tclsh8.6") is None and shutil.which("tclsh") is None:
        raise SystemExit("tclsh is not installed (apt-get install tcl)")
    kinds = [k for k in args.kinds.split(",") if k]
    if any(k not in KINDS for k in kinds):
        raise SystemExit(f"--kinds: {', '.join(KINDS)}")
    files = [f for f in args.files.split(",") if f] or default_files()
    SRC[0] = os.path.abspath(args.pyrepl_src)
    trees = {k: make_tree(k, args.work, SRC[0]) for k in kinds}
    results: dict[str, dict[str, FileResult]] = {f: {} for f in files}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    # one queue per kind: a kind's files run one after the other (its port range)
    def run_kind(kind: str) -> None:
        for name in files:
            limit = args.cluster_limit if is_cluster(name) else args.limit
            r = run_file(trees[kind], kind, name, limit, args.port_offset)
            results[name][kind] = r
            print(f"{kind:6} {name:45} ok {len(r.ok):4}  failed {len(r.err):3}  "
                  f"exceptions {len(r.exception)}  {'TIMEOUT ' if r.timeout else ''}"
                  f"{r.seconds:.0f} s", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        for fut in [ex.submit(run_kind, k) for k in kinds]:
            fut.result()
    for k in kinds:
        with open(os.path.join(trees[k], "results.json"), "w") as f:
            json.dump([asdict(results[n][k]) for n in files], f, indent=1)
    write_table(args, results, kinds, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
