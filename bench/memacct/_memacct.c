/* _memacct: a prototype of Redis's zmalloc accounting for pyrepl (issue 37, part 1).
 *
 * At import it wraps CPython's three allocator domains (RAW, MEM, OBJ) with hooks that call
 * the previous allocator and add (malloc, calloc) or subtract (free) malloc_usable_size(p) of
 * the block, realloc the difference: exactly Redis's zmalloc on libc malloc. It needs every
 * domain on the C allocator (PYTHONMALLOC=malloc; libc's or an LD_PRELOADed jemalloc's
 * malloc_usable_size), so it refuses to install under pymalloc, whose blocks malloc_usable_size
 * cannot size.
 *
 * The hook is installed after start-up, so the blocks the interpreter already holds are not
 * seen as they are allocated: used() = the allocator's in-use bytes at install (mallinfo2's
 * uordblks + hblkhd on glibc) + every hooked allocation since - every hooked free (frees of
 * the start-up blocks subtract what the baseline counted). Allocations made by C libraries
 * without CPython's API after the install (uvloop's buffers, OpenSSL) are not counted, as Redis
 * does not count libc's own.
 *
 * The MEM and OBJ domains run with the GIL held: a plain add. RAW may run without it: an
 * atomic add of its own counter.
 *
 * Under pymalloc (PYTHONMALLOC unset) a second design: pymalloc kept, its blocks sized by their
 * size class. The arena allocator is hooked too (PyObject_SetArenaAllocator), so the hook knows
 * every arena allocated since the install (it maps them 1 MiB-aligned, so a bit per 1 MiB chunk
 * of the address space says whether a block is in one); a MEM/OBJ block inside one of them is pymalloc's and its size is
 * its pool's size class ((szidx + 1) * 16, szidx read from the 16 KiB pool's header, which
 * pymalloc_free reads anyway); a block elsewhere is a libc block that pymalloc passed to the RAW
 * domain (> 512 bytes), which the RAW hook counts with malloc_usable_size. Blocks in the arenas
 * that existed before the install are not counted either way (consistently): the few MB of
 * start-up objects, and what later fills their free space.
 *
 * Third design, "pool walk" (MEMACCT_DESIGN=poolwalk, under pymalloc): the MEM and OBJ domains
 * are left alone (no cost on pymalloc's hot path); only the arena allocator (as above: every
 * arena allocated since the install is known, and kept in a list) and the RAW domain (libc blocks:
 * pymalloc's > 512 B requests and PyMem_RawMalloc's users, counted with malloc_usable_size) are
 * hooked. used() = baseline + the RAW count + a walk of the known arenas' 64 pools each, summing
 * pool->ref.count * the pool's size class (an uncarved pool reads as zeros, an empty one has
 * count 0). The arenas from before the install (3 in a bare interpreter: sitecustomize runs
 * after site) are not walked, as the size-class design does not count them: their content at
 * install is read once from CPython's own _PyObject_DebugMallocStats (preinstall()), which also
 * serves as a ground truth over all arenas (debugstats()). check(limit, interval_ns) is the
 * bounded-walk scheme for a maxmemory check per write (see its comment).
 *
 * Kept as data under bench/memacct/, built by bench/bench_memacct.py into a temporary
 * directory; not part of pyrepl. The pool-walk design is built into pyrepl as
 * pyrepl/_memacct.c (bench/RESULTS.md, "Memory accounting (issue 37 part 1)").
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <time.h>

static PyMemAllocatorEx orig_raw, orig_mem, orig_obj;
static int64_t gil_count;      /* MEM + OBJ: under the GIL */
static int64_t raw_count;      /* RAW: atomic */
static int64_t baseline;
static int installed;
#ifdef MEMACCT_CALLS
static int64_t n_alloc, n_free, n_realloc, n_raw, n_rawr, n_rawf;
#define CALL(c) ((c)++)
#else
#define CALL(c) ((void)0)
#endif
static const char *design = "none";

/* -- pymalloc (CPython 3.11, 64-bit, radix tree): 1 MiB arenas, 16 KiB pools -------------- */
#define ARENA_BITS 20
#define ARENA_SIZE ((uintptr_t)1 << ARENA_BITS)
#define POOL_BITS 14
#define POOL_MASK (((uintptr_t)1 << POOL_BITS) - 1)
#define SZIDX_OFFSET 36    /* struct pool_header: ref, freeblock, nextpool, prevpool (4 x 8),
                              arenaindex (uint), szidx (uint) */
