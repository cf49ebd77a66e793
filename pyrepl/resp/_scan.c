/* pyrepl.resp._scan: the request reader's fast path in C.

   scan(buf, pos, window, maxcount, maxbulk, base, inline) -> (requests, ends)

   Parses the *canonical* multibulk requests that lie complete in buf from pos on: "*N\r\n"
   with N in 1..maxcount written as Redis's string2ll reads it (no sign, no leading zero),
   then N times "$L\r\n", L bytes and "\r\n", with L in 0..maxbulk written the same way.
   It stops, returning what it has, at the first byte that is anything else: an inline
   request, "*0", "*-1", a sign or a leading zero, a header line not ended by CRLF, data not
   followed by CRLF, a limit exceeded, or an incomplete request. It starts no request at or
   past pos + window (a request that starts before may run past it).

   With inline (a client's reader; a master's stream is never inline), a batch that starts
   at a byte other than '*' takes *simple* inline requests instead (inline_request), up to
   the next '*': the lines that sdssplitargs and the pure reader split alike. A batch is of
   one kind; an inline one's bytes are not its requests' RESP encoding, so the reader keeps
   no bytes for it (pyrepl/resp/fastreader.py: propagation encodes its writes).

   requests: one list of bytes per request (its arguments); ends: where each ends, as
   base + its end offset in buf. Every input this accepts is read the same way by Redis's
   processMultibulkBuffer and by the pure RespReader (pyrepl/resp/reader.py): whatever it
   does not accept is left to that reader, which gives Redis's answer, errors included. So
   the only property to test is that scan's requests and ends are the pure reader's
   (tests/unit/test_resp_scan.py, hypothesis).

   Command names: a request's first argument equal to one scanned before (a pipeline of one
   command, a client repeating it, a transaction's MULTI, commands and EXEC) is that same
   bytes object, not a new one: it costs no allocation, compares by identity in the run
   selection, and keeps its cached hash for the command lookup (pyrepl/resp/_names.h).

   Memory: nothing is allocated for a request before the bytes that would hold its N
   arguments (6 bytes each at least, "$0\r\n\r\n") have arrived, so a header such as
   "*2000000000" costs nothing.

   The cyclic GC: the lists made here (each request's arguments, the requests, the ends)
   hold only bytes, ints and such lists, so they can be in no reference cycle, and they are
   taken out of the GC's view as they are made (what CPython does for a tuple of such
   objects). A read of a replica's stream holds thousands of requests at once; tracked, they
   outlived the young generations' collections and set off a full collection every few
   reads, each visiting the whole dataset (a list key of 10M elements: 0.3 s each, 13.6 s of
   full collections in a 40 s load; bench/RESULTS.md, "The cyclic GC"). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MODULE_NAME "pyrepl.resp._scan"
#include "../_slots.h"

/* o (a new list of bytes, ints or such lists, or NULL) out of the cyclic GC's view */
static inline PyObject *
untracked(PyObject *o)
{
    if (o != NULL)
        PyObject_GC_UnTrack(o);
    return o;
}

/* A canonical decimal of at most 18 digits ending at the CR of a CRLF, starting at p (< end).
   Returns the value and sets *next past the LF, or -1 (not canonical, or not complete). */
static long long
read_number(const char *p, const char *end, const char **next)
{
    const char *start = p;
    long long v;
    if (p >= end)
        return -1;
    if (*p == '0') {
        p++;
        v = 0;
    } else {
        if (*p < '1' || *p > '9')
            return -1;
        v = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (p - start >= 18)
                return -1;
            v = v * 10 + (*p - '0');
            p++;
        }
    }
    if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
        return -1;
    *next = p + 2;
    return v;
}

#include "_names.h"

/* list.append(v) stealing v (-1 on failure, v released): in place while the list has room,
   as a reused list does (list_empty). */
static inline int
list_push(PyObject *list, PyObject *v)
{
    PyListObject *l = (PyListObject *)list;
    Py_ssize_t n = Py_SIZE(l);
    if (n < l->allocated) {
        l->ob_item[n] = v;
        Py_SET_SIZE(l, n + 1);
        return 0;
    }
    int rc = PyList_Append(list, v);
    Py_DECREF(v);
    return rc;
}

/* Empty a list, keeping its allocation for list_push. (The size goes first: what releasing
   an item may run sees an empty list.) */
