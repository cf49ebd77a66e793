"""Replication messages as they are on the wire, and the constants both sides share.

Theory of operation: one frozen dataclass per message whose text both sides handle (Redis's,
and Valkey's dual-channel ``$ENDOFF:``), with ``parse`` (the replica reading the master's line,
as Redis's replica reads it: a malformed message is ``None``, the caller decides what Redis
does then) and ``format`` (the master writing it). Numbers are read as C's ``strtoll`` reads
them (:func:`strtoll`), because that is what a Redis replica does with the master's offsets
and sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

EOF_MARK_LEN = 40  # CONFIG_RUN_ID_SIZE: a replid, and the diskless payload's end mark
MAX_LINE = 64 * 1024  # a reply / header line longer than this is a protocol error
CRON_MS = 1000  # replicationCron runs once a second


def strtoll(text: str) -> int:
    """strtoll(text, NULL, 10): leading spaces, a sign and the digits that follow; else 0."""
    s = text.lstrip()
    i = 1 if s[:1] in ("-", "+") else 0
    j = i
    while j < len(s) and s[j].isascii() and s[j].isdigit():
        j += 1
    return int(s[:j]) if j > i else 0


CAPA_RESUME = b"pyrepl-resume"   # REPLCONF capa of a replica that resumes a cut full sync


@dataclass(frozen=True, slots=True)
class FullResync:
    """``+FULLRESYNC <replid> <offset>``: the snapshot was forked at ``offset``. To a replica
    that said ``capa pyrepl-resume``, a pyrepl master names the snapshot too (``snapshot``, the
    id a cut sync resumes with: pyrepl.replication.master.resume); a Redis replica reads the
    first two fields only, as it does with any line."""

    replid: str
    offset: int
    snapshot: str = ""

    @classmethod
    def parse(cls, text: str) -> FullResync | None:
        """A line that starts with ``+FULLRESYNC``; None when the replid is not 40 chars."""
        parts = text.split(" ")
        if len(parts) < 3 or len(parts[1]) != EOF_MARK_LEN:
            return None
        snap = parts[3] if len(parts) > 3 and len(parts[3]) == EOF_MARK_LEN else ""
        return cls(parts[1], strtoll(parts[2]), snap)

    def format(self) -> bytes:
        if self.snapshot:
            return b"+FULLRESYNC %s %d %s\r\n" % (self.replid.encode(), self.offset,
                                                   self.snapshot.encode())
        return b"+FULLRESYNC %s %d\r\n" % (self.replid.encode(), self.offset)


@dataclass(frozen=True, slots=True)
class ResumeHeader:
    """``$RESUME:<offset>``: a resumed sync's payload goes on from byte ``offset`` (pyrepl's)."""

    offset: int

    @classmethod
    def parse(cls, line: bytes) -> ResumeHeader | None:
        """A line that starts with ``$RESUME:``; None unless a number follows."""
        rest = line[8:].decode("ascii", "replace")
        if not line.startswith(b"$RESUME:") or not rest.isdigit():
            return None
        return cls(int(rest))

    def format(self) -> bytes:
        return b"$RESUME:%d\r\n" % self.offset


@dataclass(frozen=True, slots=True)
class Continue:
    """``+CONTINUE [<replid>]``: the master's id after a partial resync ("" without psync2)."""

    replid: str

    @classmethod
    def parse(cls, text: str) -> Continue:
        new = text[10:].split("\r")[0].split("\n")[0] if len(text) > 10 else ""
        return cls(new if len(new) == EOF_MARK_LEN else "")

    def format(self) -> bytes:
        return (b"+CONTINUE %s\r\n" % self.replid.encode()) if self.replid else b"+CONTINUE\r\n"


@dataclass(frozen=True, slots=True)
class BulkHeader:
    """``$EOF:<mark>`` (``usemark``) or ``$<size>``: the payload follows."""

    usemark: bool
    mark: bytes
    size: int

    @classmethod
    def parse(cls, line: bytes) -> BulkHeader:
        """A line that starts with ``$`` (Redis: a mark when at least 40 bytes follow
        ``$EOF:``, else a size, a bad one being 0)."""
        if line[1:5] == b"EOF:" and len(line) - 5 >= EOF_MARK_LEN:
            return cls(True, bytes(line[5:5 + EOF_MARK_LEN]), 0)
        return cls(False, b"", max(0, strtoll(line[1:].decode("utf-8", "replace"))))

    def format(self) -> bytes:
        return (b"$EOF:" + self.mark + b"\r\n") if self.usemark else b"$%d\r\n" % self.size


@dataclass(frozen=True, slots=True)
class EndOffset:
    """Valkey's dual channel: ``$ENDOFF:<offset> <replid> <dbid> <client id>``, the first line
    of the rdb channel (the snapshot's offset and id, the db selected there, and the id of the
    rdb channel's client, which the main channel names in ``REPLCONF set-rdb-client-id``)."""

    offset: int
    replid: str
    dbid: int
    client_id: int

    @classmethod
    def parse(cls, line: bytes) -> EndOffset | None:
        """A line that starts with ``$ENDOFF:``; None unless its four fields parse (Valkey's
        ``sscanf("$ENDOFF:%lld %40s %d %llu")`` matching all four)."""
        parts = line[8:].decode("utf-8", "replace").split()
        if len(parts) != 4 or not line.startswith(b"$ENDOFF:"):
            return None
        try:
            offset, dbid, cid = int(parts[0]), int(parts[2]), int(parts[3])
        except ValueError:
            return None
        if cid < 0 or len(parts[1]) > EOF_MARK_LEN:
            return None
        return cls(offset, parts[1], dbid, cid)

    def format(self) -> bytes:
        return b"$ENDOFF:%d %s %d %d\r\n" % (self.offset, self.replid.encode(), self.dbid,
                                             self.client_id)
