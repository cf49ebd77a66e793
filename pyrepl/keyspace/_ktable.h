/* The C API of pyrepl.keyspace._ktable for the other extensions (pyrepl/commands/_hot.c):
 * a PyCapsule named KTABLE_CAPSULE at pyrepl.keyspace._ktable._C_API holding a KTable_CAPI.
 *
 *     KTable_CAPI *kt = PyCapsule_Import(KTABLE_CAPSULE, 0);
 *     if (Py_IS_TYPE(obj, kt->type)) v = kt->get(obj, key);
 *
 * get and peek answer a borrowed reference or NULL, with an exception set only on an error
 * (a key's hash or comparison raised); get touches the key's age (lookupKey), peek does not.
 * set stores (a new key gets its initial age, an existing one is touched): 0, or -1 with an
 * exception. contains: 1, 0 or -1. len: the number of keys. */
#ifndef PYREPL_KTABLE_H
#define PYREPL_KTABLE_H

#include <Python.h>

#define KTABLE_CAPSULE "pyrepl.keyspace._ktable._C_API"
#define KTABLE_CAPI_VERSION 1

typedef struct {
    int version;
    PyTypeObject *type;
    PyObject *(*get)(PyObject *table, PyObject *key);
    PyObject *(*peek)(PyObject *table, PyObject *key);
    int (*set)(PyObject *table, PyObject *key, PyObject *value);
    Py_ssize_t (*len)(PyObject *table);
    int (*contains)(PyObject *table, PyObject *key);
} KTable_CAPI;

#endif
