/* What dict.update does with an iterable of (key, value) pairs, for the C mappings of the
 * keyspace (_ktable.c's KeyTable, _strtab.c's StrDict): each element made a sequence of two
 * and stored by `set`; `what` names the type in the errors, as dict's name it. 0, or -1 with
 * an exception (set's, or a TypeError / ValueError for an element that is not a pair). */
#ifndef PYREPL_PAIRS_H
#define PYREPL_PAIRS_H

#include <Python.h>

static int update_from_pairs(void *t, PyObject *pairs, int (*set)(void *, PyObject *, PyObject *),
                             const char *what)
{
    char msg[96];
    PyOS_snprintf(msg, sizeof msg, "cannot convert %s update sequence element to a sequence",
                  what);
    PyObject *it = PyObject_GetIter(pairs), *item;
    if (it == NULL)
        return -1;
    while ((item = PyIter_Next(it)) != NULL) {
        PyObject *fast = PySequence_Fast(item, msg);
        Py_DECREF(item);
        if (fast == NULL)
            goto fail;
        if (PySequence_Fast_GET_SIZE(fast) != 2) {
            PyErr_Format(PyExc_ValueError, "%s update sequence element has length %zd; "
                         "2 is required", what, PySequence_Fast_GET_SIZE(fast));
            Py_DECREF(fast);
            goto fail;
        }
        int rc = set(t, PySequence_Fast_GET_ITEM(fast, 0), PySequence_Fast_GET_ITEM(fast, 1));
        Py_DECREF(fast);
        if (rc < 0)
            goto fail;
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
fail:
    Py_DECREF(it);
    return -1;
}

#endif
