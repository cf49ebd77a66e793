"""The AOF manifest: which files make up the append-only log (Redis 7's multi-part AOF).

Theory of operation: ``appenddirname`` holds one BASE file (the dataset when the last rewrite
forked: ``<appendfilename>.<seq>.base.rdb`` or ``.base.aof``), the INCR files written since
(``<appendfilename>.<seq>.incr.aof``, loaded in order after the base) and, until they are
deleted, HISTORY files that a rewrite made obsolete. The manifest ``<appendfilename>.manifest``
names them, one line each, in Redis's exact format (aof.c's aofInfoFormat)::

    file appendonly.aof.2.base.rdb seq 2 type b
    file appendonly.aof.1.incr.aof seq 1 type h
    file appendonly.aof.2.incr.aof seq 2 type i

base first, then history, then incr. :class:`Manifest` is a value: the writer and the rewrite
change a copy (:meth:`Manifest.copy`) and install it only once it is on disk
(:func:`persist`, atomic: temp file, fsync, rename, fsync of the directory), as Redis's
aofManifestDup / aofManifestFreeAndUpdate do. :func:`parse` reads a manifest with the checks
and the error texts of aofLoadManifestFromFile.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pyrepl.config import repr_arg, split_args
from pyrepl.replication.wire import strtoll

BASE, HIST, INCR = "b", "h", "i"
MANIFEST_MAX_LINE = 1024
TEMP_PREFIX = "temp-"


class ManifestError(Exception):
    """A manifest Redis would refuse at start (its message is Redis's)."""

    def __init__(self, message: str, line_no: int = 0, line: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.line_no = line_no
        self.line = line


@dataclass
class AofInfo:
    name: str
    seq: int
    type: str

    def format(self) -> str:
        """aofInfoFormat: one manifest line (the name quoted as sdscatrepr when it needs to)."""
        name = repr_arg(self.name) if _needs_repr(self.name) else self.name
        return f"file {name} seq {self.seq} type {self.type}\n"


@dataclass
class Manifest:
    base: AofInfo | None = None
    history: list[AofInfo] = field(default_factory=list)
    incr: list[AofInfo] = field(default_factory=list)
    base_seq: int = 0         # curr_base_file_seq
    incr_seq: int = 0         # curr_incr_file_seq
    dirty: bool = False

    def copy(self) -> Manifest:
        return Manifest(
            AofInfo(self.base.name, self.base.seq, self.base.type) if self.base else None,
            [AofInfo(a.name, a.seq, a.type) for a in self.history],
            [AofInfo(a.name, a.seq, a.type) for a in self.incr],
            self.base_seq, self.incr_seq, self.dirty)

    def render(self) -> bytes:
        """getAofManifestAsString: base, then history, then incr."""
        infos = ([self.base] if self.base else []) + self.history + self.incr
        return "".join(a.format() for a in infos).encode("utf-8", "surrogateescape")

    def is_empty(self) -> bool:
        return self.base is None and not self.incr

    def new_base(self, filename: str, rdb_preamble: bool) -> str:
        """getNewBaseFileNameAndMarkPreAsHistory: the next base's name; the old base becomes
        the first history file."""
        if self.base is not None:
            self.base.type = HIST
            self.history.insert(0, self.base)
        self.base_seq += 1
        suffix = ".rdb" if rdb_preamble else ".aof"
        self.base = AofInfo(f"{filename}.{self.base_seq}.base{suffix}", self.base_seq, BASE)
        self.dirty = True
        return self.base.name

    def new_incr(self, filename: str) -> str:
        """getNewIncrAofName: the next incr file, appended to the list."""
        self.incr_seq += 1
        info = AofInfo(f"{filename}.{self.incr_seq}.incr.aof", self.incr_seq, INCR)
        self.incr.append(info)
        self.dirty = True
        return info.name

    def last_incr(self, filename: str) -> str:
        """getLastIncrAofName: the incr file to append to (a new one when there is none)."""
        return self.incr[-1].name if self.incr else self.new_incr(filename)

    def mark_rewritten_incr_as_history(self, keep_last: bool) -> None:
        """markRewrittenIncrAofAsHistory: every incr file but the one being written
        (``keep_last``: AOF is on) becomes history, newest first at the head."""
        keep = self.incr[-1:] if keep_last and self.incr else []
        done = self.incr[:len(self.incr) - len(keep)]
        for info in done:   # (Redis walks from the tail, adding each at the head)
            self.history.insert(0, AofInfo(info.name, info.seq, HIST))
        self.incr = keep
        self.dirty = True

    def files(self) -> list[AofInfo]:
        """The files to load, in order: base, then the incr files."""
        return ([self.base] if self.base else []) + list(self.incr)


def _needs_repr(name: str) -> bool:
    """sdsneedsrepr: a byte that sdscatrepr would escape, or whitespace."""
    for ch in name.encode("utf-8", "surrogateescape"):
        if ch in b'\\"\n\r\t\x07\x08' or not 32 < ch < 127:
            return True
    return False


def manifest_name(filename: str) -> str:
    return filename + ".manifest"


def temp_incr_name(filename: str) -> str:
    """getTempIncrAofName: the incr file written while AOF waits for its first rewrite."""
    return f"{TEMP_PREFIX}{filename}.incr"


def parse(data: bytes) -> Manifest:
    """aofLoadManifestFromFile: raises ManifestError with Redis's text."""
    am = Manifest()
    maxseq = 0
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines.pop()
    if not lines or data == b"":
        raise ManifestError("Found an empty AOF manifest")
    for no, raw in enumerate(lines, 1):
        if raw.startswith(b"#"):
            continue
        last = no == len(lines)
        if len(raw) + 1 > MANIFEST_MAX_LINE or (last and not ends_with_newline):
            raise ManifestError("The AOF manifest file contains too long line", no)
        line = raw.decode("utf-8", "surrogateescape").strip(" \t\r\n")
        if not line:
            raise ManifestError("Invalid AOF manifest file format", no, line)
        argv = split_args(line)
        if argv is None or len(argv) < 6 or len(argv) % 2:
            raise ManifestError("Invalid AOF manifest file format", no, line)
        name, seq, kind = None, 0, ""
        for key, value in zip(argv[::2], argv[1::2], strict=True):
            k = key.lower()
            if k == "file":
                name = value
                if os.path.basename(name) != name:
                    raise ManifestError("File can't be a path, just a filename", no, line)
            elif k == "seq":
                seq = strtoll(value)   # (atoll)
            elif k == "type":
                kind = value[:1]
        if not name or not seq or not kind:
            raise ManifestError("Invalid AOF manifest file format", no, line)
        info = AofInfo(name, seq, kind)
        if kind == BASE:
            if am.base is not None:
                raise ManifestError("Found duplicate base file information", no, line)
            am.base = info
            am.base_seq = seq
        elif kind == HIST:
            am.history.append(info)
        elif kind == INCR:
            if seq <= maxseq:
                raise ManifestError("Found a non-monotonic sequence number", no, line)
            am.incr.append(info)
            am.incr_seq = maxseq = seq
        else:
            raise ManifestError("Unknown AOF file type", no, line)
    return am


def load(dirname: str, filename: str) -> Manifest:
    """aofLoadManifestFromDisk: an empty manifest when the directory or the file is missing
    (an upgrade from a single-file AOF, or no AOF yet); ManifestError or OSError else."""
    path = os.path.join(dirname, manifest_name(filename))
    if not os.path.isdir(dirname) or not os.path.exists(path):
        return Manifest()
    with open(path, "rb") as f:
        return parse(f.read())


def persist(dirname: str, filename: str, am: Manifest) -> None:
    """persistAofManifest / writeAofManifestFile: written to a temp file, fsynced, renamed
    over the manifest, then the directory fsynced (a new file's name must survive a crash as
    well as its contents). Raises OSError; ``am.dirty`` is cleared only on success."""
    if not am.dirty:
        return
    path = os.path.join(dirname, manifest_name(filename))
    tmp = os.path.join(dirname, TEMP_PREFIX + manifest_name(filename))
    data = am.render()
    fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    fsync_dir(dirname)
    am.dirty = False


def dir_create_if_missing(dirname: str) -> None:
    """dirCreateIfMissing: mkdir, fine if a directory is there; something else there is
    ENOTDIR ("Not a directory", as Redis reports it). Raises OSError."""
    try:
        os.mkdir(dirname, 0o755)
    except FileExistsError:
        if not os.path.isdir(dirname):
            raise NotADirectoryError(20, os.strerror(20), dirname) from None


def fsync_dir(dirname: str) -> None:
    """fsyncFileDir: the directory's entries (a rename, a new file) made durable."""
    fd = os.open(dirname, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
