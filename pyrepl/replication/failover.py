"""FAILOVER: a master hands its role to one of its replicas without losing a write (Redis 6.2+'s
coordinated failover, replication.c failoverCommand / updateFailoverStatus).

Theory of operation, a small state machine driven by the command, the cron and the replica
side's PSYNC:

=====================  ==============================================  =====================
state                  what moves it                                   to
=====================  ==============================================  =====================
``no-failover``        FAILOVER [TO host port [FORCE]] [TIMEOUT ms]:    ``waiting-for-sync``
                       writes paused (their own pause purpose), acks
                       asked for
``waiting-for-sync``   a replica (the target, or any) acknowledged      ``failover-in-progress``
                       the whole stream: we become its replica
                       (REPLICAOF target), our PSYNC carries
                       ``FAILOVER`` so it promotes itself
``waiting-for-sync``   the timeout passed: with FORCE, as above;        ``failover-in-progress``
                       without, aborted                                 / ``no-failover``
``failover-in-        the target answered the PSYNC (+CONTINUE, or     ``no-failover``
progress``             +FULLRESYNC): done, writes unpaused
``failover-in-        any other answer, or FAILOVER ABORT: back to     ``no-failover``
progress``             master (REPLICAOF NO ONE), unpaused
=====================  ==============================================  =====================

Every move is a ``failover`` sync event (``step``: requested, in-progress, done, aborted;
``reason``) and INFO ``master_failover_state`` shows the state. The target side (a replica
getting ``PSYNC <replid> <offset> FAILOVER`` from its master) is in the master side's
``sync_command``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrepl.replication.master.states import SlaveState

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.master.states import ReplicaLink

NO_FAILOVER = "no-failover"
WAIT_FOR_SYNC = "waiting-for-sync"
IN_PROGRESS = "failover-in-progress"
FOREVER = 1 << 62


class Failover:
    def __init__(self, manager: Replication) -> None:
        self.manager = manager
        self.state = NO_FAILOVER
        self.host: str | None = None
        self.port = 0
        self.end_ms = 0
        self.force = False

    # -- the command --------------------------------------------------------------------------
    def request(self, host: str | None, port: int, timeout_ms: int, force: bool) -> str | None:
        """failoverCommand after parsing: an error text, or None when the failover started."""
        m = self.manager
        core = m.core
        if self.state != NO_FAILOVER:
            return "ERR FAILOVER already in progress."
        if m.is_replica():
            return "ERR FAILOVER is not valid when server is a replica."
        if not m.master.links:
            return "ERR FAILOVER requires connected replicas."
        if force and (not timeout_ms or host is None):
            return "ERR FAILOVER with force option requires both a timeout and target HOST and IP."
        if host is not None:
            link = self._find(host, port)
            if link is None:
                return "ERR FAILOVER target HOST and PORT is not a replica."
            if link.state is not SlaveState.ONLINE:
                return "ERR FAILOVER target replica is not online."
            self.host, self.port = host, port
            core.log.notice(f"FAILOVER requested to {host}:{port}.")
        else:
            core.log.notice("FAILOVER requested to any replica.")
        self.end_ms = core.now_ms + timeout_ms if timeout_ms else 0
        self.force = force
        self.state = WAIT_FOR_SYNC
        core.pause.start(core.pause.WRITE, FOREVER, purpose="failover")
        m.request_acks()
        self._emit("requested", reason="target" if host is not None else "any-replica")
        return None

    def abort(self, why: str) -> None:
        """abortFailover."""
        if self.state == NO_FAILOVER:
            return
        core = self.manager.core
        target = f"{self.host}:{self.port}" if self.host is not None else "any replica"
        core.log.notice(f"FAILOVER to {target} aborted: {why}")
        if self.state == IN_PROGRESS:
            self.manager.replica.unset_master()
        self._emit("aborted", reason=why)
        self._clear()

    def _clear(self) -> None:
        """clearFailoverState."""
        self.state = NO_FAILOVER
        self.host, self.port, self.end_ms, self.force = None, 0, 0, False
        self.manager.core.pause.stop("failover")

    # -- the cron -----------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """updateFailoverStatus."""
        if self.state != WAIT_FOR_SYNC:
            return
        m = self.manager
        core = m.core
        if self.end_ms and self.end_ms <= now_ms:
            if self.force:
                core.log.notice(f"FAILOVER to {self.host}:{self.port} time out exceeded, "
                                "failing over.")
                self._start(reason="forced")
            else:
                self.abort("Replica never caught up before timeout")
            return
        offset = m.master_repl_offset
        if self.host is not None:
            link = self._find(self.host, self.port)
        else:
            link = next((x for x in m.master.links if x.ack_off == offset), None)
            if link is not None:
                self.host, self.port = link.peer_ip(), link.listening_port
        if link is not None and link.ack_off == offset:
            core.log.notice(f"Failover target {self.host}:{self.port} is synced, failing over.")
            self._start(reason="synced")
        else:
            m.request_acks()

    def _start(self, reason: str) -> None:
        self.state = IN_PROGRESS
        self._emit("in-progress", reason=reason)
        assert self.host is not None
        self.manager.replica.set_master(self.host, self.port)

    # -- the replica side's PSYNC --------------------------------------------------------------
    def psync_failover_arg(self) -> bool:
        """Whether our PSYNC carries FAILOVER (the target must promote itself)."""
        return self.state == IN_PROGRESS

    def psync_answered(self, accepted: bool) -> None:
        """The target answered our PSYNC: +CONTINUE / +FULLRESYNC end the failover; anything
        else aborts it."""
        if self.state != IN_PROGRESS:
            return
        if accepted:
            self._emit("done", reason="psync-accepted")
            self._clear()
        else:
            self.abort("Failover target rejected psync request")

    # -- helpers ----------------------------------------------------------------------------
    def _find(self, host: str, port: int) -> ReplicaLink | None:
        """findReplica: by its announced (or peer) IP and listening port."""
        for link in self.manager.master.links:
            if link.peer_ip().lower() == host.lower() and link.listening_port == port:
                return link
        return None

    def _emit(self, step: str, reason: str) -> None:
        m = self.manager
        target = f"{self.host}:{self.port}" if self.host is not None else None
        m.events.emit(m.core.now_ms, "failover", "master", peer=target, result=step,
                      reason=reason, offset=m.master_repl_offset)
