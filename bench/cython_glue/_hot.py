# Data for bench/bench_cython_glue.py, not pyrepl code: nothing imports or builds it from
# here (setup.py does not list it, bench/ is no package). Cython pure-Python-mode prototype of
# pyrepl/commands/_hot.c, slots read and written by getattr/setattr; its types are in _hot.pxd.
# The script copies it into a throwaway export of the tree as pyrepl/commands/_hot.py
# in place of pyrepl/commands/_hot.c, compiles it with Cython and counts instructions per command
# (bench/RESULTS.md, "The C glue in Cython's pure Python mode?", issue 36 part 3).
# Measured, not used: it did not come within the 5 % of the C.

"""pyrepl.commands._hot: the common forms of the hottest write and read commands, compiled.

Plain Python that Cython compiles (its "pure Python mode": the types are in _hot.pxd beside
this file, so that the same file runs as it is, uncompiled). set(c, argv), get, incr, lpush,
rpush, hset and zadd are the handlers of SET, GET, INCR, LPUSH, RPUSH, HSET and ZADD
(pyrepl/commands/hot.py puts them in the command table). Each does what the Python handler's
fast path does (pyrepl/commands/strings.py, lists.py, hashes.py, zsets.py) for the form
redis-benchmark and most clients send: SET key value, GET key, INCR key, LPUSH/RPUSH key
value, HSET key field value, ZADD key <integer score> member. In every other case, and
whenever the Python handler would do more than the store (a key with a TTL, a WATCHed
database, keyspace events on, a new list, hash or sorted set, a value of another type or
form), it calls the Python handler before anything changed, so that stays the reference:
tests/unit/test_hot.py runs both on the same random command streams and compares the
replies, the dataset, the counters and what propagates.
"""

from types import MemberDescriptorType

NAMES = ("set", "get", "incr", "lpush", "rpush", "hset", "zadd")
BIND_USAGE = ("bind(Client, Database, ServerCore, Stats, deque, ZSet, OK, _INT_TEXT, ADDED, "
              "handlers)")
# The slots each class must have (a renamed or removed one fails at bind, not at run time).
_SLOTS = (("db", "core"), ("data", "expires", "watched"), ("notify_mask", "dirty", "stats"),
          ("keyspace_hits", "keyspace_misses"))

_bound = False
_client_type = _db_type = _core_type = _stats_type = _deque_type = _zset_type = None
_ok = None                  # pyrepl.resp.types.OK: SET's reply
_int_text = []              # strings._INT_TEXT: the shared texts of 0..len-1
_added = 0                  # zset.ADDED, a result of set_score
_appendleft = _append = _set_score = None   # deque's and ZSet's methods
# the Python handlers: the reference, and every other case
_ref_set = _ref_get = _ref_incr = _ref_lpush = _ref_rpush = _ref_hset = _ref_zadd = None
_ZERO = 0                   # notify_mask with no keyspace events
# What _hot_case found, for the handler that called it.
_h_core = None
_h_data = None


def bind(client, database, core, stats, deque, zset, ok, int_text, added, handlers):
    """The classes whose slots the handlers read, and the Python handlers they stand for."""
    global _bound, _client_type, _db_type, _core_type, _stats_type, _deque_type, _zset_type
    global _ok, _int_text, _added, _appendleft, _append, _set_score
    global _ref_set, _ref_get, _ref_incr, _ref_lpush, _ref_rpush, _ref_hset, _ref_zadd
    if type(int_text) is not list or type(handlers) is not dict:
        raise TypeError(BIND_USAGE)
    for cls, names in zip((client, database, core, stats), _SLOTS):
        for name in names:
            if not isinstance(getattr(cls, name, None), MemberDescriptorType):
                raise TypeError(f"{cls.__name__}.{name} is not a slot")
    missing = [name for name in NAMES if name not in handlers]
    if missing:
        raise KeyError(f"no Python handler for {missing[0]}")
    _client_type, _db_type, _core_type, _stats_type = client, database, core, stats
    _deque_type, _zset_type = deque, zset
    _ok, _int_text, _added = ok, int_text, added
    _appendleft, _append, _set_score = deque.appendleft, deque.append, zset.set_score
    _ref_set, _ref_get, _ref_incr = handlers["set"], handlers["get"], handlers["incr"]
    _ref_lpush, _ref_rpush = handlers["lpush"], handlers["rpush"]
    _ref_hset, _ref_zadd = handlers["hset"], handlers["zadd"]
    _bound = True


def _unbound(name):
    return RuntimeError(f"pyrepl.commands._hot.{name} called before its module's bind()")


def _hot_case(c, argv, n):
    """What every common form needs, for a request of n arguments whose key (argv[1]) is
    bytes: the client's database's dict (_h_data), with no TTL on the key, no WATCH on the
    database and no keyspace events on; the core (_h_core), for its counters. 1 when all
    holds, 0 otherwise (nothing moved)."""
    global _h_core, _h_data
    if type(c) is not _client_type or type(argv) is not list:
        return 0
    args = argv
    if len(args) != n:
        return 0
    db = c.db
    core = c.core
    if type(db) is not _db_type or type(core) is not _core_type:
        return 0
    data = db.data
    expires = db.expires
    watched = db.watched
    key = args[1]
    if type(data) is not dict or type(expires) is not dict or type(watched) is not dict or \
            watched or core.notify_mask is not _ZERO or type(key) is not bytes:
        return 0
    if expires and key in expires:
        return 0
    _h_core = core
    _h_data = data
    return 1


