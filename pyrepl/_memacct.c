/* pyrepl._memacct: Redis-like memory accounting under pymalloc (issue 37 part 1), the "pool
 * walk" design of bench/memacct/_memacct.c (bench/RESULTS.md, "Memory accounting for
 * maxmemory" and "Bounded walk").
 *
 * Nothing on pymalloc's hot path is hooked. install() hooks two things:
 *  - the arena allocator (PyObject_SetArenaAllocator): every 1 MiB arena pymalloc asks for
 *    from then on is mmapped 1 MiB-aligned (so exactly 64 16 KiB pools) and kept in a list;
 *  - the RAW domain: libc blocks (pymalloc's > 512 B requests, PyMem_RawMalloc's users),
 *    counted with malloc_usable_size, atomically (RAW runs without the GIL too).
 * used = libc's heap in use at install (mallinfo2, read once) + the RAW count since
 *      + a walk of the known arenas' pools: sum of pool->ref.count x (szidx + 1) x 16
 *        (an uncarved pool reads as zeros; CPython 3.11's pool header: count at offset 0,
 *        szidx at 36)
 *      + the content of the arenas from before the install: CPython's own
 *        _PyObject_DebugMallocStats (every arena) minus the walk, re-read on request
 *        (used(2): the cron once a second, INFO), held between
 *      - what CPython's free lists hold, counted at each walk (see free_list_bytes).
 * A walk is ~0.3 us per arena warm (65 us at 200 MB), so used(0) walks at most once per
 * interval (max(floor, 100 x the last walk's duration): <= 1 % CPU when pinned at a limit);
 * bound() is an upper bound without a walk (see _memacct.h), what a per-write maxmemory check
 * calls. Allocations C libraries make with malloc directly (uvloop, OpenSSL, Lua) after the
 * install are not counted, as Redis does not count libc's own.
 *
 * The layout is CPython 3.11's, 64-bit, pymalloc with its radix tree: install() checks it
 * (selftest) and refuses, with a reason, where it does not hold; pyrepl/memacct.py then falls
 * back to RSS. Everything but the RAW count runs under the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "_memacct.h"
/* the interpreter state's free lists (CPython 3.11's layout, as the pool headers') */
#define Py_BUILD_CORE
#undef _PyGC_FINALIZED   /* (objimpl.h's alias; pycore_gc.h defines its own) */
#include "internal/pycore_interp.h"
#undef Py_BUILD_CORE

#define ARENA_BITS 20
#define ARENA_SIZE ((uintptr_t)1 << ARENA_BITS)
#define POOL_BITS 14
#define POOL_SIZE ((uintptr_t)1 << POOL_BITS)
#define POOL_MASK (POOL_SIZE - 1)
#define POOL_OVERHEAD 48   /* sizeof(struct pool_header), rounded to 16 */
#define SZIDX_OFFSET 36    /* struct pool_header: ref, freeblock, nextpool, prevpool (4 x 8),
                              arenaindex (uint), szidx (uint) */

static int installed;
static int64_t raw_count;          /* RAW since the install: atomic */
static int64_t libc_baseline;      /* libc's heap in use at install */
static PyMemAllocatorEx orig_raw;
static PyObjectArenaAllocator orig_arena;

/* the arenas made since the install: a bit per 1 MiB chunk of the address space (2^27 bits,
 * 16 MiB reserved, touched only where arenas are), and the list the walk reads */
static uint8_t *arena_bits;
static uintptr_t *arena_list;
static size_t arena_cap;
static int64_t arenas_live, arenas_made;

/* the last walk, and the last re-read of the pre-install arenas */
static int64_t w_sum, w_made, w_free, w_lists, w_ns, n_walks, n_syncs;
static uint64_t w_time;
static int64_t pre_content, pre_free;   /* the pre-install arenas' bytes, their free space */
static uint64_t floor_ns = 1000000;
static int walk_tested;                 /* the self-test saw blocks in arenas the walk knows */     /* used(0): at most one walk per max(floor, 100 x walk) */

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static inline int in_arena(const void *p) {
    uintptr_t c = (uintptr_t)p >> ARENA_BITS;
    return (arena_bits[(c >> 3) & (((uintptr_t)1 << 24) - 1)] >> (c & 7)) & 1;
}

