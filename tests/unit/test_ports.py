"""The ports of pyrepl.replication.ports (and the AOF's background fsync, pyrepl.aof.writer's
FsyncPort) and what implements them: the I/O shell, the test
fakes and the replica side agree with the Protocol on every method and its parameters, so a
change to a port cannot leave a fake (and the tests that use it) behind."""

from __future__ import annotations

import inspect

import pytest

from pyrepl.aof.writer import FsyncPort, InlineFsync
from pyrepl.net.bio import BackgroundFsync
from pyrepl.net.master_io import MasterIO
from pyrepl.net.replica_io import ReplicaIO
from pyrepl.replication.ports import MasterIOPort, ReplicaIOPort, ReplicaLinkEvents
from pyrepl.replication.replica import ReplicaSide
from tests.support.master_side import WireIO
from tests.support.memnet import MemMasterIO, MemReplicaIO

IMPLEMENTATIONS = [
    (MasterIOPort, MasterIO), (MasterIOPort, WireIO), (MasterIOPort, MemMasterIO),
    (ReplicaIOPort, ReplicaIO), (ReplicaIOPort, MemReplicaIO),
    (ReplicaLinkEvents, ReplicaSide),
    (FsyncPort, BackgroundFsync), (FsyncPort, InlineFsync),
]


def _methods(cls: type) -> dict[str, list[str]]:
    """Public methods of ``cls`` and the names of their parameters (self aside)."""
    out = {}
    for name, fn in inspect.getmembers(cls, inspect.isfunction):
        if not name.startswith("_"):
            out[name] = [p for p in inspect.signature(fn).parameters if p != "self"]
    return out


@pytest.mark.parametrize(("port", "impl"), IMPLEMENTATIONS,
                         ids=[f"{p.__name__}-{i.__name__}" for p, i in IMPLEMENTATIONS])
def test_implementation_has_every_method_of_its_port(port: type, impl: type) -> None:
    want = _methods(port)
    have = _methods(impl)
    assert want, port
    for name, params in want.items():
        assert name in have, f"{impl.__name__} lacks {port.__name__}.{name}"
        assert have[name][:len(params)] == params, (impl.__name__, name, have[name], params)
