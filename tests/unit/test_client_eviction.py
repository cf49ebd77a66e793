"""maxmemory-clients: client eviction in the core (pyrepl.core.clientevict), sans-io. Each read
goes as the I/O shell takes it (``feed``: the bytes in, the replies out, then the core counts
the client again); what a transport still holds is the test's (``BufferHost``). The same
behaviours against redis-server 7.0.15 side by side: tests/interop/test_diff_client_eviction.py
(and Redis's own tests/unit/client-eviction.tcl, whose cases these follow)."""

from __future__ import annotations

import pytest

from pyrepl.config import Config
from pyrepl.core.client import Client
from pyrepl.core.clientevict import (
    CLIENT_BASE,
    MIN_LIMIT,
    SUB_COST,
    WATCH_COST,
    eviction_limit,
    memory,
)
from pyrepl.core.host import Host
from pyrepl.core.server import ServerCore
from pyrepl.net.server import ClientProtocol
from tests.support.cores import NOW, cmd

KB = 1024
MB = 1024 * 1024


class BufferHost(Host):
    """What each client's transport holds (``held[id]``), as NetHost.output_buffered reads it."""

    def __init__(self) -> None:
        self.held: dict[int, int] = {}

    def output_buffered(self, client: Client) -> int:
        return self.held.get(client.id, 0)


def make(limit: str = "1mb", *more: tuple[str, list[str]]) -> ServerCore:
    cfg = Config.load(None, [("save", [""]), ("maxmemory-clients", [limit]), *more])
    return ServerCore(cfg, BufferHost(), now_ms=NOW)


def connect(core: ServerCore, name: str = "") -> Client:
    c = core.connection_made(f"127.0.0.1:{40000 + core.next_client_id}", "127.0.0.1:6379")
    if name:
        feed(c, cmd("CLIENT", "SETNAME", name))
    return c


def feed(c: Client, data: bytes) -> bytes:
    """One read as the shell handles it: the commands run, the replies handed on, then the
    client's memory counted again (ServerCore.after_read)."""
    c.receive_data(data)
    out = c.data_to_send()
    if c.core.maxmemory_clients:
        c.core.after_read(c)
    return out


def partial_bulk(n: int) -> bytes:
    """A request whose one argument of ``n`` bytes is all but complete: it stays buffered."""
    return b"*1\r\n$%d\r\n" % (n + 1) + b"v" * n


def field(c: Client, name: str) -> str:
    for part in c.info_line().split(" "):
        key, _, value = part.partition("=")
        if key == name:
            return value
    raise KeyError(name)


def names(core: ServerCore) -> list[str]:
    return sorted(c.name.decode() for c in core.clients.values() if c.name)


# -- the limit ---------------------------------------------------------------------------------

def test_limit_bytes_percent_and_floor() -> None:
    assert eviction_limit(0, 0) == 0
    assert eviction_limit(3_000_000, 0) == 3_000_000
    assert eviction_limit(1, 0) == MIN_LIMIT              # (getClientEvictionLimit's floor)
    assert eviction_limit(-7, 6 * MB) == 6 * MB * 7 // 100
    assert eviction_limit(-7, 0) == 0                     # a percentage of no maxmemory: none
    core = make("7%", ("maxmemory", ["6mb"]))
    assert core.maxmemory_clients == 6 * MB * 7 // 100
    core.config.set("maxmemory", "0")
    assert core.maxmemory_clients == 0
    core.config.set("maxmemory-clients", "2mb")
    assert core.maxmemory_clients == 2 * MB


def test_off_by_default_counts_nothing() -> None:
    core = make("0")
    c = connect(core, "a")
    feed(c, partial_bulk(2 * MB))
    assert core.maxmemory_clients == 0 and c.mem == 0 and core.client_eviction.total == 0
    assert not core.gated and not c.closed


# -- what a client's memory counts --------------------------------------------------------------

