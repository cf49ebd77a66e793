"""The handshake with the master, up to the PSYNC reply (replica side).

The handshake is Redis 7.0.15's, byte for byte: ``PING``; then in one write ``AUTH`` (when
``masterauth`` is set, with ``masteruser`` if set), ``REPLCONF listening-port <port>``,
``REPLCONF ip-address <ip>`` (only with ``replica-announce-ip``) and ``REPLCONF capa eof capa
psync2``; then ``PSYNC <cached master replid> <cached reploff + 1>`` or ``PSYNC ? -1`` without a
cached master. Replies are read as lines (``\\r`` stripped) and judged as Redis does:
PING accepts ``+...``, ``-NOAUTH``, ``-NOPERM`` and ``-ERR operation not permitted``; AUTH fails
on ``-``; REPLCONF errors are "non critical"; PSYNC answers ``+FULLRESYNC <id> <off>``,
``+CONTINUE [<id>]``, ``-NOMASTERLINK`` / ``-LOADING`` (try later) or anything else (Redis falls
back to the old ``SYNC``). With ``repl-rdb-channel yes`` (Redis 8) the capa line is ``REPLCONF
capa eof capa psync2 capa rdb-channel-repl`` and a master may answer ``+RDBCHANNELSYNC <id>``.
"""

from __future__ import annotations

from pyrepl.replication.replica.states import (
    I,
    S,
)
from pyrepl.replication.wire import Continue, FullResync
from pyrepl.resp.writer import encode_command


class Handshake:
    """The handshake with the master, up to the PSYNC reply (replica side)."""

    def _handshake_line(self, line: bytes) -> None:
        st = self.state
        log = self.core.log
        text = line.decode("utf-8", "replace")
        if st is S.RECEIVE_PING_REPLY:
            if line[:1] != b"+" and not line.startswith((b"-NOAUTH", b"-NOPERM",
                                                         b"-ERR operation not permitted")):
                log.warning(f"Error reply to PING from master: '{text}'")
                self._handshake_failed(I.REPLY_ERR, "ping-error", text)
                return
            log.notice("Master replied to PING, replication can continue...")
            self._go(I.REPLY_OK)
            self._send_handshake()
        elif st is S.RECEIVE_AUTH_REPLY:
            if line[:1] == b"-":
                log.warning(f"Unable to AUTH to MASTER: {text}")
                self._handshake_failed(I.REPLY_ERR, "auth-error", text)
                return
            self._go(I.REPLY_OK)
        elif st is S.RECEIVE_PORT_REPLY:
            self._optional_reply(line, "listening-port", text)
            if not self.core.config.replica_announce_ip:
                self._go(I.SKIP)
        elif st is S.RECEIVE_IP_REPLY:
            self._optional_reply(line, "ip-address", text)
        elif st is S.RECEIVE_CAPA_REPLY:
            self._optional_reply(line, "capa", text)
            self._send_psync()
        else:  # RECEIVE_PSYNC_REPLY
            self._psync_reply(line, text)

    def _optional_reply(self, line: bytes, option: str, text: str) -> None:
        """A REPLCONF the master may not understand: an error is logged and moves on too."""
        if line[:1] == b"-":
            self.core.log.notice(f"(Non critical) Master does not understand REPLCONF {option}: "
                                 f"{text}")
            self._go(I.REPLY_ERR)
        else:
            self._go(I.REPLY_OK)

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
            capa += [b"capa", b"rdb-channel-repl"]
        out.append(encode_command(capa))
        self._send(b"".join(out))
        self._go(I.SENT)
        if not cfg.masterauth:
            self._go(I.SKIP)

    def _send_psync(self) -> None:
        """slaveTryPartialResynchronization, writing half."""
        self.master_initial_offset = -1
        c = self.cached
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
        self._send(encode_command(psync))
        self._go(I.SENT)
        self.psync_sent_ms = self.now
        self._emit("psync_sent", req_replid=replid, req_offset=offset,
                   replid=self.manager.ids.replid,
                   master_repl_offset=self.manager.master_repl_offset)

    def _psync_reply(self, line: bytes, text: str) -> None:
        """slaveTryPartialResynchronization, reading half."""
        log = self.core.log
        if not line:
            self._go(I.KEEPALIVE)  # newlines before the reply keep the link alive
            return
        if line.startswith(b"+FULLRESYNC"):
            fr = FullResync.parse(text)
            if fr is None:
                log.warning("Master replied with wrong +FULLRESYNC syntax.")
                self.master_replid = ""
            else:
                self.master_replid = fr.replid
                self.master_initial_offset = fr.offset
                log.notice(f"Full resync from master: {self.master_replid}:"
                           f"{self.master_initial_offset}")
            self._emit("psync_reply", result="full", replid=self.master_replid or None,
                       offset=self.master_initial_offset,
                       duration_ms=self.now - self.psync_sent_ms)
            self._go(I.FULLRESYNC)
            self.manager.failover.psync_answered(True)
            self._start_transfer()
            return
        if line.startswith(b"+RDBCHANNELSYNC"):
            self._rdbchannel_sync(text)
            return
        if line.startswith(b"+CONTINUE"):
            if self.cached is None:
                log.warning(f"Unexpected reply to PSYNC from master: {text}")
                self._handshake_failed(I.REPLY_ERR, "psync-error", text)
                return
            self._partial_accepted(text)
            self.manager.failover.psync_answered(True)
            return
        self.manager.failover.psync_answered(False)   # (anything else ends a FAILOVER)
        if line.startswith((b"-NOMASTERLINK", b"-LOADING")):
            log.notice(f"Master is currently unable to PSYNC but should be in the future: {text}")
            self._emit("psync_reply", result="try-later", error=text,
                       duration_ms=self.now - self.psync_sent_ms)
            self._handshake_failed(I.TRY_LATER, "psync-try-later", text)
            return
        if not line.startswith(b"-ERR"):
            log.warning(f"Unexpected reply to PSYNC from master: {text}")
        else:
            log.notice(f"Master does not support PSYNC or is in error state (reply: {text})")
        self._emit("psync_reply", result="sync", error=text,
                   duration_ms=self.now - self.psync_sent_ms)
        log.notice("Retrying with SYNC...")
        self._send(b"SYNC\r\n")
        self._go(I.NOT_SUPPORTED)
        self._start_transfer()

    def _partial_accepted(self, text: str) -> None:
        log = self.core.log
        m = self.manager
        cached = self.cached
        assert cached is not None
        log.notice("Successful partial resynchronization with master.")
        new = Continue.parse(text).replid
        if new and new != cached.replid:
            log.warning(f"Master replication ID changed to {new}")
            m.ids.replid2 = cached.replid
            m.ids.second_repl_offset = m.master_repl_offset + 1
            m.ids.replid = new
            cached.replid = new
            m.master.disconnect_replicas()
        self._emit("psync_reply", result="continue", replid=cached.replid,
                   offset=cached.reploff, duration_ms=self.now - self.psync_sent_ms)
        self._go(I.CONTINUE)
        self._resurrect_cached_master()
        if m.backlog is None:
            m.create_backlog()
        log.notice("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.")
        self._link_is_up("partial")
