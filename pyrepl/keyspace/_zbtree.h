/* The C API of pyrepl.keyspace._zbtree for the other extensions (pyrepl/commands/_geo.c): a
 * PyCapsule named ZBTREE_CAPSULE at pyrepl.keyspace._zbtree._C_API holding a ZBTree_CAPI.
 *
 *     ZBTree_CAPI *zb = PyCapsule_Import(ZBTREE_CAPSULE, 0);
 *     if (PyObject_TypeCheck(obj, zb->type)) r = zb->scan(obj, lo, hi, visit, ctx);
 *
 * scan calls visit(ctx, score, member) on each item with lo <= score < hi, in ascending order,
 * the member borrowed (visit must not change the set); it stops at the first visit that
 * returns non-zero and returns that (-1: visit set an exception), else 0. What
 * ZIndex._bisect and ZIndex._range give, without a tuple an item. */
#ifndef PYREPL_ZBTREE_H
#define PYREPL_ZBTREE_H

#include <Python.h>

#define ZBTREE_CAPSULE "pyrepl.keyspace._zbtree._C_API"
#define ZBTREE_CAPI_VERSION 1

typedef int (*zbtree_visit)(void *ctx, double score, PyObject *member);

typedef struct {
    int version;
    PyTypeObject *type;
    int (*scan)(PyObject *zindex, double lo, double hi, zbtree_visit visit, void *ctx);
} ZBTree_CAPI;

#endif