static void
list_empty(PyObject *list)
{
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject **items = ((PyListObject *)list)->ob_item;
    Py_SET_SIZE(list, 0);
    for (Py_ssize_t i = 0; i < n; i++)
        Py_DECREF(items[i]);
}

/* The ints of an emptied spare batch's ``ends`` that only that list held, kept for the next
   reads' ends (end_int): an offset written into one in place (_slots.h's int_write_in_place)
   spares making an int and releasing it, ~130 instructions a request. */
#ifdef SLOT_INT_DIGITS
#define INTS_KEPT 16
static PyObject *ints_kept[INTS_KEPT];
static int n_ints_kept;
#endif

/* The int at (new reference), a kept one when there is one of its size. */
static PyObject *
end_int(long long at)
{
#ifdef SLOT_INT_DIGITS
    if (n_ints_kept > 0 && at > 256) {   /* (smaller: CPython's shared small ints) */
        PyObject *v = ints_kept[--n_ints_kept];
        if (int_write_in_place(v, at))
            return v;
        Py_DECREF(v);
    }
#endif
    return PyLong_FromLongLong(at);
}

/* list_empty for an ``ends`` list: its ints that nothing else holds kept (end_int). */
static void
ends_empty(PyObject *list)
{
#ifdef SLOT_INT_DIGITS
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject **items = ((PyListObject *)list)->ob_item;
    Py_SET_SIZE(list, 0);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        if (n_ints_kept < INTS_KEPT && PyLong_CheckExact(v) && Py_REFCNT(v) == 1 &&
                (Py_SIZE(v) == 1 || Py_SIZE(v) == 2))
            ints_kept[n_ints_kept++] = v;   /* (its reference goes with it) */
        else
            Py_DECREF(v);
    }
#else
    list_empty(list);
#endif
}

/* A batch that first() let go of while nothing else held it, kept for its next read: a
   5-tuple (reqs, None, None, None, ends) whose lists are empty but keep their room, so that
   a lone request's read allocates neither the tuple nor the lists and their arrays (nor
   releases the last read's: ~750 instructions of the read's ~2,600). Only first() takes it. */
static PyObject *spare_batch;
#define SPARE_ROOM 16   /* (lists grown bigger by a pipeline are let go) */

static int
spare_list(PyObject *list)
{
    return PyList_CheckExact(list) && Py_REFCNT(list) == 1 &&
           ((PyListObject *)list)->allocated <= SPARE_ROOM;
}

/* Release a reader's batch (stolen; NULL or None too), kept as the spare when it can be. */
static void
release_batch(PyObject *b)
{
    if (spare_batch == NULL && b != NULL && PyTuple_CheckExact(b) && Py_REFCNT(b) == 1 &&
            PyTuple_GET_SIZE(b) == 5 && spare_list(PyTuple_GET_ITEM(b, 0)) &&
            spare_list(PyTuple_GET_ITEM(b, 4))) {
        spare_batch = b;   /* (taken first: whatever a release below runs finds it taken) */
        for (Py_ssize_t i = 1; i < 4; i++) {
            PyObject *item = PyTuple_GET_ITEM(b, i);
            PyTuple_SET_ITEM(b, i, Py_NewRef(Py_None));
            Py_DECREF(item);
        }
        list_empty(PyTuple_GET_ITEM(b, 0));
        ends_empty(PyTuple_GET_ITEM(b, 4));
        return;
    }
    Py_XDECREF(b);
}

/* reader._batch := b (stolen), the old one released. */
static void
set_batch(PyObject *r, Py_ssize_t off, PyObject *b)
{
    PyObject *old = SLOT_AT(r, off);
    SLOT_AT(r, off) = b;
    release_batch(old);
}

/* argv (stolen) to reqs and its end to ends: 0, or -1 with an exception (argv released;
   ends may be one ahead: the caller drops both lists). */
static int
push_request(PyObject *reqs, PyObject *ends, PyObject *argv, long long at)
{
    PyObject *e = end_int(at);
    if (e == NULL) {
        Py_DECREF(argv);
        return -1;
    }
    if (list_push(ends, e) < 0) {
        Py_DECREF(argv);
        return -1;
    }
    return list_push(reqs, argv);
}