def set(c, argv):
    """SET's handler: SET key value."""
    if not _bound:
        raise _unbound("set")
    if not _hot_case(c, argv, 3):
        return _ref_set(c, argv)
    args = argv
    _h_data[args[1]] = args[2]
    _h_core.dirty += 1
    return _ok


def get(c, argv):
    """GET's handler: GET key, a string or nil (a miss)."""
    if not _bound:
        raise _unbound("get")
    if not _hot_case(c, argv, 2):
        return _ref_get(c, argv)
    args = argv
    v = _h_data.get(args[1])
    if v is not None and type(v) is not bytes:
        return _ref_get(c, argv)   # (WRONGTYPE)
    stats = _h_core.stats
    if type(stats) is not _stats_type:
        return _ref_get(c, argv)
    if v is None:
        stats.keyspace_misses += 1
    else:
        stats.keyspace_hits += 1
    return v


def _canonical_counter(v):
    """The value of a counter's text when it is canonical ("0", or 1 to 18 digits without a
    leading zero: no sign, no space, no overflow on +1); -1 for anything else."""
    n = len(v)
    s = v
    if n < 1 or n > 18 or (s[0] == 48 and n > 1):
        return -1
    x = 0
    for i in range(n):
        d = s[i]
        if d < 48 or d > 57:
            return -1
        x = x * 10 + (d - 48)
    return x


def incr(c, argv):
    """INCR's handler: INCR key; a missing key counts from 0."""
    if not _bound:
        raise _unbound("incr")
    if not _hot_case(c, argv, 2):
        return _ref_incr(c, argv)
    args = argv
    key = args[1]
    v = _h_data.get(key)
    x = 0
    if v is not None:
        if type(v) is not bytes:
            return _ref_incr(c, argv)   # (WRONGTYPE)
        x = _canonical_counter(v)
        if x < 0:
            return _ref_incr(c, argv)   # (any other text)
    x += 1
    if x < len(_int_text):
        _h_data[key] = _int_text[x]
    else:
        _h_data[key] = b"%d" % x
    _h_core.dirty += 1
    return x


def _push(c, argv, method, ref):
    """LPUSH / RPUSH key element, onto an existing list: its length."""
    if not _hot_case(c, argv, 3):
        return ref(c, argv)
    args = argv
    lst = _h_data.get(args[1])
    if lst is None or type(lst) is not _deque_type:
        return ref(c, argv)   # (a new list)
    core = _h_core
    method(lst, args[2])
    n = len(lst)
    core.dirty += 1
    return n


def lpush(c, argv):
    """LPUSH's handler."""
    if not _bound:
        raise _unbound("lpush")
    return _push(c, argv, _appendleft, _ref_lpush)


def rpush(c, argv):
    """RPUSH's handler."""
    if not _bound:
        raise _unbound("rpush")
    return _push(c, argv, _append, _ref_rpush)


def hset(c, argv):
    """HSET's handler: HSET key field value, into an existing hash (a dict: no field TTLs);
    1 for a new field."""
    if not _bound:
        raise _unbound("hset")
    if not _hot_case(c, argv, 4):
        return _ref_hset(c, argv)
    args = argv
    h = _h_data.get(args[1])
    field = args[2]
    if h is None or type(h) is not dict or type(field) is not bytes:
        return _ref_hset(c, argv)
    # one lookup: a new field is the one store that grows the dict (a bytes field: nothing
    # runs during the store that could change the dict otherwise)
    hash = h
    before = len(hash)
    hash[field] = args[3]
    core = _h_core
    core.dirty += 1
    return 1 if len(hash) > before else 0


def zadd(c, argv):
    """ZADD's handler: ZADD key score member, score an integer of 1 to 15 digits (exact as a
    double, as float() reads it), into an existing sorted set; 1 for a new member."""
    if not _bound:
        raise _unbound("zadd")
    if not _hot_case(c, argv, 4):
        return _ref_zadd(c, argv)
    args = argv
    score = _short_score(args[2])
    if score < 0:
        return _ref_zadd(c, argv)
    z = _h_data.get(args[1])
    if z is None or type(z) is not _zset_type:
        return _ref_zadd(c, argv)
    core = _h_core
    result = _set_score(z, args[3], float(score))
    if result == 0:   # UNCHANGED: the same score
        return 0
    core.dirty += 1
    return 1 if result == _added else 0


def _short_score(s):
    """The value of an integer score of 1 to 15 digits; -1 for anything else."""
    if type(s) is not bytes:
        return -1
    b = s
    n = len(b)
    if n < 1 or n > 15:
        return -1
    p = b
    x = 0
    for i in range(n):
        d = p[i]
        if d < 48 or d > 57:
            return -1
        x = x * 10 + (d - 48)
    return x
