/* LZF, the compression of Redis's RDB strings (rdbcompression yes): the speed-ups of
 * pyrepl/rdb/lzf.py's compress_reference and decompress_reference, which stay the references
 * (PYREPL_PURE=1 runs them; tests/unit/test_rdb_codec.py holds each pair equal on random input,
 * corrupted streams included).
 *
 * Why C: Redis writes every string over 20 bytes LZF-compressed when that saves 4 bytes or
 * more (rdbSaveRawString). In Python a byte's hash and table probe cost ~100 ns, the whole of a
 * 100 KB string's save ~15 ms where Redis takes ~0.15 ms; and a replica of a real Redis
 * decompresses what it loads at ~40 ns a byte.
 *
 * compress(data, limit) -> bytes, or None when the stream would be longer than ``limit``.
 * The stream is liblzf's format (lzf_d.c reads it): a control byte below 32 starts a run of
 * ctrl + 1 literal bytes; else ctrl >> 5 is a length (7: plus the next byte) and the low 5 bits
 * with the next byte a distance, a copy of length + 2 bytes from distance + 1 bytes back. The
 * compressor is greedy: at each position the 3 bytes' hash (Fibonacci hashing, 14 bits) names
 * the last position with that hash in this call; if its 3 bytes match within 8 KB the match is
 * extended up to 264 bytes and the two last positions of the match are hashed (as liblzf's
 * VERY_FAST). The table is never cleared: an entry holds the call's base plus the position
 * plus 1, and the base moves past every call's input, so an entry of an earlier call reads as
 * empty (the reference's fresh dict per call).
 *
 * decompress(src, expected_len) -> bytes, or None when the stream is not exactly a stream of
 * ``expected_len`` bytes (the reference then says what is wrong).
 *
 * rdb_string(s) -> the RDB string encoding of ``s`` LZF-compressed (0xC3, compressed length,
 * length, the stream), or None when Redis would write it raw (20 bytes or less, or not 4
 * bytes shorter compressed): rdbSaveLzfStringObject.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_wbuf.h"

#define HLOG 14
#define HSIZE (1u << HLOG)
#define MAX_LIT 32
#define MAX_OFF 8192
#define MAX_REF 264

static uint64_t table[HSIZE];
static uint64_t epoch = 0;

static inline uint32_t hash3(const uint8_t *p)
{
    uint32_t v = ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
    return (uint32_t)(v * 2654435761u) >> (32 - HLOG);
}

/* The stream of in[0..n) into out (room: limit bytes); its length, or -1 past the limit. */
static Py_ssize_t lzf_compress(const uint8_t *in, Py_ssize_t n, uint8_t *out, Py_ssize_t limit)
{
    uint64_t base = epoch;
    Py_ssize_t ip = 0, lit = 0, op = 0;
    epoch += (uint64_t)n + 1;

#define FLUSH(end) do {                                                   \
        Py_ssize_t s_ = lit, e_ = (end);                                  \
        while (s_ < e_) {                                                 \
            Py_ssize_t run_ = e_ - s_ < MAX_LIT ? e_ - s_ : MAX_LIT;     \
            if (op + 1 + run_ > limit) return -1;                         \
            out[op++] = (uint8_t)(run_ - 1);                              \
            memcpy(out + op, in + s_, (size_t)run_);                      \
            op += run_;                                                   \
            s_ += run_;                                                   \
        }                                                                 \
    } while (0)

    while (ip + 2 < n) {
        uint32_t h = hash3(in + ip);
        uint64_t e = table[h];
        table[h] = base + (uint64_t)ip + 1;
        if (e > base) {
            Py_ssize_t ref = (Py_ssize_t)(e - base - 1);
            Py_ssize_t off = ip - ref - 1;
            if (off < MAX_OFF && in[ref] == in[ip] && in[ref + 1] == in[ip + 1] &&
                in[ref + 2] == in[ip + 2]) {
                Py_ssize_t maxlen = n - ip < MAX_REF ? n - ip : MAX_REF;
                Py_ssize_t len = 3;
                while (len < maxlen && in[ref + len] == in[ip + len])
                    len++;
                FLUSH(ip);
                Py_ssize_t lcode = len - 2;
                if (op + (lcode < 7 ? 2 : 3) > limit) return -1;
                if (lcode < 7) {
                    out[op++] = (uint8_t)((lcode << 5) | (off >> 8));
                } else {
                    out[op++] = (uint8_t)((7 << 5) | (off >> 8));
                    out[op++] = (uint8_t)(lcode - 7);
                }
                out[op++] = (uint8_t)(off & 0xFF);
                ip += len;
                for (Py_ssize_t q = ip - 2; q < ip; q++)
                    if (q + 2 < n)
                        table[hash3(in + q)] = base + (uint64_t)q + 1;
                lit = ip;
                continue;
            }
        }
        ip++;
    }
    FLUSH(n);
