"""The AOF side by side: pyrepl and Debian's redis-server with the same AOF settings, same run.

    .venv/bin/python bench/bench_aof.py [--rounds 3] [--requests 200000] [--keys 1000000]
                                        [--only throughput,rewrite,load] [--json F]

* throughput: ``redis-benchmark -t set -c 50 -r 100000`` at -P1 and -P16 (8x the requests)
  against both servers with AOF off, ``appendfsync everysec`` and ``appendfsync always``
  (``appendonly yes``, the default RDB preamble), the order rotated each round; medians.
  Goals (issue 35): with everysec, pyrepl / Redis >= 0.9x the same ratio without AOF; with
  always, pyrepl >= 0.8x Redis with always.
* rewrite: ``DEBUG POPULATE <keys>`` on a server with AOF on, then BGREWRITEAOF, timed from
  the command to ``aof_rewrite_in_progress:0`` (the child's write of the base and the parent's
  switch of the manifest); goal <= 1.5x Redis.
* load: one appendonlydir holding a base of ``<keys>`` SET commands (``aof-use-rdb-preamble
  no``'s form) and an incr file, copied to both servers' dirs; each started with
  ``appendonly yes`` and timed from launch to answering DBSIZE with every key (Redis answers
  -LOADING meanwhile, pyrepl opens its listener after the load), and by the line "DB loaded from append only file: X seconds" in
  each log; goal <= 2x Redis.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time

from common import (
    median,
    options,
    redis_benchmark,
    requests_for,
    start_pyrepl,
    start_redis,
    write_json,
)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tests.support.procs import (  # noqa: E402
    ServerProcess,
    free_port,
    pyrepl_argv,
    redis_server_path,
)
from tests.support.waits import wait_for  # noqa: E402

MODES = {"off": [], "everysec": ["--appendonly", "yes", "--appendfsync", "everysec"],
         "always": ["--appendonly", "yes", "--appendfsync", "always"]}


def throughput(rounds: int, requests: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, list[float]]] = {}
    for rnd in range(rounds):
        for mode, flags in MODES.items():
            py = start_pyrepl(*flags)
            rd = start_redis(*flags)
            try:
                for pipeline in (1, 16):
                    order = [("pyrepl", py), ("redis", rd)]
                    if rnd % 2:
                        order.reverse()
                    for name, srv in order:
                        rps = redis_benchmark(srv.port, "set", requests_for(requests, pipeline),
                                              50, pipeline, ["-r", "100000"])["SET"]
                        results.setdefault(f"{mode} P{pipeline}", {}).setdefault(
                            name, []).append(rps)
                        print(f"round {rnd + 1} {mode:8} -P{pipeline:<2} {name:6} "
                              f"SET {rps:12,.0f}/s", flush=True)
            finally:
                py.stop()
                rd.stop()
    out: dict[str, dict[str, float]] = {}
    for key, by in results.items():
        a, b = median(by["pyrepl"]), median(by["redis"])
        out[key] = {"pyrepl": a, "redis": b, "ratio": a / b}
    return out


def _info(port: int) -> dict[str, str]:
    import redis

    with redis.Redis(port=port, socket_timeout=600) as c:
        return {k: str(v) for k, v in c.info("persistence").items()}


def rewrite(rounds: int, keys: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"pyrepl": [], "redis": []}
    import redis

    for rnd in range(rounds):
        servers = [("pyrepl", start_pyrepl("--appendonly", "yes")),
                   ("redis", start_redis("--appendonly", "yes", "--enable-debug-command", "yes"))]
        try:
            for _name, srv in servers:
                with redis.Redis(port=srv.port, socket_timeout=600) as c:
                    c.execute_command("DEBUG", "POPULATE", keys, "key", 100)
            if rnd % 2:
                servers.reverse()
            for name, srv in servers:
                with redis.Redis(port=srv.port, socket_timeout=600) as c:
                    done = int(_info(srv.port)["aof_rewrites"])
                    t0 = time.perf_counter()
                    c.execute_command("BGREWRITEAOF")
                    wait_for(lambda srv=srv, done=done: (
                        (i := _info(srv.port))["aof_rewrite_in_progress"] == "0"
                        and int(i["aof_rewrites"]) > done), timeout=600, interval=0.005,
                        what=f"{name}'s rewrite")
                    took = time.perf_counter() - t0
                    assert _info(srv.port)["aof_last_bgrewrite_status"] == "ok"
                times[name].append(took)
                print(f"round {rnd + 1} rewrite of {keys:,} keys {name:6} {took:7.3f} s",
                      flush=True)
        finally:
            for _name, srv in servers:
                srv.stop()
    a, b = median(times["pyrepl"]), median(times["redis"])
    return {"pyrepl_s": a, "redis_s": b, "ratio": a / b}


def _make_aof_dir(path: str, keys: int) -> None:
    """An appendonlydir of ``keys`` SETs (value:<j> padded to 100 bytes) in its base, as
    ``aof-use-rdb-preamble no`` writes it, and an empty incr file."""
    d = os.path.join(path, "appendonlydir")
    os.makedirs(d)
    with open(os.path.join(d, "appendonly.aof.1.base.aof"), "wb") as f:
        f.write(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n")
        chunk = []
        for j in range(keys):
            k = b"key:%d" % j
            v = (b"value:%d" % j).ljust(100, b"\0")
            chunk.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(k), k, v))
            if len(chunk) == 10000:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))
    open(os.path.join(d, "appendonly.aof.1.incr.aof"), "wb").close()
    with open(os.path.join(d, "appendonly.aof.manifest"), "wb") as f:
        f.write(b"file appendonly.aof.1.base.aof seq 1 type b\n"
                b"file appendonly.aof.1.incr.aof seq 1 type i\n")


def _dbsize(port: int) -> int:
    """DBSIZE, or -1 while the server is not answering or still loading (-LOADING)."""
    import redis

    try:
        with redis.Redis(port=port, socket_timeout=5) as c:
            return int(c.dbsize())
    except redis.RedisError:
        return -1


def _loaded_seconds(log: str) -> float:
    m = re.search(r"DB loaded from append only file: ([0-9.]+) seconds", log)
    if not m:
        raise RuntimeError("no 'DB loaded from append only file' line:\n" + log[-2000:])
    return float(m.group(1))


def load(rounds: int, keys: int) -> dict[str, float]:
    src = tempfile.mkdtemp(prefix="aof-load-src-")
    _make_aof_dir(src, keys)
    walls: dict[str, list[float]] = {"pyrepl": [], "redis": []}
    logged: dict[str, list[float]] = {"pyrepl": [], "redis": []}
    exe = redis_server_path()
    try:
        for rnd in range(rounds):
            order = ["pyrepl", "redis"] if rnd % 2 == 0 else ["redis", "pyrepl"]
            for name in order:
                d = tempfile.mkdtemp(prefix=f"aof-load-{name}-")
                shutil.copytree(os.path.join(src, "appendonlydir"),
                                os.path.join(d, "appendonlydir"))
                port = free_port()
                if name == "pyrepl":
                    argv = pyrepl_argv("master", port, d, "--appendonly", "yes")
                else:
                    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
                            "--appendonly", "yes", "--save", "", "--daemonize", "no"]
                srv = ServerProcess(argv, port, d, f"{name}-{port}",
                                    ready=lambda port=port: _dbsize(port) == keys)
                t0 = time.perf_counter()
                srv.start(timeout=600)
                walls[name].append(time.perf_counter() - t0)
                try:
                    import redis

                    with redis.Redis(port=port) as c:
                        assert c.dbsize() == keys
                    logged[name].append(_loaded_seconds(srv.log()))
                finally:
                    srv.stop()
                    shutil.rmtree(d, ignore_errors=True)
                print(f"round {rnd + 1} load of {keys:,} SETs {name:6} wall "
                      f"{walls[name][-1]:7.3f} s, logged {logged[name][-1]:7.3f} s", flush=True)
    finally:
        shutil.rmtree(src, ignore_errors=True)
    a, b = median(walls["pyrepl"]), median(walls["redis"])
    la, lb = median(logged["pyrepl"]), median(logged["redis"])
    return {"pyrepl_wall_s": a, "redis_wall_s": b, "ratio": a / b,
            "pyrepl_logged_s": la, "redis_logged_s": lb, "logged_ratio": la / lb}


def main() -> int:
    args = options(__doc__, rounds=3, requests=200000, keys=1000000,
                   only="throughput,rewrite,load", json=None)
    parts = set(args.only.split(","))
    summary: dict[str, object] = {}
    if "throughput" in parts:
        t = throughput(args.rounds, args.requests)
        summary["throughput"] = t
        print(f"\n{'mode':9} {'-P':3} {'pyrepl SET/s':>13} {'redis SET/s':>12} {'÷redis':>7}")
        for key, v in t.items():
            mode, p = key.split()
            print(f"{mode:9} {p[1:]:3} {v['pyrepl']:13,.0f} {v['redis']:12,.0f} "
                  f"{v['ratio']:7.2f}")
        for p in ("P1", "P16"):
            off, every, always = (t[f"{m} {p}"]["ratio"] for m in ("off", "everysec", "always"))
            print(f"-{p}: everysec ratio / no-AOF ratio = {every / off:.2f} (goal >= 0.9); "
                  f"always ratio = {always:.2f} (goal >= 0.8)")
    if "rewrite" in parts:
        w = rewrite(args.rounds, args.keys)
        summary["rewrite"] = w
        print(f"\nBGREWRITEAOF of {args.keys:,} keys: pyrepl {w['pyrepl_s']:.3f} s, "
              f"redis {w['redis_s']:.3f} s, ratio {w['ratio']:.2f} (goal <= 1.5)")
    if "load" in parts:
        ld = load(args.rounds, args.keys)
        summary["load"] = ld
        print(f"\nload of a {args.keys:,}-key AOF: launch to DBSIZE pyrepl "
              f"{ld['pyrepl_wall_s']:.3f} s, redis {ld['redis_wall_s']:.3f} s, ratio "
              f"{ld['ratio']:.2f} (goal <= 2); logged {ld['pyrepl_logged_s']:.3f} / "
              f"{ld['redis_logged_s']:.3f} s = {ld['logged_ratio']:.2f}")
    write_json(args.json, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