/* -- the arena allocator ----------------------------------------------------------------- */
static void *arena_alloc(void *ctx, size_t size) {
    (void)ctx;
    if (size != ARENA_SIZE) return orig_arena.alloc(orig_arena.ctx, size);
    uint8_t *m = mmap(NULL, 2 * ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    if (m == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)m + ARENA_SIZE - 1) & ~(ARENA_SIZE - 1);
    if (a > (uintptr_t)m) munmap(m, a - (uintptr_t)m);
    if ((uintptr_t)m + 2 * ARENA_SIZE > a + ARENA_SIZE)
        munmap((void *)(a + ARENA_SIZE), (uintptr_t)m + 2 * ARENA_SIZE - (a + ARENA_SIZE));
    if ((size_t)arenas_live == arena_cap) {
        size_t cap = arena_cap ? 2 * arena_cap : 1024;
        uintptr_t *l = realloc(arena_list, cap * sizeof *l);   /* libc: not counted */
        if (l == NULL) { munmap((void *)a, ARENA_SIZE); return NULL; }
        arena_list = l;
        arena_cap = cap;
    }
    uintptr_t c = a >> ARENA_BITS;
    arena_list[arenas_live++] = a;
    arena_bits[c >> 3] |= (uint8_t)(1 << (c & 7));
    arenas_made++;
    return (void *)a;
}

static void arena_free(void *ctx, void *b, size_t size) {
    (void)ctx;
    if (size == ARENA_SIZE && ((uintptr_t)b & (ARENA_SIZE - 1)) == 0 && in_arena(b)) {
        uintptr_t c = (uintptr_t)b >> ARENA_BITS;
        arena_bits[c >> 3] &= (uint8_t)~(1 << (c & 7));
        for (int64_t i = 0; i < arenas_live; i++)
            if (arena_list[i] == (uintptr_t)b) { arena_list[i] = arena_list[--arenas_live]; break; }
        munmap(b, size);
        return;
    }
    orig_arena.free(orig_arena.ctx, b, size);   /* an arena from before the install */
}

/* -- the RAW domain ---------------------------------------------------------------------- */
#define RAW_ADD(x) __atomic_fetch_add(&raw_count, (int64_t)(x), __ATOMIC_RELAXED)

static void *raw_malloc(void *ctx, size_t n) {
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;
    void *p = a->malloc(a->ctx, n);
    if (p) RAW_ADD(malloc_usable_size(p));
    return p;
}
static void *raw_calloc(void *ctx, size_t k, size_t n) {
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;
    void *p = a->calloc(a->ctx, k, n);
    if (p) RAW_ADD(malloc_usable_size(p));
    return p;
}
static void *raw_realloc(void *ctx, void *p, size_t n) {
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q = a->realloc(a->ctx, p, n);
    if (q) RAW_ADD((int64_t)malloc_usable_size(q) - (int64_t)old);
    return q;
}
static void raw_free(void *ctx, void *p) {
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;
    if (p) RAW_ADD(-(int64_t)malloc_usable_size(p));
    a->free(a->ctx, p);
}

static int64_t heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    struct mallinfo2 mi = mallinfo2();
    return (int64_t)(mi.uordblks + mi.hblkhd);
#else
    return 0;
#endif
}

/* -- the walk ---------------------------------------------------------------------------- */
static int64_t walk_pools(void) {
    int64_t sum = 0;
    for (int64_t i = 0; i < arenas_live; i++) {
        uintptr_t a = arena_list[i];
        for (uintptr_t p = a; p < a + ARENA_SIZE; p += POOL_SIZE) {
            uint32_t count = *(const uint32_t *)p;
            uint32_t szidx = *(const uint32_t *)(p + SZIDX_OFFSET);
            sum += (int64_t)count * (((int64_t)szidx + 1) << 4);
        }
    }
    return sum;
}

