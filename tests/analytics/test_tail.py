"""The growing-files source (pyrepl/analytics/tail.py): whatever a writer does between
triggers — whole lines, a line written in pieces, rotations by rename, new files in new
directories, a file replaced by a shorter one — and however the batches are bounded and cut
into ranges, every whole line is read exactly once, in its file's order; a line still being
written waits for its newline. The reader's methods are driven here as Spark drives them
(offsets passed from one trigger to the next, ranges read apart)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes

from pyrepl.analytics.tail import Range, TailReader, read_batches, read_range

ACTIONS = st.lists(st.one_of(
    st.tuples(st.just("lines"), st.integers(1, 5), st.integers(0, 300)),
    st.tuples(st.just("piece"), st.integers(1, 40), st.just(0)),
    st.tuples(st.just("rotate"), st.just(0), st.just(0)),
    st.tuples(st.just("newfile"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("replace"), st.integers(1, 2), st.just(0)),
    st.tuples(st.just("trigger"), st.just(0), st.just(0)),
), max_size=40)


class Writer:
    """Writes numbered lines (``{"n": i, "f": the file they went to, "pad": ...}``) and
    remembers every whole line."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.n = 0
        self.gen = 0
        self.whole: list[str] = []     # every whole line written, in order
        self.pending: dict[str, str] = {}   # path -> a line's rest, not yet written
        self._pieces: dict[str, str] = {}
        self.tags: dict[str, str] = {}      # path -> the file now under it
        self.deleted: set[str] = set()      # files removed (rotated away, replaced)
        os.makedirs(os.path.join(root, "a"), exist_ok=True)
        self.live = os.path.join(root, "a", "sync.ndjson")
        open(self.live, "w").close()
        self.tags[self.live] = "live0"

    def line(self, path: str, pad: int) -> str:
        self.n += 1
        return json.dumps({"n": self.n, "f": self.tags.setdefault(path, path), "pad":
                           "x" * pad})

    def append(self, path: str, text: str) -> None:
        with open(path, "a") as f:
            f.write(text)

    def lines(self, path: str, k: int, pad: int) -> None:
        rest = self.pending.pop(path, None)
        if rest is not None:                 # end the line in pieces first
            self.append(path, rest + "\n")
            self.whole.append(self._done(path))
        for _ in range(k):
            ln = self.line(path, pad)
            self.append(path, ln + "\n")
            self.whole.append(ln)

    def piece(self, path: str, cut: int) -> None:
        if path in self.pending:
            return
        ln = self.line(path, 50)
        cut = min(cut, len(ln) - 1)
        self.append(path, ln[:cut])
        self.pending[path] = ln[cut:]
        self._pieces[path] = ln

    def _done(self, path: str) -> str:
        return self._pieces.pop(path)

    def rotate(self) -> None:
        """As pyrepl's logs rotate: .1 -> .2, live -> .1 (renames), a new live file; a line
        in pieces ends in the rotated file first (a writer never rotates mid-line)."""
        if self.live in self.pending:
            self.lines(self.live, 0, 0)
        one, two = self.live + ".1", self.live + ".2"
        if os.path.exists(one):
            if two in self.tags:
                self.deleted.add(self.tags[two])   # the oldest goes
            os.replace(one, two)
            self.tags[two] = self.tags[one]
        os.replace(self.live, one)
        self.tags[one] = self.tags[self.live]
        open(self.live, "w").close()
        self.gen += 1
        self.tags[self.live] = f"live{self.gen}"

    def newfile(self, d: int, k: int) -> None:
        p = os.path.join(self.root, f"d{d}", "sub", f"collect{self.n}.ndjson")
        os.makedirs(os.path.dirname(p), exist_ok=True)
        self.lines(p, k, 10)

    def replace(self, k: int) -> None:
        """A file replaced by a new one, shorter, under the same name (new inode)."""
        p = os.path.join(self.root, "replaced.ndjson")
        if os.path.exists(p):
            if p in self.pending:
                self.lines(p, 0, 0)
            os.remove(p)
            self.deleted.add(self.tags[p])
        self.tags[p] = f"replaced{self.n}"
        self.lines(p, k, 0)


