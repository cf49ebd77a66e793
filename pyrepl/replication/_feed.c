/* pyrepl.replication._feed: a client's write into the replication stream, in C when it is
   the common one (master side).

   feed_request(repl, db_id, reader, argv) is ``repl.feed(db_id, argv, reader.raw_last(argv))``
   (pyrepl/replication/manager.py, pyrepl/resp/fastreader.py) with ``Backlog.append``
   (pyrepl/replication/backlog.py) and ``Feeding.stream`` (master/feeding.py) inside it: the
   bytes the request arrived as are copied once, from the reader's window straight into the
   backlog's tail block, the stream's ``master_repl_offset`` (kept once, by Replication) and
   the backlog's ``histlen`` move, and a streaming replica that had been handed everything is
   scheduled for a write. It returns True when it did that, and False, before
   anything moved, when it is not the common case; the caller then runs the Python, which
   stays the reference (tests/unit/test_dispatch.py compares both, replicas streaming).

   The common case: repl, backlog, its tail block, reader, master side (and its feeding),
   replica side and links are exactly Replication, Backlog, Block, FastRespReader, MasterSide
   (Feeding), ReplicaSide, ReplicaLink with a Cursor; we are
   a master (no ``replicaof``); ``db_id`` is the stream's db already (no SELECT); ``argv`` is
   the request the reader returned last (so its bytes are its RESP encoding); they fit in the
   tail block; and no replica waits to be attached at the next byte.

   Why C (bench/RESULTS.md, "The dispatch in C"): with one replica a SET ran ~32 more Python
   lines (flush_propagation, raw_last, feed, append, stream) for one copy and four counters.

   feed_span(repl, db_id, reader, a, b) is ``repl.feed_span(db_id, *reader.raw_ahead(a, b))``:
   a pipelining client's run of writes propagated as they arrived (ServerCore._end_span), one
   slice of the reader's window, in the same common case (tests/unit/test_dispatch.py
   compares it with the Python on random runs, replicas streaming).

   feed_argv(repl, db_id, argv) is ``repl.feed(db_id, argv)`` for a write that propagates as
   other words than its request (XADD's ID, EXPIRE's PEXPIREAT): argv encoded as
   encode_command writes it, into the tail block, in the same common case.

   feed_transaction(repl, db_id, pending) is propagation._flush_transaction's span: a
   transaction's (or a script's) writes, all in one db, between MULTI and EXEC, encoded into
   the tail block at once, in the same common case (test_dispatch's streams compare it with
   Replication.feed_span's pieces).

   feed_raw(repl, data) is ``repl.feed_raw(data)``, a replica passing on what it applied from
   its master (replica/stream.py), the same moves in the same common case (bytes that fit in
   the tail block, nobody to attach); False, nothing moved, sends it to the Python too
   (tests/unit/test_repl_replica.py compares the two on random streams, sub-replicas on). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MODULE_NAME "pyrepl.replication._feed"
#include "../_slots.h"

/* bind()'s arguments: the classes whose slots the feeds move (below, in this order). */
#define BIND_USAGE "bind(Replication, Backlog, Block, FastRespReader, MasterSide, " \
                   "Feeding, ReplicaLink, Cursor, ReplicaSide)"

enum { R_BACKLOG, R_STREAM_DB, R_OFFSET, R_MASTER, R_REPLICA, R_N };
static const char *const repl_names[R_N] = {
    "backlog", "stream_db", "master_repl_offset", "master", "replica",
};

enum { B_TAIL, B_HISTLEN, B_UNATTACHED, B_N };
static const char *const backlog_names[B_N] = {"tail", "histlen", "_unattached"};

enum { K_BUF, K_SIZE, K_USED, K_N };
static const char *const block_names[K_N] = {"buf", "size", "used"};

enum { Q_QUEUE, Q_BATCH, Q_N };
static const char *const reader_names[Q_N] = {"queue", "_batch"};

enum { M_FEEDING, M_N };
static const char *const master_names[M_N] = {"feeding"};

enum { F_CORE, F_STREAMING, F_N };
static const char *const feeding_names[F_N] = {"core", "streaming"};

enum { L_CLIENT, L_REF, L_N };
static const char *const link_names[L_N] = {"client", "ref"};

enum { U_SENT, U_N };
static const char *const cursor_names[U_N] = {"sent"};

