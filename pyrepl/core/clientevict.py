"""Client eviction: ``maxmemory-clients`` as Redis 7.0 enforces it (networking.c's
evictClients, getClientEvictionLimit, getClientMemoryUsage; server.c's
updateClientMemUsageAndBucket and clientEvictionAllowed).

Theory of operation: while a limit is set (``maxmemory-clients`` bytes, or ``N%`` of
``maxmemory``; at least 128 KiB, as Redis), every normal and pub/sub client carries the figure
last counted for it (``Client.mem``) and ``total`` is their sum, kept by deltas: a client's figure
is taken again where its memory changes, as Redis's updateClientMemUsageAndBucket does:

- after each read the shell handled (its query buffer, the replies it handed the transport and
  what the transport still holds: ``Host.output_buffered``), in ``after_read``;
- when a message or an invalidation is added to a client's output by someone else's command
  (pub/sub delivery, client-side caching's redirect), by the frame's size (``grew``);
- in the cron, a slice of the clients each run (their output drained, their figures fall);
- when the limit changes (all of them).

What a figure counts (``memory``): a fixed cost per client, the query buffer (unparsed bytes and
the arguments of a request not complete yet: ``reader.buffered()``, and the rest of a big
argument its header announced: ``reader.reserved()``, as Redis makes room for it at once), the
pending output, MULTI's
queued commands (their arguments' bytes, ``Client.multi_mem``, plus a cost per command), and a
cost per watched key, subscription and tracking prefix, close to Redis's own overheads.

Eviction costs the dispatch nothing: when an update finds ``total >= limit`` it raises
``over`` and the core's gate (``core.gated``, the one test ``execute`` and the C dispatch make
for a busy script, MISCONF and CLIENT PAUSE) goes up; the next command of any client then runs
``evict`` first (processCommand's evictClients, before the maxmemory step), and so does the end of
the read (Redis's beforeSleep). ``evict`` refreshes every figure (none is evicted on a stale one),
then frees the clients using the most memory first until the total is under the limit: never a
client with CLIENT NO-EVICT on, a replica or a master (their figures are not counted either), as
clientEvictionAllowed. Each is logged as Redis does (``Evicting client: <CLIENT LIST line>``) and
counted in INFO's ``evicted_clients``. A client that evicts itself stops there: its command does
not run and nothing more of its read does. When only protected clients are left over the limit,
the warning is logged once and ``over`` stays down until the total grows again.

Redis picks victims by power-of-two buckets of memory; picking the largest directly is the same
order at a finer grain (the tests' sizes are a factor of 2 or more apart).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyrepl.core.client import Client
    from pyrepl.core.server import ServerCore

#: A client's fixed cost: its Client, reader and protocol objects and the transport's
#: structures (the core's part measured with tracemalloc: ~940 bytes).
CLIENT_BASE = 2048
#: Per watched key (Redis: a listNode and a watchedKey, 48 bytes; here a tuple and the
#: key's entry in the database's watched set).
WATCH_COST = 96
#: Per channel, pattern or shard channel subscribed (Redis: a dictEntry or listNode; here the
#: client's dict entry and the registry's).
SUB_COST = 96
#: Per command queued in MULTI (Redis's multiCmd), beyond its arguments' bytes.
QUEUED_COST = 64
#: Per tracking prefix (BCAST PREFIX).
PREFIX_COST = 96
#: Per argument, counted with a queued command's bytes (Redis: sizeof(robj*)).
ARG_COST = 8
#: Redis's floor: a smaller maxmemory-clients would leave no way to talk to the server.
MIN_LIMIT = 128 * 1024
#: Clients whose figures the cron refreshes per run (at least; all of them once a second).
CRON_MIN_ITERATIONS = 5

COUNTED = frozenset(("normal", "pubsub"))


def eviction_limit(maxmemory_clients: int, maxmemory: int) -> int:
    """getClientEvictionLimit: the limit in bytes (0: none). ``maxmemory_clients`` is the
    directive's value, ``-N`` for ``N%`` (of ``maxmemory``; none while maxmemory is 0)."""
    if maxmemory_clients < 0 and maxmemory > 0:
        limit = int(maxmemory * -maxmemory_clients / 100)
    elif maxmemory_clients > 0:
        limit = maxmemory_clients
    else:
        return 0
    return max(limit, MIN_LIMIT)


def output_memory(c: Client) -> int:
    """The output a client holds: replies not handed on yet and what its transport holds."""
    return c.pending_output() + c.core.host.output_buffered(c)


def multi_memory(c: Client) -> int:
    """multiStateMemOverhead: the queued commands and the watched keys."""
    queued = c.multi_queue
    mem = WATCH_COST * len(c.watched)
    return mem + c.multi_mem + QUEUED_COST * len(queued) if queued else mem


def memory(c: Client, running: list[bytes] | None = None) -> int:
    """getClientMemoryUsage for a pyrepl client (what CLIENT LIST's ``tot-mem`` shows);
    ``running``: the arguments of the command it runs, counted as Redis counts argv."""
    mem = fixed_memory(c) + query_memory(c) + output_memory(c)
    if running is not None:
        mem += sum(map(len, running)) + ARG_COST * len(running)
    return mem


def query_memory(c: Client) -> int:
    """The query buffer: what was received and not run yet, and the rest of a big argument
    whose header announced it (Redis makes the room for it at once)."""
    reader = c.reader
    return reader.buffered() + reader.reserved()


