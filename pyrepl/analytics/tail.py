"""Files that grow, as a Spark streaming source: the whole lines appended to NDJSON logs
(pyrepl's sync logs, ``pyrepl collect``'s output) and those of files that appear, each line
exactly once, across rotations and restarts.

Theory of operation: the source's offset holds, per file, its identity (device and inode: a
rotation renames a file, which keeps its inode, and starts a new one under the old name), the
path it was last seen under and the end of its last whole line read so far. ``latestOffset``
lists the paths (a directory: its files, recursively, dot-files and ``_``-files left out, as
Spark's file sources do), stats each and moves each file's end to the end of its last whole
line (a line still being written waits for its newline); a file seen for the first time starts
at 0, a file whose inode now holds fewer bytes than its end was truncated or replaced and
starts again at 0. ``partitions`` cuts each file's new bytes into ranges of at most
``chunkBytes`` and ``read`` yields the lines of a range: a range that starts inside a line
skips it (the range before it reads it whole) and the last line of a range is read to its
newline. Gzipped files (rotated and compressed: they no longer grow) are read whole, once, by
one range, when they are there at the first trigger; one that appears later is a rotated file
compressed, whose lines were read from the file it was, and is skipped. Spark's checkpoint
keeps the offsets: a restarted query starts where the last committed batch ended, so each line
lands in exactly one batch.

``maxBytesPerTrigger`` bounds a batch (admission control: the files' new bytes are taken
oldest file first, each file up to a line end); a trigger that asks for everything
(``availableNow``) gets everything.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxBytes

NAME = "pyrepl_tail"
SCHEMA = "path string, line string"
CHUNK_BYTES = 64 << 20
TAIL_PROBE = 1 << 16  # bytes read back from a file's end to find its last newline
HEAD_BYTES = 256      # a file's first bytes: its fingerprint beside its inode
BLOCK_BYTES = 8 << 20  # bytes of lines per Arrow record batch the source yields


@dataclass(frozen=True)
class Range:
    """Bytes [start, end) of one file; ``whole``: a gzipped file, read whole."""
    path: str
    ino: str
    start: int
    end: int
    whole: bool = False


@dataclass(frozen=True)
class Ranges(InputPartition):
    """One task's ranges: small files' new bytes share a task (a task costs Spark ~20 ms
    and a Python worker's round trip: a fleet's thousands of files, each a few kB a trigger,
    would cost more in tasks than in reading)."""
    ranges: tuple[Range, ...]


def _key(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}"


def list_files(paths: Sequence[str]) -> list[str]:
    """The files under ``paths`` (a file, or a directory walked recursively), sorted; names
    starting with ``.`` or ``_`` are left out (temporary and marker files)."""
    out: list[str] = []
    for p in paths:
        if os.path.isfile(p):
            out.append(p)
            continue
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            out += [os.path.join(root, f) for f in sorted(files)
                    if not f.startswith((".", "_"))]
    return out


def line_end(path: str, size: int, floor: int) -> int:
    """The end of the last whole line of ``path`` in [floor, size]: just past its last
    newline there, else ``floor``."""
    with open(path, "rb") as f:
        pos = size
        while pos > floor:
            lo = max(floor, pos - TAIL_PROBE)
            f.seek(lo)
            block = f.read(pos - lo)
            i = block.rfind(b"\n")
            if i >= 0:
                return lo + i + 1
            pos = lo
    return floor


def next_line_end(path: str, begin: int, end: int) -> int:
    """Just past the first newline of ``path`` in [begin, end) (``end`` is a line end)."""
    with open(path, "rb") as f:
        f.seek(begin)
        pos = begin
        while pos < end:
            block = f.read(min(TAIL_PROBE, end - pos))
            if not block:
                break
            i = block.find(b"\n")
            if i >= 0:
                return pos + i + 1
            pos += len(block)
    return end


def head(path: str, n: int) -> list[Any]:
    """The fingerprint of a file's first ``n`` bytes (up to HEAD_BYTES): [n, crc32]."""
    n = min(n, HEAD_BYTES)
    with open(path, "rb") as f:
        data = f.read(n)
    return [len(data), zlib.crc32(data)]


