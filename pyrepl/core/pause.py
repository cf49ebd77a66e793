"""CLIENT PAUSE: commands postponed until the pause ends (Redis's pauseClients and
BLOCKED_POSTPONE).

Theory of operation: while a pause is on (``core.pause.kind``: ``WRITE`` or ``ALL``), the
dispatcher hands every command of a normal client (or of the master link: Redis exempts only
replicas and monitors) that the pause covers to :meth:`Pause.postpone`: ALL covers everything,
WRITE the commands that may change the dataset or be propagated (``write``/``may-replicate``,
and an EXEC whose queue holds one). The client is blocked with a :class:`Postponed` record
holding the command, so its later commands wait in its query buffer. The pause ends at its
deadline (checked by the cron, as Redis's serverCron does) or with CLIENT UNPAUSE; a second
CLIENT PAUSE keeps the stricter kind and the later deadline. FAILOVER pauses writes for its own
purpose, so CLIENT UNPAUSE does not end it. At the end every postponed client
runs its command again, first postponed first (and may be postponed again if a pause covers
it still). While paused, expiry keeps the dataset still: the cron expires nothing and a lazily
expired key reads as missing without being deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrepl.core.blocking import Blocked

if TYPE_CHECKING:
    from pyrepl.commands.table import Command
    from pyrepl.core.client import Client
    from pyrepl.core.ports import PauseHost

OFF, WRITE, ALL = 0, 1, 2

# The commands whose replication depends on the script or function they run (getCommandFlags)
_SCRIPT_CALLS = frozenset(("eval", "evalsha", "fcall"))


class Postponed(Blocked):
    __slots__ = ("argv",)

    def __init__(self, argv: list[bytes]) -> None:
        super().__init__("postpone")
        self.argv = argv


class Pause:
    """The pauses in force, per purpose (CLIENT PAUSE; FAILOVER's write pause), and the clients
    they postponed. ``kind``/``end_ms`` are the strictest kind and the latest end over them
    (updateClientPauseTypeAndEndTime)."""

    OFF, WRITE, ALL = OFF, WRITE, ALL   # (the kinds, for those who hold only the pause)

    def __init__(self, core: PauseHost) -> None:
        self.core = core
        self.kind = OFF
        self.end_ms = 0
        self.purposes: dict[str, tuple[int, int]] = {}
        self.postponed: list[Client] = []

    def start(self, kind: int, end_ms: int, purpose: str = "client") -> None:
        """pauseClients: a purpose paused again keeps the stricter kind and the later end."""
        old = self.purposes.get(purpose)
        if old is not None:
            kind, end_ms = max(old[0], kind), max(old[1], end_ms)
        self.purposes[purpose] = (kind, end_ms)
        self._update()

    def stop(self, purpose: str = "client") -> None:
        """unpauseClients(purpose)."""
        if self.purposes.pop(purpose, None) is not None:
            self._update()

    def _update(self) -> None:
        old = self.kind
        self.kind = max((k for k, _ in self.purposes.values()), default=OFF)
        self.end_ms = max((e for _, e in self.purposes.values()), default=0)
        self.core.refresh_gate()
        if self.kind < old:
            self._release()

    def _release(self) -> None:
        """unblockPostponedClients: every postponed client runs its command again (and may be
        postponed again by a pause still on)."""
        waiting, self.postponed = self.postponed, []
        core = self.core
        for c in waiting:
            record = c.blocked
            if not isinstance(record, Postponed) or c.closed:
                continue
            core.blocking.release(c)
            if c.kind == "master":   # a replica's master stream: applied on from its command
                core.resume_master_stream(c, record.argv)
                continue
            core.execute(c, record.argv)
            core.pending_flush.append(c)
            if c.blocked is None:
                c.process()

    def tick(self, now_ms: int) -> None:
        """checkClientPauseTimeoutAndReturnIfPaused: drop the purposes whose end passed."""
        due = [p for p, (_, end) in self.purposes.items() if end < now_ms]
        for p in due:
            del self.purposes[p]
        if due:
            self._update()

    def covers(self, c: Client, cmd: Command, argv: list[bytes]) -> bool:
        """Whether the pause postpones this command of this client: with WRITE, a command
        that may replicate (is_may_replicate_command: a script's or function's declared
        flags count, so a ``no-writes`` one runs), or an EXEC with one in its queue."""
        if c.kind == "replica" or c in self.core.monitors:
            return False
        if self.kind == ALL:
            return True
        if cmd.name == "exec":
            return any(self._may_replicate(q, qargv) for q, qargv in c.multi_queue)
        return self._may_replicate(cmd, argv)

    def _may_replicate(self, cmd: Command, argv: list[bytes]) -> bool:
        if not cmd.propagates:
            return False
        if cmd.name not in _SCRIPT_CALLS:
            return True
        from pyrepl.scripting.engine import engine_of
        return bool(engine_of(self.core).may_replicate(argv))

    def postpone(self, c: Client, argv: list[bytes]) -> None:
        self.core.blocking.block(c, Postponed(argv))
        self.postponed.append(c)
