"""Test support: free ports, polling waits, real server processes, a raw RESP client, and an
in-memory network (MemNet and friends) that wires real ServerCores together at the OS boundary
for sans-io replication tests (real cores, real bytes; only sockets and fork are replaced).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoadWriter(threading.Thread):
    """A write load on a master until stopped, bounded in count and time: pipelines of SET
    ``load:N`` + INCR ``load:counter`` (so the counter is ``ops // 2``), with an RPUSH and an
    HSET now and then. ``finish`` stops it and re-raises what it met; leaving a ``with`` block
    stops it."""

    def __init__(self, port: int, max_ops: int = 5_000_000, max_seconds: float = 120,
                 value_size: int = 0) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.max_ops = max_ops
        self.max_seconds = max_seconds
        self.value = "v" * value_size
        self.stop_event = threading.Event()
        self.ops = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        import redis

        deadline = time.monotonic() + self.max_seconds
        try:
            with redis.Redis(port=self.port, socket_timeout=30) as c:
                i = 0
                while not self.stop_event.is_set() and self.ops < self.max_ops \
                        and time.monotonic() < deadline:
                    p = c.pipeline(transaction=False)
                    for _ in range(50):
                        i += 1
                        p.set(f"load:{i % 5000}", f"{i}{self.value}")
                        p.incr("load:counter")
                        if i % 7 == 0:
                            p.rpush(f"load:list:{i % 13}", i)
                        if i % 11 == 0:
                            p.hset("load:hash", f"f{i % 300}", i)
                    p.execute()
                    self.ops += 100
        except BaseException as e:  # noqa: BLE001 - reported by finish()
            self.error = e

    def finish(self) -> None:
        self.stop_event.set()
        self.join(30)
        assert not self.is_alive()
        assert self.error is None, self.error

    def __enter__(self) -> LoadWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()


def wait_for(cond: Callable[[], object], timeout: float = 10.0, interval: float = 0.02,
             what: str = "condition") -> object:
    """Poll ``cond`` until it returns a truthy value; raise AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - keep polling until the deadline
            last_exc = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                         + (f" (last error: {last_exc!r})" if last_exc else ""))


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            data = s.recv(64)
            return data.startswith(b"+PONG") or data.startswith(b"-NOAUTH") \
                or data.startswith(b"-LOADING")
    except OSError:
        return False


