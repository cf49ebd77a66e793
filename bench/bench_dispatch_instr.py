"""Instructions per command on the hot path (parse + dispatch + reply), counted by callgrind.

    .venv/bin/python bench/bench_dispatch_instr.py [--cases SET,GET,PING,SET+1R,SET+3R,PARSE]
        [--pipeline 16] [--tree DIR] [--memacct] [--maxmemory 1gb] [--maxmemory-clients 1gb]
    .venv/bin/python bench/bench_dispatch_instr.py --profile CASE [N [PIPELINE]]

Wall-clock figures drift on a shared machine; instruction counts do not. Each case is run under
``valgrind --tool=callgrind`` twice, with N and 3N commands (pipelines of ``--pipeline``
commands, 16 by default, read by the I/O shell's ClientProtocol over a ServerCore, with a C
sink as the transport), and the
difference divided by 2N is the cost of one command, start-up excluded. ``PARSE`` is the
request reader alone on the SET stream (feed + gets, no execution); ``FLOOR`` is
bench/floor_server.py's whole work on the SET stream (the Python floor: hiredis, a dict). ``--tree`` runs another checkout's pyrepl (a ``git worktree`` of the
commit before a change) for a before/after figure with the same interpreter. ``--memacct``
installs the memory accounting first (pyrepl/memacct.py, as the CLI does in a server process);
``--maxmemory`` sets a limit (allkeys-lru) the run never reaches: what checking it costs;
``--maxmemory-clients`` the same for client eviction (each read counts its client's memory).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections import deque
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _enc(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


CASES = {
    "PING": lambda i: _enc(b"PING"),
    "SET": lambda i: _enc(b"SET", b"key:%d" % (i % 10000), b"xxx"),
    "GET": lambda i: _enc(b"GET", b"key:%d" % (i % 10000)),   # (the keys are set first)
    "INCR": lambda i: _enc(b"INCR", b"counter:%d" % (i % 100)),
    # strings holding integers (Redis's OBJ_ENCODING_INT): SET of one, GET of one (set first)
    "SETINT": lambda i: _enc(b"SET", b"key:%d" % (i % 10000), b"%d" % (i * 7919 % 1000000)),
    "GETINT": lambda i: _enc(b"GET", b"key:%d" % (i % 10000)),
    # as redis-benchmark -r: one list / hash / sorted set, random members (and scores)
    "LPUSH": lambda i: _enc(b"LPUSH", b"mylist", b"xxx"),
    # 1,000 small lists (a listpack each, one quicklist node in Redis), pushed round robin
    "LPUSH1K": lambda i: _enc(b"LPUSH", b"list:%d" % (i % 1000), b"xxx"),
    # reads of small containers (filled first: PREFILL), the shapes Redis packs: a hash of 16
    # fields, a set of 100 integers (half the lookups miss), a list of 50 elements
    "HGET16": lambda i: _enc(b"HGET", b"smallhash", b"element:%d" % (i % 16)),
    "HGETALL16": lambda i: _enc(b"HGETALL", b"smallhash"),
    "SISMEMBER": lambda i: _enc(b"SISMEMBER", b"intset", b"%d" % (i % 200)),
    "LINDEX": lambda i: _enc(b"LINDEX", b"smalllist", b"%d" % (i % 50)),
    "LRANGE10": lambda i: _enc(b"LRANGE", b"smalllist", b"0", b"9"),
    "HSET": lambda i: _enc(b"HSET", b"myhash", b"element:%d" % (i % 10000), b"xxx"),
    # a hash of 10,000 fields and sets of strings: their hashtable encoding (filled first)
    "HGET": lambda i: _enc(b"HGET", b"myhash", b"element:%d" % (i * 7 % 10000)),
    "SISMEMBERSTR": lambda i: _enc(b"SISMEMBER", b"strset", b"m%d" % (i % 200)),
    "SADD1K": lambda i: _enc(b"SADD", b"set:%d" % (i % 1000), b"member:%d" % (i % 16)),
    "SMEMBERS100": lambda i: _enc(b"SMEMBERS", b"strset"),
    "SPOPSADD": lambda i: _enc(b"SPOP", b"strset") if i % 2 == 0 else _enc(
        b"SADD", b"strset", b"m%d" % (i % 200)),
    # a small hash (16 fields): a listpack in Redis, and in pyrepl since issue 37
    "HSET16": lambda i: _enc(b"HSET", b"smallhash", b"element:%d" % (i % 16), b"xxx"),
    # a small sorted set (16 members): a listpack in Redis, and in pyrepl since issue 37
    "ZADD16": lambda i: _enc(b"ZADD", b"smallzset", b"%d" % (i * 7919 % 100),
                             b"element:%d" % (i % 16)),
    "ZADD": lambda i: _enc(b"ZADD", b"myzset", b"%d" % (i * 7919 % 100000),
                           b"element:%d" % (i * 31 % 10000)),
    # bench_commands.py's tests beyond the hottest seven (issue 39), their data in PREFILL
    "PINGINLINE": lambda i: b"PING\r\n",
    "EXISTS": lambda i: _enc(b"EXISTS", b"key:%d" % (i % 10000)),
    "DEL": lambda i: _enc(b"DEL", b"key:%d" % (i % 10000)),
    "BITCOUNT": lambda i: _enc(b"BITCOUNT", b"bitmap", b"0", b"1000"),
    "LPOP": lambda i: _enc(b"LPOP", b"poplist"),      # (a list of 200,000: it never empties)
    "SADD": lambda i: _enc(b"SADD", b"myset", b"element:%d" % (i * 7919 % 100000)),
    "ZPOPMIN": lambda i: _enc(b"ZPOPMIN", b"myzset"),
    "SPOP": lambda i: _enc(b"SPOP", b"popset"),   # (a set of 160,000: it never empties)
    "HINCRBY": lambda i: _enc(b"HINCRBY", b"counters", b"field:%d" % (i * 7919 % 100000), b"1"),
    "EXPIRE": lambda i: _enc(b"EXPIRE", b"key:%d" % (i % 10000), b"100000"),
    "SETBIT": lambda i: _enc(b"SETBIT", b"bm:%d" % (i * 7919 % 100000), b"1000", b"1"),
    "MSET": lambda i: _enc(b"MSET", *(x for k in range(10) for x in (b"key:%d" % (i + k), b"xxx"))),
    "LRANGE100": lambda i: _enc(b"LRANGE", b"biglist", b"0", b"99"),
    "LRANGE600": lambda i: _enc(b"LRANGE", b"biglist", b"0", b"599"),
    "XADD": lambda i: _enc(b"XADD", b"s:added", b"*", b"field", b"%d" % i),
    "XRANGE": lambda i: _enc(b"XRANGE", b"stream", b"-", b"+", b"COUNT", b"10"),
    "XREADGROUP": lambda i: _enc(b"XREADGROUP", b"GROUP", b"g", b"c1", b"COUNT", b"10",
                                 b"STREAMS", b"stream", b"0"),
    "PFADD": lambda i: _enc(b"PFADD", b"hll", b"member:%d" % (i * 7919 % 100000)),
    "PFCOUNT": lambda i: _enc(b"PFCOUNT", b"hll"),
    # as bench_commands.py's: random members of a sorted set that grows to 100,000
    "ZINCRBY": lambda i: _enc(b"ZINCRBY", b"zincr", b"1", b"m:%d" % (i * 7919 % 100000)),
    "GEOADD": lambda i: _enc(b"GEOADD", b"geo:added", b"13.361389", b"38.115556",
                             b"m:%d" % (i % 10000)),
    "GEOSEARCH": lambda i: _enc(b"GEOSEARCH", b"geo", b"FROMLONLAT", b"15", b"37", b"BYRADIUS",
                                b"200", b"km", b"ASC", b"COUNT", b"10"),
    # the same search over 100 places: a sorted set small enough to be a listpack
    "GEOSEARCH100": lambda i: _enc(b"GEOSEARCH", b"geo100", b"FROMLONLAT", b"15", b"37",
                                   b"BYRADIUS", b"200", b"km", b"ASC", b"COUNT", b"10"),
    "HGETALL50": lambda i: _enc(b"HGETALL", b"hash50"),
    "ZRANGEBYSCORE": lambda i: _enc(b"ZRANGEBYSCORE", b"zs", b"(100", b"110", b"WITHSCORES"),
    "SINTER": lambda i: _enc(b"SINTER", b"set100", b"set100b"),
    "EVALSHA": lambda i: _enc(b"EVALSHA", _sha1(_SCRIPT), b"1", b"key:%d" % (i % 1000)),
    # 100 redis.call of PING, or of GET, in one EVAL (what a call into redis.call costs)
    "CALLPING100": lambda i: _enc(b"EVAL", b"for i=1,100 do redis.call('PING') end", b"0"),
    "CALLGET100": lambda i: _enc(b"EVAL", b"for i=1,100 do redis.call('GET', KEYS[1]) end",
                                 b"1", b"key:%d" % (i % 1000)),
    "MULTI3": lambda i: b"".join(_enc(*c) for c in (
        (b"MULTI",), (b"SET", b"tx:key", b"value"), (b"EXPIRE", b"tx:key", b"1000"),
        (b"GET", b"tx:key"), (b"EXEC",))),
}
_SCRIPT = b"return redis.call('GET', KEYS[1])"


def _sha1(b: bytes) -> bytes:
    import hashlib

    return hashlib.sha1(b).hexdigest().encode()

# "SET+1R", "SET+3R": SET on a master with 1 or 3 online replicas, whose stream the shell hands
# to their (always drained) transports once per pipeline, as the I/O shell does per pass.


class _DrainedIO:
    def buffered(self, c: object) -> int:
        return 0

    def stream_started(self, c: object) -> None:
        pass


def _online_replicas(core: object, n: int) -> None:
    from pyrepl.replication.manager import Replication

    core.host.master_io = _DrainedIO()  # type: ignore[attr-defined]
    repl = Replication(core)  # type: ignore[arg-type]
    repl.create_backlog()
    for i in range(n):
        r = core.connection_made(f"127.0.0.1:{50000 + i}", "127.0.0.1:6379")  # type: ignore
        link = repl.master.link_for(r)
        link.listening_port = 7000 + i
        _put_online(repl.master, link)


def _put_online(side: Any, link: Any) -> None:
    """A streaming link, as a +CONTINUE makes it (either tree's master side: composed of
    phase objects, or of the mixins before them)."""
    if hasattr(side, "feeding"):
        from pyrepl.replication.master import LinkInput

        side.add_replica(link)
        link.go(LinkInput.PARTIAL)
        side.feeding.start_stream(link)
    else:   # (a --tree from before the master side's phases were objects, 2026-11-26)
        side._become_replica_client(link)
        link.state = link.state.__class__.ONLINE
        side._start_stream(link)


def _shell_flush(core: object) -> None:
    """What the I/O shell does with the clients that got output (either tree's model)."""
    pending = core.pending_flush  # type: ignore[attr-defined]
    for r in pending:
        if r.out:
            r.data_to_send()
        link = getattr(r, "stream", None)
        if link is not None:   # (as net/server.py's write_client: no take once all is taken)
            repl = core.replication  # type: ignore[attr-defined]
            take = getattr(repl.master, "feeding", repl.master).take
            while take(link):
                if link.ref is None or link.ref.sent == repl.master_repl_offset:
                    break
    pending.clear()


def _pipelines(make, pipeline: int) -> list[bytes]:
    """4096 commands of a case, ``pipeline`` to a read (built before the measured loop)."""
    return [b"".join(make(i + j) for j in range(pipeline)) for i in range(0, 4096, pipeline)]


class SinkTransport:
    """The transport a protocol writes to: uvloop's write is C, so is this sink."""

    write = deque(maxlen=1).append

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else None


def shell_setup(name: str, replicas: int, pipeline: int) -> tuple[Any, list[Any], list[bytes]]:
    """A ServerCore (with ``replicas`` online replicas) and its clients' protocols, each read
    going through the I/O shell's ClientProtocol (net/server.py: the clock, the counters, the
    reply handed to the transport), and the reads of case ``name``. With replicas the shell
    flushes their stream once per event-loop pass, after every read of the pass: unpipelined,
    a pass of redis-benchmark -c 50 holds dozens of clients' reads (~43 a replica write,
    measured with /proc/PID/io); the model takes 32 clients a pass."""
    import time

    import pyrepl.commands  # noqa: F401
    from pyrepl.config import Config
    try:
        from pyrepl.core.host import Host
        from pyrepl.core.server import ServerCore
    except ImportError:   # (a --tree from before the core became a package, 2026-11-26)
        from pyrepl.core import Host, ServerCore  # type: ignore[attr-defined,no-redef]
    from pyrepl.net.server import ClientProtocol

    class ClockHost(Host):     # the clock the real server's shell gives (NetHost)
        clock_ns = staticmethod(time.perf_counter_ns)

    settings: list[tuple[str, list[str]]] = [("save", [""])]
    if os.environ.get("BENCH_MAXMEMORY"):     # (a limit the run never reaches: the checks' cost)
        settings += [("maxmemory", [os.environ["BENCH_MAXMEMORY"]]),
                     ("maxmemory-policy", ["allkeys-lru"])]
    if os.environ.get("BENCH_MAXMEMORY_CLIENTS"):   # (a client limit the run never reaches)
        settings += [("maxmemory-clients", [os.environ["BENCH_MAXMEMORY_CLIENTS"]])]
    core = ServerCore(Config.load(None, settings), ClockHost(), now_ms=1)
    if replicas:
        _online_replicas(core, replicas)

    class Shell:            # (the Server the protocol asks: its core, a flush per pass)
        def __init__(self) -> None:
            self.core = core
            self._flush_scheduled = False

        def schedule_flush(self) -> None:   # (as Server's; shell_run flushes once per pass)
            self._flush_scheduled = True

    shell = Shell()
    core.shell = shell  # type: ignore[attr-defined]   (shell_run ends its passes)
    protos = []
    for _ in range(32 if replicas and pipeline == 1 else 1):
        p = ClientProtocol(shell)  # type: ignore[arg-type]
        p.connection_made(SinkTransport())  # type: ignore[arg-type]
        protos.append(p)
    if name == "GET":   # hits, as redis-benchmark's GET after its SET (-t set,get)
        protos[0].data_received(b"".join(_pipelines(CASES["SET"], 16)))
    fill = PREFILL.get(name)
    if fill is not None:
        protos[0].data_received(fill)
    return core, protos, _pipelines(CASES[name], pipeline)


# What the read cases find: the small hash, the set of integers, the list.
PREFILL = dict.fromkeys(("HGET16", "HGETALL16"), b"".join(CASES["HSET16"](i) for i in range(16)))
PREFILL["GETINT"] = b"".join(CASES["SETINT"](i) for i in range(10000))
PREFILL["HGET"] = b"".join(CASES["HSET"](i) for i in range(10000))
PREFILL["SISMEMBERSTR"] = PREFILL["SMEMBERS100"] = PREFILL["SPOPSADD"] = _enc(
    b"SADD", b"strset", *(b"m%d" % (2 * i) for i in range(100)))
PREFILL["SISMEMBER"] = _enc(b"SADD", b"intset", *(b"%d" % (2 * i) for i in range(100)))
PREFILL["LINDEX"] = PREFILL["LRANGE10"] = _enc(b"RPUSH", b"smalllist", *(b"e%d" % i
                                                                          for i in range(50)))
# as bench_commands.py's setup (redis-benchmark's LRANGE list: 600 elements of "xxx")
PREFILL["LRANGE100"] = PREFILL["LRANGE600"] = _enc(b"RPUSH", b"biglist", *[b"xxx"] * 600)
PREFILL["LPOP"] = _enc(b"RPUSH", b"poplist", *[b"xxx"] * 200000)
PREFILL["SPOP"] = b"".join(_enc(b"SADD", b"popset", *(b"element:%d" % (k * 1000 + i)
                                                     for i in range(1000))) for k in range(160))
PREFILL["XRANGE"] = PREFILL["XREADGROUP"] = b"".join(
    _enc(b"XADD", b"stream", b"*", b"field", b"%d" % i) for i in range(1000)) + _enc(
    b"XGROUP", b"CREATE", b"stream", b"g", b"0") + _enc(
    b"XREADGROUP", b"GROUP", b"g", b"c1", b"STREAMS", b"stream", b">")
PREFILL["PFCOUNT"] = b"".join(CASES["PFADD"](i) for i in range(5000))
PREFILL["GEOSEARCH"] = b"".join(_enc(b"GEOADD", b"geo", b"%.2f" % (12.5 + (i % 20) * 0.15),
                                     b"%.2f" % (36.6 + (i // 20) * 0.15), b"p%d" % i)
                                for i in range(200))
PREFILL["GEOSEARCH100"] = b"".join(_enc(b"GEOADD", b"geo100", b"%.2f" % (12.5 + (i % 20) * 0.15),
                                        b"%.2f" % (36.6 + (i // 20) * 0.15), b"p%d" % i)
                                   for i in range(100))
PREFILL["HGETALL50"] = _enc(b"HSET", b"hash50", *(x for i in range(50) for x in (
    b"field:%d" % i, b"value:%04d" % i)))
PREFILL["ZRANGEBYSCORE"] = _enc(b"ZADD", b"zs", *(x for i in range(1000) for x in (
    b"%d" % i, b"m:%d" % i)))
PREFILL["SINTER"] = _enc(b"SADD", b"set100", *(b"member:%d" % i for i in range(100))) + _enc(
    b"SADD", b"set100b", *(b"member:%d" % i for i in range(50, 150)))
PREFILL["BITCOUNT"] = _enc(b"SETBIT", b"bitmap", b"8000", b"1")   # (as bench_commands.py)
# EXPIRE's keys are there (as bench_commands.py's, which SET ran before)
PREFILL["EXPIRE"] = b"".join(_enc(b"SET", b"key:%d" % i, b"xxx") for i in range(10000))
PREFILL["CALLGET100"] = PREFILL["EVALSHA"] = _enc(b"SCRIPT", b"LOAD", _SCRIPT) + b"".join(
    _enc(b"SET", b"key:%d" % i, b"xxx") for i in range(1000))


def shell_run(core: Any, protos: list[Any], chunks: list[bytes], n: int, pipeline: int,
              replicas: int) -> int:
    """Passes of one read per protocol (and one replica flush) until ``n`` commands ran."""
    done = k = 0
    while done < n:
        for p in protos:
            p.data_received(chunks[k % len(chunks)])
            done += pipeline
            k += 1
        if replicas:
            _shell_flush(core)
            core.shell._flush_scheduled = False   # (the pass's flush ran)
    return done


def floor_run(pipeline: int, n: int) -> None:
    """bench/floor_server.py's work on ``n`` SETs (hiredis, a dict, a write)."""
    sys.path.insert(0, HERE)
    from floor_server import Floor

    floor = Floor()
    floor.connection_made(SinkTransport())  # type: ignore[arg-type]
    chunks = _pipelines(CASES["SET"], pipeline)
    done = k = 0
    while done < n:
        floor.data_received(chunks[k % len(chunks)])
        done += pipeline
        k += 1


def run_case(case: str, n: int, pipeline: int = 16) -> None:
    """The measured program (run under valgrind by main)."""
    name, _, reps = case.partition("+")
    if name == "PARSE":
        from pyrepl.resp.fastreader import make_reader

        reader = make_reader()
        chunks = _pipelines(CASES["SET"], pipeline)
        done = k = 0
        while done < n:
            reader.feed(chunks[k % len(chunks)])
            while reader.gets() is not None:
                pass
            done += pipeline
            k += 1
        return
    if name == "FLOOR":
        floor_run(pipeline, n)
        return
    replicas = int(reps.rstrip("R")) if reps else 0
    if os.environ.get("BENCH_MEMACCT") == "1":
        from pyrepl import memacct

        assert memacct.install() == "pool-walk", memacct.why_not()
    core, protos, chunks = shell_setup(name, replicas, pipeline)
    shell_run(core, protos, chunks, n, pipeline, replicas)


def profile(case: str, n: int = 20000, pipeline: int = 16) -> None:
    """``--profile CASE``: the case's run under cProfile, its 25 costliest functions (own
    time): where a command's Python time goes, in this process."""
    import cProfile
    import pstats

    name = case.partition("+")[0]
    replicas = int(case.partition("+")[2].rstrip("R") or 0)
    core, protos, chunks = shell_setup(name, replicas, pipeline)
    prof = cProfile.Profile()
    prof.enable()
    shell_run(core, protos, chunks, n, pipeline, replicas)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


def instructions(tree: str, case: str, n: int, pipeline: int = 16) -> int:
    from common import callgrind_instructions

    env = dict(os.environ, PYTHONPATH=tree, PYTHONHASHSEED="0")
    return callgrind_instructions(
        [sys.executable, os.path.abspath(__file__), "--run", case, str(n), str(pipeline)],
        env=env, cwd=tree, timeout=600)


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--run":
        run_case(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    if len(sys.argv) >= 3 and sys.argv[1] == "--profile":   # --profile CASE [N [PIPELINE]]
        profile(sys.argv[2], *(int(a) for a in sys.argv[3:5]))  # type: ignore[call-arg]
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="SET,GET,PING")
    ap.add_argument("--tree", default=ROOT, help="checkout whose pyrepl is measured")
    ap.add_argument("-n", type=int, default=16000)
    ap.add_argument("--pipeline", "-P", type=int, default=16)
    ap.add_argument("--memacct", action="store_true",
                    help="install the memory accounting first (pyrepl/memacct.py)")
    ap.add_argument("--maxmemory", default="",
                    help="run with this maxmemory (allkeys-lru), e.g. 1gb: what checking costs")
    ap.add_argument("--maxmemory-clients", default="",
                    help="run with this maxmemory-clients, e.g. 1gb: what counting costs")
    args = ap.parse_args()
    if args.maxmemory_clients:
        os.environ["BENCH_MAXMEMORY_CLIENTS"] = args.maxmemory_clients
    if args.maxmemory:
        os.environ["BENCH_MAXMEMORY"] = args.maxmemory
    if args.memacct:
        os.environ["BENCH_MEMACCT"] = "1"
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 1
    for case in args.cases.split(","):
        low = instructions(args.tree, case, args.n, args.pipeline)
        high = instructions(args.tree, case, 3 * args.n, args.pipeline)
        print(f"{case:6} -P{args.pipeline:<3} {(high - low) / (2 * args.n):10,.0f} "
              "instructions/command", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
