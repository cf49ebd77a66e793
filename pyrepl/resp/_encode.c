/* pyrepl.resp._encode: a reply value's wire bytes (pyrepl/resp/writer.py's encode), in C.

   A handler answers with plain values (pyrepl/resp/types.py): an LRANGE of 100 elements is a
   list of 100 bytes objects, an HGETALL a Map of pairs, an XRANGE lists of lists. The Python
   encoder makes one recursive call per element, ~0.5 µs each: 80 % of an LRANGE_100's time
   (bench/RESULTS.md, issue 39). Here the common values (bytes, int, None, bool, float, lists
   and tuples, Map, SetReply, Raw) are written into one buffer; any other value (Status,
   ReplyError, Verbatim, NULL_ARRAY, str, an int past 64 bits, an int subclass) is handed to
   the Python reference, ``encode_reference``, and its bytes copied in, so the two agree by
   construction on those and tests/unit/test_resp_encode.py checks they agree on the rest. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MODULE_NAME "pyrepl.resp._encode"
#include "../_slots.h"
#include "../_wbuf.h"

static const char *Raw_names[] = {"data"};
static Py_ssize_t Raw_off[1];
static PyTypeObject *Raw_type;
static const char *Map_names[] = {"items"};
static Py_ssize_t Map_off[1];
static PyTypeObject *Map_type;
static const char *SetReply_names[] = {"items"};
static Py_ssize_t SetReply_off[1];
static PyTypeObject *SetReply_type;
static PyObject *reference;   /* writer.encode_reference(value, proto) */
static PyObject *two;         /* the default proto, 2 */
static int bound;

/* The Python reference's bytes of v, appended. */
static int
by_reference(wbuf *b, PyObject *v, PyObject *proto)
{
    PyObject *args[2] = {v, proto};
    PyObject *r = PyObject_Vectorcall(reference, args, 2, NULL);
    if (r == NULL)
        return -1;
    if (!PyBytes_Check(r)) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "encode_reference answered other than bytes");
        return -1;
    }
    int rc = wbuf_put(b, PyBytes_AS_STRING(r), PyBytes_GET_SIZE(r));
    Py_DECREF(r);
    return rc;
}

static int write_value(wbuf *b, PyObject *v, int resp3, PyObject *proto);

static int
write_items(wbuf *b, PyObject *seq, int resp3, PyObject *proto)
{
    /* (no Python code runs between two items but the reference on a leaf, which does not
       touch the containers it is not given) */
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++)
        if (write_value(b, items[i], resp3, proto) < 0)
            return -1;
    return 0;
}

/* A Map's pairs, each a 2-tuple or 2-list; 0 when one is not (the reference then encodes the
   whole Map: it takes any pair its for-loop unpacks). */
static int
pairs_ok(PyObject *items)
{
    Py_ssize_t n = PyList_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kv = PyList_GET_ITEM(items, i);
        if (!((PyTuple_CheckExact(kv) && PyTuple_GET_SIZE(kv) == 2) ||
              (PyList_CheckExact(kv) && PyList_GET_SIZE(kv) == 2)))
            return 0;
    }
    return 1;
}

