"""Command dispatch, Redis's ``processCommand`` and ``call``: lookup (subcommands of containers
included), arity, the gate (a busy script, MISCONF, CLIENT PAUSE), authentication, ACL, subscribe
mode, MULTI queueing, replication's refusals, then the handler; the pipelined run
(``execute_run``); commandstats, errorstats, the slow log, MONITOR, the latency monitor.

A handler returns a reply value (``pyrepl.resp.types``) or raises ``ReplyError``; it bumps
``core.dirty`` for every change, and ``call`` queues a write that changed the dataset for
propagation (pyrepl/core/propagation.py). These functions are :class:`ServerCore`'s methods (bound
in its class body), so the core and the C parts reach them by name: pyrepl/_dispatch.c runs
``execute``'s common case, pyrepl/_plainrun.c a run's checks and counts.
"""

from __future__ import annotations

import itertools
from operator import attrgetter
from operator import call as _apply
from typing import TYPE_CHECKING

from pyrepl import fastpath
from pyrepl.commands.table import COMMANDS, Command
from pyrepl.core import monitor
from pyrepl.core.client import REPLY_OFF, REPLY_RUNNING, REPLY_SET, REPLY_SKIP, Client
from pyrepl.core.cluster import asking_ends
from pyrepl.core.cluster import redirect as cluster_redirect
from pyrepl.core.pubsub import Push
from pyrepl.core.stats import CommandStat
from pyrepl.errors import OOM
from pyrepl.fastpath import account_run, start_run
from pyrepl.resp.types import BLOCKED, QUEUED, Raw, ReplyError
from pyrepl.resp.writer import encode, encode_replies, error_bytes

if TYPE_CHECKING:
    from pyrepl.core.server import ServerCore

#: A command's exact spelling -> the command (filled by ``resolve_command``, read first by
#: ``execute`` and the C dispatch: no lower() for a name seen before).
NAME_CACHE: dict[bytes, Command] = {}
_handler = attrgetter("handler")


def lookup_command(core: ServerCore, argv: list[bytes]) -> Command | None:
    cmd = COMMANDS.get(argv[0].lower())
    if cmd is not None and cmd.subcommands and len(argv) >= 2:
        return cmd.subcommands.get(argv[1].lower())
    return cmd


def reject(core: ServerCore, c: Client, message: str, cmd: Command | None = None) -> None:
    """Refuse a command before it runs (Redis's rejectCommand: rejected_calls). A refused
    EXEC aborts the transaction (execCommandAbort)."""
    if c.in_multi:
        c.multi_error = True
    if cmd is not None and cmd.name == "exec":
        c.discard_transaction()
        message = "EXECABORT Transaction discarded because of: " + \
            message.removeprefix("ERR ")
    core.error_reply(c, message, cmd, rejected=True)
    c.write(error_bytes(message))


def resolve_command(core: ServerCore, c: Client, argv: list[bytes]) -> Command | None:
    """Find the command for ``argv`` (containers included), or reject it and return None."""
    name = argv[0].lower()
    cmd = COMMANDS.get(name)
    if cmd is None:
        if name in (b"host:", b"post"):
            # Cross-protocol scripting guard, as Redis: an HTTP request closes the link.
            core.log.warning("Possible SECURITY ATTACK detected. It looks like somebody "
                             "is sending POST or Host: commands to Redis. Connection "
                             "aborted.")
            c.close_after_reply = True
            return None
        core.reject(c, unknown_command_error(argv))
        return None
    protected = _PROTECTED_COMMANDS.get(cmd.name)
    if protected is not None and not cmd.subcommands:   # never cached: depends on client
        return cmd if _protected_allowed(core, c, cmd, cmd, argv, protected) else None
    if cmd.subcommands:  # container: resolve the subcommand
        if len(argv) >= 2:
            sub = cmd.subcommands.get(argv[1].lower())
            if sub is None:
                arg = argv[1].decode("utf-8", "replace")[:128]
                core.reject(c, f"ERR unknown subcommand '{arg}'. "
                                f"Try {cmd.name.upper()} HELP.")
                return None
            if protected is not None and "protected" in sub.flags and \
                    not _protected_allowed(core, c, cmd, sub, argv, protected):
                return None
            return sub
        if cmd.handler is None:
            core.reject(c, f"ERR wrong number of arguments for '{cmd.name}' command", cmd)
            return None
    elif len(NAME_CACHE) < 4096:
        NAME_CACHE[argv[0]] = cmd  # exact spelling -> command, skips lower() next time
    return cmd