/* -- CPython's free lists ----------------------------------------------------------------
 * Freed tuples (up to 2,000 of each size up to 20), lists, dicts and their smallest key
 * tables, floats, contexts, async generators' wrappers and the slice cache are kept by the
 * interpreter for its next allocations, not given back to pymalloc: the walk sees their
 * blocks in use. They are what jemalloc's thread caches are to Redis, freed memory kept for
 * reuse, which zmalloc has already subtracted: used leaves them out, as counted at each walk
 * (they filled as a server warmed up: +40 KB of used_memory over its first seconds, all
 * of it given back by a full collection that collected nothing), and bound() keeps them in
 * (reusing them grows used with no new block). Each list's objects are one size: its head's
 * block (a GC object's starts at its GC header) gives the size class. Under the GIL. */
#define GC_BLOCK(op) ((const char *)(op) - sizeof(PyGC_Head))

static inline int64_t block_class(const void *block) {
    uintptr_t pool = (uintptr_t)block & ~POOL_MASK;
    return ((int64_t)*(const uint32_t *)(pool + SZIDX_OFFSET) + 1) << 4;
}

static inline int64_t held(int n, const void *block) {
    return n > 0 && block != NULL ? (int64_t)n * block_class(block) : 0;
}

static int64_t free_list_bytes(void) {
    PyInterpreterState *in = PyInterpreterState_Get();
    int64_t sum = 0;
    for (int i = 0; i < PyTuple_NFREELISTS; i++)
        if (in->tuple.free_list[i] != NULL)
            sum += held(in->tuple.numfree[i], GC_BLOCK(in->tuple.free_list[i]));
    if (in->list.numfree > 0)
        sum += held(in->list.numfree, GC_BLOCK(in->list.free_list[0]));
    if (in->dict_state.numfree > 0)
        sum += held(in->dict_state.numfree, GC_BLOCK(in->dict_state.free_list[0]));
    if (in->dict_state.keys_numfree > 0)
        sum += held(in->dict_state.keys_numfree, in->dict_state.keys_free_list[0]);
    if (in->float_state.free_list != NULL)
        sum += held(in->float_state.numfree, in->float_state.free_list);
    if (in->context.freelist != NULL)
        sum += held(in->context.numfree, GC_BLOCK(in->context.freelist));
    if (in->async_gen.value_numfree > 0)
        sum += held(in->async_gen.value_numfree, GC_BLOCK(in->async_gen.value_freelist[0]));
    if (in->async_gen.asend_numfree > 0)
        sum += held(in->async_gen.asend_numfree, GC_BLOCK(in->async_gen.asend_freelist[0]));
    if (in->slice_cache != NULL)
        sum += held(1, GC_BLOCK(in->slice_cache));
    return sum;
}

static void do_walk(void) {
    uint64_t t0 = now_ns();
    w_sum = walk_pools();
    w_lists = free_list_bytes();
    uint64_t t1 = now_ns();
    w_made = arenas_made;
    w_free = arenas_live * (int64_t)(ARENA_SIZE - 64 * POOL_OVERHEAD) - w_sum;
    if (w_free < 0) w_free = 0;
    w_time = t1;
    w_ns = (int64_t)(t1 - t0);
    n_walks++;
}

/* CPython's statistics over every arena: (arenas allocated now, bytes in allocated blocks).
 * Returns 0 when pymalloc is not the allocator (the function prints nothing then). */
