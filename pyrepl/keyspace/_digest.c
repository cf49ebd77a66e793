/* pyrepl.keyspace._digest: DEBUG DIGEST's per-element work (pyrepl/keyspace/digest.py), in C.

   The digest is two SHA1s per element (debug.c's mixDigest: SHA1(d xor SHA1(x))), four for a
   hash field or a sorted-set member. Through hashlib each SHA1 of a few bytes is a Python call,
   a bytes object and int conversions for the xor: ~1.6 us a mix, minutes for the 256 MB streams
   dataset of bench/bench_bigsync.py, during which a replica sends no ACK and its master drops
   it after repl-timeout. Here the same steps run over a whole value in one call, with a plain
   SHA1 (FIPS 180-4, the one debug.c uses is the same algorithm): ``mix`` (a list's elements),
   ``xor_each`` (a set's members), ``xor_pairs`` (a hash's fields, a sorted set's members, a
   field with a TTL marked) and ``mix_entries`` (a stream node's live entries). digest.py keeps
   each one's Python reference; tests/unit/test_digest_native.py holds them equal. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MODULE_NAME "pyrepl.keyspace._digest"
#include "../_slots.h"
#include "_streamid.h"

/* -- SHA1 ---------------------------------------------------------------------------------- */

#define ROL(x, n) (((x) << (n)) | ((x) >> (32 - (n))))

/* One 64-byte block into h: the 80 rounds unrolled over a 16-word window of the schedule
   (the loop form with an 80-word schedule ran ~3x slower). */
#define W(i) (w[(i) & 15] = ROL(w[((i) + 13) & 15] ^ w[((i) + 8) & 15] ^ w[((i) + 2) & 15] ^ \
                                w[(i) & 15], 1))
#define R0(v, x, y, z, u, i) u += ((x & (y ^ z)) ^ z) + w[i] + 0x5A827999u + ROL(v, 5); \
                             x = ROL(x, 30);
#define R1(v, x, y, z, u, i) u += ((x & (y ^ z)) ^ z) + W(i) + 0x5A827999u + ROL(v, 5); \
                             x = ROL(x, 30);
#define R2(v, x, y, z, u, i) u += (x ^ y ^ z) + W(i) + 0x6ED9EBA1u + ROL(v, 5); x = ROL(x, 30);
#define R3(v, x, y, z, u, i) u += (((x | y) & z) | (x & y)) + W(i) + 0x8F1BBCDCu + ROL(v, 5); \
                             x = ROL(x, 30);
#define R4(v, x, y, z, u, i) u += (x ^ y ^ z) + W(i) + 0xCA62C1D6u + ROL(v, 5); x = ROL(x, 30);
#define FIVE(R, i) R(a, b, c, d, e, (i)) R(e, a, b, c, d, (i) + 1) R(d, e, a, b, c, (i) + 2) \
                   R(c, d, e, a, b, (i) + 3) R(b, c, d, e, a, (i) + 4)

static void
sha1_block(uint32_t h[5], const unsigned char *p)
{
    uint32_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    FIVE(R0, 0) FIVE(R0, 5) FIVE(R0, 10)
    R0(a, b, c, d, e, 15) R1(e, a, b, c, d, 16) R1(d, e, a, b, c, 17) R1(c, d, e, a, b, 18)
    R1(b, c, d, e, a, 19)
    FIVE(R2, 20) FIVE(R2, 25) FIVE(R2, 30) FIVE(R2, 35)
    FIVE(R3, 40) FIVE(R3, 45) FIVE(R3, 50) FIVE(R3, 55)
    FIVE(R4, 60) FIVE(R4, 65) FIVE(R4, 70) FIVE(R4, 75)
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e;
}

