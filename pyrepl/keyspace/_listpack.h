/* Listpacks (Redis's listpack.c) as pyrepl's C code reads and writes them: one entry read
 * (next_item, item_bytes), the canonical-integer test lpAppend makes (canonical_int), one entry
 * encoded as lpAppend encodes it (lp_encode_int, lp_encode_str). Shared by _streamlp.c (stream
 * nodes) and _lphash.c (small hashes); pyrepl/keyspace/listpack.py is the Python reference.
 *
 * Layout: <u32 total-bytes><u16 count><entry>...<0xFF>; an entry is <encoding+data><backlen>,
 * backlen (1-5 bytes) the size of encoding+data. */
#ifndef PYREPL_LISTPACK_H
#define PYREPL_LISTPACK_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define LP_HDR 6
/* the most an entry of a string of n bytes takes: 5 bytes of encoding, 5 of backlen */
#define LP_ENTRY_MAX(n) ((n) + 10)

typedef struct {
    int is_int;
    int64_t v;                  /* an integer entry's value */
    const uint8_t *s;           /* a string entry's bytes */
    Py_ssize_t slen;
    Py_ssize_t start;           /* the entry's offset in the listpack */
} item_t;

/* The entry at *p (before `last`, the terminator's offset) into *it; *p moves past it.
 * 0, or -1 when the entry is malformed or runs past the end. */
static inline int next_item(const uint8_t *lp, Py_ssize_t *p, Py_ssize_t last, item_t *it)
{
    Py_ssize_t q = *p, size;
    uint8_t b = lp[q];
    it->start = q;
    it->is_int = 1;
    if (b < 0x80) {
        it->v = b;
        size = 1;
    } else if (b < 0xC0) {
        it->is_int = 0;
        size = 1 + (b & 0x3F);
        it->s = lp + q + 1;
        it->slen = size - 1;
    } else if (b < 0xE0) {
        if (q + 1 >= last) return -1;
        int64_t v = ((int64_t)(b & 0x1F) << 8) | lp[q + 1];
        it->v = v >= 4096 ? v - 8192 : v;
        size = 2;
    } else if (b < 0xF0) {
        if (q + 1 >= last) return -1;
        it->is_int = 0;
        size = 2 + ((((Py_ssize_t)b & 0x0F) << 8) | lp[q + 1]);
        it->s = lp + q + 2;
        it->slen = size - 2;
    } else if (b == 0xF0) {
        if (q + 5 > last) return -1;
        it->is_int = 0;
        uint32_t n = (uint32_t)lp[q + 1] | ((uint32_t)lp[q + 2] << 8) |
            ((uint32_t)lp[q + 3] << 16) | ((uint32_t)lp[q + 4] << 24);
        size = 5 + (Py_ssize_t)n;
        it->s = lp + q + 5;
        it->slen = (Py_ssize_t)n;
    } else if (b == 0xF1) {
        if (q + 3 > last) return -1;
        it->v = (int16_t)((uint16_t)lp[q + 1] | ((uint16_t)lp[q + 2] << 8));
        size = 3;
    } else if (b == 0xF2) {
        if (q + 4 > last) return -1;
        int32_t v = (int32_t)((uint32_t)lp[q + 1] | ((uint32_t)lp[q + 2] << 8) |
                              ((uint32_t)lp[q + 3] << 16));
        it->v = v >= (1 << 23) ? v - (1 << 24) : v;
        size = 4;
    } else if (b == 0xF3) {
        if (q + 5 > last) return -1;
        it->v = (int32_t)((uint32_t)lp[q + 1] | ((uint32_t)lp[q + 2] << 8) |
                          ((uint32_t)lp[q + 3] << 16) | ((uint32_t)lp[q + 4] << 24));
        size = 5;
    } else if (b == 0xF4) {
        if (q + 9 > last) return -1;
        uint64_t u = 0;
        for (int i = 8; i >= 1; i--) u = (u << 8) | lp[q + i];
        it->v = (int64_t)u;
        size = 9;
    } else {
        return -1;
    }
    if (size <= 127) q += size + 1;
    else if (size < 16383) q += size + 2;
    else if (size < 2097151) q += size + 3;
    else if (size < 268435455) q += size + 4;
    else q += size + 5;
    if (q > last) return -1;
    *p = q;
    return 0;
}

