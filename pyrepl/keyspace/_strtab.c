/* StrSet and StrDict: a set of bytes and a mapping of bytes to bytes laid out as CPython's
 * compact dict, with the keys (set members, hash fields) stored inline, to hold Redis's
 * hashtable-encoded sets and hashes in less memory than a Python set or dict of bytes objects.
 * pyrepl/keyspace/strtab.py is the Python reference and says what each operation answers;
 * tests/unit/test_strtab.py holds the two equal.
 *
 * Why C: a set of 10 short members as a Python set costs ~1,200 B (a 32-slot table and ten
 * 48-byte bytes objects), a hash of many fields ~138 B a field (a dict's entry and index, two
 * bytes objects), where Redis 7.0 costs 842 B and 83 B. Here a key is one PyMem block, a
 * length prefix and its bytes (a 7-byte member: one 16-byte pymalloc block, not a 48-byte
 * bytes object), and the table is a compact dict whose index is as narrow as its size allows.
 *
 * Keys: a blob of <len><bytes>, len one byte below 254, else 254 and a 4-byte length, or 255
 * and an 8-byte length (native order: blobs never leave the process). The entry keeps the low
 * 32 bits of the key's hash, which is exactly Python's hash of the bytes (PyObject_Hash of the
 * argument, cached by bytes objects), enough to reject a probe and to rebuild the index without
 * rehashing; a lookup compares hash32, then the length, then memcmp. Keys and values are exact
 * bytes (TypeError otherwise; a lookup of anything else finds nothing), so no comparison ever
 * runs Python code and the objects hold no reference cycles (no GC header).
 * Entries: StrSet {blob, hash32} (16 B), StrDict {blob, hash32, value} (24 B); the StrDict
 * value is the bytes object stored, answered as it is (no copy). Iteration makes new bytes
 * objects of the keys, in insertion order.
 *
 * Layout: `index`, 2**log2size slots of int8 (up to 128 slots), int16 (up to 32768) or int32
 * (CPython's dict widths): EMPTY, DUMMY or a position in `entries`, probed with the hash and
 * perturbation as dict does; `entries` dense in insertion order, a deletion leaving a hole
 * (blob NULL) and a DUMMY slot. Invariants:
 *     used <= nentries <= ecap <= USABLE(isize) = isize * 2 / 3,
 *     used <= fill <= USABLE(isize) < isize     (fill: the slots that are not EMPTY),
 *     nentries == 0 or entries[nentries - 1] is live (trailing holes are trimmed at once),
 * so a probe always ends, and pop() (the last entry) is O(1). As in _ktable.c the entries grow
 * by half (realloc), not sized for the whole index; when they are full they are compacted in
 * place if at least an eighth of them are holes, grown if the index has room, otherwise the
 * table is resized: the entries compacted into an index sized for 1.5x the live ones (twice
 * the slots when it was full of live entries, the same or fewer when dummies filled it).
 *
 * Shrinking, automatic: a deletion that leaves more than half the entries holes (16 entries or
 * more) or the index under an eighth full resizes the table for what is left (dict never does;
 * Redis's cron does it with tryResizeHashTables). Each such rebuild is paid for by the Omega(n)
 * deletions since the last one, so every operation stays amortised O(1), and the holes stay
 * under half, which is what makes a random pick O(1) expected. shrink() trims further on
 * demand: the entries exactly len, the smallest index that holds them (for a table that will
 * mostly be read: the cron, or after a bulk load).
 *
 * Randomness (random_member, sample, choices; SPOP, SRANDMEMBER, HRANDFIELD): a uniform pick is
 * a random position in entries, retried on a hole (O(1) expected: under half are holes), module
 * state seeded from the time and the pid, or by seed(n) (tests).
 *
 * `mods` counts the changes an iterator must notice (a key added or removed, a rebuild; not a
 * value replaced): an iterator that sees it move raises RuntimeError, as a dict's does (dict
 * misses an add and a remove between two steps: this does not).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "_strtab.h"
#include "_pairs.h"

#define IX_EMPTY (-1)
#define IX_DUMMY (-2)
#define MINLOG2 3                           /* 8 slots */
#define PERTURB_SHIFT 5
#define USABLE(n) (((n) << 1) / 3)
#define MAX_ENTRIES ((Py_ssize_t)1 << 30)   /* int32 positions and counts */
#define BLOB_U32 254
#define BLOB_U64 255
#define RANDOM_TRIES 64

/* -- the random generator (module state) -------------------------------------------------- */

static uint64_t rng;