class ServerProcess:
    """A server process on 127.0.0.1:port with its own temporary directory; as a context
    manager, stopped on the way out."""

    def __init__(self, argv: list[str], port: int, tmpdir: str, name: str,
                 env: dict[str, str] | None = None,
                 ready: Callable[[], bool] | None = None) -> None:
        self.argv = argv
        self.port = port
        self.dir = tmpdir
        self.name = name
        self.env = env
        self.ready = ready or (lambda: _ping(self.port))
        self.logpath = os.path.join(tmpdir, f"{name}.log")
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20.0) -> ServerProcess:
        log = open(self.logpath, "ab")  # noqa: SIM115 - closed in stop()
        self._log = log
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.dir, env=self.env)
        try:
            wait_for(lambda: self.proc.poll() is not None or self.ready(), timeout,
                     what=f"{self.name} to accept connections")
        except AssertionError:
            self.stop()
            raise
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log()}")
        return self

    def log(self) -> str:
        try:
            with open(self.logpath, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        p = self.proc
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self._log.close()
        return p.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def pyrepl_argv(role: str, port: int, tmpdir: str, *extra: str) -> list[str]:
    argv = [sys.executable, "-m", "pyrepl.cli.main", role, "--port", str(port), "--dir", tmpdir,
            "--bind", "127.0.0.1"]
    if "--save" not in extra:
        argv += ["--save", ""]
    if "--enable-debug-command" not in extra:
        argv += ["--enable-debug-command", "yes"]   # as Redis's own test suite runs its servers
    return argv + list(extra)


def start_pyrepl_on_rdb(directory: str) -> ServerProcess:
    """A pyrepl loading a copy of ``directory``'s dump.rdb (in a directory of its own)."""
    target = tempfile.mkdtemp(prefix="pyrepl-rdb-")
    shutil.copy(os.path.join(directory, "dump.rdb"), os.path.join(target, "dump.rdb"))
    return start_pyrepl(tmpdir=target)


def start_pyrepl(*extra: str, role: str = "master", tmpdir: str | None = None,
                 port: int | None = None) -> ServerProcess:
    tmpdir = tmpdir or tempfile.mkdtemp(prefix="pyrepl-test-")
    port = port or free_port()
    return ServerProcess(pyrepl_argv(role, port, tmpdir, *extra), port, tmpdir,
                         f"pyrepl-{port}").start()


# -- redis-py views of a running server (e2e, interop and analytics tests) ------------------------

def r(port: int, db: int = 0, timeout: float = 20):  # -> redis.Redis
    """A redis-py client of the server on ``port`` (imported late: unit tests do not need it)."""
    import redis
    return redis.Redis(port=port, db=db, socket_timeout=timeout)


def repl(port: int) -> dict:
    """``INFO replication`` of the server on ``port``."""
    with r(port) as c:
        return c.info("replication")


def digest(port: int) -> str:
    """``DEBUG DIGEST`` of the server on ``port``, as text."""
    with r(port) as c:
        return c.execute_command("DEBUG", "DIGEST").decode()


def in_sync(master: int, *replicas: int) -> bool:
    """Every replica's link is up and at the master's ``master_repl_offset``."""
    off = repl(master)["master_repl_offset"]
    for p in replicas:
        i = repl(p)
        if i.get("master_link_status") != "up" or i.get("slave_repl_offset") != off:
            return False
    return True


def wait_offsets(master: int, *replicas: int, timeout: float = 60) -> None:
    """Wait for ``in_sync`` (no digest: for servers without DEBUG)."""
    wait_for(lambda: in_sync(master, *replicas), timeout,
             what=f"replicas of {master} in sync")


def write_keys(port: int, prefix: str, n: int, size: int = 100) -> None:
    """``n`` SETs of ``prefix:i`` to ``size`` bytes, in one pipeline."""
    with r(port) as c:
        p = c.pipeline(transaction=False)
        for i in range(n):
            p.set(f"{prefix}:{i}", "x" * size)
        p.execute()


def kill_replica_links(master: int) -> int:
    """CLIENT KILL TYPE replica on ``master``: how many links it closed."""
    with r(master) as c:
        return int(c.execute_command("CLIENT", "KILL", "TYPE", "replica"))


def wait_synced(master: int, *replicas: int, timeout: float = 90) -> None:
    """Wait for ``in_sync``, then assert equal DEBUG DIGESTs."""
    wait_for(lambda: in_sync(master, *replicas), timeout, what="replicas caught up")
    want = digest(master)
    for p in replicas:
        assert digest(p) == want


def call(port: int, *args: str | int, password: str | None = None) -> object:
    """One command on a fresh RawClient (after AUTH ``password``), its reply parsed."""
    with RawClient(port) as c:
        if password:
            assert c.call("AUTH", password) == b"+OK\r\n"
        return parse_reply(c.call(*args))


def rdb_digest(tmp_path, rdb: bytes) -> tuple[str, dict]:  # noqa: ANN001
    """The DEBUG DIGEST of the dataset in ``rdb`` bytes, and the RDB's aux fields."""
    from pyrepl.keyspace.digest import dataset_digest
    from pyrepl.rdb.decoder import load_rdb_file

    path = os.path.join(str(tmp_path), f"got-{os.urandom(3).hex()}.rdb")
    with open(path, "wb") as f:
        f.write(rdb)
    loaded = load_rdb_file(path, 16)

    class Db:
        def __init__(self, data, expires) -> None:  # noqa: ANN001
            self.data = data
            self.expires = expires

    dbs = [Db(d, e) for d, e in zip(loaded.data, loaded.expires, strict=True)]
    return dataset_digest(dbs, None), loaded.aux


#: Error texts redis-py raises as ResponseError (the integration tests match them).
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NOT_INT = "value is not an integer or out of range"
NOT_FLOAT = "value is not a valid float"


def err(fn: Callable[..., object], *args: object, **kw: object) -> str:
    """The text of the ResponseError that ``fn(*args, **kw)`` must raise."""
    import pytest
    import redis

    with pytest.raises(redis.exceptions.ResponseError) as ei:
        fn(*args, **kw)
    return str(ei.value)


def sync_events(proc: ServerProcess) -> list[dict]:
    """The sync events a pyrepl process wrote to ``sync.ndjson`` in its directory (none before
    the file exists)."""
    path = os.path.join(proc.dir, "sync.ndjson")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def scan_pages(scan: Callable[[int], tuple[int, object]], limit: int = 10_000) -> list:
    """The pages of a SCAN-family iteration, ``scan(cursor) -> (next cursor, page)`` from
    cursor 0 until it comes back to 0, which must happen within ``limit`` calls."""
    pages = []
    cursor = 0
    for _ in range(limit):
        cursor, page = scan(cursor)
        pages.append(page)
        if cursor == 0:
            return pages
    raise AssertionError(f"the cursor did not come back to 0 in {limit} calls")


def assert_watch_aborts(r: object, key: str, write: Callable[[], object],
                        queue: Callable[[object], object]) -> None:
    """``write``, made after ``r`` (a redis-py client) WATCHes ``key`` and before its MULTI
    (which queues ``queue(pipeline)``), makes EXEC fail with a WatchError."""
    import pytest
    import redis

    with r.pipeline() as p:  # type: ignore[attr-defined]
        p.watch(key)
        write()
        p.multi()
        queue(p)
        with pytest.raises(redis.exceptions.WatchError):
            p.execute()


#: tests/data: the golden RDB files and make_golden_rdb.py, which writes them.
DATA_DIR = os.path.join(ROOT, "tests", "data")


def golden_module():  # -> the make_golden_rdb module
    """tests/data/make_golden_rdb.py, loaded as a module (its datasets and file names)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_golden_rdb", os.path.join(DATA_DIR, "make_golden_rdb.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: A function library (FUNCTION LOAD) the function tests share: ``put`` writes and counts,
#: ``get`` is a no-writes function with a description.
LIB = ("#!lua name=lib\n"
       "local function put(keys, args) redis.call('set', keys[1], args[1]) "
       "return redis.call('incr', 'calls') end\n"
       "redis.register_function('put', put)\n"
       "redis.register_function{function_name='get', callback=function(keys) "
       "return redis.call('get', keys[1]) end, flags={'no-writes'}, description='read'}")


def populate_under_load(port: int, keys: int, writer: LoadWriter, ops: int) -> None:
    """DEBUG POPULATE ``keys`` keys of 64 bytes, start ``writer`` and wait until it has done
    more than ``ops`` writes."""
    with r(port) as c:
        c.execute_command("DEBUG", "POPULATE", str(keys), "key", "64")
    writer.start()
    wait_for(lambda: writer.ops > ops, 20, what="write load running")


class RawConn:
    """A raw socket to a server with a receive buffer: ``recv_until`` a condition on the
    buffer, ``read_line``, ``take`` it all (the raw replicas of the e2e tests build on it)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = bytearray()
        self.received = 0
        self.eof = False

    def recv_until(self, cond, timeout: float = 30.0) -> None:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        while not cond(self.buf):
            left = deadline - time.monotonic()
            assert left > 0, f"timed out; have {len(self.buf)} bytes: {bytes(self.buf[:120])!r}"
            self.sock.settimeout(left)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                self.eof = True
                raise ConnectionError("closed by the master")
            self.buf += chunk
            self.received += len(chunk)

    def read_line(self) -> bytes:
        self.recv_until(lambda b: b"\r\n" in b)
        i = self.buf.index(b"\r\n")
        line = bytes(self.buf[:i])
        del self.buf[:i + 2]
        return line

    def take(self) -> bytes:
        data = bytes(self.buf)
        self.buf.clear()
        return data

    def close(self) -> None:
        self.sock.close()


def check_every_move(machine: object, go: Callable[[object], object], table: dict,
                     states: object, inputs: object, error: type[Exception]) -> None:
    """Every state x input of a replication state machine (``machine.state``, moved by
    ``go(input)``): the table's next state, or ``error`` naming the state and the input, with
    the state left unchanged."""
    import pytest

    for state in states:  # type: ignore[attr-defined]
        for inp in inputs:  # type: ignore[attr-defined]
            machine.state = state  # type: ignore[attr-defined]
            if (state, inp) in table:
                assert go(inp) is table[(state, inp)]
            else:
                with pytest.raises(error) as ei:
                    go(inp)
                assert (ei.value.state, ei.value.input) == (state, inp)  # type: ignore
                assert machine.state is state  # type: ignore[attr-defined]


def step_clock(core: object, step_ns: int) -> list[int]:
    """Give ``core`` a fake monotonic clock that moves ``step_ns`` on every reading (a script
    or a load becomes busy after a known number of hooks); its ``[now]``, to set it back."""
    clock = [0]

    def tick() -> int:
        clock[0] += step_ns
        return clock[0]

    core.clock_ns = tick  # type: ignore[attr-defined]
    return clock


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


#: Redis's sources as ``make redis-src`` (scripts/redis-src.sh) leaves them in the repository.
REDIS_SRC = os.path.join(ROOT, ".cache", "redis-src")
REDIS7_SRC = os.path.join(REDIS_SRC, "redis-7.0.15")
REDIS8_SRC = os.path.join(REDIS_SRC, "redis-8")


def redis_source_file(*parts: str, version: int = 7) -> str:
    """A file of Redis's source package (7.0.15 or 8.x); fails clearly when the set-up that
    fetches it (``make redis-src``, part of ``make test``) has not run."""
    path = os.path.join(REDIS7_SRC if version == 7 else REDIS8_SRC, *parts)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} is missing: run `make redis-src` (part of `make test`), "
                                "which fetches Redis's source package with apt-get source")
    return path


