/* pyrepl._plainrun: the per-request loops of a run of plain commands (pyrepl/plainrun.py),
   in C.

   A pipelining client's run of one command (redis-benchmark -P16: sixteen SETs a read) is
   checked once and applied in one pass; what is left per request is a loop over the
   requests, which costs more in Python's interpreter than the dict operation it makes
   (bench/RESULTS.md, "Runs counted in C"). These loops make no decision of their own:
   ``run_length`` counts what plainrun.select would, ``store_pairs`` and ``lookup_strings`` are
   ``d[r[1]] = r[2]`` and ``d.get(r[1])`` for each request r (SET's and GET's whole runs,
   pyrepl/commands/strings.py), ``bulk_replies`` the wire bytes of a run's bulk-string and nil
   replies in one object (pyrepl/resp/writer.py's encode_replies). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* run_length(rest, name, min_args, max_args) -> int

   How many requests, taken from the end of rest (a list of requests, last first, as a
   reader's queue holds them), have ``name`` as their first argument (the same object, or
   equal bytes) and between min_args and max_args arguments: the run of one command that a
   pipelining client sent behind a request (pyrepl/plainrun.py's select). It stops at the
   first that does not qualify, so the work is proportional to the run found. */
static PyObject *
run_length(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[0]) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "run_length(rest: list, name: bytes, min_args, max_args)");
        return NULL;
    }
    PyObject *rest = args[0], *name = args[1];
    Py_ssize_t lo = PyLong_AsSsize_t(args[2]), hi = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred())
        return NULL;
    const char *nd = PyBytes_AS_STRING(name);
    Py_ssize_t nlen = PyBytes_GET_SIZE(name), n = PyList_GET_SIZE(rest), k = 0;
    while (k < n) {
        PyObject *r = PyList_GET_ITEM(rest, n - 1 - k);
        if (!PyList_Check(r))
            break;
        Py_ssize_t m = PyList_GET_SIZE(r);
        if (m < 1 || m < lo || m > hi)
            break;
        PyObject *a = PyList_GET_ITEM(r, 0);
        if (a != name && !(PyBytes_Check(a) && PyBytes_GET_SIZE(a) == nlen &&
                           memcmp(PyBytes_AS_STRING(a), nd, (size_t)nlen) == 0))
            break;
        k++;
    }
    return PyLong_FromSsize_t(k);
}

/* store_pairs(d, reqs) -> bool

   ``for r in reqs: d[r[1]] = r[2]`` when every request is a list of exactly three (a plain
   SET); False, with nothing stored, when one is not. */
static PyObject *
store_pairs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "store_pairs(d: dict, reqs: list)");
        return NULL;
    }
    PyObject *d = args[0], *reqs = args[1];
    Py_ssize_t n = PyList_GET_SIZE(reqs), i;
    for (i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(reqs, i);
        if (!PyList_Check(r) || PyList_GET_SIZE(r) != 3)
            Py_RETURN_FALSE;
    }
    for (i = 0; i < n && i < PyList_GET_SIZE(reqs); i++) {
        PyObject *r = PyList_GET_ITEM(reqs, i);
        if (!PyList_Check(r) || PyList_GET_SIZE(r) != 3)   /* (a key's __eq__ changed reqs) */
            return PyErr_Format(PyExc_RuntimeError, "store_pairs: reqs changed");
        if (PyDict_SetItem(d, PyList_GET_ITEM(r, 1), PyList_GET_ITEM(r, 2)) < 0)
            return NULL;
    }
    Py_RETURN_TRUE;
}

/* lookup_strings(d, reqs) -> list or None

   ``[d.get(r[1]) for r in reqs]`` when every value found is bytes (a plain GET's), else None;
   every request must be a list of two or more. */
static PyObject *
lookup_strings(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "lookup_strings(d: dict, reqs: list)");
        return NULL;
    }
    PyObject *d = args[0], *reqs = args[1];
    Py_ssize_t n = PyList_GET_SIZE(reqs), i;
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(reqs, i);
        if (!PyList_Check(r) || PyList_GET_SIZE(r) < 2) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_ValueError, "lookup_strings: a request without a key");
            return NULL;
        }
        PyObject *v = PyDict_GetItemWithError(d, PyList_GET_ITEM(r, 1));
        if (v == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(out);
                return NULL;
            }
            v = Py_None;
        } else if (!PyBytes_CheckExact(v)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        Py_INCREF(v);
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

/* The decimal digits of v >= 0. */
static int
ndigits(Py_ssize_t v)
{
    int k = 1;
    while (v >= 10) {
        v /= 10;
        k++;
    }
    return k;
}

/* bulk_replies(replies, nil) -> bytes or None

   The wire bytes of a run's replies when each is bytes (a bulk string: "$<len>\r\n<bytes>\r\n")
   or None (``nil``: RESP2's "$-1\r\n" or RESP3's "_\r\n"), in one bytes object; None when one
   is anything else. What pyrepl/resp/writer.py's encode writes for each, joined. */
static PyObject *
bulk_replies(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0]) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "bulk_replies(replies: list, nil: bytes)");
        return NULL;
    }
    PyObject *replies = args[0], *nil = args[1];
    Py_ssize_t n = PyList_GET_SIZE(replies), i, size = 0;
    Py_ssize_t nil_len = PyBytes_GET_SIZE(nil);
    for (i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(replies, i);
        if (r == Py_None) {
            size += nil_len;
        } else if (PyBytes_CheckExact(r)) {
            Py_ssize_t len = PyBytes_GET_SIZE(r);
            /* "$" len "\r\n" data "\r\n" */
            size += 1 + ndigits(len) + 2 + len + 2;
        } else {
            Py_RETURN_NONE;
        }
        if (size < 0) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out);
    for (i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(replies, i);
        if (r == Py_None) {
            memcpy(w, PyBytes_AS_STRING(nil), (size_t)nil_len);
            w += nil_len;
        } else {
            Py_ssize_t len = PyBytes_GET_SIZE(r);
            int k = ndigits(len);
            Py_ssize_t v = len;
            *w = '$';
            for (int j = k; j > 0; j--) {
                w[j] = (char)('0' + v % 10);
                v /= 10;
            }
            w += 1 + k;
            *w++ = '\r';
            *w++ = '\n';
            memcpy(w, PyBytes_AS_STRING(r), (size_t)len);
            w += len;
            *w++ = '\r';
            *w++ = '\n';
        }
    }
    return out;
}

static PyMethodDef methods[] = {
    {"run_length", (PyCFunction)(void (*)(void))run_length, METH_FASTCALL,
     "run_length(rest, name, min_args, max_args) -> int: how many requests at the end of "
     "rest (last first) are name's with an argument count in [min_args, max_args]."},
    {"store_pairs", (PyCFunction)(void (*)(void))store_pairs, METH_FASTCALL,
     "store_pairs(d, reqs) -> bool: d[r[1]] = r[2] for each request r when all are lists "
     "of three; else False and nothing stored."},
    {"lookup_strings", (PyCFunction)(void (*)(void))lookup_strings, METH_FASTCALL,
     "lookup_strings(d, reqs) -> list or None: d.get(r[1]) for each request r, when every "
     "value found is bytes; else None."},
    {"bulk_replies", (PyCFunction)(void (*)(void))bulk_replies, METH_FASTCALL,
     "bulk_replies(replies, nil) -> bytes or None: the wire bytes of replies that are all "
     "bytes (bulk strings) or None (nil); else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pyrepl._plainrun",
    "The per-request loops of a run of plain commands, in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__plainrun(void)
{
    return PyModule_Create(&module);
}
