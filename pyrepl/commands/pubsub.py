"""Pub/sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH, PUBSUB *.

Theory of operation: the registry and delivery live in ``pyrepl.core.pubsub`` (``core.pubsub``);
these handlers parse, write the confirmation frames straight into the client's output (one per
channel, so they answer ``NO_REPLY``) and answer PUBLISH's receiver count. PUBLISH and SPUBLISH
change nothing in the dataset yet are propagated (Redis's forceCommandPropagation, flag
``may-replicate``): subscribers on replicas receive what is published on the master.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command, container
from pyrepl.commands.util import help_command, subcommand_error
from pyrepl.resp.types import NO_REPLY

_FLAGS = "pubsub noscript loading stale"


# (P)(UN)SUBSCRIBE: (name, arity, summary); each calls the PubSub method of its name.
for _name, _arity, _summary in (
    ("subscribe", -2, "Listen for messages published to the given channels"),
    ("unsubscribe", -1, "Stop listening for messages posted to the given channels"),
    ("psubscribe", -2, "Listen for messages published to channels matching the given patterns"),
    ("punsubscribe", -1,
     "Stop listening for messages posted to channels matching the given patterns"),
):
    def _subscription(c: Any, argv: list[bytes], method: str = _name) -> object:
        getattr(c.core.pubsub, method)(c, argv[1:])
        return NO_REPLY
    command(_name, _arity, _FLAGS + " sentinel", group="pubsub", summary=_summary)(_subscription)


@command("ssubscribe", -2, _FLAGS, keys=(1, -1, 1), group="pubsub", since="7.0.0",
         summary="Listen for messages published to the given shard channels")
def ssubscribe(c: Any, argv: list[bytes]) -> object:
    c.core.pubsub.subscribe(c, argv[1:], shard=True)
    return NO_REPLY


@command("sunsubscribe", -1, _FLAGS, keys=(1, -1, 1), group="pubsub", since="7.0.0",
         summary="Stop listening for messages posted to the given shard channels")
def sunsubscribe(c: Any, argv: list[bytes]) -> object:
    c.core.pubsub.unsubscribe(c, argv[1:], shard=True)
    return NO_REPLY


@command("publish", 3, "pubsub loading stale fast may-replicate sentinel", group="pubsub",
         summary="Post a message to a channel")
def publish(c: Any, argv: list[bytes]) -> object:
    st = c.core.cluster
    if st is not None:      # (cluster mode: to every node over the bus, not the stream)
        st.propagate_publish(argv[1], argv[2], False)
    else:
        c.propagate_argv = argv
    return c.core.pubsub.publish(argv[1], argv[2])


@command("spublish", 3, "pubsub loading stale fast may-replicate", keys=(1, 1, 1),
         group="pubsub", since="7.0.0", summary="Post a message to a shard channel")
def spublish(c: Any, argv: list[bytes]) -> object:
    st = c.core.cluster
    if st is not None:      # (cluster mode: to the nodes of this shard, over the bus)
        st.propagate_publish(argv[1], argv[2], True)
    else:
        c.propagate_argv = argv
    return c.core.pubsub.publish(argv[1], argv[2], shard=True)


container("pubsub", group="pubsub", summary="A container for Pub/Sub commands", since="2.8.0")


@command("pubsub|channels", -2, "pubsub loading stale", group="pubsub", since="2.8.0",
         summary="List active channels")
def pubsub_channels(c: Any, argv: list[bytes]) -> object:
    return _channels(c, argv, shard=False)


@command("pubsub|shardchannels", -2, "pubsub loading stale", group="pubsub", since="7.0.0",
         summary="List active shard channels")
def pubsub_shardchannels(c: Any, argv: list[bytes]) -> object:
    return _channels(c, argv, shard=True)


def _channels(c: Any, argv: list[bytes], shard: bool) -> object:
    if len(argv) > 3:
        raise subcommand_error(argv)
    return c.core.pubsub.channel_list(argv[2] if len(argv) == 3 else None, shard)


@command("pubsub|numsub", -2, "pubsub loading stale", group="pubsub", since="2.8.0",
         summary="Get the count of subscribers for channels")
def pubsub_numsub(c: Any, argv: list[bytes]) -> object:
    return c.core.pubsub.numsub(argv[2:])


@command("pubsub|shardnumsub", -2, "pubsub loading stale", group="pubsub", since="7.0.0",
         summary="Get the count of subscribers for shard channels")
def pubsub_shardnumsub(c: Any, argv: list[bytes]) -> object:
    return c.core.pubsub.numsub(argv[2:], shard=True)


@command("pubsub|numpat", 2, "pubsub loading stale", group="pubsub", since="2.8.0",
         summary="Get the count of unique patterns pattern subscriptions")
def pubsub_numpat(c: Any, argv: list[bytes]) -> object:
    return len(c.core.pubsub.patterns)


help_command("pubsub", (
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: "
    "'*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
), group="pubsub", since="6.2.0")

