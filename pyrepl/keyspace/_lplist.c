/* ListpackList: a small list kept as one listpack of its elements, as a Redis 7.0 quicklist of
 * one node keeps it, behind the part of collections.deque's interface the list commands use.
 * pyrepl/keyspace/lplist.py's ListpackListReference is the reference (a deque that answers
 * the same; PYREPL_PURE=1 runs it) and tests/unit/test_lplist.py holds the two equal on
 * random operations, listpack bytes included.
 *
 * Why C: a list of 10 short elements as a deque of bytes costs ~1.3 KB (the deque's 64-slot
 * block, ten bytes objects), 4.7x what Redis's quicklist costs (bench/RESULTS.md); here the
 * object is 32 bytes and the listpack exactly the bytes of Redis's node, which the RDB writes
 * as a quicklist of one node (RDB_TYPE_LIST_QUICKLIST_2). Reads walk the entries (from the
 * nearer end), as Redis walks a node; elements come out as new bytes.
 *
 * The object holds no Python references (no GC header). Elements must be bytes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_listpack.h"
#include "_lplist.h"

typedef struct {
    PyObject_HEAD
    uint8_t *lp;                /* the listpack: PyMem, exactly its total bytes */
    Py_ssize_t n;               /* elements */
} LPList;

static PyTypeObject LPList_Type;
#define LPList_Check(o) Py_IS_TYPE((o), &LPList_Type)

static int check_bytes(PyObject *o)
{
    if (PyBytes_Check(o)) return 0;
    PyErr_Format(PyExc_TypeError, "ListpackList elements must be bytes, not %.100s",
                 Py_TYPE(o)->tp_name);
    return -1;
}

/* The offset of element i (0 <= i < n), walked to from the nearer end. */
static Py_ssize_t offset_of(LPList *l, Py_ssize_t i)
{
    const uint8_t *lp = l->lp;
    Py_ssize_t last = lp_total(lp) - 1, p;
    item_t it;
    if (i <= l->n / 2) {
        p = LP_HDR;
        while (i-- > 0 && next_item(lp, &p, last, &it) == 0)
            ;
        return p;
    }
    p = last;
    for (Py_ssize_t k = l->n; k > i; k--)
        p = lp_prev(lp, p);
    return p;
}

/* Insert element `v` (bytes) at byte offset `pos` (an entry's start, or the terminator's). */
static int insert_at(LPList *l, Py_ssize_t pos, PyObject *v)
{
    if (lp_put_bytes(&l->lp, pos, 0, v) < 0) return -1;
    l->n++;
    lp_set_count(l->lp, l->n);
    return 0;
}

/* Element i's entry: its item and the offset just past it. */
static void entry_at(LPList *l, Py_ssize_t i, item_t *it, Py_ssize_t *end)
{
    Py_ssize_t p = offset_of(l, i);
    next_item(l->lp, &p, lp_total(l->lp) - 1, it);
    *end = p;
}

static int delete_at(LPList *l, Py_ssize_t i)
{
    item_t it;
    Py_ssize_t end;
    entry_at(l, i, &it, &end);
    if (lp_splice(&l->lp, it.start, end - it.start, 0) < 0) return -1;
    l->n--;
    lp_set_count(l->lp, l->n);
    return 0;
}