#undef FLUSH
    return op;
}

static int lzf_decompress(const uint8_t *ip, Py_ssize_t slen, uint8_t *o, Py_ssize_t expected);

/* compress and decompress: (data, size) parsed, a bytes of up to ``size`` filled by ``run``
 * (its length, or -1: the answer is None). */
static PyObject *lzf_call(PyObject *args, int compressing)
{
    Py_buffer buf;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "y*n", &buf, &size))
        return NULL;
    if (size < 0)
        size = compressing ? 0 : -1;
    if (compressing && size > buf.len + buf.len / 32 + 2)
        size = buf.len + buf.len / 32 + 2;    /* room for the worst case: a literal per 32 */
    PyObject *out = size < 0 ? NULL : PyBytes_FromStringAndSize(NULL, size);
    Py_ssize_t got = -1;
    if (out != NULL) {
        uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
        got = compressing ? lzf_compress(buf.buf, buf.len, o, size)
                          : (lzf_decompress(buf.buf, buf.len, o, size) ? size : -1);
    }
    PyBuffer_Release(&buf);
    if (got < 0) {
        if (out == NULL && size >= 0)
            return NULL;
        Py_XDECREF(out);
        Py_RETURN_NONE;
    }
    if (got != size && _PyBytes_Resize(&out, got) < 0)
        return NULL;
    return out;
}

static PyObject *compress(PyObject *self, PyObject *args)
{
    return lzf_call(args, 1);
}

/* rdbSaveLen's bytes into p; their count. */
static int put_len(uint8_t *p, uint64_t n)
{
    if (n < 64) {
        p[0] = (uint8_t)n;
        return 1;
    }
    if (n < 16384) {
        p[0] = (uint8_t)(0x40 | (n >> 8));
        p[1] = (uint8_t)(n & 0xFF);
        return 2;
    }
    if (n <= 0xFFFFFFFFu) {
        p[0] = 0x80;
        for (int i = 0; i < 4; i++)
            p[1 + i] = (uint8_t)(n >> (24 - 8 * i));
        return 5;
    }
    p[0] = 0x81;
    for (int i = 0; i < 8; i++)
        p[1 + i] = (uint8_t)(n >> (56 - 8 * i));
    return 9;
}

/* s[0..n) as an LZF-compressed RDB string into o (room: n + 15 bytes): 0xC3, the stream's
 * length, n, the stream (at most n - 4 bytes); its length, or -1 when Redis writes s raw. */
static Py_ssize_t put_lzf_string(const uint8_t *s, Py_ssize_t n, uint8_t *o)
{
    Py_ssize_t got = lzf_compress(s, n, o + 19, n - 4);
    if (got < 0)
        return -1;
    uint8_t head[19];
    int h = 0;
    head[h++] = 0xC3;
    h += put_len(head + h, (uint64_t)got);
    h += put_len(head + h, (uint64_t)n);
    memmove(o + h, o + 19, (size_t)got);
    memcpy(o, head, (size_t)h);
    return h + got;
}

static PyObject *rdb_string(PyObject *self, PyObject *arg)
{
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "rdb_string takes bytes");
        return NULL;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    if (n <= 20)
        Py_RETURN_NONE;
    /* Redis's room: n - 4 bytes of stream (rdbSaveLzfStringObject), after a header of
     * 0xC3 and two lengths (19 bytes at most) */
    Py_ssize_t limit = n - 4;
    PyObject *out = PyBytes_FromStringAndSize(NULL, limit + 19);
    if (out == NULL)
        return NULL;
    Py_ssize_t got = put_lzf_string((const uint8_t *)PyBytes_AS_STRING(arg), n,
                                    (uint8_t *)PyBytes_AS_STRING(out));
    if (got < 0) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&out, got) < 0)
        return NULL;
    return out;
}

