"""Shutting the server down, as Redis's prepareForShutdown and finishShutdown: SHUTDOWN's
flags (also a signal's: shutdown-on-sigterm / -sigint), the wait for lagging replicas, the
final save, and the refusal that keeps the server running when that save fails.

``Shutdown`` is the core's (``core.shutdown``). ``wait`` is the shutdown waiting for its
replicas, if any: (flags, deadline ms), checked by ``cron``, with the SHUTDOWN clients blocked
meanwhile in ``clients`` (every SHUTDOWN sent during the wait joins them, as Redis blocks each);
SHUTDOWN ABORT (``abort``) and a second SIGINT (net/server.py) end it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pyrepl.core.blocking import Blocked
from pyrepl.rdb.encoder import rdb_temp_path
from pyrepl.resp.types import BLOCKED, ReplyError

if TYPE_CHECKING:
    from pyrepl.core.client import Client
    from pyrepl.core.server import ServerCore

# SHUTDOWN's flags, as Redis's SHUTDOWN_* (and the bits of shutdown-on-sigterm / -sigint)
SHUTDOWN_SAVE, SHUTDOWN_NOSAVE, SHUTDOWN_NOW, SHUTDOWN_FORCE = 1, 2, 4, 8
SHUTDOWN_FAILED = "ERR Errors trying to SHUTDOWN. Check logs."


class Shutdown:
    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self.wait: tuple[int, int] | None = None
        self.clients: list[Client] = []     # blocked in SHUTDOWN (BLOCKED_SHUTDOWN)
        # a SIGTERM / SIGINT received (shutdown_asap): (its name, its flags), acted on by the
        # next cron (none while DEBUG PAUSE-CRON holds it; SHUTDOWN ABORT drops it)
        self.signalled: tuple[str, int] | None = None

    def signal_cron(self) -> None:
        """serverCron's shutdown_asap: the signal's shutdown, begun here, in a safe place."""
        if self.signalled is None or self.wait is not None:
            return
        name, flags = self.signalled
        self.signalled = None
        err = self.request(flags)
        if isinstance(err, str):
            self.core.log.warning(f"{name} received but errors trying to shut down the "
                                  "server, check the logs for more information")

    def prepare(self, save: bool | None, force: bool = False) -> bool:
        """finishShutdown: stop the child, save if asked or configured. False when the save
        failed (and not ``force``): the server then keeps running."""
        core = self.core
        if not core.aof.shutdown(force):   # (the AOF flushed and fsynced, its child killed)
            return False
        core.kill_rdb_child()
        do_save = bool(core.config.save) if save is None else save
        if core.loading:
            do_save = False      # never overwrite the dump with a half-loaded dataset
        log = core.log
        if do_save:
            log.notice("Saving the final RDB snapshot before exiting.")
            core.host.notify_supervisor("STATUS=Saving the final RDB snapshot\n")
            temp = rdb_temp_path(core.persistence.rdb_path(), os.getpid())
            if not core.host.final_save(core.persistence.save, temp):
                if not force:
                    log.warning("Error trying to save the DB, can't exit.")
                    core.host.notify_supervisor("STATUS=Error trying to save the DB, can't "
                                                "exit.\n")
                    return False
                log.warning("Error trying to save the DB. Exit anyway.")
        log.warning("Redis is now ready to exit, bye bye...")
        return True

    def request(self, flags: int, client: Client | None = None) -> str | None | object:
        """prepareForShutdown with Redis's flags (SHUTDOWN_SAVE 1, NOSAVE 2, NOW 4, FORCE 8).
        Unless NOW, a master with replicas that have not acknowledged its whole stream waits
        for them up to ``shutdown-timeout`` seconds (GETACK sent, checked by ``cron``); the
        SHUTDOWN client is blocked meanwhile. Returns None when the server is to exit now,
        BLOCKED while waiting, or an error text when it cannot (and keeps running)."""
        core = self.core
        if self.wait is not None:       # (already initiated: this one waits with the others)
            if client is None:
                return SHUTDOWN_FAILED
            core.blocking.block(client, Blocked("shutdown"))
            self.clients.append(client)
            return BLOCKED
        core.log.warning("User requested shutdown...")
        core.host.notify_supervisor("STOPPING=1\n")
        repl = core.replication
        if (not flags & SHUTDOWN_NOW and core.config.shutdown_timeout and repl is not None
                and not repl.ready_to_shutdown()):
            self.wait = (flags, core.now_ms + core.config.shutdown_timeout * 1000)
            repl.request_acks()
            core.log.notice("Waiting for replicas before shutting down.")
            if client is not None:
                core.blocking.block(client, Blocked("shutdown"))
                self.clients.append(client)
            return BLOCKED
        return self._finish(flags)

    def abort(self) -> bool:
        """SHUTDOWN ABORT: the waiting shutdown, or a signal's not begun yet, is dropped (the
        clients waiting told it failed); False when there is none."""
        if self.wait is None and self.signalled is None:
            return False
        self.wait = None
        self.signalled = None
        self.core.log.warning("Shutdown manually aborted.")
        self._answer(SHUTDOWN_FAILED)
        return True

    def in_milliseconds(self) -> int | None:
        """INFO's shutdown_in_milliseconds while a shutdown waits, else None."""
        return None if self.wait is None else self.wait[1] - self.core.now_ms

    def _answer(self, err: str | None) -> None:
        """replyToClientsBlockedOnShutdown: the blocked SHUTDOWN clients get ``err``, or
        (None: the server exits) no answer but their connection closed."""
        core = self.core
        clients, self.clients = self.clients, []
        for client in clients:
            if client.closed:
                continue
            if err is None:
                client.close_after_reply = True
                core.blocking.release(client)
            else:
                core.unblock(client, ReplyError(err))

    def _finish(self, flags: int) -> str | None:
        core = self.core
        save = True if flags & SHUTDOWN_SAVE else False if flags & SHUTDOWN_NOSAVE else None
        if core.replication is not None:
            core.replication.log_lagging_replicas()
        if not self.prepare(save, force=bool(flags & SHUTDOWN_FORCE)):
            core.log.warning("Errors trying to shut down the server. Check the logs for more "
                             "information.")
            return SHUTDOWN_FAILED
        core.shutdown_asap = True
        core.host.request_shutdown()
        return None

    def cron(self, now_ms: int) -> None:
        """A shutdown waiting for replicas: finish once they caught up or the time is up."""
        assert self.wait is not None
        flags, deadline = self.wait
        repl = self.core.replication
        if now_ms < deadline and repl is not None and not repl.ready_to_shutdown():
            return
        self.wait = None
        self._answer(self._finish(flags))