def redis8_server_path() -> str | None:
    """The Redis 8 redis-server that ``make redis-src`` builds, or None when absent."""
    exe = os.path.join(REDIS8_SRC, "src", "redis-server")
    return exe if os.access(exe, os.X_OK) else None


def start_redis(*extra: str, tmpdir: str | None = None, port: int | None = None,
                version: int = 7) -> ServerProcess:
    """Debian's redis-server 7.0.15, or with ``version=8`` the Redis 8 build of ``make
    redis-src`` (the test is skipped without it)."""
    if version == 8:
        exe = redis8_server_path()
        if exe is None:
            import pytest

            pytest.skip("the Redis 8 build (make redis-src) is missing: "
                        ".cache/redis-src/redis-8/src/redis-server")
    else:
        exe = redis_server_path()
    if exe is None:
        raise RuntimeError("redis-server is not installed (the test command installs it)")
    tmpdir = tmpdir or tempfile.mkdtemp(prefix="redis-test-")
    port = port or free_port()
    argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmpdir,
            "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no"]
    if "--save" not in extra:
        argv += ["--save", ""]
    argv += list(extra)
    return ServerProcess(argv, port, tmpdir, f"redis-{port}").start()


# -- a raw RESP client ---------------------------------------------------------------------

class RespError(Exception):
    pass


