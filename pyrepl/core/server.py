"""The server core: the state of a server and the calls that drive it — sans-io.

Theory of operation: :class:`ServerCore` holds the whole state of a server and is driven by
the I/O shell (``pyrepl.net``) through a few calls: ``connection_made`` / ``client_closed``,
``Client.receive_data`` (which calls :meth:`execute` for every parsed command), and
:meth:`tick` at ``hz`` for the cron (active expiry, save schedule, timeouts). Time comes in as
``now_ms`` (set by the shell); anything that needs the operating system (fork a child, stop
the process, sleep) goes through the ``host`` object the shell provides, so the core can be
driven in tests with a fake clock and no sockets.

What it does lives in the modules beside this one, each a part of the core's work:
``dispatch`` (Redis's ``processCommand`` and ``call``: lookup, checks, the handler, command
statistics), ``propagation`` (what a write hands to the replication stream and the AOF),
``cron``, ``persistence`` (RDB save and load), ``shutdown``, ``stats``; the functions of
``dispatch`` and ``propagation`` are bound as this class's methods (the C parts call them by
name). The loose parts of a server (clients, blocking, pub/sub, tracking, pause, ACL, INFO) are
modules of this package too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pyrepl import REDIS_VERSION, __version__, memacct, native, plainrun
from pyrepl.aof.appendonly import AppendOnly
from pyrepl.commands.hot import bind as _bind_hot
from pyrepl.commands.hot import install as _install_hot
from pyrepl.commands.table import Command
from pyrepl.config import Config
from pyrepl.core import dispatch, propagation
from pyrepl.core.blocking import Blocking
from pyrepl.core.client import Client
from pyrepl.core.clientevict import ClientEviction
from pyrepl.core.cron import Cron
from pyrepl.core.dispatch import NAME_CACHE
from pyrepl.core.evict import RUN_MARGIN, Evictor
from pyrepl.core.host import Host, NullLog
from pyrepl.core.latency import LatencyMonitor
from pyrepl.core.lazyfree import LazyFree
from pyrepl.core.outputlimit import OutputLimits
from pyrepl.core.pause import Pause
from pyrepl.core.persistence import Persistence
from pyrepl.core.pubsub import PubSub
from pyrepl.core.shutdown import Shutdown
from pyrepl.core.slowlog import SlowLog
from pyrepl.core.stats import CommandStat, Counter, CowSample, LatencyHistogram, Stats
from pyrepl.core.tracking import Tracking
from pyrepl.keyspace import intset, ktable, lphash, lplist, zset
from pyrepl.keyspace.db import Database
from pyrepl.replication.replica.side import bind_streamread
from pyrepl.resp.types import BLOCKED, Raw, ReplyError  # (handlers return BLOCKED)
from pyrepl.resp.writer import encode

if TYPE_CHECKING:
    from pyrepl.cluster.state import ClusterState
    from pyrepl.core.acl import Acl
    from pyrepl.core.ports import Meter
    from pyrepl.replication.manager import Replication


_ENCODING_DIRECTIVES = frozenset(("hash-max-listpack-entries", "hash-max-listpack-value",
                                  "set-max-intset-entries", "list-max-listpack-size",
                                  "zset-max-listpack-entries", "zset-max-listpack-value"))
_EVICTION_DIRECTIVES = frozenset((
    "maxmemory", "maxmemory-policy", "maxmemory-samples", "maxmemory-eviction-tenacity",
    "lfu-log-factor", "lfu-decay-time", "lazyfree-lazy-eviction", "replica-ignore-maxmemory"))


#: acceptCommonHandler's answer to a connection from outside the loopback interface while
#: protected-mode is on and the default user needs no password (the connection is closed)
PROTECTED_MODE_DENIED = (
    b"-DENIED Redis is running in protected mode because protected mode is enabled and no "
    b"password is set for the default user. In this mode connections are only accepted from "
    b"the loopback interface. If you want to connect from external computers to Redis you may "
    b"adopt one of the following solutions: 1) Just disable protected mode sending the command "
    b"'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from "
    b"the same host the server is running, however MAKE SURE Redis is not publicly accessible "
    b"from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) "
    b"Alternatively you can just disable the protected mode by editing the Redis configuration "
    b"file, and setting the protected mode option to 'no', and then restarting the server. 3) "
    b"If you started the server manually just for testing, restart it with the "
    b"'--protected-mode no' option. 4) Setup a an authentication password for the default "
    b"user. NOTE: You only need to do one of the above things in order for the server to start "
    b"accepting connections from the outside.\r\n")


class ServerCore:
    # What the C parts read on every request at their offsets (pyrepl/_dispatch.c: the
    # dispatch; pyrepl/_plainrun.c: a run's checks and counts; pyrepl/commands/_hot.c: the
    # hottest commands' common forms); everything else is in the dict.
    __slots__ = ("config", "gated", "replication", "expiry_deletes", "cmdstats", "dirty",
                 "_call_depth", "stream_live", "_pending", "keys_waited", "blocking", "now_ms",
                 "stats", "pending_flush", "shutdown_asap", "repl_feed", "tracking_on",
                 "min_replicas_to_write", "serve_after_flush", "notify_mask", "aof_on", "maxmemory",
                 "run_maxmemory", "maxmemory_clients", "obuf_normal", "output_limits",
                 "clock_ns", "quick_below_ns", "latency_tracking", "applying_master_stream",
                 "monitors", "scripts",   # (read by EVALSHA in C: scripting/_luacall.c)
                 "served_slots",
                 "_whole",   # (the C's: every slot set, pyrepl/_slots.h)
                 "__dict__",
                 "__weakref__")
    acl: Acl   # made on first use, in the instance dict (pyrepl.core.acl.acl_of)
    quick_below_ns: int      # what a timed call records (dispatch.refresh_timing)
    latency_tracking: bool

    def __init__(self, config: Config, host: Host | None = None, log: Any = None,
                 now_ms: int = 0, meter: Meter | None = None) -> None:
        self.config = config
        self.host = host or Host()
        self.log = log or NullLog()
        self.now_ms = now_ms
        self.start_ms = now_ms
        ktable.set_clock(now_ms)     # the keys' ages (LRU clock, LFU minutes), as each tick
        self.dbs: list[Database] = [Database(self, i) for i in range(config.databases)]
        self.clients: dict[int, Client] = {}
        self.next_client_id = 1
        self.stats = Stats()
        self.dirty = 0
        # MISCONF: the error writes (and PING) get while Redis would deny them after a failed
        # save; None when writes are allowed (refreshed by refresh_disk_error).
        self.disk_error: str | None = None
        self._disk_error_logged_ms = 0
        self.rdb_child_pid = -1
        self.rdb_child_purpose = ""
        self.latest_fork_usec = 0
        self.total_forks = 0
        # A disk save's child: keys written so far (shared counter), keys at the fork, and its
        # copy-on-write memory sampled once a second (INFO persistence current_*).
        self.save_progress: Counter | None = None
        self.save_keys_total = 0
        self.cow = CowSample()
        # Replication id of a server that has no replication layer attached (INFO).
        self.replid: str = os.urandom(20).hex()
        self.loading = False
        # a replica's swapdb load of its own history's snapshot (Redis's async_loading: the
        # old dataset serves meanwhile, commands flagged no-async-loading get -LOADING)
        self.async_loading = False
        self.shutdown_asap = False
        self.supervised = "no"     # INFO process_supervised (the shell sets it)
        self.shutdown = Shutdown(self)   # SHUTDOWN, a signal's, and one waiting for replicas
        self.persistence = Persistence(self)   # the RDB file: saves, loads, their INFO
        self.cron = Cron(self)                 # serverCron's jobs (tick runs them)
        # DEBUG's test hooks: SET-SKIP-CHECKSUM-VALIDATION (RESTORE and RDB loading take a
        # payload without checking its CRC64), SET-DISABLE-DENY-SCRIPTS (scripts may call the
        # no-script commands)
        self.skip_checksum_validation = False
        self.script_disable_deny_script = False
        self.version = __version__
        self.redis_version = REDIS_VERSION
        self.run_id: str = os.urandom(20).hex()
        self.pid = os.getpid()
        self.port = config.port
        # Replication hooks (the replication layer sets these).
        self.expiry_deletes = True  # False on a replica: keys expire only by the master's DEL
        # INFO commandstats / errorstats (reset by CONFIG RESETSTAT). A command's record, once
        # made, stays its record (reset in place, never replaced or removed): the C's call
        # remembers it on the command (Command.stat_of)
        self.cmdstats: dict[Command, CommandStat] = {}
        self.errorstats: dict[str, int] = {}
        self.clock_ns = self.host.clock_ns
        # The memory in use (pyrepl/memacct.py: the pool walk once installed, else RSS; a test
        # passes tests/unit/fakes.py's FakeMeter), its reading at start and its peak (INFO
        # memory's used_memory_startup / _peak: the cron and INFO keep the peak).
        self.meter: Meter = meter if meter is not None else memacct.meter()
        self.used_memory_startup = self.meter.used(fresh=True)
        self.used_memory_peak = self.used_memory_startup
        # what the interpreter held before the server started (not in used_memory: the shell
        # sets the meter's origin there, pyrepl.memacct.set_origin); INFO reports it
        self.used_memory_interpreter = 0
        # Keys a client gave a TTL on a writable replica -> bitmap of their dbs (Redis's
        # slaveKeysWithExpire): expired by the replica itself, see expire_replica_keys.
        self.replica_keys_with_expire: dict[bytes, int] = {}
        # True while the replica runs commands from its master's stream (see Database).
        self.applying_master_stream = False
        self.repl_feed: Callable[..., None] | None = None
        # several writes' bytes at once (db, data, their ends): see Replication.feed_span
        self.repl_feed_span: Callable[[int, bytes, list[int]], None] | None = None
        # Whether propagation goes anywhere (Replication.refresh_stream_live keeps it).
        self.stream_live = False
        # the feeds of one side alone (a script's redis.set_repl), set with repl_feed
        self.feed_aof_only: Callable[[int, list[bytes]], None] | None = None
        self.feed_repl_only: Callable[..., None] | None = None
        # exact spelling -> command, for the non-container commands looked up so far (the
        # replication layer reads it without importing the core)
        self.name_cache = NAME_CACHE
        self._pending: list[tuple[int, list[bytes]]] = []
        self._call_depth = 0
        self.current_client: Client | None = None
        # Clients that got output outside their own read (unblocked, replica links): the I/O
        # shell flushes them after every event it handles.
        self.pending_flush: list[Client] = []
        # Keys an EXEC made ready are served once its writes are propagated (pyrepl.core.blocking)
        self.serve_after_flush = False
        self.master_client: Client | None = None
        # Blocked clients (pyrepl.core.blocking); ``keys_waited`` is True while a client waits on
        # keys: the one test the write path makes for them.
        self.blocking = Blocking(self)
        self.keys_waited = False
        self.pubsub = PubSub(self)
        self.notify_mask = config.notify_keyspace_events   # (pyrepl.notify)
        # (read on every write of a master: kept here, in step with the config, as a slot)
        self.min_replicas_to_write = config.min_replicas_to_write
        self.slowlog = SlowLog()
        self.latency = LatencyMonitor()
        self.pause = Pause(self)
        self.busy: str | None = None        # -BUSY while a script runs too long (set_busy)
        self.gated = False
        # -- cluster mode with no other gate up: the slots whose keys run here with no
        # redirect check (pyrepl.cluster.served's table, which the C fast paths read when
        # ``gated``), else None (dispatch.refresh_gate)
        self.served_slots: bytearray | None = None
        self.scripts: Any = None     # the script engine, made on first use (engine_of)
        self._whole: bool | None = None
        # -- maxmemory-clients (pyrepl.core.clientevict): its limit in bytes (0: off), the one
        # test a read makes; an eviction due raises the gate.
        self.maxmemory_clients = 0
        self.client_eviction = ClientEviction(self)
        self.client_eviction.refresh()
        # -- end maxmemory-clients
        # -- client-output-buffer-limit of normal and pub/sub clients (pyrepl.core.outputlimit):
        # whether normal clients have one, the one test the read path makes
        self.obuf_normal = False
        self.output_limits = OutputLimits(self)
        self.output_limits.refresh()
        # -- maxmemory (pyrepl.core.evict): the limit processCommand enforces, 0 when none
        # (or a replica ignoring it); the one test the dispatch makes for it.
        self.maxmemory = 0
        self.run_maxmemory = 0      # what a pipelined run needs the meter's bound within
        self.evictor = Evictor(self)
        self.refresh_maxmemory()
        # -- end maxmemory
        self.monitors: dict[Client, None] = {}              # MONITOR clients (pyrepl.core.monitor)
        self.refresh_timing()   # (quick_below_ns, latency_tracking: what a timed call records)
        self.replication: Replication | None = None
        # cluster mode (pyrepl.core.cluster): the node's cluster state, None when disabled
        self.cluster: ClusterState | None = None
        self.cluster_conf_fd = -1     # nodes.conf, open and flocked (pyrepl.core.cluster.lock)
        self.aux_fields: Callable[[], dict[str, bytes | str | int]] | None = None
        # -- client-side caching (pyrepl.core.tracking): call() tests tracking_on, Database.touch
        # tracking_writes; both False while no client tracks.
        self.tracking_on = False
        self.tracking_writes = False
        self.tracking = Tracking(self)
        # -- end client-side caching
        # -- the append-only file (pyrepl.aof): ``aof_on`` while its state is not OFF (the
        # I/O shell then holds a pass's replies until the AOF buffer is written)
        self.aof_on = False
        self.aof = AppendOnly(self, self.host.background_fsync())
        self.lazyfree = LazyFree(self, self.host.background_free())     # (pyrepl.core.lazyfree)
        self.title = "-"    # proc_title's {title}: the name the process was started under
        self.refresh_encodings()
        config.on_change(self._config_changed)

    def refresh_encodings(self) -> None:
        """The *-max-listpack-* limits of the compact encodings (process-wide, as Redis's)."""
        cfg = self.config
        lphash.configure(cfg.hash_max_listpack_entries, cfg.hash_max_listpack_value)
        intset.configure(cfg.set_max_intset_entries)
        lplist.configure(cfg.list_max_listpack_size)
        zset.configure(cfg.zset_max_listpack_entries, cfg.zset_max_listpack_value)

    def _config_changed(self, name: str, value: Any) -> None:
        # Redis applies the request limits to every connected client at once.
        if name == "proto-max-bulk-len":
            for c in self.clients.values():
                c.reader.proto_max_bulk_len = self.config.proto_max_bulk_len
        elif name == "client-query-buffer-limit":
            for c in self.clients.values():
                c.reader.client_query_buffer_limit = self.config.client_query_buffer_limit
        elif name in ("save", "stop-writes-on-bgsave-error"):
            self.refresh_disk_error()
        elif name in ("slowlog-log-slower-than", "latency-monitor-threshold",
                      "latency-tracking"):
            self.resample()
        elif name == "notify-keyspace-events":
            self.notify_mask = self.config.notify_keyspace_events
        elif name == "min-replicas-to-write":
            self.min_replicas_to_write = self.config.min_replicas_to_write
        elif name == "aof-timestamp-enabled":
            self.aof.writer.timestamps = bool(self.config.aof_timestamp_enabled)
        elif name == "appendonly":
            self._appendonly_changed(bool(value))
        elif name == "aof-disable-auto-gc" and not value:
            self.aof.delete_history()
        elif name in _ENCODING_DIRECTIVES:
            self.refresh_encodings()
        elif name in _EVICTION_DIRECTIVES:
            self.evictor.refresh()
            self.refresh_maxmemory()
            if name == "maxmemory" and self.maxmemory:
                self.evictor.start_proc()   # (updateMaxmemory: evict what is over at once)
        if name in ("maxmemory-clients", "maxmemory"):
            self.client_eviction.refresh()   # (the clients over it go after this read)
        elif name == "client-output-buffer-limit":
            self.output_limits.refresh()
        elif name == "repl-sync-max-bandwidth" and self.replication is not None:
            self.replication.master.sync_bandwidth_changed()
        elif name == "proc-title-template":
            self.refresh_proc_title()
        elif name in ("oom-score-adj", "oom-score-adj-values"):
            from pyrepl.config import ConfigError

            if not self.refresh_oom_score():
                raise ConfigError("Failed to set current oom_score_adj. Check server logs.")

    def refresh_clock(self) -> None:
        """``now_ms`` from the host's clock when it has one and it is ahead (the shell sets
        it at each read; this is for what runs after a command that took long)."""
        us = self.host.time_us()
        if us // 1000 > self.now_ms:
            self.now_ms = us // 1000

    def proc_title(self, title: str | None = None) -> str | None:
        """redisSetProcTitle's text: ``proc-title-template`` expanded (None when
        ``set-proc-title`` is off). ``title``: Redis's argv[0] (the name the process was
        started under, :func:`pyrepl.net.process.invoked_as`; "-" without a shell)."""
        from pyrepl.config import expand_proc_title

        cfg = self.config
        if not cfg.set_proc_title:
            return None
        if title is None:
            title = self.title
        port = cfg.port or cfg.tls_port
        if port:
            listen = f"{cfg.bind[0] if cfg.bind else '*'}:{port}"
        else:
            listen = f"unixsocket:{cfg.unixsocket}"
        return expand_proc_title(cfg.proc_title_template, {
            "title": title, "listen-addr": listen, "server-mode": "",
            "config-file": os.path.abspath(cfg.source_file) if cfg.source_file else "",
            "port": str(cfg.port),
            "tls-port": str(cfg.tls_port), "unixsocket": cfg.unixsocket})

    def refresh_proc_title(self) -> None:
        """Set the process title (at start, on CONFIG SET proc-title-template)."""
        text = self.proc_title()
        if text:
            self.host.set_proc_title(text)

    def refresh_oom_score(self) -> bool:
        """setOOMScoreAdj(-1): the score of this process's role (at start, on a role change,
        on CONFIG SET of oom-score-adj / oom-score-adj-values)."""
        return self.host.set_oom_score_adj(0 if self.expiry_deletes else 1)

    def refresh_maxmemory(self) -> None:
        """``maxmemory``: the limit every command is checked against (CONFIG SET of a
        maxmemory directive, and a change of role: a replica with replica-ignore-maxmemory
        has none)."""
        self.maxmemory = self.config.maxmemory if self.evictor.enforced() else 0
        self.run_maxmemory = max(self.maxmemory - RUN_MARGIN, 0)

    def _appendonly_changed(self, on: bool) -> None:
        """updateAppendonly: CONFIG SET appendonly yes starts a rewrite (WAIT_REWRITE), no
        stops the AOF at once."""
        from pyrepl.config import ConfigError

        aof = self.aof
        if not on and aof.on:
            aof.stop()
        elif on and not aof.on:
            if not aof.start(in_exec=self._call_depth > 0):   # (EXEC runs at depth 1)
                raise ConfigError("Unable to turn on AOF. Check server logs.")

    # -- connections ----------------------------------------------------------------------
    def connection_made(self, addr: str = "", laddr: str = "", fd: int = -1,
                        unix_socket: bool = False) -> Client:
        """A new client; if ``maxclients`` is reached it is told so and closed after that.
        A Unix-socket client's addr and laddr are ``<path>:0``, as Redis shows them."""
        c = Client(self, self.next_client_id, addr, laddr, fd, unix_socket)
        self.next_client_id += 1
        if len(self.clients) >= self.config.maxclients:
            refusal = b"-ERR max number of clients reached\r\n"
        elif self.config.protected_mode and addr and not c.is_local() \
                and self.default_user_nopass():
            refusal = PROTECTED_MODE_DENIED
        else:
            self.stats.total_connections_received += 1
            self.clients[c.id] = c
            return c
        self.stats.rejected_connections += 1     # (not counted as a connection, as Redis)
        c.write(refusal)
        c.close_after_reply = True
        return c

    def default_user_nopass(self) -> bool:
        """Whether the default user needs no password (protected mode's condition)."""
        acl = self.__dict__.get("acl")
        if acl is None:
            return not self.config.requirepass
        acl.sync_default()
        return "nopass" in acl.default.flags

    def resume_master_stream(self, c: Client, argv: list[bytes]) -> None:
        """A replica's master stream, postponed at ``argv`` by CLIENT PAUSE, goes on."""
        if self.replication is not None:
            self.replication.replica.stream.resume_postponed(c, argv)

    def internal_client(self, kind: str, client_id: int | None = None, flags: str = "") -> Client:
        """A client of the server's own, not in the client table, authenticated: the AOF's
        (its fixed id) or a replica's master client (the next id)."""
        if client_id is None:
            client_id = self.next_client_id
            self.next_client_id += 1
        c = Client(self, client_id)
        c.kind = kind
        if flags:
            c.flags = flags
        c.set_authenticated(True)
        return c

    def client_closed(self, c: Client) -> None:
        if c.closed:
            return
        c.closed = True
        if c.mem:
            self.client_eviction.forget(c)
        c.unwatch_all()
        if c.blocked is not None:
            self.blocking.release(c)
        if c.subs is not None:
            self.pubsub.forget(c)
        if c.tracking:      # client-side caching (pyrepl.core.tracking)
            self.tracking.disable(c)
        if self.monitors.pop(c, 0) is None:
            self.resample()
        self.clients.pop(c.id, None)
        if c.repl is not None and self.replication is not None:
            self.replication.client_closed(c)

    def output_limit_reached(self, c: Client, at_once: bool = False) -> None:
        """closeClientOnOutputBufferLimitReached: counted, logged, its output dropped and
        the connection closed (``at_once``: from the cron, as Redis's synchronous close
        logs it)."""
        self.stats.client_outbuf_limit_disconnections += 1
        how = "closed" if at_once else "scheduled to be closed ASAP"
        self.log.warning(f"Client {c.info_line()} {how} for overcoming of output buffer "
                         "limits.")
        c.out.clear()
        c.close_after_reply = True
        self.host.close_client(c)

    def after_read(self, c: Client) -> None:
        """The shell handled a read of ``c`` and handed its replies on (while
        maxmemory-clients is set): its memory counted again, the clients over the limit
        evicted (pyrepl.core.clientevict; the C read calls this too: pyrepl/net/_serve.c)."""
        self.client_eviction.after_read(c)

    # -- dispatch (pyrepl/core/dispatch.py) and propagation (pyrepl/core/propagation.py):
    # their functions are this class's methods (the C parts call them by these names).
    lookup_command = dispatch.lookup_command
    reject = dispatch.reject
    resolve_command = dispatch.resolve_command
    execute = dispatch.execute
    execute_run = dispatch.execute_run
    run_plain = dispatch.run_plain
    run_propagating = dispatch.run_propagating
    refresh_gate = dispatch.refresh_gate
    set_busy = dispatch.set_busy
    execute_quietly = dispatch.execute_quietly
    call = dispatch.call
    timed_call = dispatch.timed_call
    latency_sample = dispatch.latency_sample
    unblocked_stats = dispatch.unblocked_stats
    total_commands_processed = dispatch.total_commands_processed
    failed_call = dispatch.failed_call
    command_stat = dispatch.command_stat
    resample = dispatch.resample
    refresh_timing = dispatch.refresh_timing
    error_reply = dispatch.error_reply
    unblock = dispatch.unblock
    propagate_call = propagation.propagate_call
    propagate_now = propagation.propagate_now
    end_span = propagation.end_span
    also_propagate = propagation.also_propagate
    propagate_internal = propagation.propagate_internal
    refresh_stream_live = propagation.refresh_stream_live
    flush_propagation = propagation.flush_propagation

    # -- functions (pyrepl.scripting.functions) ---------------------------------------------
    def function_codes(self) -> list[bytes]:
        """The codes of the function libraries (an RDB's or a rewrite's)."""
        from pyrepl.scripting.functions import rdb_libraries

        return rdb_libraries(self)

    def prepare_functions(self, codes: list[bytes]) -> Any:
        """An RDB's function libraries loaded aside (nothing changes yet; RdbError when one
        cannot be), for ``install_functions``: a replica's full sync."""
        from pyrepl.scripting.functions import prepare_libraries

        return prepare_libraries(self, codes)

    def install_functions(self, libraries: Any) -> None:
        """Libraries from ``prepare_functions`` in place of the server's (all of them)."""
        from pyrepl.scripting.functions import install_libraries

        install_libraries(self, libraries)

    def script_writes(self, argv: list[bytes]) -> bool:
        """Whether an EVAL/EVALSHA/FCALL's script declared flags without no-writes."""
        from pyrepl.scripting.engine import engine_of

        return bool(engine_of(self).declares_write(argv))

    @property
    def propagation_pending(self) -> bool:
        """A call queued something to propagate that no flush has handed on yet."""
        return bool(self._pending)

    @property
    def in_nested_call(self) -> bool:
        """A command runs inside another (EXEC, a script): WAIT cannot block there."""
        return self._call_depth > 0

    @property
    def replica_mode(self) -> bool:
        """True while this server follows a master (keys then expire only by its DEL)."""
        return not self.expiry_deletes

    # -- cron -----------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """serverCron: called ``hz`` times a second by the I/O shell (core/cron.py); the
        keys' ages are stamped with the clock it sets (Redis's server.lruclock)."""
        self.now_ms = now_ms
        ktable.set_clock(now_ms)
        self.cron.run(now_ms)

    # -- persistence ----------------------------------------------------------------------
    def refresh_disk_error(self) -> None:
        """Redis's writeCommandsDeniedByDiskError: with stop-writes-on-bgsave-error, save
        points set and the last save failed, writes and PING get -MISCONF until a save works;
        with AOF on, while the AOF cannot be written (or its background fsync failed)."""
        cfg = self.config
        deny = cfg.stop_writes_on_bgsave_error and cfg.save and not self.persistence.ok
        self.disk_error = MISCONF_ERR if deny else self.aof.write_error
        self.refresh_gate()


    def child_exited(self, pid: int, exitcode: int) -> None:
        """The shell reaped a child process."""
        if pid == self.rdb_child_pid and self.rdb_child_purpose == "aof":
            self.rdb_child_pid = -1
            self.save_progress = None
            cow = self.cow.size
            self.cow = CowSample()
            self.aof.child_done(exitcode if exitcode >= 0 else 0,
                                by_signal=-exitcode if exitcode < 0 else 0)
            self.aof.last_cow_size = cow
        elif pid == self.rdb_child_pid and self.rdb_child_purpose == "socket":
            # A diskless sync child wrote no file: no save bookkeeping (the replication layer
            # logs the transfer's outcome).
            self.rdb_child_pid = -1
        elif pid == self.rdb_child_pid:
            self.rdb_child_pid = -1
            cow = self.cow.size
            self.save_progress = None
            self.cow = CowSample()
            self.persistence.bgsave_done(exitcode == 0, cow)
        if self.replication is not None:
            self.replication.child_exited(pid, exitcode)

    def kill_rdb_child(self) -> None:
        """killRDBChild: the child stopped, its temp-<pid>.rdb removed (rdbRemoveTempFile)."""
        if self.rdb_child_pid != -1:
            from pyrepl.rdb.encoder import rdb_temp_path

            pid = self.rdb_child_pid
            self.host.kill_child(pid)
            self.rdb_child_pid = -1
            try:
                os.unlink(rdb_temp_path(self.persistence.rdb_path(), pid))
            except OSError:
                pass

    # -- misc -----------------------------------------------------------------------------
    def select_db(self, c: Client, index: int) -> None:
        c.db = self.dbs[index]


MISCONF_ERR = ("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to "
               "persist to disk. Commands that may modify the data set are disabled, because this "
               "instance is configured to report errors during writes if RDB snapshotting fails "
               "(stop-writes-on-bgsave-error option). Please check the Redis logs for details "
               "about the RDB error.")

# The common cases in C (pyrepl/native.py: unless pyrepl runs as plain Python): execute's
# (pyrepl/_dispatch.c), a run's checks and counts (pyrepl/_plainrun.c), the hottest commands'
# common forms (pyrepl/commands/_hot.c).
_dispatch = native.load("pyrepl._dispatch")
_plainrun = native.load("pyrepl._plainrun")
if _dispatch is not None:
    _dispatch.bind(ServerCore, Client, Command, CommandStat, Database, Raw, BLOCKED, ReplyError,
                   encode, NAME_CACHE, LatencyHistogram)
if _plainrun is not None:
    _plainrun.bind(ServerCore, Client, Command, CommandStat, LatencyHistogram, NAME_CACHE,
                   plainrun.account, plainrun.start, Database, ReplyError,
                   dispatch.propagating_loop,
                   propagation.propagate_call if _dispatch is None else _dispatch.propagate_call)
_bind_hot(ServerCore, Stats)
_install_hot()
bind_streamread(Client, ServerCore, Stats)   # (a replica's read of its master's stream)