static int add_all(LPList *l, PyObject *iterable, int left)
{
    PyObject *it = PyObject_GetIter(iterable), *v;
    if (it == NULL) return -1;
    while ((v = PyIter_Next(it)) != NULL) {
        int r = check_bytes(v) < 0 ? -1 :
            insert_at(l, left ? LP_HDR : (Py_ssize_t)lp_total(l->lp) - 1, v);
        Py_DECREF(v);
        if (r < 0) { Py_DECREF(it); return -1; }
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

/* -------------------------------------------------------------------------- the Python type */

static PyObject *LPList_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *src = NULL;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "ListpackList() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "|O:ListpackList", &src)) return NULL;
    LPList *l = (LPList *)type->tp_alloc(type, 0);
    if (l == NULL) return NULL;
    if ((l->lp = lp_new()) == NULL) { Py_DECREF(l); return NULL; }
    if (src != NULL && add_all(l, src, 0) < 0) { Py_DECREF(l); return NULL; }
    return (PyObject *)l;
}

static void LPList_dealloc(LPList *l)
{
    PyMem_Free(l->lp);
    Py_TYPE(l)->tp_free((PyObject *)l);
}

static Py_ssize_t LPList_len(LPList *l) { return l->n; }

static PyObject *LPList_item(LPList *l, Py_ssize_t i)
{
    if (i < 0 || i >= l->n) {
        PyErr_SetString(PyExc_IndexError, "ListpackList index out of range");
        return NULL;
    }
    item_t it;
    Py_ssize_t end;
    entry_at(l, i, &it, &end);
    return item_bytes(&it);
}

static int LPList_ass_item(LPList *l, Py_ssize_t i, PyObject *v)
{
    if (i < 0 || i >= l->n) {
        PyErr_SetString(PyExc_IndexError, "ListpackList index out of range");
        return -1;
    }
    if (v == NULL) return delete_at(l, i);
    if (check_bytes(v) < 0) return -1;
    item_t it;
    Py_ssize_t end;
    entry_at(l, i, &it, &end);
    return lp_put_bytes(&l->lp, it.start, end - it.start, v) < 0 ? -1 : 0;
}

static PyObject *LPList_append(LPList *l, PyObject *v)
{
    if (check_bytes(v) < 0 || insert_at(l, (Py_ssize_t)lp_total(l->lp) - 1, v) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *LPList_appendleft(LPList *l, PyObject *v)
{
    if (check_bytes(v) < 0 || insert_at(l, LP_HDR, v) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *LPList_extend(LPList *l, PyObject *it)
{
    return add_all(l, it, 0) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *LPList_extendleft(LPList *l, PyObject *it)
{
    return add_all(l, it, 1) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *pop_at(LPList *l, Py_ssize_t i)
{
    if (l->n == 0) {
        PyErr_SetString(PyExc_IndexError, "pop from an empty ListpackList");
        return NULL;
    }
    PyObject *v = LPList_item(l, i);
    if (v != NULL && delete_at(l, i) < 0) Py_CLEAR(v);
    return v;
}

static PyObject *LPList_pop(LPList *l, PyObject *unused) { return pop_at(l, l->n - 1); }
static PyObject *LPList_popleft(LPList *l, PyObject *unused) { return pop_at(l, 0); }

/* insert(i, x) as deque's: i from the end when negative, clipped to [0, len] */
static PyObject *LPList_insert(LPList *l, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "insert expected 2 arguments");
        return NULL;
    }
    Py_ssize_t i = PyNumber_AsSsize_t(args[0], PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (check_bytes(args[1]) < 0) return NULL;
    if (i < 0) i += l->n;
    if (i < 0) i = 0;
    if (i > l->n) i = l->n;
    Py_ssize_t pos = i == l->n ? (Py_ssize_t)lp_total(l->lp) - 1 : offset_of(l, i);
    return insert_at(l, pos, args[1]) < 0 ? NULL : Py_NewRef(Py_None);
}

/* index(x): the first element equal to x (bytes), ValueError when none */
static PyObject *LPList_index(LPList *l, PyObject *x)
{
    if (PyBytes_Check(x)) {
        const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(x), *lp = l->lp;
        Py_ssize_t n = PyBytes_GET_SIZE(x), p = LP_HDR, last = lp_total(lp) - 1;
        int64_t iv = 0;
        int isint = n <= 20 && canonical_int(s, n, &iv);
        item_t it;
        for (Py_ssize_t i = 0; p < last && next_item(lp, &p, last, &it) == 0; i++) {
            if (it.is_int ? (isint && it.v == iv) : (it.slen == n && memcmp(it.s, s, n) == 0))
                return PyLong_FromSsize_t(i);
        }
    }
    PyErr_SetString(PyExc_ValueError, "ListpackList.index(x): x not in list");
    return NULL;
}

static PyObject *LPList_clear(LPList *l, PyObject *unused)
{
    uint8_t *lp = lp_new();
    if (lp == NULL) return NULL;
    PyMem_Free(l->lp);
    l->lp = lp;
    l->n = 0;
    Py_RETURN_NONE;
}

static PyObject *elements(LPList *l, int reverse)
{
    PyObject *out = PyList_New(l->n);
    if (out == NULL) return NULL;
    const uint8_t *lp = l->lp;
    Py_ssize_t p = LP_HDR, last = lp_total(lp) - 1;
    for (Py_ssize_t i = 0; i < l->n; i++) {
        item_t it;
        if (next_item(lp, &p, last, &it) < 0) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_SystemError, "ListpackList: a malformed listpack");
            return NULL;
        }
        PyObject *b = item_bytes(&it);
        if (b == NULL) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, reverse ? l->n - 1 - i : i, b);
    }
    return out;
}

/* range(start, stop): the elements with index in [start, stop) (clipped), walked to from the
 * head and made only for those (LRANGE) */
static PyObject *LPList_range(LPList *l, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t start, stop;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "range expected 2 arguments");
        return NULL;
    }
    start = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
    if (start == -1 && PyErr_Occurred()) return NULL;
    stop = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    if (stop == -1 && PyErr_Occurred()) return NULL;
    if (start < 0) start = 0;
    if (stop > l->n) stop = l->n;
    PyObject *out = PyList_New(stop > start ? stop - start : 0);
    if (out == NULL || stop <= start) return out;
    const uint8_t *lp = l->lp;
    Py_ssize_t p = offset_of(l, start), last = lp_total(lp) - 1;
    for (Py_ssize_t i = 0; i < stop - start; i++) {
        item_t it;
        PyObject *b = next_item(lp, &p, last, &it) < 0 ? NULL : item_bytes(&it);
        if (b == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_SystemError, "ListpackList: a malformed listpack");
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, b);
    }
    return out;
}

