/* The C API of pyrepl.keyspace._lphash for the other extensions (pyrepl/commands/_hot.c):
 * a PyCapsule named LPHASH_CAPSULE at pyrepl.keyspace._lphash._C_API holding an LPHash_CAPI.
 *
 *     LPHash_CAPI *lh = PyCapsule_Import(LPHASH_CAPSULE, 0);
 *     if (Py_IS_TYPE(obj, lh->type)) created = lh->set_fit(obj, field, value);
 *
 * set_fit stores value (bytes) at field (bytes) of a ListpackHash: 1 when the field is new, 0
 * when its value was replaced, -1 with an exception, -2 (nothing changed) when the hash would
 * no longer fit a listpack (hash-max-listpack-entries / -value as lphash.configure set them):
 * then the caller's Python handler converts it. */
#ifndef PYREPL_LPHASH_H
#define PYREPL_LPHASH_H

#include <Python.h>

#define LPHASH_CAPSULE "pyrepl.keyspace._lphash._C_API"
#define LPHASH_CAPI_VERSION 1

typedef struct {
    int version;
    PyTypeObject *type;
    int (*set_fit)(PyObject *hash, PyObject *field, PyObject *value);
} LPHash_CAPI;

#endif
