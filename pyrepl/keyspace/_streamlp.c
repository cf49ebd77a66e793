/* Stream node listpacks: a sealed node decoded into Python lists (decode), one live entry
 * found in a sealed node without decoding it (find), and one entry's bytes as streamAppendItem
 * writes them (entry): the speed-ups of pyrepl/keyspace/stream.py's decode_node_reference,
 * find_reference and entry_bytes_reference, which stay the references (PYREPL_PURE=1
 * runs them; tests/unit/test_stream.py holds each pair equal on random input, corrupted nodes
 * included).
 *
 * Why C: a stream keeps every full node as its listpack bytes (stream.py's docstring), and a
 * read inside one decodes it. In Python that cost ~130 us a node of 100 entries (1.3 us an
 * entry: a full XRANGE scanned 10x slower than when nodes were Python lists, a random XDEL or
 * XRANGE of one entry paid a whole decode); here ~26 us (bench/RESULTS.md, "Streams
 * kept as listpacks"). entry: the open node builds its listpack as entries come, and in
 * Python the encoding (canonical-integer test, lengths, backlens) added ~0.7 us to an XADD of
 * 3 fields; in C an append costs less than before nodes were sealed. find: XDEL, XCLAIM and
 * the like read one entry by ID, often in a node not in the cache: a decode each (~30 us);
 * the walk to it costs a few us.
 *
 * check: the RDB loader and RESTORE keep a node as its bytes once its layout is checked; the
 * check was a whole decode into Python lists thrown away (a stream full sync spent half the
 * replica's time there); it is decode's walk without the lists.
 *
 * check(lp, master_ms, master_seq) -> (last_id, live, deleted) or None, what
 * check_node_reference answers for a well-formed node.
 * decode(lp, master_ms, master_seq) -> (fields, ids, fvs, flags, offs, live, deleted), or None
 * when anything is not what Redis writes (a bad header, encoding, type, count or layout): the
 * Python reference then runs on the same bytes and raises the precise error. So this file only
 * handles well-formed nodes, and answers exactly what the reference answers for them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_listpack.h"
#include "_streamid.h"
#include "../_wbuf.h"

static PyObject *make_id(uint64_t ms, uint64_t seq)
{
    unsigned char be[16];
    for (int i = 0; i < 8; i++) {
        be[7 - i] = (unsigned char)(ms >> (8 * i));
        be[15 - i] = (unsigned char)(seq >> (8 * i));
    }
    return _PyLong_FromByteArray(be, 16, 0, 0);
}

/* The walk of decode and check: with ``build`` the Python lists are filled, without it only
 * the layout is checked (check: a node the RDB loader or RESTORE keeps as its bytes). Returns
 * 1 for a well-formed node, 0 for anything else, -1 on a Python error. */
typedef struct {
    PyObject *fields, *ids, *fvs, *flagl, *offs;   /* NULL when not building */
    int64_t live, deleted;
    uint64_t last_ms, last_seq;                    /* the last entry's ID (the master's if none) */
} walk_t;

#define NEXT(it) do { if (p >= last || next_item(lp, &p, last, &(it)) < 0) return 0; \
                      items++; } while (0)
#define APPEND_NEW(list, obj) do { PyObject *o_ = (obj); if (o_ == NULL) return -1; \
        int r_ = PyList_Append((list), o_); Py_DECREF(o_); if (r_ < 0) return -1; } while (0)

