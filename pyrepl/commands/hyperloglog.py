"""HyperLogLog commands (Redis 7.0.15 hyperloglog.c): PFADD, PFCOUNT, PFMERGE, and PFDEBUG's
GETREG / DECODE / ENCODING / TODENSE (what Redis's tests look inside with).

The values are strings in Redis's exact HLL layout (:mod:`pyrepl.keyspace.hll`), so a HLL
made here is the same bytes on a Redis replica and the reverse. As Redis: PFADD creates the
key (that alone counts as a change), a single-key PFCOUNT refreshes a stale cached cardinality
in the value and that change is propagated (PFCOUNT is a read command that may dirty the
dataset), a multi-key PFCOUNT merges into a scratch register array, PFMERGE writes into its
first key (dense as soon as one input is dense) and always counts as a change. Keyspace events:
PFADD publishes ``pfadd`` when it changed something, PFMERGE always (both after ``new``).
"""

from __future__ import annotations

from typing import Any

from pyrepl.commands.table import command
from pyrepl.errors import WRONGTYPE
from pyrepl.keyspace import hll
from pyrepl.notify import NOTIFY_STRING, notify
from pyrepl.resp.types import OK, ReplyError, Status


def _hll_value(v: Any) -> bytes:
    """isHLLObjectOrReply."""
    if type(v) is not bytes:
        raise ReplyError(WRONGTYPE)
    if not hll.is_hll(v):
        raise ReplyError(hll.NOT_HLL_ERR)
    return v


def _store(c: Any, key: bytes, value: bytearray | bytes, created: bool) -> None:
    db = c.db
    if type(value) is not bytes:
        value = bytes(value)
    if created:
        db.add(key, value)
    else:
        db.data[key] = value          # dbUnshareStringValue: the TTL stays
        if db.watched:
            db.touch(key)


@command("pfadd", -2, "write denyoom fast", keys=(1, 1, 1), group="hyperloglog",
         summary="Adds the specified elements to the specified HyperLogLog.", since="2.8.9",
         acl="hyperloglog")
def pfadd(c: Any, argv: list[bytes]) -> object:
    key = argv[1]
    v = c.db.lookup(key)
    updated = 0
    if type(v) is bytes and hll.is_hll(v) and v[4] == hll.DENSE:   # (is_hll: its size too)
        updated, dense = hll.dense_add(v, argv, 2)   # (one copy, none when nothing grew)
        if dense is not None:
            _store(c, key, dense, False)
            notify(c, NOTIFY_STRING, b"pfadd", key)
            c.core.dirty += updated
        return 1 if updated else 0
    if v is None:
        value = hll.new_sparse()
        updated = 1
    else:
        value = bytearray(_hll_value(v))
    max_bytes = c.core.config.hll_sparse_max_bytes
    try:
        for element in argv[2:]:
            value, changed = hll.add(value, element, max_bytes)
            updated += changed
    except hll.CorruptHll:
        raise ReplyError(hll.INVALID_HLL_ERR) from None
    if updated:
        hll.invalidate_cache(value)
        _store(c, key, value, v is None)
        notify(c, NOTIFY_STRING, b"pfadd", key)
        c.core.dirty += updated
    return 1 if updated else 0


@command("pfcount", -2, "readonly may-replicate", keys=(1, -1, 1), group="hyperloglog",
         summary="Return the approximated cardinality of the set(s) observed by the "
                 "HyperLogLog at key(s).", since="2.8.9", acl="hyperloglog")
def pfcount(c: Any, argv: list[bytes]) -> object:
    db = c.db
    if len(argv) > 2:
        merged = [0] * hll.REGISTERS
        for key in argv[1:]:
            v = db.lookup_read(key)
            if v is None:
                continue
            try:
                regs = hll.registers(_hll_value(v))
            except hll.CorruptHll:
                raise ReplyError(hll.INVALID_HLL_ERR) from None
            merged = [a if a >= b else b for a, b in zip(merged, regs, strict=True)]
        return hll.count(merged)
    key = argv[1]
    v = db.lookup_read(key)
    if v is None:
        return 0
    value = _hll_value(v)
    card = hll.cached_card(value)
    if card is not None:
        return card
    try:
        card = hll.count(hll.registers(value))
    except hll.CorruptHll:
        raise ReplyError(hll.INVALID_HLL_ERR) from None
    updated = bytearray(value)
    hll.set_cached_card(updated, card)
    _store(c, key, updated, False)
    c.core.dirty += 1                       # propagated: the replica's bytes must agree
    return card


@command("pfmerge", -2, "write denyoom", keys=(1, -1, 1), group="hyperloglog",
         summary="Merge N different HyperLogLogs into a single one.", since="2.8.9",
         acl="hyperloglog")
def pfmerge(c: Any, argv: list[bytes]) -> object:
    db = c.db
    merged = [0] * hll.REGISTERS
    use_dense = False
    for key in argv[1:]:
        v = db.lookup_read(key)
        if v is None:
            continue
        value = _hll_value(v)
        if value[4] == hll.DENSE:
            use_dense = True
        try:
            regs = hll.registers(value)
        except hll.CorruptHll:
            raise ReplyError(hll.INVALID_HLL_ERR) from None
        merged = [a if a >= b else b for a, b in zip(merged, regs, strict=True)]
    dest = argv[1]
    current = db.lookup(dest)
    created = current is None
    target = hll.new_sparse() if created else bytearray(current)
    try:
        if use_dense:
            target = hll.to_dense(target)
        max_bytes = c.core.config.hll_sparse_max_bytes
        for index, count in enumerate(merged):
            if not count:
                continue
            if target[4] == hll.DENSE:
                hll.dense_set_max(target, index, count)
            else:
                target, _ = hll.sparse_set(target, index, count, max_bytes)
    except hll.CorruptHll:
        raise ReplyError(hll.INVALID_HLL_ERR) from None
    hll.invalidate_cache(target)
    _store(c, dest, target, created)
    notify(c, NOTIFY_STRING, b"pfadd", dest)
    c.core.dirty += 1
    return OK


@command("pfdebug", 3, "write denyoom admin", keys=(2, 2, 1), group="hyperloglog",
         summary="Internal commands for debugging HyperLogLog values", since="2.8.9",
         acl="hyperloglog")
def pfdebug(c: Any, argv: list[bytes]) -> object:
    """PFDEBUG GETREG|DECODE|ENCODING|TODENSE key. GETREG and TODENSE make a sparse HLL dense
    (a change, propagated as the command)."""
    sub, key = argv[1].lower(), argv[2]
    v = c.db.lookup(key)
    if v is None:
        raise ReplyError("ERR The specified key does not exist")
    value = _hll_value(v)
    sparse = value[4] == hll.SPARSE
    if sub in (b"getreg", b"todense"):
        dense = bytearray(value)
        if sparse:
            try:
                dense = hll.to_dense(dense)
            except hll.CorruptHll:
                raise ReplyError(hll.INVALID_HLL_ERR) from None
            _store(c, key, dense, False)
            c.core.dirty += 1           # (the encoding change is propagated)
        if sub == b"todense":
            return 1 if sparse else 0
        return hll.dense_registers(dense)
    if sub == b"decode":
        if not sparse:
            raise ReplyError("ERR HLL encoding is not sparse")
        return hll.decode_sparse(value).encode()
    if sub == b"encoding":
        return Status("sparse" if sparse else "dense")
    raise ReplyError(f"ERR Unknown PFDEBUG subcommand '{argv[1].decode('utf-8', 'replace')}'")
