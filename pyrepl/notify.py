"""Keyspace notifications (Redis's notify.c): the event classes and the publisher.

Theory of operation: a command that changes a key (and a lookup that misses, an expiry, an
eviction) calls :func:`notify` with the event's class (``NOTIFY_LIST``, ...), its name
(``b"lpush"``) and the key, exactly where Redis calls notifyKeyspaceEvent. When
``notify-keyspace-events`` enables the class, the event is published on
``__keyspace@<db>__:<key>`` (message: the event; flag ``K``) and/or
``__keyevent@<db>__:<event>`` (message: the key; flag ``E``) through ``core.pubsub``, like any
PUBLISH (but never propagated: a replica publishes its own events as it applies its master's
stream, as Redis's do). ``ServerCore.notify_mask`` mirrors the directive, so with
notifications off (the default) an event costs one test: call sites on hot paths test
``core.notify_mask & NOTIFY_x`` themselves before calling.
"""

from __future__ import annotations

from typing import Any

NOTIFY_KEYSPACE = 1 << 0     # K
NOTIFY_KEYEVENT = 1 << 1     # E
NOTIFY_GENERIC = 1 << 2      # g
NOTIFY_STRING = 1 << 3       # $
NOTIFY_LIST = 1 << 4         # l
NOTIFY_SET = 1 << 5          # s
NOTIFY_HASH = 1 << 6         # h
NOTIFY_ZSET = 1 << 7         # z
NOTIFY_EXPIRED = 1 << 8      # x
NOTIFY_EVICTED = 1 << 9      # e
NOTIFY_STREAM = 1 << 10      # t
NOTIFY_KEY_MISS = 1 << 11    # m
NOTIFY_MODULE = 1 << 12      # d
NOTIFY_NEW = 1 << 13         # n


def keyspace_event(core: Any, cls: int, event: bytes, key: bytes, dbid: int) -> None:
    """notifyKeyspaceEvent."""
    flags = core.notify_mask
    if not flags & cls:
        return
    if flags & NOTIFY_KEYSPACE:
        core.pubsub.publish(b"__keyspace@%d__:%s" % (dbid, key), event)
    if flags & NOTIFY_KEYEVENT:
        core.pubsub.publish(b"__keyevent@%d__:%s" % (dbid, event), key)


def notify(c: Any, cls: int, event: bytes, key: bytes) -> None:
    """An event of a command of client ``c`` on ``key`` in the client's database."""
    core = c.core
    if core.notify_mask & cls:
        keyspace_event(core, cls, event, key, c.db.id)
