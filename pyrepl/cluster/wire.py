"""The cluster bus's messages, byte for byte as Redis 7.0.15 sends them; shared by both ends of
a bus link (the node that connected and the node that accepted).

Theory of operation: every message is cluster.h's ``clusterMsg``, a fixed 2256-byte header
(``HEADER_LEN``: the sender's name, epochs, slot bitmap, ports, flags) followed by a body whose
shape the type decides: PING/PONG/MEET carry ``count`` gossip entries of 104 bytes then
``extensions`` ping extensions (8-byte header, 8-aligned payload); FAIL a node name; PUBLISH two
lengths and the bytes; UPDATE an epoch, a name and a bitmap; MODULE an id, a length, a type and
a payload; the failover messages nothing. Integers are big endian, names and addresses fixed-size
and NUL-padded. ``FrameReader`` cuts a link's byte stream into messages as clusterReadHandler
does (the first 8 bytes give signature and length); ``decode`` then applies
clusterProcessPacket's sanity checks in Redis's order: what Redis ignores silently is ``None``,
what it logs a warning for is a ``BusError`` whose text is that warning, so a pyrepl node's log
reads like Redis's. ``encode`` writes what clusterBuildMessageHdr and the clusterSend* functions
write, lengths and counts derived from the body.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

CLUSTER_SLOTS = 16384
NAMELEN = 40                # CLUSTER_NAMELEN: a node name is 40 hex characters
NET_IP_STR_LEN = 46         # INET6_ADDRSTRLEN: 45 characters and the NUL
SLOTS_LEN = CLUSTER_SLOTS // 8

PROTO_VER = 1
SIGNATURE = b"RCmb"

# Message types (CLUSTERMSG_TYPE_*).
PING, PONG, MEET, FAIL, PUBLISH, FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, UPDATE, MFSTART, \
    MODULE, PUBLISHSHARD = range(11)
TYPE_COUNT = 11

# mflags[0] (CLUSTERMSG_FLAG0_*).
FLAG0_PAUSED, FLAG0_FORCEACK, FLAG0_EXT_DATA = 1, 2, 4

# Ping extension types: Redis 7.0 sends HOSTNAME only; 7.2 added the others.
EXT_HOSTNAME, EXT_HUMAN_NODENAME, EXT_FORGOTTEN_NODE, EXT_SHARDID = 0, 1, 2, 3

NULL_NAME = b"\0" * NAMELEN
EMPTY_SLOTS = bytes(SLOTS_LEN)

# sig totlen ver port type count currentEpoch configEpoch offset sender myslots slaveof myip
# extensions notused1 pport cport flags state mflags
_HDR = struct.Struct(">4sIHHHHQQQ40s2048s40s46sH30sHHHB3s")
# nodename ping_sent pong_received ip port cport flags pport notused1
_GOSSIP = struct.Struct(">40sII46sHHHHH")
_EXT_HDR = struct.Struct(">IHH")        # length (header included), type, unused
_PUBLISH_HDR = struct.Struct(">II")     # channel_len, message_len
_UPDATE = struct.Struct(">Q40s2048s")   # configEpoch, nodename, slots
_MODULE_ID = struct.Struct("<Q")        # see encode(): stored in the sender's byte order
_MODULE_REST = struct.Struct(">IB")     # len, type
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_FORGOTTEN = struct.Struct(">40sQ")     # name, ttl (seconds)

HEADER_LEN = _HDR.size                  # offsetof(clusterMsg, data); CLUSTERMSG_MIN_LEN
GOSSIP_LEN = _GOSSIP.size               # sizeof(clusterMsgDataGossip)
EXT_HEADER_LEN = _EXT_HDR.size          # sizeof(clusterMsgPingExt)
FAIL_LEN = NAMELEN                      # sizeof(clusterMsgDataFail)
UPDATE_LEN = _UPDATE.size               # sizeof(clusterMsgDataUpdate), the largest body
PUBLISH_LEN = 16                        # sizeof(clusterMsgDataPublish): 8 bytes + bulk_data[8]
MODULE_LEN = 16                         # sizeof(clusterMsgModule): 13 bytes + bulk_data[3]
MSG_LEN = HEADER_LEN + UPDATE_LEN       # sizeof(clusterMsg)
CLUSTERMSG_MIN_LEN = HEADER_LEN

assert HEADER_LEN == 2256 and GOSSIP_LEN == 104 and MSG_LEN == 4352

#: FrameReader's default limit: Redis has none (totlen is 32 bits); this admits the largest
#: PUBLISH a Redis with the default proto-max-bulk-len (512MB) forwards, channel and message
#: both at that size.
MAX_FRAME_LEN = HEADER_LEN + PUBLISH_LEN - 8 + 2 * 512 * 1024 * 1024

_TYPE_NAMES = {
    PING: "ping", PONG: "pong", MEET: "meet", FAIL: "fail", PUBLISH: "publish",
    PUBLISHSHARD: "publishshard", FAILOVER_AUTH_REQUEST: "auth-req",
    FAILOVER_AUTH_ACK: "auth-ack", UPDATE: "update", MFSTART: "mfstart", MODULE: "module",
}
_GOSSIP_TYPES = frozenset((PING, PONG, MEET))
_HEADER_ONLY_TYPES = frozenset((FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART))
_U32_MASK = 0xFFFFFFFF


def type_name(t: int) -> str:
    """clusterGetMessageTypeString: the name Redis's log lines use."""
    return _TYPE_NAMES.get(t, "unknown")