/* A *simple* inline request at p: a line ended by LF (one CR before it dropped) whose bytes
   hold no NUL, quote, \v or \f and at least one argument between the separators (space,
   tab, CR). Redis's sdssplitargs and the pure reader split such a line on those bytes
   exactly; anything else (quotes, an empty line, no LF yet, a NUL that hides the LF from
   Redis's strchr) is left to the pure reader. The arguments (new list) with *next past the
   LF, or NULL: not such a line (no exception set), or an exception. */
static PyObject *
inline_request(const char *p, const char *end, const char **next)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL)
        return NULL;
    const char *e = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
    Py_ssize_t n = 0;
    for (const char *c = p; c < e; c++) {
        unsigned char b = (unsigned char)*c;
        if (b == 0 || b == '"' || b == '\'' || b == '\v' || b == '\f')
            return NULL;
        if (b != ' ' && b != '\t' && b != '\r' && (c == p || c[-1] == ' ' || c[-1] == '\t' ||
                                                 c[-1] == '\r'))
            n++;
    }
    if (n == 0)
        return NULL;
    PyObject *argv = untracked(PyList_New(n));
    if (argv == NULL)
        return NULL;
    Py_ssize_t i = 0;
    for (const char *c = p; i < n;) {
        while (*c == ' ' || *c == '\t' || *c == '\r')
            c++;
        const char *t = c;
        while (c < e && *c != ' ' && *c != '\t' && *c != '\r')
            c++;
        PyObject *arg = i ? PyBytes_FromStringAndSize(t, c - t) : name_object(t, c - t);
        if (arg == NULL) {
            Py_DECREF(argv);
            return NULL;
        }
        PyList_SET_ITEM(argv, i++, arg);
    }
    *next = nl + 1;
    return argv;
}

/* The scan over buf[0:len] from pos (see the module doc). Sets *reqs and *ends and *stop, the
   offset in buf where it stopped (the end of the last request taken, or pos); -1 with an
   exception set on failure (a MemoryError). *reqs and *ends come in as empty lists to fill
   (references the scan takes over) or NULL (new lists). */
static int
scan_buffer(const char *buf, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t window,
            Py_ssize_t maxcount, Py_ssize_t maxbulk, long long base, int inline_ok,
            PyObject **reqs_out, PyObject **ends_out, Py_ssize_t *stop_out)
{
    PyObject *reqs = *reqs_out != NULL ? *reqs_out : untracked(PyList_New(0)),
             *ends = *ends_out != NULL ? *ends_out : untracked(PyList_New(0));
    if (reqs == NULL || ends == NULL)
        goto fail;
    const char *end = buf + len, *p = buf + pos;
    const char *stop = (window >= 0 && window < len - pos) ? p + window : end;
    if (inline_ok && p < stop && *p != '*') {   /* an inline batch */
        while (p < stop && *p != '*') {
            const char *q;
            PyObject *argv = inline_request(p, end, &q);
            if (argv == NULL) {
                if (PyErr_Occurred())
                    goto fail;
                break;
            }
            if (push_request(reqs, ends, argv, base + (long long)(q - buf)) < 0)
                goto fail;
            p = q;
        }
        goto out;
    }
    while (p < stop && *p == '*') {
        const char *q;
        long long n = read_number(p + 1, end, &q);
        if (n <= 0 || n > maxcount || (end - q) / 6 < n)
            break;
        PyObject *argv = untracked(PyList_New((Py_ssize_t)n));
        if (argv == NULL)
            goto fail;
        Py_ssize_t i;
        for (i = 0; i < n; i++) {
            const char *d;
            long long blen;
            if (q >= end || *q != '$')
                break;
            blen = read_number(q + 1, end, &d);
            if (blen < 0 || blen > maxbulk || end - d < blen + 2 || d[blen] != '\r' ||
                    d[blen + 1] != '\n')
                break;
            PyObject *arg = i ? PyBytes_FromStringAndSize(d, (Py_ssize_t)blen)
                              : name_object(d, (Py_ssize_t)blen);
            if (arg == NULL) {
                Py_DECREF(argv);
                goto fail;
            }
            PyList_SET_ITEM(argv, i, arg);
            q = d + blen + 2;
        }
        if (i < n) {   /* not canonical or not complete: the pure reader's request */
            Py_DECREF(argv);
            break;
        }
        if (push_request(reqs, ends, argv, base + (long long)(q - buf)) < 0)
            goto fail;
        p = q;
    }
out:
    *reqs_out = reqs;
    *ends_out = ends;
    *stop_out = p - buf;
    return 0;
fail:
    Py_XDECREF(reqs);
    Py_XDECREF(ends);
    return -1;
}

