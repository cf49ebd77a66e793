"""Replication side by side: a pyrepl master + pyrepl replica vs redis-server 7.0.15 + replica.

    .venv/bin/python bench/bench_replication.py [--rounds 3] [--quick] [--only SECTIONS]
                                                [--json FILE]

Theory of operation: every figure is taken for both kinds of pair in the same run, the kinds
alternating order from round to round, and the table gives the median over rounds and the ratio
pyrepl/redis (absolute times drift on this shared 2-core machine, ratios much less). Each
measurement starts its own processes on free loopback ports (tests/support.py) and stops exactly
those; every wait is bounded in time. Control and polling use small raw RESP connections (ROLE is
the cheap way to read a replica's link state and ``slave_repl_offset``: ``connected`` in ROLE is
``master_link_status:up`` in INFO). Sections (``--only throughput,fullsync,partial,lag``):

1. ``throughput``: ``redis-benchmark -t TEST`` for each of set, get, incr, lpush, hset, zadd
   (``-n 300000 -c 50 -P 1``, ``-n 2400000 -P 16``, ``-r 100000``) against a master with one
   replica attached, and against the Python floor with one replica (bench/floor_server.py
   ``--replica``: a floor passing its reads with writes on, verbatim, to another floor once a
   loop pass; the most a Python master and replica do here), each test on the three pairs
   back to back, in another order each round; after the SETs, the time until the replica has
   applied all of them (polled every 1 ms). Goals: every ratio >= 0.9 at -P1, SET and GET >= 0.5 at -P16, and
   at -P16 >= 0.8x the floor; caught up within 1 s.
2. ``fullsync``: the master gets ``DEBUG POPULATE 1000000 key 100``; a fresh empty replica is
   told ``REPLICAOF``. For each entry of :data:`SYNC_MODES` (one more entry adds a mode):
   (a) idle: REPLICAOF -> ROLE ``connected`` (= ``master_link_status:up``);
   (b) under load: ``redis-benchmark -t set -n 2000000 -c 20 -P 8 -r 1000000`` is started right
   before REPLICAOF and stopped 1 s after link up (or 30 s after it started, or when it ends by
   itself). Times, all from REPLICAOF: ``link up``; ``caught up`` = the replica's
   ``slave_repl_offset`` >= the ``master_repl_offset`` read right after link up was seen (the
   replica has applied what the master buffered for it during the sync: ANCHORS's "caught up",
   which for disk-based sync is only 0.36 s after link up, i.e. before the load stopped);
   ``drained`` = ``slave_repl_offset`` >= the master offset once the load has stopped and the
   master's offset is stable (so it includes the extra second of load). A sampler thread reads
   INFO memory every 50 ms on both: the master's peak ``mem_total_replication_buffers`` and, when
   the replica reports it (pyrepl; Redis 7.0.15 does not), its peak
   ``mem_replica_full_sync_buffer``. Goal: sync times <= 2x Redis.
3. ``partial``: backlog 256mb, replica in sync; SIGSTOP the replica, ``CLIENT KILL TYPE replica``
   on the master, write N x 1 KB SETs (redis-benchmark -d 1024), SIGCONT; time from SIGCONT to
   the replica's ``slave_repl_offset`` == ``master_repl_offset`` (polled every 1 ms), with the
   reconnect part (link seen again) shown separately; asserts ``sync_partial_ok`` went up by one
   and ``sync_full`` did not. Goal: <= 2x Redis.
4. ``lag``: every 20 ms SET a probe key to a counter on the master, then GET it on the replica in
   a tight loop until the new value is there; latency from just before the SET is sent (a probe
   not seen within 2 s counts as the time waited, and is reported as a miss). Under no
   load, ``SET -P1 -c20`` and ``SET -P16 -c20`` background loads (load ops/s from the master's
   ``total_commands_processed``). p50 / p99 per round, median over rounds. Goal: p99 <= 2x Redis.

Both kinds run with their defaults otherwise (a Redis replica loads a full sync through a
temporary file: ``repl-diskless-load disabled``; a pyrepl replica decodes the stream as it
arrives). redis-server is started with ``--enable-debug-command yes`` for DEBUG POPULATE.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from common import (
    ServerProcess,
    benchmark_argv,
    median,
    parse_info,
    percentile,
    redis_benchmark,
    requests_for,
    start_floor,
    start_pyrepl,
    start_redis,
    stop_popen,
    tmpdir,
    write_json,
)

from tests.support.resp import RawClient, RespError, encode_command, parse_reply

KINDS = ("pyrepl", "redis")
HOST = "127.0.0.1"


@dataclass(frozen=True)
class SyncMode:
    """A full-sync mode: the extra arguments per kind for master and replica (None: the kind
    cannot do it, its column stays empty)."""

    name: str
    master: dict[str, list[str] | None]
    replica: dict[str, list[str]] = field(default_factory=dict)


SYNC_MODES: list[SyncMode] = [
    # pyrepl defaults to the rdb channel (as Redis 8); the classic modes turn it off.
    SyncMode("rdbchannel", {"pyrepl": ["--repl-diskless-sync", "yes", "--repl-rdb-channel",
                                       "yes"], "redis": None}),
    SyncMode("diskless", {"pyrepl": ["--repl-diskless-sync", "yes", "--repl-rdb-channel", "no"],
                          "redis": ["--repl-diskless-sync", "yes"]}),
    SyncMode("disk", {"pyrepl": ["--repl-diskless-sync", "no", "--repl-rdb-channel", "no"],
                      "redis": ["--repl-diskless-sync", "no"]}),
]


# -- processes and connections ------------------------------------------------------------

def start_server(kind: str, *extra: str) -> ServerProcess:
    d = tmpdir(f"bench-repl-{kind}-")
    if kind == "pyrepl":
        return start_pyrepl(*extra, tmpdir=d)
    return start_redis("--enable-debug-command", "yes", *extra, tmpdir=d)


def stop_server(srv: ServerProcess | None) -> None:
    if srv is None:
        return
    try:
        if srv.proc is not None and srv.proc.poll() is None:
            os.kill(srv.proc.pid, signal.SIGCONT)  # in case a failure left it stopped
        srv.stop()
    finally:
        shutil.rmtree(srv.dir, ignore_errors=True)


class Conn:
    """A raw RESP connection: commands in, parsed replies out."""

    def __init__(self, port: int, timeout: float = 120.0) -> None:
        self.c = RawClient(port, timeout=timeout)

    def close(self) -> None:
        self.c.close()

    def cmd(self, *args: bytes | str | int) -> object:
        v = parse_reply(self.c.call(*args))
        if isinstance(v, RespError):
            raise v
        return v

    def info(self, section: str) -> dict[str, str]:
        return parse_info(self.cmd("INFO", section))  # type: ignore[arg-type]

    def role(self) -> tuple[str, int]:
        """(link state, offset): a replica's ``connected``/``sync``/... and its
        slave_repl_offset (-1 without a master); a master's ``master`` and master_repl_offset."""
        r = self.cmd("ROLE")
        assert isinstance(r, list)
        if r[0] == b"master":
            return "master", int(r[1])
        return r[3].decode(), int(r[4])


