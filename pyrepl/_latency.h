/* A command's latency histogram (pyrepl/core/stats.py's LatencyHistogram) recorded from C:
 * ``buckets``, a bytearray of LATENCY_BUCKETS unsigned 64-bit counts, bucket latency_index(v)
 * counting the values whose lowest equivalent (their 8 leading bits) is that bucket's, as
 * Redis's hdr_histogram of 2 significant digits over 1 ns .. 1 s counts them. The Python
 * reference is LatencyHistogram.index and add; tests/unit/test_latency_histogram.py holds them equal. */
#ifndef PYREPL_LATENCY_H
#define PYREPL_LATENCY_H

#include <Python.h>
#include <stdint.h>

#define LATENCY_BUCKETS (256 + 22 * 128)
#define LATENCY_MAX_NS 1000000000LL

/* LatencyHistogram.index: v clamped to 1 ns .. 1 s (as Redis records it); under 256 its own
   bucket, then 128 a power of two. */
static inline Py_ssize_t
latency_index(long long value)
{
    unsigned long long v = value < 1 ? 1 : value > LATENCY_MAX_NS ? (unsigned long long)LATENCY_MAX_NS
                                                                     : (unsigned long long)value;
    if (v < 256)
        return (Py_ssize_t)v;
    int bits = 64 - __builtin_clzll(v);
    return 256 + (Py_ssize_t)(bits - 9) * 128 + (Py_ssize_t)(v >> (bits - 8)) - 128;
}

/* hist.add(value) where hist.buckets is made (1); 0 when it is not (the first record: the
   Python's add makes it). */
static inline int
latency_add_quick(PyObject *buckets, long long value)
{
    if (!PyByteArray_CheckExact(buckets) ||
            PyByteArray_GET_SIZE(buckets) != (Py_ssize_t)(LATENCY_BUCKETS * sizeof(uint64_t)))
        return 0;
    ((uint64_t *)PyByteArray_AS_STRING(buckets))[latency_index(value)]++;
    return 1;
}

/* hist.add(value): in place, else the method (the bytearray made); 0, or -1 with an error. */
static inline int
latency_add(PyObject *hist, PyObject *buckets, long long value)
{
    if (latency_add_quick(buckets, value))
        return 0;
    PyObject *v = PyLong_FromLongLong(value);
    PyObject *r = v == NULL ? NULL : PyObject_CallMethod(hist, "add", "O", v);
    Py_XDECREF(v);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

#endif