static PyObject *
scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t pos, window, maxcount, maxbulk, stop;
    long long base;
    if (nargs != 7)
        return usage_error("scan(buf, pos, window, maxcount, maxbulk, base, inline) takes 7 "
                           "arguments");
    int inline_ok = PyObject_IsTrue(args[6]);
    if (inline_ok < 0)
        return NULL;
    pos = PyLong_AsSsize_t(args[1]);
    window = PyLong_AsSsize_t(args[2]);
    maxcount = PyLong_AsSsize_t(args[3]);
    maxbulk = PyLong_AsSsize_t(args[4]);
    base = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *reqs = NULL, *ends = NULL, *result = NULL;
    if (pos < 0 || pos > view.len) {
        PyErr_SetString(PyExc_ValueError, "pos out of range");
    } else if (scan_buffer(view.buf, view.len, pos, window, maxcount, maxbulk, base,
                           inline_ok, &reqs, &ends, &stop) == 0) {
        result = PyTuple_Pack(2, reqs, ends);
        Py_DECREF(reqs);
        Py_DECREF(ends);
    }
    PyBuffer_Release(&view);
    return result;
}

/* -- first(reader, data): FastRespReader.feed_first's common case in C -----------------------

   A lone request costs a Python server most where it does least: feed_first's 17 lines of
   slot loads and stores (~350 ns a request) around a 150 ns scan. ``first`` makes the same
   moves on the same slots, read and written at their offsets in the instance (found once by
   ``bind`` from the classes' member descriptors: the layout __slots__ gives), when the
   reader is a FastRespReader whose state is the common one: nothing buffered or pending, or
   the last read all returned. In every other case, and for any other reader, it calls
   ``reader.feed_first(data)``, the Python method that stays the reference (and the general
   path): tests/unit/test_resp_reader.py checks the two leave the same state on any stream. */

enum {
    S_LIMIT, S_BUF, S_BATCH, S_SPENT, S_QUEUE, S_POS, S_REQTYPE, S_ERROR, S_REST, S_FED,
    S_BASE, S_COUNT_MAX, S_BULK_MAX, S_FROM_MASTER, S_CONSUMED, S_N
};
static const char *slot_names[S_N] = {
    "client_query_buffer_limit", "_buf", "_batch", "spent", "queue", "_pos", "_reqtype",
    "_error", "_rest", "_fed", "_base", "_count_max", "_bulk_max", "from_master", "consumed",
};
static Py_ssize_t slot_offset[S_N];
static PyTypeObject *reader_type;     /* FastRespReader, once bound */
static Py_ssize_t scan_window;
static PyObject *str_feed_first, *str_release;
static int bound;   /* bind() ran to its end */

#define SLOT(o, i) SLOT_AT(o, slot_offset[i])

/* bind(cls, base, window): record the slot offsets of cls (FastRespReader), ``consumed``
   taken from base (RespReader: cls shadows it with a property). */
static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const slots_spec specs[2] = {
        {slot_names, S_CONSUMED, slot_offset, (PyObject **)&reader_type},
        {slot_names + S_CONSUMED, 1, slot_offset + S_CONSUMED, NULL},
    };
    int form = nargs == 3 && PyType_Check(args[0]) && PyType_Check(args[1]);
    Py_ssize_t window = form ? PyLong_AsSsize_t(args[2]) : 0;
    if ((window == -1 && PyErr_Occurred()) ||
            bind_args(form, "bind(cls, base, window)", args, specs, 2) < 0 ||
            intern(&str_feed_first, "feed_first") < 0 || intern(&str_release, "release") < 0)
        return NULL;
    scan_window = window;
    bound = 1;
    Py_RETURN_NONE;
}

/* The size of a reader's buffer (bytes or bytearray), or -1 for anything else. */
static Py_ssize_t
buffer_size(PyObject *buf)
{
    if (PyBytes_CheckExact(buf))
        return PyBytes_GET_SIZE(buf);
    if (PyByteArray_CheckExact(buf))
        return PyByteArray_GET_SIZE(buf);
    return -1;
}

