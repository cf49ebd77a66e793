/* ListpackZIndex: a small sorted set kept as Redis keeps it, one listpack of member, score,
 * member, score... in ascending (score, member) order (t_zset.c's OBJ_ENCODING_LISTPACK: a
 * score written as d2string writes it, an integral one as an integer entry), behind the
 * interface of the B+tree's ZIndex (_zbtree.c): set_score, remove, _bisect, _at, _range,
 * _range_back, _delete_range, len, and score(member) for ZSCORE. pyrepl/keyspace/zset.py's
 * ListpackZSet adds the rest, as ZSet does over ZIndex. The Python reference is zset.py's
 * ListpackZIndexReference (zindex.py's ZIndex that writes its listpack on demand); tests/unit/
 * test_lpzset.py holds the two equal on random operations, listpack bytes included.
 *
 * Why C: a sorted set of 10 members as a ZSet costs ~1.6 KB (a dict, ten member bytes and ten
 * float objects, a B+tree leaf), 7.8x what Redis's listpack costs (bench/RESULTS.md); here the
 * object is 32 bytes and the listpack Redis's exact bytes, which the RDB writes as they are
 * (RDB_TYPE_ZSET_LISTPACK). Every operation walks the entries (at most
 * zset-max-listpack-entries pairs), as Redis's zzl* functions do.
 *
 * The object holds no Python references (no GC header). Members must be bytes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_listpack.h"
#include "_lpzset.h"

typedef struct {
    PyObject_HEAD
    uint8_t *lp;                /* the listpack: PyMem, exactly its total bytes */
    Py_ssize_t n;               /* members (entries / 2) */
} LPZ;

static PyTypeObject LPZ_Type;

/* ------------------------------------------------------------------------ scores and members */

/* d2string (util.c, Redis 7.0): what a score is written as; its length. */
static int d2string(char *buf, size_t len, double v)
{
    if (isinf(v)) return snprintf(buf, len, v < 0 ? "-inf" : "inf");
    if (v == 0) return snprintf(buf, len, (1.0 / v < 0) ? "-0" : "0");
    if (!(v < (double)(-LLONG_MAX / 2) || v > (double)(LLONG_MAX / 2))) {
        long long ll = (long long)v;
        if ((double)ll == v) return snprintf(buf, len, "%lld", ll);
    }
    return snprintf(buf, len, "%.17g", v);
}

/* zzlGetScore: an entry's score (an integer entry's value, a string's strtod). */
static double item_score(const item_t *it)
{
    if (it->is_int) return (double)it->v;
    char buf[128];
    Py_ssize_t n = it->slen < 127 ? it->slen : 127;
    memcpy(buf, it->s, n);
    buf[n] = '\0';
    return strtod(buf, NULL);
}

/* An entry's bytes (an integer entry's decimal form in buf). */
static void item_str(const item_t *it, char *buf, const uint8_t **s, Py_ssize_t *n)
{
    if (it->is_int) {
        *n = lp_ll_text(buf, (int64_t)it->v);
        *s = (const uint8_t *)buf;
    } else {
        *s = it->s;
        *n = it->slen;
    }
}

/* Compare (s1, the bytes m1) with (s2, m2): scores, then members as memcmp, shorter first. */
static int cmp(double s1, const uint8_t *m1, Py_ssize_t n1, double s2, const uint8_t *m2,
               Py_ssize_t n2)
{
    if (s1 < s2) return -1;
    if (s1 > s2) return 1;
    int c = memcmp(m1, m2, n1 < n2 ? n1 : n2);
    if (c) return c < 0 ? -1 : 1;
    return n1 < n2 ? -1 : (n1 > n2);
}

typedef struct {                /* one pair, as walked */
    Py_ssize_t start, end;      /* the member entry's start, the score entry's end */
    item_t m, s;
} pair_t;

static int next_pair(const uint8_t *lp, Py_ssize_t *p, Py_ssize_t last, pair_t *pr)
{
    pr->start = *p;
    if (next_item(lp, p, last, &pr->m) < 0 || next_item(lp, p, last, &pr->s) < 0) return -1;
    pr->end = *p;
    return 0;
}