def _protected_allowed(core: ServerCore, c: Client, top: Command, cmd: Command, argv: list[bytes],
                       setting: str) -> bool:
    """Redis's PROTECTED commands (DEBUG, MODULE LOAD ...): the arity first, then
    ``enable-debug-command`` / ``enable-module-command`` for this client."""
    n = len(argv)
    if (cmd.arity > 0 and cmd.arity != n) or n < -cmd.arity:
        core.reject(c, f"ERR wrong number of arguments for '{cmd.name}' command", cmd)
        return False
    if not c.allows_protected(getattr(core.config, setting)):
        core.reject(c, f"ERR {top.name.upper()} command not allowed. If the "
                        f"{setting.replace('_', '-')} option is set to \"local\", you "
                        "can run it from a local connection, otherwise you need to set "
                        "this option in the configuration file, and then restart the "
                        "server.", cmd)
        return False
    return True


def execute(core: ServerCore, c: Client, argv: list[bytes]) -> None:
    """Run one command from a client and append its reply (Redis's processCommand).

    This is the hot path: the common case (a known command, an authenticated client not
    in MULTI, a master) runs with as few lookups as possible.
    """
    if c.reply_mode and not c.reply_mode & REPLY_RUNNING:
        core.execute_quietly(c, argv)
        return
    cmd = NAME_CACHE.get(argv[0])
    if cmd is None:
        cmd = core.resolve_command(c, argv)
        if cmd is None:
            if c.cluster_flags:
                asking_ends(c)
            return
    if not cmd.min_args <= len(argv) <= cmd.max_args:
        core.reject(c, f"ERR wrong number of arguments for '{cmd.name}' command", cmd)
        if c.cluster_flags:
            asking_ends(c)
        return
    if core.gated and _gate(core, c, cmd, argv):
        return
    if core.maxmemory and _out_of_memory(core, c, cmd, argv):
        return
    if c.in_multi or not c.authenticated or c.subs is not None or c.restricted:
        if not c.authenticated and not cmd.noauth:
            core.reject(c, "NOAUTH Authentication required.", cmd)
            return
        # -- ACL permission check (pyrepl.core.acl; Redis's ACLCheckAllPerm) ---------------
        # Only for a restricted user (``Client.restricted``); a MULTI's no-multi command
        # gets its own error first.
        if c.restricted and not (c.in_multi and cmd.nomulti) and \
                core.acl.denied(c, cmd, argv):
            return
        # -- end of the ACL permission check ------------------------------------------
        # Replication's refusals before a command is queued, in processCommand's order:
        # NOREPLICAS / READONLY, the subscribe context, then MASTERDOWN (EXEC with its queue)
        guard = core.replication
        queued = c.multi_queue if c.in_multi else ()
        if guard is not None:
            err = guard.refuse_write(c, cmd, queued)
            if err is not None:
                core.reject(c, err, cmd)
                return
        if c.subs is not None and c.proto == 2 and cmd.name not in SUBSCRIBE_MODE_COMMANDS:
            core.reject(c, f"ERR Can't execute '{cmd.name}': only (P|S)SUBSCRIBE / "
                            "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this "
                            "context", cmd)
            return
        if guard is not None:
            err = guard.refuse_stale(c, cmd, queued)
            if err is not None:
                core.reject(c, err, cmd)
                return
        if c.in_multi:
            if cmd.nomulti:
                core.reject(c, "ERR Command not allowed inside a transaction", cmd)
                return
            if cmd.name not in ("exec", "discard", "multi", "watch", "quit", "reset"):
                if not c.multi_queue:   # (maxmemory-clients: the queued arguments' bytes)
                    c.multi_mem = 0
                c.multi_mem += sum(map(len, argv)) + 8 * len(argv)
                c.mem_quiet = False
                c.multi_queue.append((cmd, argv))
                c.out.append(QUEUED.data)
                return
    else:
        guard = core.replication
        # Replication refuses commands only on a replica (READONLY, MASTERDOWN) or on a
        # master with min-replicas-to-write (NOREPLICAS); skip the call otherwise.
        if guard is not None and (not core.expiry_deletes or (
                cmd.write and core.min_replicas_to_write)) and c.kind != "master":
            err = guard.check_command(c, cmd)
            if err is not None:
                core.reject(c, err, cmd)
                return
    reply = core.call(c, cmd, argv)
    if core._pending and core._call_depth == 0:
        core.flush_propagation(c, argv)
        if guard is not None:
            c.woff = guard.master_repl_offset
    t = type(reply)
    if t is bytes:
        c.out.append(b"$%d\r\n%s\r\n" % (len(reply), reply))  # type: ignore[arg-type]
    elif t is int:
        c.out.append(b":%d\r\n" % reply)  # type: ignore[str-format]
    elif t is Raw:
        c.out.append(reply.data)  # type: ignore[attr-defined]
    elif reply is not BLOCKED:
        c.out.append(encode(reply, c.proto))