def same_file(was: list[Any] | None, path: str, size: int) -> bool:
    """Whether the file now at ``path`` (same device and inode as ``was``'s) is the one
    ``was`` describes: it did not shrink and starts with the same bytes (a file removed and
    another created may get its inode)."""
    if was is None or was[1] > size:
        return False
    n, crc = was[3]
    return n == 0 or head(path, n) == [n, crc]


def begin_of(prev: dict[str, list[Any]], k: str, entry: list[Any]) -> int:
    """Where the new bytes of file ``k`` start: its last end when it is the same file (the
    same generation of its inode), else where a file first seen starts (its ``base``)."""
    was = prev.get(k)
    if was is not None and entry[4] == was[4] and was[1] <= entry[1]:
        return int(was[1])
    return int(entry[2])


def scan(paths: Sequence[str], start: dict[str, Any]) -> dict[str, list[Any]]:
    """Every file's [path, end of its last whole line, base, fingerprint, generation] by
    identity; ends never go back (a file that shrank, or whose first bytes changed, is another
    file under that inode: its next generation, read from its start). A gzipped file is
    complete: read whole, when it is there from the start; one that appears later is a rotated file
    compressed, whose lines were read from the file it was: skipped (base = its size)."""
    prev: dict[str, list[Any]] = start.get("files", {})
    started = bool(start.get("started"))
    out: dict[str, list[Any]] = {}
    for path in list_files(paths):
        try:
            st = os.stat(path)
            k = _key(st)
            was = prev.get(k)
            gen = 0
            if was is not None and not same_file(was, path, st.st_size):
                gen, was = was[4] + 1, None    # another file under that inode
            elif was is not None:
                gen = was[4]
            if path.endswith(".gz"):
                out[k] = [path, st.st_size, was[2] if was is not None else
                          (st.st_size if started else 0), head(path, st.st_size), gen]
                continue
            old_end = was[1] if was is not None else 0
            end = line_end(path, st.st_size, old_end) if st.st_size > old_end else old_end
            out[k] = [path, end, 0, was[3] if was is not None and was[3][0] == HEAD_BYTES
                      else head(path, end), gen]
        except OSError:
            continue  # rotated away (or replaced) between the listing and the reads
    # files rotated out of the listing keep their offsets (they may come back renamed)
    for k, v in prev.items():
        out.setdefault(k, v)
    return out


class TailReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.paths = [p for p in options["paths"].split("\n") if p]
        self.chunk = int(options.get("chunkBytes", CHUNK_BYTES))
        self.max_bytes = int(options.get("maxBytesPerTrigger", 0))

    def initialOffset(self) -> dict:
        return {"files": {}}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxBytes(self.max_bytes) if self.max_bytes > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        now = scan(self.paths, start)
        if not isinstance(limit, ReadMaxBytes):
            return {"started": True, "files": now}
        budget = limit.max_bytes
        prev = start.get("files", {})
        out = dict(prev)
        # oldest first: by path, rotated files (suffix .1, .2 ...) before the live one
        for k, entry in sorted(now.items(), key=lambda kv: kv[1][0]):
            path, end = entry[0], entry[1]
            begin = begin_of(prev, k, entry)
            if end - begin <= budget or path.endswith(".gz"):
                out[k] = entry
                budget -= end - begin
            elif budget > 0:
                # whole lines within the budget; at least one (a line longer than the
                # budget must not stop the file for good)
                cut = line_end(path, begin + budget, begin)
                if cut == begin:
                    cut = next_line_end(path, begin, end)
                out[k] = [path, cut, *entry[2:]]
                budget -= cut - begin
            if budget <= 0:
                break
        return {"started": True, "files": out}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The new bytes, cut into ranges of at most ``chunkBytes``, packed in order into
        tasks of at most ``chunkBytes`` (a gzipped file: a task of its own)."""
        prev = start.get("files", {})
        parts: list[InputPartition] = []
        pack: list[Range] = []
        size = 0
        for k, entry in sorted(end.get("files", {}).items()):
            path, stop = entry[0], entry[1]
            begin = begin_of(prev, k, entry)
            if stop <= begin:
                continue
            if path.endswith(".gz"):
                parts.append(Ranges((Range(path, k, 0, stop, whole=True),)))
                continue
            for a in range(begin, stop, self.chunk):
                r = Range(path, k, a, min(stop, a + self.chunk))
                if pack and size + r.end - r.start > self.chunk:
                    parts.append(Ranges(tuple(pack)))
                    pack, size = [], 0
                pack.append(r)
                size += r.end - r.start
        if pack:
            parts.append(Ranges(tuple(pack)))
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, Ranges)
        for r in partition.ranges:
            yield from read_batches(r)


def _open_same(path: str, ino: str) -> Any:
    """``path`` opened, or (renamed since the offset was taken) the file with inode ``ino``
    in the same directory; None when it is gone."""
    for cand in [path] + sorted(os.path.join(os.path.dirname(path), f)
                                for f in os.listdir(os.path.dirname(path) or ".")):
        try:
            f = open(cand, "rb")  # noqa: SIM115 - returned open
        except OSError:
            continue
        if _key(os.fstat(f.fileno())) == ino:
            return f
        f.close()
    return None


def first_line(f: Any, start: int) -> int:
    """Seek ``f`` to the first line that starts at or after ``start`` (a line that starts
    before it is the range before's to read); its offset."""
    f.seek(start)
    if start > 0:
        f.seek(start - 1)
        if f.read(1) != b"\n":
            return start + len(f.readline())
    return start


def read_range(r: Range) -> Iterator[tuple[str, str]]:
    """The lines of range ``r``: those that start in [start, end), each whole."""
    f = _open_same(r.path, r.ino)
    if f is None:
        return
    with f:
        if r.whole:
            for line in gzip.decompress(f.read()).decode("utf-8", "replace").splitlines():
                yield r.path, line
            return
        pos = first_line(f, r.start)
        while pos < r.end:
            line = f.readline()
            if not line:
                break
            pos += len(line)
            if not line.endswith(b"\n"):
                break    # (never: ends are after a newline)
            yield r.path, line[:-1].decode("utf-8", "replace")


def read_batches(r: Range, block: int = BLOCK_BYTES) -> Iterator[Any]:
    """The lines of range ``r`` as ``read_range`` gives them, in Arrow record batches of
    about ``block`` bytes each: a block's bytes are split and decoded at once, not line by
    line (the tuples of ``read_range`` cost Spark's Python worker ~10 us a line to convert;
    this, its reference, stays for the tests). (Decoding a block with ``replace`` gives the
    same text as decoding each of its lines: a newline byte is never inside a UTF-8
    sequence, so an invalid sequence ends before it either way.)"""
    import pyarrow as pa

    def batch(lines: list[str]) -> Any:
        return pa.RecordBatch.from_arrays(
            [pa.array([r.path] * len(lines), pa.string()), pa.array(lines, pa.string())],
            names=["path", "line"])

    f = _open_same(r.path, r.ino)
    if f is None:
        return
    with f:
        if r.whole:
            lines = gzip.decompress(f.read()).decode("utf-8", "replace").splitlines()
            for i in range(0, len(lines), 1 << 16):
                yield batch(lines[i:i + (1 << 16)])
            return
        pos = first_line(f, r.start)
        while pos < r.end:
            data = f.read(min(block, r.end - pos))
            if not data:
                break
            if not data.endswith(b"\n"):
                data += f.readline()       # the last line that starts in the range, whole
            pos += len(data)
            cut = data.rfind(b"\n") + 1    # (never short: ends are after a newline)
            if cut:
                yield batch(data[:cut - 1].decode("utf-8", "replace").split("\n"))
            if cut < len(data):
                break


class TailSource(DataSource):
    """``spark.readStream.format("pyrepl_tail").option("paths", "\\n".join(paths))``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return TailReader(dict(self.options))