static inline uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [0, n), n > 0 (n <= 2**31: the modulo's bias is under 2**-32) */
static inline Py_ssize_t uniform(Py_ssize_t n)
{
    return (Py_ssize_t)(splitmix64(&rng) % (uint64_t)n);
}

/* -- blobs: a key's bytes behind its length ----------------------------------------------- */

static inline size_t blob_header(size_t n)
{
    return n < BLOB_U32 ? 1 : n <= UINT32_MAX ? 5 : 9;
}

/* What a blob of `total` bytes costs, at pymalloc's 16-byte granularity (what __sizeof__
   counts). */
static inline Py_ssize_t blob_cost(size_t total)
{
    return (Py_ssize_t)((total + 15) & ~(size_t)15);
}

static inline size_t blob_len(const uint8_t *b, const uint8_t **data)
{
    uint8_t c = b[0];
    if (c < BLOB_U32) {
        *data = b + 1;
        return c;
    }
    if (c == BLOB_U32) {
        uint32_t v;
        memcpy(&v, b + 1, 4);
        *data = b + 5;
        return v;
    }
    uint64_t v;
    memcpy(&v, b + 1, 8);
    *data = b + 9;
    return (size_t)v;
}

static inline size_t blob_total(const uint8_t *b)
{
    const uint8_t *d;
    size_t n = blob_len(b, &d);
    return (size_t)(d - b) + n;
}

static uint8_t *blob_new(const char *s, size_t n)
{
    size_t hdr = blob_header(n);
    uint8_t *b = PyMem_Malloc(hdr + n);
    if (b == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    if (hdr == 1) {
        b[0] = (uint8_t)n;
    }
    else if (hdr == 5) {
        uint32_t v = (uint32_t)n;
        b[0] = BLOB_U32;
        memcpy(b + 1, &v, 4);
    }
    else {
        uint64_t v = (uint64_t)n;
        b[0] = BLOB_U64;
        memcpy(b + 1, &v, 8);
    }
    memcpy(b + hdr, s, n);
    return b;
}

static uint8_t *blob_dup(const uint8_t *src)
{
    size_t total = blob_total(src);
    uint8_t *b = PyMem_Malloc(total);
    if (b == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(b, src, total);
    return b;
}

static PyObject *blob_bytes(const uint8_t *b)
{
    const uint8_t *d;
    size_t n = blob_len(b, &d);
    return PyBytes_FromStringAndSize((const char *)d, (Py_ssize_t)n);
}

/* -- the table ------------------------------------------------------------------------------ */

typedef struct {
    uint8_t *blob;      /* NULL: a hole */
    uint32_t hash;      /* the key's hash, low 32 bits */
} sentry_t;             /* a StrSet's entry, and the head of a StrDict's */

typedef struct {
    uint8_t *blob;
    uint32_t hash;
    PyObject *value;    /* exact bytes (NULL in a hole) */
} dentry_t;

typedef struct {
    PyObject_HEAD
    char *entries;          /* ecap entries of `es` bytes */
    void *index;            /* 2**log2size slots of 1, 2 or 4 bytes */
    Py_ssize_t blob_bytes;  /* what the live keys' blobs cost (blob_cost) */
    uint32_t mods;
    int32_t used;           /* live entries */
    int32_t nentries;       /* entries[0, nentries) in use, holes included */
    int32_t ecap;           /* entries allocated */
    int32_t fill;           /* index slots not EMPTY: live and DUMMY */
    uint8_t log2size;
    uint8_t es;             /* sizeof(sentry_t) or sizeof(dentry_t) */
} Table;                    /* 64 bytes */

static PyTypeObject StrSetType, StrDictType, IterType;

#define ENTRY(t, i) ((sentry_t *)((t)->entries + (size_t)(i) * (t)->es))
#define DENTRY(t, i) ((dentry_t *)ENTRY(t, i))
#define IS_DICT(t) ((t)->es == sizeof(dentry_t))
#define ISIZE(t) ((Py_ssize_t)1 << (t)->log2size)
#define StrSet_Check(o) PyObject_TypeCheck(o, &StrSetType)
#define StrDict_Check(o) PyObject_TypeCheck(o, &StrDictType)
#define Table_Check(o) (StrSet_Check(o) || StrDict_Check(o))
#define TNAME(t) (IS_DICT(t) ? "StrDict" : "StrSet")

static inline uint32_t bytes_hash32(PyObject *b)
{
    return (uint32_t)(size_t)PyObject_Hash(b);     /* (exact bytes: cached, never fails) */
}

static inline int ix_width(int log2)
{
    return log2 < 8 ? 1 : log2 < 16 ? 2 : 4;
}

static inline Py_ssize_t ix_get(const void *index, int log2, size_t i)
{
    if (log2 < 8)
        return ((const int8_t *)index)[i];
    if (log2 < 16)
        return ((const int16_t *)index)[i];
    return ((const int32_t *)index)[i];
}

static inline void ix_set(void *index, int log2, size_t i, Py_ssize_t v)
{
    if (log2 < 8)
        ((int8_t *)index)[i] = (int8_t)v;
    else if (log2 < 16)
        ((int16_t *)index)[i] = (int16_t)v;
    else
        ((int32_t *)index)[i] = (int32_t)v;
}

static void *new_index(int log2)
{
    size_t bytes = ((size_t)1 << log2) * (size_t)ix_width(log2);
    void *ix = PyMem_Malloc(bytes);
    if (ix == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memset(ix, 0xff, bytes);                /* all IX_EMPTY, at every width */
    return ix;
}

/* The smallest index (log2, >= MINLOG2) with room for n entries. */
static int log2_for(Py_ssize_t n)
{
    int log2 = MINLOG2;
    while (USABLE((Py_ssize_t)1 << log2) < n)
        log2++;
    return log2;
}

/* The position in entries of the key (s, n) of hash h, -1 when absent; *slotp its slot. */
static Py_ssize_t find(Table *t, const char *s, size_t n, uint32_t h, Py_ssize_t *slotp)
{
    int log2 = t->log2size;
    const void *index = t->index;
    size_t mask = ((size_t)1 << log2) - 1, perturb = h, i = h & mask;
    for (;;) {
        Py_ssize_t ix = ix_get(index, log2, i);
        if (ix == IX_EMPTY)
            return -1;
        if (ix >= 0) {
            sentry_t *e = ENTRY(t, ix);
            if (e->hash == h) {
                const uint8_t *d;
                if (blob_len(e->blob, &d) == n && memcmp(d, s, n) == 0) {
                    if (slotp)
                        *slotp = (Py_ssize_t)i;
                    return ix;
                }
            }
        }
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + perturb + 1) & mask;
    }
}

static inline Py_ssize_t find_bytes(Table *t, PyObject *key, uint32_t h, Py_ssize_t *slotp)
{
    return find(t, PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key), h, slotp);
}

/* The position of entry ix in the index (it is there). */
static Py_ssize_t slot_of(Table *t, Py_ssize_t ix)
{
    int log2 = t->log2size;
    uint32_t h = ENTRY(t, ix)->hash;
    size_t mask = ((size_t)1 << log2) - 1, perturb = h, i = h & mask;
    while (ix_get(t->index, log2, i) != ix) {
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + perturb + 1) & mask;
    }
    return (Py_ssize_t)i;
}

/* The first EMPTY or DUMMY slot of the probe sequence of h. */
static inline size_t free_slot(const void *index, int log2, uint32_t h)
{
    size_t mask = ((size_t)1 << log2) - 1, perturb = h, i = h & mask;
    while (ix_get(index, log2, i) >= 0) {
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + perturb + 1) & mask;
    }
    return i;
}

/* Compact the entries (holes out, order kept) into room for new_ecap (>= used) and rebuild an
   index of 2**log2 slots (USABLE >= new_ecap). On MemoryError nothing has changed. */
static int rebuild(Table *t, int log2, Py_ssize_t new_ecap)
{
    void *index = new_index(log2);
    if (index == NULL)
        return -1;
    size_t es = t->es;
    char *entries = t->entries;
    if (new_ecap > t->ecap) {
        entries = PyMem_Realloc(entries, (size_t)new_ecap * es);
        if (entries == NULL) {
            PyMem_Free(index);
            PyErr_NoMemory();
            return -1;
        }
        t->entries = entries;
        t->ecap = (int32_t)new_ecap;
    }
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        sentry_t *e = ENTRY(t, i);
        if (e->blob == NULL)
            continue;
        if (i != j)
            memcpy(ENTRY(t, j), e, es);
        ix_set(index, log2, free_slot(index, log2, e->hash), j);
        j++;
    }
    t->nentries = t->fill = (int32_t)j;
    PyMem_Free(t->index);
    t->index = index;
    t->log2size = (uint8_t)log2;
    if (new_ecap < t->ecap) {
        char *smaller = new_ecap ? PyMem_Realloc(entries, (size_t)new_ecap * es)
                                 : (PyMem_Free(entries), NULL);
        if (smaller != NULL || new_ecap == 0) {     /* (a failed shrink keeps the old block) */
            t->entries = smaller;
            t->ecap = (int32_t)new_ecap;
        }
    }
    t->mods++;
    return 0;
}

/* Rebuild for n live entries with room to grow by half: the index the smallest for 1.5 n,
   the entries 1.5 n + 4 (within the index's usable part). */
static int resize_for(Table *t, Py_ssize_t n)
{
    int log2 = log2_for(n + (n >> 1) + 1);
    Py_ssize_t ecap = n + (n >> 1) + 4, usable = USABLE((Py_ssize_t)1 << log2);
    return rebuild(t, log2, ecap < usable ? ecap : usable);
}