static int is_member(const item_t *it, const uint8_t *s, Py_ssize_t n, int isint, int64_t iv)
{
    if (it->is_int) return isint && it->v == iv;
    return it->slen == n && memcmp(it->s, s, n) == 0;
}

/* The pair of `member`: 1 and *pr, or 0. */
static int find(LPZ *z, PyObject *member, pair_t *pr)
{
    const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(member);
    Py_ssize_t n = PyBytes_GET_SIZE(member), p = LP_HDR, last = lp_total(z->lp) - 1;
    int64_t iv = 0;
    int isint = n <= 20 && canonical_int(s, n, &iv);
    while (p < last && next_pair(z->lp, &p, last, pr) == 0)
        if (is_member(&pr->m, s, n, isint, iv)) return 1;
    return 0;
}

/* The index and offset of the first pair >= (score, member bytes) (any member when m is
 * NULL: the first with a score >= score). */
static Py_ssize_t bisect(LPZ *z, double score, const uint8_t *m, Py_ssize_t mn, Py_ssize_t *off)
{
    Py_ssize_t p = LP_HDR, last = lp_total(z->lp) - 1, i = 0;
    pair_t pr;
    char buf[24];
    while (p < last) {
        Py_ssize_t at = p;
        if (next_pair(z->lp, &p, last, &pr) < 0) break;
        double s = item_score(&pr.s);
        int ge;
        if (m == NULL) {
            ge = s >= score;
        } else {
            const uint8_t *ms;
            Py_ssize_t msn;
            item_str(&pr.m, buf, &ms, &msn);
            ge = cmp(s, ms, msn, score, m, mn) >= 0;
        }
        if (ge) { *off = at; return i; }
        i++;
    }
    *off = last;
    return i;
}

/* The pair at index i (0 <= i < n). */
static void pair_at(LPZ *z, Py_ssize_t i, pair_t *pr)
{
    Py_ssize_t p = LP_HDR, last = lp_total(z->lp) - 1;
    for (Py_ssize_t k = 0; k <= i; k++)
        next_pair(z->lp, &p, last, pr);
}

static PyObject *pair_tuple(const pair_t *pr)
{
    PyObject *s = PyFloat_FromDouble(item_score(&pr->s)), *m = s ? item_bytes(&pr->m) : NULL;
    PyObject *t = m ? PyTuple_Pack(2, s, m) : NULL;
    Py_XDECREF(s);
    Py_XDECREF(m);
    return t;
}

static int insert_pair(LPZ *z, Py_ssize_t off, PyObject *member, double score)
{
    char sbuf[128];
    int sn = d2string(sbuf, sizeof sbuf, score);
    Py_ssize_t mlen = lp_put_bytes(&z->lp, off, 0, member);
    if (mlen < 0) return -1;
    if (lp_put(&z->lp, off + mlen, 0, (const uint8_t *)sbuf, sn) < 0) {
        lp_splice(&z->lp, off, mlen, 0);       /* (the member goes back out) */
        return -1;
    }
    z->n++;
    lp_set_count(z->lp, z->n * 2);
    return 0;
}

static int delete_pair(LPZ *z, const pair_t *pr)
{
    if (lp_splice(&z->lp, pr->start, pr->end - pr->start, 0) < 0) return -1;
    z->n--;
    lp_set_count(z->lp, z->n * 2);
    return 0;
}

static int check_member(PyObject *m)
{
    if (PyBytes_Check(m)) return 0;
    PyErr_Format(PyExc_TypeError, "sorted set members are bytes, not %.100s", Py_TYPE(m)->tp_name);
    return -1;
}

/* A score as ZIndex takes it: a real number, not NaN, -0.0 as 0.0. -1 with an exception. */
static int as_score(PyObject *o, double *out)
{
    if (PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o)) {
        PyErr_Format(PyExc_TypeError, "must be real number, not %.100s", Py_TYPE(o)->tp_name);
        return -1;
    }
    double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) return -1;
    if (isnan(d)) {
        PyErr_SetString(PyExc_ValueError, "a sorted set score cannot be NaN");
        return -1;
    }
    *out = d == 0.0 ? 0.0 : d;
    return 0;
}