def execute_run(core: ServerCore, c: Client, first: list[bytes], rest: list[list[bytes]]) -> bool:
    """Run ``first`` and the plain commands a pipelining client sent right behind it
    (``rest``, last first: ``pyrepl.plainrun``), replies included, in one pass; False
    (nothing done) when ``first`` does not qualify and ``execute`` must run it.

    Besides what ``plainrun.start`` checks once for the run: a client authenticated,
    unrestricted, not in subscribe mode; a master without min-replicas-to-write (a
    replica's READONLY is checked per command). With a backlog, writes propagate as
    ``run_propagating`` says."""
    if not c.authenticated or c.subs is not None or c.restricted or \
            (core.replication is not None and
             (not core.expiry_deletes or core.min_replicas_to_write)):
        return False
    run = start_run(core, c, first, rest)   # (plainrun.start; its common case in C)
    if run is None:
        return False
    cmds, reqs, one = run
    replies: list[object] = []
    t0 = core.clock_ns()
    try:
        if core.stream_live:
            core.run_propagating(c, cmds, reqs, replies, one)
        else:
            core.run_plain(c, cmds, reqs, replies, one)
    except BaseException:   # (the requests up to the failing one count as read)
        c.reader.take_queued(len(rest) - len(replies))
        raise
    finally:   # replies in order (no plain command writes to its own client meanwhile)
        c.out.extend(encode_replies(replies, c.proto))
    c.reader.take_queued(len(rest) - len(reqs) + 1)
    account_run(core, c, cmds, one, core.clock_ns() - t0)   # (plainrun.account)
    return True


def run_plain(core: ServerCore, c: Client, cmds: list[Command], reqs: list[list[bytes]],
              replies: list[object], one: bool) -> None:
    """A run's handlers (``cmds[i]`` on ``reqs[i]``; ``one``: all the same command) called
    at C speed (``map``), resumed after a command that answers an error; their replies
    are appended to ``replies`` (on an exception, those before the failing command); a
    run of one command with a whole-run form (``Command.whole``: SET, GET) goes to it
    first. For a run whose propagation goes nowhere: no backlog, or the replica's master
    stream."""
    if one and cmds[0].whole is not None:
        done = cmds[0].whole(c, reqs)
        if done is not None:
            replies += done
            if core._pending:
                core.propagate_now(c)
            return
    failed = core.failed_call
    it = iter(reqs)
    if one:
        calls = map(cmds[0].handler, itertools.repeat(c), it)  # type: ignore[arg-type]
    else:
        calls = map(_apply, map(_handler, cmds), itertools.repeat(c), it)
    while True:
        try:
            replies.extend(calls)
            break
        except ReplyError as e:
            replies.append(failed(c, cmds[len(replies)], e))
    if core._pending:   # (nowhere to go: this only empties it, as execute's flushes would)
        core.propagate_now(c)


