"""ASKING lasts one command, whatever became of it (resetClient): a command refused before the
redirect (unknown, wrong arity, denied by ACL) uses it up, as on redis-server 7.0.15. The same
requests on a 2-node pyrepl cluster and a 2-node Redis cluster, each importing a slot from its
other node, give the same replies."""

from __future__ import annotations

import socket

import pytest

from tests.support.cluster import agreed, build, cluster
from tests.support.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]


def raw(port: int, *reqs: list[str]) -> list[bytes]:
    """Each request's reply line, one request at a time on one connection."""
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        f = s.makefile("rb")
        for r in reqs:
            s.sendall(b"*%d\r\n" % len(r) + b"".join(
                b"$%d\r\n%s\r\n" % (len(w.encode()), w.encode()) for w in r))
            line = f.readline()
            if line.startswith(b"$") and line != b"$-1\r\n":
                line += f.readline()
            out.append(line)
    return out


def replies(kind: str) -> list[list[bytes]]:
    with cluster([kind, kind]) as nodes:
        a, b = nodes
        build([a, b])
        wait_for(lambda: agreed(nodes), 60, what="the pair to agree")
        key = next(f"k{i}" for i in range(10_000) if int(b.cmd("CLUSTER", "KEYSLOT", f"k{i}"))
                   >= 16384 // 2)               # one of b's slots
        slot = str(b.cmd("CLUSTER", "KEYSLOT", key))
        assert a.cmd("CLUSTER", "SETSLOT", slot, "IMPORTING", b.myid()) == "OK"
        assert a.cmd("ACL", "SETUSER", "nokeys", "on", "nopass", "+@all", "-get") == "OK"
        get = ["GET", key]
        return [
            raw(a.port, ["ASKING"], get, get),                       # served once, then MOVED
            raw(a.port, ["ASKING"], ["NOSUCHCOMMAND"], get),         # used up by the unknown
            raw(a.port, ["ASKING"], ["GET"], get),                   # and by a wrong arity
            raw(a.port, ["AUTH", "nokeys", "x"], ["ASKING"], get, ["ASKING"], ["SET", key, "v"]),
            raw(a.port, ["MULTI"], ["ASKING"], ["NOSUCHCOMMAND"], get, ["EXEC"]),
        ]


def test_asking_is_used_up_by_a_refused_command_as_on_redis() -> None:
    ours, theirs = replies("pyrepl"), replies("redis")

    def norm(rs: list[list[bytes]]) -> list[list[bytes]]:     # (ports and ids differ)
        return [[x.split(b" ")[0] + (b" " + x.split(b" ")[1] if x.startswith(b"-MOVED") else
                                     b"") if x.startswith((b"-MOVED", b"-ERR", b"-NOPERM",
                                                           b"-EXECABORT")) else x for x in r]
                for r in rs]
    assert norm(ours) == norm(theirs), (ours, theirs)
    # what Redis does, spelt out: ASKING then the key, then MOVED; a refused command ends it
    assert theirs[0][1] == b"$-1\r\n" and theirs[0][2].startswith(b"-MOVED")
    assert theirs[1][2].startswith(b"-MOVED") and theirs[2][2].startswith(b"-MOVED")