static int as_index(PyObject *o, Py_ssize_t *out)
{
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "an integer is required, not %.100s", Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyLong_AsSsize_t(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* -------------------------------------------------------------------------- the Python type */

static PyObject *LPZ_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds != NULL && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "ListpackZIndex() takes no arguments");
        return NULL;
    }
    LPZ *z = (LPZ *)type->tp_alloc(type, 0);
    if (z == NULL) return NULL;
    if ((z->lp = lp_new()) == NULL) { Py_DECREF(z); return NULL; }
    return (PyObject *)z;
}

static void LPZ_dealloc(LPZ *z)
{
    PyMem_Free(z->lp);
    Py_TYPE(z)->tp_free((PyObject *)z);
}

static Py_ssize_t LPZ_len(LPZ *z) { return z->n; }

/* zset-max-listpack-entries / -value, as zset.configure set them (for set_score_fit) */
static Py_ssize_t max_entries = 128, max_value = 64;

/* member's score set: 0 unchanged (the same score), 1 added, 2 updated, -1 error; with `fit`,
 * -2 (nothing changed) when a new member would pass a limit. */
static int set_score_as(LPZ *z, PyObject *member, double score, int fit)
{
    pair_t pr;
    int result = 1;
    if (find(z, member, &pr)) {
        if (item_score(&pr.s) == score) return 0;
        if (delete_pair(z, &pr) < 0) return -1;
        result = 2;
    } else if (fit && (z->n + 1 > max_entries || PyBytes_GET_SIZE(member) > max_value)) {
        return -2;
    }
    Py_ssize_t off;
    bisect(z, score, (const uint8_t *)PyBytes_AS_STRING(member), PyBytes_GET_SIZE(member), &off);
    if (insert_pair(z, off, member, score) < 0) return -1;
    return result;
}

/* set_score(member, score): 0 unchanged (the same score), 1 added, 2 updated */
static PyObject *LPZ_set_score(LPZ *z, PyObject *const *args, Py_ssize_t nargs)
{
    double score;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_score expected 2 arguments");
        return NULL;
    }
    if (check_member(args[0]) < 0 || as_score(args[1], &score) < 0) return NULL;
    int r = set_score_as(z, args[0], score, 0);
    return r < 0 ? NULL : PyLong_FromLong(r);
}

static PyObject *LPZ_remove(LPZ *z, PyObject *member)
{
    pair_t pr;
    if (check_member(member) < 0) return NULL;
    if (!find(z, member, &pr)) Py_RETURN_FALSE;
    if (delete_pair(z, &pr) < 0) return NULL;
    Py_RETURN_TRUE;
}

static PyObject *LPZ_score(LPZ *z, PyObject *member)
{
    pair_t pr;
    if (!PyBytes_Check(member) || !find(z, member, &pr)) Py_RETURN_NONE;
    return PyFloat_FromDouble(item_score(&pr.s));
}

static PyObject *LPZ_bisect(LPZ *z, PyObject *const *args, Py_ssize_t nargs)
{
    double score;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "_bisect expected 1 or 2 arguments");
        return NULL;
    }
    score = PyFloat_AsDouble(args[0]);
    if (score == -1.0 && PyErr_Occurred()) return NULL;
    Py_ssize_t off;
    if (nargs == 2 && args[1] != Py_None) {
        if (check_member(args[1]) < 0) return NULL;
        return PyLong_FromSsize_t(bisect(z, score, (const uint8_t *)PyBytes_AS_STRING(args[1]),
                                         PyBytes_GET_SIZE(args[1]), &off));
    }
    return PyLong_FromSsize_t(bisect(z, score, NULL, 0, &off));
}

static int checked(LPZ *z, PyObject *o, Py_ssize_t *i)
{
    if (as_index(o, i) < 0) return -1;
    if (*i < 0 || *i >= z->n) {
        PyErr_SetString(PyExc_IndexError, "sorted set index out of range");
        return -1;
    }
    return 0;
}

static PyObject *LPZ_at(LPZ *z, PyObject *o)
{
    Py_ssize_t i;
    pair_t pr;
    if (checked(z, o, &i) < 0) return NULL;
    pair_at(z, i, &pr);
    return pair_tuple(&pr);
}

