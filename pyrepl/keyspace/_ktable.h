/* The C API of pyrepl.keyspace._ktable for the other extensions (pyrepl/commands/_hot.c):
 * a PyCapsule named KTABLE_CAPSULE at pyrepl.keyspace._ktable._C_API holding a KTable_CAPI.
 *
 *     KTable_CAPI *kt = PyCapsule_Import(KTABLE_CAPSULE, 0);
 *     if (Py_IS_TYPE(obj, kt->type)) v = kt->get(obj, key);
 *
 * get and peek answer a NEW reference or NULL, with an exception set only on an error (a key's
 * hash or comparison raised, or no memory to make a value): a string that is an integer is
 * kept in its entry and made again on each read (_ktable.c, "values"). get touches the key's
 * age (lookupKey), peek does not.
 * set stores (a new key gets its initial age, an existing one is touched): 0, or -1 with an
 * exception. contains: 1, 0 or -1. len: the number of keys.
 * peek_int (INCR's read, the age untouched): KT_INT and *out when the key holds a string that is
 * an integer kept in its entry (every canonical integer of 63 bits is), KT_ABSENT, KT_OTHER
 * (any other value), or -1 with an exception. set_int: set of the integer's text, without
 * making it: 0 or -1. del: the key and its value removed, 1; 0 when absent; -1 with an
 * exception.
 * prefetch (version 4): the first loads of up to 64 keys' lookups issued at once, so that their
 * waits for memory overlap (a pipelined run's keys, before the run looks them up); no other
 * effect: no age, no error, a key that is not bytes skipped. */
#ifndef PYREPL_KTABLE_H
#define PYREPL_KTABLE_H

#include <Python.h>

#define KTABLE_CAPSULE "pyrepl.keyspace._ktable._C_API"
#define KTABLE_CAPI_VERSION 4

enum { KT_ABSENT = 0, KT_INT = 1, KT_OTHER = 2 };

typedef struct {
    int version;
    PyTypeObject *type;
    PyObject *(*get)(PyObject *table, PyObject *key);
    PyObject *(*peek)(PyObject *table, PyObject *key);
    int (*set)(PyObject *table, PyObject *key, PyObject *value);
    Py_ssize_t (*len)(PyObject *table);
    int (*contains)(PyObject *table, PyObject *key);
    int (*peek_int)(PyObject *table, PyObject *key, long long *out);
    int (*set_int)(PyObject *table, PyObject *key, long long v);
    int (*del)(PyObject *table, PyObject *key);
    void (*prefetch)(PyObject *table, PyObject *const *keys, Py_ssize_t n);
} KTable_CAPI;

/* The C API for a module that can do without it (the prefetch): NULL, no error set, when it
   cannot be imported or is another version. */
static inline KTable_CAPI *
ktable_capi_or_null(void)
{
    KTable_CAPI *api = PyCapsule_Import(KTABLE_CAPSULE, 0);
    if (api == NULL || api->version != KTABLE_CAPI_VERSION) {
        PyErr_Clear();
        return NULL;
    }
    return api;
}

/* Prefetch of a pipelined read's keys (pyrepl/net/_serve.c, replication/replica/_streamread.c): ``keys[*m]`` takes request r's
   argv[1] (r a list of two or more arguments; the argument bytes of at most 1 KB, so that its
   hash, which the lookup will want anyway, costs little when it is no key), and at 64 keys
   they go to prefetch in the database's data and, when it holds any, its TTLs. */
#define KTABLE_PREFETCH_BATCH 64
#define KTABLE_PREFETCH_KEY_MAX 1024

static inline void
ktable_prefetch_flush(const KTable_CAPI *kt, PyObject *data, PyObject *expires,
                      PyObject **keys, int *m)
{
    if (*m == 0)
        return;
    kt->prefetch(data, keys, *m);
    if (kt->len(expires) != 0)
        kt->prefetch(expires, keys, *m);
    *m = 0;
}

static inline void
ktable_prefetch_request(const KTable_CAPI *kt, PyObject *data, PyObject *expires,
                        PyObject *r, PyObject **keys, int *m)
{
    if (!PyList_CheckExact(r) || PyList_GET_SIZE(r) < 2)
        return;
    PyObject *k = PyList_GET_ITEM(r, 1);
    if (!PyBytes_CheckExact(k) || PyBytes_GET_SIZE(k) > KTABLE_PREFETCH_KEY_MAX)
        return;
    keys[(*m)++] = k;
    if (*m == KTABLE_PREFETCH_BATCH)
        ktable_prefetch_flush(kt, data, expires, keys, m);
}

/* A pipelined read's keys prefetched (net/_serve.c for a client's, replication/replica/
   _streamread.c for the master's stream): ``argv`` the request in hand, then ``queue`` (the
   reader's, last first) from its end, the order they run in. data and expires: a database's
   two KeyTables (anything else: nothing done). */
static inline void
ktable_prefetch_read(const KTable_CAPI *kt, PyObject *data, PyObject *expires, PyObject *argv,
                     PyObject *queue)
{
    PyObject *keys[KTABLE_PREFETCH_BATCH];
    int m = 0;
    if (kt == NULL || Py_TYPE(data) != kt->type || Py_TYPE(expires) != kt->type ||
            !PyList_CheckExact(queue))
        return;
    ktable_prefetch_request(kt, data, expires, argv, keys, &m);
    for (Py_ssize_t i = PyList_GET_SIZE(queue) - 1; i >= 0; i--)
        ktable_prefetch_request(kt, data, expires, PyList_GET_ITEM(queue, i), keys, &m);
    ktable_prefetch_flush(kt, data, expires, keys, &m);
}

#endif
