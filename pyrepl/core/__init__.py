"""The server core, sans-io: the state of a server and everything that changes it, driven by
the I/O shell (pyrepl/net/) through a few calls.

- ``server.py``: ``ServerCore`` — databases, clients, the command dispatch (Redis's
  processCommand and call), propagation, the one forked child's slot.
- ``cron.py``: ``Cron`` (``core.cron``), serverCron's jobs; ``core.tick`` runs them.
- ``persistence.py``: ``Persistence`` (``core.persistence``), the RDB file: SAVE, BGSAVE, the
  save points, the load at start and DEBUG RELOAD's, their INFO bookkeeping.
- ``shutdown.py``: ``Shutdown`` (``core.shutdown``), SHUTDOWN and a signal's, as Redis's
  prepareForShutdown / finishShutdown.
- ``stats.py``: the counters and timings INFO reports.
- ``host.py``: ``Host``, what the core asks of the operating system through the shell, and
  ``NullLog``.

The names other packages use are importable from ``pyrepl.core`` itself.
"""

from pyrepl.core.host import Host, NullLog
from pyrepl.core.server import ServerCore
from pyrepl.core.shutdown import SHUTDOWN_FORCE, SHUTDOWN_NOSAVE, SHUTDOWN_NOW, SHUTDOWN_SAVE
from pyrepl.core.stats import CommandStat, LatencyHistogram, Stats

__all__ = ["SHUTDOWN_FORCE", "SHUTDOWN_NOSAVE", "SHUTDOWN_NOW", "SHUTDOWN_SAVE", "CommandStat",
           "Host", "LatencyHistogram", "NullLog", "ServerCore", "Stats"]
