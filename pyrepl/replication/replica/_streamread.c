/* pyrepl.replication.replica._streamread: a replica's read of its master's stream, in C when
   it is the common one.

   on_data(side, token, data) is ``ReplicaSide.on_data(token, data)`` (replica/side.py) with
   what it calls for a read while CONNECTED inside it: ``_receive``'s move DATA and
   ``_read_stream``, ``Stream.stream``'s move STREAM, counters and offsets,
   ``Stream.apply_commands``' loop over the read's requests, ``Stream.feed_applied`` (what was
   applied, passed on to the backlog and the sub-replicas) and the read's tail
   (``after_read``). The same moves in the same order on the same slots (read and written at
   their offsets: pyrepl/_slots.h). Both moves are the transition table's: the entries
   (CONNECTED, DATA) and (CONNECTED, STREAM) are looked up in ``TRANSITIONS`` on every read
   and must say CONNECTED, as ``fsm.step`` would find. The commands run where they always
   run: ``execute`` (ServerCore.execute, its common case in C: pyrepl/_dispatch.c), and a run
   of plain commands through the Python ``Stream.apply_batch``; a request the reader refuses
   goes to ``Stream.reader_failed``, a ReplProtocolError to ``ReplicaSide.protocol_failed``,
   each exactly where the Python loop calls them.

   The common case: side, stream, channel, master state, client, core, stats and reader are
   exactly ReplicaSide, Stream, Channel, MasterState, Client, ServerCore, Stats and
   FastRespReader; the token is the side's; the data is bytes; the side is CONNECTED with no
   partial line kept and no caught_up event due; no full-sync buffer (the rdb channel's) holds
   the stream; the master client is not postponed by CLIENT PAUSE and has nothing read and
   not applied. Anything else calls ``ReplicaSide.on_data``, which stays the reference
   (tests/unit/test_streamread.py drives both on the same random streams and compares the
   datasets, every offset and counter, and the bytes passed on).

   Why C (bench/RESULTS.md, "A replica's read in C"): a read of one SET cost ~26,000
   instructions, ten Python frames (on_data, _receive, two moves, _read_stream, stream,
   apply_commands, consumed_now, feed_applied) around a dispatch of ~3,000. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MODULE_NAME "pyrepl.replication.replica._streamread"
#include "../../_slots.h"
#include "../../keyspace/_ktable.h"

#define BIND_USAGE "bind(ReplicaSide, Stream, Channel, MasterState, Client, ServerCore, " \
                   "Stats, FastRespReader, RespReader, CONNECTED, DATA, STREAM, TRANSITIONS, " \
                   "ReplProtocolError, ProtocolError, execute, first, release, feed_raw, write_aof, " \
                   "Database)"

enum { S_CORE, S_STATE, S_TOKEN, S_INBUF, S_AWAIT, S_STREAM, S_CHANNEL, S_N };
static const char *const side_names[S_N] = {
    "core", "state", "token", "_inbuf", "_await_caught_up", "stream", "channel",
};

enum { T_CORE, T_MANAGER, T_MASTER, T_N };
static const char *const stream_names[T_N] = {"core", "manager", "master"};

enum { H_FSBUF, H_N };
static const char *const channel_names[H_N] = {"fsbuf"};

enum { M_CLIENT, M_REPLOFF, M_READ_REPLOFF, M_READER_BASE, M_FED, M_UNAPPLIED, M_READ, M_N };
static const char *const ms_names[M_N] = {
    "client", "reploff", "read_reploff", "reader_base", "fed", "unapplied", "read",
};

enum { C_NET_IN, C_LAST_INTERACTION, C_READER, C_BLOCKED, C_OUT, C_IN_MULTI, C_DB, C_N };
static const char *const client_names[C_N] = {
    "net_in", "last_interaction_ms", "reader", "blocked", "out", "in_multi", "db",
};

enum { K_STATS, K_NOW_MS, K_APPLYING, K_AOF_ON, K_N };
static const char *const core_names[K_N] = {"stats", "now_ms", "applying_master_stream",
                                            "aof_on"};

enum { X_REPL_IN, X_N };
static const char *const stats_names[X_N] = {"net_repl_input_bytes"};

enum { R_QUEUE, R_BATCH, R_SPENT, R_N };
static const char *const reader_names[R_N] = {"queue", "_batch", "spent"};

/* the base class's slot (FastRespReader makes ``consumed`` a property over it) */
enum { B_CONSUMED, B_N };
static const char *const base_names[B_N] = {"consumed"};