def run_propagating(core: ServerCore, c: Client, cmds: list[Command], reqs: list[list[bytes]],
                    replies: list[object], one: bool) -> None:
    """execute_run's loop with a backlog. A write that changed the dataset and propagates
    as it arrived (the common case) joins a *span* of such requests, fed to the
    replication layer as one slice of the bytes they arrived as (``end_span``);
    anything else ends the span first and then propagates as ``call`` and ``execute``
    would: a rewritten or effect-propagated write, a lazily expired key's DEL (internal
    propagation waits in ``_pending`` meanwhile, as inside ``call``), a write to another
    db than the span's (the backlog's SELECT goes between). A run of one command with
    a whole-run form (``Command.whole``) goes to it first: a write's run then changed the
    dataset at every request, none rewritten, so it is one span. The loop is
    ``propagating_loop``, in C when built (``fastpath.propagating``)."""
    if one and cmds[0].whole is not None and not core._pending:
        done = cmds[0].whole(c, reqs)
        if done is not None:
            replies += done
            if cmds[0].propagates:
                core.end_span(c, reqs, 0, len(reqs), c.db.id)
            return
    loop = fastpath.propagating
    (propagating_loop if loop is None else loop)(core, c, cmds, reqs, replies)


def propagating_loop(core: ServerCore, c: Client, cmds: list[Command], reqs: list[list[bytes]],
                     replies: list[object]) -> None:
    """run_propagating's loop over a run's requests (``_plainrun.propagating`` in C, this its
    reference): the spans of writes propagated as they arrived, everything else through
    ``propagate_call``."""
    failed = core.failed_call
    add = replies.append
    span = -1            # the span's first request (-1: no span open)
    span_db = c.db
    c.propagate_argv = None
    depth = core._call_depth
    try:
        for i, (cmd, argv) in enumerate(zip(cmds, reqs, strict=True)):
            if not cmd.propagates:
                if span >= 0:   # (before it: a key it expires propagates at once)
                    span = core.end_span(c, reqs, span, i, span_db.id)
                try:
                    add(cmd.handler(c, argv))  # type: ignore[misc]
                except ReplyError as e:
                    add(failed(c, cmd, e))
                if core._pending:
                    core.propagate_now(c, argv)
                continue
            dirty = core.dirty
            core._call_depth = depth + 1   # (internal propagation waits, as in call)
            try:
                add(cmd.handler(c, argv))  # type: ignore[misc]
            except ReplyError as e:
                add(failed(c, cmd, e))
            core._call_depth = depth
            changed = core.dirty != dirty
            verbatim = changed and c.propagate_argv is None and not core._pending
            if span >= 0 and not (verbatim and c.db is span_db):
                span = core.end_span(c, reqs, span, i, span_db.id)
            if not verbatim:
                core.propagate_call(c, argv, changed)
            elif span < 0:
                span, span_db = i, c.db
    finally:
        core._call_depth = depth
        if span >= 0:   # (on an exception: the writes before the failing one)
            core.end_span(c, reqs, span, len(replies), span_db.id)


LOADING_ERR = "LOADING Redis is loading the dataset in memory"


