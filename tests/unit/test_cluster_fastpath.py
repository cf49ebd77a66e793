"""Cluster mode's fast paths against the Python redirect: the table of the slots served with
no check (pyrepl/cluster/served.py) kept equal to what the cluster state says through every
change, the C dispatch (``_dispatch.execute``) and a run's start (``_plainrun.start``) giving
what ``ServerCore.execute`` and ``plainrun.start`` give on a node that serves some slots,
migrates some, imports some, leaves some to another master and some to nobody; and a
pipelined read (runs of plain commands, in C or in Python) answering each request as the
Python redirect answers it alone (MOVED, ASK, CROSSSLOT, TRYAGAIN, CLUSTERDOWN, or the
command run here). As plain Python (pyrepl/native.py) the C halves are skipped and the
pipelined test holds plainrun's Python reference to the one-by-one path."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pyrepl import native, plainrun
from pyrepl.cluster.node import MASTER, ClusterNode
from pyrepl.cluster.state import FAIL_STATE, OK, ClusterState
from pyrepl.core import cluster as core_cluster
from pyrepl.core.client import Client
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.hashslot import key_hash_slot
from pyrepl.resp.fastreader import first
from tests.support.cores import NOW, cmd
from tests.support.execpaths import server_state, warm_server

_dispatch = native.load("pyrepl._dispatch")
_plainrun = native.load("pyrepl._plainrun")
c_only = pytest.mark.skipif(_dispatch is None,
                            reason=f"compares the C with its Python reference ({native.WHY_PURE})")

ME, OTHER = "a" * 40, "b" * 40
KEYS = [f"k{i}" for i in range(16)] + ["{t}a", "{t}b", "{u}a", "{u}b"]


def _kind(slot: int) -> str:
    """The node's slots: mine, another master's, mine migrating to it, its importing here,
    or nobody's."""
    if slot % 13 == 0:
        return "unassigned"
    return ("mine", "mine", "other", "migrating", "importing")[slot % 5]


def cluster_world(d: str) -> tuple[ServerCore, Client, ClusterState]:
    """A warm server (every command's first call made) turned into a cluster node with
    nodes.conf in ``d``, another master at 127.0.0.2:7001, the slots as ``_kind`` says, the
    cluster OK."""
    core, c = warm_server(False, config=[("dir", [d])])
    st = core_cluster.start(core)
    st.rename(st.myself, ME)      # (the same in every world: CLUSTER SETSLOT NODE names it)
    other = ClusterNode(OTHER, MASTER, NOW)
    other.ip, other.port = "127.0.0.2", 7001
    st.add_node(other)
    for j in range(16384):
        kind = _kind(j)
        if kind == "unassigned":
            continue
        st.add_slot(st.myself if kind in ("mine", "migrating") else other, j)
        if kind == "migrating":
            st.migrating[j] = other
        elif kind == "importing":
            st.importing[j] = other
    st.state = OK
    assert core.gated and core.served_slots is st.served.table
    return core, c, st  # type: ignore[return-value]