/* a database's tables, for the prefetch of a read's keys (keyspace/_ktable.h) */
enum { D_DATA, D_EXPIRES, D_N };
static const char *const database_names[D_N] = {"data", "expires"};
static Py_ssize_t database_off[D_N];
static PyTypeObject *database_type;
static KTable_CAPI *kt;   /* NULL: no prefetch */

static Py_ssize_t side_off[S_N], stream_off[T_N], channel_off[H_N], ms_off[M_N],
                  client_off[C_N], core_off[K_N], stats_off[X_N], reader_off[R_N],
                  base_off[B_N];
static PyTypeObject *side_type, *stream_type, *channel_type, *ms_type, *client_type,
                    *core_type, *stats_type, *reader_type, *base_type;
static PyObject *connected, *in_data, *in_stream, *transitions;
static PyObject *repl_protocol_error, *protocol_error;
static PyObject *py_execute, *py_first, *py_release, *py_feed_raw, *py_write_aof;
static PyObject *py_on_data;   /* ReplicaSide.on_data: the reference */
static PyObject *key_data, *key_stream;   /* (CONNECTED, DATA), (CONNECTED, STREAM) */
static PyObject *str_apply_batch, *str_reader_failed, *str_protocol_failed, *str_after_read,
                *str_feed_applied, *str_feed_raw, *str_consumed_now, *str_gets, *str_clear;
static int bound;

#define SIDE(i) SLOT_AT(side, side_off[i])
#define MS(i) SLOT_AT(ms, ms_off[i])
#define CL(i) SLOT_AT(c, client_off[i])
#define RD(i) SLOT_AT(reader, reader_off[i])

static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const slots_spec specs[21] = {
        SLOTS_OF(side), SLOTS_OF(stream), SLOTS_OF(channel), SLOTS_OF(ms), SLOTS_OF(client),
        SLOTS_OF(core), SLOTS_OF(stats), SLOTS_OF(reader), SLOTS_OF(base), KEPT(&connected),
        KEPT(&in_data), KEPT(&in_stream), KEPT(&transitions), KEPT(&repl_protocol_error),
        KEPT(&protocol_error), KEPT(&py_execute), KEPT(&py_first), KEPT(&py_release),
        KEPT(&py_feed_raw), KEPT(&py_write_aof), SLOTS_OF(database),
    };
    if (bind_args(nargs == 21 && PyDict_Check(args[12]), BIND_USAGE, args, specs, 21) < 0 ||
            keep_attr(&py_on_data, args[0], "on_data") ||
            intern(&str_apply_batch, "apply_batch") ||
            intern(&str_reader_failed, "reader_failed") ||
            intern(&str_protocol_failed, "protocol_failed") ||
            intern(&str_after_read, "after_read") || intern(&str_feed_applied, "feed_applied") ||
            intern(&str_feed_raw, "feed_raw") || intern(&str_consumed_now, "consumed_now") ||
            intern(&str_gets, "gets") || intern(&str_clear, "clear"))
        return NULL;
    PyObject *kd = PyTuple_Pack(2, connected, in_data), *ks = PyTuple_Pack(2, connected,
                                                                            in_stream);
    if (kd == NULL || ks == NULL) {
        Py_XDECREF(kd);
        Py_XDECREF(ks);
        return NULL;
    }
    Py_XSETREF(key_data, kd);
    Py_XSETREF(key_stream, ks);
    kt = ktable_capi_or_null();   /* (without it: no prefetch) */
    bound = 1;
    Py_RETURN_NONE;
}

