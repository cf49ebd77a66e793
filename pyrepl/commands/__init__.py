"""Command handlers, grouped by type; importing this package fills the command table."""

from __future__ import annotations

from pyrepl.commands import (  # noqa: F401  (imported for their registrations)
    acl,
    bitmaps,
    cluster,
    connection,
    dump,
    functions,
    geo,
    hashes,
    hot,
    hyperloglog,
    introspection,
    keys,
    keyspec_walk,
    lists,
    migrate,
    pubsub,
    replication_master,
    replication_replica,
    scripting,
    server,
    sets,
    sort,
    streams,
    strings,
    tracking,
    transactions,
    zsets,
)
from pyrepl.commands.table import COMMANDS, Command, command, container

__all__ = ["COMMANDS", "Command", "command", "container"]
