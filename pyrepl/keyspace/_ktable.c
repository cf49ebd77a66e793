/* The keyspace's table: a mapping laid out as CPython's compact dict, whose 24-byte entries
 * also carry the 24 bits of ageing Redis keeps per key (robj->lru) for eviction and OBJECT
 * IDLETIME/FREQ. pyrepl/keyspace/ktable.py is the Python reference and says what each
 * operation does; tests/unit/test_ktable.py holds the two equal.
 *
 * Why C: a side dict of ages would cost ~42 B a key; here the age shares the entry with the
 * key and the value ({key, value, age, hash32} = 24 B, a dict entry's size: bytes keys cache
 * their own hash, so the entry keeps only its low 32 bits, enough to reject a probe and to
 * rebuild the index without touching the keys).
 *
 * Layout: `index` (power-of-two slots of int32: EMPTY, DUMMY or a position in `entries`),
 * probed with the key's 32-bit hash and perturbation as dict does; `entries` dense in insertion
 * order, a deletion leaving a hole (key NULL) and a DUMMY slot. Invariants:
 *     used <= nentries <= ecap <= USABLE(isize) = isize * 2 / 3,
 * and the slots that are not EMPTY number at most nentries, so a probe always ends. Unlike a
 * dict, the entries array grows by half (realloc) instead of being sized for the whole index,
 * so a table holds 24-36 B of entries a key rather than 24-48; when it is full it is compacted
 * in place if at least an eighth of it are holes, grown if the index has room, otherwise the
 * index is rebuilt with twice the slots (the entries compacted into it). shrink() (Redis's
 * tryResizeHashTables, from the cron) rebuilds a table under 10 % full at its minimal size.
 *
 * Ageing (module state set by the server: configure(), set_clock()): a read (get,
 * __getitem__, setdefault of a present key) and an overwrite touch the entry as Redis's
 * lookupKey does, LRU: age = the LRU clock; LFU: updateLFU (decay, logarithmic increment drawn
 * from a splitmix64 generator, time stamp). A new key starts at the clock (LRU) or at
 * (minutes << 8) | LFU_INIT_VAL. A table made with ageing=False (the expires) never stamps.
 *
 * `mods` counts the changes an iterator must notice (a key added or removed, a rebuild): an
 * iterator that sees it move raises RuntimeError, as a dict's does.
 *
 * The per-slot index (Redis Cluster's slot_to_keys, cluster.c slotToKeyAddEntry/DelEntry; off
 * until track_slots()): `slots`, CLUSTER_SLOTS {head, count} (128 KB), and `links`, parallel to
 * `entries`, {next, slot} (8 B an entry, where Redis's dictEntry metadata is two pointers, 16 B):
 * a list per slot, newest first. A new key goes to its slot's head (its slot hashed once, CRC16:
 * _hashslot.h), an overwrite keeps its place. A removal moves only the slot's count: the entry,
 * a hole now (key NULL), stays in its slot's list, as holes stay in `entries`, until slot_keys()
 * walks past it (and unlinks it: it knows its predecessor there), a rebuild, or a key entering
 * the slot when it has none. So a removal touches no other entry's link (a doubly linked list's
 * unlink writes two, at random places: cache misses in a big table), and a GETKEYSINSLOT pays,
 * once, for the holes of the keys deleted since the last walk (a reshard's MIGRATE deletes the
 * keys the last GETKEYSINSLOT gave: the next one passes those). rebuild() (compaction, growth,
 * shrink) makes each list again from the entries it keeps, in their order (newest first: a list
 * is in the entries' order), from the slots kept in the links (no key touched). Off, the index
 * costs a NULL test on an insert, a removal and a rebuild, and 24 B in the header
 * (bench/bench_ktable_slots.py has the figures).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "_hashslot.h"
#include "_ktable.h"
#include "_listpack.h"     /* canonical_int */
#include "_pairs.h"

#define IX_EMPTY (-1)
#define IX_DUMMY (-2)
#define MINSIZE 8
#define PERTURB_SHIFT 5
#define USABLE(n) (((n) << 1) / 3)
#define MAX_ENTRIES ((Py_ssize_t)1 << 30)   /* int32 positions, index up to 2^31 slots */
#define LFU_INIT_VAL 5
#define AGE_MAX 0xFFFFFFu

/* -- module state: the clock, the policy and the generators ------------------------------- */

static struct {
    int lfu;
    uint32_t log_factor, decay_time;
    uint32_t lru_clock;     /* (now_ms / 1000) & (2^24 - 1) */
    uint32_t minutes;       /* (now_ms / 60000) & 65535 */
    uint64_t lfu_rng, sample_rng;
} g = {0, 10, 1, 0, 0, 0, 0};

#define GOLDEN 0x9E3779B97F4A7C15ull
#define SAMPLE_SALT 0x5DEECE66Dull

static inline uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += GOLDEN);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint32_t lfu_touch(uint32_t age)
{
    uint32_t ldt = age >> 8, counter = age & 255;
    if (g.decay_time) {
        uint32_t now = g.minutes;
        uint32_t elapsed = now >= ldt ? now - ldt : 65535 - ldt + now;
        uint32_t periods = elapsed / g.decay_time;
        if (periods)
            counter = periods > counter ? 0 : counter - periods;
    }
    if (counter != 255) {
        double r = (double)(splitmix64(&g.lfu_rng) >> 11) * (1.0 / 9007199254740992.0);
        uint32_t base = counter > LFU_INIT_VAL ? counter - LFU_INIT_VAL : 0;
        if (r < 1.0 / ((double)base * (double)g.log_factor + 1.0))
            counter++;
    }
    return (g.minutes << 8) | counter;
}

static inline uint32_t touched(uint32_t age)
{
    return g.lfu ? lfu_touch(age) : g.lru_clock;
}

static inline uint32_t initial_age(void)
{
    return g.lfu ? (g.minutes << 8) | LFU_INIT_VAL : g.lru_clock;
}

/* -- the table ------------------------------------------------------------------------------ */

typedef struct {
    PyObject *key;      /* NULL: a hole */
    PyObject *value;
    uint32_t age;       /* 24 bits used */
    uint32_t hash;      /* the key's hash, low 32 bits */
} entry_t;

/* -- values: a string that is an integer is kept in the entry ------------------------------
 *
 * As Redis's OBJ_ENCODING_INT keeps a string that is the canonical form of an integer in the
 * robj's pointer (tryObjectEncoding), an entry keeps such a bytes value (at most 20 characters,
 * string2ll's form: no '+', no leading zero, not "-0") of 63 bits as a tagged word instead of a
 * reference: (v << 1) | 1, which no object's address is. 40-48 B a key less for counters and
 * ids; a read makes the bytes again (Redis formats the integer into its reply likewise).
 * Everything that reads e->value goes through val_new (a new reference) or is TAGGED-aware. */
#define TAGGED(v) (((uintptr_t)(v)) & 1u)
#define TAG_MIN (-((int64_t)1 << 62))
#define TAG_MAX (((int64_t)1 << 62) - 1)

/* What an entry keeps for value: its tag, or value itself (borrowed). */
static inline PyObject *as_stored(PyObject *value)
{
    if (!PyBytes_CheckExact(value))
        return value;
    Py_ssize_t n = PyBytes_GET_SIZE(value);
    const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(value);
    int64_t v;
    if (n == 0 || n > 20 || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) ||
            !canonical_int(s, n, &v) || v < TAG_MIN || v > TAG_MAX)
        return value;
    return (PyObject *)(uintptr_t)(((uint64_t)v << 1) | 1u);
}

static inline void val_incref(PyObject *v)
{
    if (!TAGGED(v))
        Py_INCREF(v);
}

static inline void val_release(PyObject *v)
{
    if (v != NULL && !TAGGED(v))
        Py_DECREF(v);
}

/* The bytes of a tagged integer (a new reference). */
static PyObject *untag(PyObject *v)
{
    int64_t x = (int64_t)((intptr_t)v >> 1);
    char buf[24], *p = buf + sizeof buf;
    uint64_t u = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        *--p = '-';
    return PyBytes_FromStringAndSize(p, buf + sizeof buf - p);
}

/* A new reference to the value an entry keeps. */
static inline PyObject *val_new(PyObject *v)
{
    return TAGGED(v) ? untag(v) : Py_NewRef(v);
}

