"""The cluster bus codec (pyrepl.cluster.wire) against Redis 7.0.15's layout: golden frames
written field by field at cluster.h's static-asserted offsets (not with the codec's struct
formats), round trips of every type, clusterProcessPacket's length checks with Redis's exact
warnings, clusterReadHandler's framing, and truncated or corrupted frames that must give a
Message, None or BusError, never another exception."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pyrepl.cluster import wire
from pyrepl.cluster.wire import (
    FAIL,
    FAILOVER_AUTH_ACK,
    FAILOVER_AUTH_REQUEST,
    MEET,
    MFSTART,
    MODULE,
    NULL_NAME,
    PING,
    PONG,
    PUBLISH,
    PUBLISHSHARD,
    UPDATE,
    BusError,
    Ext,
    FrameReader,
    Gossip,
    Message,
    decode,
    encode,
)

SENDER = b"0123456789abcdef0123456789abcdef01234567"
OTHER = b"fedcba9876543210fedcba9876543210fedcba98"
THIRD = b"e7d1b5a3c9f00112233445566778899aabbccdde"


def put(buf: bytearray, off: int, value: int, size: int) -> None:
    buf[off:off + size] = value.to_bytes(size, "big")


def header(totlen: int, mtype: int, *, count: int = 0, extensions: int = 0,
           mflags0: int = 0) -> bytearray:
    """The header of golden_message() built by hand at the C offsets."""
    b = bytearray(totlen)
    b[0:4] = b"RCmb"
    put(b, 4, totlen, 4)
    put(b, 8, 1, 2)                       # ver
    put(b, 10, 30001, 2)                  # port
    put(b, 12, mtype, 2)
    put(b, 14, count, 2)
    put(b, 16, 0x0102030405060708, 8)     # currentEpoch
    put(b, 24, 0x1112131415161718, 8)     # configEpoch
    put(b, 32, 0x2122232425262728, 8)     # offset
    b[40:80] = SENDER
    b[80] = 0b00100001                    # slots 0 and 5
    b[80 + 2047] = 0x80                   # slot 16383
    b[2128:2168] = OTHER                  # slaveof
    b[2168:2168 + 9] = b"10.0.0.42"       # myip
    put(b, 2214, extensions, 2)
    put(b, 2246, 30002, 2)                # pport
    put(b, 2248, 40001, 2)                # cport
    put(b, 2250, 0x0202, 2)               # flags
    b[2252] = 1                           # state
    b[2253:2256] = bytes((mflags0 | wire.FLAG0_PAUSED, 0x7E, 0x7F))
    return b


def golden_message(mtype: int, **body: object) -> Message:
    return Message(mtype, SENDER, current_epoch=0x0102030405060708,
                   config_epoch=0x1112131415161718, offset=0x2122232425262728,
                   myslots=wire.bitmap_of([0, 5, 16383]), slaveof=OTHER, myip="10.0.0.42",
                   port=30001, pport=30002, cport=40001, flags=0x0202, state=1,
                   mflags=bytes((wire.FLAG0_PAUSED, 0x7E, 0x7F)), **body)  # type: ignore[arg-type]


# -- constants and helpers ------------------------------------------------------------------


def test_sizes_and_types_are_redis_s() -> None:
    assert (wire.HEADER_LEN, wire.GOSSIP_LEN, wire.MSG_LEN) == (2256, 104, 2256 + 2096)
    assert wire.CLUSTERMSG_MIN_LEN == 2256 and wire.CLUSTER_SLOTS == 16384
    assert (PING, PONG, MEET, FAIL, PUBLISH, FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, UPDATE,
            MFSTART, MODULE, PUBLISHSHARD) == tuple(range(11)) and wire.TYPE_COUNT == 11
    names = [wire.type_name(t) for t in range(11)]
    assert names == ["ping", "pong", "meet", "fail", "publish", "auth-req", "auth-ack",
                     "update", "mfstart", "module", "publishshard"]
    assert wire.type_name(11) == wire.type_name(65535) == wire.type_name(-1) == "unknown"


def test_bitmap_helpers_follow_bitmapTestBit() -> None:
    bm = wire.bitmap_of([0, 9, 16383])
    assert len(bm) == 2048 and bm[0] == 1 and bm[1] == 2 and bm[2047] == 0x80
    assert sum(bm) == 1 + 2 + 0x80
    assert [s for s in (0, 1, 8, 9, 16382, 16383) if wire.slot_bit(bm, s)] == [0, 9, 16383]
    assert wire.slots_of(bm) == [0, 9, 16383]
    assert wire.slots_of(wire.EMPTY_SLOTS) == []
    assert wire.slots_of(b"\xff" * 2048) == list(range(16384))
    with pytest.raises(ValueError):
        wire.bitmap_of([16384])


def test_name_str_reads_up_to_the_first_nul() -> None:
    assert wire.name_str(SENDER) == SENDER.decode()
    assert wire.name_str(NULL_NAME) == ""
    assert wire.name_str(b"abc" + bytes(37)) == "abc"


def test_ext_helpers() -> None:
    assert Ext.hostname("abcdef") == Ext(wire.EXT_HOSTNAME, b"abcdef\0\0")
    assert Ext.hostname("abcdefg").data == b"abcdefg\0"
    assert Ext.hostname("abcdefgh").data == b"abcdefgh" + bytes(8)
    assert Ext.hostname("").data == bytes(8)
    assert Ext.human_nodename("node-1") == Ext(wire.EXT_HUMAN_NODENAME, b"node-1\0\0")
    assert Ext.hostname("host.example").text() == "host.example"
    ext = Ext.forgotten_node(OTHER, 60)
    assert ext == Ext(wire.EXT_FORGOTTEN_NODE, OTHER + (60).to_bytes(8, "big"))
    assert ext.forgotten() == (OTHER, 60)
    assert Ext.shard_id(THIRD) == Ext(wire.EXT_SHARDID, THIRD) and Ext.shard_id(THIRD).shard() \
        == THIRD
    with pytest.raises(ValueError):
        Ext.hostname("a\0b")
    with pytest.raises(ValueError):
        Ext.shard_id(b"short")
    with pytest.raises(BusError):
        Ext(wire.EXT_FORGOTTEN_NODE, bytes(40)).forgotten()


# -- golden frames ----------------------------------------------------------------------------


def test_golden_ping_with_gossip_and_hostname() -> None:
    g = Gossip(THIRD, 1_700_000_000, 1_700_000_001, "192.168.1.7", 7000, 17000, 0x0009, 7100)
    msg = golden_message(PING, gossip=[g], exts=[Ext.hostname("myhost")])
    exp = header(2256 + 104 + 16, PING, count=1, extensions=1, mflags0=wire.FLAG0_EXT_DATA)
    # clusterMsgDataGossip at data
    exp[2256:2296] = THIRD
    put(exp, 2296, 1_700_000_000, 4)
    put(exp, 2300, 1_700_000_001, 4)
    exp[2304:2304 + 11] = b"192.168.1.7"
    put(exp, 2350, 7000, 2)
    put(exp, 2352, 17000, 2)
    put(exp, 2354, 0x0009, 2)
    put(exp, 2356, 7100, 2)
    # clusterMsgPingExt after the gossip: length (with the header), type, unused, payload
    put(exp, 2360, 16, 4)
    put(exp, 2364, wire.EXT_HOSTNAME, 2)
    exp[2368:2376] = b"myhost\0\0"
    assert encode(msg) == bytes(exp)
    got = decode(bytes(exp))
    msg.mflags = bytes((wire.FLAG0_PAUSED | wire.FLAG0_EXT_DATA, 0x7E, 0x7F))
    assert got == msg


def test_golden_header_only_messages() -> None:
    for t in (FAILOVER_AUTH_REQUEST, FAILOVER_AUTH_ACK, MFSTART, PING, PONG, MEET, 77):
        exp = bytes(header(2256, t))
        assert encode(golden_message(t)) == exp
        assert decode(exp) == golden_message(t)


def test_golden_fail() -> None:
    exp = header(2296, FAIL)
    exp[2256:2296] = THIRD
    assert encode(golden_message(FAIL, about=THIRD)) == bytes(exp)
    assert decode(bytes(exp)) == golden_message(FAIL, about=THIRD)


@pytest.mark.parametrize("mtype", [PUBLISH, PUBLISHSHARD])
def test_golden_publish(mtype: int) -> None:
    exp = header(2256 + 8 + 4 + 6, mtype)
    put(exp, 2256, 4, 4)
    put(exp, 2260, 6, 4)
    exp[2264:2274] = b"newshello!"
    msg = golden_message(mtype, channel=b"news", message=b"hello!")
    assert encode(msg) == bytes(exp)
    assert decode(bytes(exp)) == msg
    empty = golden_message(mtype)
    assert len(encode(empty)) == 2264 and decode(encode(empty)) == empty


def test_golden_update() -> None:
    slots = wire.bitmap_of(range(100, 200))
    exp = header(2256 + 8 + 40 + 2048, UPDATE)
    put(exp, 2256, 0x3132333435363738, 8)
    exp[2264:2304] = THIRD
    exp[2304:4352] = slots
    msg = golden_message(UPDATE, update_epoch=0x3132333435363738, update_name=THIRD,
                         update_slots=slots)
    assert len(exp) == wire.MSG_LEN
    assert encode(msg) == bytes(exp)
    assert decode(bytes(exp)) == msg


def test_golden_module() -> None:
    # clusterSendModule: the id goes out as the sender holds it ("Already endian adjusted"),
    # little endian on x86 and arm64; len is htonl; type a byte; the payload at offset 13.
    exp = header(2256 + 13 + 5, MODULE)
    exp[2256:2264] = (0x0A0B0C0D0E0F1011).to_bytes(8, "little")
    put(exp, 2264, 5, 4)
    exp[2268] = 200
    exp[2269:2274] = b"abcde"
    msg = golden_message(MODULE, module_id=0x0A0B0C0D0E0F1011, module_type=200,
                         module_payload=b"abcde")
    assert encode(msg) == bytes(exp)
    assert decode(bytes(exp)) == msg


def test_encode_rejects_what_cannot_go_on_the_wire() -> None:
    for bad in (Message(PING, b"short"), Message(PING, SENDER, myip="1" * 46),
                Message(PING, SENDER, myslots=bytes(10)), Message(PING, SENDER, port=65536),
                Message(PING, SENDER, mflags=b"\0"), Message(FAIL, SENDER, about=b""),
                Message(PING, SENDER, exts=[Ext(0, b"abc")]),
                Message(PING, SENDER, exts=[Ext(0, bytes(65528))]),
                Message(PING, SENDER, gossip=[Gossip(b"x", 0, 0, "", 0, 0, 0, 0)])):
        with pytest.raises(ValueError):
            encode(bad)
    assert len(encode(Message(PING, SENDER, exts=[Ext(0, bytes(65520))]))) == 2256 + 65528


# -- round trips ------------------------------------------------------------------------------

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 2**64 - 1)
names = st.one_of(st.just(NULL_NAME), st.binary(min_size=40, max_size=40),
                  st.text("0123456789abcdef", min_size=40, max_size=40).map(str.encode))
ips = st.text(st.characters(min_codepoint=1, max_codepoint=255), max_size=45)
bitmaps = st.one_of(st.just(wire.EMPTY_SLOTS),
                    st.lists(st.integers(0, 16383), max_size=30).map(wire.bitmap_of),
                    st.binary(min_size=2048, max_size=2048))
gossips = st.builds(Gossip, names, u32, u32, ips, u16, u16, u16, u16)
ext_texts = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=30)
exts = st.one_of(
    ext_texts.map(Ext.hostname),
    ext_texts.map(Ext.human_nodename),
    st.builds(Ext.forgotten_node, names, u64),
    names.map(Ext.shard_id),
    st.builds(Ext, u16, st.integers(0, 6).flatmap(
        lambda n: st.binary(min_size=8 * n, max_size=8 * n))),
)


@st.composite
def messages(draw: st.DrawFn, mtype: st.SearchStrategy[int] | None = None) -> Message:
    t = draw(mtype if mtype is not None else st.one_of(st.integers(0, 10), u16))
    m = Message(t, draw(names), draw(u64), draw(u64), draw(u64), draw(bitmaps), draw(names),
                draw(ips), draw(u16), draw(u16), draw(u16), draw(u16), draw(u8),
                draw(st.binary(min_size=3, max_size=3)))
    if t in (PING, PONG, MEET):
        m.gossip = draw(st.lists(gossips, max_size=4))
        m.exts = draw(st.lists(exts, max_size=4))
        if m.exts:   # encode sets FLAG0_EXT_DATA, decode reports it
            m.mflags = bytes((m.mflags[0] | wire.FLAG0_EXT_DATA,)) + m.mflags[1:]
    elif t == FAIL:
        m.about = draw(names)
    elif t in (PUBLISH, PUBLISHSHARD):
        m.channel = draw(st.binary(max_size=40))
        m.message = draw(st.binary(max_size=200))
    elif t == UPDATE:
        m.update_epoch, m.update_name, m.update_slots = draw(u64), draw(names), draw(bitmaps)
    elif t == MODULE:
        m.module_id, m.module_type = draw(u64), draw(u8)
        m.module_payload = draw(st.binary(max_size=100))
    return m


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("mtype", list(range(11)) + [11, 4242],
                         ids=lambda t: wire.type_name(t) if t < 11 else f"type{t}")
@FAST
@given(data=st.data())
def test_round_trip(mtype: int, data: st.DataObject) -> None:
    m = data.draw(messages(st.just(mtype)))
    frame = encode(m)
    assert int.from_bytes(frame[4:8], "big") == len(frame)
    assert decode(frame) == m
    r = FrameReader()
    r.receive_data(frame + frame[:100])
    assert r.next_frame() == frame and r.next_frame() is None and r.buffered() == 100


@FAST
@given(msgs=st.lists(messages(), min_size=1, max_size=4), cuts=st.lists(st.integers(0, 9000)))
def test_frame_reader_splits_anywhere(msgs: list[Message], cuts: list[int]) -> None:
    stream = b"".join(encode(m) for m in msgs)
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    r = FrameReader()
    got = []
    for a, b in pairwise(bounds):
        r.receive_data(stream[a:b])
        while (f := r.next_frame()) is not None:
            got.append(decode(f))
    assert got == msgs and r.buffered() == 0


# -- clusterProcessPacket's sanity checks -----------------------------------------------------


def forged(mtype: int, *, extra: bytes = b"", count: int | None = None,
           extensions: int | None = None, mflags0: int | None = None, ver: int | None = None,
           body32: tuple[int, int] | None = None) -> bytes:
    """A frame with header fields overwritten; totlen stays the frame's length."""
    b = bytearray(encode(Message(mtype, SENDER)) + extra)
    put(b, 4, len(b), 4)
    if count is not None:
        put(b, 14, count, 2)
    if extensions is not None:
        put(b, 2214, extensions, 2)
    if mflags0 is not None:
        b[2253] = mflags0
    if ver is not None:
        put(b, 8, ver, 2)
    if body32 is not None:
        put(b, 2256 + body32[0], body32[1], 4)
    return bytes(b)


