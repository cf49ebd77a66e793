"""Shared helpers of the AOF tests (tests/e2e/test_aof_durability.py,
tests/interop/test_aof_interop.py): one server process started the same way whichever binary
runs it (real ``redis-server`` 7.0.15 or pyrepl, redis-server's own command-line flags), a
crash that leaves no orphan (the server and its fork children SIGKILLed together), a start that
must fail without ever serving, waits on AOF rewrites, the appendonlydir's files, RESP for
hand-written AOF files, a writer that records every acknowledged write, and a dataset snapshot
that compares two servers without any pyrepl internals (DEBUG DIGEST, then key by key).

Everything is on 127.0.0.1; every wait is bounded (``waits.wait_for``); every process a test
starts is stopped by its PID (``ServerProcess.stop`` / :func:`crash`).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyrepl.collect.info import parse_info
from tests.support.checks import scan_pages
from tests.support.lua import LIB
from tests.support.procs import (
    ServerProcess,
    free_port,
    pyrepl_argv,
    redis8_server_path,
    redis_server_path,
)
from tests.support.resp import RawClient, RespError, parse_reply
from tests.support.waits import wait_for

#: The two servers every AOF test runs against; "redis" is the reference.
SERVERS = ("redis", "pyrepl")
AOF_DIR = "appendonlydir"
AOF_NAME = "appendonly.aof"
MANIFEST = f"{AOF_NAME}.manifest"
DATABASES = 16

_started = 0  # a per-process counter: each start gets a log file of its own


def need_redis() -> str:
    """The redis-server binary, or the test is skipped (saying why)."""
    import pytest

    exe = redis_server_path()
    if exe is None:
        pytest.skip("redis-server is not installed (the test command installs it)")
    return exe


def need_redis8() -> str:
    """The Redis 8 build of ``make redis-src``, or the test is skipped (saying why)."""
    import pytest

    exe = redis8_server_path()
    if exe is None:
        pytest.skip("the Redis 8 build (make redis-src) is missing: "
                    ".cache/redis-src/redis-8/src/redis-server")
    return exe


def server_argv(kind: str, port: int, directory: str, *extra: str) -> list[str]:
    """The command line of ``kind`` ("redis", "redis8" or "pyrepl") on 127.0.0.1:``port`` in
    ``directory``: DEBUG enabled, no RDB save points unless ``extra`` has ``--save``, then
    ``extra`` (redis-server's flags, which pyrepl accepts too)."""
    if kind == "pyrepl":
        return pyrepl_argv("master", port, directory, *extra)
    assert kind in ("redis", "redis8"), kind
    argv = [need_redis() if kind == "redis" else need_redis8(), "--port", str(port), "--bind", "127.0.0.1", "--dir", directory,
            "--daemonize", "no", "--protected-mode", "no", "--enable-debug-command", "yes"]
    if "--save" not in extra:
        argv += ["--save", ""]
    return argv + list(extra)


def new_server(kind: str, directory: str, *extra: str, port: int | None = None,
               ready: Callable[[], bool] | None = None) -> ServerProcess:
    """A ServerProcess of ``kind`` (not started) whose log is a new file in ``directory``."""
    global _started
    _started += 1
    port = port or free_port()
    name = f"{kind}-{port}-{_started}"
    return ServerProcess(server_argv(kind, port, directory, *extra), port, directory, name,
                         ready=ready)


def start_server(kind: str, directory: str, *extra: str, timeout: float = 60) -> ServerProcess:
    """``kind`` started in ``directory`` and done loading its dataset (no ``-LOADING``)."""
    srv = new_server(kind, directory, *extra).start(timeout)
    try:
        wait_loaded(srv.port, timeout)
    except BaseException:
        srv.stop()
        raise
    return srv


def aof_flags(*extra: str) -> tuple[str, ...]:
    return ("--appendonly", "yes", *extra)


def wait_loaded(port: int, timeout: float = 60) -> None:
    """Until PING answers +PONG (a server loading its AOF answers -LOADING)."""

    def pong() -> bool:
        with RawClient(port, timeout=5) as c:
            return c.call("PING") == b"+PONG\r\n"

    wait_for(pong, timeout, interval=0.05, what=f"the server on {port} to finish loading")


def cmd(port: int, *args: str | int | bytes, db: int = 0) -> object:
    """One command on a fresh connection (after SELECT ``db``), its reply parsed; an error
    reply is raised."""
    with RawClient(port, timeout=30) as c:
        if db:
            assert c.call("SELECT", db) == b"+OK\r\n"
        out = parse_reply(c.call(*args))
    if isinstance(out, RespError):
        raise out
    return out


def info(port: int, section: str = "persistence") -> dict[str, str]:
    raw = cmd(port, "INFO", section)
    assert isinstance(raw, bytes), raw
    return parse_info(raw.decode())


def shutdown(srv: ServerProcess, timeout: float = 30) -> int | None:
    """SHUTDOWN (the server's own clean stop), then its exit code."""
    try:
        with RawClient(srv.port, timeout=timeout) as c:
            c.send("SHUTDOWN")
            try:
                c.read_reply()  # an error reply when it refuses; nothing when it exits
            except (ConnectionError, OSError):
                pass
    except OSError:
        pass
    wait_for(lambda: not srv.alive(), timeout, what=f"{srv.name} to exit after SHUTDOWN")
    return srv.stop()


# -- crashes -------------------------------------------------------------------------------

def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def crash(srv: ServerProcess) -> None:
    """kill -9 of the server and of every process it forked (a rewrite or save child), so a
    crash leaves no orphan writing into the directory: the server is SIGSTOPped first (it
    forks nothing more), its descendants are found by their parent PID, then all of them are
    SIGKILLed, each by its PID."""
    p = srv.proc
    assert p is not None
    if p.poll() is not None:
        srv.stop()
        return
    os.kill(p.pid, signal.SIGSTOP)
    family: list[int] = []
    todo = [p.pid]
    while todo and len(family) < 1000:
        kids = _children(todo.pop())
        family += kids
        todo += kids
    srv.kill()  # SIGKILL, then waits for it
    for pid in family:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in family:
        wait_for(lambda pid=pid: not _alive(pid), 10, what=f"child {pid} of {srv.name} gone")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] != b"Z"