def test_tot_mem_counts_query_buffer_output_multi_watch_and_subscriptions() -> None:
    core = make("100mb")
    c = connect(core, "a")
    base = int(field(c, "tot-mem"))
    assert base == CLIENT_BASE + c.reader.buffered()
    feed(c, partial_bulk(100 * KB))
    assert int(field(c, "tot-mem")) >= CLIENT_BASE + 100 * KB
    assert c.mem == memory(c) == int(field(c, "tot-mem"))     # the figure eviction uses
    other = connect(core, "b")
    feed(other, cmd("WATCH", "k1", "k2", "k3"))
    assert int(field(other, "tot-mem")) == CLIENT_BASE + 3 * WATCH_COST
    feed(other, cmd("MULTI") + cmd("SET", "k", "x" * 1000))
    assert int(field(other, "multi-mem")) == 3 + 1 + 1000 + 3 * 8
    assert int(field(other, "tot-mem")) > CLIENT_BASE + 1000
    feed(other, cmd("EXEC"))
    assert int(field(other, "multi-mem")) == 0
    assert int(field(other, "tot-mem")) == CLIENT_BASE
    feed(other, cmd("SUBSCRIBE", "a", "b") + cmd("PSUBSCRIBE", "p*"))
    assert int(field(other, "tot-mem")) == CLIENT_BASE + 3 * SUB_COST
    core.host.held[other.id] = 5000     # (replies the socket has not taken: omem too)
    assert int(field(other, "omem")) == 5000
    assert int(field(other, "tot-mem")) == CLIENT_BASE + 3 * SUB_COST + 5000


def test_the_total_follows_each_client_and_its_close() -> None:
    core = make("100mb")
    a, b = connect(core, "a"), connect(core, "b")
    feed(a, partial_bulk(200 * KB))
    feed(b, partial_bulk(300 * KB))
    ev = core.client_eviction
    assert ev.total == a.mem + b.mem
    feed(a, b"v\r\n")     # (its request completes: an error reply, the buffer empty)
    assert a.mem == CLIENT_BASE and ev.total == a.mem + b.mem
    core.client_closed(b)
    assert ev.total == a.mem


# -- eviction ------------------------------------------------------------------------------------

def test_client_evicted_due_to_large_query_buffer() -> None:
    core = make("1mb")
    control = connect(core, "control")
    fits = connect(core, "fits")
    feed(fits, b"*1\r\n$%d\r\n" % (600 * KB) + b"v" * (100 * KB))
    assert not fits.closed and fits.mem > 600 * KB    # (the announced argument counts)
    feed(fits, b"v" * (500 * KB) + b"\r\n")   # (it completes: an error reply, room again)
    assert not fits.closed and fits.mem < 100 * KB
    c = connect(core, "big")
    # a big argument counts from its header (Redis makes room for it at once): the client
    # announcing 2 MB goes after 500 KB of it
    feed(c, b"*1\r\n$%d\r\n" % (2 * MB) + b"v" * (500 * KB))
    assert c.closed and c.close_after_reply
    assert names(core) == ["control", "fits"]
    assert core.stats.evicted_clients == 1
    assert [m for lvl, m in core.log.lines if lvl == "notice" and
            m.startswith(f"Evicting client: id={c.id} ") and " name=big " in m]
    assert b"evicted_clients:1\r\n" in feed(control, cmd("INFO", "stats"))
    assert core.client_eviction.total == control.mem + fits.mem and not core.gated


def test_client_evicted_due_to_large_multi_buf() -> None:
    core = make("1mb")
    c = connect(core, "multi")
    feed(c, cmd("MULTI"))
    replies = b""
    for _ in range(5):                  # (bounded: 5 x 250 KB queued against 1 MB)
        if c.closed:
            break
        replies += feed(c, cmd("SET", "k", "v" * (250 * KB)))
    assert c.closed and core.stats.evicted_clients == 1
    assert replies.count(b"+QUEUED") == 5    # (the fifth took it over: gone after its read)


def test_client_evicted_due_to_watched_keys_and_subscriptions() -> None:
    for kind in ("WATCH", "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"):
        core = make("128kb")
        c = connect(core)
        for j in range(200_000):       # (bounded: ~1,400 of them reach 128 KB)
            feed(c, cmd(kind, str(j)))
            if c.closed:
                break
        assert c.closed, kind
        assert 1000 < j < 2000, (kind, j)
        assert core.stats.evicted_clients == 1


def test_client_evicted_due_to_tracking_prefixes() -> None:
    core = make("128kb")
    c = connect(core)
    for j in range(200_000):
        feed(c, cmd("CLIENT", "TRACKING", "on", "PREFIX", f"{j:012d}", "BCAST"))
        if c.closed:
            break
    assert c.closed and 1000 < j < 2000


