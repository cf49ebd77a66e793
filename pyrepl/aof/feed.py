"""The propagation fan-out while AOF is on: every write to the AOF writer, then to replication.

Theory of operation: the core hands what a command propagates to ``core.repl_feed`` (one
command) and ``core.repl_feed_span`` (a pipelined run as it arrived). Without AOF those are the
replication layer's own methods, which the C write path recognises and replaces with its own
copy into the backlog. With AOF on, :class:`FeedFanout`'s methods take their place: the C paths
see a feed that is not the replication layer's and leave the write to Python, which gives it to
the AOF first (Redis's propagateNow: feedAppendOnlyFile, then replicationFeedSlaves).
"""

from __future__ import annotations

from typing import Any

from pyrepl.aof.writer import AofWriter
from pyrepl.resp.writer import encode_command


class FeedFanout:
    __slots__ = ("aof", "repl")

    def __init__(self, aof: AofWriter, repl: Any) -> None:
        self.aof = aof
        self.repl = repl      # the Replication, or None

    def feed(self, db_id: int, argv: list[bytes], data: bytes | bytearray | None = None) -> None:
        if data is None:
            data = encode_command(argv)
        self.aof.feed(db_id, argv, data)
        repl = self.repl
        if repl is not None:
            repl.feed(db_id, argv, data)

    def feed_aof(self, db_id: int, argv: list[bytes]) -> None:
        """A command for the AOF alone (a script's redis.set_repl(redis.REPL_AOF))."""
        self.aof.feed(db_id, argv, encode_command(argv))

    def feed_repl(self, db_id: int, argv: list[bytes]) -> None:
        """A command for the replicas alone (redis.set_repl(redis.REPL_REPLICA))."""
        if self.repl is not None:
            self.repl.feed(db_id, argv, encode_command(argv))

    def feed_span(self, db_id: int, data: bytes, ends: list[int]) -> None:
        self.aof.feed_span(db_id, data)
        repl = self.repl
        if repl is not None:
            repl.feed_span(db_id, data, ends)