class RawClient:
    """Sends commands as RESP arrays and returns each reply's exact bytes (RESP2 or RESP3)."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *a: object) -> None:
        self.close()

    def send(self, *args: bytes | str | int) -> None:
        self.sock.sendall(encode_command(*args))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, *args: bytes | str | int) -> bytes:
        self.send(*args)
        return self.read_reply()

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed by server")
        self.buf += chunk

    def _line(self, pos: int) -> int:
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return i
            self._fill()

    def _skip(self, pos: int) -> int:
        """Return the end position of the reply starting at pos (reading more as needed)."""
        while len(self.buf) <= pos:
            self._fill()
        t = self.buf[pos:pos + 1]
        eol = self._line(pos)
        head = self.buf[pos + 1:eol]
        end = eol + 2
        if t in (b"+", b"-", b":", b"_", b",", b"#", b"("):
            return end
        if t in (b"$", b"=", b"!"):
            n = int(head)
            if n < 0:
                return end
            while len(self.buf) < end + n + 2:
                self._fill()
            return end + n + 2
        if t in (b"*", b"~", b">", b"%", b"|"):
            n = int(head)
            if n < 0:
                return end
            count = n * 2 if t in (b"%", b"|") else n
            p = end
            for _ in range(count):
                p = self._skip(p)
            if t == b"|":  # attribute: followed by the real reply
                p = self._skip(p)
            return p
        raise RespError(f"bad reply type byte {t!r} in {self.buf[pos:pos + 40]!r}")

    def read_reply(self) -> bytes:
        end = self._skip(0)
        reply, self.buf = self.buf[:end], self.buf[end:]
        return reply


@contextmanager
def side_by_side(*flags: str) -> Iterator[list[ServerProcess]]:
    """pyrepl and redis-server, both started with ``flags``; stopped on the way out."""
    with start_pyrepl(*flags) as ours, start_redis(*flags) as theirs:
        yield [ours, theirs]


@contextmanager
def connected(master: ServerProcess, replicas: list[ServerProcess]
              ) -> Iterator[tuple[RawClient, list[RawClient]]]:
    """A RawClient of ``master`` and one of each replica; on the way out the clients are
    closed and every server is stopped."""
    with ExitStack() as stack:
        for s in (master, *replicas):
            stack.enter_context(s)
        m = stack.enter_context(RawClient(master.port))
        yield m, [stack.enter_context(RawClient(r.port)) for r in replicas]


def parse_command(buf: bytes) -> tuple[list[bytes], int] | None:
    """The first command a replica sent in ``buf`` (a RESP array of bulk strings): (argv, bytes
    used), or None while it is incomplete; anything but an array is an AssertionError."""
    if not buf.startswith(b"*"):
        if buf:
            raise AssertionError(f"not a RESP array: {buf[:40]!r}")
        return None
    eol = buf.find(b"\r\n")
    if eol < 0:
        return None
    n = int(buf[1:eol])
    pos = eol + 2
    argv = []
    for _ in range(n):
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size = int(buf[pos + 1:eol])
        start = eol + 2
        if len(buf) < start + size + 2:
            return None
        argv.append(buf[start:start + size])
        pos = start + size + 2
    return argv, pos


def encode_command(*args: bytes | str | int) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


def parse_reply(data: bytes) -> object:
    """Decode one raw reply into Python values (errors become RespError instances)."""
    val, _ = _parse(data, 0)
    return val


def _parse(data: bytes, pos: int) -> tuple[object, int]:
    t = data[pos:pos + 1]
    eol = data.index(b"\r\n", pos)
    head = data[pos + 1:eol]
    end = eol + 2
    if t == b"+":
        return head, end
    if t == b"-":
        return RespError(head.decode()), end
    if t == b":":
        return int(head), end
    if t == b"_":
        return None, end
    if t == b",":
        return float(head), end
    if t == b"#":
        return head == b"t", end
    if t == b"(":
        return int(head), end
    if t in (b"$", b"=", b"!"):
        n = int(head)
        if n < 0:
            return None, end
        return data[end:end + n], end + n + 2
    if t in (b"*", b"~", b">"):
        n = int(head)
        if n < 0:
            return None, end
        out = []
        p = end
        for _ in range(n):
            v, p = _parse(data, p)
            out.append(v)
        return out, p
    if t == b"%":
        n = int(head)
        out2 = []
        p = end
        for _ in range(n):
            k, p = _parse(data, p)
            v, p = _parse(data, p)
            out2.append((k, v))
        return dict(out2), p
    raise RespError(f"bad type {t!r}")


# -- real cores wired in memory (sans-io link tests) ------------------------------------------
#
# Each MemNode is a real ServerCore + Replication. The only stand-ins are the OS-boundary
# adapters the I/O shell normally provides: MemReplicaIO (ReplicaIO: outgoing connections),
# MemMasterIO (MasterIO: the snapshot child writing to sockets, a disk file streamed to a
# replica) and MemHost (fork, kill, close). A MemConn is one TCP connection: two byte queues
# that the test moves in chunks of any size, so both directions can be split anywhere. Forked
# children run their job at fork time (the child sees the dataset as it was then) and report
# their exit only when the test lets them progress (MemNet.background) or the cron reaps them.

from pyrepl.core import Host  # noqa: E402  (the in-memory section below)

TRANSPORT_HIGH_WATER = 64 * 1024   # uvloop pauses a transport's writer above this


def shell_write(c: object, write: Callable[[bytes], object],
                buffered: Callable[[], int] = lambda: 0) -> None:
    """What the I/O shell's ``write_client`` does, for the in-memory fakes: the client's
    replies, then for a streaming replica its replication stream from the shared buffer while
    its transport holds less than the high-water mark (else the bytes wait in the buffer)."""
    if c.closed:  # type: ignore[attr-defined]
        return
    if c.out:  # type: ignore[attr-defined]
        write(c.data_to_send())  # type: ignore[attr-defined]
    link = c.stream  # type: ignore[attr-defined]
    if link is not None:
        take = c.core.replication.master.take  # type: ignore[attr-defined]
        while buffered() < TRANSPORT_HIGH_WATER:
            views = take(link)
            if not views:
                break
            write(b"".join(views))


@dataclass(eq=False)
class MemConn:
    """One in-memory TCP connection: a replica node's ReplicaIO (``token``) <-> ``client``, a
    client of the master node's core. Also the ``transport`` both ends' clients carry.
    ``rdb``: the replica's second connection (Redis 8 rdb channel), whose callbacks are the
    side's ``on_rdb_*``."""

    net: MemNet
    replica: MemNode
    token: int
    master: MemNode
    client: object
    rdb: bool = False
    to_replica: bytearray = field(default_factory=bytearray)  # from the master side, unread
    to_master: bytearray = field(default_factory=bytearray)  # from the replica side, unread
    open: bool = True
    fin: bool = False  # the master side closes once its output has been read
    paused: bool = False  # the replica paused reading (to_replica waits)

    def abort(self) -> None:
        self.net.abort(self)

    def is_closing(self) -> bool:
        return not self.open

    def get_write_buffer_size(self) -> int:
        return 0