def name_str(b: bytes) -> str:
    """A 40-byte node name as text, as Redis prints it (``%.40s``: up to the first NUL)."""
    return b[:NAMELEN].split(b"\0", 1)[0].decode("latin-1")


def slot_bit(bitmap: bytes, slot: int) -> bool:
    """bitmapTestBit: slot j is bit j%8 of byte j//8."""
    return bool(bitmap[slot >> 3] >> (slot & 7) & 1)


def bitmap_of(slots: Iterable[int]) -> bytes:
    """The 2048-byte bitmap with ``slots`` set (bitmapSetBit)."""
    n = 0
    for s in slots:
        if not 0 <= s < CLUSTER_SLOTS:
            raise ValueError(f"slot {s} out of range")
        n |= 1 << s
    # Bit j of a little-endian integer is bit j%8 of byte j//8: the bitmap's own order.
    return n.to_bytes(SLOTS_LEN, "little")


def slots_of(bitmap: bytes) -> list[int]:
    """The slots set in a bitmap, ascending (the inverse of :func:`bitmap_of`)."""
    bits = bin(int.from_bytes(bitmap, "little"))[:1:-1]
    out = []
    i = bits.find("1")
    while i >= 0:
        out.append(i)
        i = bits.find("1", i + 1)
    return out


def _align8(n: int) -> int:
    """EIGHT_BYTE_ALIGN."""
    return (n + 7) // 8 * 8


class BusError(Exception):
    """A message Redis would reject; ``str()`` is the warning Redis logs for it. The link
    stays up after a decode error (Redis drops the message) and goes down after a framing
    error (Redis frees the link)."""


@dataclass(slots=True)
class Gossip:
    """clusterMsgDataGossip: what the sender knows of another node."""

    name: bytes          # 40 bytes
    ping_sent: int       # seconds (Redis sends ms/1000 in 32 bits)
    pong_received: int   # seconds
    ip: str              # up to 45 characters
    port: int
    cport: int
    flags: int
    pport: int