/* v's decimal form at buf (room for 21 bytes, no NUL written): what snprintf's "%lld" writes,
 * at a tenth of its ~700 instructions; its length. */
static inline int lp_ll_text(char *buf, int64_t v)
{
    char digits[20];
    int k = 0, at = 0;
    uint64_t u = v < 0 ? 0ULL - (uint64_t)v : (uint64_t)v;
    do {
        digits[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        buf[at++] = '-';
    while (k)
        buf[at++] = digits[--k];
    return at;
}

/* An entry as the bytes the reference makes of it (an integer as its decimal form). */
static inline PyObject *item_bytes(const item_t *it)
{
    if (it->is_int) {
        char buf[24];
        int n = lp_ll_text(buf, (int64_t)it->v);
        return PyBytes_FromStringAndSize(buf, n);
    }
    return PyBytes_FromStringAndSize((const char *)it->s, it->slen);
}

/* canonical_int (listpack.py): the int64 a string is the canonical decimal form of (no '+', no
 * leading zeros, not "-0", at most 20 characters). 1 and *out, or 0. */
static inline int canonical_int(const uint8_t *s, Py_ssize_t n, int64_t *out)
{
    if (n == 0 || n > 20) return 0;
    int neg = 0;
    if (s[0] == '-') {
        neg = 1;
        s++;
        n--;
        if (n == 0) return 0;
    }
    if (s[0] == '0') {
        if (n == 1 && !neg) { *out = 0; return 1; }
        return 0;
    }
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        uint64_t d = s[i] - '0';
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return 0;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)v;
    }
    return 1;
}

/* The backlen of an entry whose encoding+data is `size` bytes, written at o; its length. */
static inline Py_ssize_t lp_put_backlen(uint8_t *o, Py_ssize_t size)
{
    if (size <= 127) {
        o[0] = (uint8_t)size;
        return 1;
    } else if (size < 16383) {
        o[0] = (uint8_t)(size >> 7);
        o[1] = (uint8_t)((size & 127) | 128);
        return 2;
    } else if (size < 2097151) {
        o[0] = (uint8_t)(size >> 14);
        o[1] = (uint8_t)(((size >> 7) & 127) | 128);
        o[2] = (uint8_t)((size & 127) | 128);
        return 3;
    } else if (size < 268435455) {
        o[0] = (uint8_t)(size >> 21);
        o[1] = (uint8_t)(((size >> 14) & 127) | 128);
        o[2] = (uint8_t)(((size >> 7) & 127) | 128);
        o[3] = (uint8_t)((size & 127) | 128);
        return 4;
    }
    o[0] = (uint8_t)(size >> 28);
    o[1] = (uint8_t)(((size >> 21) & 127) | 128);
    o[2] = (uint8_t)(((size >> 14) & 127) | 128);
    o[3] = (uint8_t)(((size >> 7) & 127) | 128);
    o[4] = (uint8_t)((size & 127) | 128);
    return 5;
}

