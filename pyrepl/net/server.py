"""The I/O shell of the server: sockets, timers, signals and child processes.

Theory of operation: :class:`Server` owns the event loop and a :class:`~pyrepl.core.ServerCore`.
Each accepted connection gets a :class:`ClientProtocol` that stamps the clock, feeds the bytes to
its core client and writes back whatever the core produced. The cron runs ``core.tick`` at
``hz`` and reaps child processes. The :class:`NetHost` gives the core fork/kill/shutdown.
"""

from __future__ import annotations

import asyncio
import gc
import mmap
import os
import random
import resource
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from types import MethodType
from typing import TYPE_CHECKING, Any

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl import memacct, native
from pyrepl.cluster.nodes_conf import NodesConfError
from pyrepl.commands.table import Command
from pyrepl.config import Config
from pyrepl.core import cluster, dispatch
from pyrepl.core.acl_file import AclStartupError
from pyrepl.core.acl_file import load_at_startup as load_acl_users
from pyrepl.core.client import Client
from pyrepl.core.host import Host
from pyrepl.core.persistence import AofLoadError
from pyrepl.core.server import ServerCore
from pyrepl.core.stats import Stats
from pyrepl.fastpath import execute
from pyrepl.keyspace.db import Database
from pyrepl.net import process, tls
from pyrepl.net.bio import BackgroundFree, BackgroundFsync
from pyrepl.net.blocked import DEFAULT_HIGH_WATER, BlockedAccepts
from pyrepl.net.cluster_io import ClusterBus
from pyrepl.net.ldb_io import SocketChannel
from pyrepl.net.listen import Listeners
from pyrepl.net.log import Logger, log_path
from pyrepl.net.loop import new_event_loop
from pyrepl.net.migrate_links import MigrateLink, MigrateLinks
from pyrepl.net.synclog import RotatingNdjsonWriter
from pyrepl.rdb.decoder import RdbError
from pyrepl.resp.fastreader import FastRespReader, first, release
from pyrepl.resp.types import ReplyError

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication


class SharedCounter:
    """An 8-byte counter in anonymous shared memory: a forked child sets it, the parent reads
    it (the snapshot child's keys written, INFO current_save_keys_processed)."""

    __slots__ = ("_mem",)

    def __init__(self) -> None:
        self._mem = mmap.mmap(-1, 8)

    def set(self, value: int) -> None:
        self._mem[:8] = value.to_bytes(8, "little")

    def get(self) -> int:
        return int.from_bytes(self._mem[:8], "little")


def now_ms() -> int:
    return int(time.time() * 1000)


# The cyclic GC's young-generation threshold (CPython's default is 700): net allocations of
# container objects between two collections of the youngest generation. A replica's read of
# its master's stream holds thousands of requests at once (a 256 KiB read: ~5,800 SETs); at
# 700, each such read ran several young collections, which promoted whatever young containers
# were alive then (the backlog's new blocks, their views) to the old generation, and that set
# off a full collection every ~2.5 s under a -P16 load, each visiting the whole dataset (a
# list key of 10M elements: 0.1-0.35 s each). Above a read's worth of requests, a young
# collection runs only where containers really accumulate. (bench/RESULTS.md, "The cyclic GC")
# What an unauthenticated client's unread replies may hold (checkClientOutputBufferLimits)
UNAUTH_OUTPUT_LIMIT = 1024

# The startup banner (redisAsciiArt's logo): what it says, in the same words and places.
BANNER = """
    pyrepl {version} (Redis {redis} compatible; {native}) {bits} bit
    Running in {mode} mode
    Port: {port}
    PID: {pid}

"""

GC_YOUNG_THRESHOLD = 50_000


def write_client(c: Client) -> None:
    """Hand a client's output to its transport: its replies, then for a streaming replica the
    replication stream, as views of the shared buffer, while the transport is not paused (so
    a slow replica's bytes wait in the shared buffer, not in a copy per replica)."""
    t = c.transport
    if t is None or c.closed:
        return
    if c.out and not (c.write_paused and c.subs is not None and not c.close_after_reply):
        t.write(c.data_to_send())     # (a paused subscriber's messages wait: pyrepl.core.pubsub)
    link = c.stream
    if link is not None:
        # (a streaming link exists only with the replication layer attached; no check per flush)
        repl: Replication = c.core.replication  # type: ignore[assignment]  # hot path
        take = repl.master.feeding.take
        while not c.write_paused and not t.is_closing():
            views = take(link)
            if not views:
                break
            t.writelines(views)
            if (link.ref is None or link.ref.sent == repl.master_repl_offset) \
                    and link.spill is None:
                break   # all of the stream taken: no call to learn that nothing is left
    if c.close_after_reply:
        t.close()