@dataclass(slots=True)
class Ext:
    """A ping extension: its type and the payload after the 8-byte extension header, padding
    included as received (Redis 7.0 reads only HOSTNAME; other types are kept as they came)."""

    type: int
    data: bytes

    @staticmethod
    def _text(t: int, text: str) -> Ext:
        raw = text.encode()
        if b"\0" in raw:
            raise ValueError("an extension string cannot hold NUL")
        return Ext(t, raw + bytes(_align8(len(raw) + 1) - len(raw)))

    @staticmethod
    def hostname(name: str) -> Ext:
        """writeHostnamePingExt: the string, its NUL, zeros to a multiple of 8."""
        return Ext._text(EXT_HOSTNAME, name)

    @staticmethod
    def human_nodename(name: str) -> Ext:
        """Redis 7.2's cluster-announce-human-nodename, laid out as the hostname."""
        return Ext._text(EXT_HUMAN_NODENAME, name)

    @staticmethod
    def forgotten_node(name: bytes, ttl: int) -> Ext:
        """Redis 7.2's CLUSTER FORGET propagation: the name and the seconds left to ban it."""
        return Ext(EXT_FORGOTTEN_NODE, _FORGOTTEN.pack(_fixed(name, NAMELEN, "name"), ttl))

    @staticmethod
    def shard_id(shard: bytes) -> Ext:
        """Redis 7.2's shard id: 40 bytes."""
        return Ext(EXT_SHARDID, _fixed(shard, NAMELEN, "shard id"))

    def text(self) -> str:
        """The NUL-terminated string of a HOSTNAME or HUMAN_NODENAME extension."""
        return self.data.split(b"\0", 1)[0].decode("utf-8", "replace")

    def forgotten(self) -> tuple[bytes, int]:
        """A FORGOTTEN_NODE extension's (name, ttl)."""
        if len(self.data) < _FORGOTTEN.size:
            raise BusError(f"Forgotten node extension of {len(self.data)} bytes is too short")
        name, ttl = _FORGOTTEN.unpack_from(self.data)
        return name, ttl

    def shard(self) -> bytes:
        """A SHARDID extension's 40-byte id."""
        if len(self.data) < NAMELEN:
            raise BusError(f"Shard id extension of {len(self.data)} bytes is too short")
        return self.data[:NAMELEN]


@dataclass(slots=True)
class Message:
    """One clusterMsg: the header's fields, then the body fields of its type (the others keep
    their defaults). ``count``, ``extensions`` and ``totlen`` are not fields: they follow from
    the body."""

    type: int
    sender: bytes                   # 40 bytes
    current_epoch: int = 0
    config_epoch: int = 0
    offset: int = 0
    myslots: bytes = EMPTY_SLOTS    # slot j is bit j%8 of byte j//8 (slot_bit)
    slaveof: bytes = NULL_NAME
    myip: str = ""                  # empty: the receiver takes the link's peer address
    port: int = 0
    pport: int = 0
    cport: int = 0
    flags: int = 0                  # CLUSTER_NODE_* of the sender
    state: int = 0                  # 0 CLUSTER_OK, 1 CLUSTER_FAIL
    mflags: bytes = b"\0\0\0"       # mflags[0] holds FLAG0_*
    ver: int = PROTO_VER
    # PING / PONG / MEET
    gossip: list[Gossip] = field(default_factory=list)
    exts: list[Ext] = field(default_factory=list)
    # FAIL
    about: bytes = NULL_NAME
    # PUBLISH / PUBLISHSHARD
    channel: bytes = b""
    message: bytes = b""
    # UPDATE
    update_epoch: int = 0
    update_name: bytes = NULL_NAME
    update_slots: bytes = EMPTY_SLOTS
    # MODULE
    module_id: int = 0
    module_type: int = 0
    module_payload: bytes = b""


def _fixed(value: bytes, size: int, what: str) -> bytes:
    if len(value) != size:
        raise ValueError(f"{what} must be {size} bytes, not {len(value)}")
    return value


def _ip(value: str, what: str) -> bytes:
    raw = value.encode("latin-1")
    if len(raw) >= NET_IP_STR_LEN or b"\0" in raw:
        raise ValueError(f"{what} {value!r} does not fit in {NET_IP_STR_LEN - 1} characters")
    return raw


