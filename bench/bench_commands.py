"""Every command a user runs, pyrepl beside Redis 7.0.15, same run, interleaved (issue 39).

    .venv/bin/python bench/bench_commands.py [--rounds 2] [--requests 100000]
        [--modes alone,replica] [--pipelines 1,16] [--tests PING_INLINE,XADD,...]
        [--base DIR] [--json FILE]

The tests: redis-benchmark's whole default list (``-t``: PING_INLINE, PING_MBULK, SET, GET,
INCR, LPUSH, RPUSH, LPOP, RPOP, SADD, HSET, SPOP, ZADD, ZPOPMIN, LRANGE_100/300/500/600, MSET,
with ``-r 100000``) and the everyday commands outside it (``COMMANDS``: streams, HyperLogLog,
bitmaps, geo, whole-hash and whole-set reads, score ranges, EXPIRE/EXISTS/DEL, EVALSHA of a
one-line script; MULTI/EXEC of 3 commands by txload.c, built here with gcc, since
redis-benchmark sends one command a request). ``-c 50``, at -P1 and -P16 (-P16 runs 8x the
requests: common.requests_for), each test run on every server back to back with the order
rotating each round. ``--modes``: ``alone`` (one server) and ``replica`` (a master with one
replica of its own kind attached: pyrepl's follows pyrepl, Redis's follows Redis; the master is
measured). ``--base DIR`` adds another checkout's pyrepl (a ``git worktree`` of an earlier
commit, C files built in place) and prints pyrepl / base: a before/after in the same minutes.

Prints each test's medians and the ratio pyrepl / Redis, then per mode and pipeline the median
ratio and the tests under the issue's goals (every test >= 0.8x at -P1 and >= 0.5x at -P16;
medians >= 0.9x and 0.7x). Beside each ratio, the measured server's CPU time a request (user
and kernel, every thread: /proc/<pid>/task/*/schedstat, in ns) and Redis's over pyrepl's: a
figure the share of the 2 cores that redis-benchmark's 50 clients leave the server moves less
than the rate does, where -P1 rates swing by tens of percent from round to round. (An LRANGE
test's includes the LPUSHes redis-benchmark sends before it, on both servers.)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile

from common import (
    HERE,
    ServerProcess,
    median,
    options,
    redis_benchmark,
    redis_benchmark_command,
    requests_for,
    start_pyrepl,
    start_pyrepl_from,
    start_redis,
    write_json,
)

#: redis-benchmark's default tests, in its order (its -t names)
DEFAULT = ("ping_inline,ping_mbulk,set,get,incr,lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,"
           "zpopmin,lrange_100,lrange_300,lrange_500,lrange_600,mset")

#: the everyday commands outside it (``__rand_int__``: redis-benchmark's -r 100000)
COMMANDS: dict[str, list[str]] = {
    "XADD": ["XADD", "s:added", "*", "field", "__rand_int__"],
    "XRANGE": ["XRANGE", "stream", "-", "+", "COUNT", "10"],
    # history reads of a consumer's 1,000 pending entries (no new delivery: steady state)
    "XREADGROUP": ["XREADGROUP", "GROUP", "g", "c1", "COUNT", "10", "STREAMS", "stream", "0"],
    "PFADD": ["PFADD", "hll", "member:__rand_int__"],
    "PFCOUNT": ["PFCOUNT", "hll"],
    "SETBIT": ["SETBIT", "bm:__rand_int__", "1000", "1"],
    "BITCOUNT": ["BITCOUNT", "bitmap", "0", "1000"],
    "GEOADD": ["GEOADD", "geo:added", "13.361389", "38.115556", "m:__rand_int__"],
    "GEOSEARCH": ["GEOSEARCH", "geo", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km",
                  "ASC", "COUNT", "10"],
    "HGETALL": ["HGETALL", "hash50"],
    "HINCRBY": ["HINCRBY", "counters", "field:__rand_int__", "1"],
    "ZRANGEBYSCORE": ["ZRANGEBYSCORE", "zs", "(100", "110", "WITHSCORES"],
    "ZINCRBY": ["ZINCRBY", "zincr", "1", "m:__rand_int__"],
    "SMEMBERS": ["SMEMBERS", "set100"],
    "SINTER": ["SINTER", "set100", "set100b"],
    "EXPIRE": ["EXPIRE", "key:__rand_int__", "100000"],
    "EXISTS": ["EXISTS", "key:__rand_int__"],
    "DEL": ["DEL", "key:__rand_int__"],
    "EVALSHA": [],   # the sha of SCRIPT, filled in by setup()
}
SCRIPT = "return redis.call('GET', KEYS[1])"
#: MULTI/EXEC of 3 commands (txload.c: one request is the five commands)
#: (replies of a fixed length and content: txload checks every byte)
TX = [["MULTI"], ["SET", "tx:key", "value"], ["EXPIRE", "tx:key", "1000"], ["GET", "tx:key"],
      ["EXEC"]]
#: a test far slower than SET runs this share of the requests (the ratio is what counts)
# (chosen so that the slowest server's run of a test lasts a few seconds at most)
SCALE = {"lrange_100": 0.3, "lrange_300": 0.1, "lrange_500": 0.07, "lrange_600": 0.06,
         "GEOSEARCH": 0.05, "XREADGROUP": 0.3, "HGETALL": 0.5, "SMEMBERS": 0.5, "SINTER": 0.5,
         "XRANGE": 0.5, "ZRANGEBYSCORE": 0.5, "MULTI_EXEC": 0.5, "GEOADD": 0.5}


def resp(cmd: list[str]) -> bytes:
    out = [b"*%d\r\n" % len(cmd)]
    for a in cmd:
        b = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def setup(port: int) -> str:
    """The same data on every server: a 1,000-entry stream with a consumer group whose
    consumer c1 holds all of it pending, a bitmap, 200 places around Sicily, a 50-field hash,
    two 100-member sets (half shared), a 1,000-member sorted set, 100,000 keys for EXPIRE/
    EXISTS/DEL; returns EVALSHA's sha."""
    import redis

    with redis.Redis(port=port) as r:
        r.flushall()
        p = r.pipeline(transaction=False)
        for i in range(1000):
            p.xadd("stream", {"field": i})
        p.xgroup_create("stream", "g", id="0")
        p.xreadgroup("g", "c1", {"stream": ">"})
        p.setbit("bitmap", 8000, 1)
        for i in range(200):
            p.geoadd("geo", (12.5 + (i % 20) * 0.15, 36.6 + (i // 20) * 0.15, f"p{i}"))
        p.hset("hash50", mapping={f"field:{i}": f"value:{i:04}" for i in range(50)})
        p.sadd("set100", *(f"member:{i}" for i in range(100)))
        p.sadd("set100b", *(f"member:{i}" for i in range(50, 150)))
        p.zadd("zs", {f"m:{i}": i for i in range(1000)})
        p.execute()
        for lo in range(0, 100000, 10000):
            r.mset({f"key:{i:012d}": "value" for i in range(lo, lo + 10000)})
        return r.script_load(SCRIPT)


def tx_files(port: int, work: str, name: str) -> tuple[str, str]:
    """txload's request file and the reply it must get (read off the server once)."""
    req = b"".join(resp(c) for c in TX)
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(req)
        got = b""
        while not got.endswith(b"$5\r\nvalue\r\n"):   # (EXEC's last reply)
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("the server closed the connection")
            got += chunk
    return _write(work, f"{name}.req", req), _write(work, f"{name}.reply", got)


def _write(work: str, name: str, data: bytes) -> str:
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def cpu_ns(pid: int) -> int:
    """Nanoseconds the process ``pid`` has run on a CPU so far, every live thread's."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:     # (a thread that ended meanwhile)
            pass
    return total


def build_txload(work: str) -> str:
    exe = os.path.join(work, "txload")
    subprocess.run(["gcc", "-O2", "-o", exe, os.path.join(HERE, "txload.c")], check=True)
    return exe


def main() -> int:
    args = options(__doc__, rounds=2, requests=100000, clients=50, json=None, base=None,
                   modes="alone,replica", pipelines="1,16", tests="")
    wanted = {t.strip().upper() for t in args.tests.split(",") if t.strip()}
    default = ",".join(t for t in DEFAULT.split(",") if not wanted or t.upper() in wanted)
    commands = {k: v for k, v in COMMANDS.items() if not wanted or k in wanted}
    with_tx = not wanted or "MULTI_EXEC" in wanted
    pipelines = [int(p) for p in args.pipelines.split(",")]
    work = tempfile.mkdtemp(prefix="bench-commands-")
    txload = build_txload(work) if with_tx else ""
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    try:
        for mode in args.modes.split(","):
            run_mode(args, mode, default, commands, with_tx, pipelines, txload, work, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summarize(results, args.base is not None, args.json)
    return 0


def start_servers(args, mode: str) -> tuple[dict[str, ServerProcess], list[ServerProcess]]:
    """The measured servers by name, and the replicas beside them (stopped with them)."""
    from bench_replication import attach

    makers = {"pyrepl": start_pyrepl, "redis": start_redis}
    if args.base:
        makers["base"] = lambda *more: start_pyrepl_from(args.base)
    servers: dict[str, ServerProcess] = {}
    extra: list[ServerProcess] = []
    try:
        for name, make in makers.items():
            servers[name] = make("--repl-diskless-sync-delay", "0")
            if mode == "replica":
                extra.append(make())
                attach(servers[name], extra[-1])
    except BaseException:
        for srv in [*servers.values(), *extra]:
            srv.stop()
        raise
    return servers, extra


def run_mode(args, mode: str, default: str, commands: dict[str, list[str]], with_tx: bool,
             pipelines: list[int], txload: str, work: str,
             results: dict[str, dict[str, dict[str, list[float]]]]) -> None:
    servers, extra = start_servers(args, mode)
    try:
        shas = {name: setup(srv.port) for name, srv in servers.items()}
        tx = {name: tx_files(srv.port, work, name) for name, srv in servers.items()}
        order = list(servers)
        tests = [t.upper() for t in default.split(",") if t] + list(commands) \
            + (["MULTI_EXEC"] if with_tx else [])
        for rnd in range(args.rounds):
            for pipeline in pipelines:
                for test in tests:
                    k = rnd % len(order)
                    for name in order[k:] + order[:k]:
                        port = servers[name].port
                        pid = servers[name].proc.pid
                        before = cpu_ns(pid)
                        n = max(1000, int(requests_for(args.requests, pipeline)
                                          * SCALE.get(test if test in commands else
                                                      test.lower(), 1.0)))
                        if test == "MULTI_EXEC":
                            req, rep = tx[name]
                            out = subprocess.run(
                                [txload, str(port), str(args.clients), str(pipeline), str(n),
                                 req, rep], capture_output=True, text=True, check=True,
                                timeout=600).stdout
                            rps = float(out.split(",")[1].strip().strip('"'))
                        elif test in commands:
                            cmd = commands[test] or ["EVALSHA", shas[name], "1",
                                                     "key:__rand_int__"]
                            rps = redis_benchmark_command(port, cmd, n, args.clients, pipeline)
                        else:
                            got = redis_benchmark(port, test.lower(), n, args.clients,
                                                  pipeline, ["-r", "100000"])
                            # ("LRANGE_100 (first 100 elements)", "MSET (10 keys)")
                            rps = next(v for t, v in got.items() if t.split(" ")[0] == test)
                        by_name = results.setdefault(f"{mode} P{pipeline}", {}) \
                            .setdefault(test, {})
                        by_name.setdefault(name, []).append(rps)
                        by_name.setdefault(f"{name} cpu", []).append(
                            (cpu_ns(pid) - before) / n / 1000)
                    by = results[f"{mode} P{pipeline}"][test]
                    print(f"round {rnd + 1} {mode} -P{pipeline} {test:14} "
                          + "  ".join(f"{who} {v[-1]:,.0f}" for who, v in by.items()
                                      if not who.endswith(" cpu"))
                          + "  (CPU us a request: "
                          + " ".join(f"{who[:-4]} {v[-1]:.1f}" for who, v in by.items()
                                     if who.endswith(" cpu")) + ")",
                          flush=True)
    finally:
        for srv in [*servers.values(), *extra]:
            srv.stop()


GOALS = {1: (0.8, 0.9), 16: (0.5, 0.7)}


def summarize(results: dict[str, dict[str, dict[str, list[float]]]], base: bool,
              json_path: str | None) -> None:
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for key, tests in results.items():
        mode, p = key.split(" ")
        each, least = GOALS[int(p[1:])]
        print(f"\n{key}: {'test':14} {'pyrepl rps':>12} {'redis rps':>12} {'ratio':>6}"
              + "  CPU us/req pyrepl  redis  redis/pyrepl" + ("  before  ÷base" if base else ""))
        ratios = []
        for test, by in tests.items():
            a, b = median(by["pyrepl"]), median(by["redis"])
            ratio = a / b
            ratios.append(ratio)
            ca, cb = median(by["pyrepl cpu"]), median(by["redis cpu"])
            row = {"pyrepl": a, "redis": b, "ratio": ratio, "pyrepl_cpu_us": ca,
                   "redis_cpu_us": cb, "cpu_ratio": cb / ca}
            extra = f"  {ca:17.1f}  {cb:5.1f}  {cb / ca:12.2f}"
            if base:   # (the base's ratio to Redis: the "before" of a before/after)
                row["base"] = median(by["base"])
                extra += f"  {row['base'] / b:6.2f}  {a / row['base']:5.2f}"
            summary.setdefault(key, {})[test] = row
            flag = "" if ratio >= each else "  < goal"
            print(f"{'':{len(key) + 2}}{test:14} {a:12,.0f} {b:12,.0f} {ratio:6.2f}{extra}{flag}")
        under = [t for t, r in summary[key].items() if r["ratio"] < each]
        med = median(ratios)
        print(f"{'':{len(key) + 2}}median {med:.2f} (goal {least}); {len(under)} of "
              f"{len(ratios)} under {each}: {', '.join(under) or 'none'}")
    write_json(json_path, summary)


if __name__ == "__main__":
    raise SystemExit(main())
