/* The C API of pyrepl.keyspace._lplist for the other extensions (pyrepl/commands/_hot.c):
 * a PyCapsule named LPLIST_CAPSULE at pyrepl.keyspace._lplist._C_API holding an LPList_CAPI.
 *
 *     LPList_CAPI *ll = PyCapsule_Import(LPLIST_CAPSULE, 0);
 *     if (Py_IS_TYPE(obj, ll->type)) len = ll->push_fit(obj, element, left);
 *
 * push_fit pushes element (bytes) at the head (left) or the tail of a ListpackList and answers
 * its new length; -1 with an exception; -2 (nothing changed) when the list would no longer fit
 * one quicklist node (list-max-listpack-size, as lplist.configure set it): then the caller's
 * Python handler makes it a deque. */
#ifndef PYREPL_LPLIST_H
#define PYREPL_LPLIST_H

#include <Python.h>

#define LPLIST_CAPSULE "pyrepl.keyspace._lplist._C_API"
#define LPLIST_CAPI_VERSION 1

typedef struct {
    int version;
    PyTypeObject *type;
    Py_ssize_t (*push_fit)(PyObject *list, PyObject *element, int left);
} LPList_CAPI;

#endif
