"""Geo commands (Redis 7.0.15's geo.c): GEOADD GEOPOS GEODIST GEOHASH GEOSEARCH GEOSEARCHSTORE
GEORADIUS GEORADIUSBYMEMBER GEORADIUS_RO GEORADIUSBYMEMBER_RO.

Theory of operation: a geo index is an ordinary sorted set whose scores are the 52-bit geohash
of each member's position (:mod:`pyrepl.keyspace.geohash`), so ZRANGE WITHSCORES of a geo
index is Redis's to the byte. GEOADD validates the positions, then runs ZADD with
the scores, and it is that ZADD (``zadd key [options] score member ...``) which replicas
receive, as Redis's replaceClientCommandVector makes it (and whose ``zadd`` keyspace event
GEOADD publishes). A stored search publishes ``geosearchstore`` (GEOSEARCHSTORE) or
``georadiusstore`` (GEORADIUS[BYMEMBER] STORE|STOREDIST), or ``del`` when an empty result (or
a missing source) removed the destination.

All searches go through :func:`_georadius_generic`, one function as in Redis, because the order
of its checks decides which error a client sees: the source key's type, the fixed arguments of
the old GEORADIUS forms, then the options left to right (a missing FROMMEMBER member is an
error as soon as it is met; with no source key the member is not looked up at all), then the
incompatible combinations. Candidates are collected cell by cell in score order, exactly as
Redis walks its nine geohash boxes, then ordered as Redis does: glibc's stable merge sort when
every result is returned, and Redis's own partial quicksort (pqsort.c, ported with its tie
order) when COUNT cuts the list. Distances are "%.4f"-like fixed point
(addReplyDoubleDistance, a bulk string even in RESP3) and coordinates ``%.17Lf`` trimmed
(addReplyHumanLongDouble: a bulk string in RESP2, a RESP3 double).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyrepl import native
from pyrepl.commands.table import command
from pyrepl.commands.util import (
    option_token,
    parse_float,
    parse_int,
    read_typed,
)
from pyrepl.commands.zsets import member_scores, zadd
from pyrepl.errors import SYNTAX
from pyrepl.keyspace import geohash as gh
from pyrepl.keyspace import zset as zsets
from pyrepl.keyspace.zset import ZSETS, ZSet
from pyrepl.notify import NOTIFY_GENERIC, NOTIFY_ZSET, notify
from pyrepl.resp.types import NULL_ARRAY, Raw, ReplyError

UNIT_ERR = "ERR unsupported unit provided. please use M, KM, FT, MI"
MEMBER_ERR = "ERR could not decode requested zset member"
_UNITS = {b"m": 1.0, b"km": 1000.0, b"ft": 0.3048, b"mi": 1609.34}

# georadiusGeneric's flags
_COORDS, _MEMBER, _NOSTORE, _SEARCH, _SEARCHSTORE = 1, 2, 4, 8, 16
_SORT_NONE, _SORT_ASC, _SORT_DESC = 0, 1, 2
_SORTS = {b"asc": _SORT_ASC, b"desc": _SORT_DESC}

# A candidate: [longitude, latitude, distance, score, member] (Redis's geoPoint).
Point = list[Any]


# -- argument helpers -----------------------------------------------------------------------------

def _lonlat(argv: list[bytes], i: int) -> tuple[float, float]:
    """extractLongLatOrReply."""
    lon = parse_float(argv[i])
    lat = parse_float(argv[i + 1])
    if lon < gh.LONG_MIN or lon > gh.LONG_MAX or lat < gh.LAT_MIN or lat > gh.LAT_MAX:
        raise ReplyError(f"ERR invalid longitude,latitude pair {lon:f},{lat:f}")
    return lon, lat


def _unit(arg: bytes) -> float:
    """extractUnitOrReply: metres per unit."""
    v = _UNITS.get(option_token(arg))
    if v is None:
        raise ReplyError(UNIT_ERR)
    return v


def _distance_arg(argv: list[bytes], i: int) -> tuple[float, float]:
    """extractDistanceOrReply: (radius, conversion)."""
    d = parse_float(argv[i], "ERR need numeric radius")
    if d < 0:
        raise ReplyError("ERR radius cannot be negative")
    return d, _unit(argv[i + 1])


def _box_arg(argv: list[bytes], i: int) -> tuple[float, float, float]:
    """extractBoxOrReply: (width, height, conversion)."""
    w = parse_float(argv[i], "ERR need numeric width")
    h = parse_float(argv[i + 1], "ERR need numeric height")
    if h < 0 or w < 0:
        raise ReplyError("ERR height or width cannot be negative")
    return w, h, _unit(argv[i + 2])


def _member_lonlat(z: ZSet, member: bytes) -> tuple[float, float]:
    """longLatFromMember."""
    score = z.score(member)
    if score is None:
        raise ReplyError(MEMBER_ERR)
    return gh.decode_score(score)


def _coord(c: Any, d: float) -> object:
    """addReplyHumanLongDouble: a bulk string in RESP2, a double in RESP3."""
    text = gh.format_coord(d)
    return Raw(b"," + text + b"\r\n") if c.proto == 3 else text


# -- GEOADD -----------------------------------------------------------------------------------------

@command("geoadd", -5, "write denyoom", keys=(1, 1, 1), group="geo", acl="geo", since="3.2.0",
         summary="Add one or more geospatial items in the geospatial index represented using "
                 "a sorted set")
def geoadd(c: Any, argv: list[bytes]) -> object:
    n = len(argv)
    xx = nx = False
    longidx = 2
    while longidx < n:
        opt = option_token(argv[longidx])
        if opt == b"nx":
            nx = True
        elif opt == b"xx":
            xx = True
        elif opt != b"ch":
            break
        longidx += 1
    if (n - longidx) % 3 or (xx and nx):
        raise ReplyError(SYNTAX)
    tail: list[bytes] = []
    for i in range(longidx, n, 3):
        lon, lat = _lonlat(argv, i)
        tail.append(b"%d" % gh.encode_score(lon, lat))
        tail.append(argv[i + 2])
    # ZADD sees the options as strcasecmp does; the replica gets them as the client sent them.
    options = argv[2:longidx]
    dirty = c.core.dirty
    reply = zadd(c, [b"zadd", argv[1], *(option_token(o) for o in options), *tail])
    if c.core.dirty != dirty:
        c.propagate_argv = [b"zadd", argv[1], *options, *tail]
    return reply


# -- GEOPOS / GEODIST / GEOHASH --------------------------------------------------------------------

@command("geopos", -2, "readonly", keys=(1, 1, 1), group="geo", acl="geo", since="3.2.0",
         summary="Returns longitude and latitude of members of a geospatial index")
def geopos(c: Any, argv: list[bytes]) -> object:
    out: list[object] = []
    for score in member_scores(c, argv):
        if score is None:
            out.append(NULL_ARRAY)
            continue
        lon, lat = gh.decode_score(score)
        out.append([_coord(c, lon), _coord(c, lat)])
    return out


@command("geodist", -4, "readonly", keys=(1, 1, 1), group="geo", acl="geo", since="3.2.0",
         summary="Returns the distance between two members of a geospatial index")
def geodist(c: Any, argv: list[bytes]) -> object:
    to_meter = 1.0
    if len(argv) == 5:
        to_meter = _unit(argv[4])
    elif len(argv) > 5:
        raise ReplyError(SYNTAX)
    z = read_typed(c, argv[1], ZSETS)
    if z is None:
        return None
    s1 = z.dict.get(argv[2])
    s2 = z.dict.get(argv[3])
    if s1 is None or s2 is None:
        return None
    lon1, lat1 = gh.decode_score(s1)
    lon2, lat2 = gh.decode_score(s2)
    return gh.format_distance(gh.distance(lon1, lat1, lon2, lat2) / to_meter)


@command("geohash", -2, "readonly", keys=(1, 1, 1), group="geo", acl="geo", since="3.2.0",
         summary="Returns members of a geospatial index as standard geohash strings")
def geohash(c: Any, argv: list[bytes]) -> object:
    return [None if s is None else gh.geohash_string(s) for s in member_scores(c, argv)]


# -- the search ------------------------------------------------------------------------------------

def _points_in_shape(z: ZSet, shape: gh.Shape, limit: int) -> list[Point]:
    """membersOfAllNeighbors: the members inside ``shape``, box after box (skipping a box
    equal to the one processed just before, as Redis does), stopping at ``limit`` (ANY)."""
    out: list[Point] = []
    areas = None if _geo is None else _geo.search_areas(   # (None: the Python says why)
        shape.kind == gh.CIRCULAR, shape.lon, shape.lat, shape.conversion, shape.radius,
        shape.width, shape.height)
    if areas is None:
        areas = gh.search_areas(shape)
    last = 0
    decode, within, distance = gh.decode_score, gh.within, gh.distance
    circular = shape.kind == gh.CIRCULAR
    clon, clat, radius = shape.lon, shape.lat, shape.radius * shape.conversion
    for i, h in enumerate(areas):
        if h == gh.ZERO:
            continue
        if last and h == areas[last]:
            continue
        if out and limit and len(out) >= limit:
            break
        lo, hi = gh.score_range(h)
        for score, member in z.iter_from(z.score_start(lo, False)):
            if not score < hi:
                break
            lon, lat = decode(score)
            if circular:                      # gh.within's first case, inlined
                d = distance(clon, clat, lon, lat)
                if not d > radius:
                    out.append([lon, lat, d, score, member])
            else:
                box_d = within(shape, lon, lat)
                if box_d is not None:
                    out.append([lon, lat, box_d, score, member])
            if out and limit and len(out) >= limit:
                break
        last = i
    return out


_geo = native.load("pyrepl.commands._geo")


def _cmp_asc(a: Point, b: Point) -> int:
    """sort_gp_asc (a NaN distance compares below everything, both ways)."""
    if a[2] > b[2]:
        return 1
    if a[2] == b[2]:
        return 0
    return -1


def _cmp_desc(a: Point, b: Point) -> int:
    return -_cmp_asc(a, b)


Cmp = Callable[[Point, Point], int]


def msort(a: list[Point], cmp: Cmp) -> list[Point]:
    """glibc 2.36 qsort (msort_with_tmp): a top-down merge sort taking from the left run on
    ``cmp <= 0``. With a consistent comparator it is Python's stable sort."""
    n = len(a)
    if n <= 1:
        return a
    n1 = n // 2
    left, right = msort(a[:n1], cmp), msort(a[n1:], cmp)
    out: list[Point] = []
    i = j = 0
    while i < len(left) and j < len(right):
        if cmp(left[i], right[j]) <= 0:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    out.extend(left[i:])
    out.extend(right[j:])
    return out