/* The stream src[0..slen) decompressed into o (exactly expected bytes); 1, or 0 when it is not
 * a stream of that many bytes. */
static int lzf_decompress(const uint8_t *ip, Py_ssize_t slen, uint8_t *o, Py_ssize_t expected)
{
    const uint8_t *end = ip + slen;
    Py_ssize_t op = 0;
    while (ip < end) {
        unsigned ctrl = *ip++;
        if (ctrl < 32) {
            Py_ssize_t run = (Py_ssize_t)ctrl + 1;
            if (end - ip < run || op + run > expected)
                return 0;
            memcpy(o + op, ip, (size_t)run);
            ip += run;
            op += run;
            continue;
        }
        Py_ssize_t len = ctrl >> 5;
        if (len == 7) {
            if (ip >= end)
                return 0;
            len += *ip++;
        }
        if (ip >= end)
            return 0;
        Py_ssize_t dist = (Py_ssize_t)(((ctrl & 0x1F) << 8) + *ip++) + 1;
        len += 2;
        if (dist > op || op + len > expected)
            return 0;
        uint8_t *src = o + op - dist;
        if (dist >= len) {
            memcpy(o + op, src, (size_t)len);
        } else {
            for (Py_ssize_t i = 0; i < len; i++)
                o[op + i] = src[i];
        }
        op += len;
    }
    return op == expected;
}

static PyObject *decompress(PyObject *self, PyObject *args)
{
    return lzf_call(args, 0);
}


/* ---------------------------------------------------------------- runs of elements */

/* rdbLoadLen at b[p..n): 1 with *v and *np, 0 when incomplete or not a plain length. */
static int read_len(const uint8_t *b, Py_ssize_t p, Py_ssize_t n, uint64_t *v, Py_ssize_t *np)
{
    if (p >= n)
        return 0;
    unsigned t = b[p];
    if (t < 0x40) {
        *v = t;
        *np = p + 1;
    } else if (t < 0x80) {
        if (p + 2 > n)
            return 0;
        *v = ((uint64_t)(t & 0x3F) << 8) | b[p + 1];
        *np = p + 2;
    } else if (t == 0x80 || t == 0x81) {
        int k = t == 0x80 ? 4 : 8;
        if (p + 1 + k > n)
            return 0;
        uint64_t x = 0;
        for (int i = 0; i < k; i++)
            x = (x << 8) | b[p + 1 + i];
        *v = x;
        *np = p + 1 + k;
    } else {
        return 0;
    }
    return 1;
}

static PyObject *int_bytes(long long v)
{
    char tmp[24];
    int k = snprintf(tmp, sizeof tmp, "%lld", v);
    return PyBytes_FromStringAndSize(tmp, k);
}

/* rdbGenericLoadStringObject at b[p..n): 1 with *s (new) and *np; 0 when incomplete or
 * anything the Python reader must judge (it then raises the precise error); -1 on error. */