/* Room for one more entry: nentries < ecap and fill < USABLE(isize) after it. */
static int make_room(Table *t)
{
    Py_ssize_t usable = USABLE(ISIZE(t)), holes = t->nentries - t->used;
    if (t->fill < usable) {                         /* (then the entries are full) */
        if (holes > 0 && holes * 8 >= t->nentries)
            return rebuild(t, t->log2size, t->ecap);
        if (t->ecap < usable) {
            Py_ssize_t ecap = t->ecap + (t->ecap >> 1) + 4;
            if (ecap > usable)
                ecap = usable;
            char *e = PyMem_Realloc(t->entries, (size_t)ecap * t->es);
            if (e == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            t->entries = e;
            t->ecap = (int32_t)ecap;
            return 0;
        }
    }
    if (t->used >= MAX_ENTRIES) {
        PyErr_Format(PyExc_OverflowError, "%s is full", TNAME(t));
        return -1;
    }
    return resize_for(t, t->used);
}

/* Add the key (s, n) of hash h, known to be absent; `value` (a StrDict's, else NULL) gets a
   new reference. */
static int insert_new(Table *t, const char *s, size_t n, uint32_t h, PyObject *value)
{
    if ((t->nentries >= t->ecap || t->fill >= USABLE(ISIZE(t))) && make_room(t) < 0)
        return -1;
    uint8_t *blob = blob_new(s, n);
    if (blob == NULL)
        return -1;
    size_t slot = free_slot(t->index, t->log2size, h);
    if (ix_get(t->index, t->log2size, slot) == IX_EMPTY)
        t->fill++;
    Py_ssize_t ix = t->nentries++;
    sentry_t *e = ENTRY(t, ix);
    e->blob = blob;
    e->hash = h;
    if (value != NULL)
        ((dentry_t *)e)->value = Py_NewRef(value);
    ix_set(t->index, t->log2size, slot, ix);
    t->used++;
    t->mods++;
    t->blob_bytes += blob_cost(blob_header(n) + n);
    return 0;
}

/* Copy a live entry of another table (a key known to be absent here; its blob is copied). */
static int insert_entry(Table *t, const sentry_t *src, PyObject *value)
{
    const uint8_t *d;
    size_t n = blob_len(src->blob, &d);
    return insert_new(t, (const char *)d, n, src->hash, value);
}

/* After a deletion: the automatic shrink (see the top). A failed rebuild leaves the table as
   it was, which is as correct, only larger. */
static void after_delete(Table *t)
{
    if (t->used == 0) {
        if (t->log2size > MINLOG2 || t->ecap > 0) {
            if (rebuild(t, MINLOG2, 0) < 0)
                PyErr_Clear();
        }
        return;
    }
    Py_ssize_t holes = t->nentries - t->used;
    if ((t->nentries >= 16 && holes * 2 > t->nentries) ||
            (t->log2size > MINLOG2 && (Py_ssize_t)t->used * 8 < USABLE(ISIZE(t)))) {
        if (resize_for(t, t->used) < 0)
            PyErr_Clear();
    }
}

/* Remove the entry at ix (index slot `slot`): answers a StrDict's value (the reference the
   entry held, for the caller to keep or drop), NULL for a StrSet. */
static PyObject *remove_at(Table *t, Py_ssize_t ix, Py_ssize_t slot)
{
    sentry_t *e = ENTRY(t, ix);
    PyObject *value = NULL;
    if (IS_DICT(t)) {
        value = ((dentry_t *)e)->value;
        ((dentry_t *)e)->value = NULL;
    }
    t->blob_bytes -= blob_cost(blob_total(e->blob));
    PyMem_Free(e->blob);
    e->blob = NULL;
    ix_set(t->index, t->log2size, (size_t)slot, IX_DUMMY);
    t->used--;
    t->mods++;
    while (t->nentries > 0 && ENTRY(t, t->nentries - 1)->blob == NULL)
        t->nentries--;
    after_delete(t);
    return value;
}

static void release(char *entries, Py_ssize_t n, size_t es)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        sentry_t *e = (sentry_t *)(entries + (size_t)i * es);
        if (e->blob == NULL)
            continue;
        PyMem_Free(e->blob);
        if (es == sizeof(dentry_t))
            Py_DECREF(((dentry_t *)e)->value);
    }
    PyMem_Free(entries);
}

static int clear_all(Table *t)
{
    void *index = new_index(MINLOG2);
    if (index == NULL)
        return -1;
    char *entries = t->entries;
    Py_ssize_t n = t->nentries;
    PyMem_Free(t->index);
    t->index = index;
    t->log2size = MINLOG2;
    t->entries = NULL;
    t->ecap = t->nentries = t->used = t->fill = 0;
    t->blob_bytes = 0;
    t->mods++;
    release(entries, n, t->es);     /* (after the table is consistent) */
    return 0;
}

#define PRESIZE_MAX ((Py_ssize_t)1 << 24)

/* Room for n entries in an empty table, tight (a load, a copy): the smallest index for n and
   exactly n entries; at most PRESIZE_MAX (n may be a length hint: past it the table grows). */
static int presize(Table *t, Py_ssize_t n)
{
    if (n <= 0 || t->used != 0)
        return 0;
    if (n > PRESIZE_MAX)
        n = PRESIZE_MAX;
    return rebuild(t, log2_for(n), n);
}

/* After a fill from a length hint that overestimated (duplicates): no more than 1.5x. */
static int trim_after_fill(Table *t)
{
    if ((Py_ssize_t)t->ecap > (Py_ssize_t)t->used + (t->used >> 1) + 4)
        return resize_for(t, t->used);
    return 0;
}

/* -- shared type slots and methods -------------------------------------------------------- */

static PyObject *table_new(PyTypeObject *type, PyObject *Py_UNUSED(args),
                           PyObject *Py_UNUSED(kwds))
{
    Table *t = (Table *)type->tp_alloc(type, 0);
    if (t == NULL)
        return NULL;
    t->es = PyType_IsSubtype(type, &StrDictType) ? sizeof(dentry_t) : sizeof(sentry_t);
    t->log2size = MINLOG2;
    t->index = new_index(MINLOG2);
    if (t->index == NULL) {
        Py_DECREF(t);
        return NULL;
    }
    return (PyObject *)t;
}

