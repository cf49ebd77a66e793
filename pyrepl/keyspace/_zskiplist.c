/* The sorted set's ordered index: Redis's skiplist with spans (t_zset.c's zsl* functions),
 * written here from the algorithm, plus the member -> score dict kept in step with it.
 *
 * Why C: in Python the ordered index cost 2-9 us an update (a chunked list bisected over
 * (score, member) tuples: ~55 Python lines and ~40 cache misses an update on a 100,000-member
 * set), where a whole SET request costs ~3 us; bench/RESULTS.md, "Sorted sets in C", has the
 * figures. ZSet (zset.py) subclasses ZIndex and adds the rest of the interface in Python.
 *
 * Order: by score, then by member bytes (memcmp, shorter first on a common prefix), as Redis
 * and Python's (float, bytes) tuples order them. Scores are never NaN (rejected here too), and
 * -0.0 is stored as 0.0 (zset.py's docstring says why).
 *
 * The dict is the truth for "is this a member, with which score"; the skiplist holds one node
 * per dict entry, with a reference to the member. Every mutation allocates before it changes
 * anything, so a MemoryError leaves both as they were. An update reuses its node (unlinked and
 * linked again at its new place): it cannot fail half way.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAXLEVEL 32     /* as Redis: enough for 2^64 elements at p = 1/4 */
#define HEAD_LEVELS 4   /* the header's levels until a node needs more (small sets stay small:
                         * Redis's header has all 32, 512 bytes, but it keeps small sets in a
                         * listpack) */

typedef struct znode {
    PyObject *ele;              /* the member (bytes), owned */
    double score;
    struct znode *backward;     /* NULL for the first node */
    int nlevel;
    struct zlevel {
        struct znode *forward;
        Py_ssize_t span;        /* nodes crossed by this link (ranks) */
    } level[];
} znode;

typedef struct {
    PyObject_HEAD
    PyObject *dict;             /* member -> score (float) */
    znode *header, *tail;
    Py_ssize_t length;
    int level;
    int head_levels;            /* levels allocated in header: HEAD_LEVELS or MAXLEVEL */
    uint64_t rng;
} ZIndex;

enum { UNCHANGED = 0, ADDED = 1, UPDATED = 2 };

/* -- order ----------------------------------------------------------------------------------- */

static int ele_cmp(PyObject *a, PyObject *b)
{
    Py_ssize_t la = PyBytes_GET_SIZE(a), lb = PyBytes_GET_SIZE(b);
    int c = memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), (size_t)(la < lb ? la : lb));
    if (c)
        return c;
    return la < lb ? -1 : la > lb;
}

/* Does node x sort before the key (score, ele)? With ele NULL the key is (score,): before
 * every member of that score, as a 1-tuple sorts before the 2-tuples it prefixes. */
static inline int before(const znode *x, double score, PyObject *ele)
{
    return x->score < score || (x->score == score && ele != NULL && ele_cmp(x->ele, ele) < 0);
}

/* -- the skiplist ---------------------------------------------------------------------------- */