static int
write_value(wbuf *b, PyObject *v, int resp3, PyObject *proto)
{
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyBytes_Type)
        return wbuf_bulk(b, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    if (t == Raw_type) {
        PyObject *data = SLOT_AT(v, Raw_off[0]);
        if (data != NULL && PyBytes_CheckExact(data))
            return wbuf_put(b, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
        return by_reference(b, v, proto);
    }
    if (t == &PyLong_Type) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow)
            return by_reference(b, v, proto);
        return wbuf_header(b, ':', x);
    }
    if (v == Py_None)
        return resp3 ? wbuf_put(b, "_\r\n", 3) : wbuf_put(b, "$-1\r\n", 5);
    if (t == &PyList_Type || t == &PyTuple_Type) {
        int rc;
        if (wbuf_header(b, '*', (long long)Py_SIZE(v)) < 0 ||
                Py_EnterRecursiveCall(" while encoding a reply"))
            return -1;
        rc = write_items(b, v, resp3, proto);
        Py_LeaveRecursiveCall();
        return rc;
    }
    if (t == Map_type) {
        PyObject *items = SLOT_AT(v, Map_off[0]);
        if (items == NULL || !PyList_CheckExact(items) || !pairs_ok(items))
            return by_reference(b, v, proto);
        Py_ssize_t n = PyList_GET_SIZE(items);
        if ((resp3 ? wbuf_header(b, '%', n) : wbuf_header(b, '*', 2 * (long long)n)) < 0 ||
                Py_EnterRecursiveCall(" while encoding a reply"))
            return -1;
        int rc = 0;
        for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
            PyObject *kv = PyList_GET_ITEM(items, i);
            Py_INCREF(kv);   /* (a list pair could change under the reference: kept whole) */
            PyObject *k = PySequence_Fast_GET_ITEM(kv, 0), *x = PySequence_Fast_GET_ITEM(kv, 1);
            Py_INCREF(k);
            Py_INCREF(x);
            rc = write_value(b, k, resp3, proto);
            if (rc == 0)
                rc = write_value(b, x, resp3, proto);
            Py_DECREF(k);
            Py_DECREF(x);
            Py_DECREF(kv);
        }
        Py_LeaveRecursiveCall();
        return rc;
    }
    if (t == SetReply_type) {
        PyObject *items = SLOT_AT(v, SetReply_off[0]);
        if (items == NULL || !PyList_CheckExact(items))
            return by_reference(b, v, proto);
        int rc;
        if (wbuf_header(b, resp3 ? '~' : '*', PyList_GET_SIZE(items)) < 0 ||
                Py_EnterRecursiveCall(" while encoding a reply"))
            return -1;
        rc = write_items(b, items, resp3, proto);
        Py_LeaveRecursiveCall();
        return rc;
    }
    if (t == &PyFloat_Type) {
        double d = PyFloat_AS_DOUBLE(v);
        if (!Py_IS_FINITE(d))
            return by_reference(b, v, proto);
        char *s = PyOS_double_to_string(d, 'g', 17, 0, NULL);   /* b"%.17g" % d */
        if (s == NULL)
            return -1;
        Py_ssize_t n = (Py_ssize_t)strlen(s);
        int rc;
        if (resp3)
            rc = wbuf_put(b, ",", 1) < 0 || wbuf_put(b, s, n) < 0 ? -1 : wbuf_put(b, "\r\n", 2);
        else
            rc = wbuf_bulk(b, s, n);
        PyMem_Free(s);
        return rc;
    }
    if (v == Py_True)
        return resp3 ? wbuf_put(b, "#t\r\n", 4) : wbuf_put(b, ":1\r\n", 4);
    if (v == Py_False)
        return resp3 ? wbuf_put(b, "#f\r\n", 4) : wbuf_put(b, ":0\r\n", 4);
    return by_reference(b, v, proto);
}

/* encode(value, proto=2) -> bytes: writer.encode_reference's bytes. */
static PyObject *
encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bound)
        return unbound_error(MODULE_NAME, "encode");
    if (nargs != 1 && nargs != 2)
        return usage_error("encode(value, proto=2)");
    PyObject *v = args[0];
    PyObject *proto = nargs == 2 ? args[1] : NULL;
    int resp3 = 0;
    if (proto != NULL) {
        long p = PyLong_AsLong(proto);
        if (p == -1 && PyErr_Occurred())
            return NULL;
        resp3 = p == 3;
    } else {
        proto = two;
    }
    if (PyBytes_CheckExact(v) && PyBytes_GET_SIZE(v) > 4000)   /* (one copy, not two) */
        return resp_bulk_bytes(PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    uint8_t local[4096];   /* (the heap only past it) */
    wbuf b;
    wbuf_local(&b, local, sizeof local);
    PyObject *out = NULL;
    if (write_value(&b, v, resp3, proto) == 0)
        out = PyBytes_FromStringAndSize((const char *)b.b, b.len);
    wbuf_free(&b);
    return out;
}

/* bind(Raw, Map, SetReply, encode_reference) */
static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const slots_spec specs[4] = {SLOTS_OF(Raw), SLOTS_OF(Map), SLOTS_OF(SetReply),
                                 KEPT(&reference)};
    int form = nargs == 4 && PyType_Check(args[0]) && PyType_Check(args[1]) &&
               PyType_Check(args[2]) && PyCallable_Check(args[3]);
    if (bind_args(form, "bind(Raw, Map, SetReply, encode_reference)", args, specs, 4) < 0)
        return NULL;
    if (two == NULL && (two = PyLong_FromLong(2)) == NULL)
        return NULL;
    bound = 1;
    Py_RETURN_NONE;
}

SLOTS_MODULE(_encode, "A reply value's wire bytes (pyrepl/resp/writer.py's encode), in C.",
    FASTCALL("encode", encode,
             "encode(value, proto=2) -> bytes: the RESP2 or RESP3 bytes of a reply value "
             "(pyrepl/resp/writer.py's encode_reference, which it calls for the rare kinds)."),
    FASTCALL("bind", bind, "bind(Raw, Map, SetReply, encode_reference): the reply types whose "
             "slots encode() reads, and the Python reference it hands other values to."))
