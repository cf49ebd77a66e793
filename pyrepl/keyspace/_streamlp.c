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
 * decode(lp, master_ms, master_seq) -> (fields, ids, fvs, flags, offs, live, deleted), or None
 * when anything is not what Redis writes (a bad header, encoding, type, count or layout): the
 * Python reference then runs on the same bytes and raises the precise error. So this file only
 * handles well-formed nodes, and answers exactly what the reference answers for them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    int is_int;
    int64_t v;                  /* an integer entry's value */
    const uint8_t *s;           /* a string entry's bytes */
    Py_ssize_t slen;
    Py_ssize_t start;           /* the entry's offset in the listpack */
} item_t;

/* The entry at *p (before `last`, the terminator's offset) into *it; *p moves past it.
 * 0, or -1 when the entry is malformed or runs past the end. */
static int next_item(const uint8_t *lp, Py_ssize_t *p, Py_ssize_t last, item_t *it)
{
    Py_ssize_t q = *p, size;
    uint8_t b = lp[q];
    it->start = q;
    it->is_int = 1;
    if (b < 0x80) {
        it->v = b;
        size = 1;
    } else if (b < 0xC0) {
        it->is_int = 0;
        size = 1 + (b & 0x3F);
        it->s = lp + q + 1;
        it->slen = size - 1;
    } else if (b < 0xE0) {
        if (q + 1 >= last) return -1;
        int64_t v = ((int64_t)(b & 0x1F) << 8) | lp[q + 1];
        it->v = v >= 4096 ? v - 8192 : v;
        size = 2;
    } else if (b < 0xF0) {
        if (q + 1 >= last) return -1;
        it->is_int = 0;
        size = 2 + ((((Py_ssize_t)b & 0x0F) << 8) | lp[q + 1]);
        it->s = lp + q + 2;
        it->slen = size - 2;
    } else if (b == 0xF0) {
        if (q + 5 > last) return -1;
        it->is_int = 0;
        uint32_t n = (uint32_t)lp[q + 1] | ((uint32_t)lp[q + 2] << 8) |
            ((uint32_t)lp[q + 3] << 16) | ((uint32_t)lp[q + 4] << 24);
        size = 5 + (Py_ssize_t)n;
        it->s = lp + q + 5;
        it->slen = (Py_ssize_t)n;
    } else if (b == 0xF1) {
        if (q + 3 > last) return -1;
        it->v = (int16_t)((uint16_t)lp[q + 1] | ((uint16_t)lp[q + 2] << 8));
        size = 3;
    } else if (b == 0xF2) {
        if (q + 4 > last) return -1;
        int32_t v = (int32_t)((uint32_t)lp[q + 1] | ((uint32_t)lp[q + 2] << 8) |
                              ((uint32_t)lp[q + 3] << 16));
        it->v = v >= (1 << 23) ? v - (1 << 24) : v;
        size = 4;
    } else if (b == 0xF3) {
        if (q + 5 > last) return -1;
        it->v = (int32_t)((uint32_t)lp[q + 1] | ((uint32_t)lp[q + 2] << 8) |
                          ((uint32_t)lp[q + 3] << 16) | ((uint32_t)lp[q + 4] << 24));
        size = 5;
    } else if (b == 0xF4) {
        if (q + 9 > last) return -1;
        uint64_t u = 0;
        for (int i = 8; i >= 1; i--) u = (u << 8) | lp[q + i];
        it->v = (int64_t)u;
        size = 9;
    } else {
        return -1;
    }
    if (size <= 127) q += size + 1;
    else if (size < 16383) q += size + 2;
    else if (size < 2097151) q += size + 3;
    else if (size < 268435455) q += size + 4;
    else q += size + 5;
    if (q > last) return -1;
    *p = q;
    return 0;
}

/* An entry as the bytes the reference makes of it (an integer as its decimal form). */
static PyObject *item_bytes(const item_t *it)
{
    if (it->is_int) {
        char buf[24];
        int n = snprintf(buf, sizeof buf, "%lld", (long long)it->v);
        return PyBytes_FromStringAndSize(buf, n);
    }
    return PyBytes_FromStringAndSize((const char *)it->s, it->slen);
}

static PyObject *make_id(uint64_t ms, uint64_t seq)
{
    unsigned char be[16];
    for (int i = 0; i < 8; i++) {
        be[7 - i] = (unsigned char)(ms >> (8 * i));
        be[15 - i] = (unsigned char)(seq >> (8 * i));
    }
    return _PyLong_FromByteArray(be, 16, 0, 0);
}

