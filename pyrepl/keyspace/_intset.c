/* IntSet: a set of integers kept as Redis keeps it, an intset (intset.c: a sorted array of
 * 16-, 32- or 64-bit integers, widened for good when a wider one comes), behind the part of
 * set's interface the set commands use. Members go in and come out as their decimal bytes;
 * only canonical integers (string2ll's form) are members. pyrepl/keyspace/intset.py's
 * IntSetReference is the reference (a set that answers the same; PYREPL_PURE=1 runs it) and
 * tests/unit/test_intset.py holds the two equal on random operations, intset bytes included.
 *
 * Why C: a set of 10 integers as a Python set of bytes costs ~1.2 KB (the set's table, ten
 * bytes objects), 10x what Redis's intset costs (bench/RESULTS.md, "Small hashes as listpacks,
 * sets of integers as intsets"); here the object is 24 bytes and the intset its 8-byte header
 * and the integers, exactly Redis's bytes, which the RDB writes as they are
 * (RDB_TYPE_SET_INTSET). Iteration is ascending, as SMEMBERS of an intset answers in Redis.
 * The object holds no Python references (no GC header). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_listpack.h"          /* canonical_int */

typedef struct {
    PyObject_HEAD
    uint8_t *is;                /* <u32 encoding><u32 length><length ints, LE, ascending> */
} IntSet;

static PyTypeObject IntSet_Type;
#define IntSet_Check(o) Py_IS_TYPE((o), &IntSet_Type)

static inline uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
        ((uint32_t)p[3] << 24);
}

static inline void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

#define ENC(s) rd32((s)->is)
#define LEN(s) ((Py_ssize_t)rd32((s)->is + 4))

static inline int64_t get_as(const uint8_t *is, uint32_t enc, Py_ssize_t i)
{
    const uint8_t *p = is + 8 + i * enc;
    if (enc == 2) return (int16_t)((uint16_t)p[0] | ((uint16_t)p[1] << 8));
    if (enc == 4) return (int32_t)rd32(p);
    uint64_t u = 0;
    for (int k = 7; k >= 0; k--) u = (u << 8) | p[k];
    return (int64_t)u;
}

static inline void set_as(uint8_t *is, uint32_t enc, Py_ssize_t i, int64_t v)
{
    uint8_t *p = is + 8 + i * enc;
    uint64_t u = (uint64_t)v;
    for (uint32_t k = 0; k < enc; k++) p[k] = (uint8_t)(u >> (8 * k));
}

static inline uint32_t value_encoding(int64_t v)
{
    if (v < INT32_MIN || v > INT32_MAX) return 8;
    if (v < INT16_MIN || v > INT16_MAX) return 4;
    return 2;
}

/* intsetSearch: 1 and *pos when found, else 0 and *pos where it would go. */
static int search(IntSet *s, int64_t v, Py_ssize_t *pos)
{
    uint32_t enc = ENC(s);
    Py_ssize_t lo = 0, hi = LEN(s) - 1, mid = 0;
    if (LEN(s) == 0) { *pos = 0; return 0; }
    if (v > get_as(s->is, enc, hi)) { *pos = LEN(s); return 0; }
    if (v < get_as(s->is, enc, 0)) { *pos = 0; return 0; }
    while (hi >= lo) {
        mid = (lo + hi) / 2;
        int64_t cur = get_as(s->is, enc, mid);
        if (v > cur) lo = mid + 1;
        else if (v < cur) hi = mid - 1;
        else { *pos = mid; return 1; }
    }
    *pos = lo;
    return 0;
}

static int resize(IntSet *s, uint32_t enc, Py_ssize_t len)
{
    uint8_t *is = PyMem_Realloc(s->is, 8 + (size_t)len * enc);
    if (is == NULL) { PyErr_NoMemory(); return -1; }
    s->is = is;
    return 0;
}

/* intsetAdd: 1 added, 0 already there, -1 error. */
static int add_int(IntSet *s, int64_t v)
{
    uint32_t enc = ENC(s), venc = value_encoding(v);
    Py_ssize_t len = LEN(s), pos;
    if (len >= (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "intset full");
        return -1;
    }
    if (venc > enc) {                           /* intsetUpgradeAndAdd */
        if (resize(s, venc, len + 1) < 0) return -1;
        int prepend = v < 0;
        for (Py_ssize_t i = len - 1; i >= 0; i--)
            set_as(s->is, venc, i + prepend, get_as(s->is, enc, i));
        set_as(s->is, venc, prepend ? 0 : len, v);
        wr32(s->is, venc);
        wr32(s->is + 4, (uint32_t)(len + 1));
        return 1;
    }
    if (search(s, v, &pos)) return 0;
    if (resize(s, enc, len + 1) < 0) return -1;
    memmove(s->is + 8 + (pos + 1) * enc, s->is + 8 + pos * enc, (size_t)(len - pos) * enc);
    set_as(s->is, enc, pos, v);
    wr32(s->is + 4, (uint32_t)(len + 1));
    return 1;
}