def _med3(a: list[Point], i: int, j: int, k: int, cmp: Cmp) -> int:
    if cmp(a[i], a[j]) < 0:
        if cmp(a[j], a[k]) < 0:
            return j
        return k if cmp(a[i], a[k]) < 0 else i
    if cmp(a[j], a[k]) > 0:
        return j
    return i if cmp(a[i], a[k]) < 0 else k


def _vecswap(a: list[Point], i: int, j: int, n: int) -> None:
    for k in range(n):
        a[i + k], a[j + k] = a[j + k], a[i + k]


def pqsort(a: list[Point], cmp: Cmp, lrange: int, rrange: int) -> None:
    """Redis's pqsort.c: Bentley & McIlroy's quicksort that only recurses into the parts
    overlapping positions ``lrange..rrange`` (the order of ties is the algorithm's own)."""
    _pqsort(a, 0, len(a), cmp, lrange, rrange)


def _pqsort(a: list[Point], lo: int, n: int, cmp: Cmp, lr: int, rr: int) -> None:
    while True:
        if n < 7:
            for pm in range(lo + 1, lo + n):
                pl = pm
                while pl > lo and cmp(a[pl - 1], a[pl]) > 0:
                    a[pl], a[pl - 1] = a[pl - 1], a[pl]
                    pl -= 1
            return
        pm = lo + n // 2
        if n > 7:
            pl = lo
            pn = lo + n - 1
            if n > 40:
                d = n // 8
                pl = _med3(a, pl, pl + d, pl + 2 * d, cmp)
                pm = _med3(a, pm - d, pm, pm + d, cmp)
                pn = _med3(a, pn - 2 * d, pn - d, pn, cmp)
            pm = _med3(a, pl, pm, pn, cmp)
        a[lo], a[pm] = a[pm], a[lo]
        pa = pb = lo + 1
        pc = pd = lo + n - 1
        while True:
            while pb <= pc:
                r = cmp(a[pb], a[lo])
                if r > 0:
                    break
                if r == 0:
                    a[pa], a[pb] = a[pb], a[pa]
                    pa += 1
                pb += 1
            while pb <= pc:
                r = cmp(a[pc], a[lo])
                if r < 0:
                    break
                if r == 0:
                    a[pc], a[pd] = a[pd], a[pc]
                    pd -= 1
                pc -= 1
            if pb > pc:
                break
            a[pb], a[pc] = a[pc], a[pb]
            pb += 1
            pc -= 1
        pn = lo + n
        r = min(pa - lo, pb - pa)
        if r > 0:
            _vecswap(a, lo, pb - r, r)
        r = min(pd - pc, pn - pd - 1)
        if r > 0:
            _vecswap(a, pb, pn - r, r)
        r = pb - pa
        if r > 1 and not ((lr < lo and rr < lo) or (lr >= lo + r and rr >= lo + r)):
            _pqsort(a, lo, r, cmp, lr, rr)
        r = pd - pc
        if r <= 1:
            return
        lo, n = pn - r, r
        if (lr < lo and rr < lo) or (lr >= lo + n and rr >= lo + n):
            return