def _body_len(msg: Message) -> int:
    t = msg.type
    if t in _GOSSIP_TYPES:
        return GOSSIP_LEN * len(msg.gossip) + sum(EXT_HEADER_LEN + len(e.data) for e in msg.exts)
    if t == FAIL:
        return FAIL_LEN
    if t in (PUBLISH, PUBLISHSHARD):
        return PUBLISH_LEN - 8 + len(msg.channel) + len(msg.message)
    if t == UPDATE:
        return UPDATE_LEN
    if t == MODULE:
        return MODULE_LEN - 3 + len(msg.module_payload)
    return 0   # the failover messages, and types we do not know: the header alone


def encode(msg: Message) -> bytes:
    """The bytes Redis 7.0 sends for ``msg``: totlen, count and extensions follow from the
    body, and FLAG0_EXT_DATA is set when there are extensions (clusterSendPing). A MODULE
    message's id goes out in the sender's byte order, little endian on the machines Redis runs
    on ("Already endian adjusted": modules compare it raw), so ``module_id`` is the value
    moduleTypeEncodeId returns. A value that cannot be written raises ValueError."""
    t = msg.type
    mflags = _fixed(msg.mflags, 3, "mflags")
    gossip_types = t in _GOSSIP_TYPES
    if gossip_types and msg.exts:
        mflags = bytes((mflags[0] | FLAG0_EXT_DATA,)) + mflags[1:]
    totlen = HEADER_LEN + _body_len(msg)
    if totlen > _U32_MASK:
        raise ValueError(f"a message of {totlen} bytes does not fit the bus's 32-bit length")
    buf = bytearray(totlen)
    try:
        _HDR.pack_into(
            buf, 0, SIGNATURE, totlen, msg.ver, msg.port, t,
            len(msg.gossip) if gossip_types else 0,
            msg.current_epoch, msg.config_epoch, msg.offset,
            _fixed(msg.sender, NAMELEN, "sender"), _fixed(msg.myslots, SLOTS_LEN, "myslots"),
            _fixed(msg.slaveof, NAMELEN, "slaveof"), _ip(msg.myip, "myip"),
            len(msg.exts) if gossip_types else 0, b"", msg.pport, msg.cport, msg.flags,
            msg.state, mflags)
        pos = HEADER_LEN
        if gossip_types:
            for g in msg.gossip:
                _GOSSIP.pack_into(buf, pos, _fixed(g.name, NAMELEN, "gossip name"),
                                  g.ping_sent, g.pong_received, _ip(g.ip, "gossip ip"),
                                  g.port, g.cport, g.flags, g.pport, 0)
                pos += GOSSIP_LEN
            for e in msg.exts:
                extlen = EXT_HEADER_LEN + len(e.data)
                if len(e.data) % 8:
                    raise ValueError(f"extension data of {len(e.data)} bytes is not 8-aligned")
                if extlen > 0xFFFF:
                    # clusterProcessPacket reads an extension's length into a uint16_t.
                    raise ValueError(f"an extension of {extlen} bytes is too long for Redis")
                _EXT_HDR.pack_into(buf, pos, extlen, e.type, 0)
                buf[pos + EXT_HEADER_LEN:pos + extlen] = e.data
                pos += extlen
        elif t == FAIL:
            buf[pos:pos + NAMELEN] = _fixed(msg.about, NAMELEN, "about")
        elif t in (PUBLISH, PUBLISHSHARD):
            _PUBLISH_HDR.pack_into(buf, pos, len(msg.channel), len(msg.message))
            pos += 8
            buf[pos:pos + len(msg.channel)] = msg.channel
            pos += len(msg.channel)
            buf[pos:] = msg.message
        elif t == UPDATE:
            _UPDATE.pack_into(buf, pos, msg.update_epoch,
                              _fixed(msg.update_name, NAMELEN, "update_name"),
                              _fixed(msg.update_slots, SLOTS_LEN, "update_slots"))
        elif t == MODULE:
            _MODULE_ID.pack_into(buf, pos, msg.module_id)
            _MODULE_REST.pack_into(buf, pos + 8, len(msg.module_payload), msg.module_type)
            buf[pos + MODULE_LEN - 3:] = msg.module_payload
    except struct.error as e:
        raise ValueError(f"cannot encode {type_name(t)} message: {e}") from e
    return bytes(buf)


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("latin-1")