/* An entry's value taken out of it (the entry's reference moves to the caller). */
static inline PyObject *val_take(PyObject *v)
{
    return TAGGED(v) ? untag(v) : v;
}

typedef struct {
    int32_t next;   /* the next older entry in the slot's list (maybe a hole), -1: none */
    uint32_t slot;  /* the key's hash slot */
} link_t;

typedef struct {
    int32_t head;   /* the newest entry in the slot's list (maybe a hole), -1: none */
    int32_t count;  /* the slot's keys (holes not counted) */
} slothead_t;

typedef struct {
    PyObject_HEAD
    Py_ssize_t used;        /* live entries */
    Py_ssize_t nentries;    /* entries[0, nentries) in use, holes included */
    Py_ssize_t ecap;        /* entries allocated */
    Py_ssize_t isize;       /* index slots, a power of two */
    int32_t *index;
    entry_t *entries;
    uint64_t mods;
    int ageing;
    slothead_t *slots;      /* NULL: no per-slot index */
    link_t *links;          /* with slots: lcap >= ecap of them, parallel to entries */
    Py_ssize_t lcap;
} KTObject;

static PyTypeObject KTType, KTIterType, KTViewType;

#define KT_Check(o) PyObject_TypeCheck(o, &KTType)

static inline uint32_t hash32(Py_hash_t h) { return (uint32_t)(size_t)h; }

static int32_t *new_index(Py_ssize_t isize)
{
    int32_t *ix = PyMem_Malloc((size_t)isize * sizeof(int32_t));
    if (ix == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    memset(ix, 0xff, (size_t)isize * sizeof(int32_t));     /* all IX_EMPTY */
    return ix;
}

static Py_ssize_t isize_for(Py_ssize_t n)
{
    Py_ssize_t s = MINSIZE;
    while (USABLE(s) < n)
        s <<= 1;
    return s;
}

/* -- the per-slot index ----------------------------------------------------------------- */

/* Whether the index is on: unlikely, so that the compiler keeps the table's paths as they were
   without it (its work in functions of their own, out of line). */
#define SLOTS_ON(t) __builtin_expect((t)->slots != NULL, 0)

static inline unsigned int bytes_slot(PyObject *key)
{
    return key_hash_slot(PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key));
}

/* Room for n links (only grows; a failure leaves the table as it was). */
static int grow_links(KTObject *t, Py_ssize_t n)
{
    if (n <= t->lcap)
        return 0;
    link_t *l = PyMem_Realloc(t->links, (size_t)n * sizeof(link_t));
    if (l == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->links = l;
    t->lcap = n;
    return 0;
}

/* The entry at ix put at the head of `slot`'s list (slotToKeyAddEntry). */
static inline void slot_link(KTObject *t, Py_ssize_t ix, unsigned int slot)
{
    slothead_t *s = &t->slots[slot];
    link_t *l = &t->links[ix];
    l->next = s->count ? s->head : -1;      /* (no keys: only holes there, dropped) */
    l->slot = slot;
    s->head = (int32_t)ix;
    s->count++;
}

static void slots_reset(KTObject *t)
{
    for (Py_ssize_t s = 0; s < CLUSTER_SLOTS; s++) {
        t->slots[s].head = -1;
        t->slots[s].count = 0;
    }
}

/* The entry at ix, whose key is going, out of its slot's count (slotToKeyDelEntry); its link
   stays in the list, a hole, until slot_keys() or a rebuild drops it. */
static __attribute__((noinline, cold)) void slot_forget(KTObject *t, Py_ssize_t ix)
{
    t->slots[t->links[ix].slot].count--;
}

/* The position in entries of `key`, -1 when absent, -2 on an error; *slotp its index slot. */
static Py_ssize_t lookup(KTObject *t, PyObject *key, uint32_t h, Py_ssize_t *slotp)
{
restart:;
    size_t mask = (size_t)t->isize - 1, perturb = h, i = h & mask;
    int bytes = PyBytes_CheckExact(key);
    for (;;) {
        int32_t ix = t->index[i];
        if (ix == IX_EMPTY)
            return -1;
        if (ix >= 0) {
            entry_t *e = &t->entries[ix];
            PyObject *k = e->key;
            if (k == key) {
                if (slotp) *slotp = (Py_ssize_t)i;
                return ix;
            }
            if (e->hash == h) {
                if (bytes && PyBytes_CheckExact(k)) {
                    if (Py_SIZE(k) == Py_SIZE(key) &&
                            memcmp(PyBytes_AS_STRING(k), PyBytes_AS_STRING(key),
                                   (size_t)Py_SIZE(key)) == 0) {
                        if (slotp) *slotp = (Py_ssize_t)i;
                        return ix;
                    }
                }
                else {
                    entry_t *ep0 = t->entries;
                    uint64_t mods = t->mods;
                    Py_INCREF(k);
                    int cmp = PyObject_RichCompareBool(k, key, Py_EQ);
                    Py_DECREF(k);
                    if (cmp < 0)
                        return -2;
                    if (ep0 != t->entries || mods != t->mods || t->entries[ix].key != k)
                        goto restart;   /* the comparison changed the table */
                    if (cmp > 0) {
                        if (slotp) *slotp = (Py_ssize_t)i;
                        return ix;
                    }
                }
            }
        }
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + perturb + 1) & mask;
    }
}

static inline Py_ssize_t empty_slot(int32_t *index, Py_ssize_t isize, uint32_t h)
{
    size_t mask = (size_t)isize - 1, perturb = h, i = h & mask;
    while (index[i] >= 0) {
        perturb >>= PERTURB_SHIFT;
        i = (i * 5 + perturb + 1) & mask;
    }
    return (Py_ssize_t)i;
}

/* rebuild()'s loop for a table that tracks slots: the entries compacted into `index` (of
   isize slots) and each slot's list made again from them, in their order (the counts stay);
   answers how many entries there are. */
static __attribute__((noinline)) Py_ssize_t
compact_linked(KTObject *t, int32_t *index, Py_ssize_t isize)
{
    entry_t *entries = t->entries;
    link_t *links = t->links;
    slothead_t *slots = t->slots;
    Py_ssize_t j = 0;
    /* every list with keys starts again empty (a list without keys may keep its head: the next
       key into it starts it anew, slot_link); the slots of the keys, or all of them when that
       is fewer */
    if (t->used < CLUSTER_SLOTS) {
        for (Py_ssize_t i = 0; i < t->nentries; i++)
            if (entries[i].key != NULL)
                slots[links[i].slot].head = -1;
    }
    else {
        for (Py_ssize_t s = 0; s < CLUSTER_SLOTS; s++)
            slots[s].head = -1;
    }
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        if (entries[i].key == NULL)
            continue;
        uint32_t slot = links[i].slot;      /* (j <= i: links[j] is free to write) */
        if (i != j)
            entries[j] = entries[i];
        links[j].slot = slot;
        links[j].next = slots[slot].head;
        slots[slot].head = (int32_t)j;
        index[empty_slot(index, isize, entries[j].hash)] = (int32_t)j;
        j++;
    }
    return j;
}

/* Compact the entries (holes out, order kept) into room for new_ecap and rebuild an index of
   new_isize slots. On MemoryError nothing has changed. */
static int rebuild(KTObject *t, Py_ssize_t new_isize, Py_ssize_t new_ecap)
{
    int32_t *index = new_index(new_isize);
    if (index == NULL)
        return -1;
    entry_t *entries = t->entries;
    if (new_ecap > t->ecap) {
        if (t->slots != NULL && grow_links(t, new_ecap) < 0) {  /* (more links than entries: */
            PyMem_Free(index);                                   /*  harmless) */
            return -1;
        }
        entries = PyMem_Realloc(entries, (size_t)new_ecap * sizeof(entry_t));
        if (entries == NULL) {
            PyMem_Free(index);
            PyErr_NoMemory();
            return -1;
        }
        t->entries = entries;
        t->ecap = new_ecap;
    }
    Py_ssize_t j = 0;
    if (SLOTS_ON(t)) {
        j = compact_linked(t, index, new_isize);
    }
    else {
        for (Py_ssize_t i = 0; i < t->nentries; i++) {
            if (entries[i].key == NULL)
                continue;
            if (i != j)
                entries[j] = entries[i];
            index[empty_slot(index, new_isize, entries[j].hash)] = (int32_t)j;
            j++;
        }
    }
    t->nentries = j;
    PyMem_Free(t->index);
    t->index = index;
    t->isize = new_isize;
    if (new_ecap < t->ecap) {
        entry_t *smaller = new_ecap ? PyMem_Realloc(entries, (size_t)new_ecap * sizeof(entry_t))
                                    : (PyMem_Free(entries), NULL);
        if (smaller != NULL || new_ecap == 0) {     /* (a failed shrink keeps the old block) */
            t->entries = smaller;
            t->ecap = new_ecap;
            if (t->slots != NULL && new_ecap < t->lcap) {
                link_t *l = new_ecap ? PyMem_Realloc(t->links, (size_t)new_ecap * sizeof(link_t))
                                     : (PyMem_Free(t->links), NULL);
                if (l != NULL || new_ecap == 0) {
                    t->links = l;
                    t->lcap = new_ecap;
                }
            }
        }
    }
    t->mods++;
    return 0;
}