static void table_dealloc(Table *t)
{
    release(t->entries, t->nentries, t->es);
    PyMem_Free(t->index);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static Py_ssize_t table_length(Table *t) { return t->used; }

static int table_contains(Table *t, PyObject *key)
{
    if (!PyBytes_CheckExact(key))
        return 0;
    return find_bytes(t, key, bytes_hash32(key), NULL) >= 0;
}

static Table *empty_like(Table *t)
{
    return (Table *)table_new(IS_DICT(t) ? &StrDictType : &StrSetType, NULL, NULL);
}

/* A compact copy (of the base type, as dict.copy answers a dict). */
static PyObject *table_copy(Table *t, PyObject *Py_UNUSED(ignored))
{
    Table *c = empty_like(t);
    if (c == NULL)
        return NULL;
    if (presize(c, t->used) < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        sentry_t *e = ENTRY(t, i);
        if (e->blob == NULL)
            continue;
        uint8_t *blob = blob_dup(e->blob);     /* (room is reserved: no rebuild below) */
        if (blob == NULL)
            goto fail;
        Py_ssize_t ix = c->nentries++;
        sentry_t *ce = ENTRY(c, ix);
        ce->blob = blob;
        ce->hash = e->hash;
        if (IS_DICT(t))
            ((dentry_t *)ce)->value = Py_NewRef(((dentry_t *)e)->value);
        ix_set(c->index, c->log2size, free_slot(c->index, c->log2size, e->hash), ix);
        c->fill++;
        c->used++;
    }
    c->blob_bytes = t->blob_bytes;
    return (PyObject *)c;
fail:
    Py_DECREF(c);
    return NULL;
}

static PyObject *table_clear(Table *t, PyObject *Py_UNUSED(ignored))
{
    if (clear_all(t) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *table_sizeof(Table *t, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t((Py_ssize_t)Py_TYPE(t)->tp_basicsize +
                              ISIZE(t) * ix_width(t->log2size) +
                              (Py_ssize_t)t->ecap * t->es + t->blob_bytes);
}

static PyObject *table_stats(Table *t, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{si,si,si,sn,si,si,sn}", "used", (int)t->used,
                         "entries", (int)t->nentries, "capacity", (int)t->ecap,
                         "index", ISIZE(t), "index_width", ix_width(t->log2size),
                         "fill", (int)t->fill, "blob_bytes", t->blob_bytes);
}

/* shrink(): the tightest layout (no holes, no dummies, exactly len entries, the smallest
   index that holds them); whether it changed anything. */
static PyObject *table_shrink(Table *t, PyObject *Py_UNUSED(ignored))
{
    int log2 = log2_for(t->used);
    if (log2 == t->log2size && t->ecap == t->used && t->nentries == t->used &&
            t->fill == t->used)
        Py_RETURN_FALSE;
    if (rebuild(t, log2, t->used) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* A uniform random live position (used > 0): random positions until one is live (under half
   are holes), then, should RANDOM_TRIES miss (a failed shrink), the next live one after a
   random position. */
static Py_ssize_t random_pos(Table *t)
{
    Py_ssize_t n = t->nentries;
    for (int k = 0; k < RANDOM_TRIES; k++) {
        Py_ssize_t i = uniform(n);
        if (ENTRY(t, i)->blob != NULL)
            return i;
    }
    Py_ssize_t i = uniform(n);
    while (ENTRY(t, i)->blob == NULL)
        if (++i == n)
            i = 0;
    return i;
}

/* What a pick answers: the key, or (StrDict, items) the (key, value) pair. */
static PyObject *pick(Table *t, Py_ssize_t i, int items)
{
    sentry_t *e = ENTRY(t, i);
    PyObject *k = blob_bytes(e->blob);
    if (k == NULL || !items)
        return k;
    PyObject *pair = PyTuple_Pack(2, k, ((dentry_t *)e)->value);
    Py_DECREF(k);
    return pair;
}

static PyObject *random_one(Table *t, int items)
{
    if (t->used == 0) {
        PyErr_Format(PyExc_KeyError, "random pick from an empty %s", TNAME(t));
        return NULL;
    }
    return pick(t, random_pos(t), items);
}

static PyObject *picks_list(Table *t, const Py_ssize_t *pos, Py_ssize_t k, int items)
{
    PyObject *out = PyList_New(k);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *x = pick(t, pos[j], items);
        if (x == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, j, x);
    }
    return out;
}

/* k distinct live positions, uniform, in random order: a partial Fisher-Yates over all live
   positions when k is a third of them or more (O(len)), else random picks rejecting holes and
   repeats (a small open-addressing set of the picked: O(k) expected). */
static PyObject *sample(Table *t, Py_ssize_t k, int items)
{
    if (k > t->used)
        k = t->used;
    if (k <= 0)
        return PyList_New(0);
    Py_ssize_t *pos;
    if (k * 3 > t->used) {
        pos = PyMem_Malloc((size_t)t->used * sizeof(Py_ssize_t));
        if (pos == NULL)
            return PyErr_NoMemory();
        Py_ssize_t m = 0;
        for (Py_ssize_t i = 0; i < t->nentries; i++)
            if (ENTRY(t, i)->blob != NULL)
                pos[m++] = i;
        for (Py_ssize_t j = 0; j < k; j++) {
            Py_ssize_t r = j + uniform(m - j), tmp = pos[j];
            pos[j] = pos[r];
            pos[r] = tmp;
        }
    }
    else {
        size_t hsize = 8;
        while (hsize < (size_t)k * 2)
            hsize <<= 1;
        pos = PyMem_Malloc(((size_t)k + hsize) * sizeof(Py_ssize_t));
        if (pos == NULL)
            return PyErr_NoMemory();
        Py_ssize_t *seen = pos + k, m = 0;
        memset(seen, 0xff, hsize * sizeof(Py_ssize_t));
        while (m < k) {
            Py_ssize_t i = random_pos(t);
            size_t s = ((size_t)i * 0x9E3779B97F4A7C15ull) & (hsize - 1);
            while (seen[s] >= 0 && seen[s] != i)
                s = (s + 1) & (hsize - 1);
            if (seen[s] == i)
                continue;
            seen[s] = i;
            pos[m++] = i;
        }
    }
    PyObject *out = picks_list(t, pos, k, items);
    PyMem_Free(pos);
    return out;
}

/* k independent uniform picks (with repetitions); none from an empty table. */
static PyObject *choices(Table *t, Py_ssize_t k, int items)
{
    if (k <= 0 || t->used == 0)
        return PyList_New(0);
    PyObject *out = PyList_New(k);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *x = pick(t, random_pos(t), items);
        if (x == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, j, x);
    }
    return out;
}

/* The count and `items` flag of sample / choices: (k) for a StrSet, (k, items=False) for a
   StrDict. */
static int count_args(Table *t, const char *name, PyObject *const *args, Py_ssize_t nargs,
                      Py_ssize_t *k, int *items)
{
    Py_ssize_t most = IS_DICT(t) ? 2 : 1;
    if (!_PyArg_CheckPositional(name, nargs, 1, most))
        return -1;
    *k = PyLong_AsSsize_t(args[0]);
    if (*k == -1 && PyErr_Occurred())
        return -1;
    *items = 0;
    if (nargs > 1 && (*items = PyObject_IsTrue(args[1])) < 0)
        return -1;
    return 0;
}

static PyObject *table_sample(Table *t, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t k;
    int items;
    if (count_args(t, "sample", args, nargs, &k, &items) < 0)
        return NULL;
    return sample(t, k, items);
}

static PyObject *table_choices(Table *t, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t k;
    int items;
    if (count_args(t, "choices", args, nargs, &k, &items) < 0)
        return NULL;
    return choices(t, k, items);
}

static PyObject *table_random_key(Table *t, PyObject *Py_UNUSED(ignored))
{
    return random_one(t, 0);
}

/* The keys, (StrDict) values or items in order, as a list. */
enum { KIND_KEYS, KIND_VALUES, KIND_ITEMS };

static PyObject *listing(Table *t, int kind)
{
    PyObject *out = PyList_New(t->used);
    if (out == NULL)
        return NULL;
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        sentry_t *e = ENTRY(t, i);
        if (e->blob == NULL)
            continue;
        PyObject *x;
        if (kind == KIND_VALUES) {
            x = Py_NewRef(((dentry_t *)e)->value);
        }
        else {
            x = blob_bytes(e->blob);
            if (x != NULL && kind == KIND_ITEMS) {
                PyObject *k = x;
                x = PyTuple_Pack(2, k, ((dentry_t *)e)->value);
                Py_DECREF(k);
            }
        }
        if (x == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, j++, x);
    }
    return out;
}

/* -- the iterator (keys, in order) -------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    Table *table;       /* NULL once exhausted */
    Py_ssize_t pos;
    Py_ssize_t seen;
    uint32_t mods;
} TIter;

static PyObject *table_iter(Table *t)
{
    TIter *it = PyObject_New(TIter, &IterType);
    if (it == NULL)
        return NULL;
    it->table = (Table *)Py_NewRef(t);
    it->pos = it->seen = 0;
    it->mods = t->mods;
    return (PyObject *)it;
}

static void iter_dealloc(TIter *it)
{
    Py_XDECREF(it->table);
    PyObject_Free(it);
}

static PyObject *iter_next(TIter *it)
{
    Table *t = it->table;
    if (t == NULL)
        return NULL;
    if (t->mods != it->mods) {
        PyErr_Format(PyExc_RuntimeError, "%s changed size during iteration", TNAME(t));
        Py_CLEAR(it->table);
        return NULL;
    }
    Py_ssize_t i = it->pos, n = t->nentries;
    while (i < n && ENTRY(t, i)->blob == NULL)
        i++;
    if (i >= n) {
        Py_CLEAR(it->table);
        return NULL;
    }
    it->pos = i + 1;
    it->seen++;
    return blob_bytes(ENTRY(t, i)->blob);
}

