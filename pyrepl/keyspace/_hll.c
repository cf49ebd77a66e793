/* pyrepl.keyspace._hll: HyperLogLog's per-element work (pyrepl/keyspace/hll.py), in C.

   PFADD hashes each element (MurmurHash64A) and raises one 6-bit register. In Python the hash
   alone is ~60 multiplications on big ints, and a dense HLL's 12 KB were copied twice a call
   (to a bytearray and back to bytes): PFADD ran at 0.15x Redis at -P16 (bench/RESULTS.md,
   issue 39). ``pat_len`` is hll.pat_len; ``dense_add`` is hll.add over a dense HLL for
   every element, with one copy of the string, made at the first register that grows (none
   when nothing changes, nor when its caller vouches that nobody else holds the string: then
   it grows in place, as Redis's). ``sparse_set`` is hll.sparse_set's walk and change over a
   sparse HLL, in place. tests/unit/test_hll_native.py checks them against hll.py. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MODULE_NAME "pyrepl.keyspace._hll"
#include "../_slots.h"
#include <string.h>

#define HLL_P 14
#define HLL_Q (64 - HLL_P)
#define HLL_REGISTERS (1 << HLL_P)
#define HLL_P_MASK (HLL_REGISTERS - 1)
#define HLL_BITS 6
#define HLL_REGISTER_MAX ((1 << HLL_BITS) - 1)
#define HLL_HDR_SIZE 16
#define HLL_DENSE_SIZE (HLL_HDR_SIZE + (HLL_REGISTERS * HLL_BITS + 7) / 8)

/* Redis's MurmurHash64A (hyperloglog.c), endian neutral. */
static uint64_t
murmurhash64a(const unsigned char *data, Py_ssize_t len, uint64_t seed)
{
    const uint64_t m = 0xc6a4a7935bd1e995ULL;
    const int r = 47;
    uint64_t h = seed ^ ((uint64_t)len * m);
    const unsigned char *end = data + (len - (len & 7));
    while (data != end) {
        uint64_t k;
        memcpy(&k, data, 8);   /* (little endian here: x86-64, aarch64) */
#if PY_BIG_ENDIAN
        k = __builtin_bswap64(k);
#endif
        k *= m;
        k ^= k >> r;
        k *= m;
        h ^= k;
        h *= m;
        data += 8;
    }
    switch (len & 7) {
    case 7: h ^= (uint64_t)data[6] << 48; /* fall through */
    case 6: h ^= (uint64_t)data[5] << 40; /* fall through */
    case 5: h ^= (uint64_t)data[4] << 32; /* fall through */
    case 4: h ^= (uint64_t)data[3] << 24; /* fall through */
    case 3: h ^= (uint64_t)data[2] << 16; /* fall through */
    case 2: h ^= (uint64_t)data[1] << 8; /* fall through */
    case 1: h ^= (uint64_t)data[0];
            h *= m;
    }
    h ^= h >> r;
    h *= m;
    h ^= h >> r;
    return h;
}

/* hllPatLen: the register index and the count (the run of zeros after the index bits + 1). */
static void
pat_len_of(const unsigned char *data, Py_ssize_t len, long *index, int *count)
{
    uint64_t h = murmurhash64a(data, len, 0xadc83b19ULL);
    *index = (long)(h & HLL_P_MASK);
    h >>= HLL_P;
    h |= 1ULL << HLL_Q;
    *count = __builtin_ctzll(h) + 1;
}

static inline int
dense_get(const unsigned char *regs, long index)
{
    long byte = index * HLL_BITS / 8;
    int fb = index * HLL_BITS & 7;
    unsigned b0 = regs[byte], b1 = byte + 1 < (HLL_DENSE_SIZE - HLL_HDR_SIZE) ? regs[byte + 1] : 0;
    return (int)(((b0 >> fb) | (b1 << (8 - fb))) & HLL_REGISTER_MAX);
}