/* Room for one more entry (nentries == ecap). */
static int make_room(KTObject *t)
{
    Py_ssize_t holes = t->nentries - t->used, usable = USABLE(t->isize);
    if (holes > 0 && holes * 8 >= t->nentries)
        return rebuild(t, t->isize, t->ecap);
    if (t->ecap < usable) {
        Py_ssize_t ecap = t->ecap + (t->ecap >> 1) + 4;
        if (ecap > usable)
            ecap = usable;
        if (t->slots != NULL && grow_links(t, ecap) < 0)
            return -1;
        entry_t *e = PyMem_Realloc(t->entries, (size_t)ecap * sizeof(entry_t));
        if (e == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->entries = e;
        t->ecap = ecap;
        return 0;
    }
    if (t->used >= MAX_ENTRIES) {
        PyErr_SetString(PyExc_OverflowError, "KeyTable is full");
        return -1;
    }
    Py_ssize_t isize = isize_for(t->used + (t->used >> 1) + 1);    /* twice the slots */
    Py_ssize_t ecap = t->used + (t->used >> 1) + 4;
    if (ecap > USABLE(isize))
        ecap = USABLE(isize);
    if (ecap < t->ecap)
        ecap = t->ecap;
    return rebuild(t, isize, ecap);
}

/* dict's MAINTAIN_TRACKING: a table of atomic keys and values (bytes, as a database of strings
   holds) stays out of the collector's walks, a table that may hold a cycle is tracked. */
static inline int may_be_tracked(PyObject *o)
{
    return PyObject_IS_GC(o) && (!PyTuple_CheckExact(o) || PyObject_GC_IsTracked(o));
}

static inline void maybe_track(KTObject *t, PyObject *key, PyObject *value)
{
    if (!PyObject_GC_IsTracked((PyObject *)t) &&
            (may_be_tracked(key) || (!TAGGED(value) && may_be_tracked(value))))
        PyObject_GC_Track((PyObject *)t);
}

/* insert_new's body: `key_slot` < 0 for a table without the index (a constant there, so the
   compiler leaves the index's work out of that copy), else the key's slot. */
static inline __attribute__((always_inline)) int
insert_at(KTObject *t, PyObject *key, PyObject *value, uint32_t h, uint32_t age, int key_slot)
{
    if (t->nentries >= t->ecap && make_room(t) < 0)
        return -1;
    Py_ssize_t slot = empty_slot(t->index, t->isize, h);
    Py_ssize_t ix = t->nentries++;
    entry_t *e = &t->entries[ix];
    Py_INCREF(key);
    val_incref(value);
    e->key = key;
    e->value = value;
    e->age = age;
    e->hash = h;
    t->index[slot] = (int32_t)ix;
    t->used++;
    t->mods++;
    if (key_slot >= 0)
        slot_link(t, ix, (unsigned int)key_slot);
    maybe_track(t, key, value);
    return 0;
}

/* insert_new into a table that tracks slots: TypeError, nothing changed, unless key is bytes. */
static __attribute__((noinline)) int
insert_indexed(KTObject *t, PyObject *key, PyObject *value, uint32_t h, uint32_t age)
{
    if (!PyBytes_Check(key)) {
        PyErr_Format(PyExc_TypeError, "a KeyTable that tracks slots takes bytes keys, not %.200s",
                     Py_TYPE(key)->tp_name);
        return -1;
    }
    return insert_at(t, key, value, h, age, (int)bytes_slot(key));
}

/* insert_new into a table without the index. */
static int insert_plain(KTObject *t, PyObject *key, PyObject *value, uint32_t h, uint32_t age)
{
    return insert_at(t, key, value, h, age, -1);
}

/* Add a key known to be absent, with `value` as an entry keeps it (as_stored); new refs taken.
   (Inlined: the test in the caller, whose registers are saved already, where in a function of
   its own the plain path's prologue came first: 22 instructions a key more with the index.) */
static inline __attribute__((always_inline)) int
insert_new(KTObject *t, PyObject *key, PyObject *value, uint32_t h, uint32_t age)
{
    if (SLOTS_ON(t))
        return insert_indexed(t, key, value, h, age);
    return insert_plain(t, key, value, h, age);
}

static int kt_hash(PyObject *key, uint32_t *h)
{
    Py_hash_t hash = PyObject_Hash(key);
    if (hash == -1)
        return -1;
    *h = hash32(hash);
    return 0;
}

/* -- prefetch: a run's keys brought towards the cache before they are looked up -------------
 *
 * A lookup of a key that is not in the cache waits for memory three times in a row: the index
 * slot, the entry, the stored key (compared). A pipelined run of commands on random keys
 * (redis-benchmark -P16) pays that serially for each; prefetch() issues the first loads of up
 * to PREFETCH_MAX keys at once, in three passes, so that their waits overlap. It changes
 * nothing: no age, no order, no error (a key that is not bytes, or whose hash is not cached
 * and cannot be computed, is skipped), and lookups find what they found without it. */
#define PREFETCH_MAX 64

static void kt_prefetch(KTObject *t, PyObject *const *keys, Py_ssize_t n)
{
    uint32_t h[PREFETCH_MAX];
    Py_ssize_t slot[PREFETCH_MAX];
    if (t->used == 0)
        return;
    if (n > PREFETCH_MAX)
        n = PREFETCH_MAX;
    size_t mask = (size_t)t->isize - 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = keys[i];
        if (k == NULL || !PyBytes_CheckExact(k)) {
            slot[i] = -1;
            continue;
        }
        h[i] = hash32(Py_TYPE(k)->tp_hash(k));   /* (bytes: never fails, cached) */
        slot[i] = (Py_ssize_t)(h[i] & mask);
        __builtin_prefetch(&t->index[slot[i]]);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (slot[i] < 0)
            continue;
        int32_t ix = t->index[slot[i]];
        if (ix < 0) {
            slot[i] = -1;
            continue;
        }
        slot[i] = ix;
        __builtin_prefetch(&t->entries[ix]);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (slot[i] < 0)
            continue;
        entry_t *e = &t->entries[slot[i]];
        if (e->hash == h[i] && e->key != NULL) {    /* (its size, then its bytes) */
            __builtin_prefetch(e->key);
            __builtin_prefetch((char *)e->key + offsetof(PyBytesObject, ob_sval));
            if (!TAGGED(e->value))
                __builtin_prefetch(e->value);
        }
    }
}

static PyObject *kt_prefetch_method(KTObject *t, PyObject *keys)
{
    if (!PyList_Check(keys))
        return PyErr_Format(PyExc_TypeError, "prefetch(keys: list)");
    kt_prefetch(t, PySequence_Fast_ITEMS(keys), PyList_GET_SIZE(keys));
    Py_RETURN_NONE;
}

/* Store key -> `value` as an entry keeps it (as_stored); an existing key keeps its place and
   is touched (setKey). */
static int kt_set_stored(KTObject *t, PyObject *key, PyObject *value)
{
    uint32_t h;
    if (kt_hash(key, &h) < 0)
        return -1;
    Py_ssize_t ix = lookup(t, key, h, NULL);
    if (ix == -2)
        return -1;
    if (ix >= 0) {
        entry_t *e = &t->entries[ix];
        PyObject *old = e->value;
        val_incref(value);
        e->value = value;
        if (t->ageing)
            e->age = touched(e->age);
        maybe_track(t, key, value);
        val_release(old);
        return 0;
    }
    return insert_new(t, key, value, h, t->ageing ? initial_age() : 0);
}