/* The arena allocator is replaced for 1 MiB requests: arenas are mmapped 1 MiB-aligned (2 MiB
 * mapped, the ends unmapped), so whether a block is in one is one bit of a map of the address
 * space's 1 MiB chunks (2^27 bits, 16 MiB reserved, touched only where arenas are). */
#include <sys/mman.h>
static uint8_t *arena_bits;
static PyObjectArenaAllocator orig_arena;
static int64_t arenas_live;
static int64_t arenas_made;          /* allocated since the install (monotonic) */
static uintptr_t *arena_list;        /* the live ones, for the walk (libc malloc: not hooked) */
static size_t arena_cap;

static inline int in_arena(const void *p) {
    uintptr_t c = (uintptr_t)p >> ARENA_BITS;
    return (arena_bits[(c >> 3) & (((uintptr_t)1 << 24) - 1)] >> (c & 7)) & 1;
}

static inline int64_t pool_class(const void *p) {
    uint32_t szidx = *(const uint32_t *)(((uintptr_t)p & ~POOL_MASK) + SZIDX_OFFSET);
    return ((int64_t)szidx + 1) << 4;
}

static void *arena_alloc(void *ctx, size_t size) {
    if (size != ARENA_SIZE) return orig_arena.alloc(orig_arena.ctx, size);
    uint8_t *m = mmap(NULL, 2 * ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
    if (m == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)m + ARENA_SIZE - 1) & ~(ARENA_SIZE - 1);
    if (a > (uintptr_t)m) munmap(m, a - (uintptr_t)m);
    if ((uintptr_t)m + 2 * ARENA_SIZE > a + ARENA_SIZE)
        munmap((void *)(a + ARENA_SIZE), (uintptr_t)m + 2 * ARENA_SIZE - (a + ARENA_SIZE));
    uintptr_t c = a >> ARENA_BITS;
    if ((size_t)arenas_live == arena_cap) {
        size_t cap = arena_cap ? 2 * arena_cap : 1024;
        uintptr_t *l = realloc(arena_list, cap * sizeof *l);
        if (l == NULL) { munmap((void *)a, ARENA_SIZE); return NULL; }
        arena_list = l;
        arena_cap = cap;
    }
    arena_list[arenas_live] = a;
    arena_bits[c >> 3] |= (uint8_t)(1 << (c & 7));
    arenas_live++;
    arenas_made++;
    return (void *)a;
}

static void arena_free(void *ctx, void *b, size_t size) {
    uintptr_t c = (uintptr_t)b >> ARENA_BITS;
    if (size == ARENA_SIZE && ((uintptr_t)b & (ARENA_SIZE - 1)) == 0 && in_arena(b)) {
        arena_bits[c >> 3] &= (uint8_t)~(1 << (c & 7));
        for (int64_t i = 0; i < arenas_live; i++)
            if (arena_list[i] == (uintptr_t)b) { arena_list[i] = arena_list[--arenas_live]; break; }
        munmap(b, size);
        return;
    }
    orig_arena.free(orig_arena.ctx, b, size);   /* an arena from before the install */
}


/* The pool walk: every known arena's 64 pools (arenas are 1 MiB-aligned, so exactly 64
 * 16 KiB pools and no excess), count (uint at offset 0 of the header) x class. Under the GIL. */
static int64_t walk_pools(void) {
    int64_t sum = 0;
    for (int64_t i = 0; i < arenas_live; i++) {
        uintptr_t a = arena_list[i];
        for (uintptr_t p = a; p < a + ARENA_SIZE; p += (uintptr_t)1 << POOL_BITS) {
            uint32_t count = *(const uint32_t *)p;
            uint32_t szidx = *(const uint32_t *)(p + SZIDX_OFFSET);
            sum += (int64_t)count * (((int64_t)szidx + 1) << 4);
        }
    }
    return sum;
}

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void *pm_malloc(void *ctx, size_t n) {
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;
    CALL(n_alloc);
    void *p = a->malloc(a->ctx, n);
    if (p && n - 1 < 512 && in_arena(p)) gil_count += (int64_t)(((n - 1) >> 4) + 1) << 4;
    return p;
}
static void *pm_calloc(void *ctx, size_t k, size_t n) {
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;
    CALL(n_alloc);
    void *p = a->calloc(a->ctx, k, n);
    size_t t = k * n;
    if (p && t - 1 < 512 && in_arena(p)) gil_count += (int64_t)(((t - 1) >> 4) + 1) << 4;
    return p;
}
static void *pm_realloc(void *ctx, void *p, size_t n) {
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;
    CALL(n_realloc);
    int64_t old = (p && in_arena(p)) ? pool_class(p) : 0;
    void *q = a->realloc(a->ctx, p, n);
    if (q) gil_count += (in_arena(q) ? pool_class(q) : 0) - old;
    return q;
}
static void pm_free(void *ctx, void *p) {
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;
    CALL(n_free);
    if (p && in_arena(p)) gil_count -= pool_class(p);
    a->free(a->ctx, p);
}

