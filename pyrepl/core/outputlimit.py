"""client-output-buffer-limit for normal and pub/sub clients (Redis's checkClientOutputBufferLimits
and closeClientOnOutputBufferLimitReached); replicas are limited on their share of the
replication buffer instead (pyrepl.replication.master.feeding).

Theory of operation: a limit is hard bytes, soft bytes and soft seconds per client class
("normal", or "pubsub" for a subscribed client). A client at or over its hard limit, or over
its soft limit for longer than the seconds, is closed and its unsent output dropped (no
partial reply reaches it), counted in ``client_output_buffer_limit_disconnections``.

What is counted: what CLIENT LIST's ``omem`` shows, a client's output not yet written plus
what its transport still holds (``clientevict.output_memory``); for a subscriber the messages
held while its transport is paused are counted as they come (``Client.obuf_held``,
pyrepl.core.pubsub), not summed again at each message.

When it is checked: a normal client after each command it runs, only while the normal class
has a limit (``ServerCore.obuf_normal``, the one test the read path makes; with it set the
read takes the Python path); a reply of many random picks a chunk at a time while it is built
(``check`` with the bytes built so far, so HRANDFIELD -999999999 stops mid-run as in Redis
rather than building the whole answer); a subscriber as each message is added; and, for the
soft limit's seconds to run out while no traffic comes, the cron rechecks the clients found
over a soft limit (``soft``), as Redis's clientsCron does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrepl.core.clientevict import output_memory

if TYPE_CHECKING:
    from pyrepl.core.client import Client
    from pyrepl.core.server import ServerCore

NO_LIMIT = (0, 0, 0)


class OutputLimits:
    """The limits of the normal and pub/sub classes, and the clients over a soft limit."""

    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self.soft: dict[Client, None] = {}     # over a soft limit: the cron looks again

    def refresh(self) -> None:
        """The config changed: whether normal clients are checked after each command."""
        core = self.core
        core.obuf_normal = core.config.client_output_buffer_limit.get(
            "normal", NO_LIMIT) != NO_LIMIT

    def used(self, c: Client) -> int:
        if c.subs is not None:    # (its held messages are counted as they come: no sum)
            return c.obuf_held + self.core.host.output_buffered(c)
        return output_memory(c)

    def reached(self, c: Client, used: int) -> bool:
        """checkClientOutputBufferLimits: at the hard limit, or over the soft one for longer
        than its seconds (the first time over it starts the clock)."""
        core = self.core
        hard, soft, seconds = core.config.client_output_buffer_limit.get(
            "pubsub" if c.subs is not None else "normal", NO_LIMIT)
        if hard and used >= hard:
            return True
        if soft and used >= soft:
            since = c.obuf_soft_since
            if not since:
                c.obuf_soft_since = core.now_ms
                self.soft[c] = None
                return False
            return core.now_ms - since > seconds * 1000
        if c.obuf_soft_since:
            c.obuf_soft_since = 0
            self.soft.pop(c, None)
        return False

    def check(self, c: Client, building: int = 0) -> bool:
        """closeClientOnOutputBufferLimitReached (async) for a client's replies, ``building``
        bytes of a reply still being built counted too: True if the client is now closed. A
        client that is not a connection (a script's, the AOF's) or the master is never
        closed."""
        core = self.core
        if c.closed or c.close_after_reply or (c.kind != "normal" and c.kind != "pubsub") \
                or core.clients.get(c.id) is not c:
            return c.close_after_reply
        if not self.reached(c, self.used(c) + building):
            return False
        self.soft.pop(c, None)
        core.output_limit_reached(c)
        return True

    def cron(self) -> None:
        """clientsCron's closeClientOnOutputBufferLimitReached (sync) for the clients over a
        soft limit: their seconds run out even while no traffic comes."""
        core = self.core
        for c in list(self.soft):
            if c.closed or c.close_after_reply or core.clients.get(c.id) is not c:
                del self.soft[c]
            elif self.reached(c, self.used(c)):
                del self.soft[c]
                core.output_limit_reached(c, at_once=True)
