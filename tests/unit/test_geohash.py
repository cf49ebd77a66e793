"""The geohash arithmetic on its own (pyrepl.keyspace.geohash) and the result ordering of the
geo commands (pqsort, glibc's merge sort). The byte-for-byte comparison with Redis is in
tests/interop/test_diff_geo.py; the expected values here are what redis-server 7.0.15 answers.
"""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl.commands.geo import _cmp_asc, _cmp_desc, msort, pqsort
from pyrepl.keyspace import geohash as gh

LONS = st.floats(gh.LONG_MIN, gh.LONG_MAX)
LATS = st.floats(gh.LAT_MIN, gh.LAT_MAX)
PALERMO = (13.361389, 38.115556)
CATANIA = (15.087269, 37.502669)


def test_known_scores_positions_and_hashes() -> None:
    s = gh.encode_score(*PALERMO)
    assert s == 3479099956230698
    lon, lat = gh.decode_score(s)
    assert (gh.format_coord(lon), gh.format_coord(lat)) == (b"13.36138933897018433",
                                                            b"38.11555639549629859")
    assert gh.geohash_string(s) == b"sqc8b49rny0"
    assert gh.encode_score(*CATANIA) == 3479447370796909
    # the top edge overflows the 52 bits, as in Redis (the cell index is 2**26)
    assert gh.encode_score(180, gh.LAT_MAX) == 3 << 52


def test_distances_match_redis() -> None:
    a = gh.decode_score(gh.encode_score(*PALERMO))
    b = gh.decode_score(gh.encode_score(*CATANIA))
    d = gh.distance(*a, *b)
    assert gh.format_distance(d) == b"166274.1516"
    assert gh.format_distance(d / 1000) == b"166.2742"
    assert gh.format_distance(d / 1609.34) == b"103.3182"
    assert gh.distance(*a, *a) == 0.0


def test_absurd_scores_decode_like_the_x86_cast() -> None:
    top = (b"180", b"85.0511287799999991")
    bottom_left = (b"-179.99999731779098511", b"-85.05112751263942528")
    bottom_right = (b"180", b"-85.05112751263942528")
    cases = {-1.0: top, -1.5: top, 1e19: top, 2e19: bottom_left, math.inf: bottom_left,
             -math.inf: bottom_right, 0.5: bottom_left, 2.0 ** 63: bottom_right,
             2.0 ** 52: (b"-179.99999731779098511", b"85.0511287799999991"),
             -1e30: bottom_right, 1e25: bottom_left}
    for score, want in cases.items():
        lon, lat = gh.decode_score(score)
        assert (gh.format_coord(lon), gh.format_coord(lat)) == want, score
    assert gh.score_bits(-1.0) == (1 << 64) - 1
    assert gh.score_bits(math.inf) == 0 and gh.score_bits(-math.inf) == 1 << 63


def test_fixed_point_distance_format() -> None:
    assert gh.format_distance(0.0) == b"0.0000"
    assert gh.format_distance(0.0001) == b"0.0001"
    assert gh.format_distance(6.0642951598391699e-05) == b"0.0001"
    assert gh.format_distance(0.01) == b"0.0100"
    # llrint of the product (a double), ties to even: 10000.500000000002, 123456.49999999999,
    # 12.5 and 13.5
    assert gh.format_distance(1.00005) == b"1.0001"
    assert gh.format_distance(12.34565) == b"12.3456"
    assert gh.format_distance(0.00125) == b"0.0012"
    assert gh.format_distance(0.00135) == b"0.0014"
    assert gh.format_distance(math.nan) == b"-922337203685477.5808"   # llrint's LLONG_MIN


def test_human_long_double_format() -> None:
    assert gh.format_coord(180.0) == b"180"
    assert gh.format_coord(-0.0) == b"0"
    assert gh.format_coord(1.5) == b"1.5"
    assert gh.format_coord(0.1) == b"0.10000000000000001"


@given(st.one_of(st.floats(allow_nan=False), st.integers(0, 2**54).map(float)))
def test_the_inlined_score_decoder_is_the_generic_one(score: float) -> None:
    assert gh.decode_score(score) == gh.decode_to_lonlat((gh.score_bits(score), gh.STEP_MAX))


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_interleave_round_trip(x: int, y: int) -> None:
    v = gh.interleave64(x, y)
    assert gh.deinterleave64(v) == x | (y << 32)