enum { H_MASTER_HOST, H_N };
static const char *const replica_names[H_N] = {"master_host"};

static Py_ssize_t repl_off[R_N], backlog_off[B_N], block_off[K_N], reader_off[Q_N],
                  master_off[M_N], feeding_off[F_N], link_off[L_N], cursor_off[U_N],
                  replica_off[H_N];
static PyTypeObject *repl_type, *backlog_type, *block_type, *reader_type, *master_type,
                    *feeding_type, *link_type, *cursor_type, *replica_type;
static PyObject *str_pending_flush;
static int bound;   /* bind() ran to its end */

#define AT(o, offs, i) SLOT_AT(o, offs[i])

static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const slots_spec specs[9] = {
        SLOTS_OF(repl), SLOTS_OF(backlog), SLOTS_OF(block), SLOTS_OF(reader), SLOTS_OF(master),
        SLOTS_OF(feeding), SLOTS_OF(link), SLOTS_OF(cursor), SLOTS_OF(replica),
    };
    if (bind_args(nargs == 9, BIND_USAGE, args, specs, 9) < 0 ||
            intern(&str_pending_flush, "pending_flush") < 0)
        return NULL;
    bound = 1;
    Py_RETURN_NONE;
}

/* A non-negative int that fits in a Py_ssize_t, or -1. */
static inline Py_ssize_t
ssize(PyObject *v)
{
    long long x = slot_int(v);
    return x > PY_SSIZE_T_MAX ? -1 : (Py_ssize_t)x;
}

/* Backlog.append of n bytes at p and Feeding.stream, with repl.master_repl_offset moved
   first (repl, backlog and feeding of their exact types, slots set): 1 when done; 0, before
   anything moved, when it is not the common case (nothing to append, more than the tail
   block takes, a replica to attach at the next byte, a link not a ReplicaLink with a
   Cursor); -1 on an exception. */
static int
append_stream(PyObject *repl, PyObject *backlog, PyObject *feeding, const char *p,
              Py_ssize_t n)
{
    /* Backlog.append: n bytes that fit in the tail block, nobody to attach */
    PyObject *tail = AT(backlog, backlog_off, B_TAIL),
             *unattached = AT(backlog, backlog_off, B_UNATTACHED);
    if (n == 0 || Py_TYPE(tail) != block_type || !slots_all_set(tail, block_off, K_N) ||
            !PyList_CheckExact(unattached) || PyList_GET_SIZE(unattached))
        return 0;
    PyObject *buf = AT(tail, block_off, K_BUF);
    Py_ssize_t size = ssize(AT(tail, block_off, K_SIZE)), used = ssize(AT(tail, block_off, K_USED));
    if (!PyByteArray_CheckExact(buf) || size < 0 || used < 0 || used + n > size ||
            PyByteArray_GET_SIZE(buf) < size)
        return 0;
    /* Feeding.stream's links: each a ReplicaLink with a Cursor */
    PyObject *streaming = AT(feeding, feeding_off, F_STREAMING);
    if (!PyList_CheckExact(streaming))
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(streaming); i++) {
        PyObject *link = PyList_GET_ITEM(streaming, i), *ref;
        if (Py_TYPE(link) != link_type || !slots_all_set(link, link_off, L_N) ||
                Py_TYPE(ref = AT(link, link_off, L_REF)) != cursor_type ||
                !slots_all_set(ref, cursor_off, U_N))
            return 0;
    }
    PyObject *before = AT(repl, repl_off, R_OFFSET);
    if (!PyLong_CheckExact(before))
        return 0;
    /* -- the moves: the offset, the copy, the backlog's histlen, the links -- */
    Py_INCREF(before);
    Py_INCREF(streaming);
    int result = -1;
    PyObject *by = PyLong_FromSsize_t(n);
    if (by == NULL || slot_set(repl, repl_off[R_OFFSET], PyNumber_Add(before, by)) < 0)
        goto done;
    memcpy(PyByteArray_AS_STRING(buf) + used, p, n);
    if (slot_set_int(tail, block_off[K_USED], used + n) < 0 ||
            slot_add(backlog, backlog_off[B_HISTLEN], n) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(streaming); i++) {
        PyObject *link = PyList_GET_ITEM(streaming, i);
        PyObject *sent = AT(AT(link, link_off, L_REF), cursor_off, U_SENT);
        int same = sent == NULL ? -1 : PyObject_RichCompareBool(sent, before, Py_EQ);
        if (same < 0) {
            if (sent == NULL)
                PyErr_SetString(PyExc_AttributeError, "sent");
            goto done;
        }
        if (same) {   /* self.core.pending_flush.append(link.client) */
            PyObject *pending = PyObject_GetAttr(AT(feeding, feeding_off, F_CORE),
                                                 str_pending_flush);
            if (pending == NULL)
                goto done;
            int rc = seq_append(pending, AT(link, link_off, L_CLIENT));
            Py_DECREF(pending);
            if (rc < 0)
                goto done;
        }
    }
    result = 1;