def refresh_gate(core: ServerCore) -> None:
    """``gated``: a busy script, a MISCONF state, a CLIENT PAUSE is on, clients are over
    maxmemory-clients, the dataset is loading or cluster mode is on (the one test
    ``execute`` makes for all six while none is). In cluster mode with none of the other
    five, ``served_slots`` is the cluster state's table of the slots served here with no
    check (pyrepl.cluster.served): the fast paths (the C dispatch, a run's start) look at
    it, behind the gate's test, and run a command whose keys are all in one slot of it,
    as ``_gate`` would let it run; else None."""
    st = core.cluster
    other = core.busy is not None or core.disk_error is not None or \
        core.pause.kind != 0 or core.client_eviction.over or core.loading or \
        core.async_loading
    core.gated = other or st is not None
    core.served_slots = None if other or st is None else st.served.table


def set_busy(core: ServerCore, error: str | None) -> None:
    """A script ran past busy-reply-threshold (``error``: what other clients get, -BUSY),
    or ended (None). Meanwhile the shell serves clients from the script's hook
    (Host.process_events_while_blocked), and only ``allow-busy`` commands run."""
    core.busy = error
    core.refresh_gate()


def _gate(core: ServerCore, c: Client, cmd: Command, argv: list[bytes]) -> bool:
    """True when cluster mode redirected the command (pyrepl.core.cluster, after the
    authentication and ACL checks, as processCommand's order), client eviction freed the
    client (processCommand's evictClients, before the maxmemory step:
    pyrepl.core.clientevict), a busy script, MISCONF refused the command or CLIENT PAUSE
    postponed it."""
    if core.cluster is not None and not (c.authenticated or cmd.noauth):
        asking_ends(c)       # (refused below: NOAUTH)
    elif core.cluster is not None:
        if c.restricted and not (c.in_multi and cmd.nomulti) and \
                core.acl.denied(c, cmd, argv):
            asking_ends(c)
            return True
        err = cluster_redirect(core, c, cmd, argv)
        if err is not None:
            if cmd.name == "exec":    # (the transaction is discarded: the error as it is)
                core.error_reply(c, err, cmd, rejected=True)
                c.write(error_bytes(err))
            else:
                core.reject(c, err, cmd)
            return True
    if core.client_eviction.over and core.client_eviction.evict(c):
        return True
    if core.loading and "loading" not in cmd.flags and not c.must_obey():
        # (served while loading: from a busy script's hook during an AOF load)
        core.reject(c, LOADING_ERR, cmd)
        return True
    if core.async_loading and ("no-async-loading" in cmd.flags or (cmd.name == "exec" and any(
            "no-async-loading" in q[0].flags for q in c.multi_queue))):
        core.reject(c, LOADING_ERR, cmd)
        return True
    if core.busy is not None and not cmd.allow_busy:
        core.reject(c, core.busy, cmd)
        return True
    if core.disk_error is not None and _denied_by_disk_error(core, c, cmd):
        return True
    return bool(core.pause.kind) and _postponed(core, c, cmd, argv)


def _out_of_memory(core: ServerCore, c: Client, cmd: Command, argv: list[bytes]) -> bool:
    """processCommand's maxmemory step (only called while a limit is set): evict what is
    due (pyrepl.core.evict); out of memory, refuse a denyoom command, an EXEC of one, or
    anything but EXEC / DISCARD / QUIT / RESET sent inside MULTI. A client that must
    authenticate first, or a restricted user's denied command, gets that error instead (as
    Redis checks them first); the master's stream is never refused (its replica would
    diverge)."""
    if not c.authenticated and not cmd.noauth:
        return False
    if not core.evictor.check() or c.kind == "master":
        return False
    if not (cmd.denyoom or c.in_multi and cmd.name not in ("exec", "discard", "quit", "reset")
            or cmd.name == "exec" and any(q.denyoom for q, _ in c.multi_queue)):
        return False
    if c.restricted and core.acl.denied(c, cmd, argv):
        return True
    core.reject(c, OOM, cmd)
    return True