static PyObject *iter_of(LPList *l, int reverse)
{
    PyObject *e = elements(l, reverse);
    if (e == NULL) return NULL;
    PyObject *it = PyObject_GetIter(e);
    Py_DECREF(e);
    return it;
}

static PyObject *LPList_iter(LPList *l) { return iter_of(l, 0); }
static PyObject *LPList_reversed(LPList *l, PyObject *unused) { return iter_of(l, 1); }

static PyObject *LPList_copy(LPList *l, PyObject *unused)
{
    LPList *c = (LPList *)LPList_Type.tp_alloc(&LPList_Type, 0);
    if (c == NULL) return NULL;
    uint32_t total = lp_total(l->lp);
    if ((c->lp = PyMem_Malloc(total)) == NULL) { Py_DECREF(c); return PyErr_NoMemory(); }
    memcpy(c->lp, l->lp, total);
    c->n = l->n;
    return (PyObject *)c;
}

static PyObject *LPList_to_listpack(LPList *l, PyObject *unused)
{
    return PyBytes_FromStringAndSize((const char *)l->lp, lp_total(l->lp));
}

static PyObject *LPList_listpack_bytes(LPList *l, PyObject *unused)
{
    return PyLong_FromUnsignedLong(lp_total(l->lp));
}

static PyObject *LPList_sizeof(LPList *l, PyObject *unused)
{
    return PyLong_FromSsize_t(Py_TYPE(l)->tp_basicsize + (Py_ssize_t)lp_total(l->lp));
}

static PyObject *LPList_reduce(LPList *l, PyObject *unused)
{
    PyObject *e = elements(l, 0);
    if (e == NULL) return NULL;
    return Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(l), e);
}

static PyObject *as_list(PyObject *o)
{
    return LPList_Check(o) ? elements((LPList *)o, 0) : PySequence_List(o);
}