static PyObject *iter_length_hint(TIter *it, PyObject *Py_UNUSED(ignored))
{
    Table *t = it->table;
    return PyLong_FromSsize_t(t != NULL && t->mods == it->mods ? t->used - it->seen : 0);
}

static PyMethodDef iter_methods[] = {
    {"__length_hint__", (PyCFunction)iter_length_hint, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject IterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._strtab.StrTableIterator",
    .tp_basicsize = sizeof(TIter),
    .tp_dealloc = (destructor)iter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)iter_next,
    .tp_methods = iter_methods,
};

/* -- StrSet ---------------------------------------------------------------------------------- */

static int check_member(PyObject *m)
{
    if (PyBytes_CheckExact(m))
        return 0;
    PyErr_Format(PyExc_TypeError, "StrSet members must be bytes, not %.100s",
                 Py_TYPE(m)->tp_name);
    return -1;
}

/* 1 added, 0 already there, -1 error */
static int set_add(Table *t, PyObject *m)
{
    if (check_member(m) < 0)
        return -1;
    uint32_t h = bytes_hash32(m);
    if (find_bytes(t, m, h, NULL) >= 0)
        return 0;
    return insert_new(t, PyBytes_AS_STRING(m), (size_t)PyBytes_GET_SIZE(m), h, NULL) < 0
               ? -1 : 1;
}

/* 1 removed, 0 absent (anything but bytes is absent) */
static int set_discard(Table *t, PyObject *m)
{
    if (!PyBytes_CheckExact(m))
        return 0;
    Py_ssize_t slot, ix = find_bytes(t, m, bytes_hash32(m), &slot);
    if (ix < 0)
        return 0;
    remove_at(t, ix, slot);
    return 1;
}

static int set_add_all(Table *t, PyObject *iterable)
{
    if (StrSet_Check(iterable)) {
        Table *o = (Table *)iterable;
        if (o == t)
            return 0;
        for (Py_ssize_t i = 0; i < o->nentries; i++) {
            sentry_t *e = ENTRY(o, i);
            if (e->blob == NULL)
                continue;
            const uint8_t *d;
            size_t n = blob_len(e->blob, &d);
            if (find(t, (const char *)d, n, e->hash, NULL) < 0 && insert_entry(t, e, NULL) < 0)
                return -1;
        }
        return 0;
    }
    if (PyList_CheckExact(iterable) || PyTuple_CheckExact(iterable)) {
        PyObject *seq = Py_NewRef(iterable);
        int rc = 0;
        for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(seq); i++) {
            PyObject *m = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
            rc = set_add(t, m) < 0 ? -1 : 0;
            Py_DECREF(m);
        }
        Py_DECREF(seq);
        return rc;
    }
    PyObject *it = PyObject_GetIter(iterable), *m;
    if (it == NULL)
        return -1;
    while ((m = PyIter_Next(it)) != NULL) {
        int r = set_add(t, m);
        Py_DECREF(m);
        if (r < 0) {
            Py_DECREF(it);
            return -1;
        }
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static int StrSet_init(Table *t, PyObject *args, PyObject *kwds)
{
    PyObject *src = NULL;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "StrSet() takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "|O:StrSet", &src))
        return -1;
    if (t->used && clear_all(t) < 0)        /* (set.__init__ starts over, as here) */
        return -1;
    if (src == NULL)
        return 0;
    Py_ssize_t hint = PyObject_LengthHint(src, 0);
    if (hint < 0 || presize(t, hint) < 0 || set_add_all(t, src) < 0)
        return -1;
    return trim_after_fill(t);
}

static PyObject *StrSet_add(Table *t, PyObject *m)
{
    return set_add(t, m) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *StrSet_update(Table *t, PyObject *args)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++)
        if (set_add_all(t, PyTuple_GET_ITEM(args, i)) < 0)
            return NULL;
    Py_RETURN_NONE;
}

static PyObject *StrSet_discard(Table *t, PyObject *m)
{
    set_discard(t, m);
    Py_RETURN_NONE;
}

static PyObject *StrSet_remove(Table *t, PyObject *m)
{
    if (!set_discard(t, m)) {
        _PyErr_SetKeyError(m);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *StrSet_difference_update(Table *t, PyObject *args)
{
    for (Py_ssize_t a = 0; a < PyTuple_GET_SIZE(args); a++) {
        PyObject *other = PyTuple_GET_ITEM(args, a);
        if ((PyObject *)t == other) {
            if (clear_all(t) < 0)
                return NULL;
            continue;
        }
        if (Table_Check(other)) {
            Table *o = (Table *)other;
            for (Py_ssize_t i = 0; i < o->nentries && t->used; i++) {
                sentry_t *e = ENTRY(o, i);
                if (e->blob == NULL)
                    continue;
                const uint8_t *d;
                size_t n = blob_len(e->blob, &d);
                Py_ssize_t slot, ix = find(t, (const char *)d, n, e->hash, &slot);
                if (ix >= 0)
                    remove_at(t, ix, slot);
            }
            continue;
        }
        PyObject *it = PyObject_GetIter(other), *m;
        if (it == NULL)
            return NULL;
        while ((m = PyIter_Next(it)) != NULL) {
            set_discard(t, m);
            Py_DECREF(m);
        }
        Py_DECREF(it);
        if (PyErr_Occurred())
            return NULL;
    }
    Py_RETURN_NONE;
}

/* pop(): the last member (the newest still there), removed */
static PyObject *StrSet_pop(Table *t, PyObject *Py_UNUSED(ignored))
{
    if (t->used == 0) {
        PyErr_SetString(PyExc_KeyError, "pop from an empty StrSet");
        return NULL;
    }
    Py_ssize_t ix = t->nentries - 1;        /* (never a hole) */
    PyObject *m = blob_bytes(ENTRY(t, ix)->blob);
    if (m != NULL)
        remove_at(t, ix, slot_of(t, ix));
    return m;
}

/* The others of intersection / difference, each one this can probe: tables, sets and dicts
   as they are, any other iterable as a set of it (what set.intersection makes of them). */
static PyObject *probes(PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *out = PyTuple_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i);
        o = Table_Check(o) || PyAnySet_Check(o) || PyDict_Check(o) ? Py_NewRef(o)
                                                                    : PySet_New(o);
        if (o == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, o);
    }
    return out;
}

/* Is entry e in `o` (a probe, or a set or a StrSet)? *key: its bytes, made on the first
   need (the caller drops it). */
static int probe_has(sentry_t *e, PyObject *o, PyObject **key)
{
    if (Table_Check(o)) {
        const uint8_t *d;
        size_t n = blob_len(e->blob, &d);
        return find((Table *)o, (const char *)d, n, e->hash, NULL) >= 0;
    }
    if (*key == NULL && (*key = blob_bytes(e->blob)) == NULL)
        return -1;
    return PySequence_Contains(o, *key);
}

/* The members in every other (want 1: intersection) or in none (want 0: difference), as a
   Python set. A probe of a set may run Python code (a member's __eq__): a change of this
   table meanwhile raises RuntimeError. */
