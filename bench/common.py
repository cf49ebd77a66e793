"""Shared helpers for the side-by-side benchmarks: start pyrepl and real redis-server on free
loopback ports, run redis-benchmark, take medians, write results."""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tests.support.procs import (  # noqa: E402,F401
    ServerProcess,
    free_port,
    pyrepl_argv,
    start_pyrepl,
    start_redis,
)


def start_pyrepl_from(tree: str) -> ServerProcess:
    """A pyrepl master running another checkout's code (``tree``: a ``git worktree`` of an
    earlier commit, its C files built in place), for a before/after in the same run."""
    tmpdir = tempfile.mkdtemp(prefix="pyrepl-base-")
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    return ServerProcess(pyrepl_argv("master", port, tmpdir), port, tmpdir,
                         f"pyrepl-base-{port}", env=env).start()


# A pipelined run (-P16) goes ~6-10x as fast as an unpipelined one: it gets this many times the
# requests, so that both last about as long. At -P16 300,000 requests take ~0.3 s, a good part
# of it 50 connections starting and the server's first calls; pyrepl's ratios to Redis and the
# floor then came out 10-30 % lower than in runs of a few seconds (steady state), run to run.
PIPELINED_SCALE = 8


def requests_for(n: int, pipeline: int) -> int:
    """The request count of a run of ``n`` requests' length at ``pipeline``."""
    return n * PIPELINED_SCALE if pipeline > 1 else n


def redis_benchmark(port: int, tests: str, n: int, clients: int, pipeline: int,
                    extra: list[str] | None = None, timeout: float = 600) -> dict[str, float]:
    """Run redis-benchmark --csv; returns {test name: requests per second}."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", tests, "-n", str(n),
            "-c", str(clients), "-P", str(pipeline), "--csv", *(extra or [])]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True).stdout
    res: dict[str, float] = {}
    for line in out.splitlines():
        parts = [p.strip('"') for p in line.split(",")]
        if len(parts) >= 2 and parts[0] != "test":
            try:
                res[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return res


def redis_benchmark_command(port: int, command: list[str], n: int, clients: int,
                            pipeline: int, keyspace: int = 100000,
                            timeout: float = 600) -> float:
    """redis-benchmark running one arbitrary command (``__rand_int__`` replaced from
    ``-r keyspace``); returns requests per second."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(n),
            "-c", str(clients), "-P", str(pipeline), "-r", str(keyspace), "--csv", *command]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True).stdout
    for line in out.splitlines():
        parts = [p.strip('"') for p in line.split(",")]
        if len(parts) >= 2 and parts[0] != "test":
            try:
                return float(parts[1])
            except ValueError:
                pass
    raise RuntimeError(f"no figure in redis-benchmark's output: {out!r}")


def start_floor(replica: int | None = None) -> ServerProcess:
    """The bare uvloop + hiredis server (floor_server.py) on a free port: the Python floor;
    with ``replica`` (another floor's port), the master of a floor pair."""
    port = free_port()
    d = tmpdir("floor-")
    def ready() -> bool:    # (the floor parses RESP arrays only: no inline PING)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    more = [] if replica is None else ["--replica", str(replica)]
    return ServerProcess([sys.executable, os.path.join(HERE, "floor_server.py"), str(port),
                          *more], port, d, f"floor-{port}", ready=ready).start()


#: The help of the options several benchmarks take (the others show their default only).
OPTION_HELP = {
    "rounds": "rounds run; the figures are their medians",
    "json": "write the results here too",
    "base": "another checkout's pyrepl beside (before/after)",
}


def options(doc: str | None, **defaults: int | str | None) -> argparse.Namespace:
    """A benchmark's command line (its description: ``doc``'s first line): one option a
    keyword, ``burst_mb=5`` being ``--burst-mb``, read as the type of its default (a string
    where the default is None)."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0] or None)
    for name, default in defaults.items():
        what = OPTION_HELP.get(name)
        if default is not None:
            what = f"{what} (default: %(default)s)" if what else "default: %(default)s"
        ap.add_argument("--" + name.replace("_", "-"), default=default, help=what,
                        type=str if default is None else type(default))
    return ap.parse_args()


def write_json(path: str | None, obj: object) -> None:
    """A benchmark's figures as JSON at ``path`` (its ``--json`` option; None: nothing)."""
    if path:
        import json

        with open(path, "w") as f:
            json.dump(obj, f, indent=2)


