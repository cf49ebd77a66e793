/* ListpackHash: a small hash kept as Redis keeps it, one listpack of field, value, field,
 * value... (t_hash.c's OBJ_ENCODING_LISTPACK), behind the part of dict's interface the hash
 * commands use. pyrepl/keyspace/lphash.py's ListpackHashReference is the reference (a dict
 * that answers the same; PYREPL_PURE=1 runs it) and tests/unit/test_lphash.py holds the two
 * equal on random operations, listpack bytes included.
 *
 * Why C: a hash of 10 short fields as a dict of bytes costs ~1.3 KB (the dict, 20 bytes
 * objects), 5-6x what Redis's listpack costs (bench/RESULTS.md, "Small hashes as listpacks");
 * the object here is 32 bytes and a malloc'd listpack of exactly Redis's bytes, so the RDB
 * writes it as it is (RDB_TYPE_HASH_LISTPACK), as Redis does. A lookup walks the entries
 * (at most hash-max-listpack-entries pairs, as Redis's lpFind); values come out as new bytes.
 *
 * The order is insertion order: an update replaces the value in place, a new field is appended,
 * a deleted one leaves the others in order: a dict's order, so converting to one keeps it.
 * The object holds no Python references (no GC header). Keys and values must be bytes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_listpack.h"
#include "_lphash.h"

typedef struct {
    PyObject_HEAD
    uint8_t *lp;                /* the listpack: PyMem, exactly its total bytes */
    Py_ssize_t n;               /* fields (entries / 2) */
} LPHash;

static PyTypeObject LPHash_Type;
#define LPHash_Check(o) Py_IS_TYPE((o), &LPHash_Type)

static inline void set_count(LPHash *h)
{
    lp_set_count(h->lp, h->n * 2);
}

/* Is entry `it` the n bytes at s (iv: their integer value when they are canonical)? */
static inline int item_is(const item_t *it, const uint8_t *s, Py_ssize_t n, int isint,
                          int64_t iv)
{
    if (it->is_int) return isint && it->v == iv;
    return it->slen == n && memcmp(it->s, s, n) == 0;
}

/* The field equal to `key` (bytes): its offset, and its value's entry and end offset.
 * 1 found, 0 not. Short strings (6-bit lengths) and 7-bit integers, what small hashes are
 * mostly made of, are stepped over inline; the other entries through next_item. */
static int find(LPHash *h, PyObject *key, Py_ssize_t *fpos, item_t *val, Py_ssize_t *vend)
{
    const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(key);
    Py_ssize_t n = PyBytes_GET_SIZE(key);
    int64_t iv = 0;
    int isint = n <= 20 && canonical_int(s, n, &iv);
    const uint8_t *lp = h->lp;
    Py_ssize_t p = LP_HDR, last = lp_total(lp) - 1, start;
    item_t f;
    while (p < last) {
        uint8_t b = lp[p];
        int match;
        start = p;
        if ((b & 0xC0) == 0x80) {               /* a string of < 64 bytes */
            Py_ssize_t len = b & 0x3F;
            match = len == n && memcmp(lp + p + 1, s, n) == 0;
            p += len + 2;
        } else if (b < 0x80) {                  /* a 7-bit integer */
            match = isint && iv == b;
            p += 2;
        } else {
            if (next_item(lp, &p, last, &f) < 0)
                return 0;                       /* (never: the listpacks here are built here) */
            match = item_is(&f, s, n, isint, iv);
        }
        if (match) {
            if (next_item(lp, &p, last, val) < 0)
                return 0;
            *fpos = start;
            *vend = p;
            return 1;
        }
        b = lp[p];                              /* the value: stepped over */
        if ((b & 0xC0) == 0x80)
            p += (b & 0x3F) + 2;
        else if (b < 0x80)
            p += 2;
        else if (next_item(lp, &p, last, &f) < 0)
            return 0;
    }
    return 0;
}

static int check_bytes(PyObject *o, const char *what)
{
    if (PyBytes_Check(o)) return 0;
    PyErr_Format(PyExc_TypeError, "ListpackHash %s must be bytes, not %.100s", what,
                 Py_TYPE(o)->tp_name);
    return -1;
}

/* hash-max-listpack-entries / -value, as lphash.configure set them (for set_fit) */
static Py_ssize_t max_entries = 512, max_value = 64;

