"""REPLCONF, ACKs, WAIT and min-replicas (master side).

A replica's ``REPLCONF ACK <offset>`` moves its ``ack_off``; what it means depends on the
link's state (``_on_ack``): the first ACK of a main channel streaming during its rdb channel's
transfer puts it online, the first of a diskless replica starts its stream. ``WAIT`` blocks its
client (the core's blocking layer keeps the record and the deadline) until enough online
replicas acked its offset, with one ``REPLCONF GETACK *`` per stream position; min-replicas
counts the online replicas whose last ACK is at most ``min-replicas-max-lag`` seconds old.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyrepl.errors import SYNTAX
from pyrepl.intparse import parse_int
from pyrepl.replication.master.states import (
    CHILD_AT_WORK,
    GETACK_ARGV,
    NET_HOST_STR_LEN,
    NOT_A_REPLICA,
    REQ_EXCLUDE_DATA,
    REQ_EXCLUDE_FUNCTIONS,
    WAIT_REPLICA_ERR,
    L,
    ReplicaLink,
    S,
    SlaveState,
)
from pyrepl.replication.wire import CAPA_RESUME
from pyrepl.resp.types import BLOCKED, NO_REPLY, OK, ReplyError

if TYPE_CHECKING:
    from pyrepl.replication.manager import Replication
    from pyrepl.replication.master.feeding import Feeding
    from pyrepl.replication.master.side import MasterSide
    from pyrepl.replication.master.snapshot import Snapshots
    from pyrepl.replication.ports import ReplClient, ReplicationHost


def version_ok(text: str) -> bool:
    """Valkey's version2num accepts it: three dot-separated parts of digits, each at most
    255 (an empty part counts as 0)."""
    parts = text.split(".")
    return len(parts) == 3 and all(
        p == "" or (p.isascii() and p.isdigit() and int(p) <= 255) for p in parts)


class Acks:
    """REPLCONF, ACKs, WAIT and min-replicas (see the module docstring)."""

    __slots__ = ("core", "manager", "side", "feeding", "snapshots", "waiters", "good_replicas",
                 "_getack_offset", "_on_ack")

    def __init__(self, side: MasterSide, feeding: Feeding, snapshots: Snapshots) -> None:
        self.side = side
        self.feeding = feeding
        self.snapshots = snapshots
        self.core: ReplicationHost = side.core
        self.manager: Replication = side.manager
        self.waiters: list[ReplClient] = []     # clients blocked in WAIT
        self.good_replicas = 0              # refreshGoodSlavesCount's count
        self._getack_offset = -1            # the stream position of the last GETACK sent
        # what an ACK does beyond moving the offsets, by the link's state
        self._on_ack: dict[SlaveState, Callable[[ReplicaLink], None]] = {
            S.SEND_BULK_AND_STREAM: self._first_ack_of_main,
            S.ONLINE: self._ack_online,
        }

    def replconf_command(self, c: ReplClient, argv: list[bytes]) -> object:
        """replconfCommand (Redis 7.0.15's options)."""
        if c.kind == "master":  # our own master asks (GETACK): the replica side answers
            r = self.manager.replica.on_master_replconf(c, argv)
            return NO_REPLY if r is None else r
        if len(argv) % 2 == 0:
            raise ReplyError(SYNTAX)
        resume_id, resume_off, resume_stream = "", -1, -1
        for j in range(1, len(argv), 2):
            opt = argv[j].lower()
            val = argv[j + 1]
            if opt == b"listening-port":
                self.side.link_for(c).listening_port = parse_int(val)
            elif opt == b"ip-address":
                if len(val) >= NET_HOST_STR_LEN:
                    raise ReplyError(f"ERR REPLCONF ip-address provided by replica instance is "
                                     f"too long: {len(val)} bytes")
                self.side.link_for(c).ip_address = val.decode("utf-8", "replace")
            elif opt == b"capa":
                capa = val.lower()
                if capa == b"eof":
                    self.side.link_for(c).capa_eof = True
                elif capa == b"psync2":
                    self.side.link_for(c).capa_psync2 = True
                elif capa == b"rdb-channel-repl":
                    cfg = self.core.config
                    if cfg.repl_rdb_channel and cfg.repl_diskless_sync:
                        self.side.link_for(c).capa_rdb_channel = True
                elif capa == CAPA_RESUME:        # pyrepl's (master.resume)
                    self.side.link_for(c).capa_resume = True
                elif capa == b"dual-channel":     # Valkey's
                    cfg = self.core.config
                    if cfg.repl_rdb_channel and cfg.repl_diskless_sync:
                        self.side.link_for(c).capa_dual_channel = True
                # capabilities this master does not know are ignored
            elif opt == b"ack":
                link = c.repl
                if not isinstance(link, ReplicaLink) or link.state in NOT_A_REPLICA:
                    return NO_REPLY
                try:
                    offset = parse_int(val)
                except ReplyError:
                    return NO_REPLY
                self.ack(link, offset)
                return NO_REPLY
            elif opt == b"getack":
                return NO_REPLY  # only a master's GETACK means something (replica side)
            elif opt == b"rdb-only":
                v = parse_int(val)
                if v < 0 or v > 1:
                    raise ReplyError("ERR value is out of range, value must between 0 and 1")
                self.side.link_for(c).rdb_only = v == 1
            elif opt == b"rdb-channel":
                v = parse_int(val)
                if v < 0 or v > 1:
                    raise ReplyError("ERR value is out of range, value must between 0 and 1")
                link = self.side.link_for(c)
                link.is_rdb_channel = v == 1
                link.set_flags()
            elif opt == b"main-ch-client-id":
                self._bind_rdb_channel(self.side.link_for(c), parse_int(val))
            elif opt == b"set-rdb-client-id":     # Valkey's dual channel
                self.side.dual.set_rdb_client_id(self.side.link_for(c), parse_int(val))
            elif opt == b"version":     # Valkey's replicas announce theirs
                text = val.decode("utf-8", "replace")
                if not version_ok(text):
                    raise ReplyError(f"ERR Unrecognized version format: {text}")
                self.side.link_for(c).version = text
            elif opt == b"resume":     # pyrepl's: resume <snapshot id> resume-offset <n>
                resume_id = val.decode("utf-8", "replace")    # [stream-offset <m>]
            elif opt == b"resume-offset":
                resume_off = parse_int(val)
            elif opt == b"stream-offset":
                resume_stream = parse_int(val)
            elif opt == b"rdb-filter-only":
                filters = val.split()
                link = self.side.link_for(c)
                link.req |= REQ_EXCLUDE_DATA | REQ_EXCLUDE_FUNCTIONS
                for f in filters:
                    if f.lower() == b"functions":
                        link.req &= ~REQ_EXCLUDE_FUNCTIONS
                    else:
                        raise ReplyError(f"ERR Unsupported rdb-filter-only option: "
                                         f"{f.decode('utf-8', 'replace')}")
            else:
                raise ReplyError(f"ERR Unrecognized REPLCONF option: "
                                 f"{argv[j].decode('utf-8', 'replace')}")
        if resume_id:
            self.side.resume.request(self.side.link_for(c), resume_id, resume_off,
                                     resume_stream)
        return OK

    def _bind_rdb_channel(self, link: ReplicaLink, main_id: int) -> None:
        """REPLCONF main-ch-client-id <id>: this connection is the rdb channel of the main
        channel ``<id>``, which must be waiting for one (and not have another already)."""
        other = self.core.clients.get(main_id)
        main = other.repl if other is not None else None
        if (not isinstance(main, ReplicaLink) or not main.waits_for_rdb_channel
                or other is link.client
                or (main.rdb_channel is not None and main.rdb_channel is not link.client
                    and not main.rdb_channel.closed)):
            raise ReplyError(f"ERR Unrecognized RDB client id: {main_id}")
        if link.main is not None and link.main is not main:
            raise ReplyError(f"ERR Unrecognized RDB client id: {main_id}")
        link.main = main
        main.rdb_channel = link.client

    def ack(self, link: ReplicaLink, offset: int) -> None:
        """REPLCONF ACK <offset> from a replica."""
        core = self.core
        if offset > link.ack_off:
            link.ack_off = offset
        link.ack_ms = core.now_ms
        snap = link.snapshot
        io = self.side.io
        if (link.state in CHILD_AT_WORK and snap is not None and snap is self.snapshots.current
                and core.rdb_child_pid == snap.pid and io is not None):
            # checkChildrenDone: the ACK may arrive before the cron noticed the child's end.
            io.reap_child(snap.pid)
        then = self._on_ack.get(link.state)
        if then is not None:
            then(link)
        if self.waiters:
            self.process_waiters()

    def _first_ack_of_main(self, link: ReplicaLink) -> None:
        """rdb channel: the replica loaded the RDB (its main channel streams already)."""
        self.side.put_online(link, L.FIRST_ACK)

    def _ack_online(self, link: ReplicaLink) -> None:
        """A diskless replica's first ACK after its RDB: its stream starts."""
        if link.stream_on_ack:
            self.feeding.start_stream(link)

    def wait_command(self, c: ReplClient, argv: list[bytes]) -> object:
        """WAIT numreplicas timeout: block until enough replicas acked the client's offset."""
        if self.manager.is_replica():
            raise ReplyError(WAIT_REPLICA_ERR)
        numreplicas = parse_int(argv[1])
        timeout = parse_int(argv[2], "ERR timeout is not an integer or out of range")
        if timeout < 0:
            raise ReplyError("ERR timeout is negative")
        offset = c.woff
        acked = self.count_acks(offset)
        if acked >= numreplicas or c.in_multi or self.core.in_nested_call:
            return acked
        deadline = self.core.now_ms + timeout if timeout > 0 else 0
        # the cron answers the acks counted at the deadline (pyrepl.core.blocking)
        self.core.blocking.block_for_acks(c, offset, numreplicas, deadline,
                                          lambda: self.count_acks(offset))
        self.waiters.append(c)
        self.request_acks()
        return BLOCKED

    def count_acks(self, offset: int) -> int:
        """replicationCountAcksByOffset."""
        n = 0
        for link in self.side.links:
            if link.online and link.ack_off >= offset:
                n += 1
        return n

    def request_acks(self) -> None:
        """REPLCONF GETACK * into the stream; one per stream position (Redis groups the WAITs
        of an event-loop iteration into one GETACK)."""
        manager = self.manager
        if self._getack_offset == manager.master_repl_offset:
            return
        manager.feed(manager.stream_db, GETACK_ARGV)
        self._getack_offset = manager.master_repl_offset

    def process_waiters(self) -> None:
        """processClientsWaitingReplicas."""
        last_off = 0
        last_num = 0
        awaited = self.core.blocking.acks_awaited
        for c in list(self.waiters):
            b = awaited(c)
            if c.closed or b is None:
                self.waiters.remove(c)
                continue
            off, num = b.offset, b.numreplicas
            if last_off and last_off >= off and last_num >= num:
                self.waiters.remove(c)
                self.core.unblock(c, last_num)
                continue
            n = self.count_acks(off)
            if n >= num:
                last_off, last_num = off, n
                self.waiters.remove(c)
                self.core.unblock(c, n)

    def forget_answered(self) -> None:
        """Forget the WAITs answered elsewhere: their deadline (the core's blocked-clients
        cron), CLIENT UNBLOCK, a closed connection."""
        awaited = self.core.blocking.acks_awaited
        self.waiters = [c for c in self.waiters if not c.closed and awaited(c) is not None]

    def refresh_good_replicas(self) -> None:
        """refreshGoodSlavesCount."""
        now_s = self.core.now_ms // 1000
        lag_max = self.core.config.min_replicas_max_lag
        self.good_replicas = sum(1 for lk in self.side.links if lk.online
                                 and now_s - lk.ack_ms // 1000 <= lag_max)

    def good_replicas_count(self) -> int:
        return self.good_replicas

    def enough_good_replicas(self) -> bool:
        """checkGoodReplicasStatus."""
        cfg = self.core.config
        if not cfg.min_replicas_to_write or not cfg.min_replicas_max_lag:
            return True
        if self.manager.is_replica():
            return True
        return bool(self.good_replicas >= cfg.min_replicas_to_write)