/* intsetRemove: 1 removed, 0 absent. (A failed shrink keeps the larger block.) */
static int remove_int(IntSet *s, int64_t v)
{
    Py_ssize_t pos, len = LEN(s);
    uint32_t enc = ENC(s);
    if (value_encoding(v) > enc || !search(s, v, &pos)) return 0;
    memmove(s->is + 8 + pos * enc, s->is + 8 + (pos + 1) * enc, (size_t)(len - pos - 1) * enc);
    wr32(s->is + 4, (uint32_t)(len - 1));
    uint8_t *is = PyMem_Realloc(s->is, 8 + (size_t)(len - 1) * enc);
    if (is != NULL) s->is = is;
    return 1;
}

/* A member's integer: 1 and *v for canonical integer bytes, 0 for other bytes, -1 (TypeError)
 * for anything but bytes. */
static int member_value(PyObject *m, int64_t *v)
{
    if (!PyBytes_Check(m)) {
        PyErr_Format(PyExc_TypeError, "IntSet members are bytes, not %.100s", Py_TYPE(m)->tp_name);
        return -1;
    }
    return canonical_int((const uint8_t *)PyBytes_AS_STRING(m), PyBytes_GET_SIZE(m), v);
}

static PyObject *int_bytes(int64_t v)
{
    char buf[24];
    int n = lp_ll_text(buf, v);
    return PyBytes_FromStringAndSize(buf, n);
}

static uint8_t *empty_intset(void)
{
    uint8_t *is = PyMem_Malloc(8);
    if (is == NULL) { PyErr_NoMemory(); return NULL; }
    wr32(is, 2);
    wr32(is + 4, 0);
    return is;
}

static int add_member(IntSet *s, PyObject *m)
{
    int64_t v;
    int r = member_value(m, &v);
    if (r < 0) return -1;
    if (r == 0) {
        PyErr_Format(PyExc_ValueError, "IntSet members are canonical integers, not %R", m);
        return -1;
    }
    return add_int(s, v);
}

static int add_all(IntSet *s, PyObject *iterable)
{
    PyObject *it = PyObject_GetIter(iterable), *m;
    if (it == NULL) return -1;
    while ((m = PyIter_Next(it)) != NULL) {
        int r = add_member(s, m);
        Py_DECREF(m);
        if (r < 0) { Py_DECREF(it); return -1; }
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

/* -------------------------------------------------------------------------- the Python type */

static PyObject *IntSet_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *src = NULL;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "IntSet() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "|O:IntSet", &src)) return NULL;
    IntSet *s = (IntSet *)type->tp_alloc(type, 0);
    if (s == NULL) return NULL;
    if ((s->is = empty_intset()) == NULL) { Py_DECREF(s); return NULL; }
    if (src != NULL && add_all(s, src) < 0) { Py_DECREF(s); return NULL; }
    return (PyObject *)s;
}

static void IntSet_dealloc(IntSet *s)
{
    PyMem_Free(s->is);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static Py_ssize_t IntSet_len(IntSet *s) { return LEN(s); }

static int IntSet_contains(IntSet *s, PyObject *m)
{
    int64_t v;
    Py_ssize_t pos;
    if (!PyBytes_Check(m)) return 0;
    if (!canonical_int((const uint8_t *)PyBytes_AS_STRING(m), PyBytes_GET_SIZE(m), &v))
        return 0;
    return value_encoding(v) <= ENC(s) && search(s, v, &pos);
}

static PyObject *members(IntSet *s)
{
    Py_ssize_t n = LEN(s);
    uint32_t enc = ENC(s);
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = int_bytes(get_as(s->is, enc, i));
        if (b == NULL) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, b);
    }
    return out;
}

static PyObject *IntSet_iter(IntSet *s)
{
    PyObject *l = members(s);
    if (l == NULL) return NULL;
    PyObject *it = PyObject_GetIter(l);
    Py_DECREF(l);
    return it;
}