def test_client_evicted_due_to_output_the_transport_holds() -> None:
    core = make("3000000")
    feed(connect(core), cmd("SET", "k", "v" * 200_000))
    c = connect(core, "reader")
    held = core.host.held
    for _ in range(100):                # (bounded: 15 replies reach 3 MB)
        assert int(field(c, "tot-mem")) < 3_000_000
        c.receive_data(cmd("GET", "k"))
        reply = c.data_to_send()
        assert len(reply) > 200_000
        held[c.id] = held.get(c.id, 0) + len(reply)    # (the client reads none of it)
        core.after_read(c)
        if c.closed:
            break
    assert c.closed and core.stats.evicted_clients == 1
    assert 3_000_000 - 200_100 <= held[c.id] < 3_000_000 + 200_100


def test_no_evict_client_is_spared_and_flagged() -> None:
    core = make("1mb")
    c = connect(core, "spared")
    assert feed(c, cmd("CLIENT", "NO-EVICT", "on")) == b"+OK\r\n"
    assert field(c, "flags") == "e"
    feed(c, partial_bulk(1 * MB + 1))
    assert not c.closed and int(field(c, "tot-mem")) > MB
    assert core.stats.evicted_clients == 0
    assert ("warning", "Over client maxmemory after evicting all evictable clients") in \
        core.log.lines
    # over the limit with nothing to evict: the gate stays down (no check per command)
    assert not core.gated
    # an evictable client is evicted though small, as Redis's loop over its buckets does
    other = connect(core, "other")
    assert other.closed and core.stats.evicted_clients == 1
    assert names(core) == ["spared"]
    assert feed(c, b"v\r\n" + cmd("CLIENT", "NO-EVICT", "maybe")).endswith(
        b"-ERR syntax error\r\n")
    assert not c.closed


def test_a_client_filling_what_a_closed_no_evict_client_held_is_evicted() -> None:
    """client-eviction.tcl's "client no-evict on" then "off": the first client, spared, pins
    the total over the limit and closes; the next fills its query buffer as far and must
    be evicted (the total it reaches is no higher than the one nothing could be evicted
    from, which must not spare it)."""
    core = make("1mb")
    control = connect(core, "control")
    feed(control, cmd("CLIENT", "NO-EVICT", "on"))
    spared = connect(core, "spared")
    feed(spared, cmd("CLIENT", "NO-EVICT", "on"))
    feed(spared, partial_bulk(1 * MB + 1))
    assert not spared.closed and core.stats.evicted_clients == 0
    core.client_closed(spared)                # (its connection_lost)
    evictable = connect(core, "evictable")
    feed(evictable, cmd("CLIENT", "NO-EVICT", "off"))
    feed(evictable, partial_bulk(1 * MB + 1))
    assert evictable.closed and core.stats.evicted_clients == 1
    assert names(core) == ["control"]


def test_a_figure_that_falls_lets_the_next_growth_evict() -> None:
    """Over the limit with nothing evictable, a spared client's figure falls (its output
    read), then an evictable client's grows: evicted, though the total stays under the
    one last found stuck."""
    core = make("1mb")
    spared = connect(core, "spared")
    feed(spared, cmd("CLIENT", "NO-EVICT", "on"))
    core.host.held[spared.id] = 2 * MB       # (replies it does not read)
    feed(spared, cmd("PING"))
    assert not spared.closed and core.stats.evicted_clients == 0
    other = connect(core, "other")           # (evicted at once: the total is over)
    assert other.closed and core.stats.evicted_clients == 1
    core.host.held[spared.id] = MB + 100 * KB
    feed(spared, cmd("PING"))                # its figure falls, still over the limit
    late = connect(core, "late")
    assert late.closed and core.stats.evicted_clients == 2
    assert names(core) == ["spared"]


def test_no_evict_and_maxmemory_clients_disabled_then_enabled() -> None:
    for how in ("no-evict", "disabled"):
        core = make("0" if how == "disabled" else "1mb")
        control = connect(core, "control")
        feed(control, cmd("CLIENT", "NO-EVICT", "on"))
        c = connect(core, "test")
        if how == "no-evict":
            feed(c, cmd("CLIENT", "NO-EVICT", "on"))
        core.host.held[c.id] = 2 * MB     # (replies it does not read)
        feed(c, cmd("PING"))
        assert not c.closed
        if how == "no-evict":
            assert field(c, "flags") == "e"
            # off: it is the largest, evicted at the end of this read (beforeSleep)
            assert feed(c, cmd("CLIENT", "NO-EVICT", "off")) == b"+OK\r\n"
        else:
            feed(control, cmd("CONFIG", "SET", "maxmemory-clients", "1mb"))
        assert c.closed, how
        assert names(core) == ["control"]