def _sorted_points(points: list[Point], sort: int, returned: int) -> list[Point]:
    """The candidates in Redis's order: qsort when all are returned, pqsort otherwise."""
    cmp = _cmp_asc if sort == _SORT_ASC else _cmp_desc
    if returned == len(points):
        if any(p[2] != p[2] for p in points):
            return msort(points, cmp)
        return sorted(points, key=lambda p: p[2], reverse=sort == _SORT_DESC)
    if _geo is not None:   # (C: the same moves on the same comparisons)
        _geo.pqsort(points, sort != _SORT_ASC, 0, returned - 1)
    else:
        pqsort(points, cmp, 0, returned - 1)
    return points


def _search(z: ZSet, shape: gh.Shape, limit: int, sort: int, count: int) -> list[Point]:
    """The points a search returns, in order: those of ``shape`` (up to ``limit`` when
    ANY), sorted (``sort``), the first ``count`` (0: all). A circle's search is
    ``_geo.search_circle``'s (C structs, the returned points the only lists made), where it
    answers; this is its reference."""
    if _geo is not None and shape.kind == gh.CIRCULAR:
        found = _geo.search_circle(z, shape.lon, shape.lat, shape.conversion, shape.radius,
                                   limit, sort, count)
        if found is not None:
            return found[1]
    points = _points_in_shape(z, shape, limit)
    returned = len(points) if count == 0 or len(points) < count else count
    if sort != _SORT_NONE:
        points = _sorted_points(points, sort, returned)
    return points[:returned]


