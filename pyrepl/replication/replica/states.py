"""The replica side's states and their one transition table (replica side).

States (``ReplState``, Redis's ``REPL_STATE_*`` minus the prefix) and the one transition table
``TRANSITIONS``; an input with no entry for the current state raises :class:`ReplProtocolError`
(the side logs it, drops the link and retries)::

    NONE --REPLICAOF--> CONNECT --CONNECT_START--> CONNECTING --CONNECT_OK--> RECEIVE_PING_REPLY
      ^                    ^  (CONNECT_FAIL, REPLY_ERR, TRY_LATER, TRANSFER_ERROR,        |
      |                    |   LINK_LOST, TIMEOUT, PROTOCOL_ERROR: back to CONNECT)      |
      |                    |                                                         REPLY_OK
    NO_ONE (any)           |                                                             v
                           |   RECEIVE_AUTH_REPLY <--SENT-- SEND_HANDSHAKE <-------------+
                           |     | REPLY_OK / SKIP (no masterauth)
                           |     v
                           |   RECEIVE_PORT_REPLY --> RECEIVE_IP_REPLY --> RECEIVE_CAPA_REPLY
                           |   (REPLY_OK or REPLY_ERR: "non critical")  (SKIP: no announce ip)
                           |                                                  | REPLY_OK, REPLY_ERR
                           |                                                  v
                           |   RECEIVE_PSYNC_REPLY <--SENT-- SEND_PSYNC <-----+
                           |        (pyrepl's resume, first: SEND_PSYNC --SENT_RESUME-->
                           |         RECEIVE_RESUME_REPLY --REPLY_OK / REPLY_ERR--> SEND_PSYNC)
                           |     | KEEPALIVE ("\\n") stays
                           |     |-- CONTINUE ------------------------------> CONNECTED
                           |     |-- FULLRESYNC / NOT_SUPPORTED (SYNC) --> TRANSFER
                           |     |-- RDBCHANNELSYNC / DUALCHANNELSYNC -----> TRANSFER
                           |                                                  | KEEPALIVE,
                           |                                                  | BULK_HEADER,
                           +------------------------------------------------- | PAYLOAD,
                                                                              | BUFFER stay
                                                         LOADED --> CONNECTED (STREAM,
                                                                               BUFFER stay)
    DATA (bytes read) stays in every state that reads a reply, in TRANSFER and CONNECTED

Everything that moves this machine or asks where it stands lives here: the table (moved only by
``ReplicaSide.go``), the initial state ``INITIAL``, and the guards the side and its phases ask
(``in_handshake``, ``cancellable``, ``link_up`` ...) with the groups of states they are made of:
``HANDSHAKE``; ``LINKED`` (a connection exists); ``LINE_STATES`` (a reply is read as a line);
``CONNECT_TIMED`` (repl-timeout counts from the connect); ``CANCELLABLE``; and ROLE's names for
the states (``role_state``). The side's state -> handler tables are built from these groups.
"""

from __future__ import annotations

from pyrepl.replication.fsm import Machine, from_every

#: The longest wait between syncs whose dataset this replica could not load (rdb-unsupported).
LOAD_BACKOFF_MAX_MS = 60_000
# A read shorter than this drained the socket: the replica has everything the master sent.
CAUGHT_UP_READ = 64 * 1024
ROLE = "replica"
# The sync mode (sync events) of a snapshot that comes on the rdb channel (Redis 8's), or on
# Valkey's dual channel.
RDB_CHANNEL = "rdb-channel"
DUAL_CHANNEL = "dual-channel"
TWO_CHANNELS = (RDB_CHANNEL, DUAL_CHANNEL)
# rdb channel: a drain step applies this many buffered blocks; the main channel may deliver at
# most one new read (<= one block) per step, so the buffer always shrinks.
DRAIN_BLOCKS = 2


class ReplState(Machine):
    """Redis's REPL_STATE_* (server.h), in the same order."""

    NONE = 0
    CONNECT = 1
    CONNECTING = 2
    RECEIVE_PING_REPLY = 3
    SEND_HANDSHAKE = 4
    RECEIVE_AUTH_REPLY = 5
    RECEIVE_PORT_REPLY = 6
    RECEIVE_IP_REPLY = 7
    RECEIVE_CAPA_REPLY = 8
    SEND_PSYNC = 9
    RECEIVE_PSYNC_REPLY = 10
    TRANSFER = 11
    CONNECTED = 12
    RECEIVE_RESUME_REPLY = 13  # pyrepl's: the reply to REPLCONF resume, before PSYNC's