def wait_until(cond: Callable[[], object], timeout: float, interval: float, what: str) -> float:
    """Poll cond until truthy; returns the perf_counter() at success; raises on timeout."""
    deadline = time.perf_counter() + timeout
    while True:
        if cond():
            return time.perf_counter()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def stable_offset(m: Conn, settle: float = 0.05, timeout: float = 5.0) -> int:
    """The master's offset once two reads ``settle`` apart agree (bounded by ``timeout``)."""
    deadline = time.perf_counter() + timeout
    last = m.role()[1]
    while time.perf_counter() < deadline:
        time.sleep(settle)
        cur = m.role()[1]
        if cur == last:
            return cur
        last = cur
    return last


def attach(master: ServerProcess, replica: ServerProcess, timeout: float = 120.0) -> None:
    """REPLICAOF, then wait for link up and for a write to reach the replica: after a full sync
    a master may hold the stream until the replica's first REPLCONF ACK (Redis does, for
    diskless sync), up to a second later; measurements must not start before that."""
    m, r = Conn(master.port), Conn(replica.port)
    try:
        r.cmd("REPLICAOF", HOST, master.port)
        wait_until(lambda: r.role()[0] == "connected", timeout, 0.01, "link up")
        m.cmd("SET", "__bench_attach__", "1")
        target = m.role()[1]
        wait_until(lambda: r.role()[1] >= target, timeout, 0.01, "the stream to flow")
    finally:
        m.close()
        r.close()