static int read_str(const uint8_t *b, Py_ssize_t p, Py_ssize_t n, PyObject **s, Py_ssize_t *np)
{
    if (p >= n)
        return 0;
    unsigned t = b[p];
    if (t >= 0xC0) {
        long long v;
        if (t == 0xC0) {
            if (p + 2 > n)
                return 0;
            v = (int8_t)b[p + 1];
            *np = p + 2;
        } else if (t == 0xC1) {
            if (p + 3 > n)
                return 0;
            v = (int16_t)((uint16_t)b[p + 1] | ((uint16_t)b[p + 2] << 8));
            *np = p + 3;
        } else if (t == 0xC2) {
            if (p + 5 > n)
                return 0;
            v = (int32_t)((uint32_t)b[p + 1] | ((uint32_t)b[p + 2] << 8) |
                          ((uint32_t)b[p + 3] << 16) | ((uint32_t)b[p + 4] << 24));
            *np = p + 5;
        } else if (t == 0xC3) {
            uint64_t clen, ulen;
            Py_ssize_t q;
            if (!read_len(b, p + 1, n, &clen, &q) || !read_len(b, q, n, &ulen, &q))
                return 0;
            if (clen > (uint64_t)(n - q) || ulen > (uint64_t)PY_SSIZE_T_MAX / 2)
                return 0;
            PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)ulen);
            if (out == NULL)
                return -1;
            if (!lzf_decompress(b + q, (Py_ssize_t)clen, (uint8_t *)PyBytes_AS_STRING(out),
                                (Py_ssize_t)ulen)) {
                Py_DECREF(out);
                return 0;
            }
            *s = out;
            *np = q + (Py_ssize_t)clen;
            return 1;
        } else {
            return 0;
        }
        *s = int_bytes(v);
        return *s == NULL ? -1 : 1;
    }
    uint64_t len;
    Py_ssize_t start;
    if (!read_len(b, p, n, &len, &start) || len > (uint64_t)(n - start))
        return 0;
    *s = PyBytes_FromStringAndSize((const char *)b + start, (Py_ssize_t)len);
    if (*s == NULL)
        return -1;
    *np = start + (Py_ssize_t)len;
    return 1;
}

enum { RUN_STRINGS = 0, RUN_PAIRS = 1, RUN_ZSET2 = 2 };

/* read_run(kind, buf, p, count, out) -> the position after the elements appended to out */
static PyObject *read_run(PyObject *self, PyObject *args)
{
    int kind;
    Py_buffer buf;
    Py_ssize_t p, count;
    PyObject *out;
    if (!PyArg_ParseTuple(args, "iy*nnO!", &kind, &buf, &p, &count, &PyList_Type, &out))
        return NULL;
    const uint8_t *b = buf.buf;
    Py_ssize_t n = buf.len;
    int err = 0;
    if (p < 0)
        p = n;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *a = NULL, *c = NULL, *e;
        Py_ssize_t q;
        int r = read_str(b, p, n, &a, &q);
        if (r <= 0) {
            err = r < 0;
            break;
        }
        if (kind == RUN_STRINGS) {
            e = a;
        } else if (kind == RUN_PAIRS) {
            r = read_str(b, q, n, &c, &q);
            if (r <= 0) {
                Py_DECREF(a);
                err = r < 0;
                break;
            }
            e = PyTuple_Pack(2, a, c);
            Py_DECREF(a);
            Py_DECREF(c);
        } else {
            if (q + 8 > n) {
                Py_DECREF(a);
                break;
            }
            uint64_t x = 0;
            for (int k = 7; k >= 0; k--)
                x = (x << 8) | b[q + k];
            double d;
            memcpy(&d, &x, sizeof d);
            q += 8;
            c = PyFloat_FromDouble(d);
            if (c == NULL) {
                Py_DECREF(a);
                err = 1;
                break;
            }
            e = PyTuple_Pack(2, a, c);
            Py_DECREF(a);
            Py_DECREF(c);
        }
        if (e == NULL || PyList_Append(out, e) < 0) {
            Py_XDECREF(e);
            err = 1;
            break;
        }
        Py_DECREF(e);
        p = q;
    }
    PyBuffer_Release(&buf);
    if (err)
        return NULL;
    return PyLong_FromSsize_t(p);
}

/* ---------------------------------------------------------------- writing runs */

/* rdbTryIntegerEncoding: a canonical decimal of at most 11 bytes in the int32 range. */
static int int_encoding(const uint8_t *s, Py_ssize_t n, uint8_t *out)
{
    if (n == 0 || n > 11)
        return 0;
    Py_ssize_t i = 0;
    int neg = s[0] == '-';
    if (neg)
        i = 1;
    if (i == n || (s[i] == '0' && (n - i > 1 || neg)))
        return 0;                         /* "", "-", leading zeros, "-0" */
    long long v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (neg)
        v = -v;
    if (v >= -128 && v <= 127) {
        out[0] = 0xC0;
        out[1] = (uint8_t)(int8_t)v;
        return 2;
    }
    if (v >= -32768 && v <= 32767) {
        out[0] = 0xC1;
        out[1] = (uint8_t)(v & 0xFF);
        out[2] = (uint8_t)((v >> 8) & 0xFF);
        return 3;
    }
    if (v >= -2147483648LL && v <= 2147483647LL) {
        out[0] = 0xC2;
        for (int k = 0; k < 4; k++)
            out[1 + k] = (uint8_t)((v >> (8 * k)) & 0xFF);
        return 5;
    }
    return 0;
}