def _postponed(core: ServerCore, c: Client, cmd: Command, argv: list[bytes]) -> bool:
    """CLIENT PAUSE (checked only while one is on): postpone the command if it covers it,
    after the checks Redis makes first (authentication, subscribe mode, READONLY)."""
    pause = core.pause
    if not pause.covers(c, cmd, argv) or not c.authenticated or (
            c.subs is not None and c.proto == 2 and cmd.name not in SUBSCRIBE_MODE_COMMANDS):
        return False
    guard = core.replication
    if guard is not None and c.kind != "master" and guard.check_command(
            c, cmd, c.multi_queue if c.in_multi else ()) is not None:
        return False
    pause.postpone(c, argv)
    return True


def _denied_by_disk_error(core: ServerCore, c: Client, cmd: Command) -> bool:
    """The MISCONF check of processCommand (only called while ``disk_error`` is set)."""
    is_write = cmd.write or (cmd.name == "exec" and any(q.write for q, _ in c.multi_queue))
    if not is_write and cmd.name != "ping":
        return False
    if c.kind == "master":
        # As Redis: the replica panics rather than apply writes it cannot persist, unless
        # replica-ignore-disk-write-errors; then it applies them and logs (every 10 s).
        if not core.config.replica_ignore_disk_write_errors and cmd.name != "ping":
            core.host.panic("Replica was unable to write command to disk.")
        if core.now_ms > core._disk_error_logged_ms + 10_000:
            core._disk_error_logged_ms = core.now_ms
            core.log.warning("Replica is applying a command even though it is unable to "
                             "write to disk.")
        return False
    core.reject(c, core.disk_error or "", cmd)
    return True


def execute_quietly(core: ServerCore, c: Client, argv: list[bytes]) -> None:
    """CLIENT REPLY OFF / SKIP: run the command; drop its replies (not push frames: pub/sub
    messages and confirmations still go out, as Redis's CLIENT_PUSHING). A reply to a
    CLIENT REPLY ON goes out."""
    mode = c.reply_mode
    c.reply_mode = mode & REPLY_OFF | REPLY_RUNNING   # (CLIENT REPLY adds REPLY_SET)
    out, c.out = c.out, []
    try:
        core.execute(c, argv)
    finally:
        produced, c.out = c.out, out
        if c.reply_mode & REPLY_SET:     # the command was CLIENT REPLY: its own rule (ON
            # answers +OK even when it was the command a SKIP skips: it clears the skip first)
            c.reply_mode &= ~(REPLY_SET | REPLY_RUNNING)
            drop = c.reply_mode & (REPLY_OFF | REPLY_SKIP)
        else:                            # a skip is spent, OFF stays
            c.reply_mode = mode & REPLY_OFF
            drop = True
        if drop:
            produced = [x for x in produced if type(x) is Push]
        out.extend(produced)


