"""MIGRATE (Redis 7.0.15's migrateCommand, cluster.c): move keys to another instance.

Theory of operation: the keys found (``lookupKeyRead``; none: ``+NOKEY``) are sent to the
target over a cached blocking connection (the host's ``migrate_link``: Redis's
migrate_cached_sockets, closed after 10 idle seconds) as one buffer: ``AUTH`` when asked,
``SELECT`` when the connection's last database differs, then one ``RESTORE key ttl payload
[REPLACE]`` per key with its remaining TTL (a key that expired meanwhile is left out) and the
DUMP payload. The replies are read line by line with the command's timeout; each key the target
acknowledged is deleted here (no COPY), touched and notified (``del``), and the command is
propagated as ``DEL`` of those keys. The first error line of the target is the reply (``ERR
Target instance replied with error: ...``) and makes the next MIGRATE select again. A socket
error closes the connection and is retried once on a new one, unless it was a timeout or came
after some keys were acknowledged; then ``IOERR error or timeout reading|writing to target
instance`` (a refused connection counts as a failed write, as Redis's non-blocking connect
sees it). The server is blocked meanwhile, as Redis's is.
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command
from pyrepl.errors import SYNTAX
from pyrepl.intparse import parse_int
from pyrepl.notify import NOTIFY_GENERIC, notify
from pyrepl.rdb.dump import dump_payload
from pyrepl.resp.types import OK, Raw, ReplyError
from pyrepl.resp.writer import encode_command

NOKEY = Raw(b"+NOKEY\r\n")
KEYS_NOT_EMPTY = ("ERR When using MIGRATE KEYS option, the key argument must be set to the "
                  "empty string")


#: migrateGetKeys' options before KEYS and how many arguments each takes
_SKIP = {b"copy": 0, b"replace": 0, b"auth": 1, b"auth2": 2}


def migrate_keys(argv: list[bytes]) -> list[int]:
    """migrateGetKeys: the key argument, or every argument after KEYS (the options' own
    arguments skipped: a password may be "KEYS"); none when KEYS comes with a key."""
    i = 6
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"keys":
            return [] if argv[3] else list(range(i + 1, len(argv)))
        i += _SKIP.get(opt, 0) + 1
    return [3] if len(argv) > 3 else []


@command("migrate", -6, "write", keys=(3, 3, 1), keys_fn=migrate_keys, group="generic",
         since="2.6.0", acl="keyspace dangerous",
         summary="Atomically transfer a key from a Redis instance to another one.")
def migrate(c: Any, argv: list[bytes]) -> object:
    copy = replace = False
    username = password = None
    first, count = 3, 1
    j = 6
    n = len(argv)
    while j < n:
        opt = argv[j].lower()
        more = n - 1 - j
        if opt == b"copy":
            copy = True
        elif opt == b"replace":
            replace = True
        elif opt == b"auth":
            if not more:
                raise ReplyError(SYNTAX)
            j += 1
            password = argv[j]
        elif opt == b"auth2":
            if more < 2:
                raise ReplyError(SYNTAX)
            username, password = argv[j + 1], argv[j + 2]
            j += 2
        elif opt == b"keys":
            if argv[3]:
                raise ReplyError(KEYS_NOT_EMPTY)
            first, count = j + 1, n - j - 1
            break
        else:
            raise ReplyError(SYNTAX)
        j += 1
    timeout = parse_int(argv[5])
    dbid = parse_int(argv[4])
    if timeout <= 0:
        timeout = 1000
    db = c.db
    found = [(k, v) for k in argv[first:first + count]
             if (v := db.lookup_read(k)) is not None]
    if not found:
        return NOKEY
    host = c.core.host
    target_host, target_port = argv[1], argv[2]
    may_retry = True
    while True:
        try:
            link = host.migrate_link(target_host, target_port, timeout)
        except ConnectionRefusedError:
            # Redis's non-blocking connect counts a refusal as connected (the socket turns
            # writable): its first write fails, it retries once, then says "writing"
            if may_retry:
                may_retry = False
                continue
            raise ReplyError("IOERR error or timeout writing to target instance") from None
        except OSError:
            raise ReplyError("IOERR error or timeout connecting to the client") from None
        out = []
        if password is not None:
            out.append(encode_command([b"AUTH", username, password] if username is not None
                                      else [b"AUTH", password]))
        select = link.last_dbid != dbid
        if select:
            out.append(encode_command([b"SELECT", b"%d" % dbid]))
        now = c.core.now_ms
        keys = []
        for key, value in found:
            ttl = 0
            when = db.get_expire(key)
            if when is not None:
                ttl = when - now
                if ttl < 0:
                    continue        # expired since the lookup
                ttl = max(ttl, 1)
            keys.append(key)
            restore = [b"RESTORE-ASKING" if c.core.cluster is not None else b"RESTORE", key,
                       b"%d" % ttl, dump_payload(value)]
            if replace:
                restore.append(b"REPLACE")
            out.append(encode_command(restore))
        writing = True
        acked: list[bytes] = []
        error = None
        try:
            link.send(b"".join(out), timeout)
            writing = False
            auth_reply = link.read_line(timeout) if password is not None else b"+"
            select_reply = link.read_line(timeout) if select else b"+"
            for key in keys:
                try:
                    reply = link.read_line(timeout)
                except OSError:
                    if acked:      # (keys already moved: no retry, the DEL goes out)
                        may_retry = False
                    raise
                bad = next((r for r in (auth_reply, select_reply, reply) if r[:1] == b"-"),
                           None)
                if bad is not None:
                    if error is None:
                        link.last_dbid = -1
                        error = "ERR Target instance replied with error: " + \
                            bad[1:].decode("utf-8", "replace")
                elif not copy:
                    _delete(c, key)
                    acked.append(key)
        except OSError as e:
            host.migrate_close(target_host, target_port)
            _propagate(c, acked)
            if may_retry and not isinstance(e, TimeoutError) and not acked:
                may_retry = False
                continue
            raise ReplyError("IOERR error or timeout %s to target instance"
                             % ("writing" if writing else "reading")) from None
        _propagate(c, acked)
        if error is not None:
            raise ReplyError(error)
        link.last_dbid = dbid
        return OK


def _delete(c: Any, key: bytes) -> None:
    """dbDelete + signalModifiedKey + the ``del`` event of a key the target acknowledged."""
    c.db.delete(key)        # (which touches the key: WATCH, client-side caching)
    notify(c, NOTIFY_GENERIC, b"del", key)
    c.core.dirty += 1


def _propagate(c: Any, acked: list[bytes]) -> None:
    """MIGRATE goes to the replicas and the AOF as DEL of the keys moved, or not at all."""
    c.propagate_argv = [b"DEL", *acked] if acked else []