/* h[key] = value: 1 when the field is new, 0 when replaced, -1 on error. With `fit`, -2 and
 * nothing changed when the hash would no longer fit a listpack (the field or value longer than
 * max_value, or a new field past max_entries). */
static int lphash_set_as(LPHash *h, PyObject *key, PyObject *value, int fit)
{
    Py_ssize_t fpos, vend;
    item_t val;
    if (fit && (PyBytes_GET_SIZE(value) > max_value || PyBytes_GET_SIZE(key) > max_value))
        return -2;
    if (find(h, key, &fpos, &val, &vend)) {
        if (fit && h->n > max_entries)          /* (hashTypeSet converts after an update too) */
            return -2;
        return lp_put_bytes(&h->lp, val.start, vend - val.start, value) < 0 ? -1 : 0;
    }
    if (fit && h->n + 1 > max_entries)
        return -2;
    Py_ssize_t end = lp_total(h->lp) - 1, klen = lp_put_bytes(&h->lp, end, 0, key);
    if (klen < 0) return -1;
    if (lp_put_bytes(&h->lp, end + klen, 0, value) < 0) {
        lp_splice(&h->lp, end, klen, 0);       /* (the field goes back out) */
        return -1;
    }
    h->n++;
    set_count(h);
    return 1;
}

static inline int lphash_set(LPHash *h, PyObject *key, PyObject *value)
{
    return lphash_set_as(h, key, value, 0);
}

/* del h[key]: 1 removed, 0 absent, -1 error. */
static int lphash_del(LPHash *h, PyObject *key)
{
    Py_ssize_t fpos, vend;
    item_t val;
    if (!find(h, key, &fpos, &val, &vend)) return 0;
    if (lp_splice(&h->lp, fpos, vend - fpos, 0) < 0) return -1;
    h->n--;
    set_count(h);
    return 1;
}

/* The value at `key` as new bytes, or NULL without an exception when absent. */
static PyObject *lphash_get(LPHash *h, PyObject *key)
{
    Py_ssize_t fpos, vend;
    item_t val;
    if (!find(h, key, &fpos, &val, &vend)) return NULL;
    return item_bytes(&val);
}

/* -------------------------------------------------------------------------- the Python type */

static int fill(LPHash *h, PyObject *src)
{
    PyObject *items;
    if (PyDict_Check(src) || LPHash_Check(src) || PyObject_HasAttrString(src, "items"))
        items = PyObject_CallMethod(src, "items", NULL);
    else {
        items = src;
        Py_INCREF(items);
    }
    if (items == NULL) return -1;
    PyObject *it = PyObject_GetIter(items);
    Py_DECREF(items);
    if (it == NULL) return -1;
    PyObject *pair;
    while ((pair = PyIter_Next(it)) != NULL) {
        PyObject *k, *v;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "ListpackHash items must be (field, value) pairs");
            Py_DECREF(pair);
            Py_DECREF(it);
            return -1;
        }
        k = PyTuple_GET_ITEM(pair, 0);
        v = PyTuple_GET_ITEM(pair, 1);
        if (check_bytes(k, "fields") < 0 || check_bytes(v, "values") < 0 ||
                lphash_set(h, k, v) < 0) {
            Py_DECREF(pair);
            Py_DECREF(it);
            return -1;
        }
        Py_DECREF(pair);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *LPHash_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *src = NULL;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "ListpackHash() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "|O:ListpackHash", &src)) return NULL;
    LPHash *h = (LPHash *)type->tp_alloc(type, 0);
    if (h == NULL) return NULL;
    if ((h->lp = lp_new()) == NULL) { Py_DECREF(h); return NULL; }
    if (src != NULL && fill(h, src) < 0) { Py_DECREF(h); return NULL; }
    return (PyObject *)h;
}