def start_pair(kind: str, master_args: list[str] | None = None,
               replica_args: list[str] | None = None) -> tuple[ServerProcess, ServerProcess]:
    master = start_server(kind, "--repl-diskless-sync-delay", "0", *(master_args or []))
    try:
        replica = start_server(kind, *(replica_args or []))
    except BaseException:
        stop_server(master)
        raise
    try:
        attach(master, replica)
    except BaseException:
        stop_server(replica)
        stop_server(master)
        raise
    return master, replica


def replica_count(master: ServerProcess) -> int:
    m = Conn(master.port)
    try:
        return int(m.info("replication").get("connected_slaves", "0"))
    finally:
        m.close()


# -- 1. write throughput with one replica ----------------------------------------------------

# The other writes of issue 15's -P1 goal, after SET and GET; random keys (members, fields) as
# bench_throughput.py and the runs (until 2026-11-25 this section ran SET and GET on
# one key, without -r)
TP_TESTS = ("set", "get", "incr", "lpush", "hset", "zadd")
TP_KEYS = ["-r", "100000"]
# every order of the three pairs, one a round
TP_ORDERS = list(itertools.permutations((*KINDS, "floor")))


def section_throughput(args: argparse.Namespace, res: Results) -> None:
    """Each test runs on the three pairs back to back (the order rotating from round to
    round), so that the figures a ratio divides were taken seconds apart, not a pair's whole
    run of six tests apart (a round's figure moves ±10 % on this shared machine)."""
    pairs: dict[str, tuple[ServerProcess, ServerProcess]] = {}
    floor = floor_replica = None
    try:
        for kind in KINDS:
            pairs[kind] = start_pair(kind)
        floor_replica = start_floor()
        floor = start_floor(replica=floor_replica.port)
        masters = {"floor": floor, **{kind: pair[0] for kind, pair in pairs.items()}}
        for rnd in range(args.rounds):
            kinds = TP_ORDERS[rnd % len(TP_ORDERS)]
            for pipeline in (1, 16):
                reqs = requests_for(args.tp_requests, pipeline)
                got: dict[str, dict[str, float]] = {k: {} for k in kinds}
                for test in TP_TESTS:
                    for kind in kinds:
                        r = redis_benchmark(masters[kind].port, test, reqs, 50, pipeline,
                                            TP_KEYS)
                        if test == "set" and kind in pairs:   # (the floor has no ROLE)
                            res.add(f"throughput SET -P{pipeline}: replica caught up after, ms",
                                    kind, catch_up_s(*pairs[kind]) * 1000)
                        for name, rps in r.items():
                            res.add(f"throughput {name} -P{pipeline}", kind, rps)
                        got[kind].update(r)
                for kind in kinds:
                    n = replica_count(masters[kind]) if kind in pairs else 1
                    note = "" if n == 1 else f"  !! {n} replicas connected after the run"
                    print(f"  round {rnd + 1} -P{pipeline:<2} {kind:6}: "
                          + ", ".join(f"{t}={v:,.0f}/s" for t, v in got[kind].items()) + note,
                          flush=True)
    finally:
        stop_server(floor)
        stop_server(floor_replica)
        for master, replica in pairs.values():
            stop_server(replica)
            stop_server(master)


