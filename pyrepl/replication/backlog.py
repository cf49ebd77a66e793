"""Redis 7's shared replication buffer: the backlog and every replica's output are one list of
referenced blocks (shared by the master side and a replica's own sub-replicas).

Theory of operation (Redis 7.0.15 replication.c: ``feedReplicationBuffer``,
``incrementalTrimReplicationBacklog``, ``addReplyReplicationBacklog``, ``_writeToClient``):

* The stream is appended once, into a linked list of :class:`Block`. A new block holds at least
  16 KiB (``PROTO_REPLY_CHUNK_BYTES``) and at most ``max(repl-backlog-size / 16, 16 KiB)``,
  rounded up as Redis's allocator (jemalloc) rounds the allocation, whose slack Redis keeps as
  capacity: so blocks, trims and ``repl_backlog_histlen`` fall on the same bytes as Redis's.
* The backlog is the first reference: it always holds the head block. As Redis's
  ``repl_backlog``, it keeps two numbers: ``first_byte_offset`` (the absolute offset of the head
  block's first byte; ``master_repl_offset + 1`` while it is empty) and ``histlen`` (the bytes
  from there to the end). ``master_repl_offset`` itself, the stream's last byte, is kept once,
  by its owner (:class:`pyrepl.replication.manager.Replication`, Redis's
  ``server.master_repl_offset``), which moves it with every append; the backlog's
  :attr:`~Backlog.last_byte_offset` is ``first_byte_offset + histlen - 1``, equal to it. A PSYNC
  for ``offset`` can continue when ``first_byte_offset <= offset <= master_repl_offset + 1``.
* A replica is a :class:`Cursor`: the block holding its next unsent byte and its position in
  it. It references that one block (``refcount``); while it does, no block from there on can
  be freed, so **the backlog grows past ``repl-backlog-size`` while a replica still needs older
  bytes**, and a replica that drops while behind can still continue partially. A cursor made
  for "the next byte" (a replica whose snapshot just started) is *unattached* until the next
  append, as Redis sets ``ref_repl_buf_node`` at the next feed.
* :meth:`take` hands a replica's unsent bytes out as memoryviews of the blocks (no copy; the
  blocks are never resized, so the views stay valid) and moves the cursor; a cursor leaves a
  block only when it has sent all of it and a next block exists.
* Trimming (:meth:`trim`) frees head blocks while the backlog is longer than its size by more
  than the head block and nobody but the backlog references the head; at most ``max_blocks``
  per call, as Redis, so freeing a long list never stalls the loop.

Memory is reported as Redis does: ``mem`` (``repl_buffer_mem``) is every block's allocation
plus its list node; :meth:`usage` is ``getClientOutputBufferMemoryUsage`` of a replica.
"""

from __future__ import annotations

import sys
from bisect import bisect_right

PROTO_REPLY_CHUNK_BYTES = 16 * 1024
BLOCK_HEADER = 40          # sizeof(replBufBlock): refcount, id, repl_offset, size, used
LIST_NODE = 24             # sizeof(listNode)
NODE_OVERHEAD = BLOCK_HEADER + LIST_NODE
TRIM_BLOCKS_PER_CALL = 64  # REPL_BACKLOG_TRIM_BLOCKS_PER_CALL
INDEX_PER_BLOCKS = 64      # REPL_BACKLOG_INDEX_PER_BLOCKS (Redis's rax of block offsets)


def jemalloc_usable(n: int) -> int:
    """The usable size jemalloc 5 gives a request of ``n`` bytes (n > 4 KiB here): size classes
    are four per doubling, so ``n`` rounds up to a multiple of a quarter of its power of two."""
    if n <= 8:
        return 8
    lg = (n - 1).bit_length() - 1       # 2**lg < n <= 2**(lg+1)
    delta = 1 << max(lg - 2, 3)
    return (n + delta - 1) // delta * delta


class BacklogRangeError(ValueError):
    pass


class Block:
    """One replBufBlock: ``buf`` never changes size, ``used`` bytes of it are the stream from
    absolute offset ``repl_offset`` on."""

    __slots__ = ("buf", "size", "used", "repl_offset", "refcount", "id", "next", "indexed")

    def __init__(self, size: int, repl_offset: int, block_id: int) -> None:
        self.buf = bytearray(size)
        self.size = size
        self.used = 0
        self.repl_offset = repl_offset
        self.refcount = 0
        self.id = block_id
        self.next: Block | None = None
        self.indexed = False