static PyObject *filtered(Table *t, PyObject *args, int want)
{
    PyObject *others = probes(args), *out = NULL;
    if (others == NULL)
        return NULL;
    out = PySet_New(NULL);
    if (out == NULL)
        goto fail;
    uint32_t mods = t->mods;
    Py_ssize_t n = PyTuple_GET_SIZE(others);
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        sentry_t *e = ENTRY(t, i);
        if (e->blob == NULL)
            continue;
        PyObject *key = NULL;
        int keep = 1;
        for (Py_ssize_t j = 0; keep && j < n; j++) {
            int r = probe_has(e, PyTuple_GET_ITEM(others, j), &key);
            if (r >= 0 && t->mods != mods) {
                PyErr_SetString(PyExc_RuntimeError, "StrSet changed size during iteration");
                r = -1;
            }
            if (r < 0) {
                Py_XDECREF(key);
                goto fail;
            }
            keep = want ? r : !r;
        }
        if (keep && key == NULL && (key = blob_bytes(e->blob)) == NULL)
            goto fail;
        int r = keep ? PySet_Add(out, key) : 0;
        Py_XDECREF(key);
        if (r < 0)
            goto fail;
    }
    Py_DECREF(others);
    return out;
fail:
    Py_DECREF(others);
    Py_XDECREF(out);
    return NULL;
}

static PyObject *StrSet_intersection(Table *t, PyObject *args)
{
    return filtered(t, args, 1);
}

static PyObject *StrSet_difference(Table *t, PyObject *args)
{
    return filtered(t, args, 0);
}

static PyObject *as_set(Table *t)
{
    PyObject *keys = listing(t, KIND_KEYS);
    if (keys == NULL)
        return NULL;
    PyObject *s = PySet_New(keys);
    Py_DECREF(keys);
    return s;
}

static PyObject *StrSet_union(Table *t, PyObject *args)
{
    PyObject *s = as_set(t);
    if (s == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i), *it, *m;
        if ((it = PyObject_GetIter(o)) == NULL)
            goto fail;
        while ((m = PyIter_Next(it)) != NULL) {
            int r = PySet_Add(s, m);
            Py_DECREF(m);
            if (r < 0) {
                Py_DECREF(it);
                goto fail;
            }
        }
        Py_DECREF(it);
        if (PyErr_Occurred())
            goto fail;
    }
    return s;
fail:
    Py_DECREF(s);
    return NULL;
}

static PyObject *StrSet_random_member(Table *t, PyObject *Py_UNUSED(ignored))
{
    return random_one(t, 0);
}

static PyObject *StrSet_reduce(Table *t, PyObject *Py_UNUSED(ignored))
{
    PyObject *keys = listing(t, KIND_KEYS);
    if (keys == NULL)
        return NULL;
    return Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(t), keys);
}