static znode *node_new(int nlevel)
{
    znode *n = PyMem_Malloc(sizeof(znode) + (size_t)nlevel * sizeof(struct zlevel));
    if (n == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    n->ele = NULL;
    n->backward = NULL;
    n->nlevel = nlevel;
    for (int i = 0; i < nlevel; i++) {
        n->level[i].forward = NULL;
        n->level[i].span = 0;
    }
    return n;
}

static int random_level(ZIndex *z)
{
    int level = 1;
    for (;;) {  /* xorshift64; p = 1/4 per extra level, as Redis's ZSKIPLIST_P */
        uint64_t x = z->rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        z->rng = x;
        if ((x >> 32) & 3 || level == MAXLEVEL)
            return level;
        level++;
    }
}

/* Make room in the header for a node of nlevel levels (no node points at the header, so it
 * may move). -1 with MemoryError, nothing changed. */
static int header_fit(ZIndex *z, int nlevel)
{
    if (nlevel <= z->head_levels)
        return 0;
    znode *h = PyMem_Realloc(z->header, sizeof(znode) + MAXLEVEL * sizeof(struct zlevel));
    if (h == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = z->head_levels; i < MAXLEVEL; i++) {
        h->level[i].forward = NULL;
        h->level[i].span = 0;
    }
    h->nlevel = MAXLEVEL;
    z->header = h;
    z->head_levels = MAXLEVEL;
    return 0;
}

/* Link node n (its score, ele and nlevel set) at its place (the header fits it). */
static void zsl_link(ZIndex *z, znode *n)
{
    znode *update[MAXLEVEL], *x = z->header;
    Py_ssize_t rank[MAXLEVEL];
    int i;
    for (i = z->level - 1; i >= 0; i--) {
        rank[i] = i == z->level - 1 ? 0 : rank[i + 1];
        while (x->level[i].forward && before(x->level[i].forward, n->score, n->ele)) {
            rank[i] += x->level[i].span;
            x = x->level[i].forward;
        }
        update[i] = x;
    }
    if (n->nlevel > z->level) {
        for (i = z->level; i < n->nlevel; i++) {
            rank[i] = 0;
            update[i] = z->header;
            update[i]->level[i].span = z->length;
        }
        z->level = n->nlevel;
    }
    for (i = 0; i < n->nlevel; i++) {
        n->level[i].forward = update[i]->level[i].forward;
        update[i]->level[i].forward = n;
        n->level[i].span = update[i]->level[i].span - (rank[0] - rank[i]);
        update[i]->level[i].span = (rank[0] - rank[i]) + 1;
    }
    for (i = n->nlevel; i < z->level; i++)
        update[i]->level[i].span++;
    n->backward = update[0] == z->header ? NULL : update[0];
    if (n->level[0].forward)
        n->level[0].forward->backward = n;
    else
        z->tail = n;
    z->length++;
}

/* Unlink x, given update[i] = the last node before x at each level. */
static void zsl_unlink(ZIndex *z, znode *x, znode **update)
{
    for (int i = 0; i < z->level; i++) {
        if (update[i]->level[i].forward == x) {
            update[i]->level[i].span += x->level[i].span - 1;
            update[i]->level[i].forward = x->level[i].forward;
        }
        else {
            update[i]->level[i].span -= 1;
        }
    }
    if (x->level[0].forward)
        x->level[0].forward->backward = x->backward;
    else
        z->tail = x->backward;
    while (z->level > 1 && z->header->level[z->level - 1].forward == NULL)
        z->level--;
    z->length--;
}

/* Find the node of (score, ele), filling update; NULL (and SystemError) when it is missing,
 * which would mean the dict and the skiplist disagree. */
static znode *zsl_find(ZIndex *z, double score, PyObject *ele, znode **update)
{
    znode *x = z->header;
    for (int i = z->level - 1; i >= 0; i--) {
        while (x->level[i].forward && before(x->level[i].forward, score, ele))
            x = x->level[i].forward;
        update[i] = x;
    }
    x = x->level[0].forward;
    if (x == NULL || x->score != score || ele_cmp(x->ele, ele) != 0) {
        PyErr_SetString(PyExc_SystemError, "sorted set index out of step with its dict");
        return NULL;
    }
    return x;
}

static void node_free(znode *n)
{
    Py_XDECREF(n->ele);
    PyMem_Free(n);
}

/* The number of nodes before the key (score, ele): the 0-based index of the first node >= it. */
static Py_ssize_t zsl_count_before(ZIndex *z, double score, PyObject *ele)
{
    znode *x = z->header;
    Py_ssize_t rank = 0;
    for (int i = z->level - 1; i >= 0; i--) {
        while (x->level[i].forward && before(x->level[i].forward, score, ele)) {
            rank += x->level[i].span;
            x = x->level[i].forward;
        }
    }
    return rank;
}

/* The node at 0-based index (0 <= index < length). */
static znode *zsl_at(ZIndex *z, Py_ssize_t index)
{
    znode *x = z->header;
    Py_ssize_t traversed = 0, rank = index + 1;
    for (int i = z->level - 1; i >= 0; i--) {
        while (x->level[i].forward && traversed + x->level[i].span <= rank) {
            traversed += x->level[i].span;
            x = x->level[i].forward;
        }
        if (traversed == rank)
            return x;
    }
    return NULL;    /* not reached for a valid index */
}

/* -- the type -------------------------------------------------------------------------------- */

static PyObject *zindex_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    ZIndex *z = (ZIndex *)type->tp_alloc(type, 0);
    if (z == NULL)
        return NULL;
    z->dict = PyDict_New();
    z->header = node_new(HEAD_LEVELS);
    z->head_levels = HEAD_LEVELS;
    if (z->dict == NULL || z->header == NULL) {
        Py_DECREF(z);
        return NULL;
    }
    z->tail = NULL;
    z->length = 0;
    z->level = 1;
    z->rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(uintptr_t)z;
    if (z->rng == 0)
        z->rng = 1;
    return (PyObject *)z;
}