def test_evicts_largest_first_and_only_until_below_limit() -> None:
    core = make("0")
    control = connect(core, "control")
    feed(control, cmd("CLIENT", "NO-EVICT", "on"))
    sizes = {"small": 128 * KB, "medium": MB, "large": 3 * MB}
    for name, size in sizes.items():
        for i in range(3):
            feed(connect(core, f"{name}{i}"), partial_bulk(size))
    # a limit that holds everything but the large clients: exactly those go
    feed(control, cmd("CONFIG", "SET", "maxmemory-clients", "0"))
    total = sum(memory(c) for c in core.clients.values())
    large = sum(memory(c) for c in core.clients.values() if c.name.startswith(b"large"))
    feed(control, cmd("CONFIG", "SET", "maxmemory-clients", str(total - large + 1)))
    assert names(core) == sorted(["control"] + [f"{n}{i}" for n in ("small", "medium")
                                                for i in range(3)])
    assert core.stats.evicted_clients == 3
    # half of the medium ones' worth less: two of them go (the total just under after that)
    medium = memory(core.clients[max(c.id for c in core.clients.values()
                                     if c.name.startswith(b"medium"))])
    total = core.client_eviction.total
    feed(control, cmd("CONFIG", "SET", "maxmemory-clients", str(total - medium - 1)))
    assert sum(n.startswith("medium") for n in names(core)) == 1
    assert all(f"small{i}" in names(core) for i in range(3))
    assert core.client_eviction.total < core.maxmemory_clients


def test_decrease_maxmemory_clients_causes_eviction() -> None:
    core = make("4mb")
    control = connect(core, "control")
    feed(control, cmd("CLIENT", "NO-EVICT", "on"))
    for i in range(10):
        feed(connect(core, f"client{i}"), partial_bulk(300 * KB))
    assert len(names(core)) == 11
    feed(control, cmd("CONFIG", "SET", "maxmemory-clients", "2mb"))
    left = len(names(core)) - 1
    assert 0 < left < 10
    assert core.stats.evicted_clients == 10 - left