def decode(frame: bytes) -> Message | None:
    """One message of the bus as clusterProcessPacket reads it, checks in Redis's order:
    totlen below 16, a totlen beyond the frame, or a protocol version other than 1 is ``None``
    (Redis ignores the message without a word); a gossip count or extension that overruns the
    message, an extension length that is not a multiple of 8, or a length other than the
    type's raise BusError with Redis's warning. A type Redis does not know decodes to its
    header (Redis takes it as well formed, then logs "Received unknown packet type").

    As in Redis 7.0: extensions are read only when FLAG0_EXT_DATA is set, and an extension's
    length is read as 16 bits (one of length 0 passes the loop, then fails the length check).
    Bytes past totlen are ignored. A frame shorter than the header (which
    FrameReader never hands over) reads as if padded with zeros, where Redis would read stale
    buffer bytes."""
    n = len(frame)
    if n < 8:
        return None
    (totlen,) = _U32.unpack_from(frame, 4)
    if totlen < 16 or totlen > n:
        return None
    buf = frame
    if totlen < HEADER_LEN + PUBLISH_LEN:
        buf = bytes(frame[:totlen]) + bytes(HEADER_LEN + PUBLISH_LEN - totlen)
    (_sig, _totlen, ver, port, t, count, current_epoch, config_epoch, offset, sender, myslots,
     slaveof, myip, extensions, _unused, pport, cport, flags, state, mflags) = \
        _HDR.unpack_from(buf, 0)
    if ver != PROTO_VER:
        return None

    name = type_name(t)
    gossip: list[Gossip] = []
    exts: list[Ext] = []
    if t in _GOSSIP_TYPES:
        explen = HEADER_LEN + GOSSIP_LEN * count
        if totlen < explen:
            raise BusError(f"Received invalid {name} packet with gossip count {count} that "
                           f"exceeds total packet length ({totlen})")
        if mflags[0] & FLAG0_EXT_DATA:
            for _ in range(extensions):
                if totlen - explen < EXT_HEADER_LEN:
                    raise BusError(f"Received invalid {name} packet with extension data that "
                                   f"exceeds total packet length ({totlen})")
                extlen, ext_type, _ = _EXT_HDR.unpack_from(buf, explen)
                extlen &= 0xFFFF
                if extlen % 8:
                    raise BusError(f"Received a {name} packet without proper padding "
                                   f"({extlen} bytes)")
                if totlen - explen < extlen:
                    raise BusError(f"Received invalid {name} packet with extension data that "
                                   f"exceeds total packet length ({totlen})")
                exts.append(Ext(ext_type, bytes(buf[explen + EXT_HEADER_LEN:explen + extlen])))
                explen += extlen
        gossip = [Gossip(g[0], g[1], g[2], _cstr(g[3]), g[4], g[5], g[6], g[7])
                  for g in _GOSSIP.iter_unpack(buf[HEADER_LEN:HEADER_LEN + GOSSIP_LEN * count])]
    elif t == FAIL:
        explen = HEADER_LEN + FAIL_LEN
    elif t in (PUBLISH, PUBLISHSHARD):
        channel_len, message_len = _PUBLISH_HDR.unpack_from(buf, HEADER_LEN)
        explen = (HEADER_LEN + PUBLISH_LEN - 8 + channel_len + message_len) & _U32_MASK
    elif t in _HEADER_ONLY_TYPES:
        explen = HEADER_LEN
    elif t == UPDATE:
        explen = HEADER_LEN + UPDATE_LEN
    elif t == MODULE:
        (module_len,) = _U32.unpack_from(buf, HEADER_LEN + 8)
        explen = (HEADER_LEN + MODULE_LEN - 3 + module_len) & _U32_MASK
    else:
        explen = totlen
    if totlen != explen:
        raise BusError(f"Received invalid {name} packet of length {totlen} but expected "
                       f"length {explen}")

    msg = Message(type=t, sender=sender, current_epoch=current_epoch,
                  config_epoch=config_epoch, offset=offset, myslots=myslots, slaveof=slaveof,
                  myip=_cstr(myip[:NET_IP_STR_LEN - 1]), port=port, pport=pport, cport=cport,
                  flags=flags, state=state, mflags=mflags, ver=ver, gossip=gossip, exts=exts)
    body = HEADER_LEN
    if t == FAIL:
        msg.about = bytes(buf[body:body + NAMELEN])
    elif t in (PUBLISH, PUBLISHSHARD):
        if HEADER_LEN + 8 + channel_len + message_len != totlen:
            # Redis's 32-bit sum wrapped: it would copy gigabytes past the message.
            raise BusError(f"Received invalid {name} packet with channel and message lengths "
                           f"({channel_len}, {message_len}) that exceed its length ({totlen})")
        body += 8
        msg.channel = bytes(buf[body:body + channel_len])
        msg.message = bytes(buf[body + channel_len:totlen])
    elif t == UPDATE:
        msg.update_epoch, msg.update_name, msg.update_slots = _UPDATE.unpack_from(buf, body)
    elif t == MODULE:
        if HEADER_LEN + MODULE_LEN - 3 + module_len != totlen:
            raise BusError(f"Received invalid module packet with payload length {module_len} "
                           f"that exceeds its length ({totlen})")
        (msg.module_id,) = _MODULE_ID.unpack_from(buf, body)
        msg.module_type = buf[body + 12]
        msg.module_payload = bytes(buf[body + MODULE_LEN - 3:totlen])
    return msg