def _batches(reader: TailReader, actions, w: Writer, limit) -> list[str]:  # noqa: ANN001
    got: list[str] = []
    offset = reader.initialOffset()

    def trigger() -> None:
        nonlocal offset
        end = json.loads(json.dumps(reader.latestOffset(offset, limit)))  # as checkpointed
        for part in reader.partitions(offset, end):
            assert sum(r.end - r.start for r in part.ranges) <= reader.chunk \
                or len(part.ranges) == 1
            # the reference: a line at a time
            want = [x for r in part.ranges for x in read_range(r)]
            for batches in (reader.read(part),
                            (b for r in part.ranges for b in read_batches(r, block=5))):
                rows = [(p, x) for b in batches
                        for p, x in zip(b.column(0).to_pylist(), b.column(1).to_pylist(),
                                        strict=True)]
                assert rows == want
            got.extend(line for _, line in want)
        reader.commit(end)
        offset = end

    for act, a, b in actions:
        if act == "lines":
            w.lines(w.live, a, b)
        elif act == "piece":
            w.piece(w.live, a)
        elif act == "rotate":
            w.rotate()
        elif act == "newfile":
            w.newfile(a, b)
        elif act == "replace":
            w.replace(a)
        else:
            trigger()
    for p in list(w.pending):      # every line ends; then read until nothing is left
        w.lines(p, 0, 0)
    for _ in range(200):
        before = len(got)
        trigger()
        if len(got) == before and offset == json.loads(json.dumps(
                reader.latestOffset(offset, limit))):
            break
    return got


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS, chunk=st.sampled_from([7, 64, 1 << 20]),
       max_bytes=st.sampled_from([0, 1, 90, 500]))
def test_each_whole_line_once_in_order(tmp_path_factory, actions, chunk: int,
                                       max_bytes: int) -> None:
    root = str(tmp_path_factory.mktemp("tail"))
    w = Writer(root)
    reader = TailReader({"paths": root, "chunkBytes": str(chunk),
                         "maxBytesPerTrigger": str(max_bytes)})
    limit = reader.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxBytes if max_bytes else ReadAllAvailable)
    got = _batches(reader, actions, w, limit)
    # a file removed (rotated away, replaced) before a trigger read its lines lost them: those
    # are the only lines that may be missing
    assert len(got) == len(set(got)), "a line read twice"
    assert set(got) <= set(w.whole)
    lost = [json.loads(x) for x in set(w.whole) - set(got)]
    assert all(x["f"] in w.deleted for x in lost), (lost, w.deleted)
    # each file's lines in the order they were written
    by_file: dict[str, list[int]] = {}
    for x in map(json.loads, got):
        by_file.setdefault(x["f"], []).append(x["n"])
    assert all(ns == sorted(ns) for ns in by_file.values()), by_file


@pytest.mark.parametrize("block", [1, 4, 1 << 20])
def test_batches_decode_as_lines_do(tmp_path, block: int) -> None:
    """Invalid UTF-8 (cut sequences, stray continuation bytes, one before a newline), blank
    lines, a range starting inside a line and one ending inside a line: the record batches
    hold what the line-at-a-time reference gives."""
    data = (b'{"a":"\xc3"}\n\n\xe2\x82\n{"b":"\x80\x80 \xf0\x9f\x98\x80"}\n'
            b'plain\r\n\xff\xfe\n' + "é€😀\n".encode() + b"no newline")
    path = tmp_path / "bad.ndjson"
    path.write_bytes(data)
    ino = f"{os.stat(path).st_dev}:{os.stat(path).st_ino}"
    end = data.rfind(b"\n") + 1
    for a in range(end):
        for b in (a + 1, end):
            r = Range(str(path), ino, a, b)
            got = [(p, x) for bt in read_batches(r, block=block)
                   for p, x in zip(bt.column(0).to_pylist(), bt.column(1).to_pylist(),
                                   strict=True)]
            assert got == list(read_range(r)), (a, b)
