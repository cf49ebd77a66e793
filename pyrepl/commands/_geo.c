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
#include "../keyspace/_lpzset.h"
#include "../keyspace/_zbtree.h"

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

/* geohash.decode on WGS84's ranges (a cell that is not zeroed). i / 2^step is computed as
   i * 2^-step: exactly the same doubles (a power of two's reciprocal is exact), without a
   division (four a candidate, ~15 cycles each). */
static inline area
decode_cell(cell h)
{
    uint64_t sep = deinterleave64(h.bits);
    double lat_scale = GEO_LAT_MAX - GEO_LAT_MIN, long_scale = GEO_LONG_MAX - GEO_LONG_MIN;
    uint32_t ilato = (uint32_t)sep, ilono = (uint32_t)(sep >> 32);
    double inv = 1.0 / (double)(1ULL << h.step);
    area a = {
        GEO_LONG_MIN + (ilono * inv) * long_scale,
        GEO_LONG_MIN + ((uint32_t)(ilono + 1) * inv) * long_scale,
        GEO_LAT_MIN + (ilato * inv) * lat_scale,
        GEO_LAT_MIN + ((uint32_t)(ilato + 1) * inv) * lat_scale,
    };
    return a;
}

/* geohash._decode_score for 0 <= score < 2^63 (the cast the Python spells out for others):
   the centre of the step-26 cell, clamped to the ranges (decode_to_lonlat) */
static inline void
decode_score(double score, double *lon_out, double *lat_out)
{
    cell h = {(uint64_t)score, 26};
    area a = decode_cell(h);
    double lon = (a.lon_min + a.lon_max) / 2, lat = (a.lat_min + a.lat_max) / 2;
    *lon_out = lon > GEO_LONG_MAX ? GEO_LONG_MAX : lon < GEO_LONG_MIN ? GEO_LONG_MIN : lon;
    *lat_out = lat > GEO_LAT_MAX ? GEO_LAT_MAX : lat < GEO_LAT_MIN ? GEO_LAT_MIN : lat;
}

/* geohash.distance (geohashGetDistance), cos1 = cos(lat1 * D_R): the centre's, once a
   search, the same double */
static double
distance(double lon1, double lat1, double cos1, double lon2, double lat2)
{
    double lon1r = lon1 * D_R, lon2r = lon2 * D_R;
    double v = sin((lon2r - lon1r) / 2);
    if (v == 0.0)
        return EARTH_RADIUS_IN_METERS * fabs(lat2 * D_R - lat1 * D_R);
    double lat1r = lat1 * D_R, lat2r = lat2 * D_R;
    double u = sin((lat2r - lat1r) / 2);
    double r = sqrt(u * u + cos1 * cos(lat2r) * v * v);
    return 2.0 * EARTH_RADIUS_IN_METERS * (r <= 1.0 ? asin(r) : NAN);
}

/* -- the candidates: C structs until the reply's few are made Python lists ---------------- */

typedef struct {
    double lon, lat, d, score;
    PyObject *obj;      /* search_circle: the member (a reference held); pqsort: the point */
} point;

typedef struct {
    point *a;
    Py_ssize_t n, cap;
} points;