done:
    Py_XDECREF(by);
    Py_DECREF(streaming);
    Py_DECREF(before);
    return result;
}

/* The backlog and the master side's feeding of repl (a Replication, slots set), of their
   exact types, slots set: 1 with *backlog and *feeding set (borrowed), 0 when they are not. */
static int
stream_parts(PyObject *repl, PyObject **backlog, PyObject **feeding)
{
    PyObject *b = AT(repl, repl_off, R_BACKLOG), *m = AT(repl, repl_off, R_MASTER), *f;
    if (Py_TYPE(b) != backlog_type || !slots_all_set(b, backlog_off, B_N) ||
            Py_TYPE(m) != master_type || !slots_all_set(m, master_off, M_N) ||
            Py_TYPE(f = AT(m, master_off, M_FEEDING)) != feeding_type ||
            !slots_all_set(f, feeding_off, F_N))
        return 0;
    *backlog = b;
    *feeding = f;
    return 1;
}

/* Replication.feed's common case, checked (repl, backlog, master side, its feeding and the
   replica side of their exact types, slots set; a master; db_id the stream's db already): 1
   with *backlog and *feeding set (borrowed), 0 when it is not. */
static int
master_at_db(PyObject *repl, PyObject *db_id, PyObject **backlog, PyObject **feeding)
{
    if (Py_TYPE(repl) != repl_type || !slots_all_set(repl, repl_off, R_N) ||
            !stream_parts(repl, backlog, feeding))
        return 0;
    long long db = slot_int(db_id), stream_db = slot_int(AT(repl, repl_off, R_STREAM_DB));
    if (db < 0 || db != stream_db)
        return 0;
    PyObject *replica = AT(repl, repl_off, R_REPLICA);
    if (Py_TYPE(replica) != replica_type || !slots_all_set(replica, replica_off, H_N) ||
            AT(replica, replica_off, H_MASTER_HOST) != Py_None)
        return 0;
    return 1;
}

/* Where requests a to b - 1 arrived, counted from the one gets() returned last (0), as
   FastRespReader.raw_ahead (0 <= a < b): 1 with [*p, *p + *n) set (inside the reader's
   window) and *last the request gets() returned last (borrowed); 0 when the reader is not a
   FastRespReader with such a batch out. */
static int
batch_bytes(PyObject *reader, Py_ssize_t a, Py_ssize_t b, const char **p, Py_ssize_t *n,
            PyObject **last)
{
    if (Py_TYPE(reader) != reader_type || !slots_all_set(reader, reader_off, Q_N))
        return 0;
    PyObject *batch = AT(reader, reader_off, Q_BATCH), *queue = AT(reader, reader_off, Q_QUEUE);
    if (!PyTuple_CheckExact(batch) || PyTuple_GET_SIZE(batch) != 5 || !PyList_CheckExact(queue))
        return 0;
    PyObject *reqs = PyTuple_GET_ITEM(batch, 0), *win = PyTuple_GET_ITEM(batch, 1),
             *ends = PyTuple_GET_ITEM(batch, 4);
    Py_ssize_t wbase = ssize(PyTuple_GET_ITEM(batch, 2)),
               start = ssize(PyTuple_GET_ITEM(batch, 3));
    if (!PyList_CheckExact(reqs) || !PyBytes_CheckExact(win) || !PyList_CheckExact(ends) ||
            wbase < 0 || start < 0)
        return 0;
    Py_ssize_t k = PyList_GET_SIZE(reqs) - PyList_GET_SIZE(queue) - 1,   /* the last's index */
               i = k + a, j = k + b;
    if (k < 0 || a < 0 || j <= i || j > PyList_GET_SIZE(ends) || j > PyList_GET_SIZE(reqs))
        return 0;
    Py_ssize_t lo = i ? ssize(PyList_GET_ITEM(ends, i - 1)) : start,
               hi = ssize(PyList_GET_ITEM(ends, j - 1));
    if (lo < wbase || hi < lo || hi - wbase > PyBytes_GET_SIZE(win))
        return 0;
    *p = PyBytes_AS_STRING(win) + (lo - wbase);
    *n = hi - lo;
    *last = PyList_GET_ITEM(reqs, k);
    return 1;
}

