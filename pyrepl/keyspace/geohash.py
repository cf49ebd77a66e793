"""Geohash arithmetic of Redis 7.0.15 (geohash.c, geohash_helper.c), pure functions.

Theory of operation: a position is stored as the score of a sorted-set member, the 52-bit
interleave of its latitude (even bits) and longitude (odd bits) cells at step 26, both
measured over Redis's Mercator-safe ranges (longitude -180..180, latitude
-85.05112878..85.05112878). Decoding takes the centre of the cell back, clamped to the ranges.
A search (GEOSEARCH / GEORADIUS) picks a step from the radius (``estimate_steps``), encodes the
centre at that step and scans the cell plus its eight neighbours as score ranges, dropping the
neighbours the bounding box cannot touch (``search_areas``); each candidate is then tested
with the haversine distance.

Everything is computed exactly as the C code does, in the same order with the same doubles:
Python floats are IEEE doubles, ``math.sin``/``cos``/``asin``/``sqrt`` are the C library's
(x86-64 without FMA contraction, as Debian builds Redis), and the 64-bit unsigned arithmetic is
masked by hand. Where C silently returns NaN (``cos(inf)``, ``asin(1 + ulp)``) the code here
does too, instead of raising. ``score_bits`` reproduces the x86-64 conversion of any
double to ``uint64_t`` (negative, infinite and huge scores decode to the edges, as Redis's
GEOPOS shows for a sorted set written with ZADD).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import asin, cos, sin, sqrt
from typing import NamedTuple

STEP_MAX = 26                      # 26 * 2 = 52 bits
LAT_MIN = -85.05112878
LAT_MAX = 85.05112878
LONG_MIN = -180.0
LONG_MAX = 180.0

D_R = math.pi / 180.0
EARTH_RADIUS_IN_METERS = 6372797.560856
MERCATOR_MAX = 20037726.37

MASK64 = (1 << 64) - 1
_TWO63 = 9223372036854775808.0
_INDEFINITE = 1 << 63              # what cvttsd2si gives for NaN and out-of-range values

CIRCULAR, RECTANGLE = 1, 2

# A hash cell: (bits, step). (0, 0) is Redis's "zeroed" (excluded) neighbour.
Hash = tuple[int, int]
ZERO: Hash = (0, 0)
WGS84 = ((LONG_MIN, LONG_MAX), (LAT_MIN, LAT_MAX))
STANDARD = ((-180.0, 180.0), (-90.0, 90.0))   # GEOHASH's string ranges
_ALPHABET = b"0123456789bcdefghjkmnpqrstuvwxyz"


# -- C arithmetic helpers -----------------------------------------------------------------------

def _ccos(x: float) -> float:
    return math.cos(x) if math.isfinite(x) else math.nan


def _csqrt(x: float) -> float:
    return math.sqrt(x) if x >= 0.0 or x != x else math.nan


def _cdiv(a: float, b: float) -> float:
    """IEEE division (Python raises on a zero divisor, C gives inf or NaN)."""
    if b:
        return a / b
    if a != a or a == 0.0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _cvttsd2si(x: float) -> int:
    """x86-64 truncating double -> int64 (as an unsigned 64-bit pattern)."""
    if x != x or not -_TWO63 <= x < _TWO63:
        return _INDEFINITE
    return int(x) & MASK64


def score_bits(score: float) -> int:
    """``(uint64_t)score`` as gcc compiles it on x86-64 (decodeGeohash's cast)."""
    if score >= _TWO63:
        return (_cvttsd2si(score - _TWO63) ^ _INDEFINITE) & MASK64
    return _cvttsd2si(score)


def _uint32(x: float) -> int:
    """``(uint32_t)x`` for a double: the low 32 bits of cvttsd2si."""
    return _cvttsd2si(x) & 0xFFFFFFFF


# -- interleaving ----------------------------------------------------------------------------

def interleave64(xlo: int, ylo: int) -> int:
    """x in the even bits, y in the odd bits (geohash.c's interleave64)."""
    x, y = xlo & 0xFFFFFFFF, ylo & 0xFFFFFFFF
    x = (x | (x << 16)) & 0x0000FFFF0000FFFF
    y = (y | (y << 16)) & 0x0000FFFF0000FFFF
    x = (x | (x << 8)) & 0x00FF00FF00FF00FF
    y = (y | (y << 8)) & 0x00FF00FF00FF00FF
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0F
    y = (y | (y << 4)) & 0x0F0F0F0F0F0F0F0F
    x = (x | (x << 2)) & 0x3333333333333333
    y = (y | (y << 2)) & 0x3333333333333333
    x = (x | (x << 1)) & 0x5555555555555555
    y = (y | (y << 1)) & 0x5555555555555555
    return x | (y << 1)


def deinterleave64(v: int) -> int:
    """The inverse: even bits in the low word, odd bits in the high word."""
    b = (0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF,
         0x0000FFFF0000FFFF, 0x00000000FFFFFFFF)
    x = v & MASK64
    y = (v & MASK64) >> 1
    for s, m in ((0, b[0]), (1, b[1]), (2, b[2]), (4, b[3]), (8, b[4]), (16, b[5])):
        x = (x | (x >> s)) & m
        y = (y | (y >> s)) & m
    return (x | (y << 32)) & MASK64


# -- encode / decode ---------------------------------------------------------------------------

def encode(lon: float, lat: float, step: int,
           ranges: tuple[tuple[float, float], tuple[float, float]] = WGS84) -> Hash | None:
    """geohashEncode: the cell of (lon, lat) at ``step``; None where C returns 0."""
    (lon_min, lon_max), (lat_min, lat_max) = ranges
    if step > 32 or step == 0:
        return None
    if lon > LONG_MAX or lon < LONG_MIN or lat > LAT_MAX or lat < LAT_MIN:
        return None
    if lat < lat_min or lat > lat_max or lon < lon_min or lon > lon_max:
        return None
    lat_offset = (lat - lat_min) / (lat_max - lat_min)
    long_offset = (lon - lon_min) / (lon_max - lon_min)
    scale = float(1 << step)
    lat_offset *= scale
    long_offset *= scale
    return interleave64(_uint32(lat_offset), _uint32(long_offset)), step


def align52(bits: int, step: int) -> int:
    """geohashAlign52Bits: the cell's bits shifted to a 52-bit score."""
    return (bits << (52 - step * 2)) & MASK64


def encode_score(lon: float, lat: float) -> int:
    """GEOADD's score of a (validated) position."""
    h = encode(lon, lat, STEP_MAX)
    assert h is not None
    return align52(*h)


@dataclass(frozen=True, slots=True)
class Area:
    lon_min: float
    lon_max: float
    lat_min: float
    lat_max: float


def decode(h: Hash,
           ranges: tuple[tuple[float, float], tuple[float, float]] = WGS84) -> Area | None:
    """geohashDecode: the cell's bounds (None for a zeroed hash, where C returns 0)."""
    bits, step = h
    if not bits and not step:
        return None
    (lon_min, lon_max), (lat_min, lat_max) = ranges
    sep = deinterleave64(bits)
    lat_scale = lat_max - lat_min
    long_scale = lon_max - lon_min
    ilato = sep & 0xFFFFFFFF
    ilono = sep >> 32
    div = float(1 << step)
    return Area(
        lon_min + (ilono * 1.0 / div) * long_scale,
        lon_min + (((ilono + 1) & 0xFFFFFFFF) * 1.0 / div) * long_scale,
        lat_min + (ilato * 1.0 / div) * lat_scale,
        lat_min + (((ilato + 1) & 0xFFFFFFFF) * 1.0 / div) * lat_scale,
    )


def decode_to_lonlat(h: Hash) -> tuple[float, float]:
    """geohashDecodeToLongLatWGS84: the cell's centre, clamped to the ranges."""
    a = decode(h)
    assert a is not None
    lon = (a.lon_min + a.lon_max) / 2
    lon = min(max(lon, LONG_MIN), LONG_MAX) if lon == lon else lon
    lat = (a.lat_min + a.lat_max) / 2
    lat = min(max(lat, LAT_MIN), LAT_MAX) if lat == lat else lat
    return lon, lat


_DIV26 = float(1 << STEP_MAX)
_LAT_SCALE = LAT_MAX - LAT_MIN
_LONG_SCALE = LONG_MAX - LONG_MIN


_DECODED: dict[float, tuple[float, float]] = {}
_DECODED_MAX = 1 << 16


def decode_score(score: float) -> tuple[float, float]:
    """decodeGeohash: the (lon, lat) a sorted-set score stands for (never fails).

    :func:`decode_to_lonlat` of ``(score_bits(score), 26)`` written out in one function: the
    same operations on the same doubles. The searches decode every candidate of every query,
    so the results are kept (up to 65536 scores, then the cache starts over)."""
    got = _DECODED.get(score)
    if got is not None:
        return got
    got = _decode_score(score)
    if len(_DECODED) >= _DECODED_MAX:
        _DECODED.clear()
    _DECODED[score] = got
    return got


def _decode_score(score: float) -> tuple[float, float]:
    bits = int(score) if 0.0 <= score < _TWO63 else score_bits(score)
    x = bits & 0x5555555555555555
    y = (bits >> 1) & 0x5555555555555555
    x = (x | (x >> 1)) & 0x3333333333333333
    y = (y | (y >> 1)) & 0x3333333333333333
    x = (x | (x >> 2)) & 0x0F0F0F0F0F0F0F0F
    y = (y | (y >> 2)) & 0x0F0F0F0F0F0F0F0F
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FF
    y = (y | (y >> 4)) & 0x00FF00FF00FF00FF
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFF
    y = (y | (y >> 8)) & 0x0000FFFF0000FFFF
    x = (x | (x >> 16)) & 0xFFFFFFFF          # ilato
    y = (y | (y >> 16)) & 0xFFFFFFFF          # ilono
    lon = (LONG_MIN + (y / _DIV26) * _LONG_SCALE
           + (LONG_MIN + (((y + 1) & 0xFFFFFFFF) / _DIV26) * _LONG_SCALE)) / 2
    lat = (LAT_MIN + (x / _DIV26) * _LAT_SCALE
           + (LAT_MIN + (((x + 1) & 0xFFFFFFFF) / _DIV26) * _LAT_SCALE)) / 2
    if lon > LONG_MAX:
        lon = LONG_MAX
    elif lon < LONG_MIN:
        lon = LONG_MIN
    if lat > LAT_MAX:
        lat = LAT_MAX
    elif lat < LAT_MIN:
        lat = LAT_MIN
    return lon, lat


def geohash_string(score: float) -> bytes:
    """GEOHASH's 11 characters: the position re-encoded over the standard -90..90 range."""
    lon, lat = decode_score(score)
    h = encode(lon, lat, STEP_MAX, STANDARD)
    bits = h[0] if h is not None else 0
    out = bytearray()
    for i in range(11):
        idx = 0 if i == 10 else (bits >> (52 - (i + 1) * 5)) & 0x1F
        out.append(_ALPHABET[idx])
    return bytes(out)


# -- neighbours --------------------------------------------------------------------------------

# In an interleaved hash the longitude (x) bits are the odd ones, the latitude (y) bits the even.
_X_BITS = 0xAAAAAAAAAAAAAAAA
_Y_BITS = 0x5555555555555555


def _move(h: Hash, d: int, axis: int) -> Hash:
    """geohash_move_x / geohash_move_y: ``h`` moved ``d`` (-1, 0 or 1) cells along the axis
    whose bits are ``axis`` (_X_BITS or _Y_BITS), wrapping around; the other axis stays."""
    bits, step = h
    if d == 0:
        return h
    other = axis ^ MASK64
    moved = bits & axis
    zz = other >> (64 - step * 2)
    if d > 0:
        moved = (moved + (zz + 1)) & MASK64
    else:
        moved = ((moved | zz) - (zz + 1)) & MASK64
    moved &= axis >> (64 - step * 2)
    return moved | (bits & other), step


def _move_x(h: Hash, d: int) -> Hash:
    return _move(h, d, _X_BITS)


def _move_y(h: Hash, d: int) -> Hash:
    return _move(h, d, _Y_BITS)


@dataclass(slots=True)
class Neighbors:
    north: Hash
    east: Hash
    west: Hash
    south: Hash
    north_east: Hash
    south_east: Hash
    north_west: Hash
    south_west: Hash


def neighbors(h: Hash) -> Neighbors:
    """geohashNeighbors: the eight adjacent cells (wrapping around at the edges)."""
    return Neighbors(
        north=_move_y(h, 1), east=_move_x(h, 1), west=_move_x(h, -1), south=_move_y(h, -1),
        north_east=_move_y(_move_x(h, 1), 1), south_east=_move_y(_move_x(h, 1), -1),
        north_west=_move_y(_move_x(h, -1), 1), south_west=_move_y(_move_x(h, -1), -1),
    )


# -- search areas -------------------------------------------------------------------------------

class Shape(NamedTuple):
    """GeoShape: the centre, the unit's metres and a radius or a width x height box (in
    the unit). (A tuple: a frozen dataclass's __init__ cost ~5 us a search.)"""
    kind: int
    lon: float
    lat: float
    conversion: float
    radius: float = 0.0
    width: float = 0.0
    height: float = 0.0


def estimate_steps(range_meters: float, lat: float) -> int:
    """geohashEstimateStepsByRadius."""
    if range_meters == 0:
        return 26
    step = 1
    while range_meters < MERCATOR_MAX:
        range_meters *= 2
        step += 1
    step -= 2
    if lat > 66 or lat < -66:
        step -= 1
        if lat > 80 or lat < -80:
            step -= 1
    return min(max(step, 1), 26)


def bounding_box(shape: Shape) -> tuple[float, float, float, float]:
    """geohashBoundingBox: (min_lon, min_lat, max_lon, max_lat)."""
    lon, lat = shape.lon, shape.lat
    circular = shape.kind == CIRCULAR
    height = shape.conversion * (shape.radius if circular else shape.height / 2)
    width = shape.conversion * (shape.radius if circular else shape.width / 2)
    lat_delta = (height / EARTH_RADIUS_IN_METERS) / D_R
    long_delta_top = _cdiv(width / EARTH_RADIUS_IN_METERS, _ccos((lat + lat_delta) * D_R)) / D_R
    long_delta_bottom = _cdiv(width / EARTH_RADIUS_IN_METERS,
                              _ccos((lat - lat_delta) * D_R)) / D_R
    southern = lat < 0
    min_lon = lon - long_delta_bottom if southern else lon - long_delta_top
    max_lon = lon + long_delta_bottom if southern else lon + long_delta_top
    return min_lon, lat - lat_delta, max_lon, lat + lat_delta


def search_areas(shape: Shape) -> list[Hash]:
    """geohashCalculateAreasByShapeWGS84 + membersOfAllNeighbors' order: the centre cell,
    then north, south, east, west, north-east, north-west, south-east, south-west; a cell
    the bounding box cannot reach is ZERO."""
    min_lon, min_lat, max_lon, max_lat = bounding_box(shape)
    if shape.kind == CIRCULAR:
        radius_meters = shape.radius
    else:
        w, hgt = shape.width / 2, shape.height / 2
        radius_meters = _csqrt(w * w + hgt * hgt)
    radius_meters *= shape.conversion
    steps = estimate_steps(radius_meters, shape.lat)
    h = encode(shape.lon, shape.lat, steps)
    assert h is not None
    nb = neighbors(h)
    area = decode(h)
    assert area is not None
    north, south = decode(nb.north), decode(nb.south)
    east, west = decode(nb.east), decode(nb.west)
    assert north and south and east and west
    decrease = (north.lat_max < max_lat or south.lat_min > min_lat
                or east.lon_max < max_lon or west.lon_min > min_lon)
    if steps > 1 and decrease:
        steps -= 1
        h = encode(shape.lon, shape.lat, steps)
        assert h is not None
        nb = neighbors(h)
        area = decode(h)
        assert area is not None
    if steps >= 2:
        if area.lat_min < min_lat:
            nb.south = nb.south_west = nb.south_east = ZERO
        if area.lat_max > max_lat:
            nb.north = nb.north_east = nb.north_west = ZERO
        if area.lon_min < min_lon:
            nb.west = nb.south_west = nb.north_west = ZERO
        if area.lon_max > max_lon:
            nb.east = nb.south_east = nb.north_east = ZERO
    return [h, nb.north, nb.south, nb.east, nb.west, nb.north_east, nb.north_west,
            nb.south_east, nb.south_west]


def score_range(h: Hash) -> tuple[float, float]:
    """scoresOfGeoHashBox: the scores [min, max) of the members inside cell ``h``."""
    bits, step = h
    return float(align52(bits, step)), float(align52(bits + 1, step))


# -- distances ---------------------------------------------------------------------------------

def lat_distance(lat1: float, lat2: float) -> float:
    """geohashGetLatDistance."""
    return EARTH_RADIUS_IN_METERS * abs(lat2 * D_R - lat1 * D_R)


def distance(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """geohashGetDistance: haversine on Redis's Earth radius, in metres. The arguments are
    always finite (validated or decoded positions); only asin can leave its domain, when
    rounding makes ``a`` a hair above 1 for nearly antipodal points, and then C gives NaN."""
    lon1r = lon1 * D_R
    lon2r = lon2 * D_R
    v = sin((lon2r - lon1r) / 2)
    if v == 0.0:
        return EARTH_RADIUS_IN_METERS * abs(lat2 * D_R - lat1 * D_R)
    lat1r = lat1 * D_R
    lat2r = lat2 * D_R
    u = sin((lat2r - lat1r) / 2)
    r = sqrt(u * u + cos(lat1r) * cos(lat2r) * v * v)
    return 2.0 * EARTH_RADIUS_IN_METERS * (asin(r) if r <= 1.0 else math.nan)


def within(shape: Shape, lon: float, lat: float) -> float | None:
    """geoWithinShape (after the decode): the distance from the centre, None when outside."""
    if shape.kind == CIRCULAR:
        d = distance(shape.lon, shape.lat, lon, lat)
        return None if d > shape.radius * shape.conversion else d
    width_m = shape.width * shape.conversion
    height_m = shape.height * shape.conversion
    if lat_distance(lat, shape.lat) > height_m / 2:
        return None
    if distance(lon, lat, shape.lon, lat) > width_m / 2:
        return None
    return distance(shape.lon, shape.lat, lon, lat)


# -- reply formatting ----------------------------------------------------------------------------

_LLONG_MIN_ABS = 1 << 63


def format_distance(d: float) -> bytes:
    """addReplyDoubleDistance: fixedpoint_d2string(d, 4) (``llrint`` of d * 10000)."""
    if d == 0:
        return b"0.0000"
    x = d * 10000.0
    if x != x or not -_TWO63 <= x < _TWO63:
        value, negative = _LLONG_MIN_ABS, True          # llrint's out-of-range result
    else:
        s = round(x)                                    # ties to even, like llrint
        value, negative = abs(s), s < 0
    digits = b"%05d" % value
    return (b"-" if negative else b"") + digits[:-4] + b"." + digits[-4:]


def format_coord(d: float) -> bytes:
    """ld2string(LD_STR_HUMAN) of a double: ``%.17Lf``, trailing zeros and dot removed."""
    if math.isinf(d):
        return b"inf" if d > 0 else b"-inf"
    s = b"%.17f" % d
    s = s.rstrip(b"0")
    if s.endswith(b"."):
        s = s[:-1]
    return b"0" if s == b"-0" else s