static inline void
dense_set(unsigned char *regs, long index, int value)
{
    long byte = index * HLL_BITS / 8;
    int fb = index * HLL_BITS & 7;
    regs[byte] = (unsigned char)((regs[byte] & ~(HLL_REGISTER_MAX << fb)) | (value << fb));
    if (byte + 1 < HLL_DENSE_SIZE - HLL_HDR_SIZE) {
        int fb8 = 8 - fb;
        regs[byte + 1] = (unsigned char)((regs[byte + 1] & ~(HLL_REGISTER_MAX >> fb8)) |
                                         (value >> fb8));
    }
}

/* pat_len(element: bytes) -> (index, count) */
static PyObject *
pat_len(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "pat_len(element: bytes)");
        return NULL;
    }
    long index;
    int count;
    pat_len_of((const unsigned char *)PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]),
               &index, &count);
    return Py_BuildValue("(li)", index, count);
}

/* Can a bytes object be changed in place here? Where its cached hash is known (CPython
   3.11's PyBytesObject): it is reset after the change. */
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define IN_PLACE 1
static void
forget_hash(PyObject *b)
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ((PyBytesObject *)b)->ob_shash = -1;
#pragma GCC diagnostic pop
}
#else
#define IN_PLACE 0
#endif

/* dense_add(hll: bytes, elements: list, start: int[, in_place]) -> (updated, bytes or None)

   hll.add of elements[start:] in turn over a dense HLL (its size and encoding byte checked
   here; the magic by the caller): how many registers grew, and the HLL with them grown and
   its cached cardinality marked stale, a new bytes object (None when none grew). With
   in_place true, the caller's word that nobody else holds hll (the keyspace's PFADD: its
   reference and the table's, pyrepl/commands/_hot.c), hll itself grows and is answered, as
   Redis's PFADD changes its string: no copy of the 12 KB. */
static PyObject *
dense_add(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 4 || !PyBytes_CheckExact(args[0]) || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "dense_add(hll: bytes, elements: list, start: int[, in_place])");
        return NULL;
    }
    int in_place = nargs == 4 ? PyObject_IsTrue(args[3]) : 0;
    if (in_place < 0)
        return NULL;
    PyObject *hll = args[0], *elements = args[1];
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    if (PyBytes_GET_SIZE(hll) != HLL_DENSE_SIZE || PyBytes_AS_STRING(hll)[4] != 0) {
        PyErr_SetString(PyExc_ValueError, "dense_add: not a dense HyperLogLog");
        return NULL;
    }
    PyObject *out = NULL;   /* the copy, made at the first register that grows (or hll) */
    const unsigned char *regs = (const unsigned char *)PyBytes_AS_STRING(hll) + HLL_HDR_SIZE;
    long updated = 0;
    for (Py_ssize_t i = start; i < PyList_GET_SIZE(elements); i++) {
        PyObject *e = PyList_GET_ITEM(elements, i);
        if (!PyBytes_Check(e)) {
            Py_XDECREF(out);
            PyErr_SetString(PyExc_TypeError, "dense_add: the elements are bytes");
            return NULL;
        }
        long index;
        int count;
        pat_len_of((const unsigned char *)PyBytes_AS_STRING(e), PyBytes_GET_SIZE(e), &index,
                   &count);
        if (count <= dense_get(regs, index))
            continue;
        if (out == NULL) {
            out = IN_PLACE && in_place ? Py_NewRef(hll)
                                       : PyBytes_FromStringAndSize(PyBytes_AS_STRING(hll),
                                                                   HLL_DENSE_SIZE);
            if (out == NULL)
                return NULL;
            regs = (const unsigned char *)PyBytes_AS_STRING(out) + HLL_HDR_SIZE;
        }
        dense_set((unsigned char *)regs, index, count);
        updated++;
    }
    if (out == NULL)
        return Py_BuildValue("(lO)", updated, Py_None);
    PyBytes_AS_STRING(out)[15] |= (char)0x80;   /* HLL_INVALIDATE_CACHE */
#if IN_PLACE
    if (out == hll)
        forget_hash(out);
#endif
    return Py_BuildValue("(lN)", updated, out);
}