static int
points_add(points *ps, double lon, double lat, double d, double score, PyObject *obj)
{
    if (ps->n == ps->cap) {
        Py_ssize_t cap = ps->cap ? ps->cap * 2 : 64;
        point *a = PyMem_Realloc(ps->a, (size_t)cap * sizeof(point));
        if (a == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        ps->a = a;
        ps->cap = cap;
    }
    point p = {lon, lat, d, score, obj};
    ps->a[ps->n++] = p;
    return 0;
}

/* ps freed, each member's reference dropped when ``owned`` */
static void
points_free(points *ps, int owned)
{
    if (owned)
        for (Py_ssize_t i = 0; i < ps->n; i++)
            Py_DECREF(ps->a[i].obj);
    PyMem_Free(ps->a);
    ps->a = NULL;
    ps->n = ps->cap = 0;
}

/* geo.py's point: [lon, lat, distance, score, member] */
static PyObject *
point_list(const point *p)
{
    PyObject *out = PyList_New(5);
    if (out == NULL)
        return NULL;
    double v[4] = {p->lon, p->lat, p->d, p->score};
    for (int i = 0; i < 4; i++) {
        PyObject *x = PyFloat_FromDouble(v[i]);
        if (x == NULL) {
            Py_DECREF(out);     /* (the slots not set are NULL: list_dealloc skips them) */
            return NULL;
        }
        PyList_SET_ITEM(out, i, x);
    }
    Py_INCREF(p->obj);
    PyList_SET_ITEM(out, 4, p->obj);
    return out;
}

/* -- pqsort: Redis's pqsort.c on the points' distances ----------------------------------- */

/* _cmp_asc / _cmp_desc (a NaN distance compares below everything, both ways, then negated) */
static inline int
cmp_d(double a, double b, int desc)
{
    int r = a > b ? 1 : (a == b ? 0 : -1);
    return desc ? -r : r;
}

#define CMP(i, j) cmp_d(a[i].d, a[j].d, desc)

static inline void
swap(point *a, Py_ssize_t i, Py_ssize_t j)
{
    point t = a[i];
    a[i] = a[j];
    a[j] = t;
}

static Py_ssize_t
med3(const point *a, int desc, Py_ssize_t i, Py_ssize_t j, Py_ssize_t k)
{
    if (CMP(i, j) < 0) {
        if (CMP(j, k) < 0)
            return j;
        return CMP(i, k) < 0 ? k : i;
    }
    if (CMP(j, k) > 0)
        return j;
    return CMP(i, k) < 0 ? i : k;
}

static void
vecswap(point *a, Py_ssize_t i, Py_ssize_t j, Py_ssize_t n)
{
    for (Py_ssize_t k = 0; k < n; k++)
        swap(a, i + k, j + k);
}

/* geo._pqsort, line for line */
static void
pq(point *a, int desc, Py_ssize_t lo, Py_ssize_t n, Py_ssize_t lr, Py_ssize_t rr)
{
    for (;;) {
        if (n < 7) {
            for (Py_ssize_t pm = lo + 1; pm < lo + n; pm++)
                for (Py_ssize_t pl = pm; pl > lo && CMP(pl - 1, pl) > 0; pl--)
                    swap(a, pl, pl - 1);
            return;
        }
        Py_ssize_t pm = lo + n / 2;
        if (n > 7) {
            Py_ssize_t pl = lo, pn = lo + n - 1;
            if (n > 40) {
                Py_ssize_t d = n / 8;
                pl = med3(a, desc, pl, pl + d, pl + 2 * d);
                pm = med3(a, desc, pm - d, pm, pm + d);
                pn = med3(a, desc, pn - 2 * d, pn - d, pn);
            }
            pm = med3(a, desc, pl, pm, pn);
        }
        swap(a, lo, pm);
        Py_ssize_t pa = lo + 1, pb = lo + 1, pc = lo + n - 1, pd = lo + n - 1;
        for (;;) {
            int r;
            while (pb <= pc && (r = CMP(pb, lo)) <= 0) {
                if (r == 0) {
                    swap(a, pa, pb);
                    pa++;
                }
                pb++;
            }
            while (pb <= pc && (r = CMP(pc, lo)) >= 0) {
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
            pq(a, desc, lo, r, lr, rr);
        r = pd - pc;
        if (r <= 1)
            return;
        lo = pn - r;
        n = r;
        if ((lr < lo && rr < lo) || (lr >= lo + n && rr >= lo + n))
            return;
    }
}

/* geo.msort (glibc's msort_with_tmp: a top-down merge taking from the left run on cmp <= 0),
   tmp as long as a */
static void
msort(point *a, Py_ssize_t n, point *tmp, int desc)
{
    if (n <= 1)
        return;
    Py_ssize_t n1 = n / 2, n2 = n - n1, i = 0, j = 0, k = 0;
    point *b = a + n1;
    msort(a, n1, tmp, desc);
    msort(b, n2, tmp, desc);
    while (i < n1 && j < n2)
        tmp[k++] = cmp_d(a[i].d, b[j].d, desc) <= 0 ? a[i++] : b[j++];
    while (i < n1)
        tmp[k++] = a[i++];
    memcpy(a, tmp, (size_t)k * sizeof(point));   /* (b's rest is where it belongs) */
}

#undef CMP

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

/* geohash.search_areas, the same doubles in the same order (geohash.py's _cdiv, _ccos and
   _csqrt are C's /, cos and sqrt): the centre and its eight neighbours (north, south, east,
   west, north-east, north-west, south-east, south-west) into out, those the bounding box
   cannot reach zeroed; 0 where the Python's encode would fail (its assertion says why). */
static int
areas9(int circular, double lon, double lat, double conversion, double radius, double width,
       double height, cell out[9])
{
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
        return 0;
    cell *nb = out + 1;
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
            return 0;
    }
    out[0] = h;
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
    return 1;
}

/* search_areas(circular, lon, lat, conversion, radius, width, height) -> list of 9
   (bits, step), or None: areas9's cells as geohash.search_areas answers them */
static PyObject *
search_areas(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7)
        return usage_error("search_areas(circular, lon, lat, conversion, radius, width, height)");
    int circular = PyObject_IsTrue(args[0]);
    double lon = PyFloat_AsDouble(args[1]), lat = PyFloat_AsDouble(args[2]),
           conversion = PyFloat_AsDouble(args[3]), radius = PyFloat_AsDouble(args[4]),
           width = PyFloat_AsDouble(args[5]), height = PyFloat_AsDouble(args[6]);
    if (circular < 0 || PyErr_Occurred())
        return NULL;
    cell cells[9];
    if (!areas9(circular, lon, lat, conversion, radius, width, height, cells))
        Py_RETURN_NONE;
    PyObject *out = PyList_New(9);
    if (out == NULL)
        return NULL;
    for (int i = 0; i < 9; i++) {
        PyObject *t = Py_BuildValue("(Ki)", (unsigned long long)cells[i].bits, cells[i].step);
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
    PyObject *list = args[0];
    int desc = PyObject_IsTrue(args[1]);
    Py_ssize_t lr = PyLong_AsSsize_t(args[2]), rr = PyLong_AsSsize_t(args[3]);
    if (desc < 0 || PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(list);
    points ps = {NULL, 0, 0};
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(list, i);
        if (!PyList_CheckExact(p) || PyList_GET_SIZE(p) < 3 ||
                !PyFloat_CheckExact(PyList_GET_ITEM(p, 2))) {
            points_free(&ps, 0);
            PyErr_SetString(PyExc_TypeError, "pqsort: points are lists with a float at 2");
            return NULL;
        }
        if (points_add(&ps, 0, 0, PyFloat_AS_DOUBLE(PyList_GET_ITEM(p, 2)), 0, p) < 0) {
            points_free(&ps, 0);
            return NULL;
        }
    }
    pq(ps.a, desc, 0, n, lr, rr);
    /* (the list holds the same references, in the new order) */
    for (Py_ssize_t i = 0; i < n; i++)
        PyList_SET_ITEM(list, i, ps.a[i].obj);
    points_free(&ps, 0);
    Py_RETURN_NONE;
}

/* -- search_circle: geo.py's _points_in_shape and _sorted_points for a circle ------------- */

static PyObject *s_bisect, *s_range;


#define SCAN_CHUNK 1024

/* A circle's test of one candidate (scan_box's, over either kind of set) */
typedef struct {
    double clon, clat, cos1, radius;
    Py_ssize_t limit;
    points *ps;
} circle;

/* 0: go on; 1: a score only the Python decodes (below 0, from 2^63 on: its cast), the
   search is the Python's; 2: limit reached; -1: an error. The member is borrowed. */
static int
visit_circle(void *ctx, double score, PyObject *member)
{
    circle *c = ctx;
    if (!(score >= 0.0 && score < TWO63))
        return 1;
    double lon, lat;
    decode_score(score, &lon, &lat);
    double d = distance(c->clon, c->clat, c->cos1, lon, lat);
    if (d > c->radius)
        return 0;
    if (points_add(c->ps, lon, lat, d, score, member) < 0)
        return -1;
    Py_INCREF(member);
    return c->limit > 0 && c->ps->n >= c->limit ? 2 : 0;
}

/* The sorted sets' C APIs (_zbtree.h, _lpzset.h): NULL where a module's is absent or of
   another version (its sets then take the _bisect/_range path). Imported once. */
static ZBTree_CAPI *zb;
static LPZSet_CAPI *lz;
static int zsets_imported;

/* A capsule's C API whose first field is its version, or NULL (no exception left) */
static void *
import_capi(const char *capsule, int version)
{
    int *api = PyCapsule_Import(capsule, 0);
    if (api == NULL || *api != version) {
        PyErr_Clear();
        return NULL;
    }
    return api;
}

static void
import_zsets(void)
{
    if (zsets_imported)
        return;
    zb = import_capi(ZBTREE_CAPSULE, ZBTREE_CAPI_VERSION);
    lz = import_capi(LPZSET_CAPSULE, LPZSET_CAPI_VERSION);
    zsets_imported = 1;
}

/* membersOfGeoHashBox for a circle: the members of z with lo <= score < hi within radius
   of (clon, clat) added to ps, up to limit (> 0). 0: done; 1: a score only the Python
   decodes, the search is the Python's; -1: an error. A B+tree (_zbtree's ZIndex) and a
   listpack (_lpzset's ListpackZIndex) are walked in place (their C APIs); another set
   through its _bisect and _range. */
static int
scan_box(PyObject *z, double lo, double hi, double clon, double clat, double radius,
         Py_ssize_t limit, points *ps)
{
    circle c = {clon, clat, cos(clat * D_R), radius, limit, ps};
    int (*scan)(PyObject *, double, double, zbtree_visit, void *) =
        zb != NULL && PyObject_TypeCheck(z, zb->type) ? zb->scan :
        lz != NULL && PyObject_TypeCheck(z, lz->type) ? lz->scan : NULL;
    if (scan != NULL) {
        int r = scan(z, lo, hi, visit_circle, &c);
        return r == 2 ? 0 : r;
    }
    Py_ssize_t start = call_index(z, s_bisect, lo), stop;
    if (start < 0 || (stop = call_index(z, s_bisect, hi)) < 0)
        return -1;
    while (start < stop) {
        Py_ssize_t end = stop - start > SCAN_CHUNK ? start + SCAN_CHUNK : stop;
        PyObject *argv[3] = {z, PyLong_FromSsize_t(start), PyLong_FromSsize_t(end)};
        PyObject *chunk = NULL;
        if (argv[1] != NULL && argv[2] != NULL)
            chunk = PyObject_VectorcallMethod(s_range, argv,
                                              3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        Py_XDECREF(argv[1]);
        Py_XDECREF(argv[2]);
        if (chunk == NULL)
            return -1;
        if (!PyList_CheckExact(chunk) || PyList_GET_SIZE(chunk) == 0) {
            Py_DECREF(chunk);
            PyErr_SetString(PyExc_TypeError, "search_circle: z._range gave no items");
            return -1;
        }
        Py_ssize_t n = PyList_GET_SIZE(chunk);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *it = PyList_GET_ITEM(chunk, i);
            if (!PyTuple_CheckExact(it) || PyTuple_GET_SIZE(it) != 2 ||
                    !PyFloat_CheckExact(PyTuple_GET_ITEM(it, 0))) {
                Py_DECREF(chunk);
                PyErr_SetString(PyExc_TypeError, "search_circle: items are (float, member)");
                return -1;
            }
            double score = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(it, 0));
            if (!(score < hi))
                break;
            int r = visit_circle(&c, score, PyTuple_GET_ITEM(it, 1));
            if (r) {
                Py_DECREF(chunk);
                return r == 2 ? 0 : r;
            }
        }
        Py_DECREF(chunk);
        start += n;
    }
    return 0;
}

/* search_circle(z, lon, lat, conversion, radius, limit, sort, count[, members]) -> (found,
   points) or None

   A circle search over the sorted set z (its _bisect and _range): geo._points_in_shape's
   candidates, box after box (a box equal to the one processed just before skipped, as Redis
   does; stopping at limit when limit > 0), then geo._sorted_points's order (sort 0 none,
   1 ascending, 2 descending; count 0 for all): ``found`` is how many matched and
   ``points`` the ones returned, in order, as [lon, lat, distance, score, member] lists. The
   candidates are C structs, not lists: a search of 200 matches returning 10 makes 10. With
   ``members`` true, ``points`` holds only each point's member (GEOSEARCH's reply without
   WITH* options: pyrepl/commands/_hot.c's).
   None where the search is the Python's (a cell its encode refuses, a score only it
   decodes). */
static PyObject *
search_circle(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8 && nargs != 9)
        return usage_error("search_circle(z, lon, lat, conversion, radius, limit, sort, count"
                           "[, members])");
    int members = nargs == 9 ? PyObject_IsTrue(args[8]) : 0;
    if (members < 0)
        return NULL;
    PyObject *z = args[0];
    double lon = PyFloat_AsDouble(args[1]), lat = PyFloat_AsDouble(args[2]),
           conversion = PyFloat_AsDouble(args[3]), radius = PyFloat_AsDouble(args[4]);
    Py_ssize_t limit = PyLong_AsSsize_t(args[5]), count = PyLong_AsSsize_t(args[7]);
    long sort = PyLong_AsLong(args[6]);
    if (PyErr_Occurred())
        return NULL;
    import_zsets();
    if (s_bisect == NULL) {
        s_bisect = PyUnicode_InternFromString("_bisect");
        s_range = PyUnicode_InternFromString("_range");
        if (s_bisect == NULL || s_range == NULL)
            return NULL;
    }
    cell cells[9];
    if (!areas9(1, lon, lat, conversion, radius, 0.0, 0.0, cells))
        Py_RETURN_NONE;
    points ps = {NULL, 0, 0};
    double meters = radius * conversion;
    int last = 0, rc = 0;
    for (int i = 0; i < 9 && rc == 0; i++) {
        cell h = cells[i];
        if (h.bits == 0 && h.step == 0)
            continue;
        if (last && h.bits == cells[last].bits && h.step == cells[last].step)
            continue;
        if (ps.n && limit && ps.n >= limit)
            break;
        int shift = 52 - h.step * 2;
        double lo = (double)(h.bits << shift), hi = (double)((h.bits + 1) << shift);
        rc = scan_box(z, lo, hi, lon, lat, meters, limit, &ps);
        last = i;
    }
    if (rc != 0) {
        points_free(&ps, 1);
        if (rc < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    Py_ssize_t found = ps.n, returned = count == 0 || found < count ? found : count;
    if (sort != 0 && returned == found && found > 1) {
        point *tmp = PyMem_Malloc((size_t)found * sizeof(point));
        if (tmp == NULL) {
            points_free(&ps, 1);
            return PyErr_NoMemory();
        }
        msort(ps.a, found, tmp, sort == 2);
        PyMem_Free(tmp);
    } else if (sort != 0 && found > 1) {
        pq(ps.a, sort == 2, 0, found, 0, returned - 1);
    }
    PyObject *out = PyList_New(returned);
    for (Py_ssize_t i = 0; out != NULL && i < returned; i++) {
        PyObject *p = members ? Py_NewRef(ps.a[i].obj) : point_list(&ps.a[i]);
        if (p == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, p);
    }
    points_free(&ps, 1);
    if (out == NULL)
        return NULL;
    PyObject *r = Py_BuildValue("(nN)", found, out);
    return r;
}

SLOTS_MODULE(_geo, "A geo search's per-candidate work (pyrepl/commands/geo.py), in C.",
    FASTCALL("search_circle", search_circle,
             "search_circle(z, lon, lat, conversion, radius, limit, sort, count[, members]) "
             "-> (found, points) or None: geo._points_in_shape and _sorted_points for a "
             "circle (the members alone with members true)."),
    FASTCALL("pqsort", pqsort,
             "pqsort(points, desc, lrange, rrange): geo.pqsort on the points' distances, in place."),
    FASTCALL("search_areas", search_areas,
             "search_areas(circular, lon, lat, conversion, radius, width, height): "
             "geohash.search_areas's nine cells, or None."))
