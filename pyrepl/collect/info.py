"""INFO text -> a typed :class:`Sample` of one node (the collector's parsing).

Theory of operation: INFO is ``# Section`` headers and ``name:value`` lines (CRLF or LF). Only
the fields the collector needs are typed; a field the server does not show (older Redis,
Valkey, pyrepl) or a number that does not parse is None, never an exception: one odd field must
not cost a node its sample. A master's ``slaveN:ip=..,port=..,state=..,offset=..,lag=..`` lines
become :class:`ReplicaEntry` values in INFO's order, which is the order the replicas connected
in (Redis appends a replica to its list when it connects, so a reconnect moves it to the end).
Offsets keep Redis's names and meanings: ``master_repl_offset`` is the last byte written,
``repl_backlog_first_byte_offset = master_repl_offset - repl_backlog_histlen + 1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

NO_REPLID = "0" * 40


@dataclass(frozen=True)
class ReplicaEntry:
    """One ``slaveN`` line of a master: the replica as the master sees it."""

    ip: str
    port: int
    state: str  # wait_bgsave | send_bulk | online | ... (the server's word)
    offset: int  # the replica's last acknowledged offset (0 until its first ACK)
    lag: int | None  # seconds since its last ACK

    @property
    def addr(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def online(self) -> bool:
        return self.state == "online"


@dataclass(frozen=True)
class Sample:
    """One node's state at ``ts`` (unix seconds), from one INFO reply."""

    node: str  # the address the collector polls: host:port
    ts: float
    run_id: str = ""
    role: str = "master"  # master | replica
    server: str = ""  # "redis 7.0.15", "valkey 8.1.1", "pyrepl 0.1.0"
    uptime_s: int | None = None
    replid: str = ""
    replid2: str = NO_REPLID
    master_repl_offset: int = 0
    second_repl_offset: int = -1
    backlog_active: bool = False
    backlog_size: int | None = None
    backlog_first_byte: int | None = None
    backlog_histlen: int | None = None
    connected_replicas: int = 0
    replicas: tuple[ReplicaEntry, ...] = ()
    # a replica's view of its master
    master_addr: str | None = None
    link_status: str | None = None  # up | down
    link_down_since_s: int | None = None  # master_link_down_since_seconds (-1 / None: unknown)
    sync_in_progress: bool = False
    replica_offset: int | None = None  # slave_repl_offset
    # INFO stats: syncs served since the process started
    sync_full: int = 0
    sync_partial_ok: int = 0
    sync_partial_err: int = 0
    # INFO memory
    repl_buffers_mem: int | None = None
    backlog_mem: int | None = None

    @property
    def is_replica(self) -> bool:
        return self.role == "replica"

    @property
    def link_up(self) -> bool:
        return self.is_replica and self.link_status == "up"


def parse_info(text: str) -> dict[str, str]:
    """``name:value`` lines -> dict (section headers, blank lines and odd lines skipped)."""
    out: dict[str, str] = {}
    for raw in text.split("\n"):  # INFO's lines end in CRLF; values are left as they are
        line = raw.rstrip("\r")
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition(":")
        if sep and name:
            out[name] = value
    return out


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return int(float(value))
        except (ValueError, OverflowError):
            return None


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def parse_replica_line(value: str) -> ReplicaEntry | None:
    """``ip=127.0.0.1,port=6380,state=online,offset=42,lag=0`` -> ReplicaEntry (None when
    it lacks an address; ``ip`` may be an IPv6 address, which has no commas)."""
    kv: dict[str, str] = {}
    for part in value.split(","):
        k, sep, v = part.partition("=")
        if sep:
            kv[k.strip()] = v.strip()
    port = _int(kv.get("port"))
    ip = kv.get("ip")
    if not ip or port is None:
        return None
    return ReplicaEntry(ip=ip, port=port, state=kv.get("state", ""),
                        offset=_int(kv.get("offset")) or 0, lag=_int(kv.get("lag")))


def server_of(info: Mapping[str, str]) -> str:
    """Which software answered, and its version."""
    if "pyrepl_version" in info:
        return f"pyrepl {info['pyrepl_version']}"
    if info.get("server_name") == "valkey" or "valkey_version" in info:
        return f"valkey {info.get('valkey_version', info.get('redis_version', '?'))}"
    if "redis_version" in info:
        return f"redis {info['redis_version']}"
    return ""


def replica_entries(info: Mapping[str, str]) -> tuple[ReplicaEntry, ...]:
    """The ``slaveN`` lines in N order (INFO prints them in the order of the replica list)."""
    found: list[tuple[int, ReplicaEntry]] = []
    for k, v in info.items():
        if k.startswith("slave") and k[5:].isdigit():
            e = parse_replica_line(v)
            if e is not None:
                found.append((int(k[5:]), e))
    found.sort(key=lambda x: x[0])
    return tuple(e for _, e in found)


def to_sample(node: str, ts: float, info: Mapping[str, str]) -> Sample:
    """The typed sample of a parsed INFO reply taken at ``ts``."""
    g = info.get
    role = "replica" if g("role") in ("slave", "replica") else "master"
    host, port = g("master_host"), g("master_port")
    total = _int(g("mem_total_replication_buffers"))
    backlog_mem = _int(g("mem_replication_backlog"))
    if total is None and backlog_mem is not None:
        total = backlog_mem + (_int(g("mem_clients_slaves")) or 0)
    down = _int(g("master_link_down_since_seconds"))
    return Sample(
        node=node, ts=ts, run_id=g("run_id", ""), role=role, server=server_of(info),
        uptime_s=_int(g("uptime_in_seconds")),
        replid=g("master_replid", ""), replid2=g("master_replid2", NO_REPLID),
        master_repl_offset=_int(g("master_repl_offset")) or 0,
        second_repl_offset=_or(_int(g("second_repl_offset")), -1),
        backlog_active=g("repl_backlog_active") == "1",
        backlog_size=_int(g("repl_backlog_size")),
        backlog_first_byte=_int(g("repl_backlog_first_byte_offset")),
        backlog_histlen=_int(g("repl_backlog_histlen")),
        connected_replicas=_int(g("connected_slaves")) or 0,
        replicas=replica_entries(info),
        master_addr=f"{host}:{port}" if role == "replica" and host and port else None,
        link_status=g("master_link_status") if role == "replica" else None,
        link_down_since_s=down if down is not None and down >= 0 else None,
        sync_in_progress=g("master_sync_in_progress") == "1",
        replica_offset=_int(g("slave_repl_offset")) if role == "replica" else None,
        sync_full=_int(g("sync_full")) or 0,
        sync_partial_ok=_int(g("sync_partial_ok")) or 0,
        sync_partial_err=_int(g("sync_partial_err")) or 0,
        repl_buffers_mem=total, backlog_mem=backlog_mem,
    )