def call(core: ServerCore, c: Client, cmd: Command, argv: list[bytes]) -> object:
    """Run a handler; queue it for propagation when a write changed the dataset.

    INFO commandstats: every call is counted; one call in 16 of a ``fast`` or O(1) command
    (``Command.sampled``; the first call included) is timed, and the time of all calls is estimated from those (two clock
    reads per command would cost ~10 % of the hot path, see bench/RESULTS.md); every call
    of the others (and of all while ``slowlog-log-slower-than`` is 0 or a MONITOR client
    is connected) is timed, for the slow log. MONITOR sees the command after it ran."""
    c.commands += 1
    c.last_cmd = cmd
    st = core.cmdstats.get(cmd)
    if st is None:
        st = core.command_stat(cmd)
    # The slow path: a timed call, or any call while a client tracks keys (see resample)
    slow = not st.calls & st.sample
    if slow:
        t0 = core.clock_ns() if not st.calls & st.timing else -1
        if core.tracking_on:    # client-side caching (pyrepl.core.tracking): the current client
            core.tracking.enter(c, cmd, argv)
    if not cmd.propagates:
        try:
            reply = cmd.handler(c, argv)  # type: ignore[misc]
        except ReplyError as e:
            reply = core.failed_call(c, cmd, e)
    else:
        dirty = core.dirty
        c.propagate_argv = None
        # What the handler causes (a lazily expired key's DEL) propagates with the
        # command, as one MULTI/EXEC unit.
        core._call_depth += 1
        try:
            reply = cmd.handler(c, argv)  # type: ignore[misc]
        except ReplyError as e:
            reply = core.failed_call(c, cmd, e)
        finally:
            core._call_depth -= 1
        if core.dirty != dirty or c.propagate_argv is not None:
            if core.stream_live:   # (no backlog, or a replica: it would go nowhere)
                pa = c.propagate_argv
                if pa is None:
                    core._pending.append((c.db.id, argv))
                elif pa:   # (empty: the command propagated its effects itself, a script)
                    core._pending.append((c.db.id, pa))
            if core.keys_waited:   # the only cost of blocking while nobody waits
                core.blocking.after_write(c)
    st.calls += 1      # after the handler, as Redis: INFO does not count itself
    if not slow:
        return reply
    if core.tracking_on:    # client-side caching: keys read, invalidations after the reply
        reply = core.tracking.leave(c, cmd, argv, reply)
    if t0 >= 0:
        core.timed_call(c, cmd, argv, st, core.clock_ns() - t0)
    return reply