def run_kinds(kinds: list[str], run: Callable[[str, argparse.Namespace], dict[str, object]],
              args: argparse.Namespace, title: str) -> int:
    """A scenario's kinds one after the other (``run(kind, args)``: its figures), each printed
    as it ends, then a markdown table (a row per figure, a column per kind) headed ``title``,
    and the JSON (``args.json``)."""
    results = {}
    for kind in kinds:
        results[kind] = run(kind, args)
        print(kind, results[kind], flush=True)
    print(f"\n| {title} | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for k in next(iter(results.values())):
        print(f"| {k} | " + " | ".join(str(results[kind][k]) for kind in results) + " |")
    write_json(args.json, {"args": vars(args), "results": results})
    return 0


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def tmpdir(prefix: str) -> str:
    return tempfile.mkdtemp(prefix=prefix)


# -- helpers for bench_replication.py (appended) ----------------------------------------------

def percentile(xs: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of xs; nan when empty."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def parse_info(text: bytes | str) -> dict[str, str]:
    """INFO reply text -> {field: raw string value} (pyrepl collect's parser, on bytes too)."""
    from pyrepl.collect.info import parse_info as parse_text

    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return parse_text(text)


def benchmark_argv(port: int, tests: str, n: int, clients: int, pipeline: int,
                   extra: list[str] | None = None) -> list[str]:
    """The redis-benchmark command line (quiet, for a background load started with Popen)."""
    return ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", tests, "-n", str(n),
            "-c", str(clients), "-P", str(pipeline), "-q", *(extra or [])]


def stop_popen(p: subprocess.Popen, timeout: float = 10.0) -> int | None:
    """Stop one process we started (SIGINT, then SIGKILL after ``timeout``); its return code."""
    if p.poll() is None:
        p.send_signal(2)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    return p.returncode


def compare_commands(servers: dict[str, object], commands: dict[str, list[str]], rounds: int,
                     requests: int, scale: dict[str, float] | None = None,
                     pipelines: tuple[int, ...] = (1, 16)) -> dict[tuple[str, int], dict]:
    """redis-benchmark each command (``-c 50``) against every server, alternating which goes
    first each round; {(command, pipeline): {server: [rps per round]}}."""
    results: dict[tuple[str, int], dict[str, list[float]]] = {}
    order = list(servers.items())
    for rnd in range(rounds):
        for pipeline in pipelines:
            for name, command in commands.items():
                n = max(1000, int(requests * (scale or {}).get(name, 1.0)))
                for who, srv in (order if rnd % 2 == 0 else order[::-1]):
                    rps = redis_benchmark_command(srv.port, command, n, 50,  # type: ignore
                                                  pipeline)
                    results.setdefault((name, pipeline), {}).setdefault(who, []).append(rps)
            print(f"round {rnd + 1} -P{pipeline} done", flush=True)
    return results


def print_ratios(results: dict[tuple[str, int], dict], a: str = "pyrepl",
                 b: str = "redis") -> None:
    """Medians per command and pipeline, and the ratio a / b."""
    print(f"\n{'pipeline':8} {'command':9} {a + ' rps':>12} {b + ' rps':>12} {'ratio':>6}")
    for (name, pipeline), by in results.items():
        x, y = median(by[a]), median(by[b])
        print(f"P{pipeline:<7} {name:9} {x:12,.0f} {y:12,.0f} {x / y:6.2f}")


def side_by_side_main(commands: dict[str, list[str]], setup=None,
                      scale: dict[str, float] | None = None) -> int:
    """The main of a command-throughput bench: ``--rounds`` / ``--requests``, pyrepl and
    redis-server started side by side, ``setup(client)`` run on both (the same data), every
    command benchmarked (compare_commands), the servers stopped, the ratios printed."""
    import argparse

    import redis

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100000)
    args = ap.parse_args()
    py = start_pyrepl()
    rd = start_redis()
    try:
        if setup is not None:
            for srv in (py, rd):
                with redis.Redis(port=srv.port) as r:
                    setup(r)
        results = compare_commands({"pyrepl": py, "redis": rd}, commands, args.rounds,
                                   args.requests, scale)
    finally:
        py.stop()
        rd.stop()
    print_ratios(results)
    return 0


def callgrind_instructions(argv: list[str], env: dict[str, str] | None = None,
                           cwd: str | None = None, timeout: float = 1200) -> int:
    """Instructions a program runs under ``valgrind --tool=callgrind`` (what the instruction
    benchmarks difference between N and 3N iterations)."""
    import re

    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=True)
    match = re.search(r"Collected : (\d+)", out.stderr)
    if match is None:
        raise RuntimeError(out.stderr[-2000:])
    return int(match.group(1))


def xadd_entries(r: object, key: str, count: int, batch: int) -> None:
    """``count`` stream entries ``1-0``.. of three fields (user, action, value) added to
    ``key``, pipelined ``batch`` at a time (the stream benchmarks' data)."""
    p = r.pipeline(transaction=False)  # type: ignore[attr-defined]
    for i in range(1, count + 1):
        p.execute_command("XADD", key, f"{i}-0", "user", f"u{i % 977}", "action",
                          "click" if i % 3 else "view", "value", str(i * 7))
        if i % batch == 0:
            p.execute()
    p.execute()