@pytest.fixture
def dirs() -> Iterator[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        yield a, b


def expected_table(st: ClusterState) -> bytes:
    """The table from scratch: the redirect's "here, no questions asked"."""
    if st.state != OK:
        return bytes(16384)
    return bytes(n is st.myself and j not in st.migrating and j not in st.importing
                 for j, n in enumerate(st.slots))


def _slot(key: str) -> str:
    return str(key_hash_slot(key.encode()))


@st.composite
def requests(draw: st.DrawFn) -> list[str]:
    k = draw(st.sampled_from(KEYS))
    k2 = draw(st.sampled_from(KEYS))
    return draw(st.sampled_from([
        ["SET", k, "v"], ["GET", k], ["INCR", k], ["DEL", k], ["EXISTS", k, k2],
        ["MSET", k, "1", k2, "2"], ["MGET", k, k2], ["MSET", "{t}a", "1", "{t}b", "2"],
        ["HSET", k, "f", "1"], ["LPUSH", k, "a"], ["PING"], ["ECHO", "x"],
        ["MULTI"], ["EXEC"], ["DISCARD"], ["ASKING"], ["READONLY"], ["READWRITE"],
        ["GET"], ["NOSUCH", k],
        ["EVAL", "return redis.call('GET', KEYS[1])", "1", k],
        ["CLUSTER", "SETSLOT", _slot(k), "MIGRATING", "OTHER"],
        ["CLUSTER", "SETSLOT", _slot(k), "IMPORTING", "OTHER"],
        ["CLUSTER", "SETSLOT", _slot(k), "STABLE"],
        ["CLUSTER", "SETSLOT", _slot(k), "NODE", "OTHER"],
        ["CLUSTER", "SETSLOT", _slot(k), "NODE", "ME"],
        ["CLUSTER", "DELSLOTS", _slot(k)], ["CLUSTER", "ADDSLOTS", _slot(k)],
        ["CLUSTER", "COUNTKEYSINSLOT", _slot(k)],
        ["__FAIL__"], ["__OK__"],
    ]))


def _argv(c: Client, st_: ClusterState, r: list[str]) -> list[bytes] | None:
    """The request as the server reads it (``ME``/``OTHER``: the node ids); None for the
    test's own moves (the cluster's state flipped, as update_state would)."""
    if r[0] in ("__FAIL__", "__OK__"):
        st_.state = FAIL_STATE if r[0] == "__FAIL__" else OK
        return None
    words = [st_.myself.name if w == "ME" else w for w in r]
    argv = first(c.reader, cmd(*words))
    assert argv is not None and not c.reader.queue
    return argv


_SKIP = {"core", "reader", "transport", "db", "repl", "subs", "tracking_prefixes", "id",
         "name", "laddr", "addr", "created_ms", "last_interaction_ms",
         "_whole"}


def _client(c: Client) -> dict[str, object]:
    out = {}
    for name in Client.__slots__:
        if name in _SKIP:
            continue
        v = getattr(c, name, None)
        if name == "last_cmd":
            v = getattr(v, "name", None)
        elif name == "multi_queue":
            v = [(q.name, a) for q, a in v]
        elif name in ("blocked", "watched"):
            v = bool(v)
        out[name] = v
    return out


def _look(core: ServerCore, c: Client, st_: ClusterState) -> dict[str, object]:
    state = server_state(core, c)
    state["client"] = _client(c)
    state["cluster"] = (st_.state, sorted(st_.migrating), sorted(st_.importing),
                        [n is st_.myself for n in st_.slots], [n is None for n in st_.slots])
    table = bytes(st_.served.table)
    assert table == expected_table(st_)
    state["table"] = table
    return state


@c_only
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(requests(), min_size=1, max_size=40))
@example(reqs=[["SET", k, "v"] for k in KEYS] + [["GET", k] for k in KEYS]
         + [["MSET", "k1", "1", "k3", "2"], ["ASKING"], ["GET", "k0"], ["GET", "k0"],
            ["READONLY"], ["GET", "k5"], ["READWRITE"], ["MULTI"], ["GET", "k1"],
            ["GET", "k4"], ["EXEC"], ["__FAIL__"], ["GET", "k4"], ["PING"], ["__OK__"],
            ["CLUSTER", "SETSLOT", _slot("k4"), "MIGRATING", "OTHER"], ["GET", "k4"],
            ["DEL", "k4"], ["GET", "k4"], ["CLUSTER", "SETSLOT", _slot("k4"), "STABLE"],
            ["GET", "k4"]])
def test_execute_in_cluster_mode_is_the_python_redirect(reqs: list[list[str]]) -> None:
    """The same random requests, one at a time, through the C dispatch on one node and the
    Python method on another: the same reply bytes, dataset, counters, client slots
    (``cluster_slot`` and ``cluster_flags`` included), cluster state and table."""
    with tempfile.TemporaryDirectory() as da, tempfile.TemporaryDirectory() as db:
        a, b = cluster_world(da), cluster_world(db)
        assert _dispatch is not None
        _same_on_both(a, b, reqs)


def _same_on_both(a: tuple, b: tuple, reqs: list[list[str]]) -> None:  # type: ignore[type-arg]
    """Each request through the C dispatch on ``a`` and the Python method on ``b``: the same
    reply bytes and the same look after each."""
    assert _dispatch is not None
    for r in reqs:
        for (core, c, st_), run in ((a, _dispatch.execute), (b, ServerCore.execute)):
            argv = _argv(c, st_, r)
            if argv is not None:
                run(core, c, argv)
        assert a[1].data_to_send() == b[1].data_to_send()
        assert _look(*a) == _look(*b)


@c_only
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reqs=st.lists(requests(), min_size=1, max_size=30))
def test_our_masters_stream_is_never_redirected(reqs: list[list[str]]) -> None:
    """As the master client (kind ``master``: a replica's stream, which processCommand never
    redirects) the C dispatch and the Python method run every request alike, whatever slot
    its keys are in."""
    with tempfile.TemporaryDirectory() as da, tempfile.TemporaryDirectory() as db:
        a, b = cluster_world(da), cluster_world(db)
        assert _dispatch is not None
        for _, c, _ in (a, b):
            c.kind = "master"
        _same_on_both(a, b, reqs)