class MemChild:
    """A forked child: ``disk`` (the BGSAVE job already ran) or ``socket`` (wrote its
    targets' preambles at fork time, as the real child does at once; writes the RDB and the
    mark when it progresses)."""

    def __init__(self, pid: int, kind: str, code: int = 0, targets: list | None = None,
                 rdb: bytes = b"", trailer: bytes = b"") -> None:
        self.pid = pid
        self.kind = kind
        self.code = code
        self.exited = kind == "disk"
        self.targets = targets or []
        self.rdb = rdb
        self.trailer = trailer
        self.dropped: set[int] = set()
        self.results: dict[int, tuple[bool, int, str]] = {}


def close_in_memory(client: object, conn_type: type) -> None:
    """Host.close_client for in-memory networks: abort the client's connection (a
    ``conn_type`` transport), or close a client without one after its reply."""
    t = getattr(client, "transport", None)
    if isinstance(t, conn_type):
        t.abort()
    else:
        client.close_after_reply = True  # type: ignore[attr-defined]


class MemHost(Host):
    def __init__(self, net: MemNet, node: MemNode) -> None:
        self.net = net
        self.node = node

    def fork_child(self, job: Callable[[], int], purpose: str) -> int:
        pid = self.net.new_pid()
        self.node.children[pid] = MemChild(pid, "disk", code=job())
        return pid

    def kill_child(self, pid: int) -> None:
        self.node.children.pop(pid, None)

    def close_client(self, client: object) -> None:
        close_in_memory(client, MemConn)


