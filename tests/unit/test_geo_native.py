"""pyrepl/commands/_geo.c against geo.py and geohash.py: a circle's candidates (the same
points, the same distances to the bit, the same stop at ANY's limit) and Redis's partial
quicksort (the same order, ties included)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyrepl import native
from pyrepl.commands.geo import _cmp_asc, _cmp_desc, pqsort
from pyrepl.keyspace import geohash as gh

_native = native.load("pyrepl.commands._geo")
if _native is None:
    pytest.skip(f"compares pyrepl/commands/_geo.c with geo.py ({native.WHY_PURE})",
                allow_module_level=True)


def _python_scan(items, hi, lon, lat, radius, limit):
    """_points_in_shape's loop for a circle (the reference the C follows)."""
    out = []
    for score, member in items:
        if not score < hi:
            break
        plon, plat = gh.decode_score(score)
        d = gh.distance(lon, lat, plon, plat)
        if not d > radius:
            out.append([plon, plat, d, score, member])
        if out and limit and len(out) >= limit:
            break
    return out


def _same(a, b) -> bool:
    """Points equal to the bit (a NaN distance equals a NaN)."""
    return len(a) == len(b) and all(
        x[:2] == y[:2] and x[3:] == y[3:] and
        (x[2] == y[2] or (math.isnan(x[2]) and math.isnan(y[2]))) for x, y in zip(a, b, strict=True))


SCORES = st.one_of(st.integers(0, (1 << 52) - 1).map(float),
                   st.floats(0.0, 2.0 ** 52, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(scores=st.lists(SCORES, max_size=60), lon=st.floats(-180, 180), lat=st.floats(-85, 85),
       radius=st.floats(0, 2e7), limit=st.integers(0, 5), hi_at=st.integers(0, 60))
def test_scan_circle_is_the_python_loop(scores, lon, lat, radius, limit, hi_at) -> None:
    items = sorted((s, b"m%d" % i) for i, s in enumerate(scores))
    hi = items[hi_at][0] if hi_at < len(items) else float(1 << 52)
    out: list = []
    taken, state = _native.scan_circle(items, hi, lon, lat, radius, out, limit)
    assert _same(out, _python_scan(items, hi, lon, lat, radius, limit))
    assert state in (0, 1) and (state == 1 or taken == len(items))


def test_a_score_only_python_decodes_is_left_to_it() -> None:
    out: list = []
    items = [(1.0, b"a"), (-1.0, b"b"), (2.0, b"c")]
    assert _native.scan_circle(items, 10.0, 0.0, 0.0, 1e9, out, 0) == (1, 2)
    assert len(out) == 1 and out[0][4] == b"a"
    assert _native.scan_circle([(2.0 ** 63, b"x")], math.inf, 0.0, 0.0, 1e9, [], 0) == (0, 2)


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