/* -- the sparse form: hll.sparse_set (hllSparseSet) over a bytearray, in place ------------

   In Python the walk to the opcode that covers a register is a loop over every opcode before
   it: ~1 ms a PFADD once the sparse HLL nears hll-sparse-max-bytes (3,000 bytes), against
   Redis's ~5 µs (bench/RESULTS.md, issue 39). */
#define SP_KZERO 0   /* the opcodes' kinds */
#define SP_KXZERO 1
#define SP_KVAL 2
#define SP_ZERO_MAX_LEN 64
#define SP_VAL_MAX_LEN 4
#define SP_VAL_MAX_VALUE 32
#define SP_VAL(value, len) ((unsigned char)((((value) - 1) << 2 | ((len) - 1)) | 0x80))

/* The opcode at p (hll._op): its kind, the registers it covers, its value and its length;
   -1 for an XZERO cut short by the end. */
static int
sp_op(const unsigned char *h, Py_ssize_t p, Py_ssize_t end, int *kind, long *run, int *value,
      int *oplen)
{
    unsigned char b = h[p];
    if ((b & 0xC0) == 0) {
        *kind = SP_KZERO, *run = (b & 0x3F) + 1, *value = 0, *oplen = 1;
    } else if (b & 0x80) {
        *kind = SP_KVAL, *run = (b & 0x3) + 1, *value = ((b >> 2) & 0x1F) + 1, *oplen = 1;
    } else {
        if (p + 1 >= end)
            return -1;
        *kind = SP_KXZERO, *run = (((long)(b & 0x3F) << 8) | h[p + 1]) + 1, *value = 0;
        *oplen = 2;
    }
    return 0;
}

/* hll._zero_seq: a run of len zero registers as one ZERO or XZERO opcode, at out. */
static int
sp_zero_seq(unsigned char *out, long len)
{
    if (len > SP_ZERO_MAX_LEN) {
        out[0] = (unsigned char)(((len - 1) >> 8) | 0x40);
        out[1] = (unsigned char)((len - 1) & 0xFF);
        return 2;
    }
    out[0] = (unsigned char)(len - 1);
    return 1;
}

/* hll._merge_scan: adjacent VAL opcodes of one value merged, at most 5 opcodes from prev's
   (Redis's loop, so the bytes are Redis's), then the cached cardinality marked stale. */
static int
sp_merge_scan(PyObject *ba, Py_ssize_t prev)
{
    Py_ssize_t p = prev >= 0 ? prev : HLL_HDR_SIZE;
    int scanlen = 5;
    while (p < PyByteArray_GET_SIZE(ba) && scanlen > 0) {
        unsigned char *h = (unsigned char *)PyByteArray_AS_STRING(ba);
        Py_ssize_t len = PyByteArray_GET_SIZE(ba);
        scanlen--;
        unsigned char b = h[p];
        if ((b & 0xC0) == 0x40) {
            p += 2;
            continue;
        }
        if ((b & 0xC0) == 0) {
            p += 1;
            continue;
        }
        if (p + 1 < len && (h[p + 1] & 0x80)) {
            unsigned char nb = h[p + 1];
            int v1 = ((b >> 2) & 0x1F) + 1, v2 = ((nb >> 2) & 0x1F) + 1;
            if (v1 == v2) {
                int length = (b & 0x3) + 1 + (nb & 0x3) + 1;
                if (length <= SP_VAL_MAX_LEN) {
                    h[p + 1] = SP_VAL(v1, length);
                    memmove(h + p, h + p + 1, (size_t)(len - p - 1));    /* del hll[p] */
                    if (PyByteArray_Resize(ba, len - 1) < 0)
                        return -1;
                    continue;
                }
            }
        }
        p += 1;
    }
    PyByteArray_AS_STRING(ba)[15] |= (char)0x80;   /* HLL_INVALIDATE_CACHE */
    return 0;
}

