/* The cluster step of the C fast paths (pyrepl/_dispatch.c: one request; pyrepl/_plainrun.c:
   a pipelined run): where a command's keys hash, against the table of the slots this node
   serves with no check (pyrepl/cluster/served.py: byte S is 1 iff the cluster is OK and S is
   myself's, neither migrating nor importing). getNodeByQuery (pyrepl/cluster/redirect.py)
   answers "here" for such a command with nothing else done; any other case is the Python's
   (MOVED, ASK, TRYAGAIN, CROSSSLOT, CLUSTERDOWN). Its Python reference is
   pyrepl/plainrun.py's served_slot. */

#ifndef PYREPL_SERVED_H
#define PYREPL_SERVED_H

#include "keyspace/_hashslot.h"

#define SERVED_NOT (-2)   /* not served here without the Python's look */

/* A small int slot's value, negative ones included; 0 with *bad set otherwise. */
static inline long long
served_int(PyObject *v, int *bad)
{
    if (v == NULL || !PyLong_CheckExact(v)) {
        *bad = 1;
        return 0;
    }
#ifdef SLOT_INT_DIGITS   /* (3.11's layout, _slots.h: a key spec's ints have one digit) */
    Py_ssize_t size = Py_SIZE(v);
    if (size >= -1 && size <= 1) {
        long long d = size ? (long long)((PyLongObject *)v)->ob_digit[0] : 0;
        return size < 0 ? -d : d;
    }
#endif
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        *bad = 1;
    }
    return x;
}

/* The slot of argv's keys by the command's key spec (its Command's first_key, last_key,
   step and keys_fn slots: Command.key_positions), when every key hashes to one slot whose
   byte in table (CLUSTER_SLOTS bytes) is 1; -1 for a command without keys (served anywhere,
   as the redirect does); SERVED_NOT for anything else (a key of another slot, keys found by
   a function, a key that is not bytes). */
static inline int
served_slot(const char *table, PyObject *argv, PyObject *first_key, PyObject *last_key,
            PyObject *step, PyObject *keys_fn)
{
    if (keys_fn != Py_None)
        return SERVED_NOT;
    int bad = 0;
    long long first = served_int(first_key, &bad), last = served_int(last_key, &bad),
              by = served_int(step, &bad);
    if (bad || first < 0 || by < 0)
        return SERVED_NOT;
    if (first == 0)
        return -1;
    long long n = PyList_GET_SIZE(argv);
    if (last < 0)
        last += n;
    if (last > n - 1)
        last = n - 1;
    if (by == 0)
        by = 1;
    int slot = -1;
    for (long long i = first; i <= last; i += by) {
        PyObject *k = PyList_GET_ITEM(argv, i);
        if (!PyBytes_CheckExact(k))
            return SERVED_NOT;
        int s = (int)key_hash_slot(PyBytes_AS_STRING(k), (size_t)PyBytes_GET_SIZE(k));
        if (slot < 0) {
            if (!table[s])
                return SERVED_NOT;
            slot = s;
        } else if (s != slot) {
            return SERVED_NOT;
        }
    }
    return slot;
}

/* The table, when o is it (a bytearray of CLUSTER_SLOTS bytes), else NULL (o NULL too:
   an unset slot). */
static inline const char *
served_table(PyObject *o)
{
    return o != NULL && PyByteArray_CheckExact(o) && PyByteArray_GET_SIZE(o) == CLUSTER_SLOTS
        ? PyByteArray_AS_STRING(o) : NULL;
}

#endif