def test_the_table_follows_every_change(dirs: tuple[str, str]) -> None:
    """Slots added, deleted, given away, marked migrating or importing (through the dicts'
    every mutator) and closed, the cluster failing and recovering, CLUSTER RESET: after each,
    the table is what the state says."""
    core, c, st_ = cluster_world(dirs[0])
    other = st_.lookup(OTHER)
    assert other is not None
    assert bytes(st_.served.table) == expected_table(st_) and any(st_.served.table)
    moves = [
        lambda: st_.del_slot(1), lambda: st_.add_slot(st_.myself, 1),
        lambda: st_.migrating.__setitem__(1, other), lambda: st_.migrating.pop(1),
        lambda: st_.importing.setdefault(2, other), lambda: st_.importing.popitem(),
        lambda: st_.migrating.update({5: other, 6: other}), lambda: st_.migrating.clear(),
        lambda: st_.importing.__ior__({7: other}), lambda: st_.importing.__delitem__(7),
        lambda: st_.slots.__setitem__(slice(10, 20), [other] * 10),
        lambda: st_.slots.__setitem__(-1, st_.myself),
        lambda: setattr(st_, "state", FAIL_STATE), lambda: st_.del_slot(11),
        lambda: setattr(st_, "state", OK), lambda: st_.close_all_slots(),
        lambda: st_.del_node_slots(st_.myself), lambda: st_.reset(False),
    ]
    for move in moves:
        move()
        assert bytes(st_.served.table) == expected_table(st_)
    assert not any(st_.served.table)


def test_a_loaded_nodes_conf_rebuilds_the_table(dirs: tuple[str, str]) -> None:
    """A node restarted from its nodes.conf (myself another object then) serves its slots
    from the table at once."""
    core, c, st_ = cluster_world(dirs[0])
    st_.save_config(True)
    core_cluster.release_lock(core)       # (the first node's process ends: its lock goes)
    core2, c2 = warm_server(False, config=[("dir", [dirs[0]])])
    st2 = core_cluster.start(core2)
    assert st2.myself.name == st_.myself.name and st2.myself is not st_.myself
    st2.state = OK
    assert bytes(st2.served.table) == expected_table(st2) == expected_table(st_)


def test_another_gate_takes_the_table_away(dirs: tuple[str, str]) -> None:
    """A busy script, MISCONF, CLIENT PAUSE, client eviction or loading: served_slots None
    (every command through _gate again), back when it ends."""
    core, c, st_ = cluster_world(dirs[0])
    table = core.served_slots
    core.set_busy("BUSY x")
    assert core.gated and core.served_slots is None
    core.set_busy(None)
    assert core.gated and core.served_slots is table
    core.loading = True
    core.refresh_gate()
    assert core.served_slots is None
    core.loading = False
    core.refresh_gate()
    assert core.served_slots is table


@c_only
def test_served_keys_run_no_python_dispatch(dirs: tuple[str, str]) -> None:
    """SET and GET of keys in slots served here, and PING, take the C path (no Python
    execute or redirect); a key of another master's slot, of a migrating slot, a client
    that sent READONLY, go to the Python redirect."""
    core, c, st_ = cluster_world(dirs[0])
    assert _dispatch is not None
    frames: list[str] = []
    files = {ServerCore.execute.__code__.co_filename, core_cluster.redirect.__code__.co_filename}

    def profile(frame, event, arg) -> None:
        if event == "call" and frame.f_code.co_filename in files:
            frames.append(frame.f_code.co_name)

    mine = [k for k in KEYS if _kind(int(_slot(k))) == "mine"]
    elsewhere = [k for k in KEYS if _kind(int(_slot(k))) in ("other", "migrating")]
    assert mine and elsewhere
    sys.setprofile(profile)
    try:
        for k in mine:
            for r in (["SET", k, "v"], ["GET", k], ["PING"]):
                _dispatch.execute(core, c, _argv(c, st_, r))
    finally:
        sys.setprofile(None)
    assert "execute" not in frames and "redirect" not in frames, frames
    assert c.cluster_slot == -1    # (PING: no keys)
    c.data_to_send()
    sys.setprofile(profile)
    try:
        for k in elsewhere:
            _dispatch.execute(core, c, _argv(c, st_, ["GET", k]))
    finally:
        sys.setprofile(None)
    assert frames.count("redirect") == len(elsewhere)
    replies = c.data_to_send().decode().split("\r\n")[:-1]
    assert all(x.startswith(("-MOVED ", "-ASK ")) for x in replies), replies