def timed_call(core: ServerCore, c: Client, cmd: Command, argv: list[bytes], st: CommandStat,
               ns: int) -> None:
    """What a timed call took, ``ns``, recorded (``call``'s tail, and the C dispatch's for
    a timed call: pyrepl/_dispatch.c): commandstats and latencystats, the slow log,
    MONITOR, the latency monitor."""
    st.record(ns, core.config.latency_tracking)
    cfg = core.config
    if c.blocked is not None:   # (logged once served: blocking._served_stats)
        c.blocked.call_argv, c.blocked.call_us = argv, ns // 1000
    elif 0 <= cfg.slowlog_log_slower_than <= ns // 1000 and not cmd.skip_slowlog:
        core.slowlog.push(c, cmd.name, argv, ns // 1000, cfg.slowlog_log_slower_than,
                          cfg.slowlog_max_len, core.host.time_us() // 1_000_000)
    if core.monitors and not cmd.skip_monitor:   # (every call is timed meanwhile)
        monitor.feed(core, c, cmd.name, argv)
    threshold = cfg.latency_monitor_threshold
    if threshold and ns // 1_000_000 >= threshold:
        core.latency.add("fast-command" if "fast" in cmd.flags else "command",
                         ns // 1_000_000, core.host.time_us() // 1_000_000)


def unblocked_stats(core: ServerCore, c: Client, argv: list[bytes], call_us: int,
                    reply_us: int) -> None:
    """updateStatsOnUnblock: a served blocked command's slow log entry (the time of the call
    that blocked and of the serve, its arguments as they came) and the serve's latency event
    ``command-unblocking``."""
    cmd = c.last_cmd
    cfg = core.config
    us = call_us + reply_us
    if cmd is not None and not cmd.skip_slowlog and 0 <= cfg.slowlog_log_slower_than <= us:
        core.slowlog.push(c, cmd.name, argv, us, cfg.slowlog_log_slower_than,
                          cfg.slowlog_max_len, core.host.time_us() // 1_000_000)
    latency_sample(core, "command-unblocking", reply_us // 1000)


def latency_sample(core: ServerCore, event: str, ms: int) -> None:
    """latencyAddSampleIfNeeded: record ``ms`` under ``event`` when it reaches
    latency-monitor-threshold (0: the monitor is off)."""
    threshold = core.config.latency_monitor_threshold
    if threshold and ms >= threshold:
        core.latency.add(event, ms, core.host.time_us() // 1_000_000)


def total_commands_processed(core: ServerCore) -> int:
    """INFO total_commands_processed: the sum of commandstats' calls (one counter on the
    hot path instead of two)."""
    return sum(st.calls for st in core.cmdstats.values())


def failed_call(core: ServerCore, c: Client, cmd: Command, e: ReplyError) -> ReplyError:
    """A command answered with an error while running (failed_calls)."""
    core.error_reply(c, str(e), cmd, rejected=False)
    return e


def command_stat(core: ServerCore, cmd: Command) -> CommandStat:
    """INFO commandstats' record of ``cmd`` (made on first use)."""
    st = core.cmdstats.get(cmd)
    if st is None:
        st = core.cmdstats[cmd] = CommandStat()
        st.timing = _sample_mask(core, cmd)
        st.sample = 0 if core.tracking_on else st.timing
    return st


def _sample_mask(core: ServerCore, cmd: Command) -> int:
    """Which calls of ``cmd`` are timed: ``calls & mask == 0`` (see call)."""
    cfg = core.config
    if cmd.sampled and cfg.slowlog_log_slower_than != 0 and not core.monitors and \
            not cfg.latency_monitor_threshold:
        return 15
    return 0


def resample(core: ServerCore) -> None:
    """The calls' masks after a change of what they depend on: ``timing`` (the slow log's
    and the latency monitor's thresholds, MONITOR clients coming or going) and ``sample``,
    the slow path's (every call takes it while a client tracks keys); and what a timed
    call records (refresh_timing)."""
    refresh_timing(core)
    for cmd, st in core.cmdstats.items():
        st.timing = _sample_mask(core, cmd)
        st.sample = 0 if core.tracking_on else st.timing


def refresh_timing(core: ServerCore) -> None:
    """What ``timed_call`` does with a call's time, in two slots the C dispatch reads instead
    of the configuration (pyrepl/_dispatch.c, timed_quick): ``quick_below_ns``, the time
    under which a timed call only adds to commandstats and latencystats (the slow log's
    threshold, the latency monitor's, 0 while a MONITOR client listens), and
    ``latency_tracking``. Refreshed with the masks (resample) and at start."""
    cfg = core.config
    below = 1 << 62   # (neither log takes a call: no duration reaches it)
    if cfg.slowlog_log_slower_than >= 0:
        below = min(below, cfg.slowlog_log_slower_than * 1000)
    if cfg.latency_monitor_threshold:
        below = min(below, cfg.latency_monitor_threshold * 1_000_000)
    core.quick_below_ns = 0 if core.monitors else below
    core.latency_tracking = bool(cfg.latency_tracking)


def error_reply(core: ServerCore, c: Client, message: str, cmd: Command | None,
                rejected: bool) -> None:
    """Every error reply passes here (Redis's afterErrorReply): total_error_replies,
    errorstats by the first word, the command's rejected/failed_calls, and an error sent
    to our master goes to the replication layer (propagation-error-behavior)."""
    core.stats.total_error_replies += 1
    code = message.split(" ", 1)[0] if message else "ERR"
    if len(core.errorstats) < 128 or code in core.errorstats:   # Redis's cap on codes
        core.errorstats[code] = core.errorstats.get(code, 0) + 1
    if cmd is not None:
        st = core.command_stat(cmd)
        if rejected:
            st.rejected += 1
        else:
            st.failed += 1
    if c.kind == "master" and core.replication is not None:
        core.replication.propagation_error(c, cmd.name if cmd is not None else "<unknown>",
                                           message)


def unblock(core: ServerCore, c: Client, reply: object) -> None:
    """Answer a blocked client and go on with the commands it pipelined meanwhile (at
    once, or after the serving pass that answered it: pyrepl.core.blocking)."""
    if c.blocked is None:
        return
    core.blocking.release(c)
    if not c.closed:
        if not c.reply_mode & REPLY_OFF:
            c.write(encode(reply, c.proto))
        core.pending_flush.append(c)
        core.blocking.resume(c)


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