/* f(a, b, ...): a vectorcall of n arguments (args[0] free for the offset; new reference). */
static inline PyObject *
call_n(PyObject *f, PyObject **args, size_t n)
{
    return PyObject_Vectorcall(f, args + 1, n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* o.name(args...) (args[0] is o; new reference). */
static inline PyObject *
call_method(PyObject *name, PyObject **args, size_t n)
{
    return PyObject_VectorcallMethod(name, args, n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* Drop a call's result: 0, or -1 when it failed. */
static inline int
done(PyObject *r)
{
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* The move (CONNECTED, input) the table holds is CONNECTED: 1, 0 (another entry or none:
   the Python moves, and raises, itself), -1 on an exception. */
static int
stays_connected(PyObject *key)
{
    PyObject *next = PyDict_GetItemWithError(transitions, key);
    if (next == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return next == connected;
}

/* reader.consumed_now() (fastreader.py): new reference. */
static PyObject *
consumed_now(PyObject *reader)
{
    PyObject *batch = RD(R_BATCH), *queue = RD(R_QUEUE);
    if (batch == Py_None) {
        PyObject *v = SLOT_AT(reader, base_off[B_CONSUMED]);
        if (v != NULL)
            return Py_NewRef(v);
    } else if (batch != NULL && queue != NULL && PyTuple_CheckExact(batch) &&
               PyTuple_GET_SIZE(batch) == 5 && PyList_CheckExact(queue)) {
        PyObject *ends = PyTuple_GET_ITEM(batch, 4);
        if (PyList_CheckExact(ends)) {
            Py_ssize_t i = PyList_GET_SIZE(ends) - PyList_GET_SIZE(queue) - 1;
            if (i >= 0 && i < PyList_GET_SIZE(ends))
                return Py_NewRef(PyList_GET_ITEM(ends, i));
        }
    }
    PyObject *args[1] = {reader};
    return call_method(str_consumed_now, args, 1);
}

/* ms.reploff = ms.reader_base + reader.consumed_now(); -1 on an exception. */
static int
set_reploff(PyObject *ms, PyObject *reader)
{
    PyObject *consumed = consumed_now(reader), *base = MS(M_READER_BASE);
    if (consumed == NULL)
        return -1;
    long long a = slot_int(base), b = slot_int(consumed);
    int rc;
    if (a >= 0 && b >= 0 && a <= LLONG_MAX - b) {
        rc = slot_set_int(ms, ms_off[M_REPLOFF], a + b);
    } else if (base == NULL) {
        PyErr_SetString(PyExc_AttributeError, "reader_base");
        rc = -1;
    } else {
        rc = slot_set(ms, ms_off[M_REPLOFF], PyNumber_Add(base, consumed));
    }
    Py_DECREF(consumed);
    return rc;
}

/* Stream.apply_commands(ms, c, reader, core, argv): argv a new reference (stolen), None for
   "the next one". 0 when the loop ends, -1 on an exception. */
static int
apply(PyObject *stream, PyObject *ms, PyObject *c, PyObject *reader, PyObject *core,
      PyObject *argv)
{
    int rc = -1;
    for (;;) {
        if (argv == Py_None) {
            PyObject *queue = RD(R_QUEUE), *spent = RD(R_SPENT);
            if (queue == NULL || spent == NULL || !PyList_CheckExact(queue)) {
                PyErr_SetString(PyExc_TypeError, "the reader's queue is not a list");
                goto out;
            }
            Py_ssize_t queued = PyList_GET_SIZE(queue);
            int is_spent = PyObject_IsTrue(spent);
            if (is_spent < 0)
                goto out;
            if (is_spent && !queued) {   /* the read all run: its requests go */
                PyObject *args[2] = {NULL, reader};
                rc = done(call_n(py_release, args, 1));
                goto out;
            }
            Py_DECREF(argv);
            if (queued) {   /* reader.gets(): the queue's last */
                argv = Py_NewRef(PyList_GET_ITEM(queue, queued - 1));
                if (PyList_SetSlice(queue, queued - 1, queued, NULL) < 0) {
                    Py_DECREF(argv);
                    return -1;
                }
            } else {
                PyObject *args[1] = {reader};
                argv = call_method(str_gets, args, 1);
                if (argv == NULL) {
                    if (!PyErr_ExceptionMatches(protocol_error))
                        return -1;
                    PyObject *e = PyErr_GetRaisedException();
                    PyObject *fargs[4] = {stream, ms, c, e};
                    rc = done(call_method(str_reader_failed, fargs, 4));
                    Py_DECREF(e);
                    return rc;
                }
            }
            if (argv == Py_None) {
                rc = 0;
                goto out;
            }
        }
        PyObject *rest = RD(R_QUEUE);
        if (rest == NULL || !PyList_CheckExact(rest)) {
            PyErr_SetString(PyExc_TypeError, "the reader's queue is not a list");
            goto out;
        }
        if (PyList_GET_SIZE(rest)) {   /* a run of plain commands, at once? */
            Py_INCREF(rest);
            PyObject *args[6] = {stream, ms, c, reader, argv, rest};
            PyObject *r = call_method(str_apply_batch, args, 6);
            Py_DECREF(rest);
            int ran = r == NULL ? -1 : PyObject_IsTrue(r);
            Py_XDECREF(r);
            if (ran < 0)
                goto out;
            if (ran) {
                if (SLOT_AT(stream, stream_off[T_MASTER]) != ms) {
                    rc = 0;
                    goto out;
                }
                Py_SETREF(argv, Py_NewRef(Py_None));
                continue;
            }
        }
        /* core.execute (its common case in C); an error reply comes back through
           propagation_error */
        PyObject *eargs[4] = {NULL, core, c, argv};
        if (done(call_n(py_execute, eargs, 3)) < 0)
            goto out;
        Py_SETREF(argv, Py_NewRef(Py_None));
        PyObject *out = CL(C_OUT);
        if (out == NULL) {
            PyErr_SetString(PyExc_AttributeError, "out");
            goto out;
        }
        if (PyList_CheckExact(out)) {
            if (PyList_GET_SIZE(out) && PyList_SetSlice(out, 0, PyList_GET_SIZE(out), NULL) < 0)
                goto out;
        } else {
            int full = PyObject_IsTrue(out);
            PyObject *args[1] = {out};
            if (full < 0 || (full && done(call_method(str_clear, args, 1)) < 0))
                goto out;
        }
        PyObject *blocked = CL(C_BLOCKED), *in_multi = CL(C_IN_MULTI);
        if (blocked != Py_None) {   /* postponed by CLIENT PAUSE: reploff stays before it */
            rc = 0;
            goto out;
        }
        if (in_multi == NULL) {
            PyErr_SetString(PyExc_AttributeError, "in_multi");
            goto out;
        }
        int multi = PyObject_IsTrue(in_multi);
        if (multi < 0 || (!multi && set_reploff(ms, reader) < 0))
            goto out;
        if (SLOT_AT(stream, stream_off[T_MASTER]) != ms) {   /* the command dropped the link */
            rc = 0;
            goto out;
        }
    }
out:
    Py_DECREF(argv);
    return rc;
}

/* Stream.feed_applied(ms): the bytes applied since the last call, (fed, reploff], passed on
   (manager.feed_raw, its common case in C: pyrepl/replication/_feed.c). -1 on an exception. */
static int
feed_applied(PyObject *stream, PyObject *ms)
{
    PyObject *read = MS(M_READ), *unapplied = MS(M_UNAPPLIED);
    long long reploff = slot_int(MS(M_REPLOFF)), fed = slot_int(MS(M_FED));
    if (reploff < 0 || fed < 0 || read == NULL || unapplied == NULL ||
            !PyByteArray_CheckExact(unapplied) || (read != Py_None && !PyBytes_CheckExact(read)) ||
            (read != Py_None && reploff - fed > PyBytes_GET_SIZE(read))) {
        PyObject *args[2] = {stream, ms};   /* (not the common case: the Python) */
        return done(call_method(str_feed_applied, args, 2));
    }
    long long applied = reploff - fed;
    PyObject *chunk = NULL;
    if (read != Py_None) {   /* (the buffer was empty: the read's bytes, applied first) */
        Py_INCREF(read);
        slot_put(ms, ms_off[M_READ], Py_None);
        Py_ssize_t n = PyBytes_GET_SIZE(read);
        if (applied < n) {   /* what is left waits in the buffer */
            Py_ssize_t from = applied > 0 ? (Py_ssize_t)applied : 0;
            Py_ssize_t have = PyByteArray_GET_SIZE(unapplied);
            if (PyByteArray_Resize(unapplied, have + n - from) < 0) {
                Py_DECREF(read);
                return -1;
            }
            memcpy(PyByteArray_AS_STRING(unapplied) + have, PyBytes_AS_STRING(read) + from,
                   (size_t)(n - from));
        }
        if (applied <= 0) {
            Py_DECREF(read);
            return 0;
        }
        if (applied == n) {
            chunk = read;
        } else {
            chunk = PyBytes_FromStringAndSize(PyBytes_AS_STRING(read), (Py_ssize_t)applied);
            Py_DECREF(read);
            if (chunk == NULL)
                return -1;
        }
    } else {
        if (applied <= 0)
            return 0;
        if (applied > PyByteArray_GET_SIZE(unapplied)) {   /* (as the Python's slice) */
            PyObject *args[2] = {stream, ms};
            return done(call_method(str_feed_applied, args, 2));
        }
        chunk = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(unapplied), (Py_ssize_t)applied);
        if (chunk == NULL || PySequence_DelSlice(unapplied, 0, (Py_ssize_t)applied) < 0) {
            Py_XDECREF(chunk);
            return -1;
        }
    }
    slot_put(ms, ms_off[M_FED], MS(M_REPLOFF));
    PyObject *m = SLOT_AT(stream, stream_off[T_MANAGER]);
    Py_INCREF(m);
    int fed_c = 0;
    if (py_feed_raw != Py_None) {
        PyObject *args[3] = {NULL, m, chunk};
        PyObject *r = call_n(py_feed_raw, args, 2);
        fed_c = r == NULL ? -1 : PyObject_IsTrue(r);
        Py_XDECREF(r);
    }
    if (fed_c == 0) {
        PyObject *args[2] = {m, chunk};
        fed_c = done(call_method(str_feed_raw, args, 2));
    }
    Py_DECREF(m);
    Py_DECREF(chunk);
    return fed_c < 0 ? -1 : 0;
}

/* stream.py's write_aof(core) (the AOF's pass), unless AOF is off; -1 on an exception. */
static int
aof_tail(PyObject *core)
{
    if (SLOT_AT(core, core_off[K_AOF_ON]) == Py_False)
        return 0;
    PyObject *args[2] = {NULL, core};
    return done(call_n(py_write_aof, args, 1));
}

/* Stream.stream(data) from its first move on, for the checked common case; -1 on an
   exception (the tail, as the Python's ``finally``, has run). */
static int
stream_read(PyObject *stream, PyObject *ms, PyObject *c, PyObject *core, PyObject *stats,
            PyObject *reader, PyObject *data)
{
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (slot_add(c, client_off[C_NET_IN], n) < 0 ||
            slot_add(stats, stats_off[X_REPL_IN], n) < 0)
        return -1;
    slot_put(c, client_off[C_LAST_INTERACTION], SLOT_AT(core, core_off[K_NOW_MS]));
    if (slot_add(ms, ms_off[M_READ_REPLOFF], n) < 0)
        return -1;
    slot_put(ms, ms_off[M_READ], data);
    /* the master's commands see keys that expired on our clock (its DEL removes them) */
    slot_put(core, core_off[K_APPLYING], Py_True);
    PyObject *fargs[3] = {NULL, reader, data};   /* feed, then the first request */
    PyObject *argv = call_n(py_first, fargs, 2);
    if (argv != NULL && argv != Py_None) {   /* a read of several: its keys prefetched */
        PyObject *db = CL(C_DB), *q = RD(R_QUEUE);
        if (q != NULL && PyList_Check(q) && PyList_GET_SIZE(q) && db != NULL &&
                Py_TYPE(db) == database_type && slots_all_set(db, database_off, D_N))
            ktable_prefetch_read(kt, SLOT_AT(db, database_off[D_DATA]),
                                 SLOT_AT(db, database_off[D_EXPIRES]), argv, q);
    }
    int rc = argv == NULL ? -1 : apply(stream, ms, c, reader, core, argv);
    /* finally: even if a command raised, what was applied is passed on */
    PyObject *exc = rc < 0 ? PyErr_GetRaisedException() : NULL;
    slot_put(core, core_off[K_APPLYING], Py_False);
    if (feed_applied(stream, ms) < 0 || aof_tail(core) < 0) {
        if (exc != NULL) {   /* (raised in the finally: the first is its context) */
            PyObject *e = PyErr_GetRaisedException();
            PyException_SetContext(e, exc);
            PyErr_SetRaisedException(e);
        }
        return -1;
    }
    if (exc != NULL) {
        PyErr_SetRaisedException(exc);
        return -1;
    }
    return 0;
}

static PyObject *
on_data(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 3, "on_data(side, token, data)");
    PyObject *side = args[0], *token = args[1], *data = args[2];
    if (Py_TYPE(side) != side_type || !PyBytes_CheckExact(data) || !PyBytes_GET_SIZE(data) ||
            !slots_all_set(side, side_off, S_N))
        goto general;
    long long tk = slot_int(token);
    if (tk < 0 || !PyLong_CheckExact(token) || tk != slot_int(SIDE(S_TOKEN)) ||
            SIDE(S_STATE) != connected || SIDE(S_AWAIT) != Py_False ||
            !PyBytes_CheckExact(SIDE(S_INBUF)) || PyBytes_GET_SIZE(SIDE(S_INBUF)))
        goto general;
    PyObject *channel = SIDE(S_CHANNEL), *stream = SIDE(S_STREAM);
    if (Py_TYPE(channel) != channel_type || SLOT_AT(channel, channel_off[H_FSBUF]) != Py_None ||
            Py_TYPE(stream) != stream_type || !slots_all_set(stream, stream_off, T_N))
        goto general;
    PyObject *ms = SLOT_AT(stream, stream_off[T_MASTER]);
    if (Py_TYPE(ms) != ms_type || !slots_all_set(ms, ms_off, M_N) || MS(M_READ) != Py_None ||
            !PyByteArray_CheckExact(MS(M_UNAPPLIED)) || PyByteArray_GET_SIZE(MS(M_UNAPPLIED)))
        goto general;
    PyObject *c = MS(M_CLIENT), *core = SLOT_AT(stream, stream_off[T_CORE]);
    if (Py_TYPE(c) != client_type || !slots_all_set(c, client_off, C_N) ||
            CL(C_BLOCKED) != Py_None || Py_TYPE(core) != core_type ||
            !slots_all_set(core, core_off, K_N))
        goto general;
    PyObject *stats = SLOT_AT(core, core_off[K_STATS]), *reader = CL(C_READER);
    if (Py_TYPE(stats) != stats_type || !slots_all_set(stats, stats_off, X_N) ||
            Py_TYPE(reader) != reader_type || !slots_all_set(reader, reader_off, R_N) ||
            SLOT_AT(reader, base_off[B_CONSUMED]) == NULL)
        goto general;
    int ok = stays_connected(key_data);
    if (ok > 0)
        ok = stays_connected(key_stream);
    if (ok < 0)
        return NULL;
    if (!ok)
        goto general;
    /* -- the read: its two moves leave the state as it is (CONNECTED) -- */
    PyObject *held[7] = {side, stream, ms, c, core, stats, reader};
    for (int i = 0; i < 7; i++)
        Py_INCREF(held[i]);
    int rc = stream_read(stream, ms, c, core, stats, reader, data);
    if (rc == 0 && SIDE(S_AWAIT) != Py_False) {   /* receive_data's tail */
        PyObject *len = PyLong_FromSsize_t(PyBytes_GET_SIZE(data));
        PyObject *targs[2] = {side, len};
        rc = len == NULL ? -1 : done(call_method(str_after_read, targs, 2));
        Py_XDECREF(len);
    }
    if (rc < 0 && PyErr_ExceptionMatches(repl_protocol_error)) {
        PyObject *e = PyErr_GetRaisedException();
        PyObject *pargs[2] = {side, e};
        rc = done(call_method(str_protocol_failed, pargs, 2));
        Py_DECREF(e);
    }
    for (int i = 0; i < 7; i++)
        Py_DECREF(held[i]);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
general: {
        PyObject *gargs[4] = {NULL, side, token, data};
        return call_n(py_on_data, gargs, 3);
    }
}

SLOTS_MODULE(_streamread, "A replica's read of its master's stream, in C when it is the "
                          "common one.",
    FASTCALL("bind", bind,
             BIND_USAGE ": the classes whose slots on_data() moves, the table's entries it "
             "checks, and what it calls."),
    FASTCALL("on_data", on_data,
             "on_data(side, token, data): ReplicaSide.on_data(token, data), its common case "
             "in C."))