static PyObject *
first(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 2, "first(reader, data)");
    PyObject *r = args[0], *data = args[1];
    if (Py_TYPE(r) != reader_type || !PyBytes_CheckExact(data))
        goto general;
    if (!slots_all_set(r, slot_offset, S_N))
        goto general;
    Py_ssize_t len = PyBytes_GET_SIZE(data);
    long long limit = slot_int(SLOT(r, S_LIMIT));
    if (limit < 0 || len > limit)
        goto general;
    PyObject *buf = SLOT(r, S_BUF), *batch = SLOT(r, S_BATCH), *consumed = NULL;
    Py_ssize_t buflen = buffer_size(buf);
    if (buflen < 0)
        goto general;
    if (batch != Py_None) {
        if (SLOT(r, S_SPENT) != Py_True || !PyList_CheckExact(SLOT(r, S_QUEUE)) ||
                PyList_GET_SIZE(SLOT(r, S_QUEUE)) != 0 || !PyTuple_CheckExact(batch) ||
                PyTuple_GET_SIZE(batch) != 5 || !PyList_CheckExact(PyTuple_GET_ITEM(batch, 4)) ||
                PyList_GET_SIZE(PyTuple_GET_ITEM(batch, 4)) == 0)
            goto general;
        PyObject *ends = PyTuple_GET_ITEM(batch, 4);
        consumed = PyList_GET_ITEM(ends, PyList_GET_SIZE(ends) - 1);
    } else if (slot_int(SLOT(r, S_POS)) != buflen || slot_int(SLOT(r, S_REQTYPE)) != 0 ||
               SLOT(r, S_ERROR) != Py_None) {
        goto general;
    }
    long long fed = slot_int(SLOT(r, S_FED)), base = slot_int(SLOT(r, S_BASE));
    long long count_max = slot_int(SLOT(r, S_COUNT_MAX)), bulk_max = slot_int(SLOT(r, S_BULK_MAX));
    PyObject *from_master = SLOT(r, S_FROM_MASTER);
    if (fed < 0 || base < 0 || count_max < 0 || bulk_max < 0 ||
            (from_master != Py_True && from_master != Py_False))
        goto general;
    /* an inline batch (a master's stream has none): no bytes to copy as they arrived */
    int inline_batch = from_master == Py_False && len && PyBytes_AS_STRING(data)[0] != '*';
    /* From here on the moves are feed_first's, in its order. */
    PyObject *reqs = NULL, *ends = NULL, *sp = spare_batch;
    Py_ssize_t stop;
    if (sp != NULL) {   /* the spare's lists, filled by the scan */
        spare_batch = NULL;
        reqs = Py_NewRef(PyTuple_GET_ITEM(sp, 0));
        ends = Py_NewRef(PyTuple_GET_ITEM(sp, 4));
    }
    base += buflen;
    if (scan_buffer(PyBytes_AS_STRING(data), len, 0, scan_window, (Py_ssize_t)count_max,
                    (Py_ssize_t)bulk_max, base, inline_batch, &reqs, &ends, &stop) < 0) {
        Py_XDECREF(sp);   /* (its lists may hold part of the scan) */
        return NULL;   /* (a MemoryError before any slot changed) */
    }
    if (consumed != NULL)
        slot_put(r, slot_offset[S_CONSUMED], consumed);
    slot_put(r, slot_offset[S_REST], Py_False);
    PyObject *result = NULL;
    if (slot_set_int(r, slot_offset[S_FED], fed + len) < 0)
        goto done;
    PyObject *base_obj = PyLong_FromLongLong(base);   /* (the slot's: borrowed below) */
    if (slot_set(r, slot_offset[S_BASE], base_obj) < 0 ||
            slot_set(r, slot_offset[S_POS], PyLong_FromLong(0)) < 0)
        goto done;
    slot_put(r, slot_offset[S_BUF], data);
    Py_ssize_t n = PyList_GET_SIZE(reqs);
    if (n == 0) {
        set_batch(r, slot_offset[S_BATCH], Py_NewRef(Py_None));
        slot_put(r, slot_offset[S_REST], Py_True);
        slot_put(r, slot_offset[S_SPENT], Py_False);
        result = Py_NewRef(Py_None);
        goto done;
    }
    /* queue := reqs[:0:-1]; for a lone request the empty one there stays when no one else
       holds it (a new empty list would be the same to everyone) */
    PyObject *queue = SLOT(r, S_QUEUE);
    if (n == 1 && queue != NULL && PyList_CheckExact(queue) && PyList_GET_SIZE(queue) == 0 &&
            Py_REFCNT(queue) == 1) {
        queue = NULL;
    } else if ((queue = untracked(PyList_New(n - 1))) == NULL) {
        goto done;
    }
    PyObject *new_batch;   /* (reqs, data, base, base, ends); None for data: inline */
    PyObject *win = inline_batch ? Py_None : data;
    if (sp != NULL) {
        new_batch = sp;
        sp = NULL;
        PyObject *items[3] = {win, base_obj, base_obj};
        for (Py_ssize_t i = 1; i < 4; i++) {
            PyObject *none = PyTuple_GET_ITEM(new_batch, i);
            PyTuple_SET_ITEM(new_batch, i, Py_NewRef(items[i - 1]));
            Py_DECREF(none);
        }
    } else if ((new_batch = PyTuple_Pack(5, reqs, win, base_obj, base_obj, ends)) == NULL) {
        Py_XDECREF(queue);
        goto done;
    }
    if (queue != NULL) {
        for (Py_ssize_t i = 1; i < n; i++)   /* reqs[:0:-1] */
            PyList_SET_ITEM(queue, i - 1, Py_NewRef(PyList_GET_ITEM(reqs, n - i)));
        Py_XSETREF(SLOT(r, S_QUEUE), queue);
    }
    set_batch(r, slot_offset[S_BATCH], new_batch);
    slot_put(r, slot_offset[S_SPENT], stop == len ? Py_True : Py_False);
    result = Py_NewRef(PyList_GET_ITEM(reqs, 0));