/* An integer entry written at o (room for 14 bytes); its whole size, backlen included. */
static inline Py_ssize_t lp_encode_int(uint8_t *o, int64_t v)
{
    Py_ssize_t size;
    if (v >= 0 && v <= 127) {
        o[0] = (uint8_t)v;
        size = 1;
    } else if (v >= -4096 && v <= 4095) {
        uint64_t u = (uint64_t)v & 0x1FFF;
        o[0] = (uint8_t)(0xC0 | (u >> 8));
        o[1] = (uint8_t)(u & 0xFF);
        size = 2;
    } else if (v >= -32768 && v <= 32767) {
        uint64_t u = (uint64_t)v & 0xFFFF;
        o[0] = 0xF1;
        o[1] = (uint8_t)(u & 0xFF);
        o[2] = (uint8_t)(u >> 8);
        size = 3;
    } else if (v >= -(1 << 23) && v < (1 << 23)) {
        uint64_t u = (uint64_t)v & 0xFFFFFF;
        o[0] = 0xF2;
        o[1] = (uint8_t)(u & 0xFF);
        o[2] = (uint8_t)((u >> 8) & 0xFF);
        o[3] = (uint8_t)(u >> 16);
        size = 4;
    } else if (v >= -((int64_t)1 << 31) && v < ((int64_t)1 << 31)) {
        uint64_t u = (uint64_t)v & 0xFFFFFFFF;
        o[0] = 0xF3;
        for (int i = 0; i < 4; i++) o[1 + i] = (uint8_t)(u >> (8 * i));
        size = 5;
    } else {
        uint64_t u = (uint64_t)v;
        o[0] = 0xF4;
        for (int i = 0; i < 8; i++) o[1 + i] = (uint8_t)(u >> (8 * i));
        size = 9;
    }
    return size + lp_put_backlen(o + size, size);
}

/* The bytes an integer entry takes (its encoding and backlen), as lp_encode_int writes it:
   what a stream node's lpBytes counts for its live and deleted counters. */
static inline Py_ssize_t lp_int_size(int64_t v)
{
    uint8_t scratch[16];
    return lp_encode_int(scratch, v);
}

/* The entry lpAppend makes of the n bytes at s (an integer when they are one's canonical
 * form), written at o (room for LP_ENTRY_MAX(n)); its whole size, backlen included. */
static inline Py_ssize_t lp_encode_str(uint8_t *o, const uint8_t *s, Py_ssize_t n)
{
    int64_t v;
    if (n <= 20 && canonical_int(s, n, &v))
        return lp_encode_int(o, v);
    Py_ssize_t size;
    if (n < 64) {
        o[0] = (uint8_t)(0x80 | n);
        size = 1 + n;
    } else if (n < 4096) {
        o[0] = (uint8_t)(0xE0 | (n >> 8));
        o[1] = (uint8_t)(n & 0xFF);
        size = 2 + n;
    } else {
        o[0] = 0xF0;
        for (int i = 0; i < 4; i++) o[1 + i] = (uint8_t)((uint64_t)n >> (8 * i));
        size = 5 + n;
    }
    memcpy(o + (size - n), s, n);
    return size + lp_put_backlen(o + size, size);
}

/* ------------------------------------------------- a listpack kept in one PyMem block, edited */

static inline uint32_t lp_total(const uint8_t *lp)
{
    return (uint32_t)lp[0] | ((uint32_t)lp[1] << 8) | ((uint32_t)lp[2] << 16) |
        ((uint32_t)lp[3] << 24);
}

static inline void lp_set_total(uint8_t *lp, Py_ssize_t total)
{
    lp[0] = (uint8_t)total;
    lp[1] = (uint8_t)(total >> 8);
    lp[2] = (uint8_t)(total >> 16);
    lp[3] = (uint8_t)(total >> 24);
}

/* the header's count: the entries, or 65535 (unknown) from there on, as lpLength writes it */
static inline void lp_set_count(uint8_t *lp, Py_ssize_t entries)
{
    unsigned c = entries < 65535 ? (unsigned)entries : 65535;
    lp[4] = (uint8_t)c;
    lp[5] = (uint8_t)(c >> 8);
}

/* An empty listpack (PyMem), or NULL with MemoryError. */
static inline uint8_t *lp_new(void)
{
    uint8_t *lp = PyMem_Malloc(LP_HDR + 1);
    if (lp == NULL) { PyErr_NoMemory(); return NULL; }
    lp_set_total(lp, LP_HDR + 1);
    lp_set_count(lp, 0);
    lp[LP_HDR] = 0xFF;
    return lp;
}