def catch_up_s(master: ServerProcess, replica: ServerProcess, timeout: float = 60.0) -> float:
    """Seconds from the end of a write load (the master's offset read right after it) until
    the replica has applied everything up to that offset."""
    m, r = Conn(master.port), Conn(replica.port)
    try:
        t0 = time.perf_counter()
        target = m.role()[1]
        return wait_until(lambda: r.role()[1] >= target, timeout, 0.001, "catch-up") - t0
    finally:
        m.close()
        r.close()


# -- 2. full sync ---------------------------------------------------------------------------

class Sampler(threading.Thread):
    """Reads INFO memory on master and replica every ``period`` seconds and keeps the peaks."""

    def __init__(self, master_port: int, replica_port: int, period: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.ports = (master_port, replica_port)
        self.period = period
        self.stop_ev = threading.Event()
        self.master_peak = 0
        self.replica_peak: int | None = None
        self.samples = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        m, r = Conn(self.ports[0]), Conn(self.ports[1])
        try:
            while not self.stop_ev.is_set():
                mi = m.info("memory")
                self.master_peak = max(self.master_peak,
                                       int(mi.get("mem_total_replication_buffers", 0)))
                own = self.replica_buffer(r)
                if own is not None:
                    self.replica_peak = max(self.replica_peak or 0, own)
                self.samples += 1
                self.stop_ev.wait(self.period)
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            self.error = e
        finally:
            m.close()
            r.close()

    def replica_buffer(self, r: Conn) -> int | None:
        """The replica's own full-sync buffer, where it reports one (pyrepl; not 7.0.15)."""
        ri = r.info("memory")
        v = ri.get("mem_replica_full_sync_buffer")
        return None if v is None else int(v)

    def finish(self) -> None:
        self.stop_ev.set()
        self.join(30)


def sync_once(kind: str, mode: SyncMode, master: ServerProcess, load: list[str] | None,
              args: argparse.Namespace) -> dict[str, float]:
    """One full sync of a fresh replica from ``master``; times are seconds from REPLICAOF."""
    replica = start_server(kind, *mode.replica.get(kind, []))
    m, r = Conn(master.port), Conn(replica.port)
    sampler = Sampler(master.port, replica.port)
    bench: subprocess.Popen | None = None
    out: dict[str, float] = {}
    try:
        assert r.role()[0] == "master"
        off_start = m.role()[1]
        sampler.start()
        if load is not None:
            bench = subprocess.Popen(load, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.05)  # let its clients connect and start writing
        t0 = time.perf_counter()
        r.cmd("REPLICAOF", HOST, master.port)
        t_stop: float | None = None

        def up() -> bool:
            nonlocal t_stop
            if bench is not None and t_stop is None and time.perf_counter() > t0 + args.load_cap:
                t_stop = time.perf_counter()  # the load cap is reached before link up
                stop_popen(bench)
            return r.role()[0] == "connected"

        t_up = wait_until(up, args.sync_timeout, 0.005, "link up")
        off_up = m.role()[1]
        out["link_up_s"] = t_up - t0
        t_caught: float | None = None
        if load is None:
            t_caught = wait_until(lambda: r.role()[1] >= off_up, args.sync_timeout, 0.005,
                                  "caught up")
            out["caught_up_s"] = t_caught - t0
        else:
            assert bench is not None
            stop_at = min(t_up + 1.0, t0 + args.load_cap)
            ended_early = bench.poll() is not None
            while time.perf_counter() < stop_at and bench.poll() is None:
                if t_caught is None and r.role()[1] >= off_up:
                    t_caught = time.perf_counter()
                time.sleep(0.005)
            ended_early = (ended_early or bench.poll() is not None) and t_stop is None
            t_stop = t_stop or time.perf_counter()
            stop_popen(bench)
            off_stop = stable_offset(m)
            out["load_s"] = t_stop - t0
            out["load_ended_by_itself"] = float(ended_early)
            out["stream_mb_per_s"] = (off_stop - off_start) / 2**20 / (t_stop - t0)
            deadline = time.perf_counter() + args.sync_timeout
            while time.perf_counter() < deadline:
                cur = r.role()[1]
                now = time.perf_counter()
                if t_caught is None and cur >= off_up:
                    t_caught = now
                if cur >= off_stop:
                    out["drained_s"] = now - t0
                    break
                time.sleep(0.005)
            else:
                raise TimeoutError("replica did not drain the stream")
            assert t_caught is not None
            out["caught_up_s"] = t_caught - t0
        sampler.finish()
        if sampler.error is not None:
            raise RuntimeError(f"memory sampler failed: {sampler.error!r}")
        out["master_buf_peak_mb"] = sampler.master_peak / 2**20
        if sampler.replica_peak is not None:
            out["replica_buf_peak_mb"] = sampler.replica_peak / 2**20
        # sanity: the replica holds as many keys as the master
        mk, rk = m.cmd("DBSIZE"), r.cmd("DBSIZE")
        if mk != rk:
            raise AssertionError(f"{kind}: master has {mk} keys, replica {rk}")
        out["keys"] = float(rk)  # type: ignore[arg-type]
        return out
    finally:
        sampler.stop_ev.set()
        if bench is not None:
            stop_popen(bench)
        m.close()
        r.close()
        stop_server(replica)


def section_fullsync(args: argparse.Namespace, res: Results) -> None:
    load_tpl = ["-t", "set", "-n", str(args.load_requests), "-c", "20", "-P", "8",
                "-r", "1000000"]
    for mode in SYNC_MODES:
        for rnd in range(args.rounds):
            for kind in order(rnd):
                margs = mode.master.get(kind)
                if margs is None:
                    continue
                master = start_server(kind, "--repl-diskless-sync-delay", "0", *margs)
                try:
                    m = Conn(master.port, timeout=600)
                    t = time.perf_counter()
                    m.cmd("DEBUG", "POPULATE", args.keys, "key", 100)
                    pop = time.perf_counter() - t
                    m.close()
                    idle = sync_once(kind, mode, master, None, args)
                    load = ["redis-benchmark", "-h", HOST, "-p", str(master.port), "-q",
                            *load_tpl]
                    busy = sync_once(kind, mode, master, load, args)
                finally:
                    stop_server(master)
                p = f"fullsync {mode.name}"
                res.add(f"{p} idle link up s", kind, idle["link_up_s"])
                res.add(f"{p} load link up s", kind, busy["link_up_s"])
                res.add(f"{p} load caught up s", kind, busy["caught_up_s"])
                res.add(f"{p} load drained s", kind, busy["drained_s"])
                res.add(f"{p} load master buf MB", kind, busy["master_buf_peak_mb"])
                if "replica_buf_peak_mb" in busy:
                    res.add(f"{p} load replica buf MB", kind, busy["replica_buf_peak_mb"])
                res.add(f"{p} load stream MB/s", kind, busy["stream_mb_per_s"])
                warn = "  !! load ended by itself before the stop" \
                    if busy["load_ended_by_itself"] else ""
                rb = busy.get("replica_buf_peak_mb")
                print(f"  {mode.name:8} round {rnd + 1} {kind:6}: populate {pop:.2f}s | idle: "
                      f"up {idle['link_up_s']:.2f}s buf {idle['master_buf_peak_mb']:.1f}MB | "
                      f"load: up {busy['link_up_s']:.2f}s caught {busy['caught_up_s']:.2f}s "
                      f"drained {busy['drained_s']:.2f}s (load stopped at "
                      f"{busy['load_s']:.2f}s, stream {busy['stream_mb_per_s']:.1f}MB/s) "
                      f"master buf {busy['master_buf_peak_mb']:.1f}MB replica buf "
                      + (f"{rb:.1f}MB" if rb is not None else "n/a") + warn, flush=True)


# -- 3. partial resync replay ---------------------------------------------------------------

def partial_once(kind: str, n: int, args: argparse.Namespace) -> dict[str, float]:
    master, replica = start_pair(kind, ["--repl-backlog-size", "256mb"])
    m, r = Conn(master.port), Conn(replica.port)
    assert replica.proc is not None
    pid = replica.proc.pid
    stopped = False
    try:
        wait_until(lambda: r.role()[1] == m.role()[1], 30, 0.01, "offsets equal")
        st0 = m.info("stats")
        off0 = m.role()[1]
        os.kill(pid, signal.SIGSTOP)
        stopped = True
        killed = m.cmd("CLIENT", "KILL", "TYPE", "replica")
        if killed != 1:
            raise AssertionError(f"CLIENT KILL TYPE replica killed {killed!r}")
        redis_benchmark(master.port, "set", n, 20, 16, ["-d", "1024", "-r", "100000"])
        target = stable_offset(m)
        seen_down = False
        t_link: float | None = None
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGCONT)
        stopped = False
        deadline = t0 + args.sync_timeout
        while True:
            state, off = r.role()
            now = time.perf_counter()
            if state != "connected":
                seen_down = True
            elif t_link is None and (seen_down or off > off0):
                t_link = now
            if off >= target:
                break
            if now > deadline:
                raise TimeoutError("replica did not catch up after resume")
            time.sleep(0.001)
        t_eq = now
        st1 = m.info("stats")
        full = int(st1["sync_full"]) - int(st0["sync_full"])
        pok = int(st1["sync_partial_ok"]) - int(st0["sync_partial_ok"])
        if full != 0 or pok != 1:
            raise AssertionError(f"{kind}: expected one partial sync, got sync_full +{full}, "
                                 f"sync_partial_ok +{pok}")
        if off != target:
            raise AssertionError(f"{kind}: replica offset {off} past master's {target}")
        return {"resume_to_equal_ms": (t_eq - t0) * 1000,
                "link_ms": ((t_link or t_eq) - t0) * 1000,
                "replay_ms": (t_eq - (t_link or t0)) * 1000,
                "mb": (target - off0) / 1e6}
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        m.close()
        r.close()
        stop_server(replica)
        stop_server(master)