/* One string as the RDB writer puts it (pyrepl/rdb/encoder.py's _put_strings). */
static int put_str(wbuf *w, PyObject *o, int z)
{
    if (!PyBytes_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "an RDB string must be bytes");
        return -1;
    }
    const uint8_t *s = (const uint8_t *)PyBytes_AS_STRING(o);
    Py_ssize_t n = PyBytes_GET_SIZE(o);
    if (wbuf_reserve(w, n + 19) < 0)
        return -1;
    uint8_t *o8 = w->b + w->len;
    if (n <= 11) {
        int k = int_encoding(s, n, o8);
        if (k) {
            w->len += k;
            return 0;
        }
    } else if (z && n > 20) {
        Py_ssize_t got = put_lzf_string(s, n, o8);
        if (got >= 0) {
            w->len += got;
            return 0;
        }
    }
    int h = put_len(o8, (uint64_t)n);
    memcpy(o8 + h, s, (size_t)n);
    w->len += h + n;
    return 0;
}

/* put_run(kind, items, compress) -> the RDB bytes of items: strings, (field, value) pairs or
 * (member, score) pairs (the score as 8 little-endian bytes: RDB_TYPE_ZSET_2). */
static PyObject *put_run(PyObject *self, PyObject *args)
{
    int kind, z;
    PyObject *items;
    if (!PyArg_ParseTuple(args, "iOp", &kind, &items, &z))
        return NULL;
    PyObject *it = PyObject_GetIter(items);
    if (it == NULL)
        return NULL;
    wbuf w = {NULL, 0, 0};
    PyObject *e;
    while ((e = PyIter_Next(it)) != NULL) {
        int r;
        if (kind == RUN_STRINGS) {
            r = put_str(&w, e, z);
        } else if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2) {
            PyErr_SetString(PyExc_TypeError, "put_run: pairs must be 2-tuples");
            r = -1;
        } else if (kind == RUN_PAIRS) {
            r = put_str(&w, PyTuple_GET_ITEM(e, 0), z);
            if (r == 0)
                r = put_str(&w, PyTuple_GET_ITEM(e, 1), z);
        } else {
            r = put_str(&w, PyTuple_GET_ITEM(e, 0), z);
            double d = r == 0 ? PyFloat_AsDouble(PyTuple_GET_ITEM(e, 1)) : 0;
            if (r == 0 && d == -1.0 && PyErr_Occurred())
                r = -1;
            if (r == 0 && wbuf_reserve(&w, 8) == 0) {
                uint64_t x;
                memcpy(&x, &d, sizeof x);
                for (int k = 0; k < 8; k++)
                    w.b[w.len++] = (uint8_t)(x >> (8 * k));
            } else if (r == 0) {
                r = -1;
            }
        }
        Py_DECREF(e);
        if (r < 0)
            break;
    }
    Py_DECREF(it);
    PyObject *res = NULL;
    if (!PyErr_Occurred())
        res = PyBytes_FromStringAndSize((const char *)w.b, w.len);
    wbuf_free(&w);
    return res;
}


/* ---------------------------------------------------------------- a stream's PELs */

/* The sorted keys of a PEL (a dict of entry ID -> NACK), or NULL. */
static PyObject *sorted_ids(PyObject *pel)
{
    if (!PyDict_Check(pel)) {
        PyErr_SetString(PyExc_TypeError, "a PEL is a dict");
        return NULL;
    }
    PyObject *keys = PyDict_Keys(pel);
    if (keys != NULL && PyList_Sort(keys) < 0)
        Py_CLEAR(keys);
    return keys;
}