static void zindex_clear_nodes(ZIndex *z)
{
    if (z->header == NULL)
        return;
    znode *x = z->header->level[0].forward;
    while (x) {
        znode *next = x->level[0].forward;
        node_free(x);
        x = next;
    }
    for (int i = 0; i < z->head_levels; i++) {
        z->header->level[i].forward = NULL;
        z->header->level[i].span = 0;
    }
    z->tail = NULL;
    z->length = 0;
    z->level = 1;
}

static void zindex_dealloc(ZIndex *z)
{
    zindex_clear_nodes(z);
    if (z->header)
        PyMem_Free(z->header);
    Py_XDECREF(z->dict);
    Py_TYPE(z)->tp_free((PyObject *)z);
}

static Py_ssize_t zindex_len(ZIndex *z)
{
    return z->length;
}

static int check_member(PyObject *member)
{
    if (!PyBytes_Check(member)) {
        PyErr_Format(PyExc_TypeError, "sorted set members are bytes, not %.100s",
                     Py_TYPE(member)->tp_name);
        return -1;
    }
    return 0;
}

/* The score as stored: a float object, never NaN, -0.0 as 0.0. New reference. */
static PyObject *score_object(PyObject *score, double *out)
{
    double d = PyFloat_AsDouble(score);
    if (d == -1.0 && PyErr_Occurred())
        return NULL;
    if (isnan(d)) {
        PyErr_SetString(PyExc_ValueError, "a sorted set score cannot be NaN");
        return NULL;
    }
    if (d == 0.0)
        d = 0.0;    /* -0.0 */
    *out = d;
    if (PyFloat_CheckExact(score) && !(d == 0.0 && signbit(PyFloat_AS_DOUBLE(score)))) {
        Py_INCREF(score);
        return score;
    }
    return PyFloat_FromDouble(d);
}

static PyObject *zindex_set_score(ZIndex *z, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_score(member, score)");
        return NULL;
    }
    PyObject *member = args[0];
    double score;
    if (check_member(member) < 0)
        return NULL;
    PyObject *sobj = score_object(args[1], &score);
    if (sobj == NULL)
        return NULL;
    PyObject *old = PyDict_GetItemWithError(z->dict, member);
    if (old == NULL && PyErr_Occurred())
        goto fail;
    if (old != NULL) {
        double was = PyFloat_AS_DOUBLE(old);
        znode *update[MAXLEVEL];
        if (was == score) {
            Py_DECREF(sobj);
            return PyLong_FromLong(UNCHANGED);
        }
        znode *x = zsl_find(z, was, member, update);
        if (x == NULL || PyDict_SetItem(z->dict, member, sobj) < 0)
            goto fail;
        Py_DECREF(sobj);
        /* Redis's zslUpdateScore: in place when the order does not change */
        if ((x->backward == NULL || x->backward->score < score) &&
                (x->level[0].forward == NULL || x->level[0].forward->score > score)) {
            x->score = score;
        }
        else {
            zsl_unlink(z, x, update);
            x->score = score;
            zsl_link(z, x);
        }
        return PyLong_FromLong(UPDATED);
    }
    znode *n = node_new(random_level(z));
    if (n == NULL)
        goto fail;
    if (header_fit(z, n->nlevel) < 0 || PyDict_SetItem(z->dict, member, sobj) < 0) {
        PyMem_Free(n);
        goto fail;
    }
    Py_DECREF(sobj);
    Py_INCREF(member);
    n->ele = member;
    n->score = score;
    zsl_link(z, n);
    return PyLong_FromLong(ADDED);
fail:
    Py_DECREF(sobj);
    return NULL;
}

static PyObject *zindex_remove(ZIndex *z, PyObject *member)
{
    if (check_member(member) < 0)
        return NULL;
    PyObject *old = PyDict_GetItemWithError(z->dict, member);
    if (old == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_FALSE;
    }
    znode *update[MAXLEVEL];
    znode *x = zsl_find(z, PyFloat_AS_DOUBLE(old), member, update);
    if (x == NULL)
        return NULL;
    if (PyDict_DelItem(z->dict, member) < 0)
        return NULL;
    zsl_unlink(z, x, update);
    node_free(x);
    Py_RETURN_TRUE;
}

static PyObject *item_tuple(znode *x)
{
    PyObject *s = PyFloat_FromDouble(x->score);
    if (s == NULL)
        return NULL;
    PyObject *t = PyTuple_New(2);
    if (t == NULL) {
        Py_DECREF(s);
        return NULL;
    }
    Py_INCREF(x->ele);
    PyTuple_SET_ITEM(t, 0, s);
    PyTuple_SET_ITEM(t, 1, x->ele);
    return t;
}

