/* The sorted set's ordered index: a B+tree that counts (each inner node knows how many items
 * lie under each child), plus the member -> score dict kept in step with it.
 *
 * Why C: in Python the ordered index cost 2-9 us an update (a chunked list bisected over
 * (score, member) tuples), where a whole SET request costs ~3 us. Why a B+tree and not Redis's
 * skiplist (which this file held until 2026-11-25): an update of a 100,000-member set walked
 * ~25 skiplist nodes scattered over ~6 MB, one dependent cache miss each; here the scores of a
 * node lie side by side (a leaf's 64 scores in 8 cache lines), the whole index of such a set
 * takes ~2 MB and a lookup visits 3 nodes. bench/RESULTS.md ("The sorted set as a B+tree") has
 * the figures. ZSet (zset.py) subclasses ZIndex and adds the rest of the interface in Python.
 *
 * Order: by score, then by member bytes (memcmp, shorter first on a common prefix), as Redis
 * and Python's (float, bytes) tuples order them. Scores are never NaN (rejected here too), and
 * -0.0 is stored as 0.0 (zset.py's docstring says why).
 *
 * The tree: leaves hold up to `fanout` items (score and member, each member owned by the leaf)
 * and are linked both ways in order; inner nodes hold up to `fanout` children with the number
 * of items under each, and for each child after the first a separator key (owned): every item
 * of child j-1 sorts before separator j, and separator j sorts before or equal to every item of
 * child j. A separator need not be an item of the set (a removed first item leaves it valid),
 * so only splits, merges and moves between siblings touch separators. Every node but the root
 * keeps at least fanout/4 entries (an emptier one merges with or borrows from a sibling). A
 * root that is a leaf starts with room for 4 items and doubles up to `fanout`, so a small set
 * stays small.
 *
 * Every mutation reserves the nodes it may need before it changes anything, so a MemoryError
 * leaves the dict and the tree as they were.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_zbtree.h"

#define FANOUT 64       /* entries per node (leaf items, inner children) */
#define MIN_FANOUT 4    /* the smallest a test may build (ZIndex(_fanout=4)) */
#define ROOT_LEAF_START 4
#define MAXDEPTH 48     /* inner levels: at fanout 4 and a quarter full, 2^48 items */

typedef struct bnode {
    int n;                      /* items (leaf) or children (inner) */
    int cap;                    /* room: fanout, or less for a root leaf */
    int leaf;
    struct bnode *prev, *next;  /* leaves: the neighbours in order */
    double *score;              /* [cap]: the items' scores, or the separators' (inner, j >= 1) */
    PyObject **ele;             /* [cap]: members, or the separators' members (j >= 1), owned */
    struct bnode **child;       /* inner: [cap] */
    Py_ssize_t *count;          /* inner: [cap] items under each child */
} bnode;

typedef struct {
    PyObject_HEAD
    PyObject *dict;             /* member -> score (float) */
    bnode *root;                /* a leaf (maybe empty) or an inner node */
    int depth;                  /* inner levels above the leaves */
    int fanout;
    Py_ssize_t length;
    bnode *first, *last;        /* the first and last leaves */
    bnode *spare_leaf, *spare_inner;    /* reserved nodes (linked by next), full size */
} ZIndex;

/* A descent: the inner node and the child taken at each level, then the leaf and a position. */
typedef struct {
    bnode *node[MAXDEPTH];
    int idx[MAXDEPTH];
    bnode *leaf;
    int pos;
} path;

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

/* Does (s, e) sort before the key (score, ele), or equal to it when or_equal? With ele NULL
 * the key is (score,): before every member of that score, as a 1-tuple sorts before the
 * 2-tuples it prefixes. */
static inline int key_before(double s, PyObject *e, double score, PyObject *ele, int or_equal)
{
    return s < score || (s == score && ele != NULL && ele_cmp(e, ele) < or_equal);
}

static inline int before(double s, PyObject *e, double score, PyObject *ele)
{
    return key_before(s, e, score, ele, 0);
}

/* -- nodes ----------------------------------------------------------------------------------- */

/* The bytes of a node of cap entries: the header, then its arrays. */
static size_t node_size(int cap, int leaf)
{
    size_t per = sizeof(double) + sizeof(PyObject *) +
                 (leaf ? 0 : sizeof(bnode *) + sizeof(Py_ssize_t));
    return sizeof(bnode) + (size_t)cap * per;
}

