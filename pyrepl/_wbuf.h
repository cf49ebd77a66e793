/* pyrepl/_wbuf.h: a growable byte buffer (PyMem), for C that writes a run of bytes before it
   makes one object of them: the RDB codec's runs (pyrepl/rdb/_codec.c) and EXEC's replies
   (pyrepl/commands/_hot.c). Start it as {NULL, 0, 0} (or with wbuf_init, for a first size
   other than reserve's); PyMem_Free(w.b) when done. */
#ifndef PYREPL_WBUF_H
#define PYREPL_WBUF_H
#include <stdint.h>
#include <string.h>

typedef struct {
    uint8_t *b;
    Py_ssize_t len, cap;
} wbuf;

/* Room for more bytes after len (the capacity doubled from 4096 until they fit); -1 with
   MemoryError. */
static int
reserve(wbuf *w, Py_ssize_t more)
{
    if (w->len + more <= w->cap)
        return 0;
    Py_ssize_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + more)
        cap *= 2;
    uint8_t *nb = PyMem_Realloc(w->b, (size_t)cap);
    if (nb == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->b = nb;
    w->cap = cap;
    return 0;
}

/* An empty buffer of cap bytes; -1 with MemoryError. */
static inline int
wbuf_init(wbuf *w, Py_ssize_t cap)
{
    w->len = 0;
    w->cap = cap;
    if ((w->b = PyMem_Malloc((size_t)cap)) != NULL)
        return 0;
    w->cap = 0;
    PyErr_NoMemory();
    return -1;
}

/* The n bytes at s appended; -1 with MemoryError. */
static inline int
wbuf_put(wbuf *w, const void *s, Py_ssize_t n)
{
    if (reserve(w, n) < 0)
        return -1;
    memcpy(w->b + w->len, s, (size_t)n);
    w->len += n;
    return 0;
}
#endif