static int put_id(wbuf *w, PyObject *id)
{
    if (!PyLong_Check(id)) {
        PyErr_SetString(PyExc_TypeError, "a stream ID is an int");
        return -1;
    }
    if (wbuf_reserve(w, 16) < 0)
        return -1;
    if (_PyLong_AsByteArray((PyLongObject *)id, w->b + w->len, 16, 0, 0) < 0)
        return -1;
    w->len += 16;
    return 0;
}

/* put_pel(pel, nacks) -> with nacks, a group's PEL as rdbSaveObject writes it (per entry in ID
 * order: the ID's 16 big-endian bytes, the delivery time's 8 little-endian bytes, the delivery
 * count as a length); without, a consumer's (the IDs alone). */
static PyObject *put_pel(PyObject *self, PyObject *args)
{
    PyObject *pel;
    int nacks;
    if (!PyArg_ParseTuple(args, "Op", &pel, &nacks))
        return NULL;
    PyObject *keys = sorted_ids(pel);
    if (keys == NULL)
        return NULL;
    static PyObject *s_time = NULL, *s_count = NULL;
    if (s_time == NULL) {
        s_time = PyUnicode_InternFromString("delivery_time");
        s_count = PyUnicode_InternFromString("delivery_count");
        if (s_time == NULL || s_count == NULL) {
            Py_DECREF(keys);
            return NULL;
        }
    }
    wbuf w = {NULL, 0, 0};
    Py_ssize_t n = PyList_GET_SIZE(keys);
    int err = 0;
    for (Py_ssize_t i = 0; i < n && !err; i++) {
        PyObject *id = PyList_GET_ITEM(keys, i);
        if (put_id(&w, id) < 0) {
            err = 1;
            break;
        }
        if (!nacks)
            continue;
        PyObject *nack = PyDict_GetItemWithError(pel, id);    /* borrowed */
        PyObject *t = nack ? PyObject_GetAttr(nack, s_time) : NULL;
        PyObject *c = t ? PyObject_GetAttr(nack, s_count) : NULL;
        long long tv = c ? PyLong_AsLongLong(t) : -1;
        unsigned long long cv = (c && !PyErr_Occurred()) ? PyLong_AsUnsignedLongLong(c) : 0;
        Py_XDECREF(t);
        Py_XDECREF(c);
        if (c == NULL || PyErr_Occurred() || wbuf_reserve(&w, 17) < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "a PEL entry without its NACK");
            err = 1;
            break;
        }
        for (int k = 0; k < 8; k++)
            w.b[w.len++] = (uint8_t)((unsigned long long)tv >> (8 * k));
        w.len += put_len(w.b + w.len, cv);
    }
    Py_DECREF(keys);
    PyObject *res = err ? NULL : PyBytes_FromStringAndSize((const char *)w.b, w.len);
    wbuf_free(&w);
    return res;
}


/* read_pel(buf, p, count, nack, pel) -> (read, position): up to count entries of a group's PEL
 * at p (ID, delivery time, delivery count), each stored as pel[id] = nack(time, count, None);
 * stops before one not whole in buf or already in pel (the Python loop then reads it or says
 * what is wrong). */
static PyObject *read_pel(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t p, count, got = 0;
    PyObject *nack_type, *pel;
    if (!PyArg_ParseTuple(args, "y*nnOO!", &buf, &p, &count, &nack_type, &PyDict_Type, &pel))
        return NULL;
    const uint8_t *b = buf.buf;
    Py_ssize_t n = buf.len;
    int err = 0;
    for (; got < count; got++) {
        uint64_t cnt;
        Py_ssize_t q;
        if (p < 0 || p + 25 > n || !read_len(b, p + 24, n, &cnt, &q))
            break;
        PyObject *id = _PyLong_FromByteArray(b + p, 16, 0, 0);
        if (id == NULL) {
            err = 1;
            break;
        }
        int dup = PyDict_Contains(pel, id);
        if (dup != 0) {
            Py_DECREF(id);
            err = dup < 0;
            break;
        }
        uint64_t t = 0;
        for (int k = 7; k >= 0; k--)
            t = (t << 8) | b[p + 16 + k];
        PyObject *nack = PyObject_CallFunction(nack_type, "LKO", (long long)t,
                                               (unsigned long long)cnt, Py_None);
        int r = nack == NULL ? -1 : PyDict_SetItem(pel, id, nack);
        Py_DECREF(id);
        Py_XDECREF(nack);
        if (r < 0) {
            err = 1;
            break;
        }
        p = q;
    }
    PyBuffer_Release(&buf);
    if (err)
        return NULL;
    return Py_BuildValue("(nn)", got, p);
}