@given(LONS, LATS)
def test_encode_decode_stays_in_the_cell(lon: float, lat: float) -> None:
    score = gh.encode_score(lon, lat)
    assert 0 <= score <= 3 << 52
    if score >> 52:
        return        # on the top or east edge: a cell past the grid (and past 2**53)
    dlon, dlat = gh.decode_score(float(score))
    assert abs(dlon - lon) <= 360 / 2**26 and abs(dlat - lat) <= 171 / 2**26
    assert gh.encode_score(dlon, dlat) == score   # the centre encodes into the same cell


@given(LONS, LATS, st.integers(2, 26))
def test_neighbours_are_one_cell_away(lon: float, lat: float, step: int) -> None:
    h = gh.encode(lon, lat, step)
    assert h is not None
    if h[0] >> (2 * step):
        return                                 # an edge cell past the grid (see above)
    nb = gh.neighbors(h)
    assert gh._move_x(nb.east, -1) == h and gh._move_x(nb.west, 1) == h
    assert gh._move_y(nb.north, -1) == h and gh._move_y(nb.south, 1) == h
    centre = gh.decode(h)
    east, north = gh.decode(nb.east), gh.decode(nb.north)
    assert centre and east and north
    if centre.lon_max < gh.LONG_MAX:
        assert east.lon_min == centre.lon_max
    if centre.lat_max < gh.LAT_MAX:
        assert north.lat_min == centre.lat_max


def test_estimate_steps() -> None:
    assert gh.estimate_steps(0, 0) == 26
    assert gh.estimate_steps(1, 0) == 24
    assert gh.estimate_steps(1000, 0) == 14
    assert gh.estimate_steps(1000, 70) == 13 and gh.estimate_steps(1000, -81) == 12
    assert gh.estimate_steps(1e9, 0) == 1 and gh.estimate_steps(math.inf, 0) == 1


@settings(max_examples=60, deadline=None)
@given(st.floats(-179, 179), st.floats(-70, 70), st.floats(0.001, 2000),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_search_areas_cover_the_shape(lon: float, lat: float, km: float, box: bool,
                                      seed: int) -> None:
    """Every point the shape contains lies in one of the boxes the search scans (points on
    the 180th meridian or the latitude limits excepted: their cell lies past the grid)."""
    if box:
        shape = gh.Shape(gh.RECTANGLE, lon, lat, 1000.0, width=km, height=km / 2)
    else:
        shape = gh.Shape(gh.CIRCULAR, lon, lat, 1000.0, radius=km)
    ranges = [gh.score_range(h) for h in gh.search_areas(shape) if h != gh.ZERO]
    rng = random.Random(seed)
    span = km / 111 * 3 + 1e-6
    for _ in range(40):
        plon = lon + rng.uniform(-span, span)
        plat = lat + rng.uniform(-span, span)
        if not (-180 < plon < 180 and gh.LAT_MIN < plat < gh.LAT_MAX):
            continue
        score = float(gh.encode_score(plon, plat))
        dlon, dlat = gh.decode_score(score)
        if gh.within(shape, dlon, dlat) is not None:
            assert any(lo <= score < hi for lo, hi in ranges), (plon, plat)


def _points(dists: list[float]) -> list[list]:
    return [[0.0, 0.0, d, 0.0, b"m%d" % i] for i, d in enumerate(dists)]


DISTS = st.lists(st.sampled_from([0.0, 1.0, 2.0, 2.5, 3.0, 10.0]), max_size=120)


@given(DISTS, st.data())
def test_pqsort_orders_the_requested_prefix(dists: list[float], data: st.DataObject) -> None:
    if not dists:
        return
    k = data.draw(st.integers(1, len(dists)))
    for cmp, rev in ((_cmp_asc, False), (_cmp_desc, True)):
        pts = _points(dists)
        pqsort(pts, cmp, 0, k - 1)
        assert sorted(p[4] for p in pts) == sorted(p[4] for p in _points(dists))
        assert [p[2] for p in pts[:k]] == sorted(dists, reverse=rev)[:k]


def test_pqsort_tie_order_is_not_stable() -> None:
    """Ties come out in the algorithm's own order (what Redis replies with COUNT)."""
    pts = _points([1.0] * 10 + [0.0] * 10)
    pqsort(pts, _cmp_asc, 0, 4)
    assert [p[4] for p in pts[:5]] != [b"m10", b"m11", b"m12", b"m13", b"m14"]
    assert all(p[2] == 0.0 for p in pts[:5])


@given(DISTS)
def test_msort_is_a_stable_sort(dists: list[float]) -> None:
    pts = _points(dists)
    assert msort(pts, _cmp_asc) == sorted(pts, key=lambda p: p[2])
    assert msort(pts, _cmp_desc) == sorted(pts, key=lambda p: p[2], reverse=True)