def ext_bytes(length: int, etype: int = 0, pad: int | None = None) -> bytes:
    return length.to_bytes(4, "big") + etype.to_bytes(2, "big") + bytes(2) \
        + bytes(max(0, length - 8) if pad is None else pad)


E = wire.FLAG0_EXT_DATA
CASES = [
    (forged(PING, extra=bytes(44), count=3),
     "Received invalid ping packet with gossip count 3 that exceeds total packet length (2300)"),
    (forged(MEET, extra=bytes(103), count=1),
     "Received invalid meet packet with gossip count 1 that exceeds total packet length (2359)"),
    (forged(MEET, extra=bytes(4), extensions=1, mflags0=E),
     "Received invalid meet packet with extension data that exceeds total packet length "
     "(2260)"),
    (forged(PONG, extra=ext_bytes(12, pad=8), extensions=1, mflags0=E),
     "Received a pong packet without proper padding (12 bytes)"),
    (forged(PING, extra=ext_bytes(24, pad=8), extensions=1, mflags0=E),
     "Received invalid ping packet with extension data that exceeds total packet length "
     "(2272)"),
    (forged(PING, extra=ext_bytes(16) + ext_bytes(16), extensions=3, mflags0=E),
     "Received invalid ping packet with extension data that exceeds total packet length "
     "(2288)"),
    (forged(PING, extra=ext_bytes(16), extensions=1),   # no EXT_DATA flag: not extensions
     "Received invalid ping packet of length 2272 but expected length 2256"),
    (forged(PING, extra=bytes(8), extensions=0, mflags0=E),
     "Received invalid ping packet of length 2264 but expected length 2256"),
    (forged(FAILOVER_AUTH_REQUEST, extra=bytes(8)),
     "Received invalid auth-req packet of length 2264 but expected length 2256"),
    (forged(FAILOVER_AUTH_ACK, extra=bytes(1)),
     "Received invalid auth-ack packet of length 2257 but expected length 2256"),
    (forged(MFSTART, extra=bytes(40)),
     "Received invalid mfstart packet of length 2296 but expected length 2256"),
    (forged(PUBLISH, body32=(0, 5)),
     "Received invalid publish packet of length 2264 but expected length 2269"),
    (forged(PUBLISHSHARD, extra=bytes(3), body32=(4, 5)),
     "Received invalid publishshard packet of length 2267 but expected length 2269"),
    (forged(MODULE, extra=bytes(2), body32=(8, 1)),
     "Received invalid module packet of length 2271 but expected length 2270"),
]


