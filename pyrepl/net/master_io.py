"""The master side's I/O (master side): the diskless snapshot child writing straight to the
replica sockets, a disk snapshot file streamed to a replica, transport buffer sizes.

Theory of operation
-------------------
:class:`~pyrepl.replication.master.MasterSide` decides; this adapter does what needs the
operating system. ``NetHost`` creates one per server (``core.host.master_io``).

Diskless (``start_socket_snapshot``): the parent first empties each replica's user-space output
(``prepare_handover``: the client's pending replies go to its transport, and the transport must
have nothing buffered) so the socket is in a clean state, dups each socket fd, makes a result pipe
and forks through ``NetHost.fork_child``. The child writes to every socket, in order, the
replica's preamble (``+FULLRESYNC <replid> <offset>\\r\\n$EOF:<mark>\\r\\n``) first, at once (so
``+FULLRESYNC`` leaves at fork time, as Redis's does, even when the first RDB chunk takes long),
then the RDB chunks from ``encode_rdb`` and the mark: the same chunk to all replicas, each
socket written until it takes no more (``EAGAIN``), then ``poll`` for writability. The sockets
stay non-blocking: the file status flags are shared with the parent's transports, so the child
never changes them. A replica that fails (``EPIPE``, reset) or makes no progress for
``repl-timeout`` is dropped. The child writes one line per replica (``<client id> <ok> <bytes>
<error>``) to the result pipe: as soon as that replica got its mark, and for the others at the
end; the parent reads them when the child has exited (``finish_socket_snapshot``), then logs and
closes the replicas that failed. An rdb-channel replica closes its connection once it has read
the mark, possibly before the child exits (and even before the child wrote that replica's line:
it writes it right after the mark): ``socket_target_done`` reads the lines available so far,
waiting up to ``RESULT_WAIT_S`` for that one, to tell that normal end from a replica lost
mid-transfer. The parent never touches the
snapshot bytes. While the child writes, the parent writes nothing to those sockets (a classic
link holds the stream; an rdb channel's stream goes to its other, main, connection).
To drop a replica mid-transfer the parent ``shutdown``\\s its dup (``drop_socket_target``): the
child's next write fails and the TCP connection really ends (closing the parent's fd alone would
not end it while the child still holds a copy).

TLS replicas: a child cannot write to a TLS connection (the session lives in the parent), so
for those the child writes to a pipe instead of the socket, and the parent relays what comes out
of the pipe to the replica's TLS transport (as Redis's ``rdbPipeReadHandler`` does for every
replica). The child's side is the same code (a pipe is written, polled and times out like a
socket); the relay stops reading while the transport holds more than ``RELAY_HIGH`` bytes, so a
slow replica slows the child through the full pipe. When the child has exited,
``finish_socket_snapshot`` hands what is still in the pipe to the transport before the replica
goes online, so the stream follows the snapshot in order.

Disk (``send_bulk``): the file is opened at once (a later BGSAVE renaming a new file over it does
not change what is sent), then ``$<len>\\r\\n`` and the file go out with ``os.sendfile`` straight
on the socket fd, only while the transport has nothing buffered (so ordering with the transport
is kept), a few MB per event-loop turn; when the socket is full the pump retries with a short
backoff. Over TLS the file is read in chunks and written to the transport while it holds less
than ``RELAY_HIGH`` bytes. The end is reported with ``MasterSide.bulk_sent`` and the output it produces (the held
stream) is flushed at once.

Copies kept for resumed syncs (``keep``, pyrepl.replication.master.resume): a disk snapshot's
file is kept opened (``keep_file``). A diskless child keeps the last ``tail`` payload bytes it
wrote in memory (whole chunks, at least ``tail`` bytes); when a target's write fails (a cut
replica) it writes them to an unlinked file in ``dir``, after an 8-byte header naming the first
payload byte they are (the copy's base), and from then on every chunk it makes, even when no
socket is left; a child no target failed in writes its tail at the end (a replica cut after
the child wrote its last byte may still resume). A replica resumes from byte ``n`` when ``base
<= n``: what it had not parsed when the link was cut was at most in the sockets' buffers, which
``tail`` (``repl-full-sync-resume-tail``, 32 MB) covers. ``tail`` 0 copies the whole payload
from the start. The copy is never paced; its result line's id is ``KEPT_CID`` and its byte
count the payload's end.
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import itertools
import mmap
import os
import select
import socket
import struct
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pyrepl.net.tls import is_tls
from pyrepl.replication.throttle import Pacer

if TYPE_CHECKING:
    from pyrepl.core.client import Client
    from pyrepl.net.server import Server
    from pyrepl.replication.ports import ReplClient

SENDFILE_CHUNK = 1 << 20
PUMP_BUDGET = 8 << 20  # bytes sent per event-loop turn before yielding
BACKOFF_MIN = 0.001
BACKOFF_MAX = 0.05
RELAY_HIGH = 4 << 20    # a TLS replica's transport buffer above which the relay stops reading
RELAY_CHUNK = 256 << 10
PIPE_SIZE = 1 << 20     # F_SETPIPE_SZ for the relay pipes (best effort)
# How long the parent waits for the child's word on a replica that closed its rdb channel
# before the child reported it (see _SocketJob.wait_result): microseconds when the replica had
# read the whole RDB; the whole wait, once, when it left early (a failed transfer anyway)
RESULT_WAIT_S = 0.1
_F_SETPIPE_SZ = 1031
_RATE = struct.Struct("=q")   # the shared repl-sync-max-bandwidth cell
KEPT_CID = 0   # the child's result line for a kept copy (client ids start at 1)
COPY_HEAD = struct.Struct("<q")   # a child's copy starts with its base (its first payload byte)


class _Relay:
    """The parent's end of a TLS replica's snapshot pipe: what the child writes into it goes
    to the replica's transport."""

    __slots__ = ("client", "fd", "loop", "handle", "open")

    def __init__(self, client: Client, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.fd = fd
        self.loop = loop
        self.handle: asyncio.TimerHandle | None = None
        self.open = True
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        t = self.client.transport
        if t is None or t.is_closing():
            self.stop()
            return
        try:
            data = os.read(self.fd, RELAY_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            self.stop()
            return
        if not data:
            self.stop()     # the child is done with this replica
            return
        t.write(data)
        if t.get_write_buffer_size() > RELAY_HIGH:
            self.loop.remove_reader(self.fd)
            self.handle = self.loop.call_later(BACKOFF_MAX / 10, self._wait_drained)

    def _wait_drained(self) -> None:
        self.handle = None
        t = self.client.transport
        if not self.open:
            return
        if t is None or t.is_closing():
            self.stop()
        elif t.get_write_buffer_size() > RELAY_HIGH // 2:
            self.handle = self.loop.call_later(BACKOFF_MAX / 10, self._wait_drained)
        else:
            self.loop.add_reader(self.fd, self._readable)

    def drain(self) -> None:
        """The child has exited: hand the rest of the pipe to the transport, then close."""
        t = self.client.transport
        while self.open and t is not None and not t.is_closing():
            try:
                data = os.read(self.fd, RELAY_CHUNK)
            except OSError:
                break
            if not data:
                break
            t.write(data)
        self.stop()

    def stop(self) -> None:
        if not self.open:
            return
        self.open = False
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        self.loop.remove_reader(self.fd)
        os.close(self.fd)


class _SocketJob:
    __slots__ = ("pid", "result_fd", "dups", "relays", "partial", "results")

    def __init__(self, pid: int, result_fd: int, dups: dict[int, socket.socket],
                 relays: dict[int, _Relay] | None = None) -> None:
        self.pid = pid
        self.result_fd = result_fd
        self.dups = dups        # a copy of each target's socket, to end it (drop_socket_target)
        self.relays = relays or {}   # TLS targets: the pipe the child writes, not the socket
        self.partial = b""  # an incomplete result line read so far
        self.results: dict[int, tuple[bool, int, str]] = {}

    def read_results(self) -> bool:
        """Read what the child reported so far (non-blocking) into ``results``; True when
        the child has closed the pipe (it reports nothing more)."""
        chunks = [self.partial]
        eof = False
        try:
            while True:
                try:
                    data = os.read(self.result_fd, 65536)
                except BlockingIOError:
                    break
                if not data:
                    eof = True
                    break
                chunks.append(data)
        except OSError:
            eof = True
        buf = b"".join(chunks)
        end = buf.rfind(b"\n") + 1
        self.partial = buf[end:]
        for line in buf[:end].decode("utf-8", "replace").splitlines():
            parts = line.split(" ", 3)
            if len(parts) == 4 and parts[0].isdigit() and parts[2].isdigit():
                self.results[int(parts[0])] = (parts[1] == "1", int(parts[2]),
                                               "" if parts[3] == "-" else parts[3])
        return eof

    def wait_result(self, cid: int, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the child's line about client ``cid`` (or the
        end of its reports). The child writes that line right after the target's last
        bytes, so a replica that closes its rdb channel as soon as it read the mark (as a
        Redis 8 replica does) can be seen closing before the line is in the pipe."""
        deadline = time.monotonic() + timeout
        poller = select.poll()
        poller.register(self.result_fd, select.POLLIN)
        while cid not in self.results:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(int(left * 1000) + 1):
                return
            if self.read_results():
                return


class _Kept:
    """A snapshot's payload kept for resumed syncs: its fd, its end once whole, the first
    payload byte it holds and where that is in the file."""

    __slots__ = ("fd", "size", "pid", "base", "skip", "dropped")

    def __init__(self, fd: int, size: int, pid: int, base: int = 0, skip: int = 0) -> None:
        self.fd = fd
        self.size = size      # the payload's end; -1 while a child writes it
        self.pid = pid        # that child (0: a file kept whole)
        self.base = base      # the first payload byte the file holds (-1: not known yet)
        self.skip = skip      # the file bytes before it (a child's copy: its header)
        self.dropped = False  # freed (a bulk following it as it grows fails)

    def at(self, offset: int) -> int:
        """The file position of payload byte ``offset`` (the payload's end: ``at(size)``)."""
        return self.skip + offset - self.base


class _Bulk:
    __slots__ = ("client", "fd", "size", "offset", "pre", "sent", "done", "backoff", "handle",
                 "pacer", "kept")

    def __init__(self, client: ReplClient, fd: int, size: int, offset: int = 0,
                 pre: bytes | None = None, kept: _Kept | None = None) -> None:
        self.kept = kept      # a copy a child still writes: sent as it grows
        self.pacer = Pacer(time.monotonic())
        self.client = client
        self.fd = fd
        self.size = size
        self.offset = offset
        self.pre = b"$%d\r\n" % size if pre is None else pre
        self.sent = 0
        self.done = False
        self.backoff = BACKOFF_MIN
        self.handle: Any = None


class MasterIO:
    def __init__(self, server: Server) -> None:
        self.server = server
        self._jobs: dict[int, _SocketJob] = {}
        self._bulks: dict[int, _Bulk] = {}
        self._kept: dict[str, _Kept] = {}    # payloads kept for resumed syncs, by id
        # repl-sync-max-bandwidth, in a page shared with the snapshot children (a fork keeps
        # the mapping shared), so CONFIG SET paces a transfer under way in a child too
        self._rate = mmap.mmap(-1, _RATE.size)

    # -- pace ------------------------------------------------------------------------------------
    def set_sync_bandwidth(self, bps: int) -> None:
        """repl-sync-max-bandwidth: every snapshot transfer, now and later, at most ``bps``
        bytes/s per replica (0: unpaced)."""
        _RATE.pack_into(self._rate, 0, max(0, bps))

    def sync_bandwidth(self) -> int:
        return int(_RATE.unpack_from(self._rate, 0)[0])

    # -- transports -------------------------------------------------------------------------
    def buffered(self, c: ReplClient) -> int:
        """Bytes the client's transport still has to write to the socket."""
        t = c.transport
        if t is None:
            return 0
        return t.get_write_buffer_size()

    def stream_started(self, c: ReplClient) -> None:
        """Flow control at every byte (a high-water mark of 0): the transport pauses the
        link as soon as the socket leaves anything unwritten and resumes it once it has
        written all (write_client then hands over what waited in the shared buffer). At the
        default 64 KiB mark a stalled replica's transport took hundreds of one-command views
        (~1 KB each, their blocks kept alive), memory maxmemory counted as the dataset's."""
        t = c.transport
        if t is not None and not t.is_closing():
            t.set_write_buffer_limits(high=0)   # type: ignore[attr-defined]

    def prepare_handover(self, c: ReplClient) -> bool:
        """Push the client's pending output to its transport; True when nothing is left
        buffered in this process, so another process may write to the socket directly."""
        t = c.transport
        if t is None or c.closed or t.is_closing():
            return False
        if c.out:
            data = c.data_to_send()
            if data:
                t.write(data)
        return t.get_write_buffer_size() == 0

    @staticmethod
    def _sock_fd(c: ReplClient) -> int:
        sock = c.transport.get_extra_info("socket")
        if sock is None:
            raise OSError("no socket for this connection")
        return sock.fileno()

    # -- diskless: the child writes to the sockets --------------------------------------------
    def start_socket_snapshot(self, targets: list[tuple[ReplClient, bytes]],
                              payload: Callable[[], Iterable[bytes]], trailer: bytes,
                              timeout_ms: int, keep: tuple[str, str, int] | None = None) -> int:
        """Fork a child that writes each target's preamble, the payload and the trailer to the
        target's socket (and to a kept copy: ``keep``, see the port). Returns the child's pid
        (raises OSError when it cannot start)."""
        kept_fd = self._open_copy(keep[1], keep[0]) if keep is not None else -1
        tail = keep[2] if keep is not None else 0
        try:
            pid = self._start_socket_snapshot(targets, payload, trailer, timeout_ms, kept_fd,
                                              tail)
        except OSError:
            if kept_fd >= 0:
                os.close(kept_fd)
            raise
        if keep is not None:
            self._kept[keep[0]] = _Kept(kept_fd, -1, pid, -1, COPY_HEAD.size)
        return pid

    @staticmethod
    def _open_copy(directory: str, rid: str) -> int:
        """An unlinked file in ``directory`` for a kept copy (gone with its fd)."""
        path = os.path.join(directory, f"temp-resume-{rid}.rdb")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        os.unlink(path)
        return fd

    def _start_socket_snapshot(self, targets: list[tuple[ReplClient, bytes]],
                               payload: Callable[[], Iterable[bytes]], trailer: bytes,
                               timeout_ms: int, kept_fd: int, tail: int) -> int:
        dups: dict[int, socket.socket] = {}
        pipes: dict[int, tuple[int, int]] = {}     # TLS targets: (read end, write end)
        opened: list[int] = []
        try:
            for c, _ in targets:
                dups[c.id] = socket.socket(fileno=os.dup(self._sock_fd(c)))
                if is_tls(c):
                    pipes[c.id] = _relay_pipe()
                    opened.extend(pipes[c.id])
            r, w = os.pipe()
            opened += [r, w]
        except OSError:
            _close_all(dups, opened)
            raise
        plan = [(c.id, pipes[c.id][1] if c.id in pipes else dups[c.id].fileno(), pre)
                for c, pre in targets]
        result_r, result_w = r, w

        def job() -> int:
            os.close(result_r)
            for pr, _ in pipes.values():
                os.close(pr)    # so a relay the parent stops makes the child's writes fail
            return stream_to_sockets(plan, payload, trailer, timeout_ms, result_w,
                                     self.sync_bandwidth,
                                     (kept_fd, tail) if kept_fd >= 0 else None)

        try:
            pid = self.server.host.fork_child(job, "rdb-to-replicas")
        except OSError:
            _close_all(dups, opened)
            raise
        os.close(w)
        os.set_blocking(r, False)
        relays = {}
        loop = self.server.loop
        for c, _ in targets:
            if c.id in pipes:
                pr, pw = pipes[c.id]
                os.close(pw)
                relays[c.id] = _Relay(c, pr, loop)   # type: ignore[arg-type]
        self._jobs[pid] = _SocketJob(pid, r, dups, relays)
        return pid

    def drop_socket_target(self, c: ReplClient) -> None:
        """End a replica's connection that a snapshot child is writing to."""
        for job in self._jobs.values():
            relay = job.relays.pop(c.id, None)
            if relay is not None:
                relay.stop()    # the child's next write to the pipe fails
            s = job.dups.pop(c.id, None)
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def finish_socket_snapshot(self, pid: int) -> dict[int, tuple[bool, int, str]]:
        """The child exited: its per-replica results, {client id: (ok, bytes, error)}."""
        job = self._jobs.pop(pid, None)
        if job is None:
            return {}
        try:
            job.read_results()
            for relay in job.relays.values():
                relay.drain()
        finally:
            os.close(job.result_fd)
            for s in job.dups.values():
                s.close()
        kept = job.results.pop(KEPT_CID, None)
        for rid, k in list(self._kept.items()):
            if k.pid == pid:
                if kept is not None and kept[0] and self._read_base(k):
                    k.size, k.pid = kept[1], 0
                else:
                    self.drop_kept(rid)
        return job.results

    @staticmethod
    def _read_base(k: _Kept) -> bool:
        """A child's copy: its base, once the child has written its header."""
        if k.base < 0:
            try:
                head = os.pread(k.fd, COPY_HEAD.size, 0)
            except OSError:
                return False
            if len(head) == COPY_HEAD.size:
                k.base = COPY_HEAD.unpack(head)[0]
        return k.base >= 0

    # -- copies kept for resumed syncs ------------------------------------------------------------
    def keep_file(self, rid: str, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
        except OSError:
            os.close(fd)
            raise
        self.drop_kept(rid)
        self._kept[rid] = _Kept(fd, size, 0)

    def kept_size(self, rid: str) -> int:
        k = self._kept.get(rid)
        return k.size if k is not None else -1

    def kept_base(self, rid: str) -> int:
        k = self._kept.get(rid)
        if k is None or not self._read_base(k):
            return -1
        return k.base

    def kept_ids(self) -> list[str]:
        return list(self._kept)

    def drop_kept(self, rid: str) -> None:
        k = self._kept.pop(rid, None)
        if k is not None:
            k.dropped = True
            try:
                os.close(k.fd)
            except OSError:
                pass

    def send_kept(self, c: ReplClient, rid: str, offset: int, header: bytes) -> None:
        k = self._kept.get(rid)
        if k is None or not self._read_base(k) or offset < k.base:
            raise OSError(f"no copy kept as {rid} from byte {offset}")
        if k.size >= 0:     # whole
            end = k.at(k.size)
            self._start_bulk(_Bulk(c, os.dup(k.fd), end, min(k.at(offset), end), header))
        else:               # the child still writes it: sent as it grows
            self._start_bulk(_Bulk(c, os.dup(k.fd), 0, k.at(offset), header, k))

    def socket_target_done(self, pid: int, cid: int) -> bool:
        """True when the child of ``pid`` reported the whole payload and trailer written to
        client ``cid``'s socket (it reports each replica as soon as it got its mark)."""
        job = self._jobs.get(pid)
        if job is None:
            return False
        if cid not in job.results and not job.read_results() and cid not in job.results:
            job.wait_result(cid, RESULT_WAIT_S)
        r = job.results.get(cid)
        return r is not None and r[0]

    def reap_child(self, pid: int) -> None:
        """checkChildrenDone for one child: report its exit now if it has exited."""
        srv = self.server
        if pid not in srv.children:
            return
        try:
            rpid, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            srv.children.pop(pid, None)
            srv.core.child_exited(pid, 1)
            return
        if rpid == 0:
            return
        srv.children.pop(pid, None)
        srv.core.child_exited(pid, os.waitstatus_to_exitcode(status))

    # -- disk: stream the file -------------------------------------------------------------------
    def send_bulk(self, c: ReplClient, path: str) -> int:
        """Start sending ``$<len>\\r\\n`` and the file at ``path``; returns the file size."""
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
        except OSError:
            os.close(fd)
            raise
        self._start_bulk(_Bulk(c, fd, size))
        return size

    def _start_bulk(self, b: _Bulk) -> None:
        loop = self.server.loop
        if loop is None:
            os.close(b.fd)
            raise OSError("no event loop")
        self._bulks[b.client.id] = b
        b.handle = loop.call_soon(self._pump, b)

    def cancel_bulk(self, c: ReplClient) -> None:
        b = self._bulks.pop(c.id, None)
        if b is not None:
            self._close_bulk(b)

    def _close_bulk(self, b: _Bulk) -> None:
        b.done = True
        if b.handle is not None:
            b.handle.cancel()
            b.handle = None
        try:
            os.close(b.fd)
        except OSError:
            pass

    def _pump(self, b: _Bulk) -> None:
        b.handle = None
        if b.done:
            return
        c = b.client
        t = c.transport
        if t is None or c.closed or t.is_closing():
            self._finish(b, False, "connection closed")
            return
        if c.out and b.sent == 0:
            data = c.data_to_send()  # replies produced before the bulk starts go first
            if data:
                t.write(data)
        k = b.kept
        if k is not None:   # a copy a child still writes: up to what it wrote so far
            if k.dropped:
                self._finish(b, False, "the snapshot's copy failed")
                return
            if k.size >= 0:
                b.size, b.kept = k.at(k.size), None   # whole now
            else:
                try:
                    b.size = os.fstat(b.fd).st_size
                except OSError as e:
                    self._finish(b, False, e.strerror or str(e))
                    return
        bps = self.sync_bandwidth()
        now = time.monotonic()
        budget = min(PUMP_BUDGET, b.pacer.allowance(bps, now))
        if budget < min(b.pacer.quantum(bps), len(b.pre) + b.size - b.offset):
            # repl-sync-max-bandwidth: back when a quantum is allowed
            loop = self.server.loop
            if loop is not None:
                b.handle = loop.call_later(b.pacer.wait(bps, now), self._pump, b)
            return
        try:
            pump = self._pump_tls if is_tls(c) else self._pump_socket
            progress = pump(b, t, budget)
            b.pacer.took(progress)
        except OSError as e:
            self._finish(b, False, e.strerror or str(e))
            return
        if not b.pre and b.offset >= b.size and b.kept is None:
            self._finish(b, True, "")
        else:
            self._again(b, progress > 0)

    def _pump_socket(self, b: _Bulk, t: asyncio.Transport, budget: int) -> int:
        """sendfile straight on the socket while the transport holds nothing, at most
        ``budget`` bytes; bytes sent."""
        progress = 0
        if t.get_write_buffer_size():
            return 0
        fd = self._sock_fd(b.client)
        try:
            while progress < budget:
                if b.pre:
                    n = os.write(fd, b.pre[:budget - progress])
                    b.pre = b.pre[n:]
                elif b.offset < b.size:
                    n = os.sendfile(fd, b.fd, b.offset,
                                    min(b.size - b.offset, SENDFILE_CHUNK, budget - progress))
                    if n == 0:
                        raise OSError("premature EOF")
                    b.offset += n
                else:
                    break
                b.sent += n
                progress += n
        except BlockingIOError:
            pass
        return progress

    def _pump_tls(self, b: _Bulk, t: asyncio.Transport, budget: int) -> int:
        """The file through the TLS transport while it holds less than RELAY_HIGH bytes, at
        most ``budget`` bytes."""
        progress = 0
        while progress < budget and t.get_write_buffer_size() < RELAY_HIGH:
            if b.pre:
                data, b.pre = b.pre[:budget - progress], b.pre[budget - progress:]
            elif b.offset < b.size:
                data = os.pread(b.fd, min(b.size - b.offset, SENDFILE_CHUNK, budget - progress),
                                b.offset)
                if not data:
                    raise OSError("premature EOF")
                b.offset += len(data)
            else:
                break
            t.write(data)
            b.sent += len(data)
            progress += len(data)
        return progress

    def _again(self, b: _Bulk, progressed: bool) -> None:
        loop = self.server.loop
        if loop is None:
            return
        if progressed:
            b.backoff = BACKOFF_MIN
            b.handle = loop.call_soon(self._pump, b)
        else:
            b.handle = loop.call_later(b.backoff, self._pump, b)
            b.backoff = min(BACKOFF_MAX, b.backoff * 2)

    def _finish(self, b: _Bulk, ok: bool, error: str) -> None:
        self._bulks.pop(b.client.id, None)
        self._close_bulk(b)
        srv = self.server
        core = srv.core
        core.now_ms = int(time.time() * 1000)
        repl = core.replication
        if repl is not None:
            repl.master.bulk_sent(b.client, ok, b.sent, error)
        if core.pending_flush:
            srv.flush_pending()


def _relay_pipe() -> tuple[int, int]:
    """A non-blocking pipe (read end, write end) for a TLS target, as large as allowed."""
    r, w = os.pipe()
    for fd in (r, w):
        os.set_blocking(fd, False)
    try:
        fcntl.fcntl(w, _F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        pass
    return r, w


def _close_all(dups: dict[int, socket.socket], fds: list[int]) -> None:
    for s in dups.values():
        s.close()
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class _Target:
    __slots__ = ("cid", "fd", "pre", "view", "sent", "error", "last", "pacer")

    def __init__(self, cid: int, fd: int, pre: bytes, now: float) -> None:
        self.cid = cid
        self.fd = fd
        self.pre = pre
        self.view: memoryview = memoryview(b"")
        self.sent = 0
        self.error = ""
        self.last = now
        self.pacer = Pacer(now)


def _unpaced() -> int:
    return 0


class _Copy:
    """A diskless child's copy of the payload for resumed syncs (see the module docstring):
    the last ``tail`` bytes in memory until ``start``, then everything into the file."""

    __slots__ = ("fd", "tail", "ring", "held", "pos", "started", "error")

    def __init__(self, fd: int, tail: int) -> None:
        self.fd = fd
        self.tail = tail
        self.ring: collections.deque[bytes] = collections.deque()
        self.held = 0          # bytes in the ring
        self.pos = 0           # payload bytes made so far
        self.started = False
        self.error = ""
        if not tail:
            self.start()       # (0: the whole payload)

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.pos += len(chunk)
        if self.started:
            self._write(chunk)
            return
        ring = self.ring
        ring.append(chunk)
        self.held += len(chunk)
        while self.held - len(ring[0]) >= self.tail:
            self.held -= len(ring.popleft())

    def start(self) -> None:
        """From here on the copy is written: its header, then what the ring holds."""
        if self.started:
            return
        self.started = True
        self._write(COPY_HEAD.pack(self.pos - self.held))
        for chunk in self.ring:
            self._write(chunk)
        self.ring.clear()
        self.held = 0

    def _write(self, data: bytes) -> None:
        if self.error:
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view):]
        except OSError as e:
            self.error = (e.strerror or str(e) or "write error").replace("\n", " ")


def stream_to_sockets(plan: list[tuple[int, int, bytes]], payload: Callable[[], Iterable[bytes]],
                      trailer: bytes, timeout_ms: int, result_fd: int,
                      rate: Callable[[], int] = _unpaced,
                      kept: tuple[int, int] | None = None) -> int:
    """The diskless snapshot child: write each preamble, the payload and the trailer to every
    socket of ``plan`` ((client id, fd, preamble)), each at most ``rate()`` bytes/s (0: as fast
    as it takes them); report per target to ``result_fd``. ``kept`` (fd, tail): a copy of the
    payload for resumed syncs (``_Copy``), reported as ``KEPT_CID`` with the payload's end.
    Returns the exit code: 0 when the whole payload reached at least one replica (or the
    copy)."""
    now = time.monotonic()
    targets = [_Target(cid, fd, pre, now) for cid, fd, pre in plan]
    timeout = max(0.001, timeout_ms / 1000.0)
    code = 0
    reported: set[int] = set()

    def report(t: _Target) -> None:
        """One result line for ``t`` (the parent may read it before the child exits)."""
        ok = not t.error
        data = memoryview(f"{t.cid} {1 if ok else 0} {t.sent} {t.error or '-'}\n".encode())
        reported.add(t.cid)
        try:
            while data:
                data = data[os.write(result_fd, data):]
        except OSError:
            pass

    copy = _Copy(*kept) if kept is not None else None

    def step(chunk: bytes, done: Callable[[_Target], None] | None = None) -> bool:
        """``chunk`` to the copy and every live target; False when neither is left."""
        if copy is not None:
            copy.add(chunk)
        live = _write_chunk(targets, chunk, timeout, rate, done)
        if copy is None:
            return live
        if not copy.started and any(t.error for t in targets):
            copy.start()     # a target failed: it may resume from what the ring holds
        return live or not copy.error

    try:
        # the preambles at once (b"": just the preamble), then the payload and the mark
        for chunk in itertools.chain((b"",), payload()):
            if not step(chunk):
                break
        else:
            step(trailer, report)
            if copy is not None:
                copy.start()     # (no target failed: the tail, for one cut at the very end)
    except Exception as e:  # noqa: BLE001 - the RDB could not be produced: every target fails
        code = 1
        for t in targets:
            if not t.error and t.cid not in reported:
                t.error = f"snapshot error: {e!r}".replace("\n", " ")
        if copy is not None:
            copy.error = "snapshot error"
    ok_any = False
    for t in targets:
        ok_any = ok_any or not t.error
        if t.cid not in reported:
            report(t)
    if copy is not None:
        ok_any = ok_any or not copy.error
        kt = _Target(KEPT_CID, copy.fd, b"", 0.0)
        kt.sent, kt.error = copy.pos, copy.error or ("" if copy.started else "not kept")
        report(kt)
    try:
        os.close(result_fd)
    except OSError:
        pass
    return code if ok_any else 1


def _write_chunk(targets: list[_Target], chunk: bytes, timeout: float,
                 rate: Callable[[], int] = _unpaced,
                 done: Callable[[_Target], None] | None = None) -> bool:
    """Write ``chunk`` to every live target, each at most ``rate()`` bytes/s; False when none
    is left. ``done`` is called for each target as soon as it has taken the whole chunk."""
    pending = []
    for t in targets:
        if t.error:
            continue
        if t.pre:
            t.view = memoryview(t.pre + chunk)
            t.pre = b""
        else:
            t.view = memoryview(chunk)
        if t.view:
            pending.append(t)
    while pending:
        still = []
        paced = []      # out of allowance: they wait for time, not for the socket
        now = time.monotonic()
        bps = rate()
        for t in pending:
            view = t.view
            tb = 0 if t.cid == KEPT_CID else bps    # (a kept copy is never paced)
            allow = t.pacer.allowance(tb, now)
            if allow < len(view):
                if allow < t.pacer.quantum(tb):
                    t.last = now    # (waiting for the pace is not a stalled replica)
                    paced.append(t)
                    continue
                view = view[:allow]
            try:
                n = os.write(t.fd, view)
            except BlockingIOError:
                n = 0
            except OSError as e:
                t.error = (e.strerror or str(e) or "write error").replace("\n", " ")
                continue
            if n:
                t.pacer.took(n)
                t.sent += n
                t.view = t.view[n:]
                t.last = now
            if t.view:
                still.append(t)
            elif done is not None:
                done(t)
        pending = []
        for t in still:
            if now - t.last > timeout:
                t.error = "timeout"  # the parent logs it and closes the connection
            else:
                pending.append(t)
        if not pending and not paced:
            break
        poller = select.poll()
        waits = [t.pacer.wait(bps, now) for t in paced]
        for t in pending:
            poller.register(t.fd, select.POLLOUT)
            waits.append(timeout - (now - t.last))
        poller.poll(max(1, min(1000, int(min(waits) * 1000) + 1)))
        pending += paced
    return any(not t.error for t in targets)