static int walk(const uint8_t *lp, Py_ssize_t n, uint64_t mms, uint64_t mseq, walk_t *w)
{
    Py_ssize_t p, last, items = 0, entries = 0;
    item_t it, a, b;
    int build = w->fields != NULL;

    w->last_ms = mms;
    w->last_seq = mseq;
    if (n < 7) return 0;
    uint32_t total = (uint32_t)lp[0] | ((uint32_t)lp[1] << 8) | ((uint32_t)lp[2] << 16) |
        ((uint32_t)lp[3] << 24);
    unsigned count = (unsigned)lp[4] | ((unsigned)lp[5] << 8);
    if ((Py_ssize_t)total != n || lp[n - 1] != 0xFF) return 0;
    p = 6;
    last = n - 1;

    item_t live, deleted, nf;
    NEXT(live);
    NEXT(deleted);
    Py_ssize_t base = p;
    NEXT(nf);
    if (!live.is_int || !deleted.is_int || !nf.is_int || nf.v < 0) return 0;
    for (int64_t i = 0; i < nf.v; i++) {
        NEXT(it);
        if (build) APPEND_NEW(w->fields, item_bytes(&it));
    }
    NEXT(it);
    if (!it.is_int || it.v != 0) return 0;
    Py_ssize_t nfields = (Py_ssize_t)nf.v;
    while (p < last) {
        item_t fl;
        NEXT(fl);
        if (!fl.is_int || lp[fl.start] >= 0x80) return 0;   /* a 7-bit int */
        NEXT(a);
        NEXT(b);
        if (!a.is_int || !b.is_int) return 0;
        w->last_ms = mms + (uint64_t)a.v;
        w->last_seq = mseq + (uint64_t)b.v;
        entries++;
        Py_ssize_t k;                                       /* the entry's strings */
        if (fl.v & 2) {                                     /* SAMEFIELDS: values only */
            k = nfields;
        } else {
            NEXT(it);
            if (!it.is_int || it.v < 0 || it.v > n) return 0;
            k = (Py_ssize_t)it.v * 2;
        }
        if (!build) {
            for (Py_ssize_t i = 0; i < k; i++)
                NEXT(it);
        } else {
            APPEND_NEW(w->ids, make_id(w->last_ms, w->last_seq));
            APPEND_NEW(w->offs, PyLong_FromSsize_t(fl.start - base));
            APPEND_NEW(w->flagl, PyLong_FromLong((long)fl.v));
            PyObject *fv = PyList_New((fl.v & 2) ? 2 * k : k);
            if (fv == NULL) return -1;
            for (Py_ssize_t i = 0; i < k; i++) {
                if (p >= last || next_item(lp, &p, last, &it) < 0) { Py_DECREF(fv); return 0; }
                items++;
                PyObject *v = item_bytes(&it);
                if (v == NULL) { Py_DECREF(fv); return -1; }
                if (fl.v & 2) {
                    PyObject *f = PyList_GET_ITEM(w->fields, i);
                    Py_INCREF(f);
                    PyList_SET_ITEM(fv, 2 * i, f);
                    PyList_SET_ITEM(fv, 2 * i + 1, v);
                } else {
                    PyList_SET_ITEM(fv, i, v);
                }
            }
            int r = PyList_Append(w->fvs, fv);
            Py_DECREF(fv);
            if (r < 0) return -1;
        }
        Py_ssize_t nitems = (fl.v & 2) ? nfields + 3 : k + 4;
        NEXT(it);                        /* lp-count: the entry's other items (Redis checks it) */
        if (!it.is_int || it.v != nitems) return 0;
    }
    if (count != 0xFFFF && (Py_ssize_t)count != items) return 0;
    if (live.v < 0 || deleted.v < 0 || entries != live.v + deleted.v) return 0;
    w->live = live.v;
    w->deleted = deleted.v;
    return 1;
}

static PyObject *decode(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    unsigned long long mms, mseq;
    if (!PyArg_ParseTuple(args, "y*KK", &buf, &mms, &mseq))
        return NULL;
    PyObject *result = NULL;
    walk_t w = {PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0), PyList_New(0),
                0, 0, 0, 0};
    if (w.fields && w.ids && w.fvs && w.flagl && w.offs) {
        int r = walk(buf.buf, buf.len, mms, mseq, &w);
        if (r > 0)
            result = Py_BuildValue("(OOOOOLL)", w.fields, w.ids, w.fvs, w.flagl, w.offs,
                                   (long long)w.live, (long long)w.deleted);
        else if (r == 0)
            result = Py_NewRef(Py_None);
    }
    Py_XDECREF(w.fields);
    Py_XDECREF(w.ids);
    Py_XDECREF(w.fvs);
    Py_XDECREF(w.flagl);
    Py_XDECREF(w.offs);
    PyBuffer_Release(&buf);
    return result;
}

static PyObject *check(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    unsigned long long mms, mseq;
    if (!PyArg_ParseTuple(args, "y*KK", &buf, &mms, &mseq))
        return NULL;
    walk_t w = {NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0};
    int r = walk(buf.buf, buf.len, mms, mseq, &w);
    PyBuffer_Release(&buf);
    if (r <= 0)
        return r < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *id = make_id(w.last_ms, w.last_seq);
    if (id == NULL)
        return NULL;
    return Py_BuildValue("(NLL)", id, (long long)w.live, (long long)w.deleted);
}