/* read_consumer_pel(buf, p, count, pel, consumer, cpel) -> (read, position): up to count IDs
 * of a consumer's PEL at p, each NACK of pel given its consumer and put in cpel; stops before
 * an ID not whole in buf or not in pel. */
static PyObject *read_consumer_pel(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t p, count, got = 0;
    PyObject *pel, *cons, *cpel;
    if (!PyArg_ParseTuple(args, "y*nnO!OO!", &buf, &p, &count, &PyDict_Type, &pel, &cons,
                          &PyDict_Type, &cpel))
        return NULL;
    static PyObject *s_consumer = NULL;
    if (s_consumer == NULL && (s_consumer = PyUnicode_InternFromString("consumer")) == NULL) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    const uint8_t *b = buf.buf;
    Py_ssize_t n = buf.len;
    int err = 0;
    for (; got < count; got++) {
        if (p < 0 || p + 16 > n)
            break;
        PyObject *id = _PyLong_FromByteArray(b + p, 16, 0, 0);
        if (id == NULL) {
            err = 1;
            break;
        }
        PyObject *nack = PyDict_GetItemWithError(pel, id);     /* borrowed */
        if (nack == NULL) {
            Py_DECREF(id);
            err = PyErr_Occurred() != NULL;
            break;
        }
        int r = PyObject_SetAttr(nack, s_consumer, cons);
        if (r == 0)
            r = PyDict_SetItem(cpel, id, nack);
        Py_DECREF(id);
        if (r < 0) {
            err = 1;
            break;
        }
        p += 16;
    }
    PyBuffer_Release(&buf);
    if (err)
        return NULL;
    return Py_BuildValue("(nn)", got, p);
}

static PyMethodDef methods[] = {
    {"compress", compress, METH_VARARGS,
     "compress(data, limit) -> the LZF stream of data, or None when longer than limit"},
    {"decompress", decompress, METH_VARARGS,
     "decompress(src, expected_len) -> bytes, or None when src is not a stream of that many"},
    {"read_run", read_run, METH_VARARGS,
     "read_run(kind, buf, p, count, out) -> position: up to count elements (0 strings, "
     "1 pairs, 2 zset2 members) read at p and appended to out; stops before one it cannot "
     "read whole (the Python reader then reads it or says what is wrong)"},
    {"put_run", put_run, METH_VARARGS,
     "put_run(kind, items, compress) -> the RDB bytes of items (0 strings, 1 (field, value) "
     "pairs, 2 (member, score) pairs): _put_strings's encoding"},
    {"put_pel", put_pel, METH_VARARGS,
     "put_pel(pel, nacks) -> a stream group's PEL (nacks) or a consumer's (the IDs alone) as "
     "the RDB writes it, in ID order"},
    {"read_pel", read_pel, METH_VARARGS,
     "read_pel(buf, p, count, nack, pel) -> (read, position): a group's PEL entries into pel "
     "as nack(time, count, None), up to one not whole or already there"},
    {"read_consumer_pel", read_consumer_pel, METH_VARARGS,
     "read_consumer_pel(buf, p, count, pel, consumer, cpel) -> (read, position): a consumer's "
     "PEL IDs, their NACKs given the consumer and put in cpel, up to one not whole or not in "
     "pel"},
    {"rdb_string", rdb_string, METH_O,
     "rdb_string(s) -> s as an LZF-compressed RDB string, or None when Redis writes it raw"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_codec", "LZF and runs of RDB strings (pyrepl/rdb/lzf.py, encoder.py, decoder.py)",
    -1, methods,
};

PyMODINIT_FUNC PyInit__codec(void)
{
    return PyModule_Create(&moduledef);
}