static PyObject *
feed_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 4, "feed_request(repl, db_id, reader, argv)");
    PyObject *backlog, *feeding, *last;
    const char *p;
    Py_ssize_t n;
    /* FastRespReader.raw_last: argv is the request gets() returned last */
    if (!master_at_db(args[0], args[1], &backlog, &feeding) ||
            !batch_bytes(args[2], 0, 1, &p, &n, &last) || last != args[3])
        Py_RETURN_FALSE;
    int fed = append_stream(args[0], backlog, feeding, p, n);
    return fed < 0 ? NULL : PyBool_FromLong(fed);
}

/* feed_span(repl, db_id, reader, a, b): ``repl.feed_span(db_id, *reader.raw_ahead(a, b))``
   (a pipelining client's run of writes propagated as they arrived: ServerCore._end_span)
   when it all goes into the tail block at once: True; False, before anything moved,
   otherwise (a new block, a SELECT first, ...: Replication.feed_span, the reference). */
static PyObject *
feed_span(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 5, "feed_span(repl, db_id, reader, a, b)");
    PyObject *backlog, *feeding, *last;
    Py_ssize_t a = PyLong_AsSsize_t(args[3]), b = PyLong_AsSsize_t(args[4]), n;
    const char *p;
    if ((a == -1 || b == -1) && PyErr_Occurred())
        return NULL;
    if (!master_at_db(args[0], args[1], &backlog, &feeding) ||
            !batch_bytes(args[2], a, b, &p, &n, &last))
        Py_RETURN_FALSE;
    int fed = append_stream(args[0], backlog, feeding, p, n);
    return fed < 0 ? NULL : PyBool_FromLong(fed);
}

/* feed_argv(repl, db_id, argv): ``repl.feed(db_id, argv)`` for a write the core propagates as
   other words than its request (XADD's ID, EXPIRE's PEXPIREAT, ...): argv, a list of bytes,
   encoded as encode_command writes it (a RESP array of bulk strings) straight into the tail
   block, in append_stream's common case: True; False, before anything moved, otherwise. */
/* The most argv's encoding takes (a non-empty list of bytes), or -1 when it is not one. */
static Py_ssize_t
argv_room(PyObject *argv)
{
    if (!PyList_CheckExact(argv) || PyList_GET_SIZE(argv) == 0)
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(argv), size = 24;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyList_GET_ITEM(argv, i);
        if (!PyBytes_CheckExact(a))
            return -1;
        size += PyBytes_GET_SIZE(a) + 24;   /* "$<len>\r\n" <bytes> "\r\n" */
    }
    return size;
}

/* argv (checked by argv_room) encoded at o as encode_command writes it: past its end. */
static char *
put_argv(char *o, PyObject *argv)
{
    Py_ssize_t n = PyList_GET_SIZE(argv);
    o += resp_header(o, '*', n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyList_GET_ITEM(argv, i);
        Py_ssize_t len = PyBytes_GET_SIZE(a);
        o += resp_header(o, '$', len);
        memcpy(o, PyBytes_AS_STRING(a), len);
        o += len;
        *o++ = '\r';
        *o++ = '\n';
    }
    return o;
}

static PyObject *
feed_argv(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 3, "feed_argv(repl, db_id, argv)");
    PyObject *backlog, *feeding, *argv = args[2];
    Py_ssize_t size = argv_room(argv);
    if (size < 0 || !master_at_db(args[0], args[1], &backlog, &feeding))
        Py_RETURN_FALSE;
    char small[512], *buf = size <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc(size);
    if (buf == NULL)
        return PyErr_NoMemory();
    char *o = put_argv(buf, argv);
    int fed = append_stream(args[0], backlog, feeding, buf, o - buf);
    if (buf != small)
        PyMem_Free(buf);
    return fed < 0 ? NULL : PyBool_FromLong(fed);
}