static bnode *node_alloc(int cap, int leaf)
{
    bnode *b = PyMem_Malloc(node_size(cap, leaf));
    if (b == NULL)
        return NULL;
    char *p = (char *)(b + 1);
    b->score = (double *)p;
    p += (size_t)cap * sizeof(double);
    b->ele = (PyObject **)p;
    p += (size_t)cap * sizeof(PyObject *);
    if (leaf) {
        b->child = NULL;
        b->count = NULL;
    }
    else {
        b->child = (bnode **)p;
        p += (size_t)cap * sizeof(bnode *);
        b->count = (Py_ssize_t *)p;
    }
    b->n = 0;
    b->cap = cap;
    b->leaf = leaf;
    b->prev = b->next = NULL;
    return b;
}

/* Resize a root leaf (nothing points at it but z). */
static bnode *leaf_resize(bnode *b, int cap)
{
    bnode *r = node_alloc(cap, 1);
    if (r == NULL)
        return NULL;
    memcpy(r->score, b->score, (size_t)b->n * sizeof(double));
    memcpy(r->ele, b->ele, (size_t)b->n * sizeof(PyObject *));
    r->n = b->n;
    PyMem_Free(b);
    return r;
}

static bnode *take(ZIndex *z, int leaf)
{
    bnode **pool = leaf ? &z->spare_leaf : &z->spare_inner;
    bnode *b = *pool;
    if (b == NULL)  /* every split's node is reserved before the change begins */
        Py_FatalError("sorted set index: a split without a reserved node");
    *pool = b->next;
    b->n = 0;
    b->prev = b->next = NULL;
    return b;
}

static void give_back(ZIndex *z, bnode *b)
{
    bnode **pool = b->leaf ? &z->spare_leaf : &z->spare_inner;
    if (*pool == NULL) {    /* keep one of each for the next split */
        b->next = NULL;
        *pool = b;
    }
    else {
        PyMem_Free(b);
    }
}

