"""Each port's implementations satisfy it, checked by mypy --strict (tests/unit/test_types.py):
a function per pair that returns the implementation where the port is expected. Nothing here
runs; a member renamed or retyped on either side fails the type check."""

from __future__ import annotations

from pyrepl.aof.appendonly import AofHost, AofServer
from pyrepl.aof.writer import FsyncPort, LogPort
from pyrepl.core.client import Client
from pyrepl.core.host import Host, NullLog
from pyrepl.core.lazyfree import FreePort, InlineFree
from pyrepl.core.ports import BlockingHost, Meter, PauseHost, PubSubHost, TrackingHost
from pyrepl.core.server import ServerCore
from pyrepl.keyspace.ports import KeyspaceHost
from pyrepl.memacct import PoolWalkMeter, RssMeter
from pyrepl.net.bio import BackgroundFree, BackgroundFsync
from pyrepl.net.log import Logger
from pyrepl.net.master_io import MasterIO
from pyrepl.net.replica_io import ReplicaIO
from pyrepl.replication.ports import MasterIOPort, ReplClient, ReplicaIOPort, ReplicationHost
from tests.unit.fakes import FakeMeter


def keyspace_host(core: ServerCore) -> KeyspaceHost:
    return core


def aof_server(core: ServerCore) -> AofServer:
    return core


def aof_host(host: Host) -> AofHost:
    return host


def aof_log(log: Logger, null: NullLog) -> tuple[LogPort, LogPort]:
    return log, null


def fsync(bio: BackgroundFsync) -> FsyncPort:
    return bio


def lazy_free(bio: BackgroundFree, inline: InlineFree) -> tuple[FreePort, FreePort]:
    return bio, inline


def master_io(io: MasterIO) -> MasterIOPort:
    return io


def replica_io(io: ReplicaIO) -> ReplicaIOPort:
    return io


def replication_host(core: ServerCore) -> ReplicationHost:
    return core


def replication_client(c: Client) -> ReplClient:
    return c


def core_parts(core: ServerCore) -> tuple[BlockingHost, PubSubHost, TrackingHost, PauseHost]:
    return core, core, core, core


def meters(pool: PoolWalkMeter, rss: RssMeter, fake: FakeMeter) -> tuple[Meter, Meter, Meter]:
    return pool, rss, fake