/* A list of the n items from index on (0 <= index < length when n > 0), walking forward, or
 * backward when back. */
static PyObject *items_from(ZIndex *z, Py_ssize_t index, Py_ssize_t n, int back)
{
    PyObject *out = PyList_New(n);
    if (out == NULL || n == 0)
        return out;
    znode *x = zsl_at(z, index);
    for (Py_ssize_t k = 0; k < n; k++, x = back ? x->backward : x->level[0].forward) {
        PyObject *t = item_tuple(x);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, t);
    }
    return out;
}

/* _bisect(score, member=None): the index of the first item >= (score, member), or >= (score,)
 * without a member. */
static PyObject *zindex_bisect(ZIndex *z, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "_bisect(score, member=None)");
        return NULL;
    }
    double score = PyFloat_AsDouble(args[0]);
    if (score == -1.0 && PyErr_Occurred())
        return NULL;
    PyObject *member = nargs == 2 && args[1] != Py_None ? args[1] : NULL;
    if (member != NULL && check_member(member) < 0)
        return NULL;
    return PyLong_FromSsize_t(zsl_count_before(z, score, member));
}

static int index_arg(ZIndex *z, PyObject *arg, Py_ssize_t *out)
{
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred())
        return -1;
    if (i < 0 || i >= z->length) {
        PyErr_SetString(PyExc_IndexError, "sorted set index out of range");
        return -1;
    }
    *out = i;
    return 0;
}

/* _at(index): the (score, member) item at 0-based ascending index. */
static PyObject *zindex_at(ZIndex *z, PyObject *arg)
{
    Py_ssize_t i;
    if (index_arg(z, arg, &i) < 0)
        return NULL;
    return item_tuple(zsl_at(z, i));
}

static int span_args(ZIndex *z, PyObject *const *args, Py_ssize_t nargs, const char *usage,
                     Py_ssize_t *start, Py_ssize_t *stop)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    *start = PyLong_AsSsize_t(args[0]);
    if (*start == -1 && PyErr_Occurred())
        return -1;
    *stop = PyLong_AsSsize_t(args[1]);
    if (*stop == -1 && PyErr_Occurred())
        return -1;
    if (*start < 0)
        *start = 0;
    if (*stop > z->length)
        *stop = z->length;
    return 0;
}

/* _range(start, stop): the items with ascending index in [start, stop), clipped, as a list of
 * (score, member). */
static PyObject *zindex_range(ZIndex *z, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t start, stop;
    if (span_args(z, args, nargs, "_range(start, stop)", &start, &stop) < 0)
        return NULL;
    return items_from(z, start, stop > start ? stop - start : 0, 0);
}

/* _range_back(index, count): up to count items descending from index (inclusive). */
static PyObject *zindex_range_back(ZIndex *z, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_range_back(index, count)");
        return NULL;
    }
    Py_ssize_t i;
    if (index_arg(z, args[0], &i) < 0)
        return NULL;
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (count > i + 1)
        count = i + 1;
    if (count < 0)
        count = 0;
    return items_from(z, i, count, 1);
}

/* _delete_range(start, stop): remove the items with ascending index in [start, stop) (clipped)
 * from the skiplist and the dict; returns how many (Redis's zslDeleteRangeByRank). */
static PyObject *zindex_delete_range(ZIndex *z, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t start, stop;
    if (span_args(z, args, nargs, "_delete_range(start, stop)", &start, &stop) < 0)
        return NULL;
    if (start >= stop)
        return PyLong_FromLong(0);
    if (start == 0 && stop == z->length) {
        Py_ssize_t n = z->length;
        zindex_clear_nodes(z);
        PyDict_Clear(z->dict);
        return PyLong_FromSsize_t(n);
    }
    znode *update[MAXLEVEL], *x = z->header;
    Py_ssize_t traversed = 0;
    for (int i = z->level - 1; i >= 0; i--) {
        while (x->level[i].forward && traversed + x->level[i].span <= start) {
            traversed += x->level[i].span;
            x = x->level[i].forward;
        }
        update[i] = x;
    }
    x = x->level[0].forward;
    Py_ssize_t removed = 0;
    int failed = 0;
    while (x && traversed < stop) {
        znode *next = x->level[0].forward;
        zsl_unlink(z, x, update);
        if (PyDict_DelItem(z->dict, x->ele) < 0)
            failed = 1;     /* (not reached: every node has its entry) */
        node_free(x);
        removed++;
        traversed++;
        x = next;
    }
    if (failed)
        return NULL;
    return PyLong_FromSsize_t(removed);
}