# -- a start that must fail ----------------------------------------------------------------

@dataclass
class FailedStart:
    returncode: int | None  # None: it did not exit by itself
    log: str
    served: bytes | None  # what a client was answered while the process was up, if anything


def start_expecting_failure(kind: str, directory: str, *extra: str, probe_key: str = "k",
                            timeout: float = 30) -> FailedStart:
    """Start ``kind`` where it must refuse to start. Meanwhile a client asks ``GET probe_key``
    over and over: anything but ``-LOADING`` (or no connection) means the process served
    data. A process still up at the end (it served, or hung) is stopped by its PID."""
    served: list[bytes] = []
    port = free_port()

    def probe() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                s.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(probe_key),
                                                                 probe_key.encode()))
                data = s.recv(4096)
        except OSError:
            return False
        if data and not data.startswith(b"-LOADING"):
            served.append(data)
            return True
        return False

    srv = new_server(kind, directory, *extra, port=port, ready=probe)
    hung = False
    try:
        srv.start(timeout)
    except RuntimeError:  # it exited by itself: what we want
        pass
    except AssertionError:  # neither exited nor served in time (start() stopped it)
        hung = True
    code = srv.stop(signal.SIGKILL) if srv.alive() else srv.stop()
    if served or hung:
        code = None
    return FailedStart(code, srv.log(), served[0] if served else None)


