/* pyrepl/resp/_names.h: command names as bytes objects made once (the request reader's
   pyrepl/resp/_scan.c, a script's redis.call in pyrepl/scripting/_luacall.c).

   name_object(d, len) hands out the bytes object it made for an equal name before, from a
   table of NAMES_KEPT indexed by a few of the name's bytes: no allocation, identity compares,
   and the hash kept for the command table's lookup. Two names that share a place replace
   each other, which costs only the bytes object the table would have saved. Each module that
   includes this has its own table. */
#ifndef PYREPL_NAMES_H
#define PYREPL_NAMES_H

#include <Python.h>
#include <string.h>

#define NAME_MAX_KEPT 32          /* longer names are not kept */
#define NAMES_KEPT 64             /* a power of two */
static PyObject *names_kept[NAMES_KEPT];

/* A name's place: its length and first, middle and last bytes (ASCII case folded) mixed. */
static inline unsigned
name_slot(const char *d, Py_ssize_t len)
{
    unsigned h = (unsigned)len * 0x9E3779B1u;
    if (len > 0)
        h ^= ((unsigned char)d[0] | 0x20u) * 0x85EBCA77u ^
             ((unsigned char)d[len / 2] | 0x20u) * 0xC2B2AE3Du ^
             ((unsigned char)d[len - 1] | 0x20u) * 0x27D4EB2Fu;
    return (h ^ (h >> 15)) & (NAMES_KEPT - 1);
}

/* The bytes d[0:len]: the object kept for an equal name, else a new one, then kept. New
   reference, NULL on failure (a MemoryError). */
static PyObject *
name_object(const char *d, Py_ssize_t len)
{
    if (len > NAME_MAX_KEPT)
        return PyBytes_FromStringAndSize(d, len);
    PyObject **slot = &names_kept[name_slot(d, len)], *name = *slot;
    if (name != NULL && PyBytes_GET_SIZE(name) == len &&
            memcmp(PyBytes_AS_STRING(name), d, (size_t)len) == 0)
        return Py_NewRef(name);
    name = PyBytes_FromStringAndSize(d, len);
    if (name != NULL)
        Py_XSETREF(*slot, Py_NewRef(name));
    return name;
}

#endif