extern int _PyObject_DebugMallocStats(FILE *out);
static int64_t stat_field(const char *buf, const char *key) {
    const char *q = strstr(buf, key);
    if (q == NULL || (q = strchr(q, '=')) == NULL) return -1;
    int64_t v = 0;
    for (q++; *q && *q != '\n'; q++)
        if (*q >= '0' && *q <= '9') v = v * 10 + (*q - '0');
    return v;
}
static int debug_stats(int64_t *arenas, int64_t *bytes) {
    char *buf = NULL;
    size_t len = 0;
    *arenas = *bytes = -1;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL) return -1;
    int on = _PyObject_DebugMallocStats(f);
    fclose(f);
    if (on) {
        *arenas = stat_field(buf, "# arenas allocated current");
        *bytes = stat_field(buf, "# bytes in allocated blocks");
    }
    free(buf);
    return on && *arenas >= 0 && *bytes >= 0 ? 0 : -1;
}

/* A walk, and the pre-install arenas' content re-read (what the walk does not see). */
static int sync_all(void) {
    int64_t ar, by;
    do_walk();
    if (debug_stats(&ar, &by) < 0) return -1;
    pre_content = by - w_sum;
    if (pre_content < 0) pre_content = 0;
    pre_free = (ar - arenas_live) * (int64_t)(ARENA_SIZE - 64 * POOL_OVERHEAD) - pre_content;
    if (pre_free < 0) pre_free = 0;
    n_syncs++;
    return 0;
}

static inline int64_t estimate(void) {
    return libc_baseline + pre_content + w_sum - w_lists
           + __atomic_load_n(&raw_count, __ATOMIC_RELAXED)
           + (arenas_made - w_made) * (int64_t)ARENA_SIZE;
}

static inline uint64_t interval_ns(void) {
    uint64_t adaptive = 100 * (uint64_t)w_ns;
    return adaptive > floor_ns ? adaptive : floor_ns;
}

/* -- the C API --------------------------------------------------------------------------- */
/* What the interpreter itself held when the server started (its code, modules, types): the
 * server's figures are counted from there (set_origin; 0 until a server sets it). */
static int64_t origin;

static inline int64_t from_origin(int64_t v) {
    return v > origin ? v - origin : 0;
}

static int64_t api_used(int fresh) {
    if (!installed) return -1;
    if (fresh >= 2) {
        if (sync_all() < 0) do_walk();
    } else if (fresh == 1 || now_ns() - w_time >= interval_ns()) {
        do_walk();
    }
    return from_origin(estimate());
}

static int64_t api_bound(void) {
    if (!installed) return -1;
    return from_origin(estimate() + w_lists + w_free + pre_free);
}

static const PyreplMemacctAPI c_api = {PYREPL_MEMACCT_API_VERSION, api_used, api_bound};

/* -- the self-test ----------------------------------------------------------------------- */
/* Known blocks: each small PyObject_Malloc block's pool header must name its size class
 * (szidx at 36) and count it (count at 0, within the pool's capacity); CPython's own
 * statistics must move by exactly their classes, and the walk by the classes of those in the
 * arenas it knows; all of it back once they are freed. Blocks of 512 B are taken until one
 * lands in a new arena (pymalloc fills the older arenas first), at most 16 MiB of them (a
 * process with more free space than that in its older arenas tests the walk on what landed
 * in the new ones: stats()["walk_tested"] says whether any did). */