def assert_refused(out: FailedStart, pattern: str) -> None:
    """A clear failure to start: a non-zero exit, one log line matching ``pattern`` (a regular
    expression), and nothing served meanwhile."""
    assert out.served is None, f"it served {out.served!r} instead of refusing:\n{out.log}"
    assert out.returncode is not None, f"it did not exit by itself:\n{out.log}"
    assert out.returncode != 0, f"exit code 0:\n{out.log}"
    assert re.search(pattern, out.log), f"no log line matching {pattern!r}:\n{out.log}"
    # one message (no alternatives in the pattern) is logged once: Redis's own tests count
    # these lines, so an error logged again on the way out is one too many
    if "|" not in pattern:
        assert len(re.findall(pattern, out.log)) == 1, f"{pattern!r} more than once:\n{out.log}"


# -- the appendonlydir ---------------------------------------------------------------------

def aof_path(directory: str, *parts: str, dirname: str = AOF_DIR) -> str:
    return os.path.join(directory, dirname, *parts)


def manifest_text(directory: str, dirname: str = AOF_DIR, name: str = AOF_NAME) -> str:
    with open(aof_path(directory, f"{name}.manifest", dirname=dirname), "rb") as f:
        return f.read().decode("utf-8", "surrogateescape")


def aof_files(directory: str, dirname: str = AOF_DIR) -> list[str]:
    return sorted(os.listdir(os.path.join(directory, dirname)))


def manifest_lines(*entries: tuple[str, int, str], name: str = AOF_NAME) -> str:
    """Redis's manifest text for ``(suffix, seq, type)`` entries, e.g.
    ``("1.base.rdb", 1, "b")`` -> ``file appendonly.aof.1.base.rdb seq 1 type b``."""
    return "".join(f"file {name}.{suffix} seq {seq} type {t}\n" if suffix else
                   f"file {name} seq {seq} type {t}\n" for suffix, seq, t in entries)