class ClientProtocol(asyncio.Protocol):
    # (a __dict__ for the instance's own ``data_received``: see __init__)
    __slots__ = ("server", "core", "client", "transport", "__dict__")

    def __init__(self, server: Server) -> None:
        self.server = server
        self.core = server.core
        self.client: Client | None = None
        self.transport: asyncio.Transport | None = None
        self._unauth_limit = False      # the transport's marks are the unauthenticated 1 KB
        # The read as the method below makes it, in C when it is the common one (_serve.c;
        # anything else calls the method). The transport looks it up on the instance.
        if _serve is not None:
            self.data_received = MethodType(_serve.received, self)  # type: ignore[method-assign]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        prev = self.transport
        self.transport = transport  # type: ignore[assignment]
        if prev is not None:    # accepted while a script blocked the loop: the loop's now
            if self._unauth_limit:
                transport.set_write_buffer_limits(high=UNAUTH_OUTPUT_LIMIT)  # type: ignore[attr-defined]
            prev.hand_over(transport)   # type: ignore[attr-defined]  # (pyrepl.net.blocked)
            if self.client is not None:
                self.client.out_fd = _fd_of(transport)
            self._flush()
            return
        peer = transport.get_extra_info("peername")
        sockname = transport.get_extra_info("sockname")
        sock = transport.get_extra_info("socket")
        core = self.core
        core.now_ms = now_ms()
        fd = sock.fileno() if sock is not None else -1
        if sock is not None and sock.family == socket.AF_UNIX:
            where = unix_addr(self.server.listeners.unix_path)
            c = core.connection_made(where, where, fd, unix_socket=True)
        else:
            c = core.connection_made(_fmt_addr(peer), _fmt_addr(sockname), fd)
        c.transport = transport
        c.out_fd = fd
        self.client = c
        if not c.authenticated:
            # Redis limits an unauthenticated client's unread replies to 1 KB
            # (checkClientOutputBufferLimits): the transport pauses past that (pause_writing)
            transport.set_write_buffer_limits(high=UNAUTH_OUTPUT_LIMIT)   # type: ignore[attr-defined]
            self._unauth_limit = True
        self._flush()

    def data_received(self, data: bytes) -> None:
        """A read (the reference of _serve.received, which runs it in the common case)."""
        c = self.client
        if c is None:
            return
        self.core.now_ms = int(time.time() * 1000)
        c.receive_data(data)
        core = self.core
        if c.out or c.close_after_reply:
            if core.maxmemory_clients and not (core.aof_on and core.aof.writer.buf):
                write_client(c)    # (its memory is counted below with its replies handed on)
            else:
                # The replies leave with every other client's, once the loop's pass has read
                # them all (Redis's beforeSleep, handleClientsWithPendingWrites), after the
                # AOF's write: a client at -P1 then gets its reply in a run of writes and
                # sleeps less often (bench/RESULTS.md, "Replies at the end of the pass").
                core.pending_flush.append(c)
        if core.maxmemory_clients and not (   # the client's memory after its read, unless quiet
                c.mem_quiet and getattr(c.reader, "spent", False) and not c.reader.queue
                and not c.write_paused):
            core.after_read(c)
        if core.pending_flush:
            self.server.schedule_flush()
        if core.shutdown_asap:
            self.server.shutdown_from_command()

    def _flush(self) -> None:
        c = self.client
        if c is None or self.transport is None:
            return
        write_client(c)

    def pause_writing(self) -> None:
        """The transport's buffer is over its high-water mark: stop handing it the stream. An
        unauthenticated client over its 1 KB is closed, as Redis closes it; one that
        authenticated since gets the usual marks back."""
        c = self.client
        if c is None:
            return
        if self._unauth_limit:
            if not c.authenticated:
                self.core.output_limit_reached(c)
                return
            self._unauth_limit = False
            self.transport.set_write_buffer_limits()  # type: ignore[union-attr]
            if self.transport.get_write_buffer_size() <= DEFAULT_HIGH_WATER:  # type: ignore[union-attr]
                return      # (under the usual high-water mark: not paused)
        c.write_paused = True

    def resume_writing(self) -> None:
        c = self.client
        if c is not None:
            c.write_paused = False
            if c.stream is not None or c.out:
                core = self.core
                if core.aof_on and core.aof.writer.buf:
                    # no reply leaves before the AOF holds what it answers (appendfsync
                    # always): the flush writes the AOF first
                    core.pending_flush.append(c)
                    self.server.schedule_flush()
                else:
                    write_client(c)

    def connection_lost(self, exc: Exception | None) -> None:
        self.__dict__.pop("data_received", None)   # (no cycle through the bound method)
        if self.client is not None:
            self.core.now_ms = now_ms()
            self.client.connection_lost()


#: this process's oom_score_adj as pyrepl set it (process-wide, as Redis's statics)
OOM_SCORE = process.OomScore()

_serve = native.load("pyrepl.net._serve")   # (a read's common case in C)
if _serve is not None:
    _serve.bind(ClientProtocol, Client, Stats, FastRespReader, ServerCore, Command,
                dispatch.NAME_CACHE, execute, dispatch.execute_run, first, release, Database)


#: Redis's NET_ADDR_STR_LEN: a client's addr is written into that many bytes, its NUL included
NET_ADDR_STR_LEN = 78


def unix_addr(path: str) -> str:
    """A Unix-socket client's addr and laddr as Redis shows them: ``<path>:0``, cut to the
    77 bytes that connFormatAddr's buffer holds (a long path loses its ":0", or more)."""
    raw = os.fsencode(path) + b":0"
    return os.fsdecode(raw[:NET_ADDR_STR_LEN - 1])