def short_fail() -> bytes:
    b = bytearray(encode(Message(FAIL, SENDER))[:2256])
    put(b, 4, 2256, 4)
    return bytes(b)


def short_update() -> bytes:
    b = bytearray(encode(Message(UPDATE, SENDER))[:4000])
    put(b, 4, 4000, 4)
    return bytes(b)


CASES += [
    (short_fail(), "Received invalid fail packet of length 2256 but expected length 2296"),
    (short_update(), "Received invalid update packet of length 4000 but expected length 4352"),
]


@pytest.mark.parametrize("frame,text", CASES, ids=[t[:40] for _, t in CASES])
def test_length_checks_give_redis_s_warning(frame: bytes, text: str) -> None:
    assert int.from_bytes(frame[4:8], "big") == len(frame)
    with pytest.raises(BusError) as e:
        decode(frame)
    assert str(e.value) == text
    r = FrameReader()           # framing accepts it: the check is the packet's
    r.receive_data(frame)
    assert r.next_frame() == frame


def test_ignored_silently() -> None:
    assert decode(b"") is None and decode(b"RCmb\0\0\0") is None
    tiny = bytearray(16)
    put(tiny, 4, 15, 4)
    assert decode(bytes(tiny)) is None                    # totlen < 16
    assert decode(forged(PING, ver=0)) is None            # another protocol version
    assert decode(forged(PING, ver=2)) is None
    assert decode(encode(Message(PING, SENDER))[:-1]) is None   # totlen beyond the frame