#define NEXT(it) do { if (p >= last || next_item(lp, &p, last, &(it)) < 0) goto bad; \
                      items++; } while (0)
#define APPEND_NEW(list, obj) do { PyObject *o_ = (obj); if (o_ == NULL) goto fail; \
        int r_ = PyList_Append((list), o_); Py_DECREF(o_); if (r_ < 0) goto fail; } while (0)

static PyObject *decode(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    unsigned long long mms, mseq;
    if (!PyArg_ParseTuple(args, "y*KK", &buf, &mms, &mseq))
        return NULL;
    const uint8_t *lp = buf.buf;
    Py_ssize_t n = buf.len, p, last, items = 0;
    PyObject *fields = NULL, *ids = NULL, *fvs = NULL, *flagl = NULL, *offs = NULL;
    PyObject *result = NULL;
    item_t it, a, b;

    if (n < 7) goto bad;
    uint32_t total = (uint32_t)lp[0] | ((uint32_t)lp[1] << 8) | ((uint32_t)lp[2] << 16) |
        ((uint32_t)lp[3] << 24);
    unsigned count = (unsigned)lp[4] | ((unsigned)lp[5] << 8);
    if ((Py_ssize_t)total != n || lp[n - 1] != 0xFF) goto bad;
    p = 6;
    last = n - 1;

    fields = PyList_New(0);
    ids = PyList_New(0);
    fvs = PyList_New(0);
    flagl = PyList_New(0);
    offs = PyList_New(0);
    if (!fields || !ids || !fvs || !flagl || !offs) goto fail;

    item_t live, deleted, nf;
    NEXT(live);
    NEXT(deleted);
    Py_ssize_t base = p;
    NEXT(nf);
    if (!live.is_int || !deleted.is_int || !nf.is_int || nf.v < 0) goto bad;
    for (int64_t i = 0; i < nf.v; i++) {
        NEXT(it);
        APPEND_NEW(fields, item_bytes(&it));
    }
    NEXT(it);
    if (!it.is_int || it.v != 0) goto bad;
    Py_ssize_t nfields = (Py_ssize_t)nf.v;
    while (p < last) {
        item_t fl;
        NEXT(fl);
        if (!fl.is_int || lp[fl.start] >= 0x80) goto bad;    /* a 7-bit int */
        NEXT(a);
        NEXT(b);
        if (!a.is_int || !b.is_int) goto bad;
        APPEND_NEW(ids, make_id((uint64_t)mms + (uint64_t)a.v, (uint64_t)mseq + (uint64_t)b.v));
        APPEND_NEW(offs, PyLong_FromSsize_t(fl.start - base));
        APPEND_NEW(flagl, PyLong_FromLong((long)fl.v));
        PyObject *fv;
        if (fl.v & 2) {                                     /* SAMEFIELDS: values only */
            fv = PyList_New(2 * nfields);
            if (fv == NULL) goto fail;
            for (Py_ssize_t i = 0; i < nfields; i++) {
                if (p >= last || next_item(lp, &p, last, &it) < 0) { Py_DECREF(fv); goto bad; }
                items++;
                PyObject *v = item_bytes(&it);
                if (v == NULL) { Py_DECREF(fv); goto fail; }
                PyObject *f = PyList_GET_ITEM(fields, i);
                Py_INCREF(f);
                PyList_SET_ITEM(fv, 2 * i, f);
                PyList_SET_ITEM(fv, 2 * i + 1, v);
            }
        } else {
            NEXT(it);
            if (!it.is_int || it.v < 0 || it.v > n) goto bad;
            Py_ssize_t k = (Py_ssize_t)it.v * 2;
            fv = PyList_New(k);
            if (fv == NULL) goto fail;
            for (Py_ssize_t i = 0; i < k; i++) {
                if (p >= last || next_item(lp, &p, last, &it) < 0) { Py_DECREF(fv); goto bad; }
                items++;
                PyObject *v = item_bytes(&it);
                if (v == NULL) { Py_DECREF(fv); goto fail; }
                PyList_SET_ITEM(fv, i, v);
            }
        }
        int r = PyList_Append(fvs, fv);
        Py_DECREF(fv);
        if (r < 0) goto fail;
        NEXT(it);                                           /* lp-count */
    }
    if (count != 0xFFFF && (Py_ssize_t)count != items) goto bad;
    if (live.v < 0 || deleted.v < 0 || PyList_GET_SIZE(ids) != live.v + deleted.v) goto bad;
    result = Py_BuildValue("(OOOOOLL)", fields, ids, fvs, flagl, offs, (long long)live.v,
                           (long long)deleted.v);
    goto done;
bad:
    result = Py_None;
    Py_INCREF(result);
    goto done;
fail:
    result = NULL;
done:
    Py_XDECREF(fields);
    Py_XDECREF(ids);
    Py_XDECREF(fvs);
    Py_XDECREF(flagl);
    Py_XDECREF(offs);
    PyBuffer_Release(&buf);
    return result;
}