# -- a run's start -----------------------------------------------------------------------

RUN = st.lists(st.sampled_from([["SET", k, "v"] for k in KEYS[:8]] + [["GET", k]
                                                                       for k in KEYS[:8]]
                               + [["SET", "{t}a", "1"], ["PING"], ["INCR", "k1"]]),
               max_size=10)


@pytest.mark.skipif(_plainrun is None, reason=f"tests the C extension ({native.WHY_PURE})")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(head=st.sampled_from([["SET", k, "v"] for k in KEYS] + [["GET", k] for k in KEYS]
                            + [["PING"], ["MSET", "k1", "1"]]),
       rest=RUN, flags=st.sampled_from([0, 1, 2]), kind=st.sampled_from(["normal", "master"]),
       down=st.booleans())
def test_start_in_cluster_mode_is_plainruns(head, rest, flags, kind, down) -> None:
    """``_plainrun.start`` answers what ``plainrun.start`` answers in cluster mode: the run
    cut before its first request not served here (None when that is the first), whatever
    the client's ASKING/READONLY flags, for our master's stream too, the cluster up or down;
    and leaves ``cluster_slot`` alike."""
    assert _plainrun is not None
    with tempfile.TemporaryDirectory() as d:
        core, c, st_ = cluster_world(d)
        if down:
            st_.state = FAIL_STATE
        f = [a.encode() for a in head]
        r = [[a.encode() for a in x] for x in rest]
        got, want, slots = [], [], []
        for fn, out in ((_plainrun.start, got), (plainrun.start, want)):
            c.cluster_flags, c.kind, c.cluster_slot = flags, kind, 99
            run = fn(core, c, list(f), list(r))
            out.append(None if run is None else ([x.name for x in run[0]], run[1], run[2]))
            slots.append(c.cluster_slot)
        assert got == want and slots[0] == slots[1]


# -- pipelined reads --------------------------------------------------------------------

PIPELINE = st.lists(st.one_of(
    st.sampled_from([["SET", k, "v"] for k in KEYS] + [["GET", k] for k in KEYS]
                    + [["INCR", k] for k in KEYS]),
    requests()), min_size=1, max_size=40)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reads=st.lists(PIPELINE, min_size=1, max_size=4))
@example(reads=[[["SET", k, "v"] for k in KEYS] * 2, [["GET", k] for k in KEYS] * 2,
                [["MSET", a, "1", b, "2"] for a in KEYS[:5] for b in KEYS[:5]]])
@example(reads=[[["GET", "{u}b"], ["SET", "k0", "v"], ["ASKING"], ["INCR", "{t}b"],
                 ["SET", "k0", "v"], ["READONLY"], ["GET", "k5"], ["READWRITE"], ["GET", "k5"]]])
def test_a_pipelined_read_answers_as_the_python_one_by_one(reads) -> None:
    """Each read's requests in one buffer on one node (runs of plain commands: their start
    and checks in C, or in Python as plain Python), one by one through the Python method on
    the other: the same replies (every MOVED, ASK, CROSSSLOT and TRYAGAIN where the redirect
    puts it), dataset, counts and client slots. (ASKING, READONLY and READWRITE end a run:
    the commands after them are redirected otherwise.)"""
    with tempfile.TemporaryDirectory() as da, tempfile.TemporaryDirectory() as db:
        a, b = cluster_world(da), cluster_world(db)
        for reqs in reads:
            for r in reqs:   # (the test's own moves apply between reads, to both)
                if r[0] in ("__FAIL__", "__OK__"):
                    for _, _, st_ in (a, b):
                        st_.state = FAIL_STATE if r[0] == "__FAIL__" else OK
            reqs = [r for r in reqs if r[0] not in ("__FAIL__", "__OK__")]
            if not reqs:
                continue
            core, c, st_ = a
            c.receive_data(b"".join(cmd(*[st_.myself.name if w == "ME" else w for w in r])
                                    for r in reqs))
            core, c, st_ = b
            for r in reqs:
                ServerCore.execute(core, c, _argv(c, st_, r))
            got, want = a[1].data_to_send(), b[1].data_to_send()
            assert got == want
            la, lb = _look(*a), _look(*b)
            for look in (la, lb):   # (read otherwise; a run leaves propagate_argv as it was)
                for name in ("mem", "net_in", "propagate_argv"):
                    look["client"].pop(name, None)   # type: ignore[attr-defined]
            assert la == lb