/* the pairs with ascending index in [start, stop), clipped, as (score, member) tuples */
static PyObject *range_list(LPZ *z, Py_ssize_t start, Py_ssize_t stop)
{
    if (start < 0) start = 0;
    if (stop > z->n) stop = z->n;
    PyObject *out = PyList_New(stop > start ? stop - start : 0);
    if (out == NULL || stop <= start) return out;
    Py_ssize_t p = LP_HDR, last = lp_total(z->lp) - 1;
    pair_t pr;
    for (Py_ssize_t k = 0; k < stop; k++) {
        next_pair(z->lp, &p, last, &pr);
        if (k < start) continue;
        PyObject *t = pair_tuple(&pr);
        if (t == NULL) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, k - start, t);
    }
    return out;
}

static PyObject *LPZ_range(LPZ *z, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t start, stop;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_range expected 2 arguments");
        return NULL;
    }
    if (as_index(args[0], &start) < 0 || as_index(args[1], &stop) < 0) return NULL;
    return range_list(z, start, stop);
}

/* _range_back(index, count): up to count pairs descending from index (checked) */
static PyObject *LPZ_range_back(LPZ *z, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t index, count;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_range_back expected 2 arguments");
        return NULL;
    }
    if (checked(z, args[0], &index) < 0 || as_index(args[1], &count) < 0) return NULL;
    if (count > index + 1) count = index + 1;
    if (count < 0) count = 0;
    PyObject *up = range_list(z, index - count + 1, index + 1);
    if (up == NULL) return NULL;
    if (PyList_Reverse(up) < 0) { Py_DECREF(up); return NULL; }
    return up;
}

static PyObject *LPZ_delete_range(LPZ *z, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t start, stop;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_delete_range expected 2 arguments");
        return NULL;
    }
    if (as_index(args[0], &start) < 0 || as_index(args[1], &stop) < 0) return NULL;
    if (start < 0) start = 0;
    if (stop > z->n) stop = z->n;
    if (stop <= start) return PyLong_FromLong(0);
    Py_ssize_t p = LP_HDR, last = lp_total(z->lp) - 1, from = 0, to = 0;
    pair_t pr;
    for (Py_ssize_t k = 0; k < stop; k++) {
        next_pair(z->lp, &p, last, &pr);
        if (k == start) from = pr.start;
        to = pr.end;
    }
    if (lp_splice(&z->lp, from, to - from, 0) < 0) return NULL;
    z->n -= stop - start;
    lp_set_count(z->lp, z->n * 2);
    return PyLong_FromSsize_t(stop - start);
}

static PyObject *LPZ_dict(LPZ *z, void *unused)
{
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    Py_ssize_t p = LP_HDR, last = lp_total(z->lp) - 1;
    pair_t pr;
    for (Py_ssize_t k = 0; k < z->n; k++) {
        next_pair(z->lp, &p, last, &pr);
        PyObject *m = item_bytes(&pr.m), *s = m ? PyFloat_FromDouble(item_score(&pr.s)) : NULL;
        int r = s ? PyDict_SetItem(d, m, s) : -1;
        Py_XDECREF(m);
        Py_XDECREF(s);
        if (r < 0) { Py_DECREF(d); return NULL; }
    }
    return d;
}

static PyObject *LPZ_check(LPZ *z, PyObject *unused)
{
    PyObject *all = range_list(z, 0, z->n);
    if (all == NULL) return NULL;
    for (Py_ssize_t i = 1; i < PyList_GET_SIZE(all); i++) {
        int lt = PyObject_RichCompareBool(PyList_GET_ITEM(all, i - 1), PyList_GET_ITEM(all, i),
                                          Py_LT);
        if (lt <= 0) {
            Py_DECREF(all);
            if (lt == 0) PyErr_SetString(PyExc_AssertionError, "not sorted");
            return NULL;
        }
    }
    Py_DECREF(all);
    Py_RETURN_NONE;
}

static PyObject *LPZ_depth(LPZ *z, PyObject *unused) { return PyLong_FromLong(0); }

static PyObject *LPZ_to_listpack(LPZ *z, PyObject *unused)
{
    return PyBytes_FromStringAndSize((const char *)z->lp, lp_total(z->lp));
}

static PyObject *LPZ_sizeof(LPZ *z, PyObject *unused)
{
    return PyLong_FromSsize_t(Py_TYPE(z)->tp_basicsize + (Py_ssize_t)lp_total(z->lp));
}

