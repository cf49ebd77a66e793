"""pyrepl/commands/_geo.c against geo.py and geohash.py: a circle's search (the same points,
the same distances to the bit, the same stop at ANY's limit, the same order) and Redis's
partial quicksort (the same order, ties included)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.commands import geo
from pyrepl.commands.geo import _cmp_asc, _cmp_desc, pqsort
from pyrepl.keyspace import geohash as gh
from pyrepl.keyspace import zset

_native = native.load("pyrepl.commands._geo")
if _native is None:
    pytest.skip(f"compares pyrepl/commands/_geo.c with geo.py ({native.WHY_PURE})",
                allow_module_level=True)


def _same(a, b) -> bool:
    """Points equal to the bit (a NaN distance equals a NaN)."""
    return len(a) == len(b) and all(
        x[:2] == y[:2] and x[3:] == y[3:] and
        (x[2] == y[2] or (math.isnan(x[2]) and math.isnan(y[2]))) for x, y in zip(a, b, strict=True))


def _python_search(z, shape, limit, sort, count):
    """geo._search with the C left out: _points_in_shape, _sorted_points, the first count."""
    points = geo._points_in_shape(z, shape, limit)
    returned = len(points) if count == 0 or len(points) < count else count
    if sort:
        points = geo._sorted_points(points, sort, returned)
    return len(points), points[:returned]


# places near a centre (so that boxes hold several, at equal distances too) and anywhere
PLACES = st.lists(st.one_of(
    st.tuples(st.floats(14.0, 16.0), st.floats(36.0, 38.0)),
    st.tuples(st.sampled_from([14.5, 15.0, 15.5]), st.sampled_from([36.5, 37.0, 37.5])),
    st.tuples(st.floats(-180, 180), st.floats(-85.05112878, 85.05112878))), max_size=300)


@settings(max_examples=300, deadline=None)
@given(places=PLACES, lon=st.one_of(st.just(15.0), st.floats(-180, 180)),
       lat=st.one_of(st.just(37.0), st.floats(-85, 85)),
       radius=st.one_of(st.sampled_from([0.0, 50.0, 200.0, 2e4]), st.floats(0, 2e4)),
       limit=st.sampled_from([0, 0, 1, 5]), sort=st.sampled_from([0, 1, 2]),
       count=st.sampled_from([0, 1, 3, 10, 500]), listpack=st.booleans())
def test_search_circle_is_the_python_search(places, lon, lat, radius, limit, sort, count,
                                            listpack) -> None:
    """The same points found (ANY's limit included), in the same order (Redis's merge sort
    when all are returned, its partial quicksort otherwise, ties in their order), the same
    doubles, on a listpack and on a B+tree."""
    pairs = [(b"m%d" % i, float(gh.encode_score(lo, la))) for i, (lo, la) in enumerate(places)]
    z = (zset.ListpackZSet if listpack else zset.ZSet).from_items(
        sorted(dict(pairs).items(), key=lambda p: (p[1], p[0])))
    shape = gh.Shape(gh.CIRCULAR, lon, lat, 1000.0, radius, 0.0, 0.0)
    got = _native.search_circle(z, lon, lat, 1000.0, radius, limit, sort, count)
    found, points = _python_search(z, shape, limit, sort, count)
    assert got is not None and got[0] == found and _same(got[1], points)
    # (the members alone: GEOSEARCH's reply in pyrepl/commands/_hot.c)
    assert _native.search_circle(z, lon, lat, 1000.0, radius, limit, sort, count, True) == \
        (found, [p[4] for p in points])


def test_search_circle_crosses_the_b_trees_leaves() -> None:
    """A set of 2,000 places (a B+tree of many leaves, boxes that span several): the C walk
    of the tree in place finds what the Python's _bisect and _range find, for every limit,
    order and count."""
    pairs = sorted(((b"p%d" % i, float(gh.encode_score(12.5 + (i % 50) * 0.06,
                                                       36.6 + (i // 50) * 0.04)))
                    for i in range(2000)), key=lambda p: (p[1], p[0]))
    z = zset.ZSet.from_items(pairs)
    assert z._depth() >= 1
    for radius, limit, sort, count in ((200.0, 0, 1, 10), (200.0, 0, 0, 0), (80.0, 0, 2, 0),
                                       (200.0, 300, 0, 300), (5.0, 0, 1, 3)):
        shape = gh.Shape(gh.CIRCULAR, 14.0, 37.4, 1000.0, radius, 0.0, 0.0)
        got = _native.search_circle(z, 14.0, 37.4, 1000.0, radius, limit, sort, count)
        found, points = _python_search(z, shape, limit, sort, count)
        assert found > 0 and got is not None and got[0] == found and _same(got[1], points)


def test_scores_outside_every_box_are_not_found() -> None:
    """A member whose score no geohash cell holds (below 0, from 2^52 on: a sorted set that
    is not GEOADD's) is in no box, in the C as in the Python."""
    for score in (-1.0, 2.0 ** 52, 2.0 ** 63, math.inf):
        z = zset.ZSet.from_items([(b"a", 1.0), (b"b", score)])
        shape = gh.Shape(gh.CIRCULAR, 0.0, 0.0, 1.0, 2e7, 0.0, 0.0)
        got = _native.search_circle(z, 0.0, 0.0, 1.0, 2e7, 0, 1, 0)
        assert got is not None and got[0] == 1 and _same(got[1], _python_search(z, shape, 0, 1, 0)[1])


DISTS = st.lists(st.one_of(st.sampled_from([0.0, 1.0, 2.0, 2.5, 3.0, 10.0, math.nan]),
                           st.floats(0, 100)), max_size=150)


@settings(max_examples=300, deadline=None)
@given(dists=DISTS, data=st.data())
def test_pqsort_is_the_python_port(dists, data) -> None:
    if not dists:
        return
    lr = data.draw(st.integers(0, len(dists) - 1))
    rr = data.draw(st.integers(lr, len(dists) - 1))
    for cmp, desc in ((_cmp_asc, False), (_cmp_desc, True)):
        ref = [[0.0, 0.0, d, 0.0, b"m%d" % i] for i, d in enumerate(dists)]
        got = [list(p) for p in ref]
        pqsort(ref, cmp, lr, rr)
        _native.pqsort(got, desc, lr, rr)
        assert [p[4] for p in got] == [p[4] for p in ref]


def test_pqsort_refuses_what_is_not_a_point() -> None:
    with pytest.raises(TypeError):
        _native.pqsort([[0.0, 0.0, 1]], False, 0, 0)


UNITS = st.sampled_from([1.0, 1000.0, 0.3048, 1609.34])
SIZES = st.one_of(st.floats(0, 2e7), st.sampled_from([0.0, 1e-9, 0.5, 200.0, 5e6, 2.1e7]))


@settings(max_examples=500, deadline=None)
@given(circular=st.booleans(), lon=st.floats(-180, 180),
       lat=st.one_of(st.floats(-85.05112878, 85.05112878),
                     st.sampled_from([0.0, -0.0, 66.0, -66.5, 80.5, -85.05112878, 85.05112878])),
       unit=UNITS, radius=SIZES, width=SIZES, height=SIZES)
def test_search_areas_are_geohashs(circular, lon, lat, unit, radius, width, height) -> None:
    """The nine cells of a search (the centre, its neighbours, the ones the bounding box
    cannot reach zeroed) as geohash.search_areas computes them, every step and edge."""
    shape = gh.Shape(gh.CIRCULAR if circular else gh.RECTANGLE, lon, lat, unit,
                     radius if circular else 0.0, 0.0 if circular else width,
                     0.0 if circular else height)
    got = _native.search_areas(circular, lon, lat, unit, shape.radius, shape.width,
                               shape.height)
    assert got == gh.search_areas(shape)


def test_search_areas_examples() -> None:
    """Sicily, 200 km (bench_commands' GEOSEARCH), a point search, the antimeridian, a pole's
    edge."""
    for args in ((True, 15.0, 37.0, 1000.0, 200.0, 0.0, 0.0),
                 (True, 13.361389, 38.115556, 1.0, 0.0, 0.0, 0.0),
                 (False, 179.99, 0.0, 1000.0, 0.0, 400.0, 100.0),
                 (True, -179.9, -85.05, 1.0, 5e6, 0.0, 0.0)):
        kind = gh.CIRCULAR if args[0] else gh.RECTANGLE
        assert _native.search_areas(*args) == gh.search_areas(gh.Shape(kind, *args[1:]))