/* Make sure the pools hold `leaves` and `inners` nodes. -1 with MemoryError. */
static int reserve(ZIndex *z, int leaves, int inners)
{
    for (int k = 0; k < 2; k++) {
        int leaf = k == 0, want = leaf ? leaves : inners;
        bnode **pool = leaf ? &z->spare_leaf : &z->spare_inner;
        int have = 0;
        for (bnode *b = *pool; b && have < want; b = b->next)
            have++;
        for (; have < want; have++) {
            bnode *b = node_alloc(z->fanout, leaf);
            if (b == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            b->next = *pool;
            *pool = b;
        }
    }
    return 0;
}

static Py_ssize_t node_total(const bnode *b)
{
    if (b->leaf)
        return b->n;
    Py_ssize_t t = 0;
    for (int j = 0; j < b->n; j++)
        t += b->count[j];
    return t;
}

static void node_free_all(bnode *b)
{
    if (b->leaf) {
        for (int i = 0; i < b->n; i++)
            Py_DECREF(b->ele[i]);
    }
    else {
        for (int j = 0; j < b->n; j++) {
            if (j > 0)
                Py_DECREF(b->ele[j]);
            node_free_all(b->child[j]);
        }
    }
    PyMem_Free(b);
}

/* Move entries [from, b->n) of node b to the front of the empty node c. */
static void move_tail(bnode *b, int from, bnode *c)
{
    int k = b->n - from;
    memcpy(c->score, b->score + from, (size_t)k * sizeof(double));
    memcpy(c->ele, b->ele + from, (size_t)k * sizeof(PyObject *));
    if (!b->leaf) {
        memcpy(c->child, b->child + from, (size_t)k * sizeof(bnode *));
        memcpy(c->count, b->count + from, (size_t)k * sizeof(Py_ssize_t));
    }
    c->n = k;
    b->n = from;
}

/* Open a gap at position i of node b (room for one more). */
static void open_at(bnode *b, int i)
{
    int k = b->n - i;
    memmove(b->score + i + 1, b->score + i, (size_t)k * sizeof(double));
    memmove(b->ele + i + 1, b->ele + i, (size_t)k * sizeof(PyObject *));
    if (!b->leaf) {
        memmove(b->child + i + 1, b->child + i, (size_t)k * sizeof(bnode *));
        memmove(b->count + i + 1, b->count + i, (size_t)k * sizeof(Py_ssize_t));
    }
    b->n++;
}

/* Close the entry at position i of node b (what it held is the caller's). */
static void close_at(bnode *b, int i)
{
    int k = b->n - i - 1;
    memmove(b->score + i, b->score + i + 1, (size_t)k * sizeof(double));
    memmove(b->ele + i, b->ele + i + 1, (size_t)k * sizeof(PyObject *));
    if (!b->leaf) {
        memmove(b->child + i, b->child + i + 1, (size_t)k * sizeof(bnode *));
        memmove(b->count + i, b->count + i + 1, (size_t)k * sizeof(Py_ssize_t));
    }
    b->n--;
}

/* -- descents -------------------------------------------------------------------------------- */

/* The first position from lo on in node b whose key is not before the key (not before or
 * equal to it when or_equal): a binary search, the keys being in order. */
static inline int first_not_before(const bnode *b, int lo, double score, PyObject *ele,
                                   int or_equal)
{
    int hi = b->n;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (key_before(b->score[mid], b->ele[mid], score, ele, or_equal))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The child of inner node b under which the key lies: the last j >= 1 whose separator is at or
 * before the key, else 0. */
static inline int child_for(const bnode *b, double score, PyObject *ele)
{
    return first_not_before(b, 1, score, ele, 1) - 1;
}

/* The first position of leaf b whose item is not before the key. */
static inline int leaf_lower(const bnode *b, double score, PyObject *ele)
{
    return first_not_before(b, 0, score, ele, 0);
}

/* Descend to the key: fills p; returns the number of items before it. */
static Py_ssize_t descend(ZIndex *z, double score, PyObject *ele, path *p)
{
    bnode *b = z->root;
    Py_ssize_t rank = 0;
    for (int d = 0; d < z->depth; d++) {
        int j = child_for(b, score, ele);
        for (int k = 0; k < j; k++)
            rank += b->count[k];
        p->node[d] = b;
        p->idx[d] = j;
        b = b->child[j];
    }
    p->leaf = b;
    p->pos = leaf_lower(b, score, ele);
    return rank + p->pos;
}

/* Descend to the item at index i (0 <= i < length). */
static void descend_at(ZIndex *z, Py_ssize_t i, path *p)
{
    bnode *b = z->root;
    for (int d = 0; d < z->depth; d++) {
        int j = 0;
        while (i >= b->count[j]) {
            i -= b->count[j];
            j++;
        }
        p->node[d] = b;
        p->idx[d] = j;
        b = b->child[j];
    }
    p->leaf = b;
    p->pos = (int)i;
}

/* -- insert ---------------------------------------------------------------------------------- */

/* Reserve the nodes that inserting at p takes when p's leaf is full (of fanout items): a leaf,
 * and an inner node for each full one above it, and a new root when they all are. A removal
 * before the insert only empties nodes (a merge or a borrow leaves room), so the count made
 * before it still covers the insert after it. -1 with MemoryError. */
static int split_needs(ZIndex *z, path *p)
{
    if (p->leaf->n < p->leaf->cap || z->depth == 0)
        return 0;
    int inners = 0, d = z->depth - 1;
    while (d >= 0 && p->node[d]->n == p->node[d]->cap) {
        inners++;
        d--;
    }
    if (d < 0) {
        inners++;   /* a new root */
        if (z->depth + 1 >= MAXDEPTH) {
            PyErr_SetString(PyExc_OverflowError, "sorted set index too deep");
            return -1;
        }
    }
    return reserve(z, 1, inners);
}

/* Make room for inserting at p: grow a full root leaf below fanout, or reserve the splits'
 * nodes. -1 with MemoryError, nothing changed. */
static int insert_prepare(ZIndex *z, path *p)
{
    bnode *L = p->leaf;
    if (L->n < L->cap)
        return 0;
    if (z->depth == 0 && L->cap < z->fanout) {
        int cap = L->cap * 2 < z->fanout ? L->cap * 2 : z->fanout;
        bnode *r = leaf_resize(L, cap);
        if (r == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        z->root = z->first = z->last = p->leaf = r;
        return 0;
    }
    if (z->depth == 0)      /* a full root leaf splits under a new root */
        return reserve(z, 1, 1);
    return split_needs(z, p);
}

/* Put (score, ele) at p (ele's reference moves in), splitting what is full (insert_prepare
 * reserved the nodes). */
static void insert_at(ZIndex *z, path *p, double score, PyObject *ele)
{
    bnode *L = p->leaf;
    int pos = p->pos;
    for (int d = 0; d < z->depth; d++)
        p->node[d]->count[p->idx[d]]++;
    z->length++;
    if (L->n < L->cap) {
        open_at(L, pos);
        L->score[pos] = score;
        L->ele[pos] = ele;
        return;
    }
    /* split the leaf: L keeps [0, mid), R takes the rest */
    bnode *R = take(z, 1);
    int mid = L->n / 2;
    move_tail(L, mid, R);
    bnode *t = pos <= mid ? L : R;
    int tp = pos <= mid ? pos : pos - mid;
    open_at(t, tp);
    t->score[tp] = score;
    t->ele[tp] = ele;
    R->next = L->next;
    R->prev = L;
    if (L->next)
        L->next->prev = R;
    else
        z->last = R;
    L->next = R;
    /* hand (separator, R) up; sep's reference is owned by what receives it */
    double sep_score = R->score[0];
    PyObject *sep_ele = R->ele[0];
    Py_INCREF(sep_ele);
    bnode *left = L, *right = R;
    for (int d = z->depth - 1; d >= 0; d--) {
        bnode *P = p->node[d];
        int c = p->idx[d];
        Py_ssize_t ltotal = node_total(left), rtotal = node_total(right);
        if (P->n < P->cap) {
            open_at(P, c + 1);
            P->score[c + 1] = sep_score;
            P->ele[c + 1] = sep_ele;
            P->child[c + 1] = right;
            P->count[c] = ltotal;
            P->count[c + 1] = rtotal;
            return;
        }
        /* split P: Q takes children [m, n); separator m goes up */
        bnode *Q = take(z, 0);
        int m = P->n / 2;
        move_tail(P, m, Q);
        double up_score = Q->score[0];
        PyObject *up_ele = Q->ele[0];
        Q->ele[0] = NULL;
        bnode *T = c + 1 <= m ? P : Q;
        int tc = c + 1 <= m ? c + 1 : c + 1 - m;
        open_at(T, tc);
        T->score[tc] = sep_score;
        T->ele[tc] = sep_ele;
        T->child[tc] = right;
        T->count[tc] = rtotal;
        T->count[tc - 1] = ltotal;     /* left is the child just before right */
        sep_score = up_score;
        sep_ele = up_ele;
        left = P;
        right = Q;
    }
    /* a new root */
    bnode *N = take(z, 0);
    N->n = 2;
    N->child[0] = left;
    N->child[1] = right;
    N->count[0] = node_total(left);
    N->count[1] = node_total(right);
    N->score[0] = 0.0;
    N->ele[0] = NULL;
    N->score[1] = sep_score;
    N->ele[1] = sep_ele;
    z->root = N;
    z->depth++;
}

/* -- remove ---------------------------------------------------------------------------------- */

/* The fewest entries a node but the root keeps (an inner node needs two children). */
static int min_entries(ZIndex *z)
{
    return z->fanout / 4 > 2 ? z->fanout / 4 : 2;
}

/* Move the first entry of `right` to the end of `left` (siblings under P, right at r). */
static void shift_left(bnode *P, int r, bnode *left, bnode *right)
{
    if (left->leaf) {
        left->score[left->n] = right->score[0];
        left->ele[left->n] = right->ele[0];
        left->n++;
        close_at(right, 0);
        Py_DECREF(P->ele[r]);
        P->score[r] = right->score[0];
        P->ele[r] = right->ele[0];
        Py_INCREF(P->ele[r]);
        P->count[r - 1]++;
        P->count[r]--;
        return;
    }
    Py_ssize_t moved = right->count[0];
    int k = left->n;
    left->child[k] = right->child[0];
    left->count[k] = moved;
    left->score[k] = P->score[r];      /* the parent's separator comes down */
    left->ele[k] = P->ele[r];
    left->n++;
    P->score[r] = right->score[1];     /* right's second separator goes up */
    P->ele[r] = right->ele[1];
    close_at(right, 0);                /* right's new first entry: its separator unused */
    right->ele[0] = NULL;
    P->count[r - 1] += moved;
    P->count[r] -= moved;
}

/* Move the last entry of `left` to the front of `right` (siblings under P, right at r). */
static void shift_right(bnode *P, int r, bnode *left, bnode *right)
{
    int k = left->n - 1;
    if (left->leaf) {
        open_at(right, 0);
        right->score[0] = left->score[k];
        right->ele[0] = left->ele[k];
        left->n--;
        Py_DECREF(P->ele[r]);
        P->score[r] = right->score[0];
        P->ele[r] = right->ele[0];
        Py_INCREF(P->ele[r]);
        P->count[r - 1]--;
        P->count[r]++;
        return;
    }
    Py_ssize_t moved = left->count[k];
    open_at(right, 0);
    right->child[0] = left->child[k];
    right->count[0] = moved;
    right->score[1] = P->score[r];     /* the old first child now has a separator */
    right->ele[1] = P->ele[r];
    right->ele[0] = NULL;
    P->score[r] = left->score[k];      /* left's last separator goes up */
    P->ele[r] = left->ele[k];
    left->n--;
    P->count[r - 1] -= moved;
    P->count[r] += moved;
}

/* Merge `right` (at r under P) into `left`, and drop it from P. */
static void merge(ZIndex *z, bnode *P, int r, bnode *left, bnode *right)
{
    int k = left->n;
    memcpy(left->score + k, right->score, (size_t)right->n * sizeof(double));
    memcpy(left->ele + k, right->ele, (size_t)right->n * sizeof(PyObject *));
    if (left->leaf) {
        left->next = right->next;
        if (right->next)
            right->next->prev = left;
        else
            z->last = left;
        Py_DECREF(P->ele[r]);
    }
    else {
        memcpy(left->child + k, right->child, (size_t)right->n * sizeof(bnode *));
        memcpy(left->count + k, right->count, (size_t)right->n * sizeof(Py_ssize_t));
        left->score[k] = P->score[r];  /* the parent's separator comes down */
        left->ele[k] = P->ele[r];
    }
    left->n += right->n;
    P->count[r - 1] += P->count[r];
    close_at(P, r);
    give_back(z, right);
}

/* Take the item at p out of the tree (its member's reference is returned to the caller). */
static PyObject *remove_at(ZIndex *z, path *p)
{
    bnode *L = p->leaf;
    PyObject *ele = L->ele[p->pos];
    close_at(L, p->pos);
    for (int d = 0; d < z->depth; d++)
        p->node[d]->count[p->idx[d]]--;
    z->length--;
    bnode *x = L;
    for (int d = z->depth - 1; d >= 0 && x->n < min_entries(z); d--) {
        bnode *P = p->node[d];
        int c = p->idx[d];
        bnode *left, *right;
        int r;
        if (c > 0) {
            left = P->child[c - 1];
            right = x;
            r = c;
        }
        else {
            left = x;
            right = P->child[1];
            r = 1;
        }
        /* (merged, a node keeps room for one more: an update's removal never fills a node
         * that its insert would then have to split; see split_needs) */
        if (left->n + right->n < z->fanout) {
            merge(z, P, r, left, right);
            x = P;
            continue;
        }
        /* borrow: even the two out */
        while (left->n < right->n - 1)
            shift_left(P, r, left, right);
        while (right->n < left->n - 1)
            shift_right(P, r, left, right);
        break;
    }
    while (z->depth > 0 && z->root->n == 1) {   /* an inner root with one child */
        bnode *old = z->root;
        z->root = old->child[0];
        z->depth--;
        give_back(z, old);
    }
    return ele;
}

/* -- the type -------------------------------------------------------------------------------- */

static PyObject *zindex_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"_fanout", NULL};
    int fanout = FANOUT;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$i:ZIndex", kwlist, &fanout))
        return NULL;
    if (fanout < MIN_FANOUT || fanout > 1024) {
        PyErr_SetString(PyExc_ValueError, "_fanout must be in [4, 1024]");
        return NULL;
    }
    ZIndex *z = (ZIndex *)type->tp_alloc(type, 0);
    if (z == NULL)
        return NULL;
    z->fanout = fanout;
    z->dict = PyDict_New();
    if (z->dict == NULL) {
        Py_DECREF(z);
        return NULL;
    }
    z->root = node_alloc(ROOT_LEAF_START < fanout ? ROOT_LEAF_START : fanout, 1);
    if (z->root == NULL) {
        Py_DECREF(z);
        return PyErr_NoMemory();
    }
    z->first = z->last = z->root;
    return (PyObject *)z;
}

static void free_pool(bnode *b)
{
    while (b) {
        bnode *next = b->next;
        PyMem_Free(b);
        b = next;
    }
}

/* Drop every item (the dict is the caller's). -1 with MemoryError, nothing changed. */
static int zindex_clear_nodes(ZIndex *z)
{
    bnode *fresh = node_alloc(ROOT_LEAF_START < z->fanout ? ROOT_LEAF_START : z->fanout, 1);
    if (fresh == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    node_free_all(z->root);
    z->root = z->first = z->last = fresh;
    z->depth = 0;
    z->length = 0;
    return 0;
}

static void zindex_dealloc(ZIndex *z)
{
    if (z->root)
        node_free_all(z->root);
    free_pool(z->spare_leaf);
    free_pool(z->spare_inner);
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

/* Descend to the existing item (score, member); -1 with SystemError when it is not there,
 * which would mean the dict and the tree disagree. */
static int find(ZIndex *z, double score, PyObject *member, path *p)
{
    descend(z, score, member, p);
    bnode *L = p->leaf;
    if (p->pos >= L->n || L->score[p->pos] != score || ele_cmp(L->ele[p->pos], member) != 0) {
        PyErr_SetString(PyExc_SystemError, "sorted set index out of step with its dict");
        return -1;
    }
    return 0;
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
    path p;
    if (old != NULL) {
        double was = PyFloat_AS_DOUBLE(old);
        if (was == score) {
            Py_DECREF(sobj);
            return PyLong_FromLong(UNCHANGED);
        }
        if (find(z, was, member, &p) < 0)
            goto fail;
        bnode *L = p.leaf;
        int i = p.pos;
        /* In place when the order does not change (Redis's zslUpdateScore does the same),
         * and the item stays between its leaf's separators: at the first place of a leaf it
         * may only rise, at the last only fall (the separators around a leaf need not be its
         * neighbours' scores). */
        int root = z->depth == 0;
        if ((i > 0 ? L->score[i - 1] < score : root || score > was) &&
                (i + 1 < L->n ? L->score[i + 1] > score : root || score < was)) {
            if (PyDict_SetItem(z->dict, member, sobj) < 0)
                goto fail;
            Py_DECREF(sobj);
            L->score[i] = score;
            return PyLong_FromLong(UPDATED);
        }
        /* out and in again; what the insert takes is reserved before anything moves (a
         * root leaf has room once the removal is made) */
        path to;
        descend(z, score, member, &to);
        if (split_needs(z, &to) < 0 || PyDict_SetItem(z->dict, member, sobj) < 0)
            goto fail;
        Py_DECREF(sobj);
        int reshaped = L->n - 1 < min_entries(z) && z->depth > 0;
        PyObject *ele = remove_at(z, &p);
        if (reshaped)       /* nodes merged or moved entries: find the place again */
            descend(z, score, ele, &to);
        else if (to.leaf == L && to.pos > i)
            to.pos--;
        insert_at(z, &to, score, ele);
        return PyLong_FromLong(UPDATED);
    }
    descend(z, score, member, &p);
    if (insert_prepare(z, &p) < 0 || PyDict_SetItem(z->dict, member, sobj) < 0)
        goto fail;
    Py_DECREF(sobj);
    Py_INCREF(member);
    insert_at(z, &p, score, member);
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
    path p;
    if (find(z, PyFloat_AS_DOUBLE(old), member, &p) < 0)
        return NULL;
    if (PyDict_DelItem(z->dict, member) < 0)
        return NULL;
    Py_DECREF(remove_at(z, &p));
    Py_RETURN_TRUE;
}

static PyObject *item_tuple(double score, PyObject *ele)
{
    PyObject *s = PyFloat_FromDouble(score);
    if (s == NULL)
        return NULL;
    PyObject *t = PyTuple_New(2);
    if (t == NULL) {
        Py_DECREF(s);
        return NULL;
    }
    Py_INCREF(ele);
    PyTuple_SET_ITEM(t, 0, s);
    PyTuple_SET_ITEM(t, 1, ele);
    return t;
}

/* A list of the n items from index on (0 <= index < length when n > 0), walking forward, or
 * backward when back. */
static PyObject *items_from(ZIndex *z, Py_ssize_t index, Py_ssize_t n, int back)
{
    PyObject *out = PyList_New(n);
    if (out == NULL || n == 0)
        return out;
    path p;
    descend_at(z, index, &p);
    bnode *b = p.leaf;
    int i = p.pos;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *t = item_tuple(b->score[i], b->ele[i]);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, t);
        if (back) {
            if (--i < 0 && (b = b->prev) != NULL)
                i = b->n - 1;
        }
        else if (++i == b->n) {
            b = b->next;
            i = 0;
        }
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
    path p;
    return PyLong_FromSsize_t(descend(z, score, member, &p));
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
    path p;
    descend_at(z, i, &p);
    return item_tuple(p.leaf->score[p.pos], p.leaf->ele[p.pos]);
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
 * from the tree and the dict; returns how many (Redis's zslDeleteRangeByRank). */
static PyObject *zindex_delete_range(ZIndex *z, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t start, stop;
    if (span_args(z, args, nargs, "_delete_range(start, stop)", &start, &stop) < 0)
        return NULL;
    if (start >= stop)
        return PyLong_FromLong(0);
    if (start == 0 && stop == z->length) {
        Py_ssize_t n = z->length;
        if (zindex_clear_nodes(z) < 0)
            return NULL;
        PyDict_Clear(z->dict);
        return PyLong_FromSsize_t(n);
    }
    Py_ssize_t removed = 0;
    int failed = 0;
    path p;
    for (; removed < stop - start; removed++) {
        descend_at(z, start, &p);
        PyObject *ele = remove_at(z, &p);
        if (PyDict_DelItem(z->dict, ele) < 0)
            failed = 1;     /* (not reached: every item has its entry) */
        Py_DECREF(ele);
    }
    if (failed)
        return NULL;
    return PyLong_FromSsize_t(removed);
}

/* -- invariants (tests) ---------------------------------------------------------------------- */

#define FAIL(msg) do { PyErr_SetString(PyExc_AssertionError, msg); return -1; } while (0)

/* Check the subtree at b (depth d of `depth`), whose items must lie in [lo, hi) (lo_e NULL and
 * has_lo 0: no bound); its items counted into *total; its leaves must come in order after
 * *prev_leaf. */
static int check_node(ZIndex *z, bnode *b, int d, int has_lo, double lo, PyObject *lo_e,
                      int has_hi, double hi, PyObject *hi_e, Py_ssize_t *total,
                      bnode **prev_leaf)
{
    int root = b == z->root;
    if (!root && b->n < min_entries(z))
        FAIL("a node below a quarter full");
    if (b->n > b->cap || (!root && b->cap != z->fanout))
        FAIL("a node over its room, or a small node that is not the root");
    if (b->leaf != (d == z->depth))
        FAIL("leaves at different depths");
    if (b->leaf) {
        if (b->prev != *prev_leaf || (*prev_leaf ? (*prev_leaf)->next != b : z->first != b))
            FAIL("bad leaf links");
        for (int i = 0; i < b->n; i++) {
            if (i > 0 && !before(b->score[i - 1], b->ele[i - 1], b->score[i], b->ele[i]))
                FAIL("not sorted");
            if (has_lo && before(b->score[i], b->ele[i], lo, lo_e))
                FAIL("an item before its separator");
            if (has_hi && !before(b->score[i], b->ele[i], hi, hi_e))
                FAIL("an item at or after the next separator");
            PyObject *s = PyDict_GetItemWithError(z->dict, b->ele[i]);
            if (s == NULL || PyFloat_AS_DOUBLE(s) != b->score[i])
                FAIL("dict out of step");
        }
        *prev_leaf = b;
        *total += b->n;
        return 0;
    }
    if (b->n < 2)
        FAIL("an inner node with fewer than two children");
    if ((has_lo && !before(lo, lo_e, b->score[1], b->ele[1])) ||
            (has_hi && !before(b->score[b->n - 1], b->ele[b->n - 1], hi, hi_e)))
        FAIL("a separator outside its parent's bounds");
    for (int j = 0; j < b->n; j++) {
        if (j > 1 && !before(b->score[j - 1], b->ele[j - 1], b->score[j], b->ele[j]))
            FAIL("separators not sorted");
        Py_ssize_t sub = 0;
        int clo = j > 0 || has_lo, chi = j + 1 < b->n || has_hi;
        if (check_node(z, b->child[j], d + 1,
                       clo, j > 0 ? b->score[j] : lo, j > 0 ? b->ele[j] : lo_e,
                       chi, j + 1 < b->n ? b->score[j + 1] : hi,
                       j + 1 < b->n ? b->ele[j + 1] : hi_e, &sub, prev_leaf) < 0)
            return -1;
        if (sub != b->count[j])
            FAIL("a child's count is not the items under it");
        *total += sub;
    }
    return 0;
}

/* _check(): assert the tree's invariants: order within and across leaves, leaf links, every
 * item between the separators around it, counts equal to the items under each child, equal
 * leaf depth, nodes at least a quarter full (but the root), length, one item per dict entry
 * with the dict's score. */
static PyObject *zindex_check(ZIndex *z, PyObject *unused)
{
    Py_ssize_t total = 0;
    bnode *prev = NULL;
    if (check_node(z, z->root, 0, 0, 0.0, NULL, 0, 0.0, NULL, &total, &prev) < 0)
        return NULL;
    const char *bad = prev != z->last || prev->next != NULL ? "bad last leaf"
                      : total != z->length || PyDict_GET_SIZE(z->dict) != total
                      ? "length mismatch" : NULL;
    if (bad != NULL) {
        PyErr_SetString(PyExc_AssertionError, bad);
        return NULL;
    }
    Py_RETURN_NONE;
}
#undef FAIL

static size_t tree_bytes(const bnode *b)
{
    size_t n = node_size(b->cap, b->leaf);
    if (!b->leaf)
        for (int j = 0; j < b->n; j++)
            n += tree_bytes(b->child[j]);
    return n;
}

/* __sizeof__(): the object and the nodes it allocated (the dict and the members are objects
 * of their own: MEMORY USAGE adds them, pyrepl/core/memory.py). */
static PyObject *zindex_sizeof(ZIndex *z, PyObject *unused)
{
    size_t n = (size_t)Py_TYPE(z)->tp_basicsize + tree_bytes(z->root);
    for (int k = 0; k < 2; k++)
        for (const bnode *b = k ? z->spare_inner : z->spare_leaf; b; b = b->next)
            n += node_size(b->cap, b->leaf);
    return PyLong_FromSize_t(n);
}

static PyObject *zindex_depth(ZIndex *z, PyObject *unused)
{
    return PyLong_FromLong(z->depth);
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
    {"_depth", (PyCFunction)zindex_depth, METH_NOARGS, "inner levels above the leaves"},
    {"__sizeof__", (PyCFunction)zindex_sizeof, METH_NOARGS,
     "the object and its tree's nodes, in bytes"},
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
    .tp_name = "pyrepl.keyspace._zbtree.ZIndex",
    .tp_basicsize = sizeof(ZIndex),
    .tp_dealloc = (destructor)zindex_dealloc,
    .tp_as_sequence = &zindex_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A sorted set's member -> score dict and its counted B+tree.",
    .tp_methods = zindex_methods,
    .tp_members = zindex_members,
    .tp_new = zindex_new,
};

/* -- the C API (_zbtree.h) -------------------------------------------------------------------- */

static int capi_scan(PyObject *zo, double lo, double hi, zbtree_visit visit, void *ctx)
{
    ZIndex *z = (ZIndex *)zo;
    if (z->root == NULL)
        return 0;
    path p;
    descend(z, lo, NULL, &p);       /* (the first item >= (lo,): what _bisect(lo) finds) */
    bnode *b = p.leaf;
    int i = p.pos;
    while (b != NULL) {
        if (i >= b->n) {
            b = b->next;
            i = 0;
            continue;
        }
        double s = b->score[i];
        if (!(s < hi))
            return 0;
        int r = visit(ctx, s, b->ele[i]);
        if (r)
            return r;
        i++;
    }
    return 0;
}

static ZBTree_CAPI capi = {ZBTREE_CAPI_VERSION, &ZIndexType, capi_scan};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_zbtree",
    "The sorted set's ordered index (see the file's comment).", -1, NULL,
};

PyMODINIT_FUNC PyInit__zbtree(void)
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
    PyObject *cap = PyCapsule_New(&capi, ZBTREE_CAPSULE, NULL);
    if (cap == NULL || PyModule_AddObject(m, "_C_API", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