static PyMethodDef LPZ_methods[] = {
    {"set_score", (PyCFunction)(void (*)(void))LPZ_set_score, METH_FASTCALL,
     "set_score(member, score): 0 unchanged, 1 added, 2 updated"},
    {"remove", (PyCFunction)LPZ_remove, METH_O, "remove(member): True when it was there"},
    {"score", (PyCFunction)LPZ_score, METH_O, "score(member): its score, None when absent"},
    {"_bisect", (PyCFunction)(void (*)(void))LPZ_bisect, METH_FASTCALL,
     "_bisect(score, member=None): the index of the first item >= (score, member)"},
    {"_at", (PyCFunction)LPZ_at, METH_O, "_at(index): the (score, member) item"},
    {"_range", (PyCFunction)(void (*)(void))LPZ_range, METH_FASTCALL,
     "_range(start, stop): the items with ascending index in [start, stop)"},
    {"_range_back", (PyCFunction)(void (*)(void))LPZ_range_back, METH_FASTCALL,
     "_range_back(index, count): up to count items descending from index"},
    {"_delete_range", (PyCFunction)(void (*)(void))LPZ_delete_range, METH_FASTCALL,
     "_delete_range(start, stop): remove the items in [start, stop); how many"},
    {"_check", (PyCFunction)LPZ_check, METH_NOARGS, "assert the items are in order"},
    {"_depth", (PyCFunction)LPZ_depth, METH_NOARGS, "0: one listpack"},
    {"to_listpack", (PyCFunction)LPZ_to_listpack, METH_NOARGS,
     "the listpack's bytes, as Redis's OBJ_ENCODING_LISTPACK sorted set"},
    {"__sizeof__", (PyCFunction)LPZ_sizeof, METH_NOARGS, "the object and its listpack"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef LPZ_getset[] = {
    {"dict", (getter)LPZ_dict, NULL, "member -> score, made on each read", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods LPZ_sequence = {
    .sq_length = (lenfunc)LPZ_len,
};

static PyTypeObject LPZ_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._lpzset.ListpackZIndex",
    .tp_basicsize = sizeof(LPZ),
    .tp_dealloc = (destructor)LPZ_dealloc,
    .tp_as_sequence = &LPZ_sequence,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A small sorted set as one listpack of member, score (Redis's listpack zset).",
    .tp_methods = LPZ_methods,
    .tp_getset = LPZ_getset,
    .tp_new = LPZ_new,
};

/* ------------------------------------------------------------------ the C API for _hot.c */

static int capi_set_score_fit(PyObject *z, PyObject *member, double score)
{
    if (isnan(score)) {
        PyErr_SetString(PyExc_ValueError, "a sorted set score cannot be NaN");
        return -1;
    }
    return set_score_as((LPZ *)z, member, score == 0.0 ? 0.0 : score, 1);
}

static int capi_scan(PyObject *zo, double lo, double hi, lpzset_visit visit, void *ctx)
{
    LPZ *z = (LPZ *)zo;
    Py_ssize_t p = LP_HDR, last = lp_total(z->lp) - 1;
    pair_t pr;
    while (p < last && next_pair(z->lp, &p, last, &pr) == 0) {
        double s = item_score(&pr.s);
        if (s < lo)             /* (before bisect(lo)'s pair) */
            continue;
        if (!(s < hi))
            return 0;
        PyObject *m = item_bytes(&pr.m);
        if (m == NULL)
            return -1;
        int r = visit(ctx, s, m);
        Py_DECREF(m);
        if (r)
            return r;
    }
    return 0;
}

static LPZSet_CAPI capi = {LPZSET_CAPI_VERSION, &LPZ_Type, capi_set_score_fit, capi_scan};

static PyObject *configure(PyObject *self, PyObject *args)
{
    Py_ssize_t e, v;
    if (!PyArg_ParseTuple(args, "nn", &e, &v)) return NULL;
    max_entries = e;
    max_value = v;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(max_entries, max_value): the limits the C API's set_score_fit keeps within"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_lpzset",
    "Small sorted sets as listpacks (zset.py has the reference).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__lpzset(void)
{
    return lp_module(&moduledef, &LPZ_Type, "ListpackZIndex", &capi, LPZSET_CAPSULE);
}