def fixed_memory(c: Client) -> int:
    """What a client costs besides its query buffer and its output."""
    mem = CLIENT_BASE
    if c.multi_queue or c.watched:
        mem += multi_memory(c)
    subs = c.subs
    if subs is not None:
        mem += SUB_COST * (len(subs.channels) + len(subs.patterns) + len(subs.shard))
    prefixes = c.tracking_prefixes
    if prefixes:
        mem += PREFIX_COST * len(prefixes)
    return mem


class ClientEviction:
    """The core's client eviction (``core.client_eviction``); ``core.maxmemory_clients`` is its
    limit, the one test the read path makes (0: off)."""

    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self.limit = 0
        self.total = 0          # the counted clients' figures (Client.mem)
        self.over = False       # total >= limit: the gate is up, evict before the next command
        # The total that was over the limit with no client left to evict (0: none): the
        # gate goes up again only once the total is above it. It follows the total down
        # (a figure that falls, a client that closes), so any growth from there is looked
        # at again: a client that joins as another leaves is not spared.
        self.stuck = 0
        self._cron_pos = 0

    # -- the limit --------------------------------------------------------------------------
    def refresh(self) -> None:
        """The limit from the config (maxmemory-clients, maxmemory); every figure again."""
        core = self.core
        cfg = core.config
        self.limit = eviction_limit(cfg.maxmemory_clients, cfg.maxmemory)
        core.maxmemory_clients = self.limit
        self.stuck = 0
        if not self.limit:
            for c in core.clients.values():
                c.mem = 0
            self.total = 0
            self._set_over(False)
            return
        self.update_all()

    # -- figures ----------------------------------------------------------------------------
    def update(self, c: Client) -> None:
        """Count ``c``'s memory again (updateClientMemUsageAndBucket)."""
        if not self.limit:
            return
        if c.kind in COUNTED and not c.closed:
            mem = fixed_memory(c)
            buffers = query_memory(c) + output_memory(c)
            c.mem_quiet = not buffers
            mem += buffers
        else:
            mem = 0
            c.mem_quiet = True
        total = self.total = self.total + mem - c.mem
        c.mem = mem
        if total >= self.limit:
            if total > self.stuck:
                if not self.over:
                    self._set_over(True)
            else:
                self.stuck = total   # (a figure fell: the next growth is looked at again)
        elif self.stuck:
            self.stuck = 0

    def grew(self, c: Client, n: int) -> None:
        """``n`` bytes added to ``c``'s output by another client's command (a pub/sub
        message, an invalidation)."""
        if c.mem:
            c.mem += n
            c.mem_quiet = False
            self.total += n
            if self.total >= self.limit and self.total > self.stuck and not self.over:
                self._set_over(True)

    def forget(self, c: Client) -> None:
        """A client closed: its figure leaves the total."""
        if c.mem:
            total = self.total = self.total - c.mem
            c.mem = 0
            if total < self.limit:
                self.stuck = 0
                if self.over:
                    self._set_over(False)
            elif self.stuck > total:
                self.stuck = total

    def update_all(self) -> None:
        for c in list(self.core.clients.values()):
            self.update(c)

    def after_read(self, c: Client) -> None:
        """The shell handled a read of ``c`` (its replies handed on): its figure again, and
        the eviction due (beforeSleep's evictClients). The shell skips the call for a quiet
        client (``Client.mem_quiet``) whose read left nothing buffered, while its transport
        is under its high-water mark: the figure would not change, what the transport holds
        under that mark aside (the cron and ``evict`` count it)."""
        self.update(c)
        if self.over:
            self.evict()

    def cron(self) -> None:
        """clientsCron's share: a slice of the figures again (all of them once a second),
        then what is due."""
        core = self.core
        clients = list(core.clients.values())
        n = len(clients)
        if n:
            per_run = min(n, max(n // max(1, core.config.hz), CRON_MIN_ITERATIONS))
            start = self._cron_pos % n
            for i in range(start, start + per_run):
                self.update(clients[i % n])
            self._cron_pos = start + per_run
        if self.over:
            self.evict()

    # -- eviction ---------------------------------------------------------------------------
    def evict(self, current: Client | None = None) -> bool:
        """evictClients: free the clients using the most memory until the total is under
        the limit; True when ``current`` (the client whose command is about to run) was one."""
        core = self.core
        if not self.limit:
            self._set_over(False)
            return False
        self.update_all()    # (no client goes on a stale figure)
        self._set_over(False)
        if self.total < self.limit:
            return False
        candidates = sorted((c for c in core.clients.values() if c.mem and not c.no_evict),
                            key=lambda c: c.mem, reverse=True)
        evicted_current = False
        for c in candidates:
            if self.total < self.limit:
                break
            core.log.notice(f"Evicting client: {c.info_line()}")
            core.stats.evicted_clients += 1
            if c is current:
                evicted_current = True
            self.close(c)
        if self.total >= self.limit:
            core.log.warning("Over client maxmemory after evicting all evictable clients")
            self.stuck = self.total
        return evicted_current

    def close(self, c: Client) -> None:
        """freeClient: the connection closed at once, the client gone from the core."""
        core = self.core
        c.close_after_reply = True
        c.out.clear()
        core.host.close_client(c)
        core.client_closed(c)     # (the shell's connection_lost later finds it closed)

    def _set_over(self, over: bool) -> None:
        if over != self.over:
            self.over = over
            self.core.refresh_gate()