static inline int kt_set(KTObject *t, PyObject *key, PyObject *value)
{
    return kt_set_stored(t, key, as_stored(value));
}

/* Remove the entry at ix (index slot `slot`); answers the value as the entry kept it (its
   reference moves to the caller: val_take or val_release it). */
static inline __attribute__((always_inline)) PyObject *
kt_remove_at(KTObject *t, Py_ssize_t ix, Py_ssize_t slot)
{
    entry_t *e = &t->entries[ix];
    PyObject *key = e->key, *value = e->value;
    if (SLOTS_ON(t))
        slot_forget(t, ix);
    t->index[slot] = IX_DUMMY;
    e->key = NULL;
    e->value = NULL;
    t->used--;
    t->mods++;
    Py_DECREF(key);
    return value;
}

/* The value of key (a new reference) or NULL (no error set when absent); touches when
   `touch`. */
static PyObject *kt_get(KTObject *t, PyObject *key, int touch)
{
    uint32_t h;
    if (kt_hash(key, &h) < 0)
        return NULL;
    Py_ssize_t ix = lookup(t, key, h, NULL);
    if (ix < 0)
        return NULL;
    entry_t *e = &t->entries[ix];
    if (touch && t->ageing)
        e->age = touched(e->age);
    return val_new(e->value);
}

static void kt_release(entry_t *entries, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(entries[i].key);
        val_release(entries[i].value);
    }
    PyMem_Free(entries);
}

static int kt_clear_all(KTObject *t)
{
    int32_t *index = new_index(MINSIZE);
    if (index == NULL)
        return -1;
    entry_t *entries = t->entries;
    Py_ssize_t n = t->nentries;
    PyMem_Free(t->index);
    t->index = index;
    t->isize = MINSIZE;
    t->entries = NULL;
    t->ecap = t->nentries = t->used = 0;
    t->mods++;
    if (t->slots != NULL) {
        slots_reset(t);
        PyMem_Free(t->links);
        t->links = NULL;
        t->lcap = 0;
    }
    kt_release(entries, n);     /* (after the table is consistent: a __del__ may look at it) */
    return 0;
}

/* -- type slots ---------------------------------------------------------------------------- */

static PyObject *kt_alloc(PyTypeObject *type, int ageing)
{
    KTObject *t = (KTObject *)type->tp_alloc(type, 0);
    if (t == NULL)
        return NULL;
    /* tp_alloc tracked it: a table starts untracked, as an empty dict does (maybe_track) */
    PyObject_GC_UnTrack(t);
    t->index = new_index(MINSIZE);
    if (t->index == NULL) {
        Py_DECREF(t);
        return NULL;
    }
    t->isize = MINSIZE;
    t->ageing = ageing;
    return (PyObject *)t;
}

static PyObject *kt_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"ageing", NULL};
    int ageing = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:KeyTable", kwlist, &ageing))
        return NULL;
    return kt_alloc(type, ageing);
}

static int kt_traverse(KTObject *t, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        Py_VISIT(t->entries[i].key);
        if (!TAGGED(t->entries[i].value))
            Py_VISIT(t->entries[i].value);
    }
    return 0;
}

static int kt_tp_clear(KTObject *t)
{
    entry_t *entries = t->entries;
    Py_ssize_t n = t->nentries;
    t->entries = NULL;
    t->ecap = t->nentries = t->used = 0;
    if (t->index != NULL)
        memset(t->index, 0xff, (size_t)t->isize * sizeof(int32_t));
    t->mods++;
    if (t->slots != NULL)
        slots_reset(t);     /* (links kept: lcap >= ecap = 0 holds) */
    kt_release(entries, n);
    return 0;
}

static void kt_dealloc(KTObject *t)
{
    PyObject_GC_UnTrack(t);
    Py_TRASHCAN_BEGIN(t, kt_dealloc)
    kt_tp_clear(t);
    PyMem_Free(t->index);
    PyMem_Free(t->slots);
    PyMem_Free(t->links);
    Py_TYPE(t)->tp_free((PyObject *)t);
    Py_TRASHCAN_END
}

static Py_ssize_t kt_length(KTObject *t) { return t->used; }

static PyObject *kt_subscript(KTObject *t, PyObject *key)
{
    PyObject *v = kt_get(t, key, 1);
    if (v == NULL && !PyErr_Occurred())
        _PyErr_SetKeyError(key);
    return v;
}

static int kt_del(KTObject *t, PyObject *key)
{
    uint32_t h;
    Py_ssize_t slot;
    if (kt_hash(key, &h) < 0)
        return -1;
    Py_ssize_t ix = lookup(t, key, h, &slot);
    if (ix < 0) {
        if (ix == -1)
            _PyErr_SetKeyError(key);
        return -1;
    }
    val_release(kt_remove_at(t, ix, slot));
    return 0;
}

static int kt_ass_subscript(KTObject *t, PyObject *key, PyObject *value)
{
    return value == NULL ? kt_del(t, key) : kt_set(t, key, value);
}

static int kt_contains(KTObject *t, PyObject *key)
{
    uint32_t h;
    if (kt_hash(key, &h) < 0)
        return -1;
    Py_ssize_t ix = lookup(t, key, h, NULL);
    return ix == -2 ? -1 : ix >= 0;
}

static PyObject *kt_repr(KTObject *t)
{
    int rc = Py_ReprEnter((PyObject *)t);
    if (rc != 0)
        return rc > 0 ? PyUnicode_FromString("KeyTable({...})") : NULL;
    PyObject *d = PyDict_New(), *r = NULL;
    if (d == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        entry_t *e = &t->entries[i];
        if (e->key == NULL)
            continue;
        PyObject *v = val_new(e->value);
        int rc = v == NULL ? -1 : PyDict_SetItem(d, e->key, v);
        Py_XDECREF(v);
        if (rc < 0)
            goto done;
    }
    r = PyUnicode_FromFormat("KeyTable(%R)", d);
done:
    Py_XDECREF(d);
    Py_ReprLeave((PyObject *)t);
    return r;
}

/* Equal to a dict or a KeyTable with the same keys and equal values (ages not compared). */
static PyObject *kt_richcompare(PyObject *self, PyObject *other, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !(KT_Check(other) || PyDict_Check(other)))
        Py_RETURN_NOTIMPLEMENTED;
    KTObject *t = (KTObject *)self;
    Py_ssize_t olen = KT_Check(other) ? ((KTObject *)other)->used : PyDict_GET_SIZE(other);
    int eq = t->used == olen;
    for (Py_ssize_t i = 0; eq && i < t->nentries; i++) {
        entry_t *e = &t->entries[i];
        if (e->key == NULL)
            continue;
        PyObject *v = val_new(e->value), *ov;
        if (v == NULL)
            return NULL;
        PyObject *k = Py_NewRef(e->key);
        if (KT_Check(other)) {
            ov = kt_get((KTObject *)other, k, 0);
        }
        else {
            ov = Py_XNewRef(PyDict_GetItemWithError(other, k));
        }
        if (ov == NULL) {
            Py_DECREF(k);
            Py_DECREF(v);
            if (PyErr_Occurred())
                return NULL;
            eq = 0;
            break;
        }
        int cmp = PyObject_RichCompareBool(v, ov, Py_EQ);
        Py_DECREF(ov);
        Py_DECREF(k);
        Py_DECREF(v);
        if (cmp < 0)
            return NULL;
        eq = cmp;
    }
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

/* -- methods ------------------------------------------------------------------------------- */

/* get / peek: the value, or the default (None); ``touch``: stamp the key's age. */
static PyObject *kt_lookup_or_default(KTObject *t, PyObject *const *args, Py_ssize_t nargs,
                                      const char *name, int touch)
{
    if (!_PyArg_CheckPositional(name, nargs, 1, 2))
        return NULL;
    PyObject *v = kt_get(t, args[0], touch);
    if (v == NULL && !PyErr_Occurred())
        v = Py_NewRef(nargs > 1 ? args[1] : Py_None);
    return v;
}

static PyObject *kt_get_method(KTObject *t, PyObject *const *args, Py_ssize_t nargs)
{
    return kt_lookup_or_default(t, args, nargs, "get", 1);
}

static PyObject *kt_peek(KTObject *t, PyObject *const *args, Py_ssize_t nargs)
{
    return kt_lookup_or_default(t, args, nargs, "peek", 0);
}