static PyObject *IntSet_add(IntSet *s, PyObject *m)
{
    return add_member(s, m) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *IntSet_update(IntSet *s, PyObject *args)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++)
        if (add_all(s, PyTuple_GET_ITEM(args, i)) < 0) return NULL;
    Py_RETURN_NONE;
}

/* 1 removed, 0 absent, -1 error */
static int discard_member(IntSet *s, PyObject *m)
{
    int64_t v;
    int r = member_value(m, &v);
    if (r <= 0) return r;
    return remove_int(s, v);
}

static PyObject *IntSet_discard(IntSet *s, PyObject *m)
{
    return discard_member(s, m) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *IntSet_remove(IntSet *s, PyObject *m)
{
    int r = discard_member(s, m);
    if (r < 0) return NULL;
    if (r == 0) { PyErr_SetObject(PyExc_KeyError, m); return NULL; }
    Py_RETURN_NONE;
}

static PyObject *IntSet_difference_update(IntSet *s, PyObject *args)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *it = PyObject_GetIter(PyTuple_GET_ITEM(args, i)), *m;
        if (it == NULL) return NULL;
        while ((m = PyIter_Next(it)) != NULL) {
            int r = PyBytes_Check(m) ? discard_member(s, m) : 0;
            Py_DECREF(m);
            if (r < 0) { Py_DECREF(it); return NULL; }
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) return NULL;
    }
    Py_RETURN_NONE;
}

/* pop(): the largest member, removed */
static PyObject *IntSet_pop(IntSet *s, PyObject *unused)
{
    Py_ssize_t n = LEN(s);
    if (n == 0) {
        PyErr_SetString(PyExc_KeyError, "pop from an empty IntSet");
        return NULL;
    }
    int64_t v = get_as(s->is, ENC(s), n - 1);
    PyObject *b = int_bytes(v);
    if (b != NULL) remove_int(s, v);
    return b;
}

static PyObject *IntSet_copy(IntSet *s, PyObject *unused)
{
    IntSet *c = (IntSet *)IntSet_Type.tp_alloc(&IntSet_Type, 0);
    if (c == NULL) return NULL;
    size_t size = 8 + (size_t)LEN(s) * ENC(s);
    if ((c->is = PyMem_Malloc(size)) == NULL) { Py_DECREF(c); return PyErr_NoMemory(); }
    memcpy(c->is, s->is, size);
    return (PyObject *)c;
}

/* A Python set of the members (for the algebra, and comparisons). */
static PyObject *as_set(PyObject *o)
{
    if (!IntSet_Check(o)) return PySet_New(o);
    PyObject *l = members((IntSet *)o);
    if (l == NULL) return NULL;
    PyObject *r = PySet_New(l);
    Py_DECREF(l);
    return r;
}

static PyObject *via_set(IntSet *s, const char *method, PyObject *args)
{
    PyObject *self = as_set((PyObject *)s);
    if (self == NULL) return NULL;
    PyObject *fn = PyObject_GetAttrString(self, method);
    PyObject *r = fn ? PyObject_Call(fn, args, NULL) : NULL;
    Py_XDECREF(fn);
    Py_DECREF(self);
    return r;
}

static PyObject *IntSet_intersection(IntSet *s, PyObject *args)
{
    return via_set(s, "intersection", args);
}

static PyObject *IntSet_difference(IntSet *s, PyObject *args)
{
    return via_set(s, "difference", args);
}

static PyObject *IntSet_union(IntSet *s, PyObject *args)
{
    return via_set(s, "union", args);
}

static PyObject *IntSet_to_intset(IntSet *s, PyObject *unused)
{
    return PyBytes_FromStringAndSize((const char *)s->is, 8 + (Py_ssize_t)LEN(s) * ENC(s));
}

static PyObject *IntSet_sizeof(IntSet *s, PyObject *unused)
{
    return PyLong_FromSsize_t(Py_TYPE(s)->tp_basicsize + 8 + LEN(s) * (Py_ssize_t)ENC(s));
}

static PyObject *IntSet_reduce(IntSet *s, PyObject *unused)
{
    PyObject *l = members(s);
    if (l == NULL) return NULL;
    return Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(s), l);
}

static PyObject *IntSet_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !(IntSet_Check(b) || PyAnySet_Check(b)) ||
            !(IntSet_Check(a) || PyAnySet_Check(a)))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *sa = as_set(a), *sb = sa ? as_set(b) : NULL;
    PyObject *r = sb ? PyObject_RichCompare(sa, sb, op) : NULL;
    Py_XDECREF(sa);
    Py_XDECREF(sb);
    return r;
}

