/* The C API of pyrepl.keyspace._lpzset for the other extensions (pyrepl/commands/_hot.c):
 * a PyCapsule named LPZSET_CAPSULE at pyrepl.keyspace._lpzset._C_API holding an LPZSet_CAPI.
 *
 *     LPZSet_CAPI *lz = PyCapsule_Import(LPZSET_CAPSULE, 0);
 *     if (PyObject_TypeCheck(obj, lz->type)) r = lz->set_score_fit(obj, member, score);
 *
 * set_score_fit sets member's (bytes) score in a ListpackZIndex (zset.py's ListpackZSet):
 * 0 unchanged, 1 added, 2 updated; -1 with an exception; -2 (nothing changed) when a new
 * member would pass zset-max-listpack-entries / -value (as zset.configure set them): then the
 * caller's Python handler makes the set a skiplist first, as zsetAdd.
 *
 * scan calls visit(ctx, score, member) on each pair with lo <= score < hi, in order, the
 * member a bytes object made for the call (borrowed by visit, which must not change the
 * set); it stops at the first visit that returns non-zero and returns that (-1: an
 * exception set), else 0: _bisect and _range's walk without a (score, member) tuple a pair,
 * as _zbtree.h's scan of a B+tree (pyrepl/commands/_geo.c). */
#ifndef PYREPL_LPZSET_H
#define PYREPL_LPZSET_H

#include <Python.h>

#define LPZSET_CAPSULE "pyrepl.keyspace._lpzset._C_API"
#define LPZSET_CAPI_VERSION 2

typedef int (*lpzset_visit)(void *ctx, double score, PyObject *member);

typedef struct {
    int version;
    PyTypeObject *type;
    int (*set_score_fit)(PyObject *zset, PyObject *member, double score);
    int (*scan)(PyObject *zset, double lo, double hi, lpzset_visit visit, void *ctx);
} LPZSet_CAPI;

#endif