static const char MULTI[] = "*1\r\n$5\r\nMULTI\r\n", EXEC[] = "*1\r\n$4\r\nEXEC\r\n";

/* feed_transaction(repl, db_id, pending): propagation._flush_transaction's span, the core's
   pending writes (a list of (db_id, argv), all in db_id) between MULTI and EXEC, encoded
   straight into the tail block in append_stream's common case: True; False, before anything
   moved, otherwise (Replication.feed_span then cuts them where blocks end). */
static PyObject *
feed_transaction(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 3, "feed_transaction(repl, db_id, pending)");
    PyObject *backlog, *feeding, *pending = args[2];
    long long db = slot_int(args[1]);
    if (!PyList_CheckExact(pending) || !master_at_db(args[0], args[1], &backlog, &feeding))
        Py_RETURN_FALSE;
    Py_ssize_t n = PyList_GET_SIZE(pending), size = sizeof MULTI + sizeof EXEC;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(pending, i);
        Py_ssize_t room;
        if (!PyTuple_CheckExact(p) || PyTuple_GET_SIZE(p) != 2 ||
                slot_int(PyTuple_GET_ITEM(p, 0)) != db ||
                (room = argv_room(PyTuple_GET_ITEM(p, 1))) < 0)
            Py_RETURN_FALSE;
        size += room;
    }
    char small[1024], *buf = size <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc(size);
    if (buf == NULL)
        return PyErr_NoMemory();
    memcpy(buf, MULTI, sizeof MULTI - 1);
    char *o = buf + sizeof MULTI - 1;
    for (Py_ssize_t i = 0; i < n; i++)
        o = put_argv(o, PyTuple_GET_ITEM(PyList_GET_ITEM(pending, i), 1));
    memcpy(o, EXEC, sizeof EXEC - 1);
    o += sizeof EXEC - 1;
    int fed = append_stream(args[0], backlog, feeding, buf, o - buf);
    if (buf != small)
        PyMem_Free(buf);
    return fed < 0 ? NULL : PyBool_FromLong(fed);
}

/* feed_raw(repl, data): ``repl.feed_raw(data)`` (a replica passing on the bytes it applied
   from its master: the same offsets, no SELECT of its own), True; False, before anything
   moved, when it is not append_stream's common case or there is no backlog. */
static PyObject *
feed_raw(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 2, "feed_raw(repl, data)");
    PyObject *repl = args[0], *data = args[1];
    if (Py_TYPE(repl) != repl_type || !slots_all_set(repl, repl_off, R_N) ||
            !PyBytes_CheckExact(data))
        Py_RETURN_FALSE;
    PyObject *backlog, *feeding;
    if (!stream_parts(repl, &backlog, &feeding))
        Py_RETURN_FALSE;
    int fed = append_stream(repl, backlog, feeding, PyBytes_AS_STRING(data),
                            PyBytes_GET_SIZE(data));
    return fed < 0 ? NULL : PyBool_FromLong(fed);
}

SLOTS_MODULE(_feed, "A client's write into the replication stream, in C when it is the common one.",
    FASTCALL("bind", bind, BIND_USAGE ": the classes whose slots the feeds move."),
    FASTCALL("feed_request", feed_request,
             "feed_request(repl, db_id, reader, argv): repl.feed(db_id, argv, "
             "reader.raw_last(argv)) in its common case, True; False (nothing done) otherwise."),
    FASTCALL("feed_span", feed_span,
             "feed_span(repl, db_id, reader, a, b): repl.feed_span(db_id, *reader.raw_ahead(a, "
             "b)) when it all goes into the tail block, True; False (nothing done) otherwise."),
    FASTCALL("feed_argv", feed_argv,
             "feed_argv(repl, db_id, argv): repl.feed(db_id, argv) in its common case (argv "
             "encoded into the tail block), True; False (nothing done) otherwise."),
    FASTCALL("feed_transaction", feed_transaction,
             "feed_transaction(repl, db_id, pending): the pending writes between MULTI and "
             "EXEC into the tail block, True; False (nothing done) otherwise."),
    FASTCALL("feed_raw", feed_raw, "feed_raw(repl, data): repl.feed_raw(data) in its common "
             "case, True; False (nothing done) otherwise."))
