"""A real ServerCore in-process, at a fake clock: ``make_core`` and ``run`` (bytes in, bytes
out), ``CoreHarness`` (one client, recording what the core propagates), ``cmd`` (a command as
RESP, by pyrepl's writer) and ``step_clock`` (a clock that moves on every reading)."""

from __future__ import annotations

import pyrepl.commands  # noqa: F401  (fills the command table)
from pyrepl.config import Config
from pyrepl.core.server import ServerCore
from pyrepl.resp.writer import encode_command as resp_array
from tests.support.resp import encode_command

NOW = 1_700_000_000_000
T0 = 1_700_000_000_000


def make_core(*overrides: tuple[str, list[str]], now: int = NOW) -> ServerCore:
    cfg = Config.load(None, [("save", [""]), ("enable-debug-command", ["yes"]), *overrides])
    return ServerCore(cfg, now_ms=now)


def run(client, *args: bytes | str) -> bytes:
    client.receive_data(encode_command(*args))
    return client.data_to_send()


class CoreHarness:
    """One client of a real ServerCore at a fake clock (``at``), recording what it propagates
    (``take``: the command vectors fed to replication since the last take)."""

    def __init__(self) -> None:
        self.core = ServerCore(Config.load(None, [("save", [""])]), now_ms=T0)
        self.fed: list[tuple[int, list[bytes]]] = []
        self.core.repl_feed = lambda db, argv, data=None: self.fed.append((db, [bytes(a) for a in argv]))
        self.core.stream_live = True   # (a fake stream: see Replication.refresh_stream_live)
        self.client = self.core.connection_made()

    def run(self, *args: str) -> bytes:
        self.client.receive_data(cmd(*args))
        return self.client.data_to_send()

    def at(self, ms_after_t0: int) -> None:
        self.core.now_ms = T0 + ms_after_t0

    def take(self) -> list[list[bytes]]:
        out = [argv for _, argv in self.fed]
        self.fed = []
        return out


def cmd(*args: bytes | str | int) -> bytes:
    return resp_array([a if isinstance(a, bytes) else str(a).encode() for a in args])


def step_clock(core: object, step_ns: int) -> list[int]:
    """Give ``core`` a fake monotonic clock that moves ``step_ns`` on every reading (a script
    or a load becomes busy after a known number of hooks); its ``[now]``, to set it back."""
    clock = [0]

    def tick() -> int:
        clock[0] += step_ns
        return clock[0]

    core.clock_ns = tick  # type: ignore[attr-defined]
    return clock