/* ---------------------------------------------------------------- one entry, as lpAppend writes it */

static int put_int(wbuf *w, int64_t v)
{
    if (wbuf_reserve(w, 14) < 0) return -1;
    w->len += lp_encode_int(w->b + w->len, v);
    return 0;
}

static int put_str(wbuf *w, PyObject *obj)
{
    Py_ssize_t n = PyBytes_GET_SIZE(obj);
    if (wbuf_reserve(w, LP_ENTRY_MAX(n)) < 0) return -1;
    w->len += lp_encode_str(w->b + w->len, (const uint8_t *)PyBytes_AS_STRING(obj), n);
    return 0;
}

/* entry(flags, ms_delta, seq_delta, fv, samefields) -> bytes: stream.py's entry_bytes_reference. */
static PyObject *entry(PyObject *self, PyObject *args)
{
    int flags, same;
    long long msd, seqd;
    PyObject *fv;
    if (!PyArg_ParseTuple(args, "iLLO!p", &flags, &msd, &seqd, &PyList_Type, &fv, &same))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(fv), nf = n / 2;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_CheckExact(PyList_GET_ITEM(fv, i)))
            Py_RETURN_NONE;
    }
    uint8_t local[256];   /* (the heap only past it) */
    wbuf w;
    wbuf_local(&w, local, sizeof local);
    PyObject *out = NULL;
#define PUT(call) do { if ((call) < 0) goto done; } while (0)
    PUT(put_int(&w, flags));
    PUT(put_int(&w, msd));
    PUT(put_int(&w, seqd));
    if (same) {
        for (Py_ssize_t i = 1; i < n; i += 2)
            PUT(put_str(&w, PyList_GET_ITEM(fv, i)));
        PUT(put_int(&w, nf + 3));
    } else {
        PUT(put_int(&w, nf));
        for (Py_ssize_t i = 0; i < n; i++)
            PUT(put_str(&w, PyList_GET_ITEM(fv, i)));
        PUT(put_int(&w, nf * 2 + 4));
    }
#undef PUT
    out = PyBytes_FromStringAndSize((const char *)w.b, w.len);
done:
    wbuf_free(&w);
    return out;
}


/* ------------------------------------------------------------- one entry found in a sealed node */

/* find_in: the entry ms-seq of the node whose listpack is lp (n bytes) and master ID
 * mms-mseq. 1 when it is there and not deleted (*at: the offset of its flags byte, *found: its
 * fv, new), 0 when it is not (or is a tombstone), -2 when the listpack is not what decode
 * accepts, -1 on an exception. Walks the entries without making objects until the one
 * wanted. */
/* Where a walk of one listpack stopped (find_in's resume: history_reply's ids grow): every
 * entry before offset p has an ID of at most ms-seq. */
typedef struct {
    const uint8_t *lp;          /* the listpack walked (NULL: none yet) */
    Py_ssize_t p, fields_at;
    int64_t nf;
    uint64_t ms, seq;
    /* node_get's: the sealed node whose listpack this is (borrowed: the caller's nodes hold
       it, unchanged meanwhile), its size, last and master IDs */
    PyObject *node;
    Py_ssize_t n;
    u128 last, master;
} lp_cursor;

