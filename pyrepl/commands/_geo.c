/* pyrepl.commands._geo: a geo search's per-candidate work (pyrepl/commands/geo.py), in C.

   GEOSEARCH / GEORADIUS decode every member of the boxes around the centre and measure its
   distance (geohash.py's decode_score and distance), then order the hits with Redis's
   partial quicksort (pqsort.c, ported in geo.py with its tie order). In Python that was ~1 µs
   a candidate and as much again in the sort: a search over 200 places ran at 0.08x Redis
   (bench/RESULTS.md, issue 39). ``scan_circle`` is _points_in_shape's loop for a circle
   over a run of (score, member) items; ``pqsort`` is geo.pqsort with _cmp_asc or
   _cmp_desc. Both do the same floating point operations in the same order as the Python
   (libm's sin, cos, sqrt, asin: what math calls), so tests/unit/test_geo_native.py compares
   them exactly. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#define MODULE_NAME "pyrepl.commands._geo"
#include "../_slots.h"
#include "_geohash.h"

#define EARTH_RADIUS_IN_METERS 6372797.560856
#define TWO63 9223372036854775808.0

static const double D_R = M_PI / 180.0;

typedef struct {
    uint64_t bits;
    int step;
} cell;

typedef struct {
    double lon_min, lon_max, lat_min, lat_max;
} area;

/* geohash.decode on WGS84's ranges (a cell that is not zeroed) */
static area
decode_cell(cell h)
{
    uint64_t sep = deinterleave64(h.bits);
    double lat_scale = GEO_LAT_MAX - GEO_LAT_MIN, long_scale = GEO_LONG_MAX - GEO_LONG_MIN;
    uint32_t ilato = (uint32_t)sep, ilono = (uint32_t)(sep >> 32);
    double div = (double)(1ULL << h.step);
    area a = {
        GEO_LONG_MIN + (ilono * 1.0 / div) * long_scale,
        GEO_LONG_MIN + ((uint32_t)(ilono + 1) * 1.0 / div) * long_scale,
        GEO_LAT_MIN + (ilato * 1.0 / div) * lat_scale,
        GEO_LAT_MIN + ((uint32_t)(ilato + 1) * 1.0 / div) * lat_scale,
    };
    return a;
}

/* geohash._decode_score for 0 <= score < 2^63 (the cast the Python spells out for others):
   the centre of the step-26 cell, clamped to the ranges (decode_to_lonlat) */
static void
decode_score(double score, double *lon_out, double *lat_out)
{
    cell h = {(uint64_t)score, 26};
    area a = decode_cell(h);
    double lon = (a.lon_min + a.lon_max) / 2, lat = (a.lat_min + a.lat_max) / 2;
    *lon_out = lon > GEO_LONG_MAX ? GEO_LONG_MAX : lon < GEO_LONG_MIN ? GEO_LONG_MIN : lon;
    *lat_out = lat > GEO_LAT_MAX ? GEO_LAT_MAX : lat < GEO_LAT_MIN ? GEO_LAT_MIN : lat;
}

/* geohash.distance (geohashGetDistance). */
static double
distance(double lon1, double lat1, double lon2, double lat2)
{
    double lon1r = lon1 * D_R, lon2r = lon2 * D_R;
    double v = sin((lon2r - lon1r) / 2);
    if (v == 0.0)
        return EARTH_RADIUS_IN_METERS * fabs(lat2 * D_R - lat1 * D_R);
    double lat1r = lat1 * D_R, lat2r = lat2 * D_R;
    double u = sin((lat2r - lat1r) / 2);
    double r = sqrt(u * u + cos(lat1r) * cos(lat2r) * v * v);
    return 2.0 * EARTH_RADIUS_IN_METERS * (r <= 1.0 ? asin(r) : NAN);
}

/* [lon, lat, distance, score, member] appended to out (what Py_BuildValue("[dddOO]")
   made, without parsing its format at every point) */
static int
append_point(PyObject *out, double lon, double lat, double d, PyObject *score,
             PyObject *member)
{
    PyObject *p = PyList_New(5);
    if (p == NULL)
        return -1;
    PyObject *x;
    if ((x = PyFloat_FromDouble(lon)) == NULL)
        goto fail;
    PyList_SET_ITEM(p, 0, x);
    if ((x = PyFloat_FromDouble(lat)) == NULL)
        goto fail;
    PyList_SET_ITEM(p, 1, x);
    if ((x = PyFloat_FromDouble(d)) == NULL)
        goto fail;
    PyList_SET_ITEM(p, 2, x);
    Py_INCREF(score);
    PyList_SET_ITEM(p, 3, score);
    Py_INCREF(member);
    PyList_SET_ITEM(p, 4, member);
    int rc = PyList_Append(out, p);
    Py_DECREF(p);
    return rc;
fail:
    Py_DECREF(p);       /* (the slots not set are NULL: list_dealloc skips them) */
    return -1;
}