class MemMasterIO:
    """pyrepl.net.master_io.MasterIO's interface, in memory."""

    def __init__(self, net: MemNet, node: MemNode) -> None:
        self.net = net
        self.node = node

    def buffered(self, c: object) -> int:
        return 0

    def prepare_handover(self, c: object) -> bool:
        t = getattr(c, "transport", None)
        if not isinstance(t, MemConn) or not t.open or c.closed:  # type: ignore[attr-defined]
            return False
        if c.out:  # type: ignore[attr-defined]
            t.to_replica += c.data_to_send()  # type: ignore[attr-defined]
        return True

    def start_socket_snapshot(self, targets: list, payload: Callable[[], object],
                              trailer: bytes, timeout_ms: int) -> int:
        pid = self.net.new_pid()
        rdb = b"".join(payload())  # type: ignore[call-overload]
        ch = MemChild(pid, "socket", targets=list(targets), rdb=rdb, trailer=trailer)
        for c, pre in ch.targets:  # the preambles go out at once
            t = c.transport
            if isinstance(t, MemConn) and t.open:
                t.to_replica += pre
            else:
                ch.dropped.add(c.id)
        self.node.children[pid] = ch
        return pid

    def socket_target_done(self, pid: int, cid: int) -> bool:
        ch = self.node.children.get(pid)
        res = ch.results.get(cid) if ch is not None else self.node.results.get(pid, {}).get(cid)
        return res is not None and res[0]

    def drop_socket_target(self, c: object) -> None:
        for ch in self.node.children.values():
            ch.dropped.add(c.id)  # type: ignore[attr-defined]

    def finish_socket_snapshot(self, pid: int) -> dict[int, tuple[bool, int, str]]:
        return self.node.results.pop(pid, {})

    def reap_child(self, pid: int) -> None:
        ch = self.node.children.get(pid)
        if ch is not None and ch.exited:
            self.node.reap(pid)

    def send_bulk(self, c: object, path: str) -> int:
        with open(path, "rb") as f:  # opened at once, as MasterIO does
            data = f.read()
        self.node.bulks[c.id] = (c, data)  # type: ignore[attr-defined]
        return len(data)

    def cancel_bulk(self, c: object) -> None:
        self.node.bulks.pop(c.id, None)  # type: ignore[attr-defined]


class MemReplicaIO:
    """pyrepl.net.replica_io.ReplicaIO's interface, in memory: the main connection and, during
    a Redis 8 rdb-channel full sync, the rdb channel (callbacks ``on_rdb_*``)."""

    def __init__(self, net: MemNet, node: MemNode) -> None:
        self.net = net
        self.node = node
        self.token = 0
        self.rdb_token = 0
        self.conn: MemConn | None = None
        self.rdb_conn: MemConn | None = None
        self.connects = 0
        self._drain_gen = 0
        self._drain_pending = False

    def connect(self, token: int, host: str, port: int) -> None:
        self._drop()
        self._drop_rdb()
        self.token = token
        self.connects += 1
        self.net.post(lambda: self._connected(token, port, False))

    def connect_rdb(self, token: int, host: str, port: int) -> None:
        self._drop_rdb()
        self.rdb_token = token
        self.net.post(lambda: self._connected(token, port, True))

    def _connected(self, token: int, port: int, rdb: bool) -> None:
        if token != (self.rdb_token if rdb else self.token):
            return  # abandoned while connecting
        side = self.node.repl.replica
        target = self.net.nodes.get(port)
        if target is None or not target.listening:
            failed = side.on_rdb_connect_failed if rdb else side.on_connect_failed
            failed(token, "Connection refused")
            return
        self.net.next_cport += 1
        c = target.core.connection_made(f"127.0.0.1:{self.net.next_cport}",
                                        f"127.0.0.1:{port}")
        conn = MemConn(self.net, self.node, token, target, c, rdb=rdb)
        c.transport = conn
        if rdb:
            self.rdb_conn = conn
        else:
            self.conn = conn
        self.net.conns.append(conn)
        (side.on_rdb_connected if rdb else side.on_connected)(token)

    def find(self, token: int) -> MemConn | None:
        for conn in (self.conn, self.rdb_conn):
            if conn is not None and conn.token == token:
                return conn
        return None

    def send(self, token: int, data: bytes) -> None:
        conn = self.find(token)
        if conn is not None and conn.open:
            conn.to_master += data

    def close(self, token: int) -> None:
        if token == self.token:
            self._drop()
        elif token == self.rdb_token:
            self._drop_rdb()

    def pause_reading(self, token: int) -> None:
        conn = self.find(token)
        if conn is not None:
            conn.paused = True

    def resume_reading(self, token: int) -> None:
        conn = self.find(token)
        if conn is not None:
            conn.paused = False

    def request_drain(self, token: int) -> None:
        """``side.drain_step(token)`` soon, once per request (the loop's call_soon)."""
        if self._drain_pending:
            return
        self._drain_pending = True
        gen = self._drain_gen

        def drain() -> None:
            if gen != self._drain_gen:
                return  # the connection was dropped meanwhile (the handle was cancelled)
            self._drain_pending = False
            self.node.repl.replica.drain_step(token)

        self.net.post(drain)

    def _close(self, conn: MemConn | None) -> None:
        if conn is not None and conn.open:
            conn.open = False
            conn.to_replica.clear()
            conn.to_master.clear()
            self.net.post(lambda: conn.master.core.client_closed(conn.client))

    def _drop(self) -> None:
        conn, self.conn = self.conn, None
        self._drain_gen += 1
        self._drain_pending = False
        self._close(conn)

    def _drop_rdb(self) -> None:
        conn, self.rdb_conn = self.rdb_conn, None
        self._close(conn)

    def link_info(self, token: int) -> tuple[str, str, int, object] | None:
        conn = self.find(token)
        if conn is None:
            return None
        return (f"127.0.0.1:{conn.master.port}", conn.client.addr,  # type: ignore[attr-defined]
                -1, conn)


