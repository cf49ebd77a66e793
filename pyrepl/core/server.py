"""The server core: databases, clients, command dispatch, propagation and the cron — sans-io.

Theory of operation: :class:`ServerCore` holds the whole state of a server and is driven by
the I/O shell (``pyrepl.net``) through a few calls: ``connection_made`` / ``client_closed``,
``Client.receive_data`` (which calls :meth:`execute` for every parsed command), and
:meth:`tick` at ``hz`` for the cron (active expiry, save schedule, timeouts). Time comes in as
``now_ms`` (set by the shell); anything that needs the operating system (fork a child, stop
the process, sleep) goes through the ``host`` object the shell provides, so the core can be
driven in tests with a fake clock and no sockets.

Dispatch follows Redis's ``processCommand``: lookup (with subcommands for containers), arity,
authentication, MULTI queueing, then the handler. A handler returns a reply value (see
``pyrepl.resp.types``) or raises ``ReplyError``; it bumps ``core.dirty`` for every change.
A write command that changed ``dirty`` is propagated (``Client.propagate_argv`` lets a handler
rewrite what is propagated, e.g. EXPIRE -> PEXPIREAT) to ``repl_feed``, the replication layer's
hook; several commands propagated by one call (EXEC) are wrapped in MULTI/EXEC.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from operator import attrgetter, call
from typing import TYPE_CHECKING, Any

from pyrepl import REDIS_VERSION, __version__, native, plainrun
from pyrepl.aof.appendonly import AppendOnly
from pyrepl.aof.feed import FeedFanout
from pyrepl.commands.hot import bind as _bind_hot
from pyrepl.commands.hot import install as _install_hot
from pyrepl.commands.table import COMMANDS, Command
from pyrepl.config import Config
from pyrepl.core import monitor
from pyrepl.core.blocking import Blocking
from pyrepl.core.client import REPLY_OFF, REPLY_RUNNING, REPLY_SET, REPLY_SKIP, Client
from pyrepl.core.cron import Cron
from pyrepl.core.host import Host, NullLog
from pyrepl.core.latency import LatencyMonitor
from pyrepl.core.pause import Pause
from pyrepl.core.persistence import Persistence
from pyrepl.core.pubsub import PubSub, Push
from pyrepl.core.shutdown import Shutdown
from pyrepl.core.slowlog import SlowLog
from pyrepl.core.stats import CommandStat, Counter, CowSample, LatencyHistogram, Stats
from pyrepl.core.tracking import Tracking
from pyrepl.dispatch import account_run, start_run
from pyrepl.keyspace.db import Database
from pyrepl.resp.types import BLOCKED, QUEUED, Raw, ReplyError  # (handlers return BLOCKED)
from pyrepl.resp.writer import encode, encode_replies, error_bytes

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication

NAME_CACHE: dict[bytes, Command] = {}
_handler = attrgetter("handler")


class ServerCore:
    # What the C parts read on every request at their offsets (pyrepl/_dispatch.c: the
    # dispatch; pyrepl/_plainrun.c: a run's checks and counts; pyrepl/commands/_hot.c: the
    # hottest commands' common forms); everything else is in the dict.
    __slots__ = ("config", "gated", "replication", "expiry_deletes", "cmdstats", "dirty",
                 "_call_depth", "stream_live", "_pending", "keys_waited", "blocking", "now_ms",
                 "stats", "pending_flush", "shutdown_asap", "repl_feed", "tracking_on",
                 "min_replicas_to_write", "serve_after_flush", "notify_mask", "aof_on", "__dict__",
                 "__weakref__")

    def __init__(self, config: Config, host: Host | None = None, log: Any = None,
                 now_ms: int = 0) -> None:
        self.config = config
        self.host = host or Host()
        self.log = log or NullLog()
        self.now_ms = now_ms
        self.start_ms = now_ms
        self.dbs = [Database(self, i) for i in range(config.databases)]
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
        self.replid = os.urandom(20).hex()
        self.loading = False
        self.shutdown_asap = False
        self.supervised = "no"     # INFO process_supervised (the shell sets it)
        self.shutdown = Shutdown(self)   # SHUTDOWN, a signal's, and one waiting for replicas
        self.persistence = Persistence(self)   # the RDB file: saves, loads, their INFO
        self.cron = Cron(self)                 # serverCron's jobs (tick runs them)
        self.version = __version__
        self.redis_version = REDIS_VERSION
        self.run_id = os.urandom(20).hex()
        self.pid = os.getpid()
        self.port = config.port
        # Replication hooks (the replication layer sets these).
        self.expiry_deletes = True  # False on a replica: keys expire only by the master's DEL
        # INFO commandstats / errorstats (reset by CONFIG RESETSTAT)
        self.cmdstats: dict[Command, CommandStat] = {}
        self.errorstats: dict[str, int] = {}
        self.clock_ns = self.host.clock_ns
        self.used_memory_startup = int(self.host.process_info().get("rss", 0))
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
        self.monitors: dict[Client, None] = {}              # MONITOR clients (pyrepl.core.monitor)
        self.replication: Replication | None = None
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
        config.on_change(self._config_changed)

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
        elif name in ("slowlog-log-slower-than", "latency-monitor-threshold"):
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
        self.stats.total_connections_received += 1
        if len(self.clients) >= self.config.maxclients:
            self.stats.rejected_connections += 1
            c.write(b"-ERR max number of clients reached\r\n")
            c.close_after_reply = True
            return c
        self.clients[c.id] = c
        return c

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

    # -- dispatch -------------------------------------------------------------------------
    def lookup_command(self, argv: list[bytes]) -> Command | None:
        cmd = COMMANDS.get(argv[0].lower())
        if cmd is not None and cmd.subcommands and len(argv) >= 2:
            return cmd.subcommands.get(argv[1].lower())
        return cmd

    def _reject(self, c: Client, message: str, cmd: Command | None = None) -> None:
        """Refuse a command before it runs (Redis's rejectCommand: rejected_calls). A refused
        EXEC aborts the transaction (execCommandAbort)."""
        if c.in_multi:
            c.multi_error = True
        if cmd is not None and cmd.name == "exec":
            c.discard_transaction()
            message = "EXECABORT Transaction discarded because of: " + \
                message.removeprefix("ERR ")
        self.error_reply(c, message, cmd, rejected=True)
        c.write(error_bytes(message))

    def resolve_command(self, c: Client, argv: list[bytes]) -> Command | None:
        """Find the command for ``argv`` (containers included), or reject it and return None."""
        name = argv[0].lower()
        cmd = COMMANDS.get(name)
        if cmd is None:
            if name in (b"host:", b"post"):
                # Cross-protocol scripting guard, as Redis: an HTTP request closes the link.
                self.log.warning("Possible SECURITY ATTACK detected. It looks like somebody "
                                 "is sending POST or Host: commands to Redis. Connection "
                                 "aborted.")
                c.close_after_reply = True
                return None
            self._reject(c, unknown_command_error(argv))
            return None
        protected = _PROTECTED_COMMANDS.get(cmd.name)
        if protected is not None and not cmd.subcommands:   # never cached: depends on client
            return cmd if self._protected_allowed(c, cmd, cmd, argv, protected) else None
        if cmd.subcommands:  # container: resolve the subcommand
            if len(argv) >= 2:
                sub = cmd.subcommands.get(argv[1].lower())
                if sub is None:
                    arg = argv[1].decode("utf-8", "replace")[:128]
                    self._reject(c, f"ERR unknown subcommand '{arg}'. "
                                    f"Try {cmd.name.upper()} HELP.")
                    return None
                if protected is not None and "protected" in sub.flags and \
                        not self._protected_allowed(c, cmd, sub, argv, protected):
                    return None
                return sub
            if cmd.handler is None:
                self._reject(c, f"ERR wrong number of arguments for '{cmd.name}' command", cmd)
                return None
        elif len(NAME_CACHE) < 4096:
            NAME_CACHE[argv[0]] = cmd  # exact spelling -> command, skips lower() next time
        return cmd

    def _protected_allowed(self, c: Client, top: Command, cmd: Command, argv: list[bytes],
                           setting: str) -> bool:
        """Redis's PROTECTED commands (DEBUG, MODULE LOAD ...): the arity first, then
        ``enable-debug-command`` / ``enable-module-command`` for this client."""
        n = len(argv)
        if (cmd.arity > 0 and cmd.arity != n) or n < -cmd.arity:
            self._reject(c, f"ERR wrong number of arguments for '{cmd.name}' command", cmd)
            return False
        if not c.allows_protected(getattr(self.config, setting)):
            self._reject(c, f"ERR {top.name.upper()} command not allowed. If the "
                            f"{setting.replace('_', '-')} option is set to \"local\", you "
                            "can run it from a local connection, otherwise you need to set "
                            "this option in the configuration file, and then restart the "
                            "server.", cmd)
            return False
        return True

    def execute(self, c: Client, argv: list[bytes]) -> None:
        """Run one command from a client and append its reply (Redis's processCommand).

        This is the hot path: the common case (a known command, an authenticated client not
        in MULTI, a master) runs with as few lookups as possible.
        """
        if c.reply_mode and not c.reply_mode & REPLY_RUNNING:
            self.execute_quietly(c, argv)
            return
        cmd = NAME_CACHE.get(argv[0])
        if cmd is None:
            cmd = self.resolve_command(c, argv)
            if cmd is None:
                return
        if not cmd.min_args <= len(argv) <= cmd.max_args:
            self._reject(c, f"ERR wrong number of arguments for '{cmd.name}' command", cmd)
            return
        if self.gated and self._gate(c, cmd, argv):
            return
        if c.in_multi or not c.authenticated or c.subs is not None or c.restricted:
            if not c.authenticated and not cmd.noauth:
                self._reject(c, "NOAUTH Authentication required.", cmd)
                return
            # -- ACL permission check (pyrepl.core.acl; Redis's ACLCheckAllPerm) ---------------
            # Only for a restricted user (``Client.restricted``); a MULTI's no-multi command
            # gets its own error first.
            if c.restricted and not (c.in_multi and cmd.nomulti) and \
                    self.acl.denied(c, cmd, argv):
                return
            # -- end of the ACL permission check ------------------------------------------
            if c.subs is not None and c.proto == 2 and cmd.name not in SUBSCRIBE_MODE_COMMANDS:
                self._reject(c, f"ERR Can't execute '{cmd.name}': only (P|S)SUBSCRIBE / "
                                "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this "
                                "context", cmd)
                return
            if c.in_multi:
                if cmd.nomulti:
                    self._reject(c, "ERR Command not allowed inside a transaction", cmd)
                    return
                if cmd.name not in ("exec", "discard", "multi", "watch", "quit", "reset"):
                    c.multi_queue.append((cmd, argv))
                    c.out.append(QUEUED.data)
                    return
        guard = self.replication
        # Replication refuses commands only on a replica (READONLY, MASTERDOWN) or on a
        # master with min-replicas-to-write (NOREPLICAS); skip the call otherwise.
        if guard is not None and (not self.expiry_deletes or (
                cmd.write and self.min_replicas_to_write)) and c.kind != "master":
            err = guard.check_command(c, cmd)
            if err is not None:
                self._reject(c, err, cmd)
                return
        reply = self.call(c, cmd, argv)
        if self._pending and self._call_depth == 0:
            self.flush_propagation(c, argv)
            if guard is not None:
                c.woff = guard.master_repl_offset
        t = type(reply)
        if t is bytes:
            c.out.append(b"$%d\r\n%s\r\n" % (len(reply), reply))  # type: ignore[arg-type]
        elif t is int:
            c.out.append(b":%d\r\n" % reply)  # type: ignore[str-format]
        elif t is Raw:
            c.out.append(reply.data)  # type: ignore[union-attr]
        elif reply is not BLOCKED:
            c.out.append(encode(reply, c.proto))

    def execute_run(self, c: Client, first: list[bytes], rest: list[list[bytes]]) -> bool:
        """Run ``first`` and the plain commands a pipelining client sent right behind it
        (``rest``, last first: ``pyrepl.plainrun``), replies included, in one pass; False
        (nothing done) when ``first`` does not qualify and ``execute`` must run it.

        Besides what ``plainrun.start`` checks once for the run: a client authenticated,
        unrestricted, not in subscribe mode; a master without min-replicas-to-write (a
        replica's READONLY is checked per command). With a backlog, writes propagate as
        ``run_propagating`` says."""
        if not c.authenticated or c.subs is not None or c.restricted or \
                (self.replication is not None and
                 (not self.expiry_deletes or self.min_replicas_to_write)):
            return False
        run = start_run(self, c, first, rest)   # (plainrun.start; its common case in C)
        if run is None:
            return False
        cmds, reqs, one = run
        replies: list[object] = []
        t0 = self.clock_ns()
        try:
            if self.stream_live:
                self.run_propagating(c, cmds, reqs, replies, one)
            else:
                self.run_plain(c, cmds, reqs, replies, one)
        except BaseException:   # (the requests up to the failing one count as read)
            c.reader.take_queued(len(rest) - len(replies))
            raise
        finally:   # replies in order (no plain command writes to its own client meanwhile)
            c.out.extend(encode_replies(replies, c.proto))
        c.reader.take_queued(len(rest) - len(reqs) + 1)
        account_run(self, c, cmds, one, self.clock_ns() - t0)   # (plainrun.account)
        return True

    def run_plain(self, c: Client, cmds: list[Command], reqs: list[list[bytes]],
                  replies: list[object], one: bool) -> None:
        """A run's handlers (``cmds[i]`` on ``reqs[i]``; ``one``: all the same command) called
        at C speed (``map``), resumed after a command that answers an error; their replies
        are appended to ``replies`` (on an exception, those before the failing command); a
        run of one command with a whole-run form (``Command.whole``: SET, GET) goes to it
        first. For a run whose propagation goes nowhere: no backlog, or the replica's master
        stream."""
        if one and cmds[0].whole is not None:
            done = cmds[0].whole(c, reqs)   # type: ignore[misc]
            if done is not None:
                replies += done
                if self._pending:
                    self._propagate_now(c)
                return
        failed = self.failed_call
        it = iter(reqs)
        if one:
            calls = map(cmds[0].handler, itertools.repeat(c), it)  # type: ignore[arg-type]
        else:
            calls = map(call, map(_handler, cmds), itertools.repeat(c), it)
        while True:
            try:
                replies.extend(calls)
                break
            except ReplyError as e:
                replies.append(failed(c, cmds[len(replies)], e))
        if self._pending:   # (nowhere to go: this only empties it, as execute's flushes would)
            self._propagate_now(c)

    def run_propagating(self, c: Client, cmds: list[Command], reqs: list[list[bytes]],
                        replies: list[object], one: bool) -> None:
        """execute_run's loop with a backlog. A write that changed the dataset and propagates
        as it arrived (the common case) joins a *span* of such requests, fed to the
        replication layer as one slice of the bytes they arrived as (``_end_span``);
        anything else ends the span first and then propagates as ``call`` and ``execute``
        would: a rewritten or effect-propagated write, a lazily expired key's DEL (internal
        propagation waits in ``_pending`` meanwhile, as inside ``call``), a write to another
        db than the span's (the backlog's SELECT goes between). A run of one command with
        a whole-run form (``Command.whole``) goes to it first: a write's run then changed the
        dataset at every request, none rewritten, so it is one span."""
        if one and cmds[0].whole is not None and not self._pending:
            done = cmds[0].whole(c, reqs)   # type: ignore[misc]
            if done is not None:
                replies += done
                if cmds[0].propagates:
                    self._end_span(c, reqs, 0, len(reqs), c.db.id)
                return
        failed = self.failed_call
        add = replies.append
        span = -1            # the span's first request (-1: no span open)
        span_db = c.db
        c.propagate_argv = None
        depth = self._call_depth
        try:
            for i, (cmd, argv) in enumerate(zip(cmds, reqs, strict=True)):
                if not cmd.propagates:
                    if span >= 0:   # (before it: a key it expires propagates at once)
                        span = self._end_span(c, reqs, span, i, span_db.id)
                    try:
                        add(cmd.handler(c, argv))  # type: ignore[misc]
                    except ReplyError as e:
                        add(failed(c, cmd, e))
                    if self._pending:
                        self._propagate_now(c, argv)
                    continue
                dirty = self.dirty
                self._call_depth = depth + 1   # (internal propagation waits, as in call)
                try:
                    add(cmd.handler(c, argv))  # type: ignore[misc]
                except ReplyError as e:
                    add(failed(c, cmd, e))
                self._call_depth = depth
                changed = self.dirty != dirty
                verbatim = changed and c.propagate_argv is None and not self._pending
                if span >= 0 and not (verbatim and c.db is span_db):
                    span = self._end_span(c, reqs, span, i, span_db.id)
                if not verbatim:
                    self._propagate_call(c, argv, changed)
                elif span < 0:
                    span, span_db = i, c.db
        finally:
            self._call_depth = depth
            if span >= 0:   # (on an exception: the writes before the failing one)
                self._end_span(c, reqs, span, len(replies), span_db.id)

    def _propagate_call(self, c: Client, argv: list[bytes], changed: bool) -> None:
        """What ``call`` and ``execute`` propagate after a write that did not propagate as it
        arrived: its rewritten form (``propagate_argv``) or itself when it changed the
        dataset, with what it queued meanwhile."""
        pa = c.propagate_argv
        if changed or pa is not None:
            if pa is None:
                self._pending.append((c.db.id, argv))
            elif pa:   # (empty: it propagated its effects itself)
                self._pending.append((c.db.id, pa))
            c.propagate_argv = None
        if self._pending:
            self._propagate_now(c, argv)

    def _propagate_now(self, c: Client, argv: list[bytes] | None = None) -> None:
        """Flush what the call queued; the client's ``woff`` (WAIT) is the offset after it,
        as ``execute`` leaves it."""
        self.flush_propagation(c, argv)
        if self.replication is not None:
            c.woff = self.replication.master_repl_offset

    def _end_span(self, c: Client, reqs: list[list[bytes]], a: int, b: int, db_id: int) -> int:
        """Propagate requests ``a`` to ``b - 1`` of a run as the bytes they arrived as (the
        request ``gets()`` returned last is 0), all at once when the replication layer takes
        a span (``repl_feed_span``; first in C, ``Replication.feed_span_c``, which takes a
        span that goes into the backlog's tail block at once); ``woff`` as
        ``_propagate_now``. Returns -1 (no span)."""
        repl = self.replication
        if self.aof_on or repl is None or not repl.feed_span_c(repl, db_id, c.reader, a, b):
            data, ends = c.reader.raw_ahead(a, b)
            span = self.repl_feed_span
            if span is not None:
                span(db_id, data, ends)
            else:   # (a replication layer that takes one command at a time: the tests' fakes)
                feed = self.repl_feed
                assert feed is not None
                start = 0
                for argv, end in zip(reqs[a:b], ends, strict=True):
                    feed(db_id, argv, data[start:end])
                    start = end
        if repl is not None:
            c.woff = repl.master_repl_offset
        return -1

    def refresh_gate(self) -> None:
        """``gated``: a busy script, a MISCONF state or a CLIENT PAUSE is on (the one test
        ``execute`` makes for all three while none is)."""
        self.gated = self.busy is not None or self.disk_error is not None or self.pause.kind != 0

    def set_busy(self, error: str | None) -> None:
        """A script ran past busy-reply-threshold (``error``: what other clients get, -BUSY),
        or ended (None). Meanwhile the shell serves clients from the script's hook
        (Host.process_events_while_blocked), and only ``allow-busy`` commands run."""
        self.busy = error
        self.refresh_gate()

    def _gate(self, c: Client, cmd: Command, argv: list[bytes]) -> bool:
        """True when a busy script, MISCONF refused the command or CLIENT PAUSE postponed
        it."""
        if self.busy is not None and not cmd.allow_busy:
            self._reject(c, self.busy, cmd)
            return True
        if self.disk_error is not None and self._denied_by_disk_error(c, cmd):
            return True
        return bool(self.pause.kind) and self._postponed(c, cmd, argv)

    def _postponed(self, c: Client, cmd: Command, argv: list[bytes]) -> bool:
        """CLIENT PAUSE (checked only while one is on): postpone the command if it covers it,
        after the checks Redis makes first (authentication, subscribe mode, READONLY)."""
        pause = self.pause
        if not pause.covers(c, cmd) or not c.authenticated or (
                c.subs is not None and c.proto == 2 and cmd.name not in SUBSCRIBE_MODE_COMMANDS):
            return False
        guard = self.replication
        if guard is not None and c.kind != "master" and guard.check_command(c, cmd) is not None:
            return False
        pause.postpone(c, argv)
        return True

    def execute_quietly(self, c: Client, argv: list[bytes]) -> None:
        """CLIENT REPLY OFF / SKIP: run the command; drop its replies (not push frames: pub/sub
        messages and confirmations still go out, as Redis's CLIENT_PUSHING). A reply to a
        CLIENT REPLY ON goes out."""
        mode = c.reply_mode
        c.reply_mode = mode & REPLY_OFF | REPLY_RUNNING   # (CLIENT REPLY adds REPLY_SET)
        out, c.out = c.out, []
        try:
            self.execute(c, argv)
        finally:
            produced, c.out = c.out, out
            if c.reply_mode & REPLY_SET:     # the command was CLIENT REPLY: its own rule
                c.reply_mode &= ~(REPLY_SET | REPLY_RUNNING)
                drop = c.reply_mode & REPLY_OFF or mode & REPLY_SKIP
            else:                            # a skip is spent, OFF stays
                c.reply_mode = mode & REPLY_OFF
                drop = True
            if drop:
                produced = [x for x in produced if type(x) is Push]
            out.extend(produced)

    def call(self, c: Client, cmd: Command, argv: list[bytes]) -> object:
        """Run a handler; queue it for propagation when a write changed the dataset.

        INFO commandstats: every call is counted; one call in 16 of a ``fast`` or O(1) command
        (``Command.sampled``; the first call included) is timed, and the time of all calls is estimated from those (two clock
        reads per command would cost ~10 % of the hot path, see bench/RESULTS.md); every call
        of the others (and of all while ``slowlog-log-slower-than`` is 0 or a MONITOR client
        is connected) is timed, for the slow log. MONITOR sees the command after it ran."""
        c.commands += 1
        c.last_cmd = cmd
        st = self.cmdstats.get(cmd)
        if st is None:
            st = self.command_stat(cmd)
        # The slow path: a timed call, or any call while a client tracks keys (see resample)
        slow = not st.calls & st.sample
        if slow:
            t0 = self.clock_ns() if not st.calls & st.timing else -1
            if self.tracking_on:    # client-side caching (pyrepl.core.tracking): the current client
                self.tracking.enter(c, cmd, argv)
        if not cmd.propagates:
            try:
                reply = cmd.handler(c, argv)  # type: ignore[misc]
            except ReplyError as e:
                reply = self.failed_call(c, cmd, e)
        else:
            dirty = self.dirty
            c.propagate_argv = None
            # What the handler causes (a lazily expired key's DEL) propagates with the
            # command, as one MULTI/EXEC unit.
            self._call_depth += 1
            try:
                reply = cmd.handler(c, argv)  # type: ignore[misc]
            except ReplyError as e:
                reply = self.failed_call(c, cmd, e)
            finally:
                self._call_depth -= 1
            if self.dirty != dirty or c.propagate_argv is not None:
                if self.stream_live:   # (no backlog, or a replica: it would go nowhere)
                    pa = c.propagate_argv
                    if pa is None:
                        self._pending.append((c.db.id, argv))
                    elif pa:   # (empty: the command propagated its effects itself, a script)
                        self._pending.append((c.db.id, pa))
                if self.keys_waited:   # the only cost of blocking while nobody waits
                    self.blocking.after_write(c)
        st.calls += 1      # after the handler, as Redis: INFO does not count itself
        if not slow:
            return reply
        if self.tracking_on:    # client-side caching: keys read, invalidations after the reply
            reply = self.tracking.leave(c, cmd, argv, reply)
        if t0 >= 0:
            self.timed_call(c, cmd, argv, st, self.clock_ns() - t0)
        return reply

    def timed_call(self, c: Client, cmd: Command, argv: list[bytes], st: CommandStat,
                   ns: int) -> None:
        """What a timed call took, ``ns``, recorded (``call``'s tail, and the C dispatch's for
        a timed call: pyrepl/_dispatch.c): commandstats and latencystats, the slow log,
        MONITOR, the latency monitor."""
        st.record(ns, self.config.latency_tracking)
        cfg = self.config
        if 0 <= cfg.slowlog_log_slower_than <= ns // 1000 and not cmd.skip_slowlog and \
                c.blocked is None:
            self.slowlog.push(c, cmd.name, argv, ns // 1000, cfg.slowlog_log_slower_than,
                              cfg.slowlog_max_len, self.host.time_us() // 1_000_000)
        if self.monitors and not cmd.skip_monitor:   # (every call is timed meanwhile)
            monitor.feed(self, c, cmd.name, argv)
        threshold = cfg.latency_monitor_threshold
        if threshold and ns // 1_000_000 >= threshold:
            self.latency.add("fast-command" if "fast" in cmd.flags else "command",
                             ns // 1_000_000, self.host.time_us() // 1_000_000)

    def latency_sample(self, event: str, ms: int) -> None:
        """latencyAddSampleIfNeeded: record ``ms`` under ``event`` when it reaches
        latency-monitor-threshold (0: the monitor is off)."""
        threshold = self.config.latency_monitor_threshold
        if threshold and ms >= threshold:
            self.latency.add(event, ms, self.host.time_us() // 1_000_000)

    def total_commands_processed(self) -> int:
        """INFO total_commands_processed: the sum of commandstats' calls (one counter on the
        hot path instead of two)."""
        return sum(st.calls for st in self.cmdstats.values())

    def failed_call(self, c: Client, cmd: Command, e: ReplyError) -> ReplyError:
        """A command answered with an error while running (failed_calls)."""
        self.error_reply(c, str(e), cmd, rejected=False)
        return e

    def command_stat(self, cmd: Command) -> CommandStat:
        """INFO commandstats' record of ``cmd`` (made on first use)."""
        st = self.cmdstats.get(cmd)
        if st is None:
            st = self.cmdstats[cmd] = CommandStat()
            st.timing = self._sample_mask(cmd)
            st.sample = 0 if self.tracking_on else st.timing
        return st

    def _sample_mask(self, cmd: Command) -> int:
        """Which calls of ``cmd`` are timed: ``calls & mask == 0`` (see call)."""
        cfg = self.config
        if cmd.sampled and cfg.slowlog_log_slower_than != 0 and not self.monitors and \
                not cfg.latency_monitor_threshold:
            return 15
        return 0

    def resample(self) -> None:
        """The calls' masks after a change of what they depend on: ``timing`` (the slow log's
        and the latency monitor's thresholds, MONITOR clients coming or going) and ``sample``,
        the slow path's (every call takes it while a client tracks keys)."""
        for cmd, st in self.cmdstats.items():
            st.timing = self._sample_mask(cmd)
            st.sample = 0 if self.tracking_on else st.timing

    def error_reply(self, c: Client, message: str, cmd: Command | None,
                    rejected: bool) -> None:
        """Every error reply passes here (Redis's afterErrorReply): total_error_replies,
        errorstats by the first word, the command's rejected/failed_calls, and an error sent
        to our master goes to the replication layer (propagation-error-behavior)."""
        self.stats.total_error_replies += 1
        code = message.split(" ", 1)[0] if message else "ERR"
        if len(self.errorstats) < 128 or code in self.errorstats:   # Redis's cap on codes
            self.errorstats[code] = self.errorstats.get(code, 0) + 1
        if cmd is not None:
            st = self.command_stat(cmd)
            if rejected:
                st.rejected += 1
            else:
                st.failed += 1
        if c.kind == "master" and self.replication is not None:
            self.replication.propagation_error(c, cmd.name if cmd is not None else "<unknown>",
                                               message)

    def unblock(self, c: Client, reply: object) -> None:
        """Answer a blocked client and go on with the commands it pipelined meanwhile (at
        once, or after the serving pass that answered it: pyrepl.core.blocking)."""
        if c.blocked is None:
            return
        self.blocking.release(c)
        if not c.closed:
            if not c.reply_mode & REPLY_OFF:
                c.write(encode(reply, c.proto))
            self.pending_flush.append(c)
            self.blocking.resume(c)

    def also_propagate(self, db_id: int, argv: list[bytes]) -> None:
        self._pending.append((db_id, argv))

    def propagate_internal(self, db_id: int, argv: list[bytes]) -> None:
        """Propagate a command the server itself generated (expired key DEL)."""
        self._pending.append((db_id, argv))
        if self._call_depth == 0:
            self.flush_propagation()

    def refresh_stream_live(self) -> None:
        """``stream_live``: whether a write's propagation goes anywhere (a backlog on a master,
        or the AOF); while it is False the core keeps no pending propagation at all (the write
        path's cheapest case). With AOF on the feeds are the fan-out (pyrepl.aof.feed)."""
        repl = self.replication
        self.aof_on = aof_on = self.aof.on
        self.stream_live = aof_on or (repl is not None and repl.backlog is not None
                                      and repl.replica.master_host is None)
        if aof_on:
            fan = FeedFanout(self.aof.writer, repl)
            self.repl_feed, self.repl_feed_span = fan.feed, fan.feed_span
        elif repl is not None:
            self.repl_feed, self.repl_feed_span = repl.feed, repl.feed_span
        else:
            self.repl_feed = self.repl_feed_span = None

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

    @property
    def replica_mode(self) -> bool:
        """True while this server follows a master (keys then expire only by its DEL)."""
        return not self.expiry_deletes

    def flush_propagation(self, c: Client | None = None,
                          request: list[bytes] | None = None) -> None:
        """Hand what the last top-level call changed to the replication layer. When that is
        exactly ``request``, the command ``c`` sent, the bytes it arrived as are passed along
        if its reader proved them canonical (a slice instead of an encode)."""
        pending = self._pending
        self._pending = []
        feed = self.repl_feed
        if len(pending) == 1 and feed is not None:
            db_id, argv = pending[0]
            feed(db_id, argv, c.reader.raw_last(argv) if argv is request and c else None)
        elif pending and feed is not None:
            feed(pending[0][0], [b"MULTI"])
            for db_id, argv in pending:
                feed(db_id, argv)
            feed(pending[-1][0], [b"EXEC"])
        if self.serve_after_flush:
            self.serve_after_flush = False
            self.blocking.serve_after_flush()

    # -- cron -----------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """serverCron: called ``hz`` times a second by the I/O shell (core/cron.py)."""
        self.now_ms = now_ms
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


    def _denied_by_disk_error(self, c: Client, cmd: Command) -> bool:
        """The MISCONF check of processCommand (only called while ``disk_error`` is set)."""
        is_write = cmd.write or (cmd.name == "exec" and any(q.write for q, _ in c.multi_queue))
        if not is_write and cmd.name != "ping":
            return False
        if c.kind == "master":
            # As Redis: the replica panics rather than apply writes it cannot persist, unless
            # replica-ignore-disk-write-errors; then it applies them and logs (every 10 s).
            if not self.config.replica_ignore_disk_write_errors and cmd.name != "ping":
                self.host.panic("Replica was unable to write command to disk.")
            if self.now_ms > self._disk_error_logged_ms + 10_000:
                self._disk_error_logged_ms = self.now_ms
                self.log.warning("Replica is applying a command even though it is unable to "
                                 "write to disk.")
            return False
        self._reject(c, self.disk_error or "", cmd)
        return True

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
        if self.rdb_child_pid != -1:
            self.host.kill_child(self.rdb_child_pid)
            self.rdb_child_pid = -1

    # -- misc -----------------------------------------------------------------------------
    def select_db(self, c: Client, index: int) -> None:
        c.db = self.dbs[index]


MISCONF_ERR = ("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to "
               "persist to disk. Commands that may modify the data set are disabled, because this "
               "instance is configured to report errors during writes if RDB snapshotting fails "
               "(stop-writes-on-bgsave-error option). Please check the Redis logs for details "
               "about the RDB error.")

#: Redis's CMD_PROTECTED commands and the directive that allows each (no, yes, local).
_PROTECTED_COMMANDS = {"debug": "enable_debug_command", "module": "enable_module_command"}


def unknown_command_error(argv: list[bytes]) -> str:
    args = ""
    for a in argv[1:]:
        if len(args) >= 128:
            break
        args += "'" + a.decode("utf-8", "replace")[: 128 - len(args)] + "' "
    name = argv[0].decode("utf-8", "replace")[:128]
    return f"ERR unknown command '{name}', with args beginning with: {args}"

# What a RESP2 client may run while subscribed (processCommand's pub/sub context check).
SUBSCRIBE_MODE_COMMANDS = frozenset((
    "ping", "subscribe", "ssubscribe", "unsubscribe", "sunsubscribe", "psubscribe",
    "punsubscribe", "quit", "reset"))


# The common cases in C (pyrepl/native.py: unless pyrepl runs as plain Python): execute's
# (pyrepl/_dispatch.c), a run's checks and counts (pyrepl/_plainrun.c), the hottest commands'
# common forms (pyrepl/commands/_hot.c).
_dispatch = native.load("pyrepl._dispatch")
_plainrun = native.load("pyrepl._plainrun")
if _dispatch is not None:
    _dispatch.bind(ServerCore, Client, Command, CommandStat, Database, Raw, BLOCKED, ReplyError,
                   encode, NAME_CACHE)
if _plainrun is not None:
    _plainrun.bind(ServerCore, Client, Command, CommandStat, LatencyHistogram, NAME_CACHE,
                   plainrun.account, plainrun.start)
_bind_hot(ServerCore, Stats)
_install_hot()