static PyObject *IntSet_repr(IntSet *s)
{
    PyObject *l = members(s);
    if (l == NULL) return NULL;
    PyObject *r = PyUnicode_FromFormat("IntSet(%R)", l);
    Py_DECREF(l);
    return r;
}

/* from_intset(blob): an IntSet of a Redis intset's bytes (RDB_TYPE_SET_INTSET), or None when
 * they are not one: a bad encoding or length, members not strictly ascending (the Python
 * reference then says why). */
static PyObject *IntSet_from_intset(PyObject *cls, PyObject *arg)
{
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *p = b.buf;
    PyObject *r = Py_None;
    if (b.len >= 8) {
        uint32_t enc = rd32(p), len = rd32(p + 4);
        if ((enc == 2 || enc == 4 || enc == 8) && (Py_ssize_t)(8 + (uint64_t)len * enc) == b.len) {
            int ok = 1;
            for (uint32_t i = 1; i < len && ok; i++)
                ok = get_as(p, enc, i - 1) < get_as(p, enc, i);
            if (ok) {
                IntSet *s = (IntSet *)IntSet_Type.tp_alloc(&IntSet_Type, 0);
                if (s == NULL) { PyBuffer_Release(&b); return NULL; }
                if ((s->is = PyMem_Malloc(b.len)) == NULL) {
                    Py_DECREF(s);
                    PyBuffer_Release(&b);
                    return PyErr_NoMemory();
                }
                memcpy(s->is, p, b.len);
                r = (PyObject *)s;
                PyBuffer_Release(&b);
                return r;
            }
        }
    }
    PyBuffer_Release(&b);
    return Py_NewRef(r);
}

static PyMethodDef IntSet_methods[] = {
    {"add", (PyCFunction)IntSet_add, METH_O, "add(member): a canonical integer's bytes"},
    {"update", (PyCFunction)IntSet_update, METH_VARARGS, "update(*iterables)"},
    {"discard", (PyCFunction)IntSet_discard, METH_O, "discard(member)"},
    {"remove", (PyCFunction)IntSet_remove, METH_O, "remove(member): KeyError when absent"},
    {"difference_update", (PyCFunction)IntSet_difference_update, METH_VARARGS,
     "difference_update(*iterables)"},
    {"pop", (PyCFunction)IntSet_pop, METH_NOARGS, "pop(): the largest member, removed"},
    {"copy", (PyCFunction)IntSet_copy, METH_NOARGS, "a copy"},
    {"intersection", (PyCFunction)IntSet_intersection, METH_VARARGS, "a set"},
    {"difference", (PyCFunction)IntSet_difference, METH_VARARGS, "a set"},
    {"union", (PyCFunction)IntSet_union, METH_VARARGS, "a set"},
    {"to_intset", (PyCFunction)IntSet_to_intset, METH_NOARGS,
     "the intset's bytes, as Redis's OBJ_ENCODING_INTSET set"},
    {"from_intset", (PyCFunction)IntSet_from_intset, METH_O | METH_CLASS,
     "from_intset(blob): an IntSet of a Redis intset's bytes, None when they are not one"},
    {"__sizeof__", (PyCFunction)IntSet_sizeof, METH_NOARGS, "the object and its intset"},
    {"__reduce__", (PyCFunction)IntSet_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods IntSet_sequence = {
    .sq_length = (lenfunc)IntSet_len,
    .sq_contains = (objobjproc)IntSet_contains,
};

static PyTypeObject IntSet_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._intset.IntSet",
    .tp_basicsize = sizeof(IntSet),
    .tp_dealloc = (destructor)IntSet_dealloc,
    .tp_repr = (reprfunc)IntSet_repr,
    .tp_as_sequence = &IntSet_sequence,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A set of integers as Redis's intset (members in and out as decimal bytes).",
    .tp_richcompare = IntSet_richcompare,
    .tp_iter = (getiterfunc)IntSet_iter,
    .tp_methods = IntSet_methods,
    .tp_new = IntSet_new,
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_intset",
    "Sets of integers as Redis's intsets (intset.py has the reference).", -1, NULL,
};

PyMODINIT_FUNC PyInit__intset(void)
{
    return lp_module(&moduledef, &IntSet_Type, "IntSet", NULL, NULL);
}