/* _check(): assert the skiplist's invariants (tests): order, back links, tail, length, every
 * span equal to the distance it claims, one node per dict entry with the dict's score. */
static PyObject *zindex_check(ZIndex *z, PyObject *unused)
{
#define FAIL(msg) do { PyErr_SetString(PyExc_AssertionError, msg); return NULL; } while (0)
    Py_ssize_t n = 0;
    znode *prev = NULL;
    for (znode *x = z->header->level[0].forward; x; prev = x, x = x->level[0].forward) {
        if (x->backward != prev)
            FAIL("bad backward link");
        if (prev && !before(prev, x->score, x->ele))
            FAIL("not sorted");
        if (x->nlevel > z->level)
            FAIL("node above the list's level");
        PyObject *s = PyDict_GetItemWithError(z->dict, x->ele);
        if (s == NULL || PyFloat_AS_DOUBLE(s) != x->score)
            FAIL("dict out of step");
        n++;
    }
    if (z->tail != prev)
        FAIL("bad tail");
    if (n != z->length || PyDict_GET_SIZE(z->dict) != n)
        FAIL("length mismatch");
    for (int i = 0; i < z->level; i++) {
        /* walk level i, measuring each link's span on level 0 */
        znode *x = z->header;
        Py_ssize_t pos = 0;     /* rank of x: header 0, first node 1 */
        while (x) {
            znode *f = x->level[i].forward;
            Py_ssize_t d = 0;
            znode *y = x;
            if (f) {
                while (y != f) {
                    y = y->level[0].forward;
                    if (y == NULL)
                        FAIL("forward link not on level 0");
                    d++;
                }
                if (x->level[i].span != d)
                    FAIL("bad span");
            }
            else if (x->level[i].span != z->length - pos && x != z->header)
                FAIL("bad span at the end of a level");
            pos += d;
            x = f;
        }
    }
    for (int i = z->level; i < z->head_levels; i++)
        if (z->header->level[i].forward)
            FAIL("link above the list's level");
    Py_RETURN_NONE;
#undef FAIL
}

static PyMethodDef zindex_methods[] = {
    {"set_score", (PyCFunction)(void (*)(void))zindex_set_score, METH_FASTCALL,
     "set_score(member, score) -> 0 unchanged, 1 added, 2 updated"},
    {"remove", (PyCFunction)zindex_remove, METH_O, "remove(member) -> bool"},
    {"_bisect", (PyCFunction)(void (*)(void))zindex_bisect, METH_FASTCALL,
     "index of the first item >= (score, member), or >= (score,)"},
    {"_at", (PyCFunction)zindex_at, METH_O, "the (score, member) item at an index"},
    {"_range", (PyCFunction)(void (*)(void))zindex_range, METH_FASTCALL,
     "the items with ascending index in [start, stop)"},
    {"_range_back", (PyCFunction)(void (*)(void))zindex_range_back, METH_FASTCALL,
     "up to count items descending from index"},
    {"_delete_range", (PyCFunction)(void (*)(void))zindex_delete_range, METH_FASTCALL,
     "remove the items with ascending index in [start, stop)"},
    {"_check", (PyCFunction)zindex_check, METH_NOARGS, "assert the invariants"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef zindex_members[] = {
    {"dict", T_OBJECT_EX, offsetof(ZIndex, dict), READONLY, "member -> score"},
    {NULL, 0, 0, 0, NULL},
};

static PySequenceMethods zindex_as_sequence = {
    .sq_length = (lenfunc)zindex_len,
};

static PyTypeObject ZIndexType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyrepl.keyspace._zskiplist.ZIndex",
    .tp_basicsize = sizeof(ZIndex),
    .tp_dealloc = (destructor)zindex_dealloc,
    .tp_as_sequence = &zindex_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A sorted set's member -> score dict and its skiplist (Redis's zsl).",
    .tp_methods = zindex_methods,
    .tp_members = zindex_members,
    .tp_new = zindex_new,
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_zskiplist",
    "The sorted set's ordered index (see the file's comment).", -1, NULL,
};

PyMODINIT_FUNC PyInit__zskiplist(void)
{
    if (PyType_Ready(&ZIndexType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    Py_INCREF(&ZIndexType);
    if (PyModule_AddObject(m, "ZIndex", (PyObject *)&ZIndexType) < 0) {
        Py_DECREF(&ZIndexType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