/* Replace the `oldlen` bytes at `pos` of *lpp with room for `newlen`: the tail moves, the block
 * is resized to the new total, which the header gets (the count is the caller's). 0, or -1
 * with an exception. */
static inline int lp_splice(uint8_t **lpp, Py_ssize_t pos, Py_ssize_t oldlen, Py_ssize_t newlen)
{
    uint8_t *lp = *lpp;
    Py_ssize_t total = lp_total(lp), ntotal = total - oldlen + newlen;
    if (ntotal > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "listpack over 4 GB");
        return -1;
    }
    if (newlen > oldlen) {
        lp = PyMem_Realloc(lp, ntotal);
        if (lp == NULL) { PyErr_NoMemory(); return -1; }
        memmove(lp + pos + newlen, lp + pos + oldlen, total - pos - oldlen);
    } else if (newlen < oldlen) {
        memmove(lp + pos + newlen, lp + pos + oldlen, total - pos - oldlen);
        uint8_t *s = PyMem_Realloc(lp, ntotal);
        if (s != NULL) lp = s;                 /* (a failed shrink keeps the larger block) */
    }
    *lpp = lp;
    lp_set_total(lp, ntotal);
    return 0;
}

/* The start of the entry that ends at `end` (an entry's end: the next one's start, or the
 * terminator's offset), read from its backlen as lpPrev does. */
static inline Py_ssize_t lp_prev(const uint8_t *lp, Py_ssize_t end)
{
    Py_ssize_t p = end - 1, size = 0, n = 0;
    int shift = 0;
    for (;;) {
        size |= (Py_ssize_t)(lp[p] & 127) << shift;
        n++;
        if (!(lp[p] & 128)) break;
        shift += 7;
        p--;
    }
    return end - n - size;
}

/* Replace the `oldlen` bytes at `pos` of *lpp with the entry lpAppend makes of the n bytes at s
 * (oldlen 0: insert it there). Its size, or -1 with an exception. */
static inline Py_ssize_t lp_put(uint8_t **lpp, Py_ssize_t pos, Py_ssize_t oldlen,
                                const uint8_t *s, Py_ssize_t n)
{
    uint8_t small[96], *enc = small;
    if (LP_ENTRY_MAX(n) > (Py_ssize_t)sizeof small &&
            (enc = PyMem_Malloc(LP_ENTRY_MAX(n))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t len = lp_encode_str(enc, s, n);
    int r = lp_splice(lpp, pos, oldlen, len);
    if (r == 0) memcpy(*lpp + pos, enc, len);
    if (enc != small) PyMem_Free(enc);
    return r < 0 ? -1 : len;
}

/* lp_put of a bytes object */
static inline Py_ssize_t lp_put_bytes(uint8_t **lpp, Py_ssize_t pos, Py_ssize_t oldlen,
                                      PyObject *b)
{
    return lp_put(lpp, pos, oldlen, (const uint8_t *)PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b));
}

/* A module of one type (`type`, named `name`) and, when `capi` is given, its C API capsule
 * `capsule` at _C_API: the PyInit of the listpack types. */
static inline PyObject *lp_module(PyModuleDef *def, PyTypeObject *type, const char *name,
                                  void *capi, const char *capsule)
{
    if (PyType_Ready(type) < 0) return NULL;
    PyObject *m = PyModule_Create(def);
    if (m == NULL) return NULL;
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        Py_DECREF(m);
        return NULL;
    }
    if (capi != NULL) {
        PyObject *cap = PyCapsule_New(capi, capsule, NULL);
        if (cap == NULL || PyModule_AddObject(m, "_C_API", cap) < 0) {
            Py_XDECREF(cap);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}

#endif
