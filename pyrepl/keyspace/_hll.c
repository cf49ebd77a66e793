/* pyrepl.keyspace._hll: HyperLogLog's per-element work (pyrepl/keyspace/hll.py), in C.

   PFADD hashes each element (MurmurHash64A) and raises one 6-bit register. In Python the hash
   alone is ~60 multiplications on big ints, and a dense HLL's 12 KB were copied twice a call
   (to a bytearray and back to bytes): PFADD ran at 0.15x Redis at -P16 (bench/RESULTS.md,
   issue 39). ``pat_len`` is hll.pat_len; ``dense_add`` is hll.add over a dense HLL for
   every element, with one copy of the string, made at the first register that grows (none
   when nothing changes, nor when its caller vouches that nobody else holds the string: then
   it grows in place, as Redis's). tests/unit/test_hll_native.py checks both against hll.py. */

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

SLOTS_MODULE(_hll, "HyperLogLog's per-element work (pyrepl/keyspace/hll.py), in C.",
    FASTCALL("pat_len", pat_len,
             "pat_len(element) -> (index, count): hll.pat_len (hllPatLen)."),
    FASTCALL("dense_add", dense_add,
             "dense_add(hll, elements, start[, in_place]) -> (updated, new or None): hll.add "
             "of each element over a dense HLL, with one copy (none in place)."))
