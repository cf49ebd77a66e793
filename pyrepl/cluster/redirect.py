"""Which node serves a command's keys, and the error that sends a client there (Redis 7.0's
getNodeByQuery and clusterRedirectClient) — sans-io, the answering node's side.

Theory of operation: a command (or a MULTI's queued commands, as EXEC sees them) is served here
when every key hashes to one slot and that slot is ours; otherwise the client gets ``-MOVED
slot ip:port`` (the slot is another node's), ``-ASK slot ip:port`` (we are migrating the slot
and do not have the keys: they are, or will be, at the target), ``-TRYAGAIN`` (a migration
holds some of the keys here and some there), ``-CROSSSLOT`` or ``-CLUSTERDOWN``. A client that
sent ASKING may use a slot we are importing; a READONLY client may read from a replica of the
slot's master. :func:`route` decides; :func:`error_text` words it as Redis does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from pyrepl.keyspace.hashslot import key_hash_slot

if TYPE_CHECKING:
    from pyrepl.cluster.node import ClusterNode
    from pyrepl.cluster.state import ClusterState

# getNodeByQuery's error codes (CLUSTER_REDIR_*)
NONE, CROSS_SLOT, UNSTABLE, ASK, MOVED, DOWN_STATE, DOWN_UNBOUND, DOWN_RO_STATE = range(8)


def route(st: ClusterState, keys: Iterable[bytes], *, write: bool, asking: bool,
          readonly: bool, pubsubshard: bool, migrate: bool,
          exists: Callable[[bytes], bool]) -> tuple[int, ClusterNode | None, int]:
    """(code, node, slot): ``NONE`` with us when we serve it, ``MOVED``/``ASK`` with the node
    to go to, else an error code and None. ``keys``: every key of the command(s), in order;
    ``exists``: whether db 0 holds a key (not touching, expiring or counting it)."""
    first: bytes | None = None
    slot = 0
    n: ClusterNode | None = None
    me = st.myself
    multiple = migrating = importing = False
    missing = existing = 0
    for key in keys:
        this = key_hash_slot(key)
        if first is None:
            first, slot = key, this
            n = st.slots[slot]
            if n is None:
                return DOWN_UNBOUND, None, slot
            if n is me and slot in st.migrating:
                migrating = True
            elif slot in st.importing:
                importing = True
        elif key != first:
            if this != slot:
                return CROSS_SLOT, None, slot
            multiple = True
        if (migrating or importing) and not pubsubshard:
            if exists(key):
                existing += 1
            else:
                missing += 1
    if n is None:
        return NONE, me, 0
    if st.state != 0:
        if pubsubshard:
            if not st.cfg.allow_pubsubshard_when_down:
                return DOWN_STATE, None, slot
        elif not st.cfg.allow_reads_when_down:
            return DOWN_STATE, None, slot
        elif write:
            return DOWN_RO_STATE, None, slot
    if (migrating or importing) and migrate:
        return NONE, me, slot
    if migrating and missing:
        if existing:
            return UNSTABLE, None, slot
        return ASK, st.migrating[slot], slot
    if importing and asking:
        if multiple and missing:
            return UNSTABLE, None, slot
        return NONE, me, slot
    if (readonly or pubsubshard) and not write and me.is_replica and me.master is n:
        return NONE, me, slot
    return (NONE if n is me else MOVED), n, slot


def endpoint(st: ClusterState, n: ClusterNode) -> str:
    """getPreferredEndpoint."""
    kind = st.cfg.preferred_endpoint_type
    if kind == "ip":
        return n.ip
    if kind == "hostname":
        return n.hostname or "?"
    return ""


def error_text(st: ClusterState, code: int, n: ClusterNode | None, slot: int,
               use_pport: bool = False) -> str:
    """clusterRedirectClient's error (without the leading ``-``); ``use_pport``: a plain
    client of a tls-cluster node is sent to the node's plaintext port, when it has one."""
    if code == CROSS_SLOT:
        return "CROSSSLOT Keys in request don't hash to the same slot"
    if code == UNSTABLE:
        return "TRYAGAIN Multiple keys request during rehashing of slot"
    if code == DOWN_STATE:
        return "CLUSTERDOWN The cluster is down"
    if code == DOWN_RO_STATE:
        return "CLUSTERDOWN The cluster is down and only accepts read commands"
    if code == DOWN_UNBOUND:
        return "CLUSTERDOWN Hash slot not served"
    assert n is not None and code in (MOVED, ASK)
    port = n.pport if use_pport and n.pport else n.port
    return f"{'ASK' if code == ASK else 'MOVED'} {slot} {endpoint(st, n)}:{port}"