static void LPHash_dealloc(LPHash *h)
{
    PyMem_Free(h->lp);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static Py_ssize_t LPHash_len(LPHash *h) { return h->n; }

static PyObject *LPHash_subscript(LPHash *h, PyObject *key)
{
    if (check_bytes(key, "fields") < 0) return NULL;
    PyObject *v = lphash_get(h, key);
    if (v == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
    return v;
}

static int LPHash_ass_subscript(LPHash *h, PyObject *key, PyObject *value)
{
    if (check_bytes(key, "fields") < 0) return -1;
    if (value == NULL) {
        int r = lphash_del(h, key);
        if (r == 0) PyErr_SetObject(PyExc_KeyError, key);
        return r > 0 ? 0 : -1;
    }
    if (check_bytes(value, "values") < 0) return -1;
    return lphash_set(h, key, value) < 0 ? -1 : 0;
}

static int LPHash_contains(LPHash *h, PyObject *key)
{
    Py_ssize_t fpos, vend;
    item_t val;
    if (!PyBytes_Check(key)) return 0;
    return find(h, key, &fpos, &val, &vend);
}

static PyObject *LPHash_get(LPHash *h, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get expected 1 or 2 arguments");
        return NULL;
    }
    PyObject *v = PyBytes_Check(args[0]) ? lphash_get(h, args[0]) : NULL;
    if (v != NULL || PyErr_Occurred()) return v;
    v = nargs == 2 ? args[1] : Py_None;
    Py_INCREF(v);
    return v;
}

static PyObject *LPHash_pop(LPHash *h, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "pop expected 1 or 2 arguments");
        return NULL;
    }
    PyObject *v = PyBytes_Check(args[0]) ? lphash_get(h, args[0]) : NULL;
    if (v != NULL) {
        if (lphash_del(h, args[0]) < 0) { Py_DECREF(v); return NULL; }
        return v;
    }
    if (PyErr_Occurred()) return NULL;
    if (nargs == 2) {
        Py_INCREF(args[1]);
        return args[1];
    }
    PyErr_SetObject(PyExc_KeyError, args[0]);
    return NULL;
}

/* which: 0 fields, 1 values, 2 (field, value) tuples; a new list. */
static PyObject *listing(LPHash *h, int which)
{
    PyObject *out = PyList_New(h->n);
    if (out == NULL) return NULL;
    const uint8_t *lp = h->lp;
    Py_ssize_t p = LP_HDR, last = lp_total(lp) - 1;
    for (Py_ssize_t i = 0; i < h->n; i++) {
        item_t f, v;
        if (next_item(lp, &p, last, &f) < 0 || next_item(lp, &p, last, &v) < 0) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_SystemError, "ListpackHash: a malformed listpack");
            return NULL;
        }
        PyObject *o;
        if (which == 0) o = item_bytes(&f);
        else if (which == 1) o = item_bytes(&v);
        else {
            PyObject *a = item_bytes(&f), *b = a ? item_bytes(&v) : NULL;
            o = b ? PyTuple_Pack(2, a, b) : NULL;
            Py_XDECREF(a);
            Py_XDECREF(b);
        }
        if (o == NULL) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, o);
    }
    return out;
}

static PyObject *LPHash_keys(LPHash *h, PyObject *unused) { return listing(h, 0); }
static PyObject *LPHash_values(LPHash *h, PyObject *unused) { return listing(h, 1); }
static PyObject *LPHash_items(LPHash *h, PyObject *unused) { return listing(h, 2); }

static PyObject *LPHash_iter(LPHash *h)
{
    PyObject *keys = listing(h, 0);
    if (keys == NULL) return NULL;
    PyObject *it = PyObject_GetIter(keys);
    Py_DECREF(keys);
    return it;
}

static PyObject *LPHash_copy(LPHash *h, PyObject *unused)
{
    LPHash *c = (LPHash *)LPHash_Type.tp_alloc(&LPHash_Type, 0);
    if (c == NULL) return NULL;
    uint32_t total = lp_total(h->lp);
    if ((c->lp = PyMem_Malloc(total)) == NULL) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    memcpy(c->lp, h->lp, total);
    c->n = h->n;
    return (PyObject *)c;
}

static PyObject *LPHash_clear(LPHash *h, PyObject *unused)
{
    uint8_t *lp = lp_new();
    if (lp == NULL) return NULL;
    PyMem_Free(h->lp);
    h->lp = lp;
    h->n = 0;
    Py_RETURN_NONE;
}

static PyObject *LPHash_to_listpack(LPHash *h, PyObject *unused)
{
    return PyBytes_FromStringAndSize((const char *)h->lp, lp_total(h->lp));
}

static PyObject *LPHash_sizeof(LPHash *h, PyObject *unused)
{
    return PyLong_FromSsize_t(Py_TYPE(h)->tp_basicsize + (Py_ssize_t)lp_total(h->lp));
}