class MemNode:
    """A real ServerCore + Replication on the in-memory network, with a user client."""

    def __init__(self, net: MemNet, port: int, tmpdir: str, *overrides: tuple[str, list[str]],
                 replicaof: int | None = None) -> None:
        import pyrepl.commands  # noqa: F401  (fills the command table)
        from pyrepl.config import Config
        from pyrepl.core import ServerCore
        from pyrepl.replication.manager import Replication

        ov: list[tuple[str, list[str]]] = [("save", [""]), ("port", [str(port)]),
                                           ("dir", [tmpdir]), *overrides]
        if replicaof is not None:
            ov.append(("replicaof", ["127.0.0.1", str(replicaof)]))
        self.net = net
        self.port = port
        self.listening = True
        self.children: dict[int, MemChild] = {}
        self.results: dict[int, dict[int, tuple[bool, int, str]]] = {}
        self.bulks: dict[int, tuple[object, bytes]] = {}
        self.host = MemHost(net, self)
        self.core = ServerCore(Config.load(None, ov), self.host, now_ms=net.now)
        self.host.master_io = MemMasterIO(net, self)
        self.host.replica_io = MemReplicaIO(net, self)
        self.repl = Replication(self.core)
        self.side = self.repl.replica
        self.events: list[dict] = []  # every sync event (events.recent is trimmed)
        self.repl.events.sink = self.events.append
        self.user = self.core.connection_made("127.0.0.1:4000", f"127.0.0.1:{port}")
        net.nodes[port] = self

    def run(self, *args: bytes | str | int) -> bytes:
        """One command from the user client; returns its reply bytes."""
        self.user.receive_data(encode_command(*args))
        out = self.user.data_to_send()
        self.net.flush()
        return out

    def child_step(self) -> bool:
        """The oldest child progresses: a socket child writes, an exited one is reaped."""
        if not self.children:
            return False
        pid = min(self.children)
        ch = self.children[pid]
        if ch.exited:
            self.reap(pid)
            return True
        ok_any = False
        for c, pre in ch.targets:
            t = c.transport
            if c.id in ch.dropped or not isinstance(t, MemConn) or not t.open:
                ch.results[c.id] = (False, 0, "Broken pipe")
                continue
            t.to_replica += ch.rdb + ch.trailer
            ch.results[c.id] = (True, len(pre) + len(ch.rdb) + len(ch.trailer), "")
            ok_any = True
        ch.code = 0 if ok_any else 1
        ch.exited = True
        return True

    def reap(self, pid: int) -> None:
        ch = self.children.pop(pid)
        if ch.kind == "socket":
            self.results[pid] = ch.results
        self.core.child_exited(pid, ch.code)
        self.net.flush()

    def reap_exited(self) -> None:
        for pid in sorted(self.children):
            ch = self.children.get(pid)
            if ch is not None and ch.exited:
                self.reap(pid)

    def bulk_step(self) -> bool:
        """The oldest disk transfer completes: pending replies, ``$<len>``, the file."""
        if not self.bulks:
            return False
        cid = min(self.bulks)
        c, data = self.bulks.pop(cid)
        t = c.transport  # type: ignore[attr-defined]
        master = self.repl.master
        if isinstance(t, MemConn) and t.open:
            if c.out:  # type: ignore[attr-defined]
                t.to_replica += c.data_to_send()  # type: ignore[attr-defined]
            head = b"$%d\r\n" % len(data)
            t.to_replica += head + data
            master.bulk_sent(c, True, len(head) + len(data))
        else:
            master.bulk_sent(c, False, 0, "connection closed")
        self.net.flush()
        return True