static PyObject *StrSet_repr(Table *t)
{
    PyObject *keys = listing(t, KIND_KEYS);
    if (keys == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("StrSet(%R)", keys);
    Py_DECREF(keys);
    return r;
}

/* Equal to a StrSet, set or frozenset of the same members. */
static PyObject *StrSet_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !StrSet_Check(a) ||
            !(StrSet_Check(b) || PyAnySet_Check(b)))
        Py_RETURN_NOTIMPLEMENTED;
    Table *t = (Table *)a;
    Py_ssize_t blen = StrSet_Check(b) ? ((Table *)b)->used : PySet_GET_SIZE(b);
    int eq = t->used == blen;
    uint32_t mods = t->mods;
    for (Py_ssize_t i = 0; eq && i < t->nentries; i++) {
        sentry_t *e = ENTRY(t, i);
        if (e->blob == NULL)
            continue;
        PyObject *key = NULL;
        int r = probe_has(e, b, &key);
        Py_XDECREF(key);
        if (r < 0)
            return NULL;
        if (t->mods != mods) {
            PyErr_SetString(PyExc_RuntimeError, "StrSet changed size during comparison");
            return NULL;
        }
        eq = r;
    }
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyMethodDef StrSet_methods[] = {
    {"add", (PyCFunction)StrSet_add, METH_O, "add(member): TypeError unless bytes"},
    {"update", (PyCFunction)StrSet_update, METH_VARARGS, "update(*iterables)"},
    {"discard", (PyCFunction)StrSet_discard, METH_O, "discard(member)"},
    {"remove", (PyCFunction)StrSet_remove, METH_O, "remove(member): KeyError when absent"},
    {"difference_update", (PyCFunction)StrSet_difference_update, METH_VARARGS,
     "difference_update(*iterables)"},
    {"pop", (PyCFunction)StrSet_pop, METH_NOARGS, "pop(): the last member, removed (O(1))"},
    {"clear", (PyCFunction)table_clear, METH_NOARGS, NULL},
    {"copy", (PyCFunction)table_copy, METH_NOARGS, "a compact copy (a StrSet)"},
    {"intersection", (PyCFunction)StrSet_intersection, METH_VARARGS, "a set"},
    {"difference", (PyCFunction)StrSet_difference, METH_VARARGS, "a set"},
    {"union", (PyCFunction)StrSet_union, METH_VARARGS, "a set"},
    {"random_member", (PyCFunction)StrSet_random_member, METH_NOARGS,
     "random_member(): a member at random, O(1) expected; KeyError when empty"},
    {"sample", (PyCFunction)(void (*)(void))table_sample, METH_FASTCALL,
     "sample(k): min(k, len) distinct members at random, in random order, O(k) expected"},
    {"choices", (PyCFunction)(void (*)(void))table_choices, METH_FASTCALL,
     "choices(k): k members drawn independently (repeats possible), O(k); [] when empty"},
    {"shrink", (PyCFunction)table_shrink, METH_NOARGS,
     "shrink(): the tightest layout for the members there; whether it changed anything"},
    {"_stats", (PyCFunction)table_stats, METH_NOARGS, "the layout's sizes (tests)"},
    {"__sizeof__", (PyCFunction)table_sizeof, METH_NOARGS,
     "the object, its index, its entries and its members' blobs"},
    {"__reduce__", (PyCFunction)StrSet_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods StrSet_as_sequence = {
    .sq_length = (lenfunc)table_length,
    .sq_contains = (objobjproc)table_contains,
};

static PyTypeObject StrSetType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._strtab.StrSet",
    .tp_doc = "StrSet(iterable=()): a set of bytes in insertion order, members inline "
              "(strtab.py)",
    .tp_basicsize = sizeof(Table),
    .tp_dealloc = (destructor)table_dealloc,
    .tp_repr = (reprfunc)StrSet_repr,
    .tp_as_sequence = &StrSet_as_sequence,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_richcompare = StrSet_richcompare,
    .tp_iter = (getiterfunc)table_iter,
    .tp_methods = StrSet_methods,
    .tp_init = (initproc)StrSet_init,
    .tp_new = table_new,
};

/* -- StrDict --------------------------------------------------------------------------------- */

static int check_pair(PyObject *k, PyObject *v)
{
    if (!PyBytes_CheckExact(k)) {
        PyErr_Format(PyExc_TypeError, "StrDict keys must be bytes, not %.100s",
                     Py_TYPE(k)->tp_name);
        return -1;
    }
    if (!PyBytes_CheckExact(v)) {
        PyErr_Format(PyExc_TypeError, "StrDict values must be bytes, not %.100s",
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    return 0;
}

/* Store k -> v (checked): 1 a new key, 0 an update in place, -1 error. */
static int dict_set(Table *t, PyObject *k, PyObject *v)
{
    if (check_pair(k, v) < 0)
        return -1;
    uint32_t h = bytes_hash32(k);
    Py_ssize_t ix = find_bytes(t, k, h, NULL);
    if (ix >= 0) {
        dentry_t *e = DENTRY(t, ix);
        PyObject *old = e->value;
        e->value = Py_NewRef(v);
        Py_DECREF(old);
        return 0;
    }
    return insert_new(t, PyBytes_AS_STRING(k), (size_t)PyBytes_GET_SIZE(k), h, v) < 0 ? -1 : 1;
}

/* The value of k (borrowed), NULL when absent (no exception: there is none to raise). */
static inline PyObject *dict_get(Table *t, PyObject *k)
{
    if (!PyBytes_CheckExact(k))
        return NULL;
    Py_ssize_t ix = find_bytes(t, k, bytes_hash32(k), NULL);
    return ix < 0 ? NULL : DENTRY(t, ix)->value;
}

static int dict_set_pair(void *t, PyObject *k, PyObject *v)
{
    return dict_set((Table *)t, k, v);
}

static int dict_update(Table *t, PyObject *other)
{
    if (StrDict_Check(other)) {
        Table *o = (Table *)other;
        if (o == t)
            return 0;
        for (Py_ssize_t i = 0; i < o->nentries; i++) {
            dentry_t *e = DENTRY(o, i);
            if (e->blob == NULL)
                continue;
            const uint8_t *d;
            size_t n = blob_len(e->blob, &d);
            Py_ssize_t ix = find(t, (const char *)d, n, e->hash, NULL);
            if (ix >= 0) {
                dentry_t *mine = DENTRY(t, ix);
                PyObject *old = mine->value;
                mine->value = Py_NewRef(e->value);
                Py_DECREF(old);
            }
            else if (insert_entry(t, (sentry_t *)e, e->value) < 0) {
                return -1;
            }
        }
        return 0;
    }
    if (PyDict_Check(other)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        Py_INCREF(other);
        while (PyDict_Next(other, &pos, &k, &v)) {   /* (no Python code runs in the loop) */
            if (dict_set(t, k, v) < 0) {
                Py_DECREF(other);
                return -1;
            }
        }
        Py_DECREF(other);
        return 0;
    }
    int has_keys = PyObject_HasAttrString(other, "keys");
    if (has_keys) {
        PyObject *kv = PyObject_CallMethod(other, "keys", NULL), *keys;
        if (kv == NULL)
            return -1;
        keys = PySequence_List(kv);
        Py_DECREF(kv);
        if (keys == NULL)
            return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
            PyObject *k = PyList_GET_ITEM(keys, i);
            PyObject *v = PyObject_GetItem(other, k);
            int rc = v == NULL ? -1 : dict_set(t, k, v);
            Py_XDECREF(v);
            if (rc < 0) {
                Py_DECREF(keys);
                return -1;
            }
        }
        Py_DECREF(keys);
        return 0;
    }
    return update_from_pairs(t, other, dict_set_pair, "StrDict");
}

static int StrDict_init(Table *t, PyObject *args, PyObject *kwds)
{
    PyObject *src = NULL;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "StrDict() takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "|O:StrDict", &src))
        return -1;
    if (src == NULL)
        return 0;
    Py_ssize_t hint = PyObject_LengthHint(src, 0);
    if (hint < 0 || presize(t, hint) < 0 || dict_update(t, src) < 0)
        return -1;
    return trim_after_fill(t);
}

static PyObject *StrDict_subscript(Table *t, PyObject *k)
{
    PyObject *v = dict_get(t, k);
    if (v == NULL) {
        _PyErr_SetKeyError(k);
        return NULL;
    }
    return Py_NewRef(v);
}

static int StrDict_ass_subscript(Table *t, PyObject *k, PyObject *v)
{
    if (v != NULL)
        return dict_set(t, k, v) < 0 ? -1 : 0;
    Py_ssize_t slot, ix = PyBytes_CheckExact(k) ? find_bytes(t, k, bytes_hash32(k), &slot) : -1;
    if (ix < 0) {
        _PyErr_SetKeyError(k);
        return -1;
    }
    Py_DECREF(remove_at(t, ix, slot));
    return 0;
}

static PyObject *StrDict_get(Table *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (!_PyArg_CheckPositional("get", nargs, 1, 2))
        return NULL;
    PyObject *v = dict_get(t, args[0]);
    return Py_NewRef(v != NULL ? v : nargs > 1 ? args[1] : Py_None);
}

static PyObject *StrDict_pop(Table *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (!_PyArg_CheckPositional("pop", nargs, 1, 2))
        return NULL;
    PyObject *k = args[0];
    Py_ssize_t slot, ix = PyBytes_CheckExact(k) ? find_bytes(t, k, bytes_hash32(k), &slot) : -1;
    if (ix < 0) {
        if (nargs > 1)
            return Py_NewRef(args[1]);
        _PyErr_SetKeyError(k);
        return NULL;
    }
    return remove_at(t, ix, slot);
}

/* popitem(): the last (key, value), removed, as dict's */
static PyObject *StrDict_popitem(Table *t, PyObject *Py_UNUSED(ignored))
{
    if (t->used == 0) {
        PyErr_SetString(PyExc_KeyError, "popitem(): StrDict is empty");
        return NULL;
    }
    Py_ssize_t ix = t->nentries - 1;        /* (never a hole) */
    PyObject *k = blob_bytes(ENTRY(t, ix)->blob);
    if (k == NULL)
        return NULL;
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL) {
        Py_DECREF(k);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, k);
    PyTuple_SET_ITEM(pair, 1, remove_at(t, ix, slot_of(t, ix)));
    return pair;
}

static PyObject *StrDict_setdefault(Table *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (!_PyArg_CheckPositional("setdefault", nargs, 1, 2))
        return NULL;
    PyObject *k = args[0], *dflt = nargs > 1 ? args[1] : Py_None;
    PyObject *v = dict_get(t, k);
    if (v != NULL)
        return Py_NewRef(v);
    if (check_pair(k, dflt) < 0 ||
            insert_new(t, PyBytes_AS_STRING(k), (size_t)PyBytes_GET_SIZE(k), bytes_hash32(k),
                       dflt) < 0)
        return NULL;
    return Py_NewRef(dflt);
}

static PyObject *StrDict_update(Table *t, PyObject *other)
{
    return dict_update(t, other) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *StrDict_keys(Table *t, PyObject *Py_UNUSED(i)) { return listing(t, KIND_KEYS); }
static PyObject *StrDict_values(Table *t, PyObject *Py_UNUSED(i))
{
    return listing(t, KIND_VALUES);
}
static PyObject *StrDict_items(Table *t, PyObject *Py_UNUSED(i))
{
    return listing(t, KIND_ITEMS);
}

static PyObject *StrDict_random_item(Table *t, PyObject *Py_UNUSED(ignored))
{
    return random_one(t, 1);
}

static PyObject *StrDict_reduce(Table *t, PyObject *Py_UNUSED(ignored))
{
    PyObject *items = listing(t, KIND_ITEMS);
    if (items == NULL)
        return NULL;
    return Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(t), items);
}

static PyObject *as_dict(Table *t)
{
    PyObject *items = listing(t, KIND_ITEMS), *d = items ? PyDict_New() : NULL;
    if (d != NULL && PyDict_MergeFromSeq2(d, items, 1) < 0)
        Py_CLEAR(d);
    Py_XDECREF(items);
    return d;
}

static PyObject *StrDict_repr(Table *t)
{
    PyObject *d = as_dict(t);
    if (d == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("StrDict(%R)", d);
    Py_DECREF(d);
    return r;
}

/* Equal to a StrDict or a dict of the same keys and equal values (order aside, as dicts). */
static PyObject *StrDict_richcompare(PyObject *a, PyObject *b, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !StrDict_Check(a) ||
            !(StrDict_Check(b) || PyDict_Check(b)))
        Py_RETURN_NOTIMPLEMENTED;
    Table *t = (Table *)a;
    int table = StrDict_Check(b);
    int eq = t->used == (table ? ((Table *)b)->used : PyDict_GET_SIZE(b));
    uint32_t mods = t->mods;
    for (Py_ssize_t i = 0; eq && i < t->nentries; i++) {
        dentry_t *e = DENTRY(t, i);
        if (e->blob == NULL)
            continue;
        PyObject *ov, *v = Py_NewRef(e->value);
        if (table) {
            const uint8_t *d;
            size_t n = blob_len(e->blob, &d);
            Py_ssize_t ix = find((Table *)b, (const char *)d, n, e->hash, NULL);
            ov = ix < 0 ? NULL : Py_NewRef(DENTRY((Table *)b, ix)->value);
        }
        else {
            PyObject *k = blob_bytes(e->blob);
            if (k == NULL) {
                Py_DECREF(v);
                return NULL;
            }
            ov = Py_XNewRef(PyDict_GetItemWithError(b, k));
            Py_DECREF(k);
            if (ov == NULL && PyErr_Occurred()) {
                Py_DECREF(v);
                return NULL;
            }
        }
        int r = ov == NULL ? 0 : PyObject_RichCompareBool(v, ov, Py_EQ);
        Py_DECREF(v);
        Py_XDECREF(ov);
        if (r < 0)
            return NULL;
        if (t->mods != mods) {
            PyErr_SetString(PyExc_RuntimeError, "StrDict changed size during comparison");
            return NULL;
        }
        eq = r;
    }
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyMethodDef StrDict_methods[] = {
    {"get", (PyCFunction)(void (*)(void))StrDict_get, METH_FASTCALL,
     "get(key, default=None): the value stored (the object itself)"},
    {"pop", (PyCFunction)(void (*)(void))StrDict_pop, METH_FASTCALL,
     "pop(key[, default]): remove the key and answer its value"},
    {"popitem", (PyCFunction)StrDict_popitem, METH_NOARGS,
     "popitem(): the last (key, value), removed (O(1))"},
    {"setdefault", (PyCFunction)(void (*)(void))StrDict_setdefault, METH_FASTCALL,
     "setdefault(key, default=None): the value, the default stored when absent (bytes)"},
    {"update", (PyCFunction)StrDict_update, METH_O,
     "update(mapping or (key, value) pairs): each as d[k] = v"},
    {"keys", (PyCFunction)StrDict_keys, METH_NOARGS, "the keys, in order (a list)"},
    {"values", (PyCFunction)StrDict_values, METH_NOARGS, "the values, in order (a list)"},
    {"items", (PyCFunction)StrDict_items, METH_NOARGS, "(key, value) pairs, in order (a list)"},
    {"clear", (PyCFunction)table_clear, METH_NOARGS, NULL},
    {"copy", (PyCFunction)table_copy, METH_NOARGS, "a compact copy (a StrDict)"},
    {"random_key", (PyCFunction)table_random_key, METH_NOARGS,
     "random_key(): a key at random, O(1) expected; KeyError when empty"},
    {"random_item", (PyCFunction)StrDict_random_item, METH_NOARGS,
     "random_item(): a (key, value) at random, O(1) expected; KeyError when empty"},
    {"sample", (PyCFunction)(void (*)(void))table_sample, METH_FASTCALL,
     "sample(k, items=False): min(k, len) distinct keys (or (key, value) pairs) at random, "
     "in random order, O(k) expected"},
    {"choices", (PyCFunction)(void (*)(void))table_choices, METH_FASTCALL,
     "choices(k, items=False): k keys (or pairs) drawn independently, O(k); [] when empty"},
    {"shrink", (PyCFunction)table_shrink, METH_NOARGS,
     "shrink(): the tightest layout for the keys there; whether it changed anything"},
    {"_stats", (PyCFunction)table_stats, METH_NOARGS, "the layout's sizes (tests)"},
    {"__sizeof__", (PyCFunction)table_sizeof, METH_NOARGS,
     "the object, its index, its entries and its keys' blobs (not the values)"},
    {"__reduce__", (PyCFunction)StrDict_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMappingMethods StrDict_as_mapping = {
    .mp_length = (lenfunc)table_length,
    .mp_subscript = (binaryfunc)StrDict_subscript,
    .mp_ass_subscript = (objobjargproc)StrDict_ass_subscript,
};

static PySequenceMethods StrDict_as_sequence = {
    .sq_contains = (objobjproc)table_contains,
};

static PyTypeObject StrDictType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._strtab.StrDict",
    .tp_doc = "StrDict(mapping or pairs=()): a mapping of bytes to bytes in insertion order, "
              "keys inline (strtab.py)",
    .tp_basicsize = sizeof(Table),
    .tp_dealloc = (destructor)table_dealloc,
    .tp_repr = (reprfunc)StrDict_repr,
    .tp_as_sequence = &StrDict_as_sequence,
    .tp_as_mapping = &StrDict_as_mapping,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_MAPPING,
    .tp_richcompare = StrDict_richcompare,
    .tp_iter = (getiterfunc)table_iter,
    .tp_methods = StrDict_methods,
    .tp_init = (initproc)StrDict_init,
    .tp_new = table_new,
};

/* -- the module ----------------------------------------------------------------------------- */

/* -- the C API for the other extensions (_strtab.h) ---------------------------------------- */

static int capi_dict_set(PyObject *d, PyObject *field, PyObject *value)
{
    return dict_set((Table *)d, field, value);
}

static PyObject *capi_dict_get(PyObject *d, PyObject *field)
{
    return dict_get((Table *)d, field);
}

static int capi_set_add(PyObject *s, PyObject *member)
{
    return set_add((Table *)s, member);
}

static PyObject *capi_set_pop_random(PyObject *s)
{
    Table *t = (Table *)s;
    if (t->used == 0) {
        PyErr_SetString(PyExc_KeyError, "pop from an empty StrSet");
        return NULL;
    }
    Py_ssize_t ix = random_pos(t);
    PyObject *m = blob_bytes(ENTRY(t, ix)->blob);
    if (m != NULL)
        remove_at(t, ix, slot_of(t, ix));
    return m;
}

static StrTab_CAPI capi = {STRTAB_CAPI_VERSION, &StrSetType, &StrDictType, capi_dict_set,
                           capi_dict_get, capi_set_add, capi_set_pop_random};

static PyObject *mod_seed(PyObject *Py_UNUSED(m), PyObject *arg)
{
    unsigned long long n = PyLong_AsUnsignedLongLongMask(arg);
    if (n == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    rng = n;
    Py_RETURN_NONE;
}

static PyMethodDef mod_methods[] = {
    {"seed", mod_seed, METH_O, "seed(n): the generator of the random picks (tests)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_strtab",
    "Sets of bytes and mappings of bytes to bytes with their keys inline (strtab.py has the "
    "reference).",
    -1, mod_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__strtab(void)
{
    if (PyType_Ready(&StrSetType) < 0 || PyType_Ready(&StrDictType) < 0 ||
            PyType_Ready(&IterType) < 0)
        return NULL;
    uint64_t s = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&rng;
    rng = splitmix64(&s);
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "StrSet", (PyObject *)&StrSetType) < 0 ||
            PyModule_AddObjectRef(m, "StrDict", (PyObject *)&StrDictType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *cap = PyCapsule_New(&capi, STRTAB_CAPSULE, NULL);
    if (cap == NULL || PyModule_AddObject(m, "_C_API", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