static PyObject *LPHash_reduce(LPHash *h, PyObject *unused)
{
    PyObject *items = listing(h, 2);
    if (items == NULL) return NULL;
    return Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(h), items);
}

static PyObject *as_dict(PyObject *o)
{
    if (PyDict_Check(o)) { Py_INCREF(o); return o; }
    PyObject *items = listing((LPHash *)o, 2), *d = items ? PyDict_New() : NULL;
    if (d != NULL && PyDict_MergeFromSeq2(d, items, 1) < 0) Py_CLEAR(d);
    Py_XDECREF(items);
    return d;
}

/* Equal to a dict or a ListpackHash of the same fields and values (order aside, as dicts). */
static PyObject *LPHash_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !(LPHash_Check(b) || PyDict_Check(b)) ||
            !(LPHash_Check(a) || PyDict_Check(a)))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *da = as_dict(a), *db = da ? as_dict(b) : NULL;
    PyObject *r = db ? PyObject_RichCompare(da, db, op) : NULL;
    Py_XDECREF(da);
    Py_XDECREF(db);
    return r;
}

static PyObject *LPHash_repr(LPHash *h)
{
    PyObject *d = as_dict((PyObject *)h);
    if (d == NULL) return NULL;
    PyObject *r = PyUnicode_FromFormat("ListpackHash(%R)", d);
    Py_DECREF(d);
    return r;
}

static PyMethodDef LPHash_methods[] = {
    {"get", (PyCFunction)(void (*)(void))LPHash_get, METH_FASTCALL,
     "get(field, default=None)"},
    {"pop", (PyCFunction)(void (*)(void))LPHash_pop, METH_FASTCALL,
     "pop(field[, default]): remove the field and answer its value"},
    {"keys", (PyCFunction)LPHash_keys, METH_NOARGS, "the fields, in order (a list)"},
    {"values", (PyCFunction)LPHash_values, METH_NOARGS, "the values, in order (a list)"},
    {"items", (PyCFunction)LPHash_items, METH_NOARGS, "(field, value) pairs, in order (a list)"},
    {"copy", (PyCFunction)LPHash_copy, METH_NOARGS, "a copy"},
    {"clear", (PyCFunction)LPHash_clear, METH_NOARGS, "remove every field"},
    {"to_listpack", (PyCFunction)LPHash_to_listpack, METH_NOARGS,
     "the listpack's bytes: field, value, ... as Redis's OBJ_ENCODING_LISTPACK hash"},
    {"__sizeof__", (PyCFunction)LPHash_sizeof, METH_NOARGS, "the object and its listpack"},
    {"__reduce__", (PyCFunction)LPHash_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods LPHash_mapping = {
    (lenfunc)LPHash_len, (binaryfunc)LPHash_subscript, (objobjargproc)LPHash_ass_subscript,
};

static PySequenceMethods LPHash_sequence = {
    .sq_contains = (objobjproc)LPHash_contains,
};

static PyTypeObject LPHash_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._lphash.ListpackHash",
    .tp_basicsize = sizeof(LPHash),
    .tp_dealloc = (destructor)LPHash_dealloc,
    .tp_repr = (reprfunc)LPHash_repr,
    .tp_as_sequence = &LPHash_sequence,
    .tp_as_mapping = &LPHash_mapping,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A small hash as one listpack of field, value, ... (Redis's listpack hash).",
    .tp_richcompare = LPHash_richcompare,
    .tp_iter = (getiterfunc)LPHash_iter,
    .tp_methods = LPHash_methods,
    .tp_new = LPHash_new,
};

/* ------------------------------------------------------------------ the C API for _hot.c */

static int capi_set_fit(PyObject *h, PyObject *key, PyObject *value)
{
    return lphash_set_as((LPHash *)h, key, value, 1);
}

static LPHash_CAPI capi = {LPHASH_CAPI_VERSION, &LPHash_Type, capi_set_fit};

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
     "configure(max_entries, max_value): the limits the C API's set_fit keeps within"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_lphash",
    "Small hashes as listpacks (lphash.py has the reference).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__lphash(void)
{
    return lp_module(&moduledef, &LPHash_Type, "ListpackHash", &capi, LPHASH_CAPSULE);
}