def _georadius_generic(c: Any, argv: list[bytes], src: int, flags: int) -> object:
    """georadiusGeneric: every search command, in Redis's order of checks."""
    z = read_typed(c, argv[src], ZSETS)
    storekey: bytes | None = None
    storedist = False
    kind = 0
    lon = lat = conversion = radius = width = height = 0.0
    if flags & _COORDS:
        base = 6
        kind = gh.CIRCULAR
        lon, lat = _lonlat(argv, 2)
        radius, conversion = _distance_arg(argv, base - 2)
    elif flags & _MEMBER and z is None:
        base = 5                 # no source key: parse the options only, to pick the reply
    elif flags & _MEMBER:
        base = 5
        kind = gh.CIRCULAR
        lon, lat = _member_lonlat(z, argv[2])
        radius, conversion = _distance_arg(argv, base - 2)
    else:
        base = 2
        if flags & _SEARCHSTORE:
            base = 3
            storekey = argv[1]
    withdist = withhash = withcoords = False
    frommember = fromloc = byradius = bybox = False
    sort = _SORT_NONE
    any_ = False
    count = 0
    n = len(argv)
    remaining = n - base
    search = flags & _SEARCH
    can_store = not (flags & _NOSTORE) and not search
    i = 0
    while i < remaining:
        j = base + i
        arg = option_token(argv[j])
        if arg == b"withdist":
            withdist = True
        elif arg == b"withhash":
            withhash = True
        elif arg == b"withcoord":
            withcoords = True
        elif arg == b"any":
            any_ = True
        elif arg in _SORTS:
            sort = _SORTS[arg]
        elif arg == b"count" and i + 1 < remaining:
            count = parse_int(argv[j + 1])
            if count <= 0:
                raise ReplyError("ERR COUNT must be > 0")
            i += 1
        elif arg == b"store" and i + 1 < remaining and can_store:
            storekey, storedist = argv[j + 1], False
            i += 1
        elif arg == b"storedist" and i + 1 < remaining and can_store:
            storekey, storedist = argv[j + 1], True
            i += 1
        elif arg == b"storedist" and search and flags & _SEARCHSTORE:
            storedist = True
        elif arg == b"frommember" and i + 1 < remaining and search and not fromloc:
            if z is not None:
                lon, lat = _member_lonlat(z, argv[j + 1])
            frommember = True
            i += 1
        elif arg == b"fromlonlat" and i + 2 < remaining and search and not frommember:
            lon, lat = _lonlat(argv, j + 1)
            fromloc = True
            i += 2
        elif arg == b"byradius" and i + 2 < remaining and search and not bybox:
            radius, conversion = _distance_arg(argv, j + 1)
            kind = gh.CIRCULAR
            byradius = True
            i += 2
        elif arg == b"bybox" and i + 3 < remaining and search and not byradius:
            width, height, conversion = _box_arg(argv, j + 1)
            kind = gh.RECTANGLE
            bybox = True
            i += 3
        else:
            raise ReplyError(SYNTAX)
        i += 1

    if storekey is not None and (withdist or withhash or withcoords):
        what = "GEOSEARCHSTORE" if flags & _SEARCHSTORE else "STORE option in GEORADIUS"
        raise ReplyError(
            f"ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options")
    name = argv[0].decode("utf-8", "replace")
    if search and not (frommember or fromloc):
        raise ReplyError(
            f"ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}")
    if search and not (byradius or bybox):
        raise ReplyError(f"ERR exactly one of BYRADIUS and BYBOX can be specified for {name}")
    if any_ and not count:
        raise ReplyError("ERR the ANY argument requires COUNT argument")

    db = c.db
    if z is None:
        if storekey is not None:
            if db.delete(storekey):
                notify(c, NOTIFY_GENERIC, b"del", storekey)
                c.core.dirty += 1
            return 0
        return []

    if count and sort == _SORT_NONE and not any_:
        sort = _SORT_ASC
    points = _search(z, gh.Shape(kind, lon, lat, conversion, radius, width, height),
                     count if any_ else 0, sort, count)
    if not points and storekey is None:
        return []
    returned = len(points)

    if storekey is None:
        out: list[object] = []
        extra = withdist or withhash or withcoords
        for p in points:
            if not extra:
                out.append(p[4])
                continue
            item: list[object] = [p[4]]
            if withdist:
                item.append(gh.format_distance(p[2] / conversion))
            if withhash:
                item.append(int(p[3]))
            if withcoords:
                item.append([_coord(c, p[0]), _coord(c, p[1])])
            out.append(item)
        return out

    if returned:
        pairs = [(p[4], p[2] / conversion if storedist else p[3]) for p in points]
        db.set(storekey, zsets.compact(pairs))
        notify(c, NOTIFY_ZSET, b"geosearchstore" if search else b"georadiusstore", storekey)
        c.core.dirty += returned
    elif db.delete(storekey):
        notify(c, NOTIFY_GENERIC, b"del", storekey)
        c.core.dirty += 1
    return returned


