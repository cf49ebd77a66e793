/* pyrepl/_memacct.h: the C API of pyrepl._memacct (memory accounting, issue 37) for other
 * extensions. Get it once, with the GIL held:
 *
 *     const PyreplMemacctAPI *api = PyCapsule_Import(PYREPL_MEMACCT_CAPSULE, 0);
 *
 * Both functions need the GIL (they read pymalloc's pools) and answer -1 while the accounting
 * is not installed (PYREPL_PURE, the self-test failed, install() not called): the caller then
 * asks the Python meter (core.meter), which is RSS-based.
 *
 *   used(fresh)  bytes in use. fresh = 0: a pool walk unless one ran within the interval
 *                (max(floor, 100 x the last walk's duration)), else the last walk's sum with
 *                RAW (exact) and every arena made since counted whole; fresh = 1: a walk now;
 *                fresh = 2: a walk and a re-read of the arenas from before the install
 *                (_PyObject_DebugMallocStats, ~40-120 us): exact over all of pymalloc.
 *   bound()      a cheap upper bound of used(2) (no walk: a few loads and adds): the last walk
 *                + the free space in the arenas it walked + 1 MiB per arena made since + the
 *                free space of the pre-install arenas + RAW now. The dispatcher calls it
 *                before a denyoom command when maxmemory is set; only when it reaches the
 *                limit does it need used(0).
 */
#ifndef PYREPL_MEMACCT_H
#define PYREPL_MEMACCT_H
#include <stdint.h>

#define PYREPL_MEMACCT_CAPSULE "pyrepl._memacct._C_API"
#define PYREPL_MEMACCT_API_VERSION 1

typedef struct {
    int version;                     /* PYREPL_MEMACCT_API_VERSION */
    int64_t (*used)(int fresh);
    int64_t (*bound)(void);
} PyreplMemacctAPI;

/* For a caller that includes Python.h first: whether the accounting's upper bound is within
 * ``limit`` bytes (0 also when it cannot say: not installed, the module missing). The capsule
 * is imported on first use. */
#ifdef Py_PYTHON_H
static const PyreplMemacctAPI *pyrepl_memacct_api;
static int pyrepl_memacct_tried;

static inline int
pyrepl_memacct_within(long long limit)
{
    if (!pyrepl_memacct_tried) {
        pyrepl_memacct_tried = 1;
        pyrepl_memacct_api = PyCapsule_Import(PYREPL_MEMACCT_CAPSULE, 0);
        if (pyrepl_memacct_api == NULL)
            PyErr_Clear();
        else if (pyrepl_memacct_api->version != PYREPL_MEMACCT_API_VERSION)
            pyrepl_memacct_api = NULL;
    }
    if (pyrepl_memacct_api == NULL)
        return 0;
    int64_t b = pyrepl_memacct_api->bound();
    return b >= 0 && b <= limit;
}
#endif

#endif
