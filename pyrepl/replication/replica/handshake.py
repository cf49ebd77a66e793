"""The handshake with the master, up to the PSYNC reply (replica side).

The handshake is Redis 7.0.15's, byte for byte: ``PING``; then in one write ``AUTH`` (when
``masterauth`` is set, with ``masteruser`` if set), ``REPLCONF listening-port <port>``,
``REPLCONF ip-address <ip>`` (only with ``replica-announce-ip``) and ``REPLCONF capa eof capa
psync2``; then ``PSYNC <cached master replid> <cached reploff + 1>`` or ``PSYNC ? -1`` without a
cached master. Replies are read as lines (``\\r`` stripped) and judged as Redis does:
PING accepts ``+...``, ``-NOAUTH``, ``-NOPERM`` and ``-ERR operation not permitted``; AUTH fails
on ``-``; REPLCONF errors are "non critical"; PSYNC answers ``+FULLRESYNC <id> <off>``,
``+CONTINUE [<id>]``, ``-NOMASTERLINK`` / ``-LOADING`` (try later) or anything else (Redis falls
back to the old ``SYNC``). With ``repl-rdb-channel yes`` the capa line is ``REPLCONF capa eof
capa psync2 capa rdb-channel-repl capa dual-channel`` (Redis 8's capability, then Valkey 8's;
each master ignores the one it does not know), and the master's answer chooses the dialect: a
Redis 8 master may answer ``+RDBCHANNELSYNC <id>``, a Valkey one ``+DUALCHANNELSYNC``. With
``repl-full-sync-resume-window`` (not 0) the line ends with pyrepl's ``capa pyrepl-resume``, and
when a cut sync of this master was kept, ``REPLCONF resume <id> resume-offset <n>`` goes out and
is answered before the PSYNC (a master refuses a PSYNC while a reply is pending).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyrepl.replication.replica.states import (
    DUAL_CHANNEL,
    LINE_STATES,
    RDB_CHANNEL,
    I,
    Input,
    ReplState,
    S,
)
from pyrepl.replication.wire import CAPA_RESUME, Continue, FullResync
from pyrepl.resp.writer import encode_command

if TYPE_CHECKING:
    from pyrepl.replication.replica.channel import Channel
    from pyrepl.replication.replica.load import Load
    from pyrepl.replication.replica.side import ReplicaSide
    from pyrepl.replication.replica.stream import Stream


class Handshake:
    """The handshake with the master, up to the PSYNC reply (replica side).

    A reply line goes to the handler of the state that awaits it (``_replies``, one per
    state of ``LINE_STATES``). Owns ``psync_sent_ms``. Its collaborators: the side (the link,
    the table, the error path), and what a PSYNC reply starts: the load (a full sync), the
    channel (an rdb-channel sync) and the stream (a partial one: the cached master again)."""

    def __init__(self, side: ReplicaSide, load: Load, channel: Channel, stream: Stream) -> None:
        self.side = side
        self.core = side.core
        self.manager = side.manager
        self.load = load
        self.channel = channel
        self.stream = stream
        self.psync_sent_ms = 0
        self._replies: dict[ReplState, Callable[[bytes, str], None]] = {
            S.RECEIVE_PING_REPLY: self._ping_reply,
            S.RECEIVE_AUTH_REPLY: self._auth_reply,
            S.RECEIVE_PORT_REPLY: self._port_reply,
            S.RECEIVE_IP_REPLY: self._ip_reply,
            S.RECEIVE_CAPA_REPLY: self._capa_reply,
            S.RECEIVE_PSYNC_REPLY: self._psync_reply,
            S.RECEIVE_RESUME_REPLY: self._resume_reply,
        }
        assert self._replies.keys() == LINE_STATES

    def reply(self, line: bytes) -> None:
        """A reply line (``\\r`` stripped) in one of ``LINE_STATES``."""
        self._replies[self.side.state](line, line.decode("utf-8", "replace"))

    def _ping_reply(self, line: bytes, text: str) -> None:
        if line[:1] != b"+" and not line.startswith((b"-NOAUTH", b"-NOPERM",
                                                     b"-ERR operation not permitted")):
            self.core.log.warning(f"Error reply to PING from master: '{text}'")
            self.side.handshake_failed(I.REPLY_ERR, "ping-error", text)
            return
        self.core.log.notice("Master replied to PING, replication can continue...")
        self.side.go(I.REPLY_OK)
        self._send_handshake()

    def _auth_reply(self, line: bytes, text: str) -> None:
        if line[:1] == b"-":
            self.core.log.warning(f"Unable to AUTH to MASTER: {text}")
            self.side.handshake_failed(I.REPLY_ERR, "auth-error", text)
            return
        self.side.go(I.REPLY_OK)

    def _port_reply(self, line: bytes, text: str) -> None:
        self._optional_reply(line, "listening-port", text)
        if not self.core.config.replica_announce_ip:
            self.side.go(I.SKIP)

    def _ip_reply(self, line: bytes, text: str) -> None:
        self._optional_reply(line, "ip-address", text)

    def _capa_reply(self, line: bytes, text: str) -> None:
        self._optional_reply(line, "capa", text)
        self._ask_resume()

    def _optional_reply(self, line: bytes, option: str, text: str) -> None:
        """A REPLCONF the master may not understand: an error is logged and moves on too."""
        if line[:1] == b"-":
            self.core.log.notice(f"(Non critical) Master does not understand REPLCONF {option}: "
                                 f"{text}")
            self.side.go(I.REPLY_ERR)
        else:
            self.side.go(I.REPLY_OK)

    def _send_handshake(self) -> None:
        cfg = self.core.config
        out = []
        if cfg.masterauth:
            args = [b"AUTH"]
            if cfg.masteruser:
                args.append(cfg.masteruser.encode())
            args.append(cfg.masterauth.encode())
            out.append(encode_command(args))
        port = cfg.replica_announce_port or self.core.port or cfg.port
        out.append(encode_command([b"REPLCONF", b"listening-port", b"%d" % port]))
        if cfg.replica_announce_ip:
            out.append(encode_command([b"REPLCONF", b"ip-address",
                                       cfg.replica_announce_ip.encode()]))
        capa = [b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]
        if cfg.repl_rdb_channel:
            capa += [b"capa", b"rdb-channel-repl", b"capa", b"dual-channel"]
        if cfg.repl_full_sync_resume_window:
            capa += [b"capa", CAPA_RESUME]
        out.append(encode_command(capa))
        side = self.side
        side.send(b"".join(out))
        side.go(I.SENT)
        if not cfg.masterauth:
            side.go(I.SKIP)

    def _ask_resume(self) -> None:
        """A cut full sync of this master was kept: ask to resume it (its reply comes before
        the PSYNC goes: a master refuses a PSYNC while a reply is pending), else PSYNC."""
        load = self.load
        parked = load.parked_for(self.side.peer)
        if parked is None or load.resuming:
            self._send_psync()
            return
        ask = [b"REPLCONF", b"resume", parked.rid.encode(), b"resume-offset", b"%d" % parked.read]
        more = ""
        if parked.stream is not None:   # an rdb-channel sync: the stream it has, too
            ask += [b"stream-offset", b"%d" % parked.stream_next]
            more = f", the stream from offset {parked.stream_next}"
        self.core.log.notice(f"Asking the master to resume snapshot {parked.rid} from byte "
                             f"{parked.read}{more}")
        self.side.send(encode_command(ask))
        self.side.go(I.SENT_RESUME)

    def _send_psync(self) -> None:
        """slaveTryPartialResynchronization, writing half."""
        side = self.side
        self.load.set_target(None, -1)
        c = self.stream.cached
        if c is not None:
            replid, offset = c.replid, c.reploff + 1
            self.core.log.notice(f"Trying a partial resynchronization (request "
                                 f"{replid}:{offset}).")
        else:
            replid, offset = "?", -1
            self.core.log.notice("Partial resynchronization not possible (no cached master)")
        psync = [b"PSYNC", replid.encode(), b"%d" % offset]
        if self.manager.failover.psync_failover_arg():
            psync.append(b"FAILOVER")           # the target promotes itself (FAILOVER)
        side.send(encode_command(psync))
        side.go(I.SENT)
        self.psync_sent_ms = side.now
        side.emit("psync_sent", req_replid=replid, req_offset=offset,
                   replid=self.manager.ids.replid,
                   master_repl_offset=self.manager.master_repl_offset)

    def _resume_reply(self, line: bytes, text: str) -> None:
        """REPLCONF resume's reply: +OK, the PSYNC's answer resumes the cut sync; an error,
        it is answered as usual (what was kept goes)."""
        load = self.load
        if line[:1] == b"-":
            self.core.log.notice(f"The master cannot resume the cut sync: {text}")
            load.discard_parked()
            self.side.go(I.REPLY_ERR)
        else:
            load.resuming = True
            self.side.go(I.REPLY_OK)
        self._send_psync()

    def _psync_reply(self, line: bytes, text: str) -> None:
        """slaveTryPartialResynchronization, reading half."""
        log = self.core.log
        side = self.side
        failover = self.manager.failover
        if not line:
            side.go(I.KEEPALIVE)  # newlines before the reply keep the link alive
            return
        if self.load.resuming and not line.startswith(b"+FULLRESYNC"):
            self.load.discard_parked()    # (the master did not resume it after all)
        if line.startswith(b"+FULLRESYNC"):
            load = self.load
            fr = FullResync.parse(text)
            if fr is None:
                log.warning("Master replied with wrong +FULLRESYNC syntax.")
                load.set_target("", load.master_initial_offset)
            else:
                load.set_target(fr.replid, fr.offset)
                log.notice(f"Full resync from master: {fr.replid}:{fr.offset}")
            resumed = load.resumes(fr)
            side.emit("psync_reply", result="resume" if resumed else "full",
                      replid=load.master_replid or None, offset=load.master_initial_offset,
                      duration_ms=side.now - self.psync_sent_ms)
            side.go(I.FULLRESYNC)
            failover.psync_answered(True)
            load.start(self.psync_sent_ms)
            load.resume_id = fr.snapshot if fr is not None else ""
            return
        if line.startswith(b"+RDBCHANNELSYNC"):
            self._rdbchannel_sync(text)
            return
        if line.startswith(b"+DUALCHANNELSYNC"):
            self._dualchannel_sync()
            return
        if line.startswith(b"+CONTINUE"):
            if self.stream.cached is None:
                log.warning(f"Unexpected reply to PSYNC from master: {text}")
                side.handshake_failed(I.REPLY_ERR, "psync-error", text)
                return
            self._partial_accepted(text)
            failover.psync_answered(True)
            return
        failover.psync_answered(False)   # (anything else ends a FAILOVER)
        if line.startswith((b"-NOMASTERLINK", b"-LOADING")):
            log.notice(f"Master is currently unable to PSYNC but should be in the future: {text}")
            side.emit("psync_reply", result="try-later", error=text,
                      duration_ms=side.now - self.psync_sent_ms)
            side.handshake_failed(I.TRY_LATER, "psync-try-later", text)
            return
        if not line.startswith(b"-ERR"):
            log.warning(f"Unexpected reply to PSYNC from master: {text}")
        else:
            log.notice(f"Master does not support PSYNC or is in error state (reply: {text})")
        side.emit("psync_reply", result="sync", error=text,
                  duration_ms=side.now - self.psync_sent_ms)
        log.notice("Retrying with SYNC...")
        side.send(b"SYNC\r\n")
        side.go(I.NOT_SUPPORTED)
        self.load.start(self.psync_sent_ms)

    def _rdbchannel_sync(self, text: str) -> None:
        """+RDBCHANNELSYNC <client-id>: the snapshot comes on the rdb channel."""
        log = self.core.log
        side = self.side
        cid = text[len("+RDBCHANNELSYNC"):].strip()
        if not cid.isascii() or not cid.isdigit():
            log.warning(f"Master replied with wrong +RDBCHANNELSYNC syntax: {text}")
            side.emit("psync_reply", result="rdbchannel", error=text,
                      duration_ms=side.now - self.psync_sent_ms)
            side.handshake_failed(I.REPLY_ERR, "psync-error", text)
            return
        log.notice("PSYNC is not possible, initialize RDB channel.")
        self._open_rdb_channel(I.RDBCHANNELSYNC, "rdbchannel", RDB_CHANNEL, cid)

    def _dualchannel_sync(self) -> None:
        """+DUALCHANNELSYNC (Valkey): the snapshot comes on an rdb channel that learns its
        offset ($ENDOFF:), then this connection asks for the stream from there."""
        self.core.log.notice("Dual channel replication: PSYNC is not possible, initialize RDB "
                             "channel.")
        self._open_rdb_channel(I.DUALCHANNELSYNC, "dualchannel", DUAL_CHANNEL, None)

    def _open_rdb_channel(self, inp: Input, result: str, mode: str, cid: str | None) -> None:
        """The snapshot comes on a second connection (its offset unknown until that one
        says it); the main connection's bytes are buffered meanwhile."""
        side = self.side
        side.emit("psync_reply", result=result, mode=mode,
                  duration_ms=side.now - self.psync_sent_ms)
        side.go(inp)
        self.load.start(self.psync_sent_ms, mode)
        self.load.set_target("", -1)
        self.channel.open(cid)

    def _partial_accepted(self, text: str) -> None:
        log = self.core.log
        m = self.manager
        side = self.side
        stream = self.stream
        cached = stream.cached
        assert cached is not None
        log.notice("Successful partial resynchronization with master.")
        new = Continue.parse(text).replid
        if new and new != cached.replid:
            log.warning(f"Master replication ID changed to {new}")
            m.ids.replid2 = cached.replid
            m.ids.second_repl_offset = m.master_repl_offset + 1
            m.ids.replid = new
            stream.rename_cached(new)
            m.master.disconnect_replicas()
        side.emit("psync_reply", result="continue", replid=cached.replid,
                  offset=cached.reploff, duration_ms=side.now - self.psync_sent_ms)
        side.go(I.CONTINUE)
        stream.resurrect_cached()
        if m.backlog is None:
            m.create_backlog()
        log.notice("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.")
        side.link_is_up("partial")