/* ---------------------------------------------------------------- one entry, as lpAppend writes it */

/* canonical_int (listpack.py): the int64 a string is the canonical decimal form of (no '+', no
 * leading zeros, not "-0", at most 20 characters). 1 and *out, or 0. */
static int canonical_int(const uint8_t *s, Py_ssize_t n, int64_t *out)
{
    if (n == 0 || n > 20) return 0;
    int neg = 0;
    if (s[0] == '-') {
        neg = 1;
        s++;
        n--;
        if (n == 0) return 0;
    }
    if (s[0] == '0') {
        if (n == 1 && !neg) { *out = 0; return 1; }
        return 0;
    }
    uint64_t v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        uint64_t d = s[i] - '0';
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1) return 0;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)v;
    }
    return 1;
}

typedef struct {
    uint8_t *b;
    Py_ssize_t len, cap;
} wbuf;

static int wreserve(wbuf *w, Py_ssize_t more)
{
    if (w->len + more <= w->cap) return 0;
    Py_ssize_t cap = w->cap * 2;
    if (cap < w->len + more) cap = w->len + more;
    uint8_t *nb = PyMem_Realloc(w->b, cap);
    if (nb == NULL) { PyErr_NoMemory(); return -1; }
    w->b = nb;
    w->cap = cap;
    return 0;
}

static void put_backlen(wbuf *w, Py_ssize_t size)
{
    uint8_t *o = w->b + w->len;
    if (size <= 127) {
        o[0] = (uint8_t)size;
        w->len += 1;
    } else if (size < 16383) {
        o[0] = (uint8_t)(size >> 7);
        o[1] = (uint8_t)((size & 127) | 128);
        w->len += 2;
    } else if (size < 2097151) {
        o[0] = (uint8_t)(size >> 14);
        o[1] = (uint8_t)(((size >> 7) & 127) | 128);
        o[2] = (uint8_t)((size & 127) | 128);
        w->len += 3;
    } else if (size < 268435455) {
        o[0] = (uint8_t)(size >> 21);
        o[1] = (uint8_t)(((size >> 14) & 127) | 128);
        o[2] = (uint8_t)(((size >> 7) & 127) | 128);
        o[3] = (uint8_t)((size & 127) | 128);
        w->len += 4;
    } else {
        o[0] = (uint8_t)(size >> 28);
        o[1] = (uint8_t)(((size >> 21) & 127) | 128);
        o[2] = (uint8_t)(((size >> 14) & 127) | 128);
        o[3] = (uint8_t)(((size >> 7) & 127) | 128);
        o[4] = (uint8_t)((size & 127) | 128);
        w->len += 5;
    }
}

static int put_int(wbuf *w, int64_t v)
{
    if (wreserve(w, 10) < 0) return -1;
    uint8_t *o = w->b + w->len;
    Py_ssize_t size;
    if (v >= 0 && v <= 127) {
        o[0] = (uint8_t)v;
        size = 1;
    } else if (v >= -4096 && v <= 4095) {
        uint64_t u = (uint64_t)v & 0x1FFF;
        o[0] = (uint8_t)(0xC0 | (u >> 8));
        o[1] = (uint8_t)(u & 0xFF);
        size = 2;
    } else if (v >= -32768 && v <= 32767) {
        uint64_t u = (uint64_t)v & 0xFFFF;
        o[0] = 0xF1;
        o[1] = (uint8_t)(u & 0xFF);
        o[2] = (uint8_t)(u >> 8);
        size = 3;
    } else if (v >= -(1 << 23) && v < (1 << 23)) {
        uint64_t u = (uint64_t)v & 0xFFFFFF;
        o[0] = 0xF2;
        o[1] = (uint8_t)(u & 0xFF);
        o[2] = (uint8_t)((u >> 8) & 0xFF);
        o[3] = (uint8_t)(u >> 16);
        size = 4;
    } else if (v >= -((int64_t)1 << 31) && v < ((int64_t)1 << 31)) {
        uint64_t u = (uint64_t)v & 0xFFFFFFFF;
        o[0] = 0xF3;
        for (int i = 0; i < 4; i++) o[1 + i] = (uint8_t)(u >> (8 * i));
        size = 5;
    } else {
        uint64_t u = (uint64_t)v;
        o[0] = 0xF4;
        for (int i = 0; i < 8; i++) o[1 + i] = (uint8_t)(u >> (8 * i));
        size = 9;
    }
    w->len += size;
    put_backlen(w, size);
    return 0;
}

