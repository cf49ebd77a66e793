/* The C API of pyrepl.keyspace._lpzset for the other extensions (pyrepl/commands/_hot.c):
 * a PyCapsule named LPZSET_CAPSULE at pyrepl.keyspace._lpzset._C_API holding an LPZSet_CAPI.
 *
 *     LPZSet_CAPI *lz = PyCapsule_Import(LPZSET_CAPSULE, 0);
 *     if (PyObject_TypeCheck(obj, lz->type)) r = lz->set_score_fit(obj, member, score);
 *
 * set_score_fit sets member's (bytes) score in a ListpackZIndex (zset.py's ListpackZSet):
 * 0 unchanged, 1 added, 2 updated; -1 with an exception; -2 (nothing changed) when a new
 * member would pass zset-max-listpack-entries / -value (as zset.configure set them): then the
 * caller's Python handler makes the set a skiplist first, as zsetAdd. */
#ifndef PYREPL_LPZSET_H
#define PYREPL_LPZSET_H

#include <Python.h>

#define LPZSET_CAPSULE "pyrepl.keyspace._lpzset._C_API"
#define LPZSET_CAPI_VERSION 1

typedef struct {
    int version;
    PyTypeObject *type;
    int (*set_score_fit)(PyObject *zset, PyObject *member, double score);
} LPZSet_CAPI;

#endif