#define GIL_ADD(x) (gil_count += (int64_t)(x))
#define RAW_ADD(x) __atomic_fetch_add(&raw_count, (int64_t)(x), __ATOMIC_RELAXED)

#define HOOKS(NAME, ADD)                                                               \
static void *NAME##_malloc(void *ctx, size_t n) {                                      \
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;                                     \
    CALL(n_raw);                                                                       \
    void *p = a->malloc(a->ctx, n);                                                    \
    if (p) ADD(malloc_usable_size(p));                                                 \
    return p;                                                                          \
}                                                                                      \
static void *NAME##_calloc(void *ctx, size_t k, size_t n) {                            \
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;                                     \
    CALL(n_raw);                                                                       \
    void *p = a->calloc(a->ctx, k, n);                                                 \
    if (p) ADD(malloc_usable_size(p));                                                 \
    return p;                                                                          \
}                                                                                      \
static void *NAME##_realloc(void *ctx, void *p, size_t n) {                            \
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;                                     \
    CALL(n_rawr);                                                                      \
    size_t old = p ? malloc_usable_size(p) : 0;                                        \
    void *q = a->realloc(a->ctx, p, n);                                                \
    if (q) ADD((int64_t)malloc_usable_size(q) - (int64_t)old);                         \
    return q;                                                                          \
}                                                                                      \
static void NAME##_free(void *ctx, void *p) {                                          \
    PyMemAllocatorEx *a = (PyMemAllocatorEx *)ctx;                                     \
    CALL(n_rawf);                                                                      \
    if (p) ADD(-(int64_t)malloc_usable_size(p));                                       \
    a->free(a->ctx, p);                                                                \
}

HOOKS(gil, GIL_ADD)
HOOKS(raw, RAW_ADD)

/* kind: 0 usable-size under the GIL, 1 usable-size atomic (RAW), 2 pymalloc size class */
static void wrap(PyMemAllocatorDomain d, PyMemAllocatorEx *saved, int kind) {
    PyMemAllocatorEx h;
    PyMem_GetAllocator(d, saved);
    h.ctx = saved;
    h.malloc = kind == 1 ? raw_malloc : kind == 2 ? pm_malloc : gil_malloc;
    h.calloc = kind == 1 ? raw_calloc : kind == 2 ? pm_calloc : gil_calloc;
    h.realloc = kind == 1 ? raw_realloc : kind == 2 ? pm_realloc : gil_realloc;
    h.free = kind == 1 ? raw_free : kind == 2 ? pm_free : gil_free;
    PyMem_SetAllocator(d, &h);
}

/* After the pymalloc install: a small PyObject_Malloc block is always pymalloc's (in an arena
 * from before the install or after), so its pool header can be read: its class must be the
 * request's rounded up to 16 (else the layout is not 3.11's); the count moves by the classes
 * of the blocks in the arenas the hook knows, and comes back once they are freed. */
static int pymalloc_selftest(void) {
    enum { N = 64 };
    void *ps[N];
    int64_t before = gil_count, want = 0;
    for (int i = 0; i < N; i++) {
        size_t n = 1 + (size_t)i * 8;
        ps[i] = PyObject_Malloc(n);
        if (ps[i] == NULL || pool_class(ps[i]) != (int64_t)(((n - 1) >> 4) + 1) << 4)
            return -1;
        if (in_arena(ps[i])) want += pool_class(ps[i]);
    }
    int ok = gil_count - before == want;
    for (int i = 0; i < N; i++) PyObject_Free(ps[i]);
    return ok && gil_count == before ? 0 : -1;
}

static int64_t heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    /* under an LD_PRELOADed jemalloc, glibc's mallinfo2 sees nothing: ask jemalloc */
    typedef int (*mallctl_t)(const char *, void *, size_t *, void *, size_t);
    mallctl_t mallctl = (mallctl_t)dlsym(RTLD_DEFAULT, "mallctl");
    if (mallctl) {
        uint64_t epoch = 1; size_t sz = sizeof(epoch), allocated = 0, asz = sizeof(allocated);
        mallctl("epoch", &epoch, &sz, &epoch, sz);
        if (mallctl("stats.allocated", &allocated, &asz, NULL, 0) == 0) return (int64_t)allocated;
    }
    struct mallinfo2 mi = mallinfo2();
    return (int64_t)(mi.uordblks + mi.hblkhd);