def write_file(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def resp(*args: str | int | bytes) -> bytes:
    """One command as the AOF holds it (a RESP array of bulk strings)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def aof_items(data: bytes) -> list[tuple[str, object]]:
    """An AOF's RESP part, item by item: ``("ts", b"#TS:...")`` for an annotation line,
    ``("cmd", [arg, ...])`` for a command; anything else is an AssertionError."""
    out: list[tuple[str, object]] = []
    pos = 0
    while pos < len(data):
        eol = data.index(b"\r\n", pos)
        line = data[pos:eol]
        pos = eol + 2
        if line.startswith(b"#"):
            out.append(("ts", line))
            continue
        assert line.startswith(b"*"), f"not a command at offset {pos}: {line[:40]!r}"
        args = []
        for _ in range(int(line[1:])):
            eol = data.index(b"\r\n", pos)
            assert data[pos:pos + 1] == b"$", data[pos:pos + 40]
            n = int(data[pos + 1:eol])
            args.append(data[eol + 2:eol + 2 + n])
            assert data[eol + 2 + n:eol + 4 + n] == b"\r\n"
            pos = eol + 4 + n
        out.append(("cmd", args))
    return out


def rewrite(port: int, directory: str, dirname: str = AOF_DIR, name: str = AOF_NAME,
            timeout: float = 60) -> str:
    """BGREWRITEAOF, then wait until it is over: the manifest names another base, and INFO
    shows no rewrite in progress or scheduled. Returns the new manifest."""
    before = manifest_text(directory, dirname, name)
    base = before.split("\n", 1)[0]
    reply = cmd(port, "BGREWRITEAOF")
    assert isinstance(reply, bytes) and b"rewriting" in reply, reply

    def done() -> bool:
        i = info(port)
        return (i.get("aof_rewrite_in_progress") == "0" and i.get("aof_rewrite_scheduled") == "0"
                and manifest_text(directory, dirname, name).split("\n", 1)[0] != base)

    wait_for(done, timeout, interval=0.05, what="BGREWRITEAOF to finish")
    assert info(port)["aof_last_bgrewrite_status"] == "ok"
    return manifest_text(directory, dirname, name)


def wait_files(directory: str, want: Iterable[str], dirname: str = AOF_DIR,
               timeout: float = 15) -> None:
    """Until the appendonlydir holds exactly ``want`` (history files go in the background)."""
    want = sorted(want)
    wait_for(lambda: aof_files(directory, dirname) == want, timeout,
             what=f"{dirname} to hold exactly {want} (has {aof_files(directory, dirname)})")


# -- a writer that records every acknowledged write ----------------------------------------

class AckWriter(threading.Thread):
    """One redis-py connection, no pipelining, no retries: ``INCR {p}counter``,
    ``SET {p}key:i i``, ``RPUSH {p}list i`` for i = 0, 1, ... as fast as the server answers.
    ``acked`` counts the acknowledged writes, ``ack_times[n]`` is when write n was
    acknowledged (time.monotonic). It stops at the first error (the kill: recorded in
    ``ended_by``), on ``stop()``, or at its bounds. Replies are checked as they come (INCR's
    value is the count so far), so a server that loses a write while running fails too."""

    def __init__(self, port: int, prefix: str, max_seconds: float = 60,
                 max_ops: int = 3_000_000) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.prefix = prefix
        self.max_seconds = max_seconds
        self.max_ops = max_ops
        self.acked = 0
        self.ack_times: list[float] = []
        self.ended_by: BaseException | None = None
        self.wrong: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        p = self.prefix
        deadline = time.monotonic() + self.max_seconds
        try:
            c = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=20, protocol=2,
                            retry=Retry(NoBackoff(), 0))
            i = 0
            while not self._stop_event.is_set() and self.acked < self.max_ops \
                    and time.monotonic() < deadline:
                got = c.incr(f"{p}counter")
                self._ack()
                if got != i + 1:
                    self.wrong = f"INCR {p}counter answered {got}, want {i + 1}"
                    return
                c.set(f"{p}key:{i}", i)
                self._ack()
                got = c.rpush(f"{p}list", i)
                self._ack()
                if got != i + 1:
                    self.wrong = f"RPUSH {p}list answered {got}, want {i + 1}"
                    return
                i += 1
        except Exception as e:  # noqa: BLE001 - the kill ends the writer; the test judges
            self.ended_by = e

    def _ack(self) -> None:
        self.ack_times.append(time.monotonic())
        self.acked += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)
        assert not self.is_alive()

    def acked_before(self, t: float) -> int:
        """How many writes were acknowledged at or before ``t``."""
        import bisect

        return bisect.bisect_right(self.ack_times, t)


def recovered_prefix(port: int, prefix: str) -> int:
    """The length of the prefix of an AckWriter's write sequence the server holds, after
    checking that what it holds *is* a prefix (no hole, no reordering, right values):
    after m writes the counter is ceil(m/3), key:0..ceil((m-1)/3)-1 exist, the list holds
    0..floor(m/3)-1."""
    counter = cmd(port, "GET", f"{prefix}counter")
    c = int(counter) if counter is not None else 0  # type: ignore[arg-type]
    lst = cmd(port, "LRANGE", f"{prefix}list", 0, -1)
    assert isinstance(lst, list)
    want_list = [str(i).encode() for i in range(len(lst))]
    assert lst == want_list, f"{prefix}list is not 0..n-1: {lst[:5]}...{lst[-5:]}"
    values: list[object] = []
    for start in range(0, c + 2, 5000):
        keys = [f"{prefix}key:{i}" for i in range(start, min(c + 2, start + 5000))]
        got = cmd(port, "MGET", *keys)
        assert isinstance(got, list)
        values += got
    present = [i for i, v in enumerate(values) if v is not None]
    s = len(present)
    assert present == list(range(s)), f"{prefix}key:* has holes: {present[:10]}..."
    for i in present:
        assert values[i] == str(i).encode(), (i, values[i])
    ell = len(lst)
    assert c >= s >= ell >= c - 1, f"{prefix}: counter {c}, keys {s}, list {ell}: not a prefix"
    return c + s + ell


# -- a dataset snapshot, compared key by key -------------------------------------------------

#: XINFO STREAM FULL fields a reload legitimately changes (Redis itself does not keep them
#: through an AOF: the radix tree's shape, a consumer's seen-time is the load time, and a
#: group's entries-read / lag are not propagated by XREADGROUP in 7.0).
STREAM_VOLATILE = {b"radix-tree-keys", b"radix-tree-nodes", b"seen-time", b"active-time",
                   b"entries-read", b"lag"}


def _pairs(flat: list) -> dict:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def normalize_stream(full: list) -> dict:
    top = _pairs(full)
    groups = []
    for g in top.get(b"groups") or []:
        gd = _pairs(g)
        gd[b"consumers"] = sorted(
            ({k: v for k, v in _pairs(c).items() if k not in STREAM_VOLATILE}
             for c in gd.get(b"consumers") or []), key=lambda c: c[b"name"])
        groups.append({k: v for k, v in gd.items() if k not in STREAM_VOLATILE})
    top[b"groups"] = sorted(groups, key=lambda g: g[b"name"])
    return {k: v for k, v in top.items()
            if k not in STREAM_VOLATILE and k not in REDIS8_STREAM_FIELDS}


# What Redis 8.6's XINFO STREAM FULL adds (its idempotent producers), with their defaults for a
# stream that never used them: left out of the comparison with servers that do not have them.
REDIS8_STREAM_FIELDS = {b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked",
                        b"iids-added", b"iids-duplicates"}


def normalize_functions(listing: list) -> list:
    libs = []
    for lib in listing:
        d = _pairs(lib)
        fns = []
        for fn in d.get(b"functions") or []:
            fd = _pairs(fn)
            fd[b"flags"] = sorted(fd.get(b"flags") or [])
            fns.append(fd)
        d[b"functions"] = sorted(fns, key=lambda f: f[b"name"])
        libs.append(d)
    return sorted(libs, key=lambda d: d[b"library_name"])


def key_value(c: RawClient, key: bytes, kind: bytes) -> object:
    def q(*args: object) -> object:
        out = parse_reply(c.call(*args))  # type: ignore[arg-type]
        assert not isinstance(out, RespError), (args, out)
        return out

    if kind == b"string":
        return q("GET", key)
    if kind == b"list":
        return q("LRANGE", key, 0, -1)
    if kind == b"set":
        return sorted(q("SMEMBERS", key))  # type: ignore[arg-type]
    if kind == b"zset":   # (scores as doubles: Redis 8 prints them shortest, 7.0 with %.17g)
        flat = q("ZRANGE", key, 0, -1, "WITHSCORES")
        return [(m, float(v)) for m, v in zip(flat[::2], flat[1::2], strict=True)]  # type: ignore
    if kind == b"hash":
        return sorted(_pairs(q("HGETALL", key)).items())  # type: ignore[arg-type]
    if kind == b"stream":
        return normalize_stream(q("XINFO", "STREAM", key, "FULL", "COUNT", 0))  # type: ignore
    raise AssertionError(f"unexpected type {kind!r} of {key!r}")


def snapshot(port: int) -> dict:
    """The dataset of the server on ``port``: FUNCTION LIST WITHCODE, per (db, key) its type,
    value, absolute expire time (PEXPIRETIME: Redis propagates absolute times, so a reload
    keeps the same instant) and DEBUG DIGEST-VALUE, then DEBUG DIGEST."""
    out: dict = {"keys": {}}
    with RawClient(port, timeout=60) as c:
        out["functions"] = normalize_functions(parse_reply(c.call("FUNCTION", "LIST",
                                                                  "WITHCODE")))
        for db in range(DATABASES):
            assert c.call("SELECT", db) == b"+OK\r\n"

            def page(cursor: int) -> tuple[int, object]:
                cur, keys = parse_reply(c.call("SCAN", cursor, "COUNT", 1000))
                return int(cur), keys

            for keys in scan_pages(page):
                for key in keys:
                    kind = parse_reply(c.call("TYPE", key))
                    assert isinstance(kind, bytes), kind
                    if kind == b"none":
                        continue
                    out["keys"][(db, key)] = (
                        kind, key_value(c, key, kind),
                        parse_reply(c.call("PEXPIRETIME", key)),
                        parse_reply(c.call("DEBUG", "DIGEST-VALUE", key)))
        # after the walk: Redis keeps a key whose expire time passed while it loaded an AOF
        # (it expires nothing while loading) and DEBUG DIGEST counts it until it is reclaimed;
        # the walk's lookups reclaim it
        out["digest"] = parse_reply(c.call("DEBUG", "DIGEST"))
    return out


def assert_same_dataset(got: dict, want: dict, what: str = "dataset",
                        cross_version: bool = False) -> None:
    """Two snapshots are the same dataset; the message names the first keys that differ.
    ``cross_version``: one side is Redis 8, whose DEBUG DIGEST(-VALUE) of a sorted set hashes
    each score as its shortest text where Redis 7.0 (and pyrepl) hash "%.17g": the scores are
    compared as doubles, and those digests are left out."""
    if cross_version:
        got, want = (_without_zset_digests(x) for x in (got, want))
    missing = sorted(set(want["keys"]) - set(got["keys"]))
    extra = sorted(set(got["keys"]) - set(want["keys"]))
    differ = sorted(k for k in set(want["keys"]) & set(got["keys"])
                    if want["keys"][k] != got["keys"][k])
    lines = []
    if missing:
        lines.append(f"missing keys: {missing[:10]}")
    if extra:
        lines.append(f"extra keys: {extra[:10]}")
    for k in differ[:5]:
        lines.append(f"{k}:\n    want {want['keys'][k]!r:.600}\n    got  {got['keys'][k]!r:.600}")
    if got["functions"] != want["functions"]:
        lines.append(f"functions:\n    want {want['functions']!r}\n    got  {got['functions']!r}")
    assert not lines, f"{what} differs ({len(missing)} missing, {len(extra)} extra, " \
                      f"{len(differ)} different):\n" + "\n".join(lines)
    assert cross_version or got["digest"] == want["digest"], f"{what}: DEBUG DIGEST differs"


def _without_zset_digests(snap: dict) -> dict:
    keys = {k: (v[:3] if v[0] == b"zset" else v) for k, v in snap["keys"].items()}
    return {**snap, "keys": keys}


# -- a dataset of every type ----------------------------------------------------------------

def fill_every_type(port: int, tag: str) -> None:
    """Writes of every type, in several dbs, through the commands whose AOF form is
    interesting (relative TTLs, SPOP, INCRBYFLOAT, XREADGROUP/XCLAIM, MULTI/EXEC, scripts,
    functions, SWAPDB...). ``tag`` makes the keys of a second call distinct."""
    t = tag
    with RawClient(port, timeout=30) as c:
        def ok(*args: object) -> object:
            out = parse_reply(c.call(*args))  # type: ignore[arg-type]
            assert not isinstance(out, RespError), (args, out)
            return out

        ok("SELECT", 0)
        ok("SET", f"{t}:str", "hello")
        ok("SET", f"{t}:int", 12345)
        ok("SET", f"{t}:big", "x" * 70000)
        ok("APPEND", f"{t}:str", " world")
        ok("INCRBYFLOAT", f"{t}:float", "1.5")
        ok("SET", f"{t}:ttl-ex", "v", "EX", 100000)
        ok("SETEX", f"{t}:ttl-setex", 200000, "v")
        ok("SET", f"{t}:ttl-expire", "v")
        ok("EXPIRE", f"{t}:ttl-expire", 300000)
        ok("SET", f"{t}:ttl-at", "v")
        ok("PEXPIREAT", f"{t}:ttl-at", int(time.time() * 1000) + 400_000_000)
        ok("SET", f"{t}:gone", "v")
        ok("PEXPIREAT", f"{t}:gone", 1000)  # in the past: deleted
        ok("SET", f"{t}:deleted", "v")
        ok("DEL", f"{t}:deleted")
        ok("RPUSH", f"{t}:list", "a", "b", "1", "2" * 100)
        ok("RPUSH", f"{t}:biglist", *map(str, range(300)))
        ok("LPUSH", f"{t}:biglist", "head")
        ok("LPOP", f"{t}:list")
        ok("SADD", f"{t}:intset", 1, 2, 3)
        ok("SADD", f"{t}:set", "x", "y", "z", "w")
        ok("SPOP", f"{t}:set")
        ok("SADD", f"{t}:bigset", *(f"m{i}" for i in range(200)))
        ok("HSET", f"{t}:hash", "f", "v", "n", 1)
        ok("HINCRBY", f"{t}:hash", "n", 41)
        ok("HSET", f"{t}:bighash", *(x for i in range(200) for x in (f"f{i}", "v" * (i % 70))))
        ok("ZADD", f"{t}:zset", "1.5", "m", "2", "n", "-inf", "low")
        ok("ZINCRBY", f"{t}:zset", "0.25", "m")
        ok("ZADD", f"{t}:bigzset", *(x for i in range(200) for x in (str(i / 3), f"z{i}")))
        ok("ZPOPMIN", f"{t}:bigzset")
        ok("MULTI")
        ok("INCR", f"{t}:tx")
        ok("RPUSH", f"{t}:txlist", "in-multi")
        ok("EXEC")
        ok("EVAL", "redis.call('set', KEYS[1], ARGV[1]) return redis.call('incr', KEYS[2])",
           2, f"{t}:eval", f"{t}:evalcount", "from-lua")
        ok("RENAME", f"{t}:int", f"{t}:renamed")
        # a stream with consumer groups, pending entries, deletions and a trim
        st = f"{t}:stream"
        for i in range(1, 8):
            ok("XADD", st, f"{i}-1", "field", f"v{i}", "n", i)
        ok("XGROUP", "CREATE", st, "g1", "0")
        ok("XGROUP", "CREATE", st, "g2", "$")
        ok("XGROUP", "CREATECONSUMER", st, "g2", "idle")
        ok("XREADGROUP", "GROUP", "g1", "alice", "COUNT", 3, "STREAMS", st, ">")
        ok("XREADGROUP", "GROUP", "g1", "bob", "COUNT", 2, "STREAMS", st, ">")
        ok("XACK", st, "g1", "2-1")
        ok("XCLAIM", st, "g1", "carol", 0, "1-1")
        ok("XDEL", st, "6-1")
        ok("XADD", f"{t}:trimmed", "MAXLEN", 3, "*", "a", 1)
        for i in range(5):
            ok("XADD", f"{t}:trimmed", "MAXLEN", 3, "*", "a", i)
        # functions, called too
        ok("FUNCTION", "LOAD", "REPLACE", LIB)
        ok("FCALL", "put", 1, f"{t}:fcall", "by-function")
        # other dbs
        ok("SELECT", 1)
        ok("SET", f"{t}:db1", "one")
        ok("HSET", f"{t}:db1hash", "a", "b")
        ok("SET", f"{t}:moved", "m")
        ok("MOVE", f"{t}:moved", 2)
        ok("SELECT", 5)
        ok("RPUSH", f"{t}:db5list", "x", "y")
        ok("SET", f"{t}:db5ttl", "v", "PX", 500_000_000)
        ok("SELECT", 15)
        ok("ZADD", f"{t}:db15zset", 1, "a")
        ok("SELECT", 7)
        ok("SET", f"{t}:flushed", "v")
        ok("FLUSHDB")
        ok("SET", f"{t}:after-flush", "v")
        ok("SELECT", 0)
        ok("SWAPDB", 3, 4)
        ok("SELECT", 3)
        ok("SET", f"{t}:db3", "three")
