/* pyrepl/_wbuf.h: a growable byte buffer (PyMem), for C that writes a run of bytes before it
   makes one object of them: the RDB codec's runs (pyrepl/rdb/_codec.c), a stream entry
   (pyrepl/keyspace/_streamlp.c), a reply's wire bytes (pyrepl/resp/_encode.c) and EXEC's
   replies (pyrepl/commands/_hot.c); with RESP's header and bulk string written into it.

   Start it as {NULL, 0, 0} (the first growth takes 4096 bytes) or with wbuf_local (on an area
   of the caller's, its stack: no allocation until the bytes outgrow it); wbuf_free when done. */
#ifndef PYREPL_WBUF_H
#define PYREPL_WBUF_H
#include <stdint.h>
#include <string.h>

#include "_slots.h"   /* resp_header */

typedef struct {
    uint8_t *b;
    Py_ssize_t len, cap;
    uint8_t *local;   /* the caller's area b starts on (never freed), or NULL */
} wbuf;

/* Room for more bytes after len: the capacity doubled (from 4096) until they fit, moved off
   the caller's area the first time; -1 with MemoryError. */
static int
wbuf_grow(wbuf *w, Py_ssize_t more)
{
    Py_ssize_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + more)
        cap *= 2;
    uint8_t *nb;
    if (w->b != NULL && w->b == w->local) {
        nb = PyMem_Malloc((size_t)cap);
        if (nb != NULL)
            memcpy(nb, w->b, (size_t)w->len);
    } else {
        nb = PyMem_Realloc(w->b, (size_t)cap);
    }
    if (nb == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->b = nb;
    w->cap = cap;
    return 0;
}

/* Room for more bytes after len; -1 with MemoryError. */
static inline int
wbuf_reserve(wbuf *w, Py_ssize_t more)
{
    if (w->cap - w->len < more && wbuf_grow(w, more) < 0)
        return -1;
    return 0;
}

/* An empty buffer on the caller's cap bytes at area. */
static inline void
wbuf_local(wbuf *w, uint8_t *area, Py_ssize_t cap)
{
    w->b = w->local = area;
    w->len = 0;
    w->cap = cap;
}

/* What the buffer allocated, released. */
static inline void
wbuf_free(wbuf *w)
{
    if (w->b != w->local)
        PyMem_Free(w->b);
    w->b = NULL;
    w->len = w->cap = 0;
}

/* The n bytes at s appended; -1 with MemoryError. */
static inline int
wbuf_put(wbuf *w, const void *s, Py_ssize_t n)
{
    if (wbuf_reserve(w, n) < 0)
        return -1;
    memcpy(w->b + w->len, s, (size_t)n);
    w->len += n;
    return 0;
}

/* A RESP header or integer appended: mark, n in decimal, CRLF ("%c%lld\r\n"). */
static inline int
wbuf_header(wbuf *w, char mark, long long n)
{
    if (wbuf_reserve(w, 24) < 0)
        return -1;
    w->len += resp_header((char *)w->b + w->len, mark, n);
    return 0;
}

/* A RESP bulk string of the n bytes at s appended ("$<n>\r\n<s>\r\n"). */
static inline int
wbuf_bulk(wbuf *w, const void *s, Py_ssize_t n)
{
    /* (wbuf_reserve's test written out: 1 instruction a string less, measured in encode) */
    if (w->cap - w->len < n + 26 && wbuf_grow(w, n + 26) < 0)
        return -1;
    char *at = (char *)w->b + w->len;
    w->len += resp_bulk_at(at, s, n);
    return 0;
}
#endif