/* scan_circle(items, hi, lon, lat, radius, out, limit) -> (taken, state)

   _points_in_shape's loop for a circle over items (a list of (score, member) tuples, in
   score order): for each with score < hi, [lon, lat, distance, score, member] appended to
   out when the distance is within radius; it stops after the item that brings out to limit
   (when limit > 0). ``taken`` is how many items it went through; state 0: all of them,
   1: it stopped (at hi, or at limit), 2: items[taken] has a score the Python must decode
   (below 0 or from 2^63 on: its cast) and the loop goes on there. */
static PyObject *
scan_circle(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyList_CheckExact(args[0]) || !PyList_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "scan_circle(items: list, hi, lon, lat, radius, out: list, limit)");
        return NULL;
    }
    PyObject *items = args[0], *out = args[5];
    double hi = PyFloat_AsDouble(args[1]), clon = PyFloat_AsDouble(args[2]),
           clat = PyFloat_AsDouble(args[3]), radius = PyFloat_AsDouble(args[4]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[6]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items), i;
    int state = 0;
    for (i = 0; i < n; i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        if (!PyTuple_CheckExact(it) || PyTuple_GET_SIZE(it) != 2 ||
                !PyFloat_CheckExact(PyTuple_GET_ITEM(it, 0))) {
            PyErr_SetString(PyExc_TypeError, "scan_circle: items are (float, member) tuples");
            return NULL;
        }
        PyObject *score_obj = PyTuple_GET_ITEM(it, 0);
        double score = PyFloat_AS_DOUBLE(score_obj);
        if (!(score < hi)) {
            state = 1;
            break;
        }
        if (!(score >= 0.0 && score < TWO63)) {
            state = 2;
            break;
        }
        double lon, lat;
        decode_score(score, &lon, &lat);
        double d = distance(clon, clat, lon, lat);
        if (!(d > radius)) {
            if (append_point(out, lon, lat, d, score_obj, PyTuple_GET_ITEM(it, 1)) < 0)
                return NULL;
            if (limit > 0 && PyList_GET_SIZE(out) >= limit) {
                i++;
                state = 1;
                break;
            }
        }
    }
    return Py_BuildValue("(ni)", i, state);
}

/* -- pqsort: Redis's pqsort.c over a list of points, on their distance ------------------- */

typedef struct {
    PyObject **a;
    int desc;
} sorter;

static inline double
dist_of(PyObject *p)
{
    return PyFloat_AS_DOUBLE(PyList_GET_ITEM(p, 2));
}

/* _cmp_asc / _cmp_desc (a NaN distance compares below everything, both ways, then negated) */
static inline int
cmp(const sorter *s, Py_ssize_t i, Py_ssize_t j)
{
    double a = dist_of(s->a[i]), b = dist_of(s->a[j]);
    int r = a > b ? 1 : (a == b ? 0 : -1);
    return s->desc ? -r : r;
}

static inline void
swap(PyObject **a, Py_ssize_t i, Py_ssize_t j)
{
    PyObject *t = a[i];
    a[i] = a[j];
    a[j] = t;
}

static Py_ssize_t
med3(const sorter *s, Py_ssize_t i, Py_ssize_t j, Py_ssize_t k)
{
    if (cmp(s, i, j) < 0) {
        if (cmp(s, j, k) < 0)
            return j;
        return cmp(s, i, k) < 0 ? k : i;
    }
    if (cmp(s, j, k) > 0)
        return j;
    return cmp(s, i, k) < 0 ? i : k;
}

static void
vecswap(PyObject **a, Py_ssize_t i, Py_ssize_t j, Py_ssize_t n)
{
    for (Py_ssize_t k = 0; k < n; k++)
        swap(a, i + k, j + k);
}