static const char *selftest(void) {
    enum { N = 96, M = 32768 };
    void *small[N];
    void **big = PyMem_RawMalloc(M * sizeof(void *));
    int64_t ar0, by0, ar1, by1, want_all = 0, want_known = 0;
    const char *why = NULL;
    int nsmall = 0, nbig = 0, in_known = 0;
    walk_tested = 0;
    if (big == NULL) return "out of memory";
    if (debug_stats(&ar0, &by0) < 0) { PyMem_RawFree(big); return "pymalloc is not the allocator"; }
    int64_t walk0 = walk_pools();
    for (; nsmall < N; nsmall++) {
        size_t n = 1 + (size_t)nsmall * 511 / (N - 1);
        void *p = small[nsmall] = PyObject_Malloc(n);
        if (p == NULL) { why = "out of memory"; break; }
        uintptr_t pool = (uintptr_t)p & ~POOL_MASK;
        uint32_t count = *(const uint32_t *)pool;
        uint32_t szidx = *(const uint32_t *)(pool + SZIDX_OFFSET);
        int64_t cls = (int64_t)(((n - 1) >> 4) + 1) << 4;
        if (((int64_t)szidx + 1) << 4 != cls || count < 1 ||
                count > (POOL_SIZE - POOL_OVERHEAD) / (uint64_t)cls) {
            why = "a pool header is not CPython 3.11's (szidx at 36, count at 0)";
            nsmall++;
            break;
        }
        want_all += cls;
        if (in_arena(p)) want_known += cls;
    }
    int64_t made0 = arenas_made;
    for (; why == NULL && nbig < M && !in_known; nbig++) {
        void *p = big[nbig] = PyObject_Malloc(512);
        if (p == NULL) { why = "out of memory"; break; }
        want_all += 512;
        if (in_arena(p)) { want_known += 512; in_known = arenas_made > made0; }
    }
    if (why == NULL) {
        int64_t walk1 = walk_pools();
        if (debug_stats(&ar1, &by1) < 0)
            why = "CPython's malloc statistics cannot be read";
        else if (by1 - by0 != want_all)
            why = "CPython's statistics did not move by the test blocks' size classes";
        else if (walk1 - walk0 != want_known)
            why = "the pool walk did not see the test blocks in the arenas it knows";
    }
    walk_tested = why == NULL && want_known > 0;
    for (int i = 0; i < nsmall; i++) PyObject_Free(small[i]);
    for (int i = 0; i < nbig; i++) PyObject_Free(big[i]);
    PyMem_RawFree(big);
    if (why == NULL && walk_pools() != walk0)
        why = "the pool walk did not come back once the test blocks were freed";
    return why;
}

/* -- the module -------------------------------------------------------------------------- */
static PyObject *py_install(PyObject *self, PyObject *unused) {
    if (installed) return PyUnicode_FromString("");
    int64_t ar, by;
    if (debug_stats(&ar, &by) < 0) return PyUnicode_FromString("pymalloc is not the allocator");
    if (arena_bits == NULL) {
        void *m = mmap(NULL, (size_t)1 << 24, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return PyErr_SetFromErrno(PyExc_OSError);
        arena_bits = m;
    }
    PyObjectArenaAllocator ha = {NULL, arena_alloc, arena_free};
    PyMemAllocatorEx hr;
    PyObject_GetArenaAllocator(&orig_arena);
    PyObject_SetArenaAllocator(&ha);
    const char *why = selftest();
    if (why != NULL) {
        /* arenas made for the test stay ours (arena_free knows them); nothing counts */
        return PyUnicode_FromString(why);
    }
    libc_baseline = heap_in_use();
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &orig_raw);
    hr.ctx = &orig_raw;
    hr.malloc = raw_malloc;
    hr.calloc = raw_calloc;
    hr.realloc = raw_realloc;
    hr.free = raw_free;
    PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &hr);
    installed = 1;
    sync_all();
    return PyUnicode_FromString("");
}

static PyObject *py_installed(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(installed);
}

static PyObject *py_used(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int fresh = 0;
    if (nargs > 1) { PyErr_SetString(PyExc_TypeError, "used([fresh])"); return NULL; }
    if (nargs == 1 && (fresh = (int)PyLong_AsLong(args[0])) == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromLongLong(api_used(fresh));
}

static PyObject *py_bound(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(api_bound());
}

static PyObject *py_set_origin(PyObject *self, PyObject *arg) {
    long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    origin = v < 0 ? 0 : v;
    Py_RETURN_NONE;
}

static PyObject *py_set_interval(PyObject *self, PyObject *arg) {
    long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    floor_ns = v < 0 ? 0 : (uint64_t)v;
    Py_RETURN_NONE;
}

/* Whether the hooks are still the allocators in place (tracemalloc.stop() restores the
 * allocators saved by its start(): one started before the install and stopped after it takes
 * the RAW hook away). */
static int hooks_in_place(void) {
    PyMemAllocatorEx cur;
    PyObjectArenaAllocator ca;
    if (!installed) return 0;
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &cur);
    PyObject_GetArenaAllocator(&ca);
    return (cur.malloc == raw_malloc ? 1 : 0) | (ca.alloc == arena_alloc ? 2 : 0);
}