static PyObject *kt_pop(KTObject *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (!_PyArg_CheckPositional("pop", nargs, 1, 2))
        return NULL;
    uint32_t h;
    Py_ssize_t slot;
    if (kt_hash(args[0], &h) < 0)
        return NULL;
    Py_ssize_t ix = lookup(t, args[0], h, &slot);
    if (ix == -2)
        return NULL;
    if (ix == -1) {
        if (nargs > 1)
            return Py_NewRef(args[1]);
        _PyErr_SetKeyError(args[0]);
        return NULL;
    }
    return val_take(kt_remove_at(t, ix, slot));
}

static PyObject *kt_setdefault(KTObject *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (!_PyArg_CheckPositional("setdefault", nargs, 1, 2))
        return NULL;
    PyObject *dflt = nargs > 1 ? args[1] : Py_None;
    uint32_t h;
    if (kt_hash(args[0], &h) < 0)
        return NULL;
    Py_ssize_t ix = lookup(t, args[0], h, NULL);
    if (ix == -2)
        return NULL;
    if (ix >= 0) {
        entry_t *e = &t->entries[ix];
        if (t->ageing)
            e->age = touched(e->age);
        return val_new(e->value);
    }
    if (insert_new(t, args[0], as_stored(dflt), h, t->ageing ? initial_age() : 0) < 0)
        return NULL;
    return Py_NewRef(dflt);
}

static PyObject *kt_clear(KTObject *t, PyObject *Py_UNUSED(ignored))
{
    if (kt_clear_all(t) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *new_table(int ageing, Py_ssize_t room)
{
    KTObject *t = (KTObject *)kt_alloc(&KTType, ageing);
    if (t == NULL)
        return NULL;
    if (room > 0) {
        Py_ssize_t isize = isize_for(room);
        if (rebuild(t, isize, room) < 0) {
            Py_DECREF(t);
            return NULL;
        }
    }
    return (PyObject *)t;
}

/* The per-slot index turned on, the keys present indexed in their order (so each slot's list
   is newest first); nothing when it is on already. TypeError, nothing changed, when a key is
   not bytes. */
static int track_slots(KTObject *t)
{
    if (t->slots != NULL)
        return 0;
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        PyObject *k = t->entries[i].key;
        if (k != NULL && !PyBytes_Check(k)) {
            PyErr_Format(PyExc_TypeError, "track_slots: a key is not bytes but %.200s",
                         Py_TYPE(k)->tp_name);
            return -1;
        }
    }
    slothead_t *slots = PyMem_Malloc(CLUSTER_SLOTS * sizeof(slothead_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (grow_links(t, t->ecap) < 0) {
        PyMem_Free(slots);
        return -1;
    }
    t->slots = slots;
    slots_reset(t);
    for (Py_ssize_t i = 0; i < t->nentries; i++)
        if (t->entries[i].key != NULL)
            slot_link(t, i, bytes_slot(t->entries[i].key));
    return 0;
}

/* A compact copy, ages and all (and the per-slot index, when this one has it). */
static PyObject *kt_copy(KTObject *t, PyObject *Py_UNUSED(ignored))
{
    KTObject *c = (KTObject *)new_table(t->ageing, t->used);
    if (c == NULL)
        return NULL;
    if (t->slots != NULL && track_slots(c) < 0) {
        Py_DECREF(c);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < t->nentries; i++) {
        entry_t *e = &t->entries[i];
        if (e->key == NULL)
            continue;
        /* (no Python code runs here: keys are known distinct, room is reserved) */
        if (insert_new(c, e->key, e->value, e->hash, e->age) < 0) {
            Py_DECREF(c);
            return NULL;
        }
    }
    return (PyObject *)c;
}

static int kt_set_pair(void *t, PyObject *key, PyObject *value)
{
    return kt_set((KTObject *)t, key, value);
}

static int kt_update_from(KTObject *t, PyObject *other)
{
    if (PyDict_CheckExact(other)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        Py_INCREF(other);
        while (PyDict_Next(other, &pos, &k, &v)) {
            Py_INCREF(k);
            Py_INCREF(v);
            int rc = kt_set(t, k, v);
            Py_DECREF(k);
            Py_DECREF(v);
            if (rc < 0) {
                Py_DECREF(other);
                return -1;
            }
        }
        Py_DECREF(other);
        return 0;
    }
    PyObject *keys = NULL;
    if (KT_Check(other)) {
        keys = PySequence_List(other);
    }
    else {
        int has = PyObject_HasAttrString(other, "keys");
        if (has) {
            PyObject *kv = PyObject_CallMethod(other, "keys", NULL);
            if (kv == NULL)
                return -1;
            keys = PySequence_List(kv);
            Py_DECREF(kv);
        }
    }
    if (keys != NULL || PyErr_Occurred()) {
        if (keys == NULL)
            return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys); i++) {
            PyObject *k = PyList_GET_ITEM(keys, i);
            PyObject *v = KT_Check(other) ? kt_get((KTObject *)other, k, 0)
                                          : PyObject_GetItem(other, k);
            if (v == NULL) {
                if (!PyErr_Occurred())
                    _PyErr_SetKeyError(k);
                Py_DECREF(keys);
                return -1;
            }
            int rc = kt_set(t, k, v);
            Py_DECREF(v);
            if (rc < 0) {
                Py_DECREF(keys);
                return -1;
            }
        }
        Py_DECREF(keys);
        return 0;
    }
    return update_from_pairs(t, other, kt_set_pair, "KeyTable");
}

static PyObject *kt_update(KTObject *t, PyObject *other)
{
    if (kt_update_from(t, other) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *kt_from_dict(PyTypeObject *Py_UNUSED(cls), PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"mapping", "ageing", NULL};
    PyObject *mapping;
    int ageing = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|p:from_dict", kwlist, &mapping, &ageing))
        return NULL;
    Py_ssize_t n = PyObject_Length(mapping);
    if (n < 0) {
        PyErr_Clear();
        n = 0;
    }
    PyObject *t = new_table(ageing, n);
    if (t == NULL)
        return NULL;
    if (kt_update_from((KTObject *)t, mapping) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return t;
}

/* The entry of key: its index, -1 absent, -2 an error (its hash or comparison raised). */
static Py_ssize_t find_key(KTObject *t, PyObject *key)
{
    uint32_t h;
    if (kt_hash(key, &h) < 0)
        return -2;
    return lookup(t, key, h, NULL);
}

static PyObject *kt_age(KTObject *t, PyObject *key)
{
    Py_ssize_t ix = find_key(t, key);
    if (ix == -2)
        return NULL;
    if (ix == -1)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(t->entries[ix].age);
}

/* Where the key's value is held (DEBUG OBJECT's "at:"): the value object's address, or, for
   an integer kept in the entry, the entry's (the same while INCR changes it in place). */
static PyObject *kt_entry_at(KTObject *t, PyObject *key)
{
    Py_ssize_t ix = find_key(t, key);
    if (ix == -2)
        return NULL;
    if (ix == -1) {
        _PyErr_SetKeyError(key);
        return NULL;
    }
    entry_t *e = &t->entries[ix];
    return PyLong_FromVoidPtr(TAGGED(e->value) ? (void *)e : (void *)e->value);
}

static PyObject *kt_set_age(KTObject *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (!_PyArg_CheckPositional("set_age", nargs, 2, 2))
        return NULL;
    unsigned long long v = PyLong_AsUnsignedLongLong(args[1]);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError))
            goto range;
        return NULL;
    }
    if (v > AGE_MAX)
        goto range;
    uint32_t h;
    if (kt_hash(args[0], &h) < 0)
        return NULL;
    Py_ssize_t ix = lookup(t, args[0], h, NULL);
    if (ix == -2)
        return NULL;
    if (ix == -1) {
        _PyErr_SetKeyError(args[0]);
        return NULL;
    }
    t->entries[ix].age = (uint32_t)v;
    Py_RETURN_NONE;
range:
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError, "an age is 24 bits: 0 <= age < 2**24");
    return NULL;
}

#define SAMPLE_PICKS 64     /* up to this many, independent picks; more: one contiguous walk */

/* Up to n distinct live keys at random (dictGetSomeKeys' contract, O(n)): each pick a random
   position, walked forward to the next live entry not picked yet; at most 10 * n steps. */