def test_extension_lengths_are_read_as_16_bits_as_redis_does() -> None:
    # clusterProcessPacket: uint16_t extlen = getPingExtLength(ext)
    frame = forged(PING, extra=ext_bytes(0x10010, pad=8), extensions=1, mflags0=E)
    m = decode(frame)
    assert m is not None and m.exts == [Ext(0, bytes(8))]
    with pytest.raises(BusError, match=r"without proper padding \(1 bytes\)"):
        decode(forged(PING, extra=ext_bytes(0x10001, pad=8), extensions=1, mflags0=E))


def test_zero_length_extension_ends_in_the_length_check() -> None:
    # Redis adds 0 to explen and reads the same extension again; the 8 bytes of its header
    # then stay outside explen, so the totlen check rejects the message.
    frame = forged(PONG, extra=ext_bytes(0, etype=3, pad=0), extensions=2, mflags0=E)
    with pytest.raises(BusError, match="pong packet of length 2264 but expected length 2256"):
        decode(frame)


def test_unknown_extension_types_are_kept_raw() -> None:
    m = Message(MEET, SENDER, exts=[Ext(4, bytes(range(40))), Ext(999, b""),
                                    Ext.hostname("h")])
    got = decode(encode(m))
    assert got is not None and got.exts == m.exts
    assert got.mflags[0] & wire.FLAG0_EXT_DATA