def _py_block_extra() -> int:
    """A Block's objects (the Block, its bytearray's header, and the ints of its size, used,
    offset and id: past 256 each is an object of its own), each at the 16-byte size class
    pymalloc gives it, less the BLOCK_HEADER + LIST_NODE ``mem`` counts. (The ints were left
    out once, and a block's memoryview held for it: 256 B a block, 0.6 MB of a 50 MB buffer
    that maxmemory counted as data.)"""
    sizes = (sys.getsizeof(Block(0, 0, 0)), sys.getsizeof(bytearray())) + (
        sys.getsizeof(1 << 40),) * 4
    return max(0, sum((n + 15) // 16 * 16 for n in sizes) - NODE_OVERHEAD)


PY_BLOCK_EXTRA = _py_block_extra()


class Cursor:
    """A replica's place in the buffer (``ref_repl_buf_node`` / ``ref_block_pos``); ``sent``
    is the absolute offset of the last byte handed out. ``block`` is None while unattached
    (or once released)."""

    __slots__ = ("block", "pos", "sent", "view")

    def __init__(self, block: Block | None, pos: int, sent: int) -> None:
        self.block = block
        self.pos = pos
        self.sent = sent
        # a view of the block take() last sliced (one per replica, not one per block: a
        # block is taken from some 40 times at 16 writes a pass)
        self.view: memoryview | None = None


class Backlog:
    """The shared replication buffer of one stream (see the module docstring)."""

    # ``tail``, ``histlen`` and ``_unattached`` are read at their offsets by a write's feed in
    # C (pyrepl/replication/_feed.c)
    __slots__ = ("size", "head", "tail", "histlen", "first_byte_offset", "mem", "nblocks",
                 "_next_id", "_unattached", "_unindexed")

    def __init__(self, size: int, offset: int = 0) -> None:
        """A backlog of ``size`` bytes created when the stream is at ``offset`` (its
        ``master_repl_offset``): empty, the next byte appended is ``offset + 1``
        (createReplicationBacklog)."""
        if size <= 0:
            raise ValueError("backlog size must be positive")
        self.size = size
        self.head: Block | None = None
        self.tail: Block | None = None
        self.histlen = 0
        self.first_byte_offset = offset + 1   # repl_backlog->offset
        self.mem = 0                 # repl_buffer_mem
        self.nblocks = 0
        self._next_id = 0
        self._unattached: list[Cursor] = []
        self._unindexed = 0          # blocks since the last one Redis's rax indexed

    @property
    def last_byte_offset(self) -> int:
        """The offset of the last byte appended (== the stream's ``master_repl_offset``)."""
        return self.first_byte_offset + self.histlen - 1

    # -- appending (hot path) ---------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview) -> bool:
        """Append stream bytes; True when a block was added (when Redis checks the replicas'
        output limits)."""
        n = len(data)
        tail = self.tail
        if n and tail is not None and (end := tail.used + n) <= tail.size:
            tail.buf[end - n:end] = data               # the common case: one copy, no block
            tail.used = end
            self.histlen += n
            if self._unattached:
                self._attach(tail, end - n)
            return False
        return self._append_blocks(data, n) if n else False

    def room(self) -> int:
        """Bytes the tail block still takes before an append adds a block."""
        tail = self.tail
        return tail.size - tail.used if tail is not None else 0

    def cut(self, pos: int, n: int, ends: list[int]) -> int:
        """Where the next append of a run of ``n`` bytes of commands (``ends``: where each
        ends, increasing) should end, from ``pos``: at ``n`` when the rest fits in the tail
        block, else at the end of the command that needs a new block (so blocks, and the
        output limits checked at each new block, fall as feeding the commands one by one)."""
        fits = pos + self.room()
        return n if fits >= n else ends[bisect_right(ends, fits)]

    def _append_blocks(self, data: bytes | bytearray | memoryview, n: int) -> bool:
        view = memoryview(data)
        tail = self.tail
        start: Block | None = None
        start_pos = 0
        done = 0
        if tail is not None and tail.used < tail.size:
            start, start_pos = tail, tail.used
            k = tail.size - tail.used
            tail.buf[tail.used:] = view[:k]
            tail.used = tail.size
            self.histlen += k
            done = k
        while done < n:
            left = n - done
            want = min(max(left, PROTO_REPLY_CHUNK_BYTES),
                       max(self.size // 16, PROTO_REPLY_CHUNK_BYTES))
            usable = jemalloc_usable(want + BLOCK_HEADER)
            blk = Block(usable - BLOCK_HEADER, self.first_byte_offset + self.histlen,
                        self._next_id)
            self._next_id += 1
            k = min(left, blk.size)
            blk.buf[:k] = view[done:done + k]
            blk.used = k
            if self.tail is None:
                self.head = blk
                blk.refcount = 1                       # the backlog's reference
            else:
                self.tail.next = blk
            self.tail = blk
            self.nblocks += 1
            self.mem += usable + LIST_NODE
            self._unindexed += 1
            if self._unindexed >= INDEX_PER_BLOCKS:     # createReplicationBacklogIndex
                blk.indexed = True
                self._unindexed = 0
            if start is None:
                start, start_pos = blk, 0
            done += k
            self.histlen += k
            if self._unattached:
                self._attach(start, start_pos)
            self.trim()
        return True

    def _attach(self, block: Block, pos: int) -> None:
        for cur in self._unattached:
            cur.block = block
            cur.pos = pos
            block.refcount += 1
        self._unattached.clear()

    # -- the backlog ------------------------------------------------------------------------
    def can_serve(self, offset: int) -> bool:
        return self.first_byte_offset <= offset <= self.first_byte_offset + self.histlen

    def _block_at(self, offset: int) -> Block:
        """The first block whose end reaches ``offset`` (addReplyReplicationBacklog's search)."""
        blk = self.head
        while blk is not None:
            if blk.repl_offset + blk.used >= offset:
                return blk
            blk = blk.next
        raise BacklogRangeError(f"offset {offset} not in the buffer")

    def read_from(self, offset: int) -> list[bytes]:
        """A copy of the bytes from absolute ``offset`` to the end (logs, tests)."""
        if not self.can_serve(offset):
            raise BacklogRangeError(
                f"offset {offset} outside [{self.first_byte_offset}, "
                f"{self.last_byte_offset + 1}]")
        if offset == self.last_byte_offset + 1:
            return []
        blk: Block | None = self._block_at(offset)
        out = []
        pos = offset - blk.repl_offset  # type: ignore[union-attr]
        while blk is not None:
            if pos < blk.used:
                out.append(bytes(memoryview(blk.buf)[pos:blk.used]))
            pos = 0
            blk = blk.next
        return out

    def tail_bytes(self, n: int) -> bytes:
        """The newest ``n`` bytes at most (showLatestBacklog)."""
        n = min(n, self.histlen)
        return b"".join(self.read_from(self.last_byte_offset - n + 1)) if n else b""

    # -- cursors ----------------------------------------------------------------------------
    def cursor_at(self, offset: int) -> Cursor:
        """A replica that continues from ``offset`` (+CONTINUE): it references the backlog's
        block holding that byte, nothing is copied."""
        if not self.can_serve(offset):
            raise BacklogRangeError(
                f"offset {offset} outside [{self.first_byte_offset}, "
                f"{self.last_byte_offset + 1}]")
        if not self.histlen:
            return self.cursor_next()
        blk = self._block_at(offset)
        blk.refcount += 1
        return Cursor(blk, offset - blk.repl_offset, offset - 1)

    def cursor_next(self) -> Cursor:
        """A replica that wants the bytes appended from now on (its snapshot starts now)."""
        cur = Cursor(None, 0, self.last_byte_offset)
        self._unattached.append(cur)
        return cur

    def copy(self, cur: Cursor) -> Cursor:
        """Another replica at the same place (copyReplicaOutputBuffer)."""
        if cur.block is None:
            if cur in self._unattached:
                return self.cursor_next()
            return Cursor(None, 0, cur.sent)
        cur.block.refcount += 1
        return Cursor(cur.block, cur.pos, cur.sent)

    def release(self, cur: Cursor) -> None:
        """The replica is gone (freeReplicaReferencedReplBuffer)."""
        blk = cur.block
        if blk is not None:
            blk.refcount -= 1
            cur.block = None
            cur.view = None
            self.trim()
        elif cur in self._unattached:
            self._unattached.remove(cur)

    def pending(self, cur: Cursor) -> int:
        """Bytes appended that the replica was not handed yet."""
        return self.last_byte_offset - cur.sent

    def usage(self, cur: Cursor) -> int:
        """getClientOutputBufferMemoryUsage of a replica: from its block to the end of the
        buffer's capacity, plus the node overheads."""
        blk = cur.block
        tail = self.tail
        if blk is None or tail is None:
            return 0
        return (tail.repl_offset + tail.size - blk.repl_offset
                + NODE_OVERHEAD * (tail.id - blk.id + 1))

    def blocks(self, cur: Cursor) -> int:
        """The blocks from the replica's to the last (CLIENT LIST ``oll`` of a replica)."""
        blk = cur.block
        tail = self.tail
        return tail.id - blk.id + 1 if blk is not None and tail is not None else 0

    def take(self, cur: Cursor, limit: int) -> list[memoryview]:
        """Up to ``limit`` unsent bytes for the replica, as views of the blocks; the cursor
        moves past them (and to the next block once a block is wholly sent)."""
        blk = cur.block
        out: list[memoryview] = []
        if blk is None:
            return out
        left = limit
        pos = cur.pos
        while True:
            used = blk.used
            if pos < used:
                k = used - pos if used - pos <= left else left
                view = cur.view
                if view is None or view.obj is not blk.buf:
                    view = cur.view = memoryview(blk.buf)
                out.append(view[pos:pos + k])
                pos += k
                cur.sent += k
                left -= k
            nxt = blk.next
            if pos < used or nxt is None:
                break
            blk.refcount -= 1
            nxt.refcount += 1
            blk = nxt
            pos = 0
            cur.block = blk
            self.trim()
            if not left:
                break
        cur.pos = pos
        return out

    # -- trimming and sizing ------------------------------------------------------------------
    def trim(self, max_blocks: int = TRIM_BLOCKS_PER_CALL) -> None:
        """incrementalTrimReplicationBacklog."""
        trimmed = 0
        size = self.size
        while self.histlen > size and trimmed < max_blocks:
            first = self.head
            if first is None or first.next is None or first.refcount != 1:
                break
            if self.histlen - first.size <= size:
                break
            first.refcount = 0
            trimmed += 1
            self.histlen -= first.size
            self.first_byte_offset += first.size
            nxt = first.next
            nxt.refcount += 1
            self.head = nxt
            first.next = None
            self.nblocks -= 1
            self.mem -= first.size + BLOCK_HEADER + LIST_NODE

    def resize(self, new_size: int) -> None:
        """repl-backlog-size changed: trim to the new size (growing needs nothing)."""
        if new_size <= 0:
            raise ValueError("backlog size must be positive")
        self.size = new_size
        self.trim()

    def memory(self, replicas: bool) -> tuple[int, int]:
        """(the backlog's memory, the replicas'), as Redis 7.0's getMemoryOverheadData: the
        buffer is the backlog's up to its size, and what exceeds it while ``replicas`` are
        attached is theirs; the backlog's adds the index of its blocks."""
        total = self.mem
        if replicas and total > self.size:
            return self.size + self.index_memory(), total - self.size
        return total + self.index_memory(), 0

    def python_overhead(self) -> int:
        """What pyrepl's blocks hold beyond what ``mem`` counts as Redis does (a block's
        object, its memoryview and bytearray headers against Redis's 64 B of header and
        list node): part of the buffer's real memory, for maxmemory's not-counted share."""
        return self.nblocks * PY_BLOCK_EXTRA

    def index_memory(self) -> int:
        """What INFO adds for Redis's rax of block offsets (object.c: ``numnodes *
        sizeof(raxNode) + raxSize * sizeof(void*)``), one key per 64th block."""
        keys = []
        blk = self.head
        while blk is not None:
            if blk.indexed:
                keys.append(blk.repl_offset.to_bytes(8, "big"))
            blk = blk.next
        return _rax_nodes(keys, 0) * 4 + len(keys) * 8


def _rax_nodes(keys: list[bytes], depth: int) -> int:
    """The nodes of a rax holding these distinct 8-byte keys (all equal up to ``depth``): a
    compressed node for a run shared by all, a branching node where they differ, a leaf at
    the end; an empty rax is its head node."""
    if depth == 8 or not keys:
        return 1
    first = keys[0]
    run = 8 - depth
    for k in keys[1:]:
        i = depth
        while i < depth + run and k[i] == first[i]:
            i += 1
        run = i - depth
        if not run:
            break
    if run:
        return 1 + _rax_nodes(keys, depth + run)
    groups: dict[int, list[bytes]] = {}
    for k in keys:
        groups.setdefault(k[depth], []).append(k)
    return 1 + sum(_rax_nodes(g, depth + 1) for g in groups.values())