class MemNet:
    """The in-memory network and fake clock shared by MemNodes."""

    CHUNKS = (1, 2, 5, 16, 64, 300, 1500, 1 << 16, 1 << 30)

    def __init__(self, now_ms: int = 1_700_000_000_000, rng: object = None) -> None:
        import random
        from collections import deque

        self.now = now_ms
        self.rng = rng if rng is not None else random.Random(0)
        self.nodes: dict[int, MemNode] = {}
        self.conns: list[MemConn] = []
        self.events: deque[Callable[[], object]] = deque()
        self.next_pid = 5000
        self.next_cport = 40000

    def new_pid(self) -> int:
        self.next_pid += 1
        return self.next_pid

    def post(self, fn: Callable[[], object]) -> None:
        self.events.append(fn)

    def abort(self, conn: MemConn, why: str = "Connection reset by peer") -> None:
        """Both ends learn the connection is gone; bytes in flight are lost."""
        if not conn.open:
            return
        conn.open = False
        conn.to_replica.clear()
        conn.to_master.clear()
        io = conn.replica.host.replica_io
        side, token = conn.replica.side, conn.token
        if io.conn is conn:
            io.conn = None
            self.post(lambda: side.on_closed(token, why))
        elif io.rdb_conn is conn:
            io.rdb_conn = None
            self.post(lambda: side.on_rdb_closed(token, why))
        self.post(lambda: conn.master.core.client_closed(conn.client))
        self.conns = [c for c in self.conns if c.open]

    def flush(self) -> None:
        """The I/O shell's writes: every master-side client's output goes on its connection."""
        for node in self.nodes.values():
            node.core.pending_flush.clear()
        for conn in list(self.conns):
            if not conn.open:
                continue
            c = conn.client
            shell_write(c, conn.to_replica.extend)
            if c.close_after_reply:  # type: ignore[attr-defined]
                conn.fin = True
            if conn.fin and not conn.to_replica:
                self.abort(conn, "Connection closed")

    def deliver(self, conn: MemConn, direction: str, n: int) -> int:
        """Move up to ``n`` bytes of one direction to the reader; returns how many."""
        if not conn.open or (direction == "m2r" and conn.paused):
            return 0
        buf = conn.to_replica if direction == "m2r" else conn.to_master
        chunk = bytes(buf[:n])
        del buf[:n]
        if chunk:
            if direction == "m2r" and conn.rdb:
                conn.replica.side.on_rdb_data(conn.token, chunk)
            elif direction == "m2r":
                conn.replica.side.on_data(conn.token, chunk)
            else:
                conn.client.receive_data(chunk)  # type: ignore[attr-defined]
        self.flush()
        return len(chunk)

    def busy(self) -> list[tuple[MemConn, str]]:
        out = []
        for conn in self.conns:
            if conn.open:
                if conn.to_replica and not conn.paused:
                    out.append((conn, "m2r"))
                if conn.to_master:
                    out.append((conn, "r2m"))
        return out

    def step(self) -> bool:
        """One thing happens: a queued event, else a random chunk moves. False when quiet."""
        if self.events:
            self.events.popleft()()
            self.flush()
            return True
        busy = self.busy()
        if not busy:
            return False
        conn, direction = self.rng.choice(busy)
        self.deliver(conn, direction, self.rng.choice(self.CHUNKS))
        return True

    def pump(self, limit: int = 200_000) -> None:
        for _ in range(limit):
            if not self.step():
                return
        raise AssertionError("the in-memory network did not settle")

    def background(self) -> bool:
        """One child or disk transfer progresses; False when none is pending."""
        for node in self.nodes.values():
            if node.child_step() or node.bulk_step():
                return True
        return False

    def tick(self, ms: int = 1000) -> None:
        """The clock advances; every node's cron runs (reaping exited children first)."""
        self.now += ms
        for node in list(self.nodes.values()):
            node.core.now_ms = self.now
        for node in list(self.nodes.values()):
            node.reap_exited()
            node.core.tick(self.now)
            self.flush()


def info(c: RawClient, section: str = "") -> dict[str, str]:
    """``INFO [section]`` over a RawClient as ``{field: value}`` (all sections merged)."""
    return {k: v for fields in info_sections(c, section).values() for k, v in fields.items()}


def info_sections(c: RawClient, section: str = "") -> dict[str, dict[str, str]]:
    """``INFO [section]`` as ``{section title: {field: value}}``, in the server's order."""
    out: dict[str, dict[str, str]] = {}
    current: dict[str, str] = out.setdefault("", {})
    reply = c.call("INFO", section) if section else c.call("INFO")
    for line in parse_reply(reply).decode().split("\r\n"):
        if line.startswith("# "):
            current = out.setdefault(line[2:], {})
        elif ":" in line:
            key, value = line.split(":", 1)
            current[key] = value
    if not out[""]:
        del out[""]
    return out