done:
    Py_XDECREF(sp);
    Py_DECREF(reqs);
    Py_DECREF(ends);
    return result;
general:
    return PyObject_CallMethodOneArg(r, str_feed_first, data);
}

/* release(reader): reader.release(), its common case here: a spent read whose requests
   have all run lets its batch go (kept as the spare, as first() keeps it, so that a pipelined
   read costs no new tuple or lists either) and its bytes, the buffer empty at the read's end:
   consumed = _base = the batch's last end, _pos = 0. Anything else is the method's. */
static PyObject *
release(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 1, "release(reader)");
    PyObject *r = args[0];
    if (Py_TYPE(r) != reader_type || !slots_all_set(r, slot_offset, S_N))
        goto general;
    PyObject *batch = SLOT(r, S_BATCH), *queue = SLOT(r, S_QUEUE);
    if (batch == Py_None || SLOT(r, S_SPENT) != Py_True || !PyList_CheckExact(queue) ||
            PyList_GET_SIZE(queue) != 0)
        goto general;   /* (nothing to let go of: the method says so) */
    if (!PyTuple_CheckExact(batch) || PyTuple_GET_SIZE(batch) != 5)
        goto general;
    PyObject *ends = PyTuple_GET_ITEM(batch, 4);
    if (!PyList_CheckExact(ends) || PyList_GET_SIZE(ends) == 0)
        goto general;
    PyObject *end = Py_NewRef(PyList_GET_ITEM(ends, PyList_GET_SIZE(ends) - 1));
    PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);   /* (the shared b"") */
    if (empty == NULL) {
        Py_DECREF(end);
        return NULL;
    }
    slot_put(r, slot_offset[S_CONSUMED], end);
    set_batch(r, slot_offset[S_BATCH], Py_NewRef(Py_None));
    slot_set(r, slot_offset[S_BUF], empty);
    slot_put(r, slot_offset[S_BASE], end);
    Py_DECREF(end);
    slot_set(r, slot_offset[S_POS], PyLong_FromLong(0));
    Py_RETURN_NONE;
general:
    return PyObject_CallMethodNoArgs(r, str_release);
}

SLOTS_MODULE(_scan, "The request reader's fast path: canonical multibulk requests, parsed in C.",
    FASTCALL("scan", scan,
             "scan(buf, pos, window, maxcount, maxbulk, base) -> (requests, ends): the "
             "canonical multibulk requests complete in buf from pos on (see the module source)."),
    FASTCALL("bind", bind, "bind(cls, base, window): the FastRespReader class whose slots "
             "first() moves."),
    FASTCALL("release", release,
             "release(reader): reader.release(), its common case in C (the batch kept as the "
             "spare)."),
    FASTCALL("first", first,
             "first(reader, data) -> list or None: reader.feed_first(data), its common case in "
             "C."))
