"""Publish/subscribe: who listens to which channel or pattern, and delivery (Redis's pubsub.c).

Theory of operation: the server keeps three registries, channel -> subscribers, pattern ->
subscribers and shard channel -> subscribers (SSUBSCRIBE/SPUBLISH: no patterns), each an
insertion-ordered dict so delivery follows subscription order as Redis's client lists do. A
client's own side is a :class:`Subscriptions` on ``Client.subs``, ``None`` while it has none:
the dispatcher's one test for subscribe mode (RESP2 allows only the (P|S)(UN)SUBSCRIBE / PING /
QUIT / RESET commands then; RESP3 allows everything and receives messages as ``>`` pushes).

Every (un)subscription is confirmed with a ``subscribe``/``unsubscribe``/... frame carrying
the client's count (channels + patterns; shard channels count apart), written straight into
the client's output. :meth:`PubSub.publish` writes ``message``/``pmessage``/``smessage`` frames
into every subscriber's output and queues it for the shell's flush (``core.pending_flush``).

Output limits: while a subscriber's socket is over its high-water mark the shell stops handing
it output (``Client.write_paused``), so messages wait in ``Client.out`` and are counted in
``Client.obuf_held``; the ``client-output-buffer-limit`` of the client's class (``pubsub`` for a
subscribed client, as Redis's getClientType) is checked against that count as each message is
added: past the hard limit, or past the soft limit for longer than its seconds, the client is
closed and ``client_output_buffer_limit_disconnections`` counted, as Redis does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrepl.keyspace.glob import compile_pattern

if TYPE_CHECKING:
    from pyrepl.core.client import Client
    from pyrepl.core.ports import PubSubHost

Registry = dict[bytes, dict["Client", None]]


class Subscriptions:
    """One client's channels, patterns and shard channels (insertion-ordered)."""

    __slots__ = ("channels", "patterns", "shard")

    def __init__(self) -> None:
        self.channels: dict[bytes, None] = {}
        self.patterns: dict[bytes, None] = {}
        self.shard: dict[bytes, None] = {}

    def count(self) -> int:
        """Redis's clientSubscriptionsCount: channels and patterns."""
        return len(self.channels) + len(self.patterns)

    def total(self) -> int:
        return len(self.channels) + len(self.patterns) + len(self.shard)


class Push(bytes):
    """A push frame in a client's output: CLIENT REPLY OFF/SKIP never drops it."""

    __slots__ = ()


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _frame(proto: int, kind: bytes, *parts: bytes) -> bytes:
    """A push frame of three elements (four for ``pmessage``): ``*`` in RESP2, ``>`` in RESP3;
    ``parts`` are already encoded."""
    n = 4 if kind == b"pmessage" else 3
    return Push((b"*%d\r\n" if proto == 2 else b">%d\r\n") % n + _bulk(kind) + b"".join(parts))


def _null(proto: int) -> bytes:
    return b"$-1\r\n" if proto == 2 else b"_\r\n"