def test_percentage_of_maxmemory() -> None:
    core = make("7%", ("maxmemory", ["6mb"]))
    limit = 6 * MB * 7 // 100
    c = connect(core, "half")
    feed(c, partial_bulk(limit // 2))
    assert not c.closed and limit // 2 <= int(field(c, "tot-mem")) < limit
    d = connect(core, "full")
    feed(d, partial_bulk(limit))
    assert d.closed and not c.closed


# -- where eviction runs: before a command (processCommand), after a read (beforeSleep) ------------

def test_pubsub_output_growth_evicts_before_the_next_command() -> None:
    core = make("1mb")
    sub = connect(core, "sub")
    feed(sub, cmd("SUBSCRIBE", "ch"))
    pub = connect(core, "pub")
    pub.receive_data(cmd("PUBLISH", "ch", "m" * (600 * KB)))   # (one read, no end of it yet)
    assert not core.gated
    pub.receive_data(cmd("PUBLISH", "ch", "m" * (600 * KB)))
    assert core.gated and not sub.closed          # the gate is up: due before any command
    assert pub.data_to_send() == b":1\r\n:1\r\n"
    assert feed(pub, cmd("PING")) == b"+PONG\r\n"  # evicted before PING ran
    assert sub.closed and not pub.closed
    assert core.stats.evicted_clients == 1 and not core.gated


def test_a_client_that_evicts_itself_runs_nothing_more() -> None:
    core = make("1mb")
    sub = connect(core, "sub")
    feed(sub, cmd("SUBSCRIBE", "ch"))
    pub = connect(core, "pub")
    pub.receive_data(cmd("PUBLISH", "ch", "m" * (600 * KB)) * 2)
    pub.data_to_send()
    assert core.gated
    # the subscriber's own next commands: the first evicts it, it runs none of them
    assert feed(sub, cmd("PING") + cmd("PING")) == b""
    assert sub.closed and core.stats.evicted_clients == 1
    assert core.cmdstats.get(core.lookup_command([b"ping"])) is None


def test_cron_refreshes_figures_after_output_drains() -> None:
    core = make("1mb", ("hz", ["10"]))
    c = connect(core, "c")
    core.host.held[c.id] = 900 * KB
    feed(c, cmd("PING"))
    assert c.mem > 900 * KB
    core.host.held[c.id] = 0            # the client read it all
    core.tick(NOW + 100)
    assert c.mem == CLIENT_BASE and core.client_eviction.total == CLIENT_BASE
    other = connect(core, "other")
    core.host.held[other.id] = 1100 * KB   # over, seen by the cron alone
    core.tick(NOW + 200)
    assert other.closed and not c.closed


def test_stale_figure_never_evicts() -> None:
    """A figure taken before the client drained its output: eviction counts everyone again
    first, so the drained client stays."""
    core = make("1mb")
    a, b = connect(core, "a"), connect(core, "b")
    core.host.held[a.id] = 700 * KB
    feed(a, cmd("PING"))
    core.host.held[a.id] = 0
    feed(b, partial_bulk(400 * KB))      # 1.1 MB on the stale figures, 0.4 MB really
    assert not a.closed and not b.closed
    assert core.client_eviction.total < MB


def test_replicas_and_masters_are_never_counted() -> None:
    core = make("1mb")
    c = connect(core, "r")
    c.kind = "replica"
    feed(c, partial_bulk(2 * MB))
    assert c.mem == 0 and not c.closed and core.stats.evicted_clients == 0


def test_monitor_clients_are_evictable() -> None:
    """A MONITOR client is CLIENT_TYPE_NORMAL to Redis's eviction."""
    core = make("1mb")
    m = connect(core, "mon")
    feed(m, cmd("MONITOR"))
    core.host.held[m.id] = 2 * MB
    feed(connect(core), cmd("SET", "k", "v"))
    core.tick(NOW + 100)
    assert m.closed


# -- the I/O shell's read, in C and in Python, counts the client after it -----------------------

class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else None


class _Shell:
    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self._flush_scheduled = False

    def schedule_flush(self) -> None:
        self._flush_scheduled = True

    def shutdown_from_command(self) -> None:
        pass


@pytest.mark.parametrize("path", ["instance", "reference"])
def test_shell_read_counts_and_evicts(path: str) -> None:
    core = make("1mb")
    shell = _Shell(core)
    p = ClientProtocol(shell)  # type: ignore[arg-type]
    p.connection_made(_Transport())  # type: ignore[arg-type]
    read = p.data_received if path == "instance" else \
        (lambda data: ClientProtocol.data_received(p, data))
    read(cmd("PING"))
    c = p.client
    assert c is not None and c.mem == CLIENT_BASE
    for _ in range(20):                  # (bounded: 64 KB reads, 1 MB reached at the 17th)
        read(b"*1\r\n$%d\r\n" % (2 * MB) if c.mem == CLIENT_BASE else b"v" * (64 * KB))
        if c.closed:
            break
    assert c.closed and core.stats.evicted_clients == 1


def test_client_evicted_due_to_tracking_redirection() -> None:
    """Invalidations sent to a redirect client that does not read (client-eviction.tcl's
    "tracking redirection", the cron not needed: each invalidation counts)."""
    core = make("1mb")
    redirected = connect(core, "redirected_client")
    feed(redirected, cmd("SUBSCRIBE", "__redis__:invalidate"))
    writer = connect(core, "writer")
    feed(writer, cmd("CLIENT", "TRACKING", "on", "REDIRECT", str(redirected.id), "BCAST"))
    key = "k" * (200 * KB)
    held = core.host.held
    for _ in range(50):                 # (bounded: ~5 invalidations of a 200 KB key reach 1 MB)
        feed(writer, cmd("INCR", key))
        if redirected.closed:
            break
        held[redirected.id] = held.get(redirected.id, 0) + len(redirected.data_to_send())
        assert int(field(redirected, "tot-mem")) < MB     # (the shell's flush: the transport
        # holds what it is not reading)
    assert MB - 210 * KB < held[redirected.id] < MB
    assert redirected.closed and not writer.closed
    assert core.stats.evicted_clients == 1