class FrameReader:
    """Sans-io framing of one link's byte stream (clusterReadHandler): feed bytes with
    ``receive_data`` (``b""`` is EOF: a partial message is then dropped with the link, as
    Redis drops it), take whole messages with ``next_frame`` until it returns None.

    The first 8 bytes of each message are checked as soon as they arrive: a signature other
    than "RCmb" or a totlen below the header's size is a BusError (Redis logs it and frees the
    link), and so is, as pyrepl's own backpressure limit, a totlen above ``max_len``; once
    raised, the error is raised again by every call. The buffer holds what the caller fed and
    has not taken, so a caller that drains after each read holds at most one partial message
    (bounded by ``max_len``) and one read."""

    BAD_HEADER = "Bad message length or signature received from Cluster bus."

    def __init__(self, max_len: int = MAX_FRAME_LEN) -> None:
        self.max_len = max_len
        self.eof = False
        self._buf = bytearray()
        self._error: str | None = None

    def receive_data(self, data: bytes) -> None:
        if not data:
            self.eof = True
            return
        self._buf += data

    def buffered(self) -> int:
        """Bytes received and not yet handed over as a frame."""
        return len(self._buf)

    def next_frame(self) -> bytes | None:
        if self._error is not None:
            raise BusError(self._error)
        buf = self._buf
        if len(buf) < 8:
            return None
        (totlen,) = _U32.unpack_from(buf, 4)
        if buf[:4] != SIGNATURE or totlen < CLUSTERMSG_MIN_LEN:
            self._error = self.BAD_HEADER
        elif totlen > self.max_len:
            self._error = (f"Cluster bus message of {totlen} bytes exceeds the limit of "
                           f"{self.max_len} bytes.")
        if self._error is not None:
            raise BusError(self._error)
        if len(buf) < totlen:
            return None
        frame = bytes(buf[:totlen])
        del buf[:totlen]
        return frame