static PyObject *kt_sample(KTObject *t, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL || n <= 0 || t->used == 0)
        return out;
    Py_ssize_t count = n < t->used ? n : t->used;
    Py_ssize_t steps = count * 10, ne = t->nentries;
    entry_t *entries = t->entries;
    if (count <= SAMPLE_PICKS) {
        Py_ssize_t picked[SAMPLE_PICKS], np = 0;
        while (np < count && steps > 0) {
            Py_ssize_t i = (Py_ssize_t)(splitmix64(&g.sample_rng) % (uint64_t)ne);
            for (Py_ssize_t walked = 0; walked < ne && steps > 0; walked++, steps--) {
                if (entries[i].key != NULL) {
                    Py_ssize_t j = 0;
                    while (j < np && picked[j] != i)
                        j++;
                    if (j == np) {
                        picked[np++] = i;
                        break;
                    }
                }
                if (++i == ne)
                    i = 0;
            }
        }
        for (Py_ssize_t j = 0; j < np; j++)
            if (PyList_Append(out, entries[picked[j]].key) < 0) {
                Py_DECREF(out);
                return NULL;
            }
        return out;
    }
    Py_ssize_t i = (Py_ssize_t)(splitmix64(&g.sample_rng) % (uint64_t)ne);
    for (Py_ssize_t walked = 0; walked < ne && steps > 0 && PyList_GET_SIZE(out) < count;
            walked++, steps--) {
        if (entries[i].key != NULL && PyList_Append(out, entries[i].key) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        if (++i == ne)
            i = 0;
    }
    return out;
}

static PyObject *kt_track_slots(KTObject *t, PyObject *Py_UNUSED(ignored))
{
    if (track_slots(t) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The slot argument, 0 <= slot < CLUSTER_SLOTS, of a table that tracks slots; -1 with an
   exception. */
static Py_ssize_t slot_arg(KTObject *t, PyObject *arg)
{
    if (t->slots == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the KeyTable does not track slots (track_slots())");
        return -1;
    }
    Py_ssize_t slot = PyNumber_AsSsize_t(arg, NULL);     /* (clipped: out of range) */
    if (slot == -1 && PyErr_Occurred())
        return -1;
    if (slot < 0 || slot >= CLUSTER_SLOTS) {
        PyErr_SetString(PyExc_ValueError, "slot out of range: 0 <= slot < 16384");
        return -1;
    }
    return slot;
}

static PyObject *kt_slot_count(KTObject *t, PyObject *arg)
{
    Py_ssize_t slot = slot_arg(t, arg);
    if (slot < 0)
        return NULL;
    return PyLong_FromLong(t->slots[slot].count);
}

/* Up to count keys of the slot, newest first (CLUSTER GETKEYSINSLOT); the holes of deleted keys
   met on the way are unlinked (each once: O(count) amortized). */
static PyObject *kt_slot_keys(KTObject *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (!_PyArg_CheckPositional("slot_keys", nargs, 2, 2))
        return NULL;
    Py_ssize_t slot = slot_arg(t, args[0]);
    if (slot < 0)
        return NULL;
    Py_ssize_t count = PyNumber_AsSsize_t(args[1], NULL);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "count is >= 0");
        return NULL;
    }
    if (count > t->slots[slot].count)
        count = t->slots[slot].count;
    PyObject *out = PyList_New(count);
    if (out == NULL)
        return NULL;
    slothead_t *sh = &t->slots[slot];
    link_t *links = t->links;
    int32_t ix = sh->head, prev = -1;
    for (Py_ssize_t j = 0; j < count; ix = links[ix].next) {
        if (ix < 0) {       /* (the list holds each of the slot's keys: never) */
            Py_DECREF(out);
            PyErr_SetString(PyExc_SystemError, "KeyTable: a slot's list lost keys");
            return NULL;
        }
        PyObject *k = t->entries[ix].key;
        if (k == NULL) {            /* a deleted key's hole: out of the list */
            if (prev < 0)
                sh->head = links[ix].next;
            else
                links[prev].next = links[ix].next;
            continue;
        }
        PyList_SET_ITEM(out, j++, Py_NewRef(k));
        prev = ix;
    }
    return out;
}

/* How many holes the slot's list holds (tests: slot_keys unlinks those it passes, a rebuild
   drops them all); -1 when the list does not end as it should: after each of the slot's keys and
   at most every hole, with -1 (a slot without keys: whatever, see slot_link). */
static PyObject *kt_slot_holes(KTObject *t, PyObject *arg)
{
    Py_ssize_t slot = slot_arg(t, arg);
    if (slot < 0)
        return NULL;
    Py_ssize_t holes = 0, seen = 0;
    if (t->slots[slot].count == 0)
        return PyLong_FromLong(0);
    for (int32_t ix = t->slots[slot].head; ix != -1; ix = t->links[ix].next) {
        if (ix < 0 || ix >= t->nentries || holes + seen >= t->nentries ||
                t->links[ix].slot != (uint32_t)slot)
            return PyLong_FromLong(-1);
        if (t->entries[ix].key == NULL)
            holes++;
        else
            seen++;
    }
    return PyLong_FromSsize_t(seen == t->slots[slot].count ? holes : -1);
}

/* Rebuild at the minimal size when under 10 % full (tryResizeHashTables); whether it did. */
static PyObject *kt_shrink(KTObject *t, PyObject *Py_UNUSED(ignored))
{
    if (t->isize <= MINSIZE || t->used * 10 >= USABLE(t->isize))
        Py_RETURN_FALSE;
    Py_ssize_t isize = isize_for(t->used + (t->used >> 1) + 1);
    Py_ssize_t ecap = t->used + (t->used >> 1) + 4;
    if (ecap > USABLE(isize))
        ecap = USABLE(isize);
    if (rebuild(t, isize, ecap) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *kt_sizeof(KTObject *t, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t((Py_ssize_t)Py_TYPE(t)->tp_basicsize +
                              t->isize * (Py_ssize_t)sizeof(int32_t) +
                              t->ecap * (Py_ssize_t)sizeof(entry_t) +
                              (t->slots == NULL ? 0 : CLUSTER_SLOTS * (Py_ssize_t)sizeof(slothead_t)
                                                      + t->lcap * (Py_ssize_t)sizeof(link_t)));
}

static PyObject *kt_stats(KTObject *t, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{sn,sn,sn,sn}", "used", t->used, "entries", t->nentries,
                         "capacity", t->ecap, "index", t->isize);
}

static PyObject *kt_ageing_get(KTObject *t, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(t->ageing);
}

static PyObject *kt_tracks_slots_get(KTObject *t, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(t->slots != NULL);
}

/* -- views and iterators ------------------------------------------------------------------- */

enum { KIND_KEYS, KIND_VALUES, KIND_ITEMS };

typedef struct {
    PyObject_HEAD
    KTObject *table;    /* NULL once exhausted */
    Py_ssize_t pos;
    uint64_t mods;
    int kind;
} KTIter;

static PyObject *make_iter(KTObject *t, int kind)
{
    KTIter *it = PyObject_GC_New(KTIter, &KTIterType);
    if (it == NULL)
        return NULL;
    it->table = (KTObject *)Py_NewRef(t);
    it->pos = 0;
    it->mods = t->mods;
    it->kind = kind;
    PyObject_GC_Track(it);
    return (PyObject *)it;
}

static PyObject *kt_iter(KTObject *t) { return make_iter(t, KIND_KEYS); }

/* An iterator or a view: a reference to its table first (the two share these). */
typedef struct {
    PyObject_HEAD
    KTObject *table;
} KTRef;

static void ref_dealloc(KTRef *r)
{
    PyObject_GC_UnTrack(r);
    Py_XDECREF(r->table);
    PyObject_GC_Del(r);
}

static int ref_traverse(KTRef *r, visitproc visit, void *arg)
{
    Py_VISIT(r->table);
    return 0;
}

static PyObject *it_next(KTIter *it)
{
    KTObject *t = it->table;
    if (t == NULL)
        return NULL;
    if (t->mods != it->mods) {
        PyErr_SetString(PyExc_RuntimeError, "KeyTable changed size during iteration");
        Py_CLEAR(it->table);
        return NULL;
    }
    Py_ssize_t i = it->pos, n = t->nentries;
    entry_t *entries = t->entries;
    while (i < n && entries[i].key == NULL)
        i++;
    if (i >= n) {
        Py_CLEAR(it->table);
        return NULL;
    }
    it->pos = i + 1;
    entry_t *e = &entries[i];
    if (it->kind == KIND_KEYS)
        return Py_NewRef(e->key);
    PyObject *v = val_new(e->value), *pair;
    if (v == NULL || it->kind == KIND_VALUES)
        return v;
    pair = PyTuple_Pack(2, e->key, v);
    Py_DECREF(v);
    return pair;
}

static PyObject *it_length_hint(KTIter *it, PyObject *Py_UNUSED(ignored))
{
    Py_ssize_t n = 0;
    if (it->table != NULL && it->table->mods == it->mods)
        for (Py_ssize_t i = it->pos; i < it->table->nentries; i++)
            n += it->table->entries[i].key != NULL;
    return PyLong_FromSsize_t(n);
}

static PyMethodDef it_methods[] = {
    {"__length_hint__", (PyCFunction)it_length_hint, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject KTIterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._ktable.KeyTableIterator",
    .tp_basicsize = sizeof(KTIter),
    .tp_dealloc = (destructor)ref_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)ref_traverse,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)it_next,
    .tp_methods = it_methods,
};