/* geo._pqsort, line for line */
static void
pq(const sorter *s, Py_ssize_t lo, Py_ssize_t n, Py_ssize_t lr, Py_ssize_t rr)
{
    PyObject **a = s->a;
    for (;;) {
        if (n < 7) {
            for (Py_ssize_t pm = lo + 1; pm < lo + n; pm++)
                for (Py_ssize_t pl = pm; pl > lo && cmp(s, pl - 1, pl) > 0; pl--)
                    swap(a, pl, pl - 1);
            return;
        }
        Py_ssize_t pm = lo + n / 2;
        if (n > 7) {
            Py_ssize_t pl = lo, pn = lo + n - 1;
            if (n > 40) {
                Py_ssize_t d = n / 8;
                pl = med3(s, pl, pl + d, pl + 2 * d);
                pm = med3(s, pm - d, pm, pm + d);
                pn = med3(s, pn - 2 * d, pn - d, pn);
            }
            pm = med3(s, pl, pm, pn);
        }
        swap(a, lo, pm);
        Py_ssize_t pa = lo + 1, pb = lo + 1, pc = lo + n - 1, pd = lo + n - 1;
        for (;;) {
            int r;
            while (pb <= pc && (r = cmp(s, pb, lo)) <= 0) {
                if (r == 0) {
                    swap(a, pa, pb);
                    pa++;
                }
                pb++;
            }
            while (pb <= pc && (r = cmp(s, pc, lo)) >= 0) {
                if (r == 0) {
                    swap(a, pc, pd);
                    pd--;
                }
                pc--;
            }
            if (pb > pc)
                break;
            swap(a, pb, pc);
            pb++;
            pc--;
        }
        Py_ssize_t pn = lo + n, r;
        r = pa - lo < pb - pa ? pa - lo : pb - pa;
        if (r > 0)
            vecswap(a, lo, pb - r, r);
        r = pd - pc < pn - pd - 1 ? pd - pc : pn - pd - 1;
        if (r > 0)
            vecswap(a, pb, pn - r, r);
        r = pb - pa;
        if (r > 1 && !((lr < lo && rr < lo) || (lr >= lo + r && rr >= lo + r)))
            pq(s, lo, r, lr, rr);
        r = pd - pc;
        if (r <= 1)
            return;
        lo = pn - r;
        n = r;
        if ((lr < lo && rr < lo) || (lr >= lo + n && rr >= lo + n))
            return;
    }
}

/* -- search_areas: geohash.search_areas (geohash_helper.c's geohashCalculateAreasByShapeWGS84) */

#define MERCATOR_MAX 20037726.37

/* geohash.encode on WGS84's ranges: 0 where it answers None */
static int
encode_cell(double lon, double lat, int step, cell *out)
{
    out->step = step;
    return geohash_encode(lon, lat, step, &out->bits);
}

#define X_BITS 0xAAAAAAAAAAAAAAAAULL
#define Y_BITS 0x5555555555555555ULL

/* geohash._move: h moved d (-1, 0, 1) cells along the axis whose bits are ``axis`` */
static cell
move(cell h, int d, uint64_t axis)
{
    if (d == 0)
        return h;
    uint64_t other = ~axis, moved = h.bits & axis, zz = other >> (64 - h.step * 2);
    if (d > 0)
        moved = moved + (zz + 1);
    else
        moved = (moved | zz) - (zz + 1);
    moved &= axis >> (64 - h.step * 2);
    cell out = {moved | (h.bits & other), h.step};
    return out;
}

/* geohash.estimate_steps */
static int
estimate_steps(double range_meters, double lat)
{
    if (range_meters == 0)
        return 26;
    int step = 1;
    while (range_meters < MERCATOR_MAX) {
        range_meters *= 2;
        step++;
    }
    step -= 2;
    if (lat > 66 || lat < -66) {
        step--;
        if (lat > 80 || lat < -80)
            step--;
    }
    return step < 1 ? 1 : step > 26 ? 26 : step;
}

/* search_areas(circular, lon, lat, conversion, radius, width, height) -> list of 9
   (bits, step), or None where the Python's encode would fail (its assertion says why):
   geohash.search_areas, the same doubles in the same order (geohash.py's _cdiv, _ccos and
   _csqrt are C's /, cos and sqrt). */
