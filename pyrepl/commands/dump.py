"""DUMP and RESTORE (Redis 7.0.15 cluster.c semantics; payloads: pyrepl.rdb.dump).

RESTORE follows Redis's order of checks (options, then BUSYKEY, then the TTL, then the
payload's footer, then its value), takes payloads of Redis 7 and 8 (RDB versions up to 13),
and propagates as Redis does: a relative TTL is rewritten to an absolute one with ABSTTL; a
REPLACE whose TTL has already passed becomes a DEL of the old key. IDLETIME and FREQ are
validated as Redis does and set the key's LRU clock or LFU counter (objectSetLRUOrLFU).
Keyspace events: ``restore`` (after ``new``), or ``del`` when a REPLACE with a past TTL only
deleted the old key; DUMP's lookup publishes ``keymiss``.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command
from pyrepl.commands.util import option_token, parse_int
from pyrepl.errors import SYNTAX
from pyrepl.keyspace.ktable import given_age
from pyrepl.notify import NOTIFY_GENERIC, notify
from pyrepl.rdb.dump import PayloadError, dump_payload, load_payload
from pyrepl.resp.types import OK, ReplyError


@command("dump", 2, "readonly", keys=(1, 1, 1), group="generic",
         summary="Return a serialized version of the value stored at the specified key.",
         since="2.6.0", acl="keyspace")
def dump(c: Any, argv: list[bytes]) -> object:
    v = c.db.lookup_read(argv[1])
    return None if v is None else dump_payload(v)


@command("restore", -4, "write denyoom", keys=(1, 1, 1), group="generic",
         summary="Create a key using the provided serialized value, previously obtained using "
                 "DUMP.", since="2.6.0", acl="keyspace dangerous")
def restore(c: Any, argv: list[bytes]) -> object:
    replace = absttl = False
    idle = freq = -1
    j = 4
    n = len(argv)
    while j < n:
        opt = option_token(argv[j])
        more = n - j - 1
        if opt == b"replace":
            replace = True
        elif opt == b"absttl":
            absttl = True
        elif opt == b"idletime" and more >= 1 and freq == -1:
            idle = parse_int(argv[j + 1])
            if idle < 0:
                raise ReplyError("ERR Invalid IDLETIME value, must be >= 0")
            j += 1
        elif opt == b"freq" and more >= 1 and idle == -1:
            freq = parse_int(argv[j + 1])
            if not 0 <= freq <= 255:
                raise ReplyError("ERR Invalid FREQ value, must be >= 0 and <= 255")
            j += 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    key = argv[1]
    db = c.db
    if not replace and db.lookup(key) is not None:
        raise ReplyError("BUSYKEY Target key name already exists.")
    ttl = parse_int(argv[2])
    if ttl < 0:
        raise ReplyError("ERR Invalid TTL value, must be >= 0")
    try:
        sanitize = c.core.config.sanitize_dump_payload      # (clients: all but the master)
        value = load_payload(argv[3], not c.core.skip_checksum_validation,
                             deep=sanitize == "yes" or sanitize == "clients"
                             and not c.must_obey())
    except PayloadError as e:
        if e.reason:     # (rdbReportError in a RESTORE: logged at verbose, the client told)
            c.core.log.verbose(f"Internal error in RDB reading offset 0, function at "
                               f"pyrepl.rdb.decoder -> {e.reason}")
        raise ReplyError(str(e)) from None
    deleted = replace and db.delete(key)
    core = c.core
    if ttl and not absttl:
        ttl += core.now_ms
    if ttl and ttl <= core.now_ms and core.expiry_deletes:   # checkAlreadyExpired
        if deleted:
            c.propagate_argv = [b"DEL", key]
            notify(c, NOTIFY_GENERIC, b"del", key)
            core.dirty += 1
        return OK
    db.add(key, value)
    if idle >= 0 or freq >= 0:
        age = given_age(freq, idle)
        if age is not None:
            db.data.set_age(key, age)
    if ttl:
        db.set_expire(key, ttl)
        if not absttl:
            c.propagate_argv = [argv[0], key, b"%d" % ttl, *argv[3:], b"ABSTTL"]
    notify(c, NOTIFY_GENERIC, b"restore", key)
    core.dirty += 1
    return OK


# The RESTORE MIGRATE sends in cluster mode: flagged ``asking``, so the importing node takes it
# for a slot it does not own yet (getNodeByQuery's CMD_ASKING).
command("restore-asking", -4, "write denyoom asking", keys=(1, 1, 1), group="server",
        summary="An internal command for migrating keys in a cluster", since="3.0.0",
        acl="keyspace dangerous")(restore)