def test_unknown_type_decodes_its_header() -> None:
    frame = forged(200, extra=b"whatever follows")
    m = decode(frame)
    assert m is not None and m.type == 200 and m.sender == SENDER and m.gossip == []
    assert wire.type_name(m.type) == "unknown"


def test_wrapped_publish_and_module_lengths_are_rejected() -> None:
    # channel_len + message_len wraps Redis's 32-bit explen back to totlen
    frame = forged(PUBLISH, extra=bytes(4), body32=(0, 0xFFFFFFFF))
    frame = frame[:2260] + (5).to_bytes(4, "big") + frame[2264:]
    with pytest.raises(BusError, match="channel and message lengths"):
        decode(frame)
    # 2269 + 0xFFFFFFFF wraps to 2268: a 12-byte body whose len field claims 4GB
    b = bytearray(forged(MODULE, body32=(8, 0xFFFFFFFF))[:2268])
    put(b, 4, 2268, 4)
    frame = bytes(b)
    with pytest.raises(BusError, match="payload length"):
        decode(frame)


def test_myip_is_read_up_to_45_characters() -> None:
    b = bytearray(encode(Message(PING, SENDER)))
    b[2168:2214] = b"9" * 46
    m = decode(bytes(b))
    assert m is not None and m.myip == "9" * 45


# -- framing ----------------------------------------------------------------------------------