def _store_keys(startfrom: int) -> Callable[[list[bytes]], list[int]]:
    """GEORADIUS's key specs: the source, then the key after the first STORE and the first
    STOREDIST found from ``startfrom`` on (the last argument is not searched), as COMMAND
    GETKEYS reports them."""

    def keys(argv: list[bytes]) -> list[int]:
        out = [1]
        for keyword in (b"store", b"storedist"):
            for i in range(startfrom, len(argv) - 1):
                if option_token(argv[i]) == keyword:
                    out.append(i + 1)
                    break
        return out

    return keys


_RADIUS = "Query a sorted set representing a geospatial index to fetch members "
_SEARCH_SUMMARY = ("Query a sorted set representing a geospatial index to fetch members inside "
                   "an area of a box or a circle")

# GEORADIUS[BYMEMBER][_RO] and GEOSEARCH[STORE] all run _georadius_generic: (name, arity, flags,
# first_key..last_key, since, keys_fn, summary, srcpos, what).
for _name, _arity, _flags, _last, _since, _keys_fn, _summary, _srcpos, _what in (
    ("georadius", -6, "write denyoom", 1, "3.2.0", _store_keys(6),
     _RADIUS + "matching a given maximum distance from a point", 1, _COORDS),
    ("georadiusbymember", -5, "write denyoom", 1, "3.2.0", _store_keys(5),
     _RADIUS + "matching a given maximum distance from a member", 1, _MEMBER),
    ("georadius_ro", -6, "readonly", 1, "3.2.10", None,
     "A read-only variant for GEORADIUS", 1, _COORDS | _NOSTORE),
    ("georadiusbymember_ro", -5, "readonly", 1, "3.2.10", None,
     "A read-only variant for GEORADIUSBYMEMBER", 1, _MEMBER | _NOSTORE),
    ("geosearch", -7, "readonly", 1, "6.2.0", None, _SEARCH_SUMMARY + ".", 1, _SEARCH),
    ("geosearchstore", -8, "write denyoom", 2, "6.2.0", None,
     _SEARCH_SUMMARY + ", and store the result in another key.", 2, _SEARCH | _SEARCHSTORE),
):
    def _geo_query(c: Any, argv: list[bytes], srcpos: int = _srcpos,
                   what: int = _what) -> object:
        return _georadius_generic(c, argv, srcpos, what)
    command(_name, _arity, _flags, keys=(1, _last, 1), group="geo", acl="geo", since=_since,
            keys_fn=_keys_fn, summary=_summary)(_geo_query)
