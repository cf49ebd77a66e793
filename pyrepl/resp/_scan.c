/* pyrepl.resp._scan: the request reader's fast path in C.

   scan(buf, pos, window, maxcount, maxbulk, base) -> (requests, ends)

   Parses the *canonical* multibulk requests that lie complete in buf from pos on: "*N\r\n"
   with N in 1..maxcount written as Redis's string2ll reads it (no sign, no leading zero),
   then N times "$L\r\n", L bytes and "\r\n", with L in 0..maxbulk written the same way.
   It stops, returning what it has, at the first byte that is anything else: an inline
   request, "*0", "*-1", a sign or a leading zero, a header line not ended by CRLF, data not
   followed by CRLF, a limit exceeded, or an incomplete request. It starts no request at or
   past pos + window (a request that starts before may run past it).

   requests: one list of bytes per request (its arguments); ends: where each ends, as
   base + its end offset in buf. Every input this accepts is read the same way by Redis's
   processMultibulkBuffer and by the pure RespReader (pyrepl/resp/reader.py): whatever it
   does not accept is left to that reader, which gives Redis's answer, errors included. So
   the only property to test is that scan's requests and ends are the pure reader's
   (tests/unit/test_resp_scan.py, hypothesis).

   Command names: a request's first argument equal to the last one scanned (a pipeline of one
   command, or a client repeating it) is that same bytes object, not a new one: it costs no
   allocation, compares by identity in the run selection, and keeps its cached hash for the
   command lookup. Names of up to SCAN_NAME_MAX bytes are remembered.

   Memory: nothing is allocated for a request before the bytes that would hold its N
   arguments (6 bytes each at least, "$0\r\n\r\n") have arrived, so a header such as
   "*2000000000" costs nothing. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* A canonical decimal of at most 18 digits ending at the CR of a CRLF, starting at p (< end).
   Returns the value and sets *next past the LF, or -1 (not canonical, or not complete). */
static long long
read_number(const char *p, const char *end, const char **next)
{
    const char *start = p;
    long long v;
    if (p >= end)
        return -1;
    if (*p == '0') {
        p++;
        v = 0;
    } else {
        if (*p < '1' || *p > '9')
            return -1;
        v = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (p - start >= 18)
                return -1;
            v = v * 10 + (*p - '0');
            p++;
        }
    }
    if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
        return -1;
    *next = p + 2;
    return v;
}

#define SCAN_NAME_MAX 32
static PyObject *last_name;     /* the last first argument scanned (bytes), or NULL */

/* The first argument of a request: last_name again when it is equal. New reference. */
static PyObject *
name_object(const char *d, Py_ssize_t len)
{
    PyObject *name = last_name;
    if (name != NULL && PyBytes_GET_SIZE(name) == len &&
            memcmp(PyBytes_AS_STRING(name), d, (size_t)len) == 0) {
        Py_INCREF(name);
        return name;
    }
    name = PyBytes_FromStringAndSize(d, len);
    if (name != NULL && len <= SCAN_NAME_MAX) {
        Py_INCREF(name);
        Py_XSETREF(last_name, name);
    }
    return name;
}

static PyObject *
scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t pos, window, maxcount, maxbulk;
    long long base;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "scan(buf, pos, window, maxcount, maxbulk, base) takes 6 arguments");
        return NULL;
    }
    pos = PyLong_AsSsize_t(args[1]);
    window = PyLong_AsSsize_t(args[2]);
    maxcount = PyLong_AsSsize_t(args[3]);
    maxbulk = PyLong_AsSsize_t(args[4]);
    base = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *reqs = PyList_New(0), *ends = PyList_New(0), *result = NULL;
    if (reqs == NULL || ends == NULL)
        goto done;
    if (pos < 0 || pos > view.len) {
        PyErr_SetString(PyExc_ValueError, "pos out of range");
        goto done;
    }
    const char *buf = view.buf, *end = buf + view.len, *p = buf + pos;
    const char *stop = (window >= 0 && window < view.len - pos) ? p + window : end;
    while (p < stop && *p == '*') {
        const char *q;
        long long n = read_number(p + 1, end, &q);
        if (n <= 0 || n > maxcount || (end - q) / 6 < n)
            break;
        PyObject *argv = PyList_New((Py_ssize_t)n);
        if (argv == NULL)
            goto done;
        Py_ssize_t i;
        for (i = 0; i < n; i++) {
            const char *d;
            long long len;
            if (q >= end || *q != '$')
                break;
            len = read_number(q + 1, end, &d);
            if (len < 0 || len > maxbulk || end - d < len + 2 || d[len] != '\r' ||
                    d[len + 1] != '\n')
                break;
            PyObject *arg = i ? PyBytes_FromStringAndSize(d, (Py_ssize_t)len)
                              : name_object(d, (Py_ssize_t)len);
            if (arg == NULL) {
                Py_DECREF(argv);
                goto done;
            }
            PyList_SET_ITEM(argv, i, arg);
            q = d + len + 2;
        }
        if (i < n) {   /* not canonical or not complete: the pure reader's request */
            Py_DECREF(argv);
            break;
        }
        PyObject *e = PyLong_FromLongLong(base + (long long)(q - buf));
        if (e == NULL || PyList_Append(ends, e) < 0 || PyList_Append(reqs, argv) < 0) {
            Py_XDECREF(e);
            Py_DECREF(argv);
            goto done;
        }
        Py_DECREF(e);
        Py_DECREF(argv);
        p = q;
    }
    result = PyTuple_Pack(2, reqs, ends);
done:
    PyBuffer_Release(&view);
    Py_XDECREF(reqs);
    Py_XDECREF(ends);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(buf, pos, window, maxcount, maxbulk, base) -> (requests, ends): the canonical "
     "multibulk requests complete in buf from pos on (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pyrepl.resp._scan",
    "The request reader's fast path: canonical multibulk requests, parsed in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    return PyModule_Create(&module);
}