static PyObject *
search_areas(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "search_areas(circular, lon, lat, conversion, radius, width, height)");
        return NULL;
    }
    int circular = PyObject_IsTrue(args[0]);
    double lon = PyFloat_AsDouble(args[1]), lat = PyFloat_AsDouble(args[2]),
           conversion = PyFloat_AsDouble(args[3]), radius = PyFloat_AsDouble(args[4]),
           width = PyFloat_AsDouble(args[5]), height = PyFloat_AsDouble(args[6]);
    if (circular < 0 || PyErr_Occurred())
        return NULL;
    /* bounding_box */
    double bh = conversion * (circular ? radius : height / 2),
           bw = conversion * (circular ? radius : width / 2);
    double lat_delta = (bh / EARTH_RADIUS_IN_METERS) / D_R;
    double long_delta_top = (bw / EARTH_RADIUS_IN_METERS) / cos((lat + lat_delta) * D_R) / D_R;
    double long_delta_bottom = (bw / EARTH_RADIUS_IN_METERS) / cos((lat - lat_delta) * D_R) / D_R;
    int southern = lat < 0;
    double min_lon = southern ? lon - long_delta_bottom : lon - long_delta_top,
           max_lon = southern ? lon + long_delta_bottom : lon + long_delta_top,
           min_lat = lat - lat_delta, max_lat = lat + lat_delta;
    double radius_meters;
    if (circular) {
        radius_meters = radius;
    } else {
        double w = width / 2, hh = height / 2;
        radius_meters = sqrt(w * w + hh * hh);
    }
    radius_meters *= conversion;
    int steps = estimate_steps(radius_meters, lat);
    cell h;
    if (!encode_cell(lon, lat, steps, &h))
        Py_RETURN_NONE;
    /* north, south, east, west, north-east, north-west, south-east, south-west */
    cell nb[8];
    for (int pass = 0; pass < 2; pass++) {
        nb[0] = move(h, 1, Y_BITS);
        nb[1] = move(h, -1, Y_BITS);
        nb[2] = move(h, 1, X_BITS);
        nb[3] = move(h, -1, X_BITS);
        nb[4] = move(move(h, 1, X_BITS), 1, Y_BITS);
        nb[5] = move(move(h, -1, X_BITS), 1, Y_BITS);
        nb[6] = move(move(h, 1, X_BITS), -1, Y_BITS);
        nb[7] = move(move(h, -1, X_BITS), -1, Y_BITS);
        if (pass == 1)
            break;
        area north = decode_cell(nb[0]), south = decode_cell(nb[1]), east = decode_cell(nb[2]),
             west = decode_cell(nb[3]);
        int decrease = north.lat_max < max_lat || south.lat_min > min_lat ||
                       east.lon_max < max_lon || west.lon_min > min_lon;
        if (!(steps > 1 && decrease))
            break;
        steps--;
        if (!encode_cell(lon, lat, steps, &h))
            Py_RETURN_NONE;
    }
    if (steps >= 2) {
        area a = decode_cell(h);
        const cell zero = {0, 0};
        if (a.lat_min < min_lat)
            nb[1] = nb[7] = nb[6] = zero;   /* south, south-west, south-east */
        if (a.lat_max > max_lat)
            nb[0] = nb[4] = nb[5] = zero;   /* north, north-east, north-west */
        if (a.lon_min < min_lon)
            nb[3] = nb[7] = nb[5] = zero;   /* west, south-west, north-west */
        if (a.lon_max > max_lon)
            nb[2] = nb[6] = nb[4] = zero;   /* east, south-east, north-east */
    }
    PyObject *out = PyList_New(9);
    if (out == NULL)
        return NULL;
    for (int i = 0; i < 9; i++) {
        cell c = i ? nb[i - 1] : h;
        PyObject *t = Py_BuildValue("(Ki)", (unsigned long long)c.bits, c.step);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

/* pqsort(points, desc, lrange, rrange): geo.pqsort(points, _cmp_desc if desc else _cmp_asc,
   lrange, rrange), in place; each point a list whose item 2 is its distance (a float). */
static PyObject *
pqsort(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "pqsort(points: list, desc, lrange, rrange)");
        return NULL;
    }
    PyObject *points = args[0];
    int desc = PyObject_IsTrue(args[1]);
    Py_ssize_t lr = PyLong_AsSsize_t(args[2]), rr = PyLong_AsSsize_t(args[3]);
    if (desc < 0 || PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(points);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(points, i);
        if (!PyList_CheckExact(p) || PyList_GET_SIZE(p) < 3 ||
                !PyFloat_CheckExact(PyList_GET_ITEM(p, 2))) {
            PyErr_SetString(PyExc_TypeError, "pqsort: points are lists with a float at 2");
            return NULL;
        }
    }
    /* (no Python code runs while sorting: the list's array is sorted where it is) */
    sorter s = {((PyListObject *)points)->ob_item, desc};
    pq(&s, 0, n, lr, rr);
    Py_RETURN_NONE;
}

SLOTS_MODULE(_geo, "A geo search's per-candidate work (pyrepl/commands/geo.py), in C.",
    FASTCALL("scan_circle", scan_circle,
             "scan_circle(items, hi, lon, lat, radius, out, limit) -> (taken, state): "
             "geo._points_in_shape's loop for a circle over a run of (score, member) items."),
    FASTCALL("pqsort", pqsort,
             "pqsort(points, desc, lrange, rrange): geo.pqsort on the points' distances, in place."),
    FASTCALL("search_areas", search_areas,
             "search_areas(circular, lon, lat, conversion, radius, width, height): "
             "geohash.search_areas's nine cells, or None."))