#else
    return 0;
#endif
}

static int poolwalk;

static PyObject *used(PyObject *self, PyObject *unused) {
    if (poolwalk)
        return PyLong_FromLongLong(baseline + walk_pools() +
                                   __atomic_load_n(&raw_count, __ATOMIC_RELAXED));
    return PyLong_FromLongLong(baseline + gil_count +
                               __atomic_load_n(&raw_count, __ATOMIC_RELAXED));
}

static PyObject *counted(PyObject *self, PyObject *unused) {
    return Py_BuildValue("LLL", (long long)baseline, (long long)gil_count,
                         (long long)__atomic_load_n(&raw_count, __ATOMIC_RELAXED));
}

static PyObject *is_installed(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(installed);
}

#ifdef MEMACCT_CALLS
static PyObject *calls(PyObject *self, PyObject *unused) {
    return Py_BuildValue("LLLLLL", (long long)n_alloc, (long long)n_free, (long long)n_realloc,
                         (long long)n_raw, (long long)n_rawr, (long long)n_rawf);
}
#endif

static PyObject *get_design(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(design);
}

static PyObject *arenas(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(arenas_live);
}

/* The allocator's own in-use figure (mallinfo2 uordblks + hblkhd, or jemalloc's
 * stats.allocated) and what one call of it cost in ns: the "sample the allocator" option. */
static PyObject *heap(PyObject *self, PyObject *unused) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t h = heap_in_use();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return Py_BuildValue("LL", (long long)h,
                         (long long)((t1.tv_sec - t0.tv_sec) * 1000000000LL
                                     + (t1.tv_nsec - t0.tv_nsec)));
}


/* (the walk's sum, ns it took, arenas walked) */
static PyObject *walk(PyObject *self, PyObject *unused) {
    uint64_t t0 = now_ns();
    int64_t w = walk_pools();
    uint64_t t1 = now_ns();
    return Py_BuildValue("LLL", (long long)w, (long long)(t1 - t0), (long long)arenas_live);
}

/* CPython's own statistics over every arena (those from before the install too): (arenas
 * allocated current, bytes in allocated blocks, ns the call took, printing included). */
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
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL) return -1;
    _PyObject_DebugMallocStats(f);
    fclose(f);
    *arenas = stat_field(buf, "# arenas allocated current");
    *bytes = stat_field(buf, "# bytes in allocated blocks");
    free(buf);
    return 0;
}
static int64_t pre_arenas = -1, pre_bytes = -1;
static PyObject *debugstats(PyObject *self, PyObject *unused) {
    int64_t ar = -1, by = -1;
    uint64_t t0 = now_ns();
    debug_stats(&ar, &by);
    uint64_t t1 = now_ns();
    return Py_BuildValue("LLL", (long long)ar, (long long)by, (long long)(t1 - t0));
}
static PyObject *preinstall(PyObject *self, PyObject *unused) {
    return Py_BuildValue("LL", (long long)pre_arenas, (long long)pre_bytes);
}

/* The bounded-walk check for maxmemory, called before each denyoom command:
 *   est = baseline + the last walk's sum + RAW now + 1 MiB x (arenas allocated since that walk)
 * (RAW exact, a new arena counted whole at once: both cost two loads). Between walks the
 * estimate misses only pymalloc blocks carved from free space in the arenas that already existed
 * at the walk (and their frees), which is at most F = the free bytes of those arenas at the walk.
 * So est + F < limit proves the process under the limit without a walk. Otherwise a walk runs,
 * but at most one per interval_ns; between such walks est is used as is, and the overshoot is at
 * most what pymalloc carves from old free space in one interval (<= F). The cron walks anyway
 * (force=1), and the eviction loop should force one after each batch of deletions (frees into
 * old arenas are invisible to est). Returns (est >= limit, walked). */
