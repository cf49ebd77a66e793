"""CLIENT PAUSE: commands postponed until the pause ends (Redis's pauseClients and
BLOCKED_POSTPONE).

Theory of operation: while a pause is on (``core.pause.kind``: ``WRITE`` or ``ALL``), the
dispatcher hands every command of a normal client (or of the master link: Redis exempts only
replicas and monitors) that the pause covers to :meth:`Pause.postpone`: ALL covers everything,
WRITE the commands that may change the dataset or be propagated (``write``/``may-replicate``,
and an EXEC whose queue holds one). The client is blocked with a :class:`Postponed` record
holding the command, so its later commands wait in its query buffer. The pause ends at its
deadline (checked by the cron, as Redis's serverCron does) or with CLIENT UNPAUSE; a second
CLIENT PAUSE keeps the stricter kind and the later deadline. At the end every postponed client
runs its command again, first postponed first (and may be postponed again if a pause covers
it still). While paused, expiry keeps the dataset still: the cron expires nothing and a lazily
expired key reads as missing without being deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrepl.blocking import Blocked

if TYPE_CHECKING:
    from pyrepl.client import Client
    from pyrepl.commands.table import Command
    from pyrepl.core import ServerCore

OFF, WRITE, ALL = 0, 1, 2


class Postponed(Blocked):
    __slots__ = ("argv",)

    def __init__(self, argv: list[bytes]) -> None:
        super().__init__("postpone")
        self.argv = argv


class Pause:
    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self.kind = OFF
        self.end_ms = 0
        self.postponed: list[Client] = []

    def start(self, kind: int, end_ms: int) -> None:
        """pauseClients(PAUSE_BY_CLIENT_COMMAND): the stricter kind, the later end."""
        if self.kind == OFF:
            self.kind, self.end_ms = kind, end_ms
        else:
            self.kind, self.end_ms = max(self.kind, kind), max(self.end_ms, end_ms)
        self.core.refresh_gate()

    def stop(self) -> None:
        """unpauseClients: every postponed client runs its command again."""
        self.kind = OFF
        self.end_ms = 0
        self.core.refresh_gate()
        waiting, self.postponed = self.postponed, []
        core = self.core
        for c in waiting:
            record = c.blocked
            if not isinstance(record, Postponed) or c.closed:
                continue
            core.blocking.release(c)
            core.execute(c, record.argv)
            core.pending_flush.append(c)
            if c.blocked is None:
                c.process()

    def tick(self, now_ms: int) -> None:
        if self.kind != OFF and self.end_ms < now_ms:
            self.stop()

    def covers(self, c: Client, cmd: Command) -> bool:
        """Whether the pause postpones this command of this client."""
        if c.kind == "replica" or c in self.core.monitors:
            return False
        if self.kind == ALL:
            return True
        if cmd.propagates:
            return True
        return cmd.name == "exec" and any(q.propagates for q, _ in c.multi_queue)

    def postpone(self, c: Client, argv: list[bytes]) -> None:
        self.core.blocking.block(c, Postponed(argv))
        self.postponed.append(c)