static PyObject *py_stats(PyObject *self, PyObject *unused) {
    return Py_BuildValue(
        "{s:i,s:i,s:i,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:K}",
        "installed", installed, "hooks", hooks_in_place(), "walk_tested", walk_tested, "libc_baseline", (long long)libc_baseline,
        "raw", (long long)__atomic_load_n(&raw_count, __ATOMIC_RELAXED),
        "pre_content", (long long)pre_content, "pre_free", (long long)pre_free,
        "walk_sum", (long long)w_sum, "walk_free", (long long)w_free,
        "free_lists", (long long)w_lists,
        "walk_ns", (long long)w_ns, "walks", (long long)n_walks, "syncs", (long long)n_syncs,
        "arenas_live", (long long)arenas_live, "arenas_made", (long long)arenas_made,
        "interval_ns", (unsigned long long)interval_ns());
}

/* Ground truths for tests and benchmarks. */
static PyObject *py_debugstats(PyObject *self, PyObject *unused) {
    int64_t ar, by;
    uint64_t t0 = now_ns();
    debug_stats(&ar, &by);
    uint64_t t1 = now_ns();
    return Py_BuildValue("LLL", (long long)ar, (long long)by, (long long)(t1 - t0));
}

static PyObject *py_heap(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(heap_in_use());
}

static PyObject *py_walk(PyObject *self, PyObject *unused) {
    if (!installed) return Py_BuildValue("LLL", 0LL, 0LL, 0LL);
    uint64_t t0 = now_ns();
    int64_t w = walk_pools();
    uint64_t t1 = now_ns();
    return Py_BuildValue("LLL", (long long)w, (long long)(t1 - t0), (long long)arenas_live);
}

static PyMethodDef methods[] = {
    {"install", py_install, METH_NOARGS,
     "hook the arena allocator and RAW after a self-test; '' or why not (idempotent)"},
    {"installed", py_installed, METH_NOARGS, "whether the accounting is in place"},
    {"used", (PyCFunction)(void (*)(void))py_used, METH_FASTCALL,
     "used([fresh]): bytes in use (fresh 0: walk at most once per interval, 1: walk, 2: and "
     "re-read the pre-install arenas); -1 when not installed"},
    {"bound", py_bound, METH_NOARGS, "a cheap upper bound of used(2); -1 when not installed"},
    {"set_origin", py_set_origin, METH_O,
     "set_origin(n): used() and bound() count from n bytes (the interpreter's own, at start)"},
    {"set_interval", py_set_interval, METH_O, "the floor of used(0)'s interval between walks, ns"},
    {"stats", py_stats, METH_NOARGS, "the accounting's parts and counters"},
    {"debugstats", py_debugstats, METH_NOARGS,
     "(arenas, bytes in allocated blocks, ns): CPython's own figures over every arena"},
    {"heap", py_heap, METH_NOARGS, "libc's heap in use (mallinfo2 uordblks + hblkhd)"},
    {"walk", py_walk, METH_NOARGS, "(the known arenas' pool walk sum, ns, arenas walked)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "pyrepl._memacct",
                                 "Memory accounting under pymalloc: see pyrepl/memacct.py.", -1,
                                 methods};

PyMODINIT_FUNC PyInit__memacct(void) {
    PyObject *m = PyModule_Create(&mod);
    if (m == NULL) return NULL;
    PyObject *cap = PyCapsule_New((void *)&c_api, PYREPL_MEMACCT_CAPSULE, NULL);
    if (cap == NULL || PyModule_AddObject(m, "_C_API", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
