"""The server core, sans-io: the state of a server and everything that changes it, driven by
the I/O shell (pyrepl/net/) through a few calls. Import what you use from its modules (this
package imports nothing, so that a module of it can be imported alone):

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
- A client's state and its byte interface (``client.py``); blocked clients (``blocking.py``);
  pub/sub (``pubsub.py``); client-side caching (``tracking.py``); CLIENT PAUSE
  (``pause.py``); INFO (``info.py``); ACL (``acl.py``, ``acl_file.py``); the latency monitor,
  SLOWLOG and MONITOR (``latency.py``, ``slowlog.py``, ``monitor.py``); MEMORY
  (``memory.py``); maxmemory's eviction (``evict.py``: ``core.evictor``); maxmemory-clients'
  client eviction (``clientevict.py``: ``core.client_eviction``).
"""