class Input(Machine):
    """What can happen to the replica's link (a command, an I/O event, or a parsed reply)."""

    REPLICAOF = "replicaof"  # REPLICAOF host port (or replicaof from config)
    NO_ONE = "no-one"  # REPLICAOF NO ONE
    CONNECT_START = "connect-start"  # a connection attempt begins
    CONNECT_OK = "connect-ok"  # the TCP connection is up
    CONNECT_FAIL = "connect-fail"  # the TCP connection failed
    DATA = "data"  # bytes arrived (decomposed into the inputs below)
    REPLY_OK = "reply-ok"  # a handshake reply accepted as success
    REPLY_ERR = "reply-err"  # a handshake reply that is an error
    SENT = "sent"  # the handshake batch / PSYNC was written
    SENT_RESUME = "sent-resume"  # REPLCONF resume and PSYNC were written (a cut sync resumes)
    SKIP = "skip"  # a reply we do not wait for (no AUTH sent, no ip-address sent)
    KEEPALIVE = "keepalive"  # an empty line before the PSYNC reply or the payload header
    FULLRESYNC = "fullresync"  # +FULLRESYNC <replid> <offset>
    RDBCHANNELSYNC = "rdbchannelsync"  # +RDBCHANNELSYNC <client-id>: snapshot on a 2nd link
    DUALCHANNELSYNC = "dualchannelsync"  # +DUALCHANNELSYNC (Valkey): the same, its dialect
    CONTINUE = "continue"  # +CONTINUE [<replid>]
    TRY_LATER = "try-later"  # -NOMASTERLINK / -LOADING
    NOT_SUPPORTED = "not-supported"  # any other PSYNC reply: SYNC was sent instead
    BULK_HEADER = "bulk-header"  # $<len> or $EOF:<mark>
    PAYLOAD = "payload"  # RDB payload bytes
    LOADED = "loaded"  # the payload was received, verified and swapped in
    TRANSFER_ERROR = "transfer-error"  # master error / bad header / bad RDB / bad mark
    STREAM = "stream"  # replication stream bytes
    BUFFER = "buffer"  # rdb channel: main-channel bytes kept in the full-sync buffer
    PROTOCOL_ERROR = "protocol-error"  # the master broke the stream protocol
    LINK_LOST = "link-lost"  # the connection closed
    TIMEOUT = "timeout"  # repl-timeout elapsed


S = ReplState
I = Input  # noqa: E741 - a short alias keeps the table readable

INITIAL = S.NONE
#: From the PING reply to the PSYNC reply (ROLE's "handshake").
HANDSHAKE = frozenset((S.RECEIVE_PING_REPLY, S.SEND_HANDSHAKE, S.RECEIVE_AUTH_REPLY,
                       S.RECEIVE_PORT_REPLY, S.RECEIVE_IP_REPLY, S.RECEIVE_CAPA_REPLY,
                       S.SEND_PSYNC, S.RECEIVE_PSYNC_REPLY, S.RECEIVE_RESUME_REPLY))
#: A connection to the master exists (or is being made).
LINKED = frozenset((S.CONNECTING, *HANDSHAKE, S.TRANSFER, S.CONNECTED))
#: The states that read the master's reply as a line (the handshake's replies).
LINE_STATES = frozenset((S.RECEIVE_PING_REPLY, S.RECEIVE_AUTH_REPLY, S.RECEIVE_PORT_REPLY,
                         S.RECEIVE_IP_REPLY, S.RECEIVE_CAPA_REPLY, S.RECEIVE_PSYNC_REPLY,
                         S.RECEIVE_RESUME_REPLY))
#: The states whose repl-timeout counts from the connect (no data read moves it).
CONNECT_TIMED = frozenset((S.CONNECTING, *HANDSHAKE))
#: The states cancelReplicationHandshake aborts: a connect, a handshake or a transfer.
CANCELLABLE = frozenset((S.CONNECTING, *HANDSHAKE, S.TRANSFER))