static int find_in(const uint8_t *lp, Py_ssize_t n, uint64_t mms, uint64_t mseq,
                   uint64_t ms, uint64_t seq, Py_ssize_t *at, PyObject **found, lp_cursor *cur)
{
    Py_ssize_t p = 6, last = n - 1, fields_at, entry = 0;
    item_t it, fl, a, b, nf;
    if (n < 7 || lp[n - 1] != 0xFF) goto bad;
#define SKIP(x) do { if (p >= last || next_item(lp, &p, last, &(x)) < 0) goto bad; } while (0)
    if (cur != NULL && cur->lp == lp && (ms > cur->ms || (ms == cur->ms && seq > cur->seq))) {
        p = cur->p;                             /* (the entries before: all below ms-seq) */
        fields_at = cur->fields_at;
        nf.is_int = 1;
        nf.v = cur->nf;
    } else {
        SKIP(it);                               /* live */
        SKIP(it);                               /* deleted */
        SKIP(nf);
        if (!nf.is_int || nf.v < 0) goto bad;
        fields_at = p;
        for (int64_t i = 0; i < nf.v; i++) SKIP(it);
        SKIP(it);                               /* the master entry's 0 */
    }
    if (cur != NULL) {
        cur->lp = lp;
        cur->fields_at = fields_at;
        cur->nf = nf.v;
        cur->ms = ms;
        cur->seq = seq;
    }
    while (p < last) {
        entry = p;
        if (cur != NULL)
            cur->p = entry;                     /* (this entry and those after: unread) */
        SKIP(fl);
        SKIP(a);
        SKIP(b);
        if (!fl.is_int || !a.is_int || !b.is_int) goto bad;
        uint64_t ems = (uint64_t)mms + (uint64_t)a.v, eseq = (uint64_t)mseq + (uint64_t)b.v;
        if (ems > ms || (ems == ms && eseq > seq))
            break;                              /* IDs grow within a node: not here */
        int hit = ems == ms && eseq == seq;
        Py_ssize_t k;
        if (fl.v & 2) {
            k = (Py_ssize_t)nf.v;
        } else {
            SKIP(it);
            if (!it.is_int || it.v < 0 || it.v > n) goto bad;
            k = (Py_ssize_t)it.v * 2;
        }
        if (!hit) {
            for (Py_ssize_t i = 0; i < k; i++) SKIP(it);
            SKIP(it);                           /* lp-count */
            continue;
        }
        if (fl.v & 1)
            break;                              /* a tombstone */
        PyObject *fv = PyList_New((fl.v & 2) ? 2 * k : k);
        if (fv == NULL) goto fail;
        Py_ssize_t q = fields_at;
        for (Py_ssize_t i = 0; i < k; i++) {
            if (p >= last || next_item(lp, &p, last, &it) < 0) { Py_DECREF(fv); goto bad; }
            PyObject *v = item_bytes(&it);
            if (v == NULL) { Py_DECREF(fv); goto fail; }
            if (fl.v & 2) {
                item_t f;
                if (next_item(lp, &q, last, &f) < 0) { Py_DECREF(v); Py_DECREF(fv); goto bad; }
                PyObject *fo = item_bytes(&f);
                if (fo == NULL) { Py_DECREF(v); Py_DECREF(fv); goto fail; }
                PyList_SET_ITEM(fv, 2 * i, fo);
                PyList_SET_ITEM(fv, 2 * i + 1, v);
            } else {
                PyList_SET_ITEM(fv, i, v);
            }
        }
        if (cur != NULL) {                      /* (resume after this entry's lp-count) */
            item_t count;
            if (p < last && next_item(lp, &p, last, &count) == 0)
                cur->p = p;
        }
        *at = fl.start;
        *found = fv;
        return 1;
    }
    if (cur != NULL && p >= last)
        cur->p = p;
#undef SKIP
    return 0;
bad:
    return -2;
fail:
    return -1;
}

/* find(lp, master_ms, master_seq, ms, seq) -> (offset of the entry's flags byte, fv) when the
 * entry ms-seq is in the node and not deleted, None when it is not (or is a tombstone), False
 * when the listpack is not what decode accepts (then stream.py's find_reference answers). */
static PyObject *find(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    unsigned long long mms, mseq, ms, seq;
    if (!PyArg_ParseTuple(args, "y*KKKK", &buf, &mms, &mseq, &ms, &seq))
        return NULL;
    Py_ssize_t at = 0;
    PyObject *fv = NULL;
    int rc = find_in(buf.buf, buf.len, mms, mseq, ms, seq, &at, &fv, NULL);
    PyBuffer_Release(&buf);
    if (rc == 1)
        return Py_BuildValue("(nN)", at, fv);
    return rc == -1 ? NULL : Py_NewRef(rc == 0 ? Py_None : Py_False);
}

/* -- range_reply ---------------------------------------------------------------------- */

/* An int attribute of o that is an ID (Node.master, Node.last). */
static int
id_attr(PyObject *o, PyObject *name, u128 *out)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    int rc = stream_id_value(v, out);
    Py_DECREF(v);
    return rc;
}