def _fd_of(transport: asyncio.BaseTransport) -> int:
    """The socket fd under a transport, or -1."""
    sock = transport.get_extra_info("socket")
    return sock.fileno() if sock is not None else -1


def _fmt_addr(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        host = addr[0]
        return f"{host}:{addr[1]}"
    return str(addr or "")


class NetHost(Host):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.master_io = None
        self.replica_io = None
        self._migrate = MigrateLinks()

    def migrate_link(self, host: bytes, port: bytes, timeout_ms: int) -> MigrateLink:
        try:
            return self._migrate.get(host, port, timeout_ms)
        except ValueError as e:     # (a port that is not a number: no connection, as Redis)
            raise OSError(str(e)) from None

    def migrate_close(self, host: bytes, port: bytes) -> None:
        self._migrate.close(host, port)

    def migrate_close_idle(self, now_s: float) -> None:
        if self._migrate.links:
            self._migrate.close_idle(now_s)

    def migrate_links(self) -> int:
        return len(self._migrate)

    def attach_replication_io(self) -> None:
        """Create the replication sides' I/O adapters (sockets, snapshot child, files)."""
        from pyrepl.net.master_io import MasterIO
        from pyrepl.net.replica_io import ReplicaIO

        self.master_io = MasterIO(self.server)
        self.replica_io = ReplicaIO(self.server)

    def call_soon(self, fn: Callable[[], None]) -> None:
        self.server.call_soon(fn)

    def fork_child(self, job: Callable[[], int], purpose: str) -> int:
        # Freeze the GC's view so the child does not dirty every page by collecting.
        gc.freeze()
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # child
            code = 1
            try:
                self.server.logger.role = "C"
                cluster.release_lock(self.server.core)
                # (a Lua debugging session's child ignores them, as Redis's)
                keep = signal.SIG_IGN if purpose == "ldb" else signal.SIG_DFL
                signal.signal(signal.SIGTERM, keep)
                signal.signal(signal.SIGINT, keep)
                signal.signal(signal.SIGUSR1, lambda *_: os._exit(255))
                self.set_oom_score_adj(2)      # (redisFork: CONFIG_OOM_BGCHILD)
                code = job()
            except BaseException as e:  # noqa: BLE001 - the child must always _exit
                try:
                    sys.stderr.write(f"child {purpose} failed: {e!r}\n")
                except Exception:  # noqa: BLE001
                    pass
            finally:
                os._exit(code)
        gc.unfreeze()
        core = self.server.core
        core.latest_fork_usec = int((time.perf_counter() - t0) * 1e6)
        core.latency_sample("fork", core.latest_fork_usec // 1000)
        self.server.children[pid] = purpose
        return pid

    def kill_child(self, pid: int) -> None:
        try:
            os.kill(pid, signal.SIGUSR1)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.server.children.pop(pid, None)

    def final_save(self, save: Callable[[], bool], temp_path: str) -> bool:
        def insist(sig: int, frame: object) -> None:
            log = self.server.logger
            log.warning("You insist... exiting now.")
            try:
                os.unlink(temp_path)            # (rdbRemoveTempFile)
            except OSError:
                pass
            if self.server.pidfile:
                process.remove_pidfile(self.server.pidfile)
            os._exit(1)

        # (the loop's handler cannot run while the save blocks it: a Python-level one can)
        old = signal.signal(signal.SIGINT, insist)
        try:
            return save()
        finally:
            signal.signal(signal.SIGINT, old)

    def request_shutdown(self) -> None:
        """The server exits: it stops listening at once (a client reconnecting after its
        SHUTDOWN's connection closed is refused, as when Redis's process is gone), the rest
        ends in the loop's next pass."""
        self.server.core.shutdown_asap = True
        self.server.listeners.close()

    def background_fsync(self) -> BackgroundFsync:
        return BackgroundFsync()

    def background_free(self) -> BackgroundFree:
        return BackgroundFree()

    def exit_now(self, code: int) -> None:
        """Redis's exit(1) when the AOF cannot be written under ``appendfsync always``."""
        self.server.logger.warning(f"Exiting with code {code}.")
        os._exit(code)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)  # DEBUG SLEEP blocks the whole server, as in Redis

    def set_proc_title(self, title: str) -> None:
        process.set_title(title)

    def set_oom_score_adj(self, process_class: int) -> bool:
        cfg = self.server.core.config
        return OOM_SCORE.apply(cfg.oom_score_adj, cfg.oom_score_adj_values, process_class,
                               self.server.logger)

    def notify_supervisor(self, message: str) -> None:
        if self.server.supervised == "systemd":
            process.sd_notify(message, self.server.logger)

    def crash(self, sig: int, si_code: int) -> None:
        """sigsegvHandler's report, then death by ``sig`` (DEBUG SEGFAULT, a SIGABRT sent to
        the server): the bug report's header, "crashed by signal", the Python stack."""
        import traceback

        log = self.server.logger
        log.warning("\n\n=== PYREPL BUG REPORT START: Cut & paste starting from here ===")
        log.warning(f"pyrepl {self.server.core.version} crashed by signal: {sig}, "
                    f"si_code: {si_code}")
        log.warning("------ STACK TRACE ------")
        for line in traceback.format_stack()[:-1]:
            log.warning(line.rstrip())
        log.warning("=== PYREPL BUG REPORT END. Make sure to include from START to END. ===")
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

    def panic(self, message: str) -> None:
        """serverPanic: log the reason the way Redis does and abort the process."""
        log = self.server.logger
        log.warning("------------------------------------------------")
        log.warning("!!! Software Failure. Press left mouse button to continue")
        log.warning(f"Guru Meditation: {message}")
        os.abort()

    def time_us(self) -> int:
        return time.time_ns() // 1000

    clock_ns = staticmethod(time.perf_counter_ns)

    def shared_counter(self) -> SharedCounter:
        return SharedCounter()

    def child_cow_bytes(self, pid: int) -> int | None:
        """Private_Dirty of the child (what Redis's child reports as its COW size)."""
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                return sum(int(line.split()[1]) * 1024 for line in f
                           if line.startswith("Private_Dirty:"))
        except (OSError, ValueError, IndexError):
            return None

    def key_save_delay_hook(self) -> Callable[[], None] | None:
        delay = self.server.config.rdb_key_save_delay
        if delay <= 0:
            return None
        seconds = delay / 1e6
        return lambda: time.sleep(seconds)

    def process_info(self) -> dict[str, float]:
        info: dict[str, float] = {}
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        info["rss"] = int(line.split()[1]) * 1024
                    elif line.startswith("VmHWM:"):
                        info["peak_rss"] = int(line.split()[1]) * 1024
            info["total_system_memory"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (OSError, ValueError):
            pass
        t = os.times()
        info.update(cpu_user=t.user, cpu_sys=t.system, cpu_user_children=t.children_user,
                    cpu_sys_children=t.children_system)
        try:   # (resource imported with the module: the first INFO made ~10 KB of it, then kept)
            main = resource.getrusage(resource.RUSAGE_THREAD)   # the loop's thread
            info.update(cpu_user_main_thread=main.ru_utime, cpu_sys_main_thread=main.ru_stime)
        except (AttributeError, OSError, ValueError):
            pass
        return info

    def process_events_while_blocked(self, protected: Client | None) -> None:
        """Redis's processEventsWhileBlocked, called from a long script's hook: one pass
        over the normal clients' sockets (not the script's caller), without the event loop:
        what is readable now is read and run (other commands get -BUSY; SCRIPT KILL and
        SHUTDOWN NOSAVE work) and the answers are written, with what waited for the pass's
        end."""
        self._read_while_blocked(protected)
        self._flush_while_blocked(protected)

    def _read_while_blocked(self, protected: Client | None) -> None:
        server = self.server
        core = server.core
        conns = {c.fd: c for c in core.clients.values()
                 if c is not protected and c.fd >= 0
                 and c.kind in ("normal", "pubsub", "replica")
                 and c.transport is not None and not c.closed
                 and not c.transport.is_closing()
                 and not tls.is_tls(c)}     # (TLS: see README)
        listening = server.listeners.plain_fds()    # (new connections: pyrepl.net.blocked)
        if not conns and not listening:
            return
        try:
            readable, _, _ = select.select([*conns, *listening], [], [], 0)
        except (OSError, ValueError):
            return
        core.now_ms = now_ms()
        for fd in readable:
            c = conns.get(fd)
            if c is None:
                server.blocked.accept(fd)
                continue
            try:
                data = os.read(fd, 16384)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                continue
            if data:
                c.receive_data(data)
                write_client(c)
            elif c.kind == "replica":   # a replica gone: freed now (INFO, min-replicas-to-write
                t = c.transport         # see it while the script runs), as Redis frees it
                c.connection_lost()
                if t is not None:
                    t.abort()
            # (a normal client's EOF: the event loop sees it again once the script ends)

    def _flush_while_blocked(self, protected: Client | None) -> None:
        """The replies that wait for the pass's end (``core.pending_flush``: those of reads
        before the script's in the same pass, pub/sub's, a replica's stream) written now, as
        the beforeSleep that Redis's processEventsWhileBlocked runs writes them, but the
        script's caller's (a protected client: Redis's handleClientsWithPendingWrites skips
        it). With the AOF on, its buffer is written first, as that beforeSleep's
        flushAppendOnlyFile(0): it holds what the commands before the script wrote (the
        script's own writes propagate once it ends), so no reply leaves before the AOF holds
        what it answers."""
        core = self.server.core
        if core.pending_flush:
            self.server.flush_pending(keep=protected)     # (the AOF's write first)
        elif core.aof_on:
            core.aof.before_reply()
        self.server.blocked.flush()

    def output_buffered(self, client: Client) -> int:
        t = client.transport
        if t is None or t.is_closing():
            return 0
        return int(t.get_write_buffer_size())

    def ldb_channel(self, client: Client) -> SocketChannel:
        t = client.transport
        if t is None or t.get_extra_info("sslcontext") is not None:
            raise ReplyError("ERR SCRIPT DEBUG is not supported on TLS connections")
        channel = SocketChannel(t.get_extra_info("socket").fileno())
        if client.out:       # (what was answered before goes first)
            channel.write(client.data_to_send())
        return channel

    def close_client(self, client: Client) -> None:
        t = client.transport
        if t is not None:
            t.abort()
        else:
            client.close_after_reply = True


class Server:
    """``Server(config).run()`` serves until SHUTDOWN, SIGTERM or SIGINT."""

    def __init__(self, config: Config, use_uvloop: bool = True) -> None:
        self.config = config
        self.use_uvloop = use_uvloop
        self.logger = Logger(config.loglevel, log_path(config.logfile, config.dir))
        self.children: dict[int, str] = {}
        self.host = NetHost(self)
        # used_memory counts from here: the interpreter's own memory (code, modules) left out
        self.interpreter_memory = memacct.set_origin()
        self.core = ServerCore(config, self.host, self.logger, now_ms())
        self.core.used_memory_interpreter = self.interpreter_memory
        self.replication = None
        try:
            from pyrepl.replication.manager import Replication
            self.host.attach_replication_io()
        except ImportError as e:  # the replication sides are being built (issue 3)
            self.logger.verbose(f"replication not available: {e}")
        else:
            self.replication = Replication(self.core)
        self.sync_log: RotatingNdjsonWriter | None = None
        self._open_sync_log()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.listeners = Listeners(lambda: ClientProtocol(self), lambda: config.tcp_backlog)
        self.blocked = BlockedAccepts(self.listeners.factory, lambda: self.loop)
        self.tls: tls.Contexts | None = None    # built when TLS is enabled (pyrepl.net.tls)
        self._stopping = False
        # a flush of core.pending_flush will run at the end of this pass (always, once the
        # pass's end is hooked: _hook_pass)
        self._flush_scheduled = False
        self.exit_code = 0
        self.supervised = "no"
        self.pidfile = ""
        self._stop_event: asyncio.Event | None = None
        self.bus: ClusterBus | None = None      # the cluster bus (cluster-enabled yes)
        config.on_change(self._config_changed)

    def _config_changed(self, name: str, value: object) -> None:
        cfg = self.config
        if name in ("port", "bind"):
            self.rebind(cfg.bind, cfg.port, why="Failed to bind to specified addresses."
                        if name == "bind" else "")
            if name == "bind" and cfg.tls_port:
                self.rebind(cfg.bind, cfg.tls_port, tls_port=True)
        elif name.startswith("tls-"):
            self._tls_changed(name)
        elif name == "loglevel":
            self.logger.set_level(str(value))
        elif name in ("sync-log-max-size", "sync-log-max-files") and self.sync_log is not None:
            self.sync_log.set_limits(self.config.sync_log_max_size,
                                     self.config.sync_log_max_files)
        elif name == "sync-log-file":
            self._open_sync_log()

    def _open_sync_log(self) -> None:
        """The sync events' NDJSON file as ``sync-log-file`` names it (none when empty); a
        change closes the old one, the events go to the new one from the next."""
        cfg = self.config
        if self.sync_log is not None:
            self.sync_log.close()
            self.sync_log = None
        if self.replication is None:
            return
        if cfg.sync_log_file:
            self.sync_log = RotatingNdjsonWriter(cfg.in_dir(cfg.sync_log_file),
                                                 cfg.sync_log_max_size, cfg.sync_log_max_files)
            self.replication.events.sink = self.sync_log.write
        else:
            self.replication.events.sink = None

    def _tls_changed(self, name: str) -> None:
        """applyTlsCfg / applyTLSPort: a changed tls-* directive rebuilds the contexts (for new
        connections; those open keep theirs), tls-port moves the TLS listeners."""
        from pyrepl.config import ConfigError

        cfg = self.config
        if name == "tls-port":
            if self.tls is None and not self.configure_tls():
                raise ConfigError("Unable to update TLS configuration. Check server logs.")
            self.rebind(cfg.bind, cfg.tls_port, tls_port=True)
        elif tls.enabled(cfg) and not self.configure_tls() and name != "tls-auth-clients":
            raise ConfigError("Unable to update TLS configuration. Check server logs.")
        if name == "tls-cluster" and not cfg.tls_cluster and self.bus is not None:
            self.bus.tls_changed()      # (plain again; on, configure_tls re-served it)

    # -- lifecycle ------------------------------------------------------------------------
    def run(self) -> int:
        cfg = self.config
        self.supervised = process.supervision(cfg.supervised, self.logger)
        self.core.supervised = self.supervised
        background = cfg.daemonize and self.supervised == "no"
        if background:
            process.daemonize()      # before any event loop or socket exists
        self.pidfile = cfg.pidfile or (process.DEFAULT_PID_FILE if background else "")
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        loop = new_event_loop(self.use_uvloop)
        self.loop = loop
        hook = _hook_pass(loop, self)
        try:
            loop.run_until_complete(self.serve())
        finally:
            if hook is not None and _serve is not None:
                _serve.unhook_pass(hook)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        return self.exit_code

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        self.loop = loop
        self._stop_event = asyncio.Event()
        core = self.core
        log = self.logger
        log.notice(f"pyrepl {core.version} (Redis {core.redis_version} compatible) starting, "
                   f"pid={os.getpid()}")
        if native.PURE:
            log.notice(f"Running as plain Python: {native.WHY_PURE}")
        why = memacct.why_not()
        log.notice("Memory accounting: " + (
            f"{core.meter.kind} (used_memory from pymalloc's pools and libc's blocks)"
            if not why else f"{core.meter.kind} (used_memory is the RSS: {why})"))
        cfg = self.config
        noop = cfg.noop_loaded()
        if noop:
            log.notice("Accepted with no effect in pyrepl: " + ", ".join(noop))
        if self.config.dir:
            os.makedirs(self.config.dir, exist_ok=True)
        core.now_ms = now_ms()
        # initServer's order: TLS set up and the ports bound (a failure exits before the
        # logo), then the logo (Redis's test harness waits for its PID), then the users and
        # the data; connections wait in the listen backlog until the data is in
        if tls.enabled(cfg) and not self.configure_tls():
            log.warning("Failed to configure TLS. Check logs for more info.")
            self.exit_code = 1
            return
        bound = self.bind_all()
        if cfg.cluster_enabled and not self._cluster_init():
            self.exit_code = 1
            return
        self.banner()
        try:        # the config's `user` lines or the aclfile (ACLLoadUsersAtStartup)
            load_acl_users(core)
        except AclStartupError as e:
            log.warning(str(e))
            self.exit_code = 1
            return
        # Redis's InitServerLast: used_memory_startup is the server set up, before the data
        core.used_memory_startup = core.meter.used(fresh=True)
        core.used_memory_peak = max(core.used_memory_peak, core.used_memory_startup)
        # Connections are accepted from here on: while the RDB file loads, the load yields to
        # the loop every loading-process-events-interval-bytes and clients get -LOADING (as
        # Redis's processEventsWhileBlocked serves them)
        await self.serve_bound(bound)
        try:
            loaded = await self._load_data()     # False: a SHUTDOWN while loading
        except AofLoadError:    # the loader logged why, as Redis does before its exit(1)
            self.exit_code = 1
            loaded = False
        except RdbError as e:   # rdbReportError while loading a file: logged, the checker's
            log.warning(f"Internal error in RDB reading the file -> {e}")   # report, exit(1)
            log.warning("--- RDB ERROR DETECTED ---")
            log.warning(f"[file {core.persistence.rdb_path()}] {e}")
            log.warning("Terminating server after rdb file reading failure.")
            self.exit_code = 1
            loaded = False
        except Exception as e:  # noqa: BLE001 - a bad RDB must stop the start, clearly
            log.warning(f"Fatal error loading the DB: {e}. Exiting.")
            self.exit_code = 1
            loaded = False
        if not loaded:      # (nothing is served from here on: listeners and clients closed)
            # a failed load ends as Redis's exit(1), its error the log's last line (Redis's
            # aof.tcl reads it there); a SHUTDOWN while loading ends as a shutdown
            self._close_down(quiet=self.exit_code != 0)
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError):
                pass
        try:        # a SIGABRT sent to the server gets Redis's crash report first
            loop.add_signal_handler(signal.SIGABRT, self.host.crash, signal.SIGABRT, 0)
        except (NotImplementedError, RuntimeError):
            pass
        if self.pidfile:
            process.write_pidfile(self.pidfile, log)
        if core.replication is not None:
            core.replication.start()
        if self.bus is not None:
            cluster.verify_config_with_data(core)
            await self.bus.start()
        core.refresh_oom_score()
        core.title = process.invoked_as()
        core.refresh_proc_title()
        lis = self.listeners
        if lis.tcp and cfg.port:
            log.notice(f"Ready to accept connections tcp on port {cfg.port}")
        if lis.tls and cfg.tls_port:
            log.notice(f"Ready to accept connections tls on port {cfg.tls_port}")
        if lis.unix_path:
            log.notice(f"The server is now ready to accept connections at {lis.unix_path}")
        if self.supervised == "systemd":
            process.sd_notify("STATUS=Ready to accept connections\n" if cfg.replicaof is None
                              else "STATUS=Ready to accept connections in read-only mode. "
                                   "Waiting for MASTER <-> REPLICA sync\n", log)
            process.sd_notify("READY=1\n", log)
        cron = loop.create_task(self._cron())
        try:
            await self._stop_event.wait()
        finally:
            cron.cancel()
            self._close_down()

    def _cluster_init(self) -> bool:
        """clusterInit: the node's cluster state from nodes.conf (or a new node), the bus
        port bound; False (logged in Redis's words) when the server must not start."""
        cfg = self.config
        log = self.logger
        port = cfg.tls_port if cfg.tls_cluster else cfg.port
        if not cfg.cluster_port and port > 65535 - cluster.PORT_INCR:
            log.warning("Redis port number too high. Cluster communication port is 10,000 "
                        "port numbers higher than your Redis port. Your Redis port number "
                        "must be 55535 or less.")
            return False
        if not cfg.bind:
            log.warning("No bind address is configured, but it is required for the Cluster "
                        "bus.")
            return False
        try:
            st = cluster.start(self.core)
        except NodesConfError as e:
            log.warning(str(e))
            return False
        cport = cluster.bus_port(cfg)
        if cfg.tls_cluster and self.tls is None and not self.configure_tls():
            return False
        bus = ClusterBus(self.core, st, log, cfg.bind, cport, cfg.tcp_backlog, self.flush_pending,
                         lambda: self.tls)
        try:
            bus.listen()
        except OSError as e:
            log.warning(f"Warning: {e.strerror or e}")
            log.warning(f"Failed listening on port {cport} (cluster), aborting.")
            return False
        self.bus = bus
        return True

    async def _load_data(self) -> bool:
        """loadDataFromDisk, a step at a time (pyrepl.core.persistence.load_steps): between
        steps key-load-delay is slept and the loop serves clients. False when a SHUTDOWN came
        meanwhile (the load is abandoned: nothing is saved while loading)."""
        core = self.core
        steps = core.persistence.load_steps()
        keys_before = 0
        while True:
            try:
                _bytes_read, keys = next(steps)
            except StopIteration:
                return True
            delay = self.config.key_load_delay      # (debugDelay per key, as Redis)
            if delay:
                n = keys - keys_before
                time.sleep(n * delay / 1e6 if delay > 0
                           else sum(random.randrange(-delay) == 0 for _ in range(n)) / 1e6)
            keys_before = keys
            await asyncio.sleep(0)
            core.now_ms = now_ms()
            if self._stop_event is not None and self._stop_event.is_set():
                steps.close()
                return False

    def _close_down(self, quiet: bool = False) -> None:
        """The listeners closed, the clients dropped, the pid and socket files removed
        (``quiet``: without a word, after a fatal error that must stay the last line)."""
        log = self.logger
        self.listeners.close()
        if self.bus is not None:
            self.bus.close()
        for c in list(self.core.clients.values()):
            if c.transport is not None:
                c.transport.abort()
        if self.pidfile:
            if not quiet:
                log.notice("Removing the pid file.")
            process.remove_pidfile(self.pidfile)
        if self.listeners.unix_path:
            if not quiet:
                log.notice("Removing the unix socket file.")
            process.remove_pidfile(self.listeners.unix_path)
        if self.sync_log is not None:
            self.sync_log.close()

    def banner(self) -> None:
        """redisAsciiArt: with ``always-show-logo``, or when the log is a terminal (no logfile,
        no syslog), a banner naming the mode, the port and the PID (Redis's test harness waits
        for its `` PID: <pid>``); otherwise the line ``Running mode=standalone, port=N.``"""
        cfg = self.config
        port = cfg.port or cfg.tls_port
        show = cfg.always_show_logo or (not cfg.logfile and not cfg.syslog_enabled and
                                        sys.stdout.isatty())
        mode = "cluster" if cfg.cluster_enabled else "standalone"
        if not show:
            self.logger.notice(f"Running mode={mode}, port={port}.")
            return
        core = self.core
        self.logger.raw("notice", BANNER.format(
            version=core.version, redis=core.redis_version, native=native.mode(), mode=mode,
            bits=struct.calcsize("P") * 8, port=port, pid=os.getpid()))

    def bind_all(self) -> list[tuple[str, Any]]:
        """listenToPort for the TCP, TLS and Unix listeners: bound and listening (not yet
        accepted on); a failure is logged as Redis logs it and exits."""
        cfg = self.config
        lis = self.listeners
        bound: list[tuple[str, Any]] = []
        for port, kind in ((cfg.port, "tcp"), (cfg.tls_port, "tls")):
            if not port:
                continue
            try:
                bound.append((kind, lis.bind(cfg.bind, port)))
            except OSError as e:
                # (Redis's words: its test suite looks for "Failed listening on port")
                self.logger.warning(f"Warning: {e.strerror or e}")
                self.logger.warning(f"Failed listening on port {port} ({kind.upper()}), "
                                    f"aborting.")
                raise SystemExit(1) from None
        if cfg.unixsocket:
            try:
                bound.append(("unix", lis.bind_unix(cfg.unixsocket, cfg.unixsocketperm)))
            except OSError as e:
                self.logger.warning(f"Failed opening Unix socket: {e.strerror or e}")
                raise SystemExit(1) from None
        if not any(socks for _kind, socks in bound):
            self.logger.warning("Configured to not listen anywhere, exiting.")
            raise SystemExit(1)
        return bound

    async def serve_bound(self, bound: list[tuple[str, Any]]) -> None:
        """Accept connections on what :meth:`bind_all` bound."""
        lis = self.listeners
        for kind, socks in bound:
            if kind == "unix":
                await lis.serve_unix(socks, self.config.unixsocket)
            else:
                await lis.serve(socks, kind == "tls")

    def configure_tls(self) -> bool:
        """tlsConfigure: build the TLS contexts from the tls-* directives; False (logged as
        Redis logs it) when they cannot be built, with the contexts in use left as they were."""
        try:
            contexts = tls.build(self.config)
        except tls.TlsError as e:
            self.logger.warning(str(e))
            return False
        self.tls = contexts
        if self.loop is not None and self.loop.is_running():
            self.listeners.use_tls_context(contexts.server, self.loop)
            if self.bus is not None and self.config.tls_cluster:
                self.bus.tls_changed()
        else:
            self.listeners.tls_context = contexts.server
        return True

    def rebind(self, bind: list[str], port: int, tls_port: bool = False, why: str = "") -> None:
        """CONFIG SET port/bind/tls-port: listen on the new addresses, then close the old
        listeners. A bind failure raises ConfigError (``why``, or Redis's text for a port),
        which rolls the change back."""
        from pyrepl.config import ConfigError

        if self.loop is None or not self.loop.is_running():
            return
        try:
            self.listeners.move(bind, port, tls_port, self.loop)
        except OSError as e:
            self.logger.warning(f"Failed to bind: {e}")
            raise ConfigError(why or "Unable to listen on this port. Check server logs.") \
                from None
        if not tls_port:
            self.core.port = port

    def _on_signal(self, sig: int) -> None:
        """sigShutdownHandler + serverCron's shutdown: shutdown-on-sigterm / -sigint flags; a
        second SIGINT while a shutdown is pending exits at once, as Redis."""
        core = self.core
        name = "SIGINT" if sig == signal.SIGINT else "SIGTERM"
        if sig == signal.SIGINT and (core.shutdown.wait is not None
                                     or core.shutdown.signalled is not None):
            self.logger.warning("You insist... exiting now.")
            if self.pidfile:
                process.remove_pidfile(self.pidfile)
            os._exit(1)
        self.logger.warning(f"Received {name} scheduling shutdown...")
        flags = (self.config.shutdown_on_sigint if sig == signal.SIGINT
                 else self.config.shutdown_on_sigterm)
        core.shutdown.signalled = (name, flags)     # (the cron begins it, as Redis's)

    def schedule_flush(self) -> None:
        """Flush clients with outside output once per event-loop pass, after every read of
        this pass: replica links then get one write per pass, not one per client read."""
        if not self._flush_scheduled and self.loop is not None:
            self._flush_scheduled = True
            self.loop.call_soon(_flush_deferred, self)

    def call_soon(self, fn: Callable[[], None]) -> None:
        """``fn`` at the next pass of the loop, in the core's clock, its output flushed."""
        loop = self.loop
        if loop is None:
            return

        def run() -> None:
            self.core.now_ms = now_ms()
            fn()
            self.flush_pending()
        loop.call_soon(run)

    def _flush_deferred(self) -> None:
        self._flush_scheduled = False
        self.flush_pending()

    def flush_pending(self, keep: Client | None = None) -> None:
        """Write out clients that got output outside their own read (see core.pending_flush);
        ``keep`` (a busy script's caller) stays queued."""
        core = self.core
        if core.aof_on:
            core.aof.before_reply()    # (the AOF written before any reply of the pass)
        pending, core.pending_flush = core.pending_flush, []
        for c in pending:
            if c is keep:
                core.pending_flush.append(c)
            else:
                write_client(c)

    def shutdown_from_command(self) -> None:
        self.stop()

    def stop(self) -> None:
        if self._stop_event is not None:
            self._stop_event.set()

    async def _cron(self) -> None:
        core = self.core
        first = True
        while True:
            hz = max(1, min(500, self.config.hz))
            if first:   # the first run at once, as Redis's serverCron 1 ms after the start
                first = False
                await asyncio.sleep(0)
            else:
                await asyncio.sleep(1.0 / hz)
            core.now_ms = now_ms()
            self._reap_children()
            core.tick(core.now_ms)
            if core.aof_on:      # (no reply leaves before the AOF holds what it answers)
                core.aof.before_reply()
            for c in list(core.clients.values()):
                if c.out or c.stream is not None:
                    write_client(c)
            if core.pending_flush:
                self.flush_pending()
            if core.shutdown_asap:
                self.stop()

    def _reap_children(self) -> None:
        for pid in list(self.children):
            try:
                rpid, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                self.children.pop(pid, None)
                self.core.child_exited(pid, 1)
                continue
            if rpid == 0:
                continue
            self.children.pop(pid, None)
            code = os.waitstatus_to_exitcode(status)
            self.core.child_exited(pid, code)



#: the pass's flush (``Server._flush_deferred``), in C when the read is (``_serve.flush``)
_flush_deferred: Callable[[Server], None] = (
    Server._flush_deferred if _serve is None else _serve.flush)


def _hook_pass(loop: asyncio.AbstractEventLoop, server: Server) -> object | None:
    """The pass's writes run at the end of every pass of uvloop's loop, in C (a libuv check
    handle: ``_serve.hook_pass``), instead of a call_soon per pass; closed with
    ``_serve.unhook_pass`` before the loop closes. None where it cannot be (another loop, the
    pure Python, a uvloop without libuv's functions): ``schedule_flush`` then calls soon."""
    if _serve is None:
        return None
    try:
        import uvloop.loop as uvl
    except ImportError:
        return None
    if not isinstance(loop, uvl.Loop):
        return None
    try:
        hook = _serve.hook_pass(loop, uvl.libuv_get_loop_t_ptr(loop), uvl.__file__, server)
    except (OSError, AttributeError):
        return None
    server._flush_scheduled = True   # (every pass ends with the flush: none to schedule)
    return hook


def run(config: Config) -> int:
    memacct.install()    # (the CLI did, before its own imports; idempotent)
    return Server(config).run()
