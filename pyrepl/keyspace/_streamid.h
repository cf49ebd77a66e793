/* A stream entry ID in C: stream.py's int in [0, 2**128) (milliseconds in the high 64 bits,
   the sequence in the low ones) as a u128, read from and written back to Python, and its
   "ms-seq" text (stream.py's id_str). Shared by _streamlp.c (XRANGE's reply, XREADGROUP's
   history) and pyrepl/commands/_hot.c (XADD). */
#ifndef PYREPL_STREAMID_H
#define PYREPL_STREAMID_H

#include <Python.h>
#include <stdint.h>

typedef unsigned __int128 u128;

/* v (an int) as a u128: 0, or -1 with an exception (TypeError, OverflowError). */
static inline int
stream_id_value(PyObject *v, u128 *out)
{
    unsigned char le[16];
    if (!PyLong_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "a stream ID is an int");
        return -1;
    }
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && PyLong_SHIFT == 30
    /* CPython 3.11 keeps an int as Py_SIZE(v) digits of 30 bits, the sign in the size: an ID
       has at most five, read straight (_PyLong_AsByteArray was a third of an XREADGROUP's
       instructions); one of 128 bits or more, or negative, goes the API's way (its error) */
    Py_ssize_t size = Py_SIZE(v);
    if (size >= 0 && size <= 5) {
        const digit *d = ((PyLongObject *)v)->ob_digit;
        u128 x = 0;
        for (Py_ssize_t i = size - 1; i >= 0; i--)
            x = x << PyLong_SHIFT | d[i];
        if (size < 5 || d[4] < (1u << 8)) {   /* (5 digits: 150 bits, 128 of them allowed) */
            *out = x;
            return 0;
        }
    }
#endif
    if (_PyLong_AsByteArray((PyLongObject *)v, le, 16, 1, 0) < 0)
        return -1;
    u128 x = 0;
    for (int i = 15; i >= 0; i--)
        x = x << 8 | le[i];
    *out = x;
    return 0;
}

/* x as a Python int (new), NULL on an exception. */
static inline PyObject *
stream_id_int(u128 x)
{
    unsigned char le[16];
    for (int i = 0; i < 16; i++, x >>= 8)
        le[i] = (unsigned char)x;
    return _PyLong_FromByteArray(le, 16, 1, 0);
}

/* "ms-seq" (stream.py's id_str), new bytes; NULL on an exception. */
static inline PyObject *
stream_id_text(u128 id)
{
    char buf[48], *p = buf + sizeof buf;
    uint64_t part = (uint64_t)id;   /* the sequence, then the milliseconds */
    for (int k = 0; k < 2; k++) {
        do {
            *--p = (char)('0' + part % 10);
            part /= 10;
        } while (part);
        if (k == 0)
            *--p = '-';
        part = (uint64_t)(id >> 64);
    }
    return PyBytes_FromStringAndSize(p, buf + sizeof buf - p);
}

#endif