/* bisect_left (right: bisect_right) of x in ids, a sorted list of IDs; -1 on an exception. */
static Py_ssize_t
bisect_id(PyObject *ids, u128 x, int right)
{
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(ids);
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        u128 v;
        if (stream_id_value(PyList_GET_ITEM(ids, mid), &v) < 0)
            return -1;
        if (right ? x < v : !(v < x))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static PyObject *str_last, *str_master, *str_d, *str_entries, *str_ids, *str_flags, *str_fvs,
                *str_lp;

/* A node's decoded entries' ids, flags and fvs (new refs; Node.entries() when ``d`` is not
   there yet): 0, or -1 with an exception. */
static int
node_lists(PyObject *node, PyObject **ids, PyObject **flags, PyObject **fvs)
{
    PyObject *d = PyObject_GetAttr(node, str_d);
    if (d == Py_None)
        Py_SETREF(d, PyObject_CallMethodNoArgs(node, str_entries));
    if (d == NULL)
        return -1;
    *ids = PyObject_GetAttr(d, str_ids);
    *flags = *ids == NULL ? NULL : PyObject_GetAttr(d, str_flags);
    *fvs = *flags == NULL ? NULL : PyObject_GetAttr(d, str_fvs);
    Py_DECREF(d);
    if (*fvs != NULL && PyList_CheckExact(*ids) && PyList_CheckExact(*flags) &&
            PyList_CheckExact(*fvs) && PyList_GET_SIZE(*flags) == PyList_GET_SIZE(*ids) &&
            PyList_GET_SIZE(*fvs) == PyList_GET_SIZE(*ids))
        return 0;
    if (*fvs != NULL)
        PyErr_SetString(PyExc_TypeError, "a node's entries: three lists of one length");
    Py_XDECREF(*ids);
    Py_XDECREF(*flags);
    Py_XDECREF(*fvs);
    return -1;
}

/* [id_text, fv] appended to out when flag is not FLAG_DELETED: 1 appended, 0 not, -1 error */
static int
add_entry(PyObject *out, u128 eid, PyObject *flag, PyObject *fv)
{
    long f = PyLong_AsLong(flag);
    if (f == -1 && PyErr_Occurred())
        return -1;
    if (f & 1)
        return 0;
    PyObject *text = stream_id_text(eid), *pair;
    if (text == NULL)
        return -1;
    pair = PyList_New(2);
    if (pair == NULL) {
        Py_DECREF(text);
        return -1;
    }
    PyList_SET_ITEM(pair, 0, text);
    PyList_SET_ITEM(pair, 1, Py_NewRef(fv));
    int rc = PyList_Append(out, pair);
    Py_DECREF(pair);
    return rc < 0 ? -1 : 1;
}

static PyObject *
range_reply(PyObject *self, PyObject *args)
{
    PyObject *keys, *nodes, *start_o, *end_o;
    int rev;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "O!O!OOpn", &PyList_Type, &keys, &PyList_Type, &nodes,
                          &start_o, &end_o, &rev, &count))
        return NULL;
    u128 start, end;
    if (stream_id_value(start_o, &start) < 0 || stream_id_value(end_o, &end) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t i = bisect_id(keys, rev ? end : start, 1) - 1;
    if (i < -1)
        goto fail;
    if (!rev && i < 0)
        i = 0;
    for (; count != 0 && (rev ? i >= 0 : i < PyList_GET_SIZE(nodes)); i += rev ? -1 : 1) {
        PyObject *node = PyList_GET_ITEM(nodes, i), *ids, *flags, *fvs;
        u128 last, master;
        Py_INCREF(node);
        int rc = id_attr(node, str_last, &last);
        if (rc == 0 && last < start) {
            Py_DECREF(node);
            if (rev)
                break;
            continue;
        }
        if (rc == 0 && !rev && (rc = id_attr(node, str_master, &master)) == 0 && master > end) {
            Py_DECREF(node);
            break;
        }
        if (rc == 0)
            rc = node_lists(node, &ids, &flags, &fvs);
        Py_DECREF(node);
        if (rc < 0)
            goto fail;
        Py_ssize_t n = PyList_GET_SIZE(ids), j = bisect_id(ids, rev ? end : start, rev);
        int ended = 0;
        if (j < 0)
            rc = -1;
        else if (rev)
            j--;
        for (; rc >= 0 && (rev ? j >= 0 : j < n); j += rev ? -1 : 1) {
            u128 eid;
            if (stream_id_value(PyList_GET_ITEM(ids, j), &eid) < 0) {
                rc = -1;
                break;
            }
            if (rev ? eid < start : eid > end) {
                ended = 1;
                break;
            }
            rc = add_entry(out, eid, PyList_GET_ITEM(flags, j), PyList_GET_ITEM(fvs, j));
            if (rc > 0 && --count == 0)
                break;
        }
        Py_DECREF(ids);
        Py_DECREF(flags);
        Py_DECREF(fvs);
        if (rc < 0)
            goto fail;
        if (ended)
            break;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* The live entry eid's fv in node (a new reference), Py_None when the node does not hold
   it live, Py_False when the node's listpack is not well formed, NULL on an exception.
   Stream.get's node part: a sealed node not decoded is walked in its bytes (find_in). */
static PyObject *
node_get(PyObject *node, u128 eid, lp_cursor *cur)
{
    u128 last, master;
    if (cur != NULL && cur->node == node && cur->lp != NULL) {   /* (the node read before) */
        if (eid > cur->last)
            return Py_NewRef(Py_None);
        Py_ssize_t at;
        PyObject *fv = NULL;
        int rc = find_in(cur->lp, cur->n, (uint64_t)(cur->master >> 64), (uint64_t)cur->master,
                         (uint64_t)(eid >> 64), (uint64_t)eid, &at, &fv, cur);
        if (rc == 1)
            return fv;
        return rc == -1 ? NULL : Py_NewRef(rc == 0 ? Py_None : Py_False);
    }
    if (id_attr(node, str_last, &last) < 0)
        return NULL;
    if (eid > last)
        return Py_NewRef(Py_None);
    PyObject *d = PyObject_GetAttr(node, str_d);
    if (d == NULL)
        return NULL;
    if (d == Py_None) {
        Py_DECREF(d);
        PyObject *lp = PyObject_GetAttr(node, str_lp);
        if (lp == NULL)
            return NULL;
        if (!PyBytes_CheckExact(lp) || id_attr(node, str_master, &master) < 0) {
            Py_DECREF(lp);
            return PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
        }
        Py_ssize_t at;
        PyObject *fv = NULL;
        if (cur != NULL) {
            cur->node = NULL;     /* (find_in restarts for another listpack: cur->lp) */
            cur->n = PyBytes_GET_SIZE(lp);
            cur->last = last;
            cur->master = master;
        }
        int rc = find_in((const uint8_t *)PyBytes_AS_STRING(lp), PyBytes_GET_SIZE(lp),
                         (uint64_t)(master >> 64), (uint64_t)master, (uint64_t)(eid >> 64),
                         (uint64_t)eid, &at, &fv, cur);
        if (cur != NULL && rc >= 0 && cur->lp == (const uint8_t *)PyBytes_AS_STRING(lp))
            cur->node = node;     /* (its bytes live as long as the node: the node holds them) */
        Py_DECREF(lp);
        if (rc == 1)
            return fv;
        return rc == -1 ? NULL : Py_NewRef(rc == 0 ? Py_None : Py_False);
    }
    Py_DECREF(d);
    PyObject *ids, *flags, *fvs, *fv = NULL;
    if (node_lists(node, &ids, &flags, &fvs) < 0)
        return NULL;
    Py_ssize_t j = bisect_id(ids, eid, 0);
    u128 at;
    if (j >= 0 && j == PyList_GET_SIZE(ids)) {
        fv = Py_NewRef(Py_None);
    } else if (j >= 0 && stream_id_value(PyList_GET_ITEM(ids, j), &at) == 0) {
        long f = at == eid ? PyLong_AsLong(PyList_GET_ITEM(flags, j)) : 1;   /* (1: absent) */
        if (!(f == -1 && PyErr_Occurred()))
            fv = Py_NewRef(f & 1 ? Py_None : PyList_GET_ITEM(fvs, j));
    }
    Py_DECREF(ids);
    Py_DECREF(flags);
    Py_DECREF(fvs);
    return fv;
}

/* history_reply(keys, nodes, ids, null) -> (out, found): Stream.history_reply */
static PyObject *
history_reply(PyObject *self, PyObject *args)
{
    PyObject *keys, *nodes, *ids, *null;
    if (!PyArg_ParseTuple(args, "O!O!O!O", &PyList_Type, &keys, &PyList_Type, &nodes,
                          &PyList_Type, &ids, &null))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ids);
    PyObject *out = PyList_New(n), *found = PyList_New(0);
    lp_cursor cur = {0};   /* (the ids grow: a node's walk goes on) */
    /* keys[span_i] <= an ID < keys[span_i + 1] (span_open: the last key) is node span_i's */
    Py_ssize_t span_i = -1;
    u128 span_lo = 0, span_hi = 0;
    int span_open = 0;
    if (out == NULL || found == NULL)
        goto fail;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *id_o = PyList_GET_ITEM(ids, k), *fv, *pair;
        u128 eid;
        if (stream_id_value(id_o, &eid) < 0)
            goto fail;
        Py_ssize_t i;
        if (span_i >= 0 && span_lo <= eid && (span_open || eid < span_hi)) {
            i = span_i;           /* (the node of the ID before: no bisection) */
        } else {
            i = bisect_id(keys, eid, 1) - 1;
            if (i < -1)
                goto fail;
            span_i = -1;
            if (i >= 0 && i < PyList_GET_SIZE(keys)) {
                span_open = i + 1 >= PyList_GET_SIZE(keys);
                if (stream_id_value(PyList_GET_ITEM(keys, i), &span_lo) < 0 ||
                        (!span_open &&
                         stream_id_value(PyList_GET_ITEM(keys, i + 1), &span_hi) < 0))
                    goto fail;
                span_i = i;
            }
        }
        if (i < 0 || i >= PyList_GET_SIZE(nodes)) {
            fv = Py_NewRef(Py_None);
        } else {
            PyObject *node = Py_NewRef(PyList_GET_ITEM(nodes, i));
            fv = node_get(node, eid, &cur);
            Py_DECREF(node);
            if (fv == NULL)
                goto fail;
            if (fv == Py_False) {   /* (a listpack find_in does not take: the reference) */
                Py_DECREF(fv);
                Py_DECREF(out);
                Py_DECREF(found);
                Py_RETURN_NONE;
            }
        }
        if (fv != Py_None && PyList_Append(found, id_o) < 0) {
            Py_DECREF(fv);
            goto fail;
        }
        pair = PyList_New(2);
        PyObject *text = stream_id_text(eid);
        if (pair == NULL || text == NULL) {
            Py_XDECREF(pair);
            Py_XDECREF(text);
            Py_DECREF(fv);
            goto fail;
        }
        PyList_SET_ITEM(pair, 0, text);
        if (fv == Py_None) {
            Py_DECREF(fv);
            fv = Py_NewRef(null);
        }
        PyList_SET_ITEM(pair, 1, fv);
        PyList_SET_ITEM(out, k, pair);
    }
    return Py_BuildValue("(NN)", out, found);
fail:
    Py_XDECREF(out);
    Py_XDECREF(found);
    return NULL;
}