/* Equal to a deque, a list or a ListpackList of the same elements in the same order. */
static PyObject *LPList_richcompare(PyObject *a, PyObject *b, int op)
{
    PyObject *deque = NULL;
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    PyObject *other = LPList_Check(a) ? b : a;
    if (!LPList_Check(other) && !PyList_Check(other)) {
        PyObject *mod = PyImport_ImportModule("collections");
        deque = mod ? PyObject_GetAttrString(mod, "deque") : NULL;
        Py_XDECREF(mod);
        if (deque == NULL) return NULL;
        int is = PyObject_TypeCheck(other, (PyTypeObject *)deque);
        Py_DECREF(deque);
        if (!is) Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *la = as_list(a), *lb = la ? as_list(b) : NULL;
    PyObject *r = lb ? PyObject_RichCompare(la, lb, op) : NULL;
    Py_XDECREF(la);
    Py_XDECREF(lb);
    return r;
}

static PyObject *LPList_repr(LPList *l)
{
    PyObject *e = elements(l, 0);
    if (e == NULL) return NULL;
    PyObject *r = PyUnicode_FromFormat("ListpackList(%R)", e);
    Py_DECREF(e);
    return r;
}

static PyMethodDef LPList_methods[] = {
    {"append", (PyCFunction)LPList_append, METH_O, "append(x): at the tail"},
    {"appendleft", (PyCFunction)LPList_appendleft, METH_O, "appendleft(x): at the head"},
    {"extend", (PyCFunction)LPList_extend, METH_O, "extend(iterable): at the tail"},
    {"extendleft", (PyCFunction)LPList_extendleft, METH_O,
     "extendleft(iterable): each at the head in turn"},
    {"pop", (PyCFunction)LPList_pop, METH_NOARGS, "pop(): the tail, removed"},
    {"popleft", (PyCFunction)LPList_popleft, METH_NOARGS, "popleft(): the head, removed"},
    {"insert", (PyCFunction)(void (*)(void))LPList_insert, METH_FASTCALL, "insert(i, x)"},
    {"index", (PyCFunction)LPList_index, METH_O, "index(x): the first position of x"},
    {"range", (PyCFunction)(void (*)(void))LPList_range, METH_FASTCALL,
     "range(start, stop): the elements with index in [start, stop), clipped (a list)"},
    {"clear", (PyCFunction)LPList_clear, METH_NOARGS, "remove every element"},
    {"copy", (PyCFunction)LPList_copy, METH_NOARGS, "a copy"},
    {"__reversed__", (PyCFunction)LPList_reversed, METH_NOARGS, "tail first"},
    {"to_listpack", (PyCFunction)LPList_to_listpack, METH_NOARGS,
     "the listpack's bytes, as a Redis 7.0 quicklist node holds them"},
    {"listpack_bytes", (PyCFunction)LPList_listpack_bytes, METH_NOARGS,
     "the listpack's size in bytes"},
    {"__sizeof__", (PyCFunction)LPList_sizeof, METH_NOARGS, "the object and its listpack"},
    {"__reduce__", (PyCFunction)LPList_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods LPList_sequence = {
    .sq_length = (lenfunc)LPList_len,
    .sq_item = (ssizeargfunc)LPList_item,
    .sq_ass_item = (ssizeobjargproc)LPList_ass_item,
};

static PyTypeObject LPList_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._lplist.ListpackList",
    .tp_basicsize = sizeof(LPList),
    .tp_dealloc = (destructor)LPList_dealloc,
    .tp_repr = (reprfunc)LPList_repr,
    .tp_as_sequence = &LPList_sequence,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A small list as one listpack (a Redis 7.0 quicklist's node).",
    .tp_richcompare = LPList_richcompare,
    .tp_iter = (getiterfunc)LPList_iter,
    .tp_methods = LPList_methods,
    .tp_new = LPList_new,
};

/* ------------------------------------------------------------------ the C API for _hot.c */

/* one quicklist node's fill, as lplist.configure set it (for push_fit) */
static Py_ssize_t max_count = (Py_ssize_t)1 << 62, max_bytes = 8192;

static Py_ssize_t capi_push_fit(PyObject *o, PyObject *v, int left)
{
    LPList *l = (LPList *)o;
    Py_ssize_t vn = PyBytes_GET_SIZE(v), total = lp_total(l->lp);
    Py_ssize_t pos = left ? LP_HDR : total - 1;
    uint8_t small[96];
    if (LP_ENTRY_MAX(vn) > (Py_ssize_t)sizeof small) {    /* a long one: its size bounded */
        if (l->n + 1 > max_count || total + LP_ENTRY_MAX(vn) > max_bytes) return -2;
        return insert_at(l, pos, v) < 0 ? -1 : l->n;
    }
    /* a short one: encoded once, measured, then copied in */
    Py_ssize_t len = lp_encode_str(small, (const uint8_t *)PyBytes_AS_STRING(v), vn);
    if (l->n + 1 > max_count || total + len > max_bytes)
        return -2;
    if (lp_splice(&l->lp, pos, 0, len) < 0) return -1;
    memcpy(l->lp + pos, small, len);
    l->n++;
    lp_set_count(l->lp, l->n);
    return l->n;
}

static LPList_CAPI capi = {LPLIST_CAPI_VERSION, &LPList_Type, capi_push_fit};

static PyObject *configure(PyObject *self, PyObject *args)
{
    Py_ssize_t c, b;
    if (!PyArg_ParseTuple(args, "nn", &c, &b)) return NULL;
    max_count = c;
    max_bytes = b;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(max_count, max_bytes): the node fill the C API's push_fit keeps within"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_lplist",
    "Small lists as listpacks (lplist.py has the reference).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__lplist(void)
{
    return lp_module(&moduledef, &LPList_Type, "ListpackList", &capi, LPLIST_CAPSULE);
}
