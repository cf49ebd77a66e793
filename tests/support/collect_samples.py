"""INFO samples of a hand-made fleet for ``pyrepl collect``'s inference and links: a master M
and replicas A, B, C (addresses), two replication ids, and builders of a replica entry, a
master's sample and a replica's sample."""

from __future__ import annotations

from typing import Any

from pyrepl.collect.info import ReplicaEntry, Sample

M = "10.0.0.1:6379"
A, B, C = "10.0.0.2:6379", "10.0.0.3:6379", "10.0.0.4:6379"
RID1, RID2 = "a" * 40, "b" * 40


def entry(addr: str, state: str = "online", offset: int = 100, lag: int | None = 0
          ) -> ReplicaEntry:
    ip, port = addr.rsplit(":", 1)
    return ReplicaEntry(ip, int(port), state, offset, lag)


def master(ts: float, *replicas: ReplicaEntry, full: int = 0, ok: int = 0, err: int = 0,
           offset: int = 1000, run_id: str = "r" * 40, **kw: Any) -> Sample:
    fields: dict[str, Any] = dict(
        node=M, ts=ts, run_id=run_id, role="master", server="redis 7.0.15", uptime_s=100,
        replid=RID1, master_repl_offset=offset, backlog_active=True, backlog_size=1 << 20,
        backlog_first_byte=max(1, offset - (1 << 20) + 1), backlog_histlen=min(offset, 1 << 20),
        connected_replicas=len(replicas), replicas=tuple(replicas), sync_full=full,
        sync_partial_ok=ok, sync_partial_err=err)
    fields.update(kw)
    return Sample(**fields)


def replica(ts: float, up: bool = True, of: str = M, offset: int = 1000, node: str = A,
            run_id: str = "s" * 40, **kw: Any) -> Sample:
    fields: dict[str, Any] = dict(
        node=node, ts=ts, run_id=run_id, role="replica", server="redis 7.0.15", uptime_s=100,
        replid=RID1, master_repl_offset=offset, master_addr=of,
        link_status="up" if up else "down", replica_offset=offset)
    fields.update(kw)
    return Sample(**fields)
