/* The C API of pyrepl.keyspace._strtab for the other extensions (pyrepl/commands/_hot.c):
 * a PyCapsule named STRTAB_CAPSULE at pyrepl.keyspace._strtab._C_API holding a StrTab_CAPI.
 *
 *     StrTab_CAPI *st = PyCapsule_Import(STRTAB_CAPSULE, 0);
 *     if (Py_IS_TYPE(obj, st->dict_type)) created = st->dict_set(obj, field, value);
 *
 * dict_set stores value (bytes) at field (bytes) of a StrDict: 1 when the field is new, 0 when
 * its value was replaced, -1 with an exception (TypeError for anything but bytes). dict_get is
 * the value at field (borrowed), NULL when absent (no exception). set_add adds member (bytes)
 * to a StrSet: 1 when it is new, 0 when it was there, -1 with an exception. set_pop_random
 * removes a member at random from a StrSet and answers it (a new reference), as
 * random_member() then remove() do with the same pick of the module's generator; NULL with
 * KeyError when it is empty. */
#ifndef PYREPL_STRTAB_H
#define PYREPL_STRTAB_H

#include <Python.h>

#define STRTAB_CAPSULE "pyrepl.keyspace._strtab._C_API"
#define STRTAB_CAPI_VERSION 3

typedef struct {
    int version;
    PyTypeObject *set_type, *dict_type;
    int (*dict_set)(PyObject *d, PyObject *field, PyObject *value);
    PyObject *(*dict_get)(PyObject *d, PyObject *field);
    int (*set_add)(PyObject *s, PyObject *member);
    PyObject *(*set_pop_random)(PyObject *s);
} StrTab_CAPI;

#endif