/* sparse_set(hll: bytearray, index: int, count: int, max_bytes: int) -> 0, 1 or 2

   hll.sparse_set's walk and change, in place: 0 when the register already holds count or
   more, 1 when it was set (the opcodes split and merged as Redis's), 2 when the change would
   need a promotion to dense (count over 32, or the sparse form over max_bytes: the caller
   promotes, hll unchanged); ValueError for an invalid sparse form. */
static PyObject *
sparse_set(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyByteArray_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "sparse_set(hll: bytearray, index: int, count: int, max_bytes: int)");
        return NULL;
    }
    PyObject *ba = args[0];
    long index = PyLong_AsLong(args[1]), count = PyLong_AsLong(args[2]);
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred())
        return NULL;
    if (index < 0 || index >= HLL_REGISTERS || count < 1) {
        PyErr_SetString(PyExc_ValueError, "sparse_set: no such register or count");
        return NULL;
    }
    if (count > SP_VAL_MAX_VALUE)
        return PyLong_FromLong(2);
    unsigned char *h = (unsigned char *)PyByteArray_AS_STRING(ba);
    Py_ssize_t end = PyByteArray_GET_SIZE(ba), p = HLL_HDR_SIZE, prev = -1;
    long first = 0, span = 0;
    int kind = SP_KZERO, value = 0, oplen = 1;
    while (p < end) {
        if (sp_op(h, p, end, &kind, &span, &value, &oplen) < 0)
            goto corrupt;
        if (index <= first + span - 1)
            break;
        prev = p;
        p += oplen;
        first += span;
    }
    if (span == 0 || p >= end)
        goto corrupt;
    if (kind == SP_KVAL && value >= count)
        return PyLong_FromLong(0);
    if (kind != SP_KXZERO && span == 1) {   /* one register: the opcode becomes its VAL */
        h[p] = SP_VAL(count, 1);
        return sp_merge_scan(ba, prev) < 0 ? NULL : PyLong_FromLong(1);
    }
    long last = first + span - 1;
    unsigned char seq[5];
    int n = 0;
    if (kind != SP_KVAL) {
        if (index != first)
            n += sp_zero_seq(seq + n, index - first);
        seq[n++] = SP_VAL(count, 1);
        if (index != last)
            n += sp_zero_seq(seq + n, last - index);
    } else {
        if (index != first)
            seq[n++] = SP_VAL(value, index - first);
        seq[n++] = SP_VAL(count, 1);
        if (index != last)
            seq[n++] = SP_VAL(value, last - index);
    }
    Py_ssize_t delta = n - oplen;
    if (delta > 0 && end + delta > max_bytes)
        return PyLong_FromLong(2);
    Py_ssize_t tail = end - (p + oplen);
    if (delta > 0) {
        if (PyByteArray_Resize(ba, end + delta) < 0)
            return NULL;
        h = (unsigned char *)PyByteArray_AS_STRING(ba);
        memmove(h + p + n, h + p + oplen, (size_t)tail);
    } else if (delta < 0) {
        memmove(h + p + n, h + p + oplen, (size_t)tail);
        if (PyByteArray_Resize(ba, end + delta) < 0)
            return NULL;
        h = (unsigned char *)PyByteArray_AS_STRING(ba);
    }
    memcpy(h + p, seq, (size_t)n);
    return sp_merge_scan(ba, prev) < 0 ? NULL : PyLong_FromLong(1);
corrupt:
    PyErr_SetString(PyExc_ValueError, "sparse_set: an invalid sparse HyperLogLog");
    return NULL;
}

SLOTS_MODULE(_hll, "HyperLogLog's per-element work (pyrepl/keyspace/hll.py), in C.",
    FASTCALL("pat_len", pat_len,
             "pat_len(element) -> (index, count): hll.pat_len (hllPatLen)."),
    FASTCALL("dense_add", dense_add,
             "dense_add(hll, elements, start[, in_place]) -> (updated, new or None): hll.add "
             "of each element over a dense HLL, with one copy (none in place)."),
    FASTCALL("sparse_set", sparse_set,
             "sparse_set(hll, index, count, max_bytes) -> 0, 1 or 2: hll.sparse_set in place "
             "over a sparse bytearray (2: promote it to dense)."))