def _table() -> dict[tuple[ReplState, Input], ReplState]:
    t = from_every(S, (I.REPLICAOF,), S.CONNECT)
    t.update(from_every(S, (I.NO_ONE,), S.NONE, but=S.NONE))
    t.update(from_every(LINKED, (I.LINK_LOST, I.TIMEOUT), S.CONNECT))
    for s in (*LINE_STATES, S.TRANSFER, S.CONNECTED):
        t[(s, I.DATA)] = s
    t.update({
        (S.CONNECT, I.CONNECT_START): S.CONNECTING,
        (S.CONNECTING, I.CONNECT_OK): S.RECEIVE_PING_REPLY,
        (S.CONNECTING, I.CONNECT_FAIL): S.CONNECT,
        (S.RECEIVE_PING_REPLY, I.REPLY_OK): S.SEND_HANDSHAKE,
        (S.RECEIVE_PING_REPLY, I.REPLY_ERR): S.CONNECT,
        (S.SEND_HANDSHAKE, I.SENT): S.RECEIVE_AUTH_REPLY,
        (S.RECEIVE_AUTH_REPLY, I.SKIP): S.RECEIVE_PORT_REPLY,
        (S.RECEIVE_AUTH_REPLY, I.REPLY_OK): S.RECEIVE_PORT_REPLY,
        (S.RECEIVE_AUTH_REPLY, I.REPLY_ERR): S.CONNECT,
        (S.RECEIVE_PORT_REPLY, I.REPLY_OK): S.RECEIVE_IP_REPLY,
        (S.RECEIVE_PORT_REPLY, I.REPLY_ERR): S.RECEIVE_IP_REPLY,
        (S.RECEIVE_IP_REPLY, I.SKIP): S.RECEIVE_CAPA_REPLY,
        (S.RECEIVE_IP_REPLY, I.REPLY_OK): S.RECEIVE_CAPA_REPLY,
        (S.RECEIVE_IP_REPLY, I.REPLY_ERR): S.RECEIVE_CAPA_REPLY,
        (S.RECEIVE_CAPA_REPLY, I.REPLY_OK): S.SEND_PSYNC,
        (S.RECEIVE_CAPA_REPLY, I.REPLY_ERR): S.SEND_PSYNC,
        (S.SEND_PSYNC, I.SENT): S.RECEIVE_PSYNC_REPLY,
        (S.SEND_PSYNC, I.SENT_RESUME): S.RECEIVE_RESUME_REPLY,
        (S.RECEIVE_RESUME_REPLY, I.REPLY_OK): S.SEND_PSYNC,
        (S.RECEIVE_RESUME_REPLY, I.REPLY_ERR): S.SEND_PSYNC,
        (S.RECEIVE_PSYNC_REPLY, I.KEEPALIVE): S.RECEIVE_PSYNC_REPLY,
        (S.RECEIVE_PSYNC_REPLY, I.FULLRESYNC): S.TRANSFER,
        (S.RECEIVE_PSYNC_REPLY, I.RDBCHANNELSYNC): S.TRANSFER,
        (S.RECEIVE_PSYNC_REPLY, I.DUALCHANNELSYNC): S.TRANSFER,
        (S.RECEIVE_PSYNC_REPLY, I.CONTINUE): S.CONNECTED,
        (S.RECEIVE_PSYNC_REPLY, I.TRY_LATER): S.CONNECT,
        (S.RECEIVE_PSYNC_REPLY, I.NOT_SUPPORTED): S.TRANSFER,
        (S.RECEIVE_PSYNC_REPLY, I.REPLY_ERR): S.CONNECT,
        (S.TRANSFER, I.KEEPALIVE): S.TRANSFER,
        (S.TRANSFER, I.BULK_HEADER): S.TRANSFER,
        (S.TRANSFER, I.PAYLOAD): S.TRANSFER,
        (S.TRANSFER, I.LOADED): S.CONNECTED,
        (S.TRANSFER, I.TRANSFER_ERROR): S.CONNECT,
        (S.TRANSFER, I.BUFFER): S.TRANSFER,
        (S.CONNECTED, I.STREAM): S.CONNECTED,
        (S.CONNECTED, I.BUFFER): S.CONNECTED,
        (S.CONNECTED, I.PROTOCOL_ERROR): S.CONNECT,
    })
    return t


TRANSITIONS: dict[tuple[ReplState, Input], ReplState] = _table()

# ROLE's names for the states (roleCommand).
_ROLE_STATE = {S.NONE: "none", S.CONNECT: "connect", S.CONNECTING: "connecting",
               S.TRANSFER: "sync", S.CONNECTED: "connected"}


# -- the guards ---------------------------------------------------------------------------------

def idle(state: ReplState) -> bool:
    """No master (REPLICAOF NO ONE, or never a replica)."""
    return state is S.NONE


def waiting_to_connect(state: ReplState) -> bool:
    """A master is set and the next connection attempt is due (now or at the cron)."""
    return state is S.CONNECT


def connecting(state: ReplState) -> bool:
    """The TCP connection is being made."""
    return state is S.CONNECTING


def in_handshake(state: ReplState) -> bool:
    """From the PING reply to the PSYNC reply."""
    return state in HANDSHAKE


def cancellable(state: ReplState) -> bool:
    """A connect, handshake or transfer that cancelReplicationHandshake aborts."""
    return state in CANCELLABLE


def transferring(state: ReplState) -> bool:
    """A full sync's payload is awaited or loading (INFO master_sync_in_progress)."""
    return state is S.TRANSFER


def link_up(state: ReplState) -> bool:
    """The master client streams (INFO master_link_status:up)."""
    return state is S.CONNECTED


def role_state(state: ReplState) -> str:
    """ROLE's name for the state (roleCommand)."""
    return "handshake" if state in HANDSHAKE else _ROLE_STATE.get(state, "unknown")


class ReplProtocolError(Exception):
    """An input that has no transition from the current state."""

    def __init__(self, state: ReplState, inp: Input, detail: str = "") -> None:
        super().__init__(f"replica state machine error: input {inp.value} in state "
                         f"{state.name}" + (f" ({detail})" if detail else ""))
        self.state = state
        self.input = inp


def _printable(data: bytes) -> str:
    return "".join(chr(b) if 32 <= b < 127 else "." for b in data)