/* out := SHA1(data[0:len]) */
static void
sha1(const unsigned char *data, size_t len, unsigned char out[20])
{
    uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
    size_t n = len;
    while (n >= 64) {
        sha1_block(h, data);
        data += 64;
        n -= 64;
    }
    unsigned char tail[128];
    memcpy(tail, data, n);
    tail[n] = 0x80;
    size_t total = n + 1 + 8 <= 64 ? 64 : 128;
    memset(tail + n + 1, 0, total - n - 1);
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[total - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha1_block(h, tail);
    if (total == 128)
        sha1_block(h, tail + 64);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (unsigned char)(h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(h[i] >> 8);
        out[4 * i + 3] = (unsigned char)h[i];
    }
}

/* debug.c's xorDigest(d, x): d ^= SHA1(x) */
static void
xor_digest(unsigned char d[20], const unsigned char *x, size_t len)
{
    unsigned char s[20];
    sha1(x, len, s);
    for (int i = 0; i < 20; i++)
        d[i] ^= s[i];
}

/* debug.c's mixDigest(d, x): d := SHA1(d ^ SHA1(x)) */
static void
mix_digest(unsigned char d[20], const unsigned char *x, size_t len)
{
    xor_digest(d, x, len);
    sha1(d, 20, d);
}

/* -- the Python side ----------------------------------------------------------------------- */

/* d := the 20 bytes of a bytes object; -1 with TypeError otherwise. */
static int
digest_arg(PyObject *o, unsigned char d[20], const char *fn)
{
    if (!PyBytes_Check(o) || PyBytes_GET_SIZE(o) != 20) {
        PyErr_Format(PyExc_TypeError, "%s: the digest is 20 bytes", fn);
        return -1;
    }
    memcpy(d, PyBytes_AS_STRING(o), 20);
    return 0;
}

/* f(d, x's bytes): a bytes object directly, anything else through the buffer protocol (what
   hashlib.sha1 accepts, so the reference's TypeError and this one fall on the same values). */
static int
apply(void (*f)(unsigned char *, const unsigned char *, size_t), unsigned char d[20],
      PyObject *x)
{
    if (PyBytes_Check(x)) {
        f(d, (const unsigned char *)PyBytes_AS_STRING(x), (size_t)PyBytes_GET_SIZE(x));
        return 0;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(x, &view, PyBUF_SIMPLE) < 0)
        return -1;
    f(d, (const unsigned char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return 0;
}

static PyObject *
each(PyObject *const *args, Py_ssize_t nargs, const char *usage,
     void (*f)(unsigned char *, const unsigned char *, size_t))
{
    unsigned char d[20];
    if (nargs != 2)
        return usage_error(usage);
    if (digest_arg(args[0], d, usage) < 0)
        return NULL;
    PyObject *it = PyObject_GetIter(args[1]);
    if (it == NULL)
        return NULL;
    PyObject *x;
    while ((x = PyIter_Next(it)) != NULL) {
        int r = apply(f, d, x);
        Py_DECREF(x);
        if (r < 0) {
            Py_DECREF(it);
            return NULL;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    return PyBytes_FromStringAndSize((const char *)d, 20);
}

static PyObject *
mix(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return each(args, nargs, "mix(digest, items)", mix_digest);
}

static PyObject *
xor_each(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return each(args, nargs, "xor_each(digest, items)", xor_digest);
}

/* The element digest of a pair, mix(mix(0, a), b), into e; b a number (a score) is "%.17g"
   of it. */
static int
pair_digest(PyObject *a, PyObject *b, unsigned char e[20])
{
    memset(e, 0, 20);
    if (apply(mix_digest, e, a) < 0)
        return -1;
    if (PyFloat_Check(b) || PyLong_Check(b)) {
        double score = PyFloat_AsDouble(b);
        if (score == -1.0 && PyErr_Occurred()) {   /* (an int past a double: what b"%g" says) */
            PyErr_SetString(PyExc_TypeError, "float argument required, not int");
            return -1;
        }
        char buf[64];
        int n = snprintf(buf, sizeof buf, "%.17g", score);
        mix_digest(e, (const unsigned char *)buf, (size_t)n);
        return 0;
    }
    return apply(mix_digest, e, b);
}

static const char xor_pairs_usage[] = "xor_pairs(digest, pairs, marked=None, mark=None)";

/* d ^= SHA1(the element digest of each (a, b) of pairs); for a in marked, the element digest
   is xored with mark (20 bytes) first: a hash field with a TTL in Redis 8. */
static PyObject *
xor_pairs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    unsigned char d[20], mark[20];
    if (nargs < 2 || nargs > 4)
        return usage_error(xor_pairs_usage);
    if (digest_arg(args[0], d, xor_pairs_usage) < 0)
        return NULL;
    PyObject *marked = nargs > 2 && args[2] != Py_None ? args[2] : NULL;
    if (marked != NULL && (nargs < 4 || digest_arg(args[3], mark, xor_pairs_usage) < 0)) {
        if (!PyErr_Occurred())
            usage_error(xor_pairs_usage);
        return NULL;
    }
    PyObject *it = PyObject_GetIter(args[1]);
    if (it == NULL)
        return NULL;
    PyObject *p;
    while ((p = PyIter_Next(it)) != NULL) {
        unsigned char e[20];
        int r = -1;
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 2)
            PyErr_SetString(PyExc_TypeError, "xor_pairs: the pairs are 2-tuples");
        else if (pair_digest(PyTuple_GET_ITEM(p, 0), PyTuple_GET_ITEM(p, 1), e) == 0) {
            r = 0;
            if (marked != NULL) {
                r = PySequence_Contains(marked, PyTuple_GET_ITEM(p, 0));
                if (r == 1)
                    for (int i = 0; i < 20; i++)
                        e[i] ^= mark[i];
            }
        }
        Py_DECREF(p);
        if (r < 0) {
            Py_DECREF(it);
            return NULL;
        }
        xor_digest(d, e, 20);
    }
    Py_DECREF(it);
    if (PyErr_Occurred())
        return NULL;
    return PyBytes_FromStringAndSize((const char *)d, 20);
}

static const char mix_entries_usage[] = "mix_entries(digest, ids, flags, fvs)";

/* A stream node's live entries mixed in order: each one's "<ms>.<seq>", then its fields and
   values. ids (ints: ms << 64 | seq), flags (ints, bit 0 = deleted) and fvs (lists of bytes)
   are an Entries' lists, of one length. */
static PyObject *
mix_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    unsigned char d[20];
    if (nargs != 4)
        return usage_error(mix_entries_usage);
    if (digest_arg(args[0], d, mix_entries_usage) < 0)
        return NULL;
    PyObject *ids = args[1], *flags = args[2], *fvs = args[3];
    if (!PyList_Check(ids) || !PyList_Check(flags) || !PyList_Check(fvs) ||
        PyList_GET_SIZE(flags) != PyList_GET_SIZE(ids) ||
        PyList_GET_SIZE(fvs) != PyList_GET_SIZE(ids))
        return usage_error("mix_entries: ids, flags and fvs are lists of one length");
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ids); i++) {
        long flag = PyLong_AsLong(PyList_GET_ITEM(flags, i));
        if (flag == -1 && PyErr_Occurred())
            return NULL;
        if (flag & 1)                                   /* STREAM_ITEM_FLAG_DELETED */
            continue;
        u128 id;
        if (stream_id_value(PyList_GET_ITEM(ids, i), &id) < 0)
            return NULL;
        uint64_t ms = (uint64_t)(id >> 64), seq = (uint64_t)id;
        char buf[48];
        int n = snprintf(buf, sizeof buf, "%llu.%llu", (unsigned long long)ms,
                         (unsigned long long)seq);
        mix_digest(d, (const unsigned char *)buf, (size_t)n);
        PyObject *fv = PyList_GET_ITEM(fvs, i);
        if (!PyList_Check(fv))
            return usage_error("mix_entries: an entry's fields and values are a list");
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(fv); j++)
            if (apply(mix_digest, d, PyList_GET_ITEM(fv, j)) < 0)
                return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)d, 20);
}

static PyObject *
sha1_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    unsigned char d[20];
    if (nargs != 1)
        return usage_error("sha1(data)");
    memset(d, 0, 20);
    if (apply(xor_digest, d, args[0]) < 0)
        return NULL;
    return PyBytes_FromStringAndSize((const char *)d, 20);
}

SLOTS_MODULE(_digest, "DEBUG DIGEST's per-element work (pyrepl/keyspace/digest.py), in C.",
    FASTCALL("mix", mix,
             "mix(digest, items) -> digest: mixDigest of each item in turn."),
    FASTCALL("xor_each", xor_each,
             "xor_each(digest, items) -> digest: xorDigest of each item."),
    FASTCALL("xor_pairs", xor_pairs,
             "xor_pairs(digest, pairs, marked=None, mark=None) -> digest: xorDigest of each "
             "pair's element digest, mix(mix(0, a), b) (a float b as %.17g), xored with mark "
             "first when a is in marked."),
    FASTCALL("mix_entries", mix_entries,
             "mix_entries(digest, ids, flags, fvs) -> digest: a stream node's live entries."),
    FASTCALL("sha1", sha1_py, "sha1(data) -> the 20 bytes of SHA1(data)."))