static int64_t w_sum, w_made, w_free, n_walks;
static uint64_t w_time;
static void do_walk(uint64_t t) {
    w_sum = walk_pools();
    w_made = arenas_made;
    w_free = arenas_live * (int64_t)ARENA_SIZE - w_sum;
    w_time = t;
    n_walks++;
}
static inline int64_t estimate(void) {
    return baseline + w_sum + __atomic_load_n(&raw_count, __ATOMIC_RELAXED)
           + (arenas_made - w_made) * (int64_t)ARENA_SIZE;
}
static PyObject *check(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long limit, interval;
    int force = 0, walked = 0;
    if (nargs < 2) { PyErr_SetString(PyExc_TypeError, "check(limit, interval_ns[, force])"); return NULL; }
    limit = PyLong_AsLongLong(args[0]);
    interval = PyLong_AsLongLong(args[1]);
    if (nargs > 2) force = PyObject_IsTrue(args[2]);
    if (PyErr_Occurred()) return NULL;
    int64_t est = estimate();
    if (force || est + w_free >= limit) {
        uint64_t t = now_ns();
        if (force || t - w_time >= (uint64_t)interval) {
            do_walk(t);
            walked = 1;
            est = estimate();
        }
    }
    return Py_BuildValue("(ii)", est >= limit, walked);
}
static PyObject *check_state(PyObject *self, PyObject *unused) {
    return Py_BuildValue("LLL", (long long)estimate(), (long long)w_free, (long long)n_walks);
}

static PyMethodDef methods[] = {
    {"used", used, METH_NOARGS, "counted bytes: baseline at install + hooked allocs - frees"},
    {"counted", counted, METH_NOARGS, "(baseline, MEM+OBJ count, RAW count)"},
    {"installed", is_installed, METH_NOARGS, "whether the hooks are in place"},
#ifdef MEMACCT_CALLS
    {"calls", calls, METH_NOARGS, "(MEM/OBJ mallocs, frees, reallocs, RAW/usable mallocs, reallocs, frees)"},
#endif
    {"design", get_design, METH_NOARGS, "usable-size (PYTHONMALLOC=malloc) or pymalloc-class"},
    {"arenas", arenas, METH_NOARGS, "pymalloc arenas allocated since the install and live"},
    {"heap", heap, METH_NOARGS, "(allocator in-use bytes, ns the call took)"},
    {"walk", walk, METH_NOARGS, "(pool walk sum, ns, arenas walked)"},
    {"debugstats", debugstats, METH_NOARGS, "(CPython's arenas, bytes in allocated blocks, ns)"},
    {"preinstall", preinstall, METH_NOARGS, "(arenas, allocated bytes) before the install"},
    {"check", (PyCFunction)(void (*)(void))check, METH_FASTCALL, "bounded-walk maxmemory check"},
    {"check_state", check_state, METH_NOARGS, "(estimate, free bytes at last walk, walks)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_memacct", NULL, -1, methods};

PyMODINIT_FUNC PyInit__memacct(void) {
    PyObject *m = PyModule_Create(&mod);
    if (m == NULL) return NULL;
    const char *pm = getenv("PYTHONMALLOC");
    if (!installed && pm && strcmp(pm, "malloc") == 0) {
        baseline = heap_in_use();
        wrap(PYMEM_DOMAIN_RAW, &orig_raw, 1);
        wrap(PYMEM_DOMAIN_MEM, &orig_mem, 0);
        wrap(PYMEM_DOMAIN_OBJ, &orig_obj, 0);
        installed = 1;
        design = "usable-size";
    } else if (!installed && (pm == NULL || strcmp(pm, "pymalloc") == 0)) {
        const char *dz = getenv("MEMACCT_DESIGN");
        poolwalk = dz && strcmp(dz, "poolwalk") == 0;
        debug_stats(&pre_arenas, &pre_bytes);
        /* baseline: libc's heap in use (the pre-install arenas are not counted at all) */
        PyObjectArenaAllocator ha;
        arena_bits = mmap(NULL, (size_t)1 << 24, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (arena_bits == MAP_FAILED) {
            Py_DECREF(m);
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        baseline = heap_in_use();
        PyObject_GetArenaAllocator(&orig_arena);
        ha.ctx = NULL;
        ha.alloc = arena_alloc;
        ha.free = arena_free;
        PyObject_SetArenaAllocator(&ha);
        wrap(PYMEM_DOMAIN_RAW, &orig_raw, 1);
        installed = 1;
        if (poolwalk) {
            design = "poolwalk";
            do_walk(now_ns());
            return m;
        }
        wrap(PYMEM_DOMAIN_MEM, &orig_mem, 2);
        wrap(PYMEM_DOMAIN_OBJ, &orig_obj, 2);
        design = "pymalloc-class";
        if (pymalloc_selftest() < 0) {
            Py_DECREF(m);
            PyErr_SetString(PyExc_RuntimeError, "_memacct: pymalloc's layout is not 3.11's");
            return NULL;
        }
    }
    return m;
}