class PubSub:
    def __init__(self, core: PubSubHost) -> None:
        self.core = core
        self.channels: Registry = {}
        self.patterns: Registry = {}
        self.shard_channels: Registry = {}

    # -- subscriptions ------------------------------------------------------------------------
    @staticmethod
    def _subs(c: Client) -> Subscriptions:
        subs: Subscriptions | None = c.subs
        c.mem_quiet = False    # (maxmemory-clients: counted after this read)
        if subs is None:
            subs = c.subs = Subscriptions()
            if c.kind == "normal":
                c.kind = "pubsub"
        return subs

    @staticmethod
    def _settle(c: Client) -> None:
        """Leave pubsub mode when the last subscription is gone."""
        subs = c.subs
        if subs is not None and not subs.total():
            c.subs = None
            if c.kind == "pubsub":
                c.kind = "normal"

    def subscribe(self, c: Client, channels: list[bytes], shard: bool = False) -> None:
        subs = self._subs(c)
        mine = subs.shard if shard else subs.channels
        registry = self.shard_channels if shard else self.channels
        kind = b"ssubscribe" if shard else b"subscribe"
        for ch in channels:
            if ch not in mine:
                mine[ch] = None
                registry.setdefault(ch, {})[c] = None
            n = len(subs.shard) if shard else subs.count()
            c.out.append(_frame(c.proto, kind, _bulk(ch), b":%d\r\n" % n))

    def psubscribe(self, c: Client, patterns: list[bytes]) -> None:
        subs = self._subs(c)
        for pat in patterns:
            if pat not in subs.patterns:
                subs.patterns[pat] = None
                self.patterns.setdefault(pat, {})[c] = None
            c.out.append(_frame(c.proto, b"psubscribe", _bulk(pat), b":%d\r\n" % subs.count()))

    def unsubscribe(self, c: Client, channels: list[bytes], shard: bool = False,
                    notify: bool = True) -> int:
        """UNSUBSCRIBE / SUNSUBSCRIBE: the given channels, or all of the client's when none
        (one frame with a null channel when it had none). Returns how many were dropped."""
        return self._drop(c, channels, self.shard_channels if shard else self.channels,
                          b"sunsubscribe" if shard else b"unsubscribe", "shard" if shard
                          else "channels", notify)

    def remove_shard_channels_in_slot(self, slot: int) -> None:
        """removeChannelsInSlot: the slot left this shard, so every client subscribed to one
        of its shard channels is unsubscribed from it (and told so)."""
        from pyrepl.keyspace.hashslot import key_hash_slot
        for ch in [ch for ch in self.shard_channels if key_hash_slot(ch) == slot]:
            for c in list(self.shard_channels.get(ch, ())):
                self.unsubscribe(c, [ch], shard=True)
                if len(c.out) == 1:     # (its first output since the last flush)
                    self.core.pending_flush.append(c)

    def punsubscribe(self, c: Client, patterns: list[bytes], notify: bool = True) -> int:
        return self._drop(c, patterns, self.patterns, b"punsubscribe", "patterns", notify)

    def _drop(self, c: Client, names: list[bytes], registry: Registry, kind: bytes,
              field: str, notify: bool) -> int:
        subs = c.subs
        mine: dict[bytes, None] = getattr(subs, field) if subs is not None else {}
        dropped = 0
        for name in names or list(mine):
            if name in mine:
                del mine[name]
                dropped += 1
                listeners = registry[name]
                del listeners[c]
                if not listeners:
                    del registry[name]
            if notify:
                n = 0 if subs is None else (len(subs.shard) if field == "shard"
                                            else subs.count())
                c.out.append(_frame(c.proto, kind, _bulk(name), b":%d\r\n" % n))
        if notify and not names and not dropped:
            n = 0 if subs is None else (len(subs.shard) if field == "shard" else subs.count())
            c.out.append(_frame(c.proto, kind, _null(c.proto), b":%d\r\n" % n))
        self._settle(c)
        return dropped

    def forget(self, c: Client) -> None:
        """A closed or RESET client: every subscription goes, nobody is told."""
        if c.subs is not None:
            self.unsubscribe(c, [], notify=False)
            self.unsubscribe(c, [], shard=True, notify=False)
            self.punsubscribe(c, [], notify=False)

    # -- delivery -----------------------------------------------------------------------------
    def publish(self, channel: bytes, message: bytes, shard: bool = False) -> int:
        """Deliver to the channel's subscribers, then (not for shard channels) to those of
        every matching pattern; returns the receivers, as PUBLISH answers."""
        receivers = 0
        body = _bulk(channel) + _bulk(message)
        frames: dict[int, bytes] = {}
        listeners = (self.shard_channels if shard else self.channels).get(channel)
        if listeners:
            kind = b"smessage" if shard else b"message"
            for c in list(listeners):
                frame = frames.get(c.proto)
                if frame is None:
                    frame = frames[c.proto] = _frame(c.proto, kind, body)
                self._deliver(c, frame)
                receivers += 1
        if shard or not self.patterns:
            return receivers
        for pat, clients in list(self.patterns.items()):
            if not compile_pattern(pat)(channel):
                continue
            per_proto: dict[int, bytes] = {}
            for c in list(clients):
                frame = per_proto.get(c.proto)
                if frame is None:
                    frame = per_proto[c.proto] = _frame(c.proto, b"pmessage", _bulk(pat), body)
                self._deliver(c, frame)
                receivers += 1
        return receivers

    def _deliver(self, c: Client, frame: bytes) -> None:
        if c.closed or c.close_after_reply:
            return
        out = c.out
        core = self.core
        if not out:
            core.pending_flush.append(c)
        out.append(frame)
        if core.maxmemory_clients:   # (updateClientMemUsageAndBucket after each message)
            core.client_eviction.grew(c, len(frame))
        if c.write_paused:
            c.obuf_held += len(frame)
            self._check_limit(c)

    def _check_limit(self, c: Client) -> None:
        """Redis's checkClientOutputBufferLimits for the held output of a paused client."""
        self.core.output_limits.check(c)

    # -- introspection ------------------------------------------------------------------------
    def channel_list(self, pattern: bytes | None, shard: bool = False) -> list[bytes]:
        names = self.shard_channels if shard else self.channels
        if pattern is None:
            return list(names)
        match = compile_pattern(pattern)
        return [ch for ch in names if match(ch)]

    def numsub(self, channels: list[bytes], shard: bool = False) -> list[object]:
        registry = self.shard_channels if shard else self.channels
        out: list[object] = []
        for ch in channels:
            out += [ch, len(registry.get(ch, ()))]
        return out