static int put_str(wbuf *w, PyObject *obj)
{
    const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(obj);
    Py_ssize_t n = PyBytes_GET_SIZE(obj);
    int64_t v;
    if (n <= 20 && canonical_int(s, n, &v))
        return put_int(w, v);
    if (wreserve(w, n + 10) < 0) return -1;
    uint8_t *o = w->b + w->len;
    Py_ssize_t size;
    if (n < 64) {
        o[0] = (uint8_t)(0x80 | n);
        size = 1 + n;
    } else if (n < 4096) {
        o[0] = (uint8_t)(0xE0 | (n >> 8));
        o[1] = (uint8_t)(n & 0xFF);
        size = 2 + n;
    } else {
        o[0] = 0xF0;
        for (int i = 0; i < 4; i++) o[1 + i] = (uint8_t)((uint64_t)n >> (8 * i));
        size = 5 + n;
    }
    memcpy(o + (size - n), s, n);
    w->len += size;
    put_backlen(w, size);
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
    wbuf w = {PyMem_Malloc(256), 0, 256};
    PyObject *out = NULL;
    if (w.b == NULL)
        return PyErr_NoMemory();
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
    PyMem_Free(w.b);
    return out;
}


/* ------------------------------------------------------------- one entry found in a sealed node */

/* find(lp, master_ms, master_seq, ms, seq) -> (offset of the entry's flags byte, fv) when the
 * entry ms-seq is in the node and not deleted, None when it is not (or is a tombstone), False
 * when the listpack is not what decode accepts (then stream.py's find_reference answers).
 * Walks the entries without making objects until the one wanted. */
static PyObject *find(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    unsigned long long mms, mseq, ms, seq;
    if (!PyArg_ParseTuple(args, "y*KKKK", &buf, &mms, &mseq, &ms, &seq))
        return NULL;
    const uint8_t *lp = buf.buf;
    Py_ssize_t n = buf.len, p = 6, last = n - 1, fields_at;
    PyObject *result = NULL;
    item_t it, fl, a, b, nf;
    if (n < 7 || lp[n - 1] != 0xFF) goto bad;
#define SKIP(x) do { if (p >= last || next_item(lp, &p, last, &(x)) < 0) goto bad; } while (0)
    SKIP(it);                                   /* live */
    SKIP(it);                                   /* deleted */
    SKIP(nf);
    if (!nf.is_int || nf.v < 0) goto bad;
    fields_at = p;
    for (int64_t i = 0; i < nf.v; i++) SKIP(it);
    SKIP(it);                                   /* the master entry's 0 */
    while (p < last) {
        SKIP(fl);
        SKIP(a);
        SKIP(b);
        if (!fl.is_int || !a.is_int || !b.is_int) goto bad;
        uint64_t ems = (uint64_t)mms + (uint64_t)a.v, eseq = (uint64_t)mseq + (uint64_t)b.v;
        if (ems > ms || (ems == ms && eseq > seq))
            break;                              /* IDs grow within a node: not here */
        int found = ems == ms && eseq == seq;
        Py_ssize_t k;
        if (fl.v & 2) {
            k = (Py_ssize_t)nf.v;
        } else {
            SKIP(it);
            if (!it.is_int || it.v < 0 || it.v > n) goto bad;
            k = (Py_ssize_t)it.v * 2;
        }
        if (!found) {
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
        result = Py_BuildValue("(nN)", fl.start, fv);
        goto done;
    }
#undef SKIP
    result = Py_None;
    Py_INCREF(result);
    goto done;
bad:
    result = Py_False;
    Py_INCREF(result);
    goto done;
fail:
    result = NULL;
done:
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"find", find, METH_VARARGS,
     "find(lp, master_ms, master_seq, ms, seq): (flags offset, fv) of a live entry of a sealed "
     "node, None when absent or deleted, False when the listpack is not well formed."},
    {"entry", entry, METH_VARARGS,
     "entry(flags, ms_delta, seq_delta, fv, samefields): one stream entry's listpack bytes as "
     "streamAppendItem writes them, or None when a field or value is not bytes."},
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
    return PyModule_Create(&moduledef);
}