def section_partial(args: argparse.Namespace, res: Results) -> None:
    for n in args.partial_sizes:
        for rnd in range(args.rounds):
            for kind in order(rnd):
                o = partial_once(kind, n, args)
                label = f"partial {n // 1000}k x 1KB"
                res.add(f"{label} resume->equal ms", kind, o["resume_to_equal_ms"])
                res.add(f"{label} link->equal ms", kind, o["replay_ms"])
                print(f"  {n:>7} x 1KB round {rnd + 1} {kind:6}: {o['mb']:.2f} MB replayed, "
                      f"resume->equal {o['resume_to_equal_ms']:.1f} ms (link back after "
                      f"{o['link_ms']:.1f} ms, replay {o['replay_ms']:.1f} ms)", flush=True)


# -- 4. replication lag ---------------------------------------------------------------------

LAG_LOADS: list[tuple[str, int | None]] = [("idle", None), ("SET -P1 -c20", 1),
                                           ("SET -P16 -c20", 16)]


def lag_once(master: ServerProcess, replica: ServerProcess, pipeline: int | None,
             args: argparse.Namespace) -> dict[str, float]:
    bench: subprocess.Popen | None = None
    mc, rc = RawClient(master.port), RawClient(replica.port)
    mi = Conn(master.port)
    key = b"__lag_probe__"
    get = encode_command(b"GET", key)
    lats: list[float] = []
    misses = 0
    try:
        if pipeline is not None:
            bench = subprocess.Popen(
                benchmark_argv(master.port, "set", 1_000_000_000, 20, pipeline,
                               ["-r", "100000"]),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # ramp up
        c0, t_start = int(mi.info("stats")["total_commands_processed"]), time.perf_counter()
        n = 0
        while n < args.lag_probes:
            t_next = t_start + n * 0.02
            now = time.perf_counter()
            if t_next > now:
                time.sleep(t_next - now)
            val = b"%d" % n
            want = b"$%d\r\n%s\r\n" % (len(val), val)
            t = time.perf_counter()
            mc.send_raw(encode_command(b"SET", key, val))
            mc.read_reply()
            while True:
                rc.send_raw(get)
                if rc.read_reply() == want:
                    lats.append((time.perf_counter() - t) * 1000)
                    break
                if time.perf_counter() - t > 2.0:
                    misses += 1  # censored: counted at the time we gave up, so p99 shows it
                    lats.append((time.perf_counter() - t) * 1000)
                    break
            n += 1
        elapsed = time.perf_counter() - t_start
        ops = (int(mi.info("stats")["total_commands_processed"]) - c0) / elapsed
        if bench is not None and bench.poll() is not None:
            raise RuntimeError("background load ended before the probes")
    finally:
        if bench is not None:
            stop_popen(bench)
        mc.close()
        rc.close()
        mi.close()
    return {"p50_ms": percentile(lats, 50), "p99_ms": percentile(lats, 99),
            "max_ms": max(lats) if lats else float("nan"), "probes": float(len(lats)),
            "misses": float(misses), "ops_per_s": ops}


def section_lag(args: argparse.Namespace, res: Results) -> None:
    for rnd in range(args.rounds):
        for kind in order(rnd):
            master, replica = start_pair(kind)
            try:
                for label, pipeline in LAG_LOADS:
                    o = lag_once(master, replica, pipeline, args)
                    res.add(f"lag {label} p50 ms", kind, o["p50_ms"])
                    res.add(f"lag {label} p99 ms", kind, o["p99_ms"])
                    res.add(f"lag {label} load ops/s", kind, o["ops_per_s"])
                    miss = f"  !! {o['misses']:.0f} probes not seen within 2 s" \
                        if o["misses"] else ""
                    print(f"  round {rnd + 1} {kind:6} {label:13}: p50 {o['p50_ms']:.2f} ms "
                          f"p99 {o['p99_ms']:.2f} ms max {o['max_ms']:.2f} ms "
                          f"({o['probes']:.0f} probes, master {o['ops_per_s']:,.0f} ops/s)"
                          + miss, flush=True)
            finally:
                stop_server(replica)
                stop_server(master)


# -- results --------------------------------------------------------------------------------

def order(rnd: int) -> list[str]:
    return list(KINDS) if rnd % 2 == 0 else list(reversed(KINDS))


# goals: metric-name predicate -> (comparison, ratio bound)
GOALS: list[tuple[Callable[[str], bool], str, float]] = [
    (lambda k: k.startswith("throughput") and k.endswith(" -P1"), ">=", 0.9),
    (lambda k: k in ("throughput SET -P16", "throughput GET -P16"), ">=", 0.5),
    (lambda k: k.startswith("fullsync") and k.endswith(" s"), "<=", 2.0),
    (lambda k: k.startswith("partial") and k.endswith("ms"), "<=", 2.0),
    (lambda k: k.startswith("lag") and "p99" in k, "<=", 2.0),
]


class Results:
    def __init__(self) -> None:
        self.data: dict[str, dict[str, list[float]]] = {}

    def add(self, metric: str, kind: str, value: float) -> None:
        self.data.setdefault(metric, {}).setdefault(kind, []).append(value)

    def summary(self) -> dict[str, dict[str, object]]:
        out: dict[str, dict[str, object]] = {}
        for metric, by in self.data.items():
            a, b = median(by.get("pyrepl", [])), median(by.get("redis", []))
            note = ""
            if b != b and metric.startswith("fullsync rdbchannel"):
                # Debian's Redis 7.0.15 has no rdb channel: compare with its diskless sync of
                # the same run (ANCHORS: Redis 8's rdb channel caught up in 5.17 s vs 7.00 s).
                twin = self.data.get(metric.replace("rdbchannel", "diskless"), {})
                b = median(twin.get("redis", []))
                note = " (vs redis diskless)"
            ratio = a / b if b and b == b else float("nan")
            goal = ""
            for pred, cmp, bound in GOALS:
                if pred(metric) and ratio == ratio:
                    ok = ratio >= bound if cmp == ">=" else ratio <= bound
                    goal = f"{cmp} {bound:g}: {'ok' if ok else 'MISSED'}{note}"
            if "caught up after" in metric:   # issue 15: within a second of the load's end
                goal = f"<= 1000 ms: {'ok' if a <= 1000 else 'MISSED'}"
            if metric == "fullsync rdbchannel load master buf MB":
                # issue 4: master peak <= backlog (1 MB) + 1 MB with the rdb channel
                goal = f"<= 2 MB: {'ok' if a <= 2.0 else 'MISSED'}"
            if "floor" in by:
                to_floor = a / median(by["floor"])
                goal += f"; {to_floor:.2f}x the floor"
                if metric.endswith("-P16"):
                    goal += f" (>= 0.8: {'ok' if to_floor >= 0.8 else 'MISSED'})"
            out[metric] = {"pyrepl": a, "redis": b, "ratio": ratio, "goal": goal,
                           "runs": {k: v for k, v in by.items()}}
        return out

    def print_table(self) -> None:
        s = self.summary()
        w = max((len(k) for k in s), default=10)
        print(f"\n{'figure (median)':{w}} {'pyrepl':>12} {'redis':>12} {'ratio':>7}  goal")
        for k, v in s.items():
            print(f"{k:{w}} {fmt(v['pyrepl'])} {fmt(v['redis'])} "  # type: ignore[arg-type]
                  f"{v['ratio']:7.2f}  {v['goal']}")


def fmt(x: float) -> str:
    if x != x:
        return f"{'n/a':>12}"
    return f"{x:12,.0f}" if abs(x) >= 1000 else f"{x:12.3f}"


SECTIONS: dict[str, Callable[[argparse.Namespace, Results], None]] = {
    "throughput": section_throughput, "fullsync": section_fullsync,
    "partial": section_partial, "lag": section_lag,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes, one round: a smoke run")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="comma-separated sections: " + ",".join(SECTIONS))
    ap.add_argument("--json", help="write the summary here too")
    args = ap.parse_args()
    if args.quick:
        args.rounds = 1
        args.tp_requests, args.keys, args.load_requests = 50_000, 100_000, 300_000
        args.partial_sizes, args.lag_probes = [2_000, 20_000], 100
    else:
        args.tp_requests, args.keys, args.load_requests = 300_000, 1_000_000, 2_000_000
        args.partial_sizes, args.lag_probes = [10_000, 100_000], 300
    args.load_cap, args.sync_timeout = 30.0, 120.0
    res = Results()
    t_all = time.perf_counter()
    for name in args.only.split(","):
        print(f"## {name}", flush=True)
        t = time.perf_counter()
        SECTIONS[name](args, res)
        print(f"   ({time.perf_counter() - t:.0f} s)", flush=True)
    res.print_table()
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s, rounds {args.rounds}"
          f"{' (quick)' if args.quick else ''}")
    write_json(args.json, res.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