typedef struct {
    PyObject_HEAD
    KTObject *table;
    int kind;
} KTView;

static PyObject *make_view(KTObject *t, int kind)
{
    KTView *v = PyObject_GC_New(KTView, &KTViewType);
    if (v == NULL)
        return NULL;
    v->table = (KTObject *)Py_NewRef(t);
    v->kind = kind;
    PyObject_GC_Track(v);
    return (PyObject *)v;
}

static PyObject *kt_keys(KTObject *t, PyObject *Py_UNUSED(i)) { return make_view(t, KIND_KEYS); }
static PyObject *kt_values(KTObject *t, PyObject *Py_UNUSED(i))
{
    return make_view(t, KIND_VALUES);
}
static PyObject *kt_items(KTObject *t, PyObject *Py_UNUSED(i)) { return make_view(t, KIND_ITEMS); }


static PyObject *view_iter(KTView *v) { return make_iter(v->table, v->kind); }
static Py_ssize_t view_len(KTView *v) { return v->table->used; }

static int view_contains(KTView *v, PyObject *x)
{
    if (v->kind == KIND_KEYS)
        return kt_contains(v->table, x);
    if (v->kind == KIND_ITEMS) {
        if (!PyTuple_Check(x) || PyTuple_GET_SIZE(x) != 2)
            return 0;
        PyObject *found = kt_get(v->table, PyTuple_GET_ITEM(x, 0), 0);
        if (found == NULL)
            return PyErr_Occurred() ? -1 : 0;
        int rc = PyObject_RichCompareBool(found, PyTuple_GET_ITEM(x, 1), Py_EQ);
        Py_DECREF(found);
        return rc;
    }
    PyObject *it = make_iter(v->table, KIND_VALUES), *item;
    if (it == NULL)
        return -1;
    int rc = 0;
    while (rc == 0 && (item = PyIter_Next(it)) != NULL) {
        rc = PyObject_RichCompareBool(item, x, Py_EQ);
        Py_DECREF(item);
    }
    Py_DECREF(it);
    return rc == 0 && PyErr_Occurred() ? -1 : rc;
}

/* keys().isdisjoint(iterable): no element of it is a key (what a set's isdisjoint says) */
static PyObject *view_isdisjoint(KTView *v, PyObject *other)
{
    PyObject *it = PyObject_GetIter(other), *item;
    if (it == NULL)
        return NULL;
    int found = 0;
    while (!found && (item = PyIter_Next(it)) != NULL) {
        found = v->kind == KIND_KEYS ? kt_contains(v->table, item) : view_contains(v, item);
        Py_DECREF(item);
    }
    Py_DECREF(it);
    if (found < 0 || PyErr_Occurred())
        return NULL;
    return PyBool_FromLong(!found);
}

static PyMethodDef view_methods[] = {
    {"isdisjoint", (PyCFunction)view_isdisjoint, METH_O,
     "isdisjoint(iterable): whether none of its elements is in the view"},
    {NULL, NULL, 0, NULL},
};

static PyObject *view_repr(KTView *v)
{
    static const char *names[] = {"keys", "values", "items"};
    PyObject *lst = PySequence_List((PyObject *)v);
    if (lst == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("KeyTable_%s(%R)", names[v->kind], lst);
    Py_DECREF(lst);
    return r;
}

static PySequenceMethods view_as_sequence = {
    .sq_length = (lenfunc)view_len,
    .sq_contains = (objobjproc)view_contains,
};

static PyTypeObject KTViewType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._ktable.KeyTableView",
    .tp_basicsize = sizeof(KTView),
    .tp_dealloc = (destructor)ref_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)ref_traverse,
    .tp_iter = (getiterfunc)view_iter,
    .tp_as_sequence = &view_as_sequence,
    .tp_repr = (reprfunc)view_repr,
    .tp_methods = view_methods,
};

/* -- the type ------------------------------------------------------------------------------ */