def test_frame_reader_rejects_bad_signature_and_short_length() -> None:
    good = encode(Message(PING, SENDER))
    for bad in (b"RCmc" + good[4:], good[:4] + (2255).to_bytes(4, "big") + good[8:],
                good[:4] + (16).to_bytes(4, "big")):
        r = FrameReader()
        r.receive_data(bad[:7])
        assert r.next_frame() is None       # 8 bytes are needed to judge
        r.receive_data(bad[7:8])
        for _ in range(2):                  # and the error stays
            with pytest.raises(BusError) as e:
                r.next_frame()
            assert str(e.value) == "Bad message length or signature received from Cluster bus."


def test_frame_reader_limit_and_eof() -> None:
    big = encode(Message(PUBLISH, SENDER, message=bytes(5000)))
    r = FrameReader(max_len=4096)
    r.receive_data(big[:8])
    with pytest.raises(BusError, match="exceeds the limit of 4096 bytes"):
        r.next_frame()
    r = FrameReader()
    assert r.max_len >= 2 * 512 * 1024 * 1024
    r.receive_data(big[:3000])
    r.receive_data(b"")
    assert r.eof and r.next_frame() is None and r.buffered() == 3000


# -- corruption -------------------------------------------------------------------------------


def feed(stream: bytes, max_len: int = 1 << 20) -> None:
    """Feed a stream through FrameReader and decode each frame: only Message, None or
    BusError may come out."""
    r = FrameReader(max_len=max_len)
    r.receive_data(stream)
    while True:
        try:
            f = r.next_frame()
        except BusError:
            return
        if f is None:
            return
        try:
            m = decode(f)
        except BusError:
            continue
        assert m is None or isinstance(m, Message)


SAMPLES = [
    encode(golden_message(PING, gossip=[Gossip(THIRD, 1, 2, "::1", 3, 4, 5, 6)] * 2,
                          exts=[Ext.hostname("x" * 20), Ext.shard_id(OTHER)])),
    encode(golden_message(FAIL, about=THIRD)),
    encode(golden_message(PUBLISH, channel=b"ch", message=b"m" * 30)),
    encode(golden_message(MODULE, module_payload=b"p" * 11)),
    encode(golden_message(UPDATE, update_name=OTHER)),
    encode(golden_message(MFSTART)),
]


@pytest.mark.parametrize("i", range(len(SAMPLES)))
def test_every_prefix(i: int) -> None:
    frame = SAMPLES[i]
    for n in range(len(frame)):
        feed(frame[:n])
        assert decode(frame[:n]) is None    # its totlen lies beyond the prefix
        # and the prefix taken as a whole message (totlen rewritten to its length)
        if n >= 8:
            cut = frame[:4] + n.to_bytes(4, "big") + frame[8:n]
            try:
                m = decode(cut)
            except BusError:
                continue
            assert m is None or isinstance(m, Message)


@settings(max_examples=300, deadline=None)
@given(i=st.integers(0, len(SAMPLES) - 1),
       flips=st.lists(st.tuples(st.integers(0, 5000), u8), min_size=1, max_size=6),
       hot=st.lists(st.sampled_from([4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 2214, 2215, 2253,
                                     2256, 2257, 2258, 2259, 2260, 2261, 2262, 2263, 2264,
                                     2265, 2266, 2267, 2268, 2360, 2361, 2362, 2363]),
                    max_size=4),
       hotval=u8)
def test_byte_flips(i: int, flips: list[tuple[int, int]], hot: list[int], hotval: int) -> None:
    b = bytearray(SAMPLES[i])
    for pos, val in flips:
        b[pos % len(b)] = val
    for pos in hot:          # the bytes that steer the parser: lengths, counts, types, flags
        if pos < len(b):
            b[pos] = hotval
    stream = bytes(b)
    feed(stream)
    feed(stream + SAMPLES[(i + 1) % len(SAMPLES)])
    try:
        m = decode(stream)
        assert m is None or isinstance(m, Message)
    except BusError:
        pass


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(min_size=8, max_size=2600), mtype=st.integers(0, 12), flag=u8)
def test_arbitrary_bytes_as_a_message(raw: bytes, mtype: int, flag: int) -> None:
    b = bytearray(raw)
    put(b, 4, len(b), 4)
    if len(b) >= 14:
        put(b, 8, 1, 2)
        put(b, 12, mtype, 2)
    if len(b) > 2253:
        b[2253] = flag
    try:
        m = decode(bytes(b))
        assert m is None or isinstance(m, Message)
    except BusError:
        pass