static PyMethodDef methods[] = {
    {"range_reply", range_reply, METH_VARARGS,
     "range_reply(keys, nodes, start, end, rev, count): Stream.range_reply's list of [id, fv] "
     "(the first count, -1: all), from a stream's node keys and nodes."},
    {"history_reply", history_reply, METH_VARARGS,
     "history_reply(keys, nodes, ids, null) -> (out, found): [id, fv] for each of ids (null "
     "when the stream does not hold it live) and the IDs found; None when a node's listpack "
     "is not well formed (the reference answers)."},
    {"find", find, METH_VARARGS,
     "find(lp, master_ms, master_seq, ms, seq): (flags offset, fv) of a live entry of a sealed "
     "node, None when absent or deleted, False when the listpack is not well formed."},
    {"entry", entry, METH_VARARGS,
     "entry(flags, ms_delta, seq_delta, fv, samefields): one stream entry's listpack bytes as "
     "streamAppendItem writes them, or None when a field or value is not bytes."},
    {"check", check, METH_VARARGS,
     "check(lp, master_ms, master_seq) -> (last_id, live, deleted) or None: decode's checks "
     "without its lists"},
    {"decode", decode, METH_VARARGS,
     "decode(lp, master_ms, master_seq): a stream node's (fields, ids, fvs, flags, offs, live, "
     "deleted), or None when the listpack is not well formed (the Python reference says why)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_streamlp",
    "Stream node listpacks decoded, entries encoded (stream.py has the references).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__streamlp(void)
{
    static const char *const names[8] = {"last", "master", "d", "entries", "ids", "flags", "fvs",
                                         "lp"};
    PyObject **strs[8] = {&str_last, &str_master, &str_d, &str_entries, &str_ids, &str_flags,
                          &str_fvs, &str_lp};
    for (int k = 0; k < 8; k++)
        if (*strs[k] == NULL && (*strs[k] = PyUnicode_InternFromString(names[k])) == NULL)
            return NULL;
    return PyModule_Create(&moduledef);
}