static PyMethodDef kt_methods[] = {
    {"get", (PyCFunction)(void (*)(void))kt_get_method, METH_FASTCALL,
     "get(key, default=None): the value, touching the key's age (lookupKey)"},
    {"peek", (PyCFunction)(void (*)(void))kt_peek, METH_FASTCALL,
     "peek(key, default=None): the value, the age untouched (LOOKUP_NOTOUCH)"},
    {"pop", (PyCFunction)(void (*)(void))kt_pop, METH_FASTCALL, "pop(key[, default])"},
    {"setdefault", (PyCFunction)(void (*)(void))kt_setdefault, METH_FASTCALL,
     "setdefault(key, default=None)"},
    {"keys", (PyCFunction)kt_keys, METH_NOARGS, NULL},
    {"values", (PyCFunction)kt_values, METH_NOARGS, NULL},
    {"items", (PyCFunction)kt_items, METH_NOARGS, NULL},
    {"clear", (PyCFunction)kt_clear, METH_NOARGS, NULL},
    {"copy", (PyCFunction)kt_copy, METH_NOARGS, "a copy, ages included"},
    {"update", (PyCFunction)kt_update, METH_O, "update(mapping or pairs): each as t[k] = v"},
    {"from_dict", (PyCFunction)(void (*)(void))kt_from_dict,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "from_dict(mapping, ageing=True): a table of the mapping's items, new keys' ages"},
    {"prefetch", (PyCFunction)kt_prefetch_method, METH_O,
     "prefetch(keys): up to 64 keys' lookups started early (no effect but speed)"},
    {"age", (PyCFunction)kt_age, METH_O, "age(key): the 24 bits, or None if absent"},
    {"entry_at", (PyCFunction)kt_entry_at, METH_O,
     "entry_at(key): where the value is held (its object, or the entry of an integer kept "
     "there); KeyError if absent"},
    {"set_age", (PyCFunction)(void (*)(void))kt_set_age, METH_FASTCALL,
     "set_age(key, age): KeyError if absent, ValueError unless 0 <= age < 2**24"},
    {"sample", (PyCFunction)kt_sample, METH_O,
     "sample(n): up to n distinct keys at random, O(n)"},
    {"track_slots", (PyCFunction)kt_track_slots, METH_NOARGS,
     "track_slots(): keep each hash slot's keys and count from now on (the keys present "
     "indexed); bytes keys only"},
    {"slot_count", (PyCFunction)kt_slot_count, METH_O,
     "slot_count(slot): how many keys hash to the slot (CLUSTER COUNTKEYSINSLOT)"},
    {"slot_keys", (PyCFunction)(void (*)(void))kt_slot_keys, METH_FASTCALL,
     "slot_keys(slot, count): up to count keys of the slot, newest first (GETKEYSINSLOT)"},
    {"_slot_holes", (PyCFunction)kt_slot_holes, METH_O,
     "_slot_holes(slot): the holes of deleted keys in the slot's list, -1 if it is broken "
     "(tests)"},
    {"shrink", (PyCFunction)kt_shrink, METH_NOARGS,
     "shrink(): rebuild smaller when under 10 % full; whether it did"},
    {"_stats", (PyCFunction)kt_stats, METH_NOARGS, "the layout's sizes (tests, benchmarks)"},
    {"__sizeof__", (PyCFunction)kt_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kt_getset[] = {
    {"ageing", (getter)kt_ageing_get, NULL, "whether reads and writes stamp ages", NULL},
    {"tracks_slots", (getter)kt_tracks_slots_get, NULL,
     "whether the table keeps its per-slot index (track_slots())", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMappingMethods kt_as_mapping = {
    .mp_length = (lenfunc)kt_length,
    .mp_subscript = (binaryfunc)kt_subscript,
    .mp_ass_subscript = (objobjargproc)kt_ass_subscript,
};

static PySequenceMethods kt_as_sequence = {
    .sq_contains = (objobjproc)kt_contains,
};

static PyTypeObject KTType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._ktable.KeyTable",
    .tp_doc = "KeyTable(ageing=True): a mapping with a 24-bit age per key (ktable.py)",
    .tp_basicsize = sizeof(KTObject),
    .tp_dealloc = (destructor)kt_dealloc,
    .tp_repr = (reprfunc)kt_repr,
    .tp_as_sequence = &kt_as_sequence,
    .tp_as_mapping = &kt_as_mapping,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_MAPPING,
    .tp_traverse = (traverseproc)kt_traverse,
    .tp_clear = (inquiry)kt_tp_clear,
    .tp_richcompare = kt_richcompare,
    .tp_iter = (getiterfunc)kt_iter,
    .tp_methods = kt_methods,
    .tp_getset = kt_getset,
    .tp_new = kt_new,
};

/* -- module functions ---------------------------------------------------------------------- */

static PyObject *mod_configure(PyObject *Py_UNUSED(m), PyObject *args)
{
    int lfu, log_factor, decay_time;
    if (!PyArg_ParseTuple(args, "pii:configure", &lfu, &log_factor, &decay_time))
        return NULL;
    if (log_factor < 0 || decay_time < 0) {
        PyErr_SetString(PyExc_ValueError, "lfu_log_factor and lfu_decay_time are >= 0");
        return NULL;
    }
    g.lfu = lfu;
    g.log_factor = (uint32_t)log_factor;
    g.decay_time = (uint32_t)decay_time;
    Py_RETURN_NONE;
}

static PyObject *mod_set_clock(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long long now_ms = PyLong_AsLongLong(arg);
    if (now_ms == -1 && PyErr_Occurred())
        return NULL;
    if (now_ms < 0) {
        PyErr_SetString(PyExc_ValueError, "now_ms is >= 0");
        return NULL;
    }
    uint64_t s = (uint64_t)now_ms / 1000;
    g.lru_clock = (uint32_t)(s & AGE_MAX);
    g.minutes = (uint32_t)((s / 60) & 65535);
    Py_RETURN_NONE;
}

static PyObject *mod_seed(PyObject *Py_UNUSED(m), PyObject *arg)
{
    unsigned long long n = PyLong_AsUnsignedLongLongMask(arg);
    if (n == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    g.lfu_rng = n;
    g.sample_rng = n ^ SAMPLE_SALT;
    Py_RETURN_NONE;
}

static PyObject *mod_state(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{si,sI,sI,sI,sI}", "lfu", g.lfu, "log_factor", g.log_factor,
                         "decay_time", g.decay_time, "lru_clock", g.lru_clock,
                         "minutes", g.minutes);
}

/* crc16 and key_hash_slot of bytes (hashslot.py's references take bytes only, as these do). */
static PyObject *mod_crc16(PyObject *Py_UNUSED(m), PyObject *arg)
{
    if (!PyBytes_Check(arg))
        return PyErr_Format(PyExc_TypeError, "crc16() takes bytes, not %.200s",
                            Py_TYPE(arg)->tp_name);
    return PyLong_FromLong(crc16(PyBytes_AS_STRING(arg), (size_t)PyBytes_GET_SIZE(arg)));
}

static PyObject *mod_key_hash_slot(PyObject *Py_UNUSED(m), PyObject *arg)
{
    if (!PyBytes_Check(arg))
        return PyErr_Format(PyExc_TypeError, "key_hash_slot() takes bytes, not %.200s",
                            Py_TYPE(arg)->tp_name);
    return PyLong_FromLong((long)bytes_slot(arg));
}

static PyMethodDef mod_methods[] = {
    {"crc16", mod_crc16, METH_O, "crc16(data): Redis's CRC16 (CCITT, XMODEM) of bytes"},
    {"key_hash_slot", mod_key_hash_slot, METH_O,
     "key_hash_slot(key): the key's Redis Cluster hash slot, hash tags included"},
    {"configure", mod_configure, METH_VARARGS,
     "configure(policy_lfu, lfu_log_factor, lfu_decay_time)"},
    {"set_clock", mod_set_clock, METH_O, "set_clock(now_ms): the LRU clock and LFU minutes"},
    {"seed", mod_seed, METH_O, "seed(n): the LFU and sampling generators"},
    {"_state", mod_state, METH_NOARGS, "the ageing state (tests)"},
    {NULL, NULL, 0, NULL},
};

/* -- the C API for the other extensions (_ktable.h) ---------------------------------------- */

static PyObject *capi_get(PyObject *t, PyObject *key) { return kt_get((KTObject *)t, key, 1); }
static PyObject *capi_peek(PyObject *t, PyObject *key) { return kt_get((KTObject *)t, key, 0); }
static int capi_set(PyObject *t, PyObject *key, PyObject *value)
{
    return kt_set((KTObject *)t, key, value);
}
static int capi_peek_int(PyObject *t, PyObject *key, long long *out)
{
    Py_ssize_t ix = find_key((KTObject *)t, key);
    if (ix < 0)
        return ix == -2 ? -1 : KT_ABSENT;
    PyObject *v = ((KTObject *)t)->entries[ix].value;
    if (!TAGGED(v))
        return KT_OTHER;
    *out = (long long)((intptr_t)v >> 1);
    return KT_INT;
}
static int capi_set_int(PyObject *t, PyObject *key, long long v)
{
    if (v >= TAG_MIN && v <= TAG_MAX)
        return kt_set_stored((KTObject *)t, key, (PyObject *)(uintptr_t)(((uint64_t)v << 1) | 1u));
    /* (not PyBytes_FromFormat: it has no %lld, and wrote those four bytes as the value) */
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%lld", v);
    PyObject *text = PyBytes_FromStringAndSize(digits, n);
    if (text == NULL)
        return -1;
    int rc = kt_set_stored((KTObject *)t, key, text);
    Py_DECREF(text);
    return rc;
}
static Py_ssize_t capi_len(PyObject *t) { return ((KTObject *)t)->used; }
static int capi_contains(PyObject *t, PyObject *key) { return kt_contains((KTObject *)t, key); }

/* del table[key] when it is there: 1, 0 (absent), -1 with an exception */
static int capi_del(PyObject *t, PyObject *key)
{
    uint32_t h;
    Py_ssize_t slot;
    if (kt_hash(key, &h) < 0)
        return -1;
    Py_ssize_t ix = lookup((KTObject *)t, key, h, &slot);
    if (ix < 0)
        return ix == -1 ? 0 : -1;
    val_release(kt_remove_at((KTObject *)t, ix, slot));
    return 1;
}

static void capi_prefetch(PyObject *t, PyObject *const *keys, Py_ssize_t n)
{
    kt_prefetch((KTObject *)t, keys, n);
}

static KTable_CAPI capi = {
    KTABLE_CAPI_VERSION, &KTType, capi_get, capi_peek, capi_set, capi_len, capi_contains,
    capi_peek_int, capi_set_int, capi_del, capi_prefetch,
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_ktable",
    "The keyspace's table with a 24-bit age per key (the C side of ktable.py).",
    -1, mod_methods,
};

PyMODINIT_FUNC PyInit__ktable(void)
{
    if (PyType_Ready(&KTType) < 0 || PyType_Ready(&KTIterType) < 0 ||
            PyType_Ready(&KTViewType) < 0)
        return NULL;
    uint64_t s = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&g;
    g.lfu_rng = splitmix64(&s);
    g.sample_rng = splitmix64(&s);
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "KeyTable", (PyObject *)&KTType) < 0)
        goto fail;
    PyObject *cap = PyCapsule_New(&capi, KTABLE_CAPSULE, NULL);
    if (cap == NULL || PyModule_AddObject(m, "_C_API", cap) < 0) {
        Py_XDECREF(cap);
        goto fail;
    }
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
