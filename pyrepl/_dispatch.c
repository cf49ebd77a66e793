/* pyrepl._dispatch: ServerCore.execute for one request, in C when it is the common one.

   execute(core, c, argv) is ``ServerCore.execute(c, argv)`` with ``ServerCore.call`` inside it
   (pyrepl/core/server.py): the same checks, the same moves in the same order, on the same slots
   (read and written at their offsets in the instances: pyrepl/_slots.h). The command's handler
   runs where it always runs, in Python; so do the blocked clients' wake-up
   (``blocking.after_write``) and an error's bookkeeping (``failed_call``). A write's
   propagation (``flush_propagation``) is the replication layer's ``feed_request`` (C,
   pyrepl/replication/_feed.c) when the request itself is all there is to feed, and the Python
   method otherwise.

   Why C (bench/RESULTS.md, "The dispatch in C"): a lone SET ran ~44 Python lines, of which ~35
   were the dispatch around the handler's ~9: flag tests, two counters, the commandstats
   record, the dirty counter, the reply's encoding. Those are loads and stores of slots.

   The common case: core, client, command and its commandstats record are exactly ServerCore,
   Client, Command and CommandStat; the client is not in CLIENT REPLY OFF/SKIP or subscribe
   mode, is authenticated and unrestricted (in MULTI, a command other than MULTI's own is queued
   here when the replication layer refuses nothing: queue_in_multi); the command is in the name
   cache with a valid argument count; no gate (pause, busy script, loading, MISCONF ...) is up,
   or cluster mode's alone, and the redirect would run the command here with no other move
   than c.cluster_slot (cluster_step: its keys in one slot of core.served_slots, the slots
   served with no check, pyrepl/cluster/served.py; a client without ASKING or READONLY);
   the replication layer has nothing to check (a master without min-replicas-to-write for a
   write, or a replica's master client: the stream it applies); and this call is not one
   ``call`` takes its slow path for while a client tracks keys. A timed call (one in 16 of a
   sampled command, every call of the others) is timed here, with the core's clock, and its
   records made here when they are only commandstats and latencystats (``timed_quick``), by
   ``ServerCore.timed_call``, the Python's own tail of ``call``, otherwise. Anything else calls
   the Python method before anything moved, so the Python code stays the reference:
   tests/unit/test_dispatch.py runs both on the same random command streams and compares
   replies, slots and INFO.

   call(core, c, cmd, argv) is ``ServerCore.call`` alone, for the callers that run a command
   inside another (EXEC's queue, a script's redis.call): the same common case and moves as
   execute()'s call, a write's propagation left pending for the caller. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MODULE_NAME "pyrepl._dispatch"
#include "_slots.h"
#include "_memacct.h"
#include "_latency.h"
#include "_served.h"

/* bind()'s arguments: the classes whose slots execute() reads (their slots below, in this
   order), and what it calls or compares with. */
#define BIND_USAGE "bind(ServerCore, Client, Command, CommandStat, Database, Raw, BLOCKED, " \
                   "ReplyError, encode, NAME_CACHE, LatencyHistogram)"

enum {
    K_GATED, K_REPLICATION, K_EXPIRY_DELETES, K_CMDSTATS, K_DIRTY, K_CALL_DEPTH,
    K_STREAM_LIVE, K_PENDING, K_KEYS_WAITED, K_BLOCKING, K_REPL_FEED, K_MIN_REPLICAS,
    K_SERVE_AFTER_FLUSH, K_TRACKING_ON, K_MAXMEMORY, K_CLOCK_NS, K_QUICK_BELOW_NS,
    K_LATENCY_TRACKING, K_N
};
static const char *const core_names[K_N] = {
    "gated", "replication", "expiry_deletes", "cmdstats", "dirty", "_call_depth",
    "stream_live", "_pending", "keys_waited", "blocking", "repl_feed", "min_replicas_to_write",
    "serve_after_flush", "tracking_on", "maxmemory", "clock_ns", "quick_below_ns",
    "latency_tracking",
};

enum {
    C_REPLY_MODE, C_IN_MULTI, C_AUTHENTICATED, C_SUBS, C_RESTRICTED, C_COMMANDS, C_LAST_CMD,
    C_PROPAGATE_ARGV, C_DB, C_OUT, C_PROTO, C_WOFF, C_READER, C_KIND, C_BLOCKED, C_MULTI_QUEUE,
    C_MULTI_MEM, C_MEM_QUIET, C_N
};
static const char *const client_names[C_N] = {
    "reply_mode", "in_multi", "authenticated", "subs", "restricted", "commands", "last_cmd",
    "propagate_argv", "db", "out", "proto", "woff", "reader", "kind", "blocked", "multi_queue",
    "multi_mem", "mem_quiet",
};

enum {
    M_HANDLER, M_MIN_ARGS, M_MAX_ARGS, M_WRITE, M_PROPAGATES, M_NOMULTI, M_NAME, M_STAT_OF, M_N
};
static const char *const command_names[M_N] = {
    "handler", "min_args", "max_args", "write", "propagates", "nomulti", "name", "stat_of",
};

/* cluster_step's slots of the core, the client and the command: read behind the gate only,
   so not among the slots every call checks above (a standalone request pays nothing) */
enum { KC_SERVED_SLOTS, KC_N };
static const char *const kcluster_names[KC_N] = {"served_slots"};
enum { CC_CLUSTER_FLAGS, CC_CLUSTER_SLOT, CC_N };
static const char *const ccluster_names[CC_N] = {"cluster_flags", "cluster_slot"};
enum { MC_FIRST_KEY, MC_LAST_KEY, MC_STEP, MC_KEYS_FN, MC_N };
static const char *const mcluster_names[MC_N] = {"first_key", "last_key", "step", "keys_fn"};
static Py_ssize_t kcluster_off[KC_N], ccluster_off[CC_N], mcluster_off[MC_N];

enum { S_CALLS, S_SAMPLE, S_TIMING, S_TIMED, S_TIMED_NS, S_LATENCY, S_N };
static const char *const stat_names[S_N] = {
    "calls", "sample", "timing", "timed", "timed_ns", "latency",
};

enum { D_ID, D_N };
static const char *const db_names[D_N] = {"id"};

enum { W_DATA, W_N };
static const char *const raw_names[W_N] = {"data"};

enum { L_BUCKETS, L_N };
static const char *const latency_names[L_N] = {"buckets"};

static Py_ssize_t core_off[K_N], client_off[C_N], command_off[M_N], stat_off[S_N], db_off[D_N],
                  raw_off[W_N], latency_off[L_N];
static PyTypeObject *core_type, *client_type, *command_type, *stat_type, *db_type, *raw_type,
                    *latency_type;
static PyObject *blocked;          /* pyrepl.resp.types.BLOCKED */
static PyObject *queued_reply;     /* pyrepl.resp.types.QUEUED's bytes */
static PyObject *reply_error;      /* pyrepl.resp.types.ReplyError */
static PyObject *py_encode;        /* pyrepl.resp.writer.encode */
static PyObject *name_cache;       /* pyrepl.core.NAME_CACHE */
static PyObject *py_execute;       /* ServerCore.execute: the reference */
static PyObject *perf_counter_ns;  /* time.perf_counter_ns: the shell's clock (clock_read) */
static PyObject *py_feed;          /* Replication.feed (bind_feed; NULL: none) */
static PyObject *feed_request;      /* pyrepl.replication._feed.feed_request */
static PyObject *feed_argv;         /* pyrepl.replication._feed.feed_argv */
static PyTypeObject *repl_type;     /* Replication (bind_feed) */
static Py_ssize_t repl_offset_off;  /* its master_repl_offset slot */
/* The int 0 itself (CPython's cached small int, which every 0 it computes is): a flag or
   counter at its usual value. Another 0 object only sends the call to the reference. */
static PyObject *zero, *one;
static int bound;   /* bind() ran to its end */

static inline int
is_zero(PyObject *v)
{
    return v == zero;
}
static PyObject *str_failed_call, *str_after_write, *str_flush_propagation,
                *str_master_repl_offset, *str_master, *str_timed_call, *str_call,
                *str_propagate_call;

#define K(o, i) SLOT_AT(o, core_off[i])
#define C(o, i) SLOT_AT(o, client_off[i])
#define M(o, i) SLOT_AT(o, command_off[i])

/* ServerCore.timed_call(c, cmd, argv, st, ns) when all it does is the commandstats and
   latencystats record (CommandStat.record): 1 when done here, 0 when the Python method must
   run (a blocked client, a call the slow log or the latency monitor takes, a MONITOR
   connected: the core's quick_below_ns, dispatch.refresh_timing), -1 on an error. */
static int
timed_quick(PyObject *core, PyObject *c, PyObject *st, long long ns)
{
    long long below = slot_int(K(core, K_QUICK_BELOW_NS));
    PyObject *tracking = K(core, K_LATENCY_TRACKING);
    if (ns < 0 || ns >= below || C(c, C_BLOCKED) != Py_None ||
            (tracking != Py_True && tracking != Py_False))
        return 0;
    /* CommandStat.record(ns, tracking) */
    if (slot_add(st, stat_off[S_TIMED_NS], ns) < 0 || slot_add(st, stat_off[S_TIMED], 1) < 0)
        return -1;
    if (tracking == Py_False)
        return 1;
    /* Redis records whole microseconds, in ns, at least 1 */
    long long v = ns / 1000 * 1000;
    PyObject *hist = SLOT_AT(st, stat_off[S_LATENCY]);
    if (Py_TYPE(hist) != latency_type || !slots_all_set(hist, latency_off, L_N))
        return 0;
    return latency_add(hist, SLOT_AT(hist, latency_off[L_BUCKETS]), v == 0 ? 1 : v) < 0 ? -1 : 1;
}

/* The core's clock (``core.clock_ns()``) in *ns: clock_gettime itself when it is the shell's
   time.perf_counter_ns (CLOCK_MONOTONIC, what CPython reads for it on Linux), else a call.
   0, or -1 with an exception. */
static int
clock_read(PyObject *core, long long *ns)
{
    PyObject *clock = K(core, K_CLOCK_NS);
#if defined(__linux__)
    struct timespec ts;
    if (clock == perf_counter_ns && clock_gettime(CLOCK_MONOTONIC, &ts) == 0) {
        *ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        return 0;
    }
#endif
    PyObject *t = PyObject_CallNoArgs(clock);
    if (t == NULL)
        return -1;
    *ns = PyLong_AsLongLong(t);
    Py_DECREF(t);
    return *ns == -1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const slots_spec specs[11] = {
        SLOTS_OF(core), SLOTS_OF(client), SLOTS_OF(command),
        SLOTS_OF(stat), SLOTS_OF(db), SLOTS_OF(raw),
        KEPT(&blocked), KEPT(&reply_error), KEPT(&py_encode), KEPT(&name_cache),
        SLOTS_OF(latency),
    };
    if (bind_args(nargs == 11 && PyDict_CheckExact(args[9]), BIND_USAGE, args, specs, 11) < 0 ||
            slots_bind(args[0], kcluster_names, KC_N, kcluster_off) < 0 ||
            slots_bind(args[1], ccluster_names, CC_N, ccluster_off) < 0 ||
            slots_bind(args[2], mcluster_names, MC_N, mcluster_off) < 0 ||
            keep_attr(&py_execute, args[0], "execute") || intern(&str_failed_call, "failed_call") ||
            intern(&str_after_write, "after_write") ||
            intern(&str_flush_propagation, "flush_propagation") ||
            intern(&str_master_repl_offset, "master_repl_offset") ||
            intern(&str_master, "master") || intern(&str_timed_call, "timed_call") ||
            intern(&str_call, "call") ||
            intern(&str_propagate_call, "propagate_call"))
        return NULL;
    if (perf_counter_ns == NULL) {
        PyObject *time = PyImport_ImportModule("time");
        perf_counter_ns = time == NULL ? NULL : PyObject_GetAttrString(time, "perf_counter_ns");
        Py_XDECREF(time);
        if (perf_counter_ns == NULL)
            return NULL;
    }
    if ((zero == NULL && (zero = PyLong_FromLong(0)) == NULL) ||
            (one == NULL && (one = PyLong_FromLong(1)) == NULL) ||
            (queued_reply == NULL &&
             (queued_reply = PyBytes_FromString("+QUEUED\r\n")) == NULL))
        return NULL;
    bound = 1;
    Py_RETURN_NONE;
}

/* bind_feed(Replication, feed_request, feed_argv): the replication layer's write feed (its
   feed method, and master_repl_offset at its slot), and the feed's common cases in C
   (pyrepl/replication/_feed.c). */
static PyObject *
bind_feed(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *const repl_names[1] = {"master_repl_offset"};
    const slots_spec specs[3] = {
        {repl_names, 1, &repl_offset_off, (PyObject **)&repl_type}, KEPT(&feed_request),
        KEPT(&feed_argv),
    };
    if (bind_args(nargs == 3, "bind_feed(Replication, feed_request, feed_argv)", args, specs,
                  3) < 0 ||
            keep_attr(&py_feed, args[0], "feed") < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The propagation goes to the replication layer's own feed (``repl_feed`` is its bound
   ``feed``) and nothing waits to be served after it (``serve_after_flush``): the case
   feed_request takes. */
static int
feeds_replication(PyObject *core)
{
    PyObject *feed = K(core, K_REPL_FEED);
    return py_feed != NULL && PyMethod_Check(feed) && PyMethod_GET_FUNCTION(feed) == py_feed &&
           PyMethod_GET_SELF(feed) == K(core, K_REPLICATION) &&
           K(core, K_SERVE_AFTER_FLUSH) == Py_False;   /* (keys to serve after: the Python) */
}

/* feed_request(repl, db_id, c.reader, argv): the request fed as the bytes it arrived as.
   1: fed; 0: not its case, nothing moved; -1: an exception. */
static int
feed_as_arrived(PyObject *core, PyObject *c, PyObject *db_id, PyObject *argv)
{
    PyObject *fargs[5] = {NULL, K(core, K_REPLICATION), db_id, C(c, C_READER), argv};
    PyObject *r = PyObject_Vectorcall(feed_request, fargs + 1,
                                      4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return r == Py_True;
}

/* feed_argv(repl, db_id, argv): argv encoded into the replication stream. 1: fed; 0: not
   its case, nothing moved; -1: an exception. */
static int
feed_encoded(PyObject *core, PyObject *db_id, PyObject *argv)
{
    if (feed_argv == NULL)
        return 0;
    PyObject *fargs[4] = {NULL, K(core, K_REPLICATION), db_id, argv};
    PyObject *r = PyObject_Vectorcall(feed_argv, fargs + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                      NULL);
    int fed = r == NULL ? -1 : r == Py_True;
    Py_XDECREF(r);
    return fed;
}

/* ``flush_propagation(c, argv)`` when the one thing pending is one write and the feed is the
   replication layer's: the request itself as it arrived (feed_request), or other words
   encoded (feed_argv: XADD's ID, EXPIRE's PEXPIREAT), then ``_pending = []``. 1: done; 0:
   not that case, nothing moved (the caller runs the Python); -1: an exception. */
static int
flush_request(PyObject *core, PyObject *c, PyObject *argv)
{
    PyObject *pending = K(core, K_PENDING), *item;
    if (!PyList_CheckExact(pending) || PyList_GET_SIZE(pending) != 1 ||
            !PyTuple_CheckExact(item = PyList_GET_ITEM(pending, 0)) ||
            PyTuple_GET_SIZE(item) != 2 || !feeds_replication(core))
        return 0;
    Py_INCREF(item);
    int fed;
    if (PyTuple_GET_ITEM(item, 1) == argv) {
        fed = feed_as_arrived(core, c, PyTuple_GET_ITEM(item, 0), argv);
    } else {
        fed = feed_encoded(core, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1));
    }
    Py_DECREF(item);
    if (fed <= 0)
        return fed;
    return slot_set(core, core_off[K_PENDING], PyList_New(0)) < 0 ? -1 : 1;
}

/* ``c.woff = repl.master_repl_offset`` (WAIT's offset: after what the call fed); -1 on an
   exception. */
static int
set_woff(PyObject *c, PyObject *repl)
{
    PyObject *off = Py_TYPE(repl) == repl_type && SLOT_AT(repl, repl_offset_off) != NULL
                    ? Py_NewRef(SLOT_AT(repl, repl_offset_off))
                    : PyObject_GetAttr(repl, str_master_repl_offset);
    return slot_set(c, client_off[C_WOFF], off);
}

/* The id of c's database (a new reference), NULL with an error set. */
static PyObject *
db_id_of(PyObject *c)
{
    PyObject *db = C(c, C_DB), *id;
    if (db != NULL && Py_TYPE(db) == db_type && (id = SLOT_AT(db, db_off[D_ID])) != NULL)
        return Py_NewRef(id);
    if (db == NULL) {
        PyErr_SetString(PyExc_AttributeError, "db");
        return NULL;
    }
    return PyObject_GetAttrString(db, "id");
}

/* A top-level write that changed the dataset as it arrived, when execute's tail would feed
   it alone (flush_request: nothing else pending, no client waits on keys, so the blocking
   layer queues nothing after it, the replication layer's feed): fed at once, without the
   (db, argv) entry in ``_pending`` and the list that replaces it, ``woff`` as the tail
   leaves it. 1: fed; 0: not that case, nothing moved; -1: an exception. */
static int
feed_now(PyObject *core, PyObject *c, PyObject *db_id, PyObject *argv)
{
    PyObject *pending = K(core, K_PENDING);
    if (!PyList_CheckExact(pending) || PyList_GET_SIZE(pending) != 0 ||
            !is_zero(K(core, K_CALL_DEPTH)) || !feeds_replication(core))
        return 0;
    int waited = PyObject_IsTrue(K(core, K_KEYS_WAITED));
    if (waited)
        return waited < 0 ? -1 : 0;
    int fed = feed_as_arrived(core, c, db_id, argv);
    return fed > 0 && set_woff(c, K(core, K_REPLICATION)) < 0 ? -1 : fed;
}


/* The reply, appended to c.out as execute's tail encodes it; -1 on an exception. */
static int
append_reply(PyObject *c, PyObject *reply)
{
    PyObject *data;
    if (PyBytes_CheckExact(reply)) {            /* b"$%d\r\n%s\r\n" */
        data = resp_bulk_bytes(PyBytes_AS_STRING(reply), PyBytes_GET_SIZE(reply));
        if (data == NULL)
            return -1;
    } else if (PyLong_CheckExact(reply)) {      /* b":%d\r\n" */
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(reply, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (!overflow) {
            char buf[32];
            int k = resp_header(buf, ':', v);
            data = PyBytes_FromStringAndSize(buf, k);
        } else {
            PyObject *s = PyObject_Str(reply);
            if (s == NULL)
                return -1;
            const char *digits = PyUnicode_AsUTF8(s);
            data = digits == NULL ? NULL : PyBytes_FromFormat(":%s\r\n", digits);
            Py_DECREF(s);
        }
        if (data == NULL)
            return -1;
    } else if (Py_TYPE(reply) == raw_type) {
        data = SLOT_AT(reply, raw_off[W_DATA]);
        if (data == NULL) {
            PyErr_SetString(PyExc_AttributeError, "data");
            return -1;
        }
        Py_INCREF(data);
    } else if (reply == blocked) {
        return 0;
    } else {
        PyObject *eargs[3] = {NULL, reply, C(c, C_PROTO)};
        if (eargs[2] == NULL) {
            PyErr_SetString(PyExc_AttributeError, "proto");
            return -1;
        }
        data = PyObject_Vectorcall(py_encode, eargs + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                   NULL);
        if (data == NULL)
            return -1;
    }
    PyObject *out = C(c, C_OUT);
    int rc = out != NULL ? seq_append(out, data)
                         : (PyErr_SetString(PyExc_AttributeError, "out"), -1);
    Py_DECREF(data);
    return rc;
}


/* ``handler(c, argv)``, a ReplyError answered as ``call`` does (``failed_call``): the reply
   (new ref) or NULL. */
static PyObject *
call_handler(PyObject *core, PyObject *c, PyObject *cmd, PyObject *handler, PyObject *argv)
{
    PyObject *hargs[3] = {NULL, c, argv};
    PyObject *reply = PyObject_Vectorcall(handler, hargs + 1,
                                          2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (reply == NULL && PyErr_ExceptionMatches(reply_error)) {
        PyObject *e = PyErr_GetRaisedException();
        reply = PyObject_CallMethodObjArgs(core, str_failed_call, c, cmd, e, NULL);
        Py_DECREF(e);
    }
    return reply;
}

/* The handler's call as ``call`` makes it for a command that propagates: the dirty counter
   and the propagation request around it, the call depth, a ReplyError's bookkeeping; ``top``:
   called by execute() (the request may be fed at once: feed_now). Returns the reply (new ref)
   or NULL. */
static PyObject *
call_propagating(PyObject *core, PyObject *c, PyObject *cmd, PyObject *handler, PyObject *argv,
                 int top)
{
    PyObject *dirty = K(core, K_DIRTY);
    Py_INCREF(dirty);
    PyObject *reply = NULL;
    slot_put(c, client_off[C_PROPAGATE_ARGV], Py_None);
    if (slot_add(core, core_off[K_CALL_DEPTH], 1) < 0)
        goto done;
    reply = call_handler(core, c, cmd, handler, argv);
    /* finally: the depth goes back, an exception or not */
    PyObject *exc = reply == NULL ? PyErr_GetRaisedException() : NULL;
    int bad = K(core, K_CALL_DEPTH) == NULL ? (PyErr_SetString(PyExc_AttributeError,
                                                               "_call_depth"), -1)
                                            : slot_add(core, core_off[K_CALL_DEPTH], -1);
    if (exc != NULL) {
        if (bad)
            PyErr_Clear();
        PyErr_SetRaisedException(exc);
        goto done;
    }
    if (bad)
        goto fail;
    /* if self.dirty != dirty or c.propagate_argv is not None */
    PyObject *now = K(core, K_DIRTY), *pa = C(c, C_PROPAGATE_ARGV);
    if (now == NULL || pa == NULL) {
        PyErr_SetString(PyExc_AttributeError, now == NULL ? "dirty" : "propagate_argv");
        goto fail;
    }
    int changed = now == dirty ? 0 : PyObject_RichCompareBool(now, dirty, Py_NE);
    if (changed < 0)
        goto fail;
    if (!changed && pa == Py_None)
        goto done;
    int live = PyObject_IsTrue(K(core, K_STREAM_LIVE));
    if (live < 0)
        goto fail;
    if (live) {
        pa = C(c, C_PROPAGATE_ARGV);
        int some = pa == Py_None ? 1 : PyObject_IsTrue(pa);
        if (some < 0)
            goto fail;
        if (some) {
            PyObject *id = db_id_of(c);
            if (id == NULL)
                goto fail;
            /* the request itself fed at once, or (db, what to feed) left for execute's tail
               (a call of call() below: always left, as the Python's) */
            int rc = pa == Py_None && top ? feed_now(core, c, id, argv) : 0;
            if (rc == 0) {
                PyObject *item = PyTuple_Pack(2, id, pa == Py_None ? argv : pa);
                rc = item == NULL ? -1 : seq_append(K(core, K_PENDING), item);
                Py_XDECREF(item);
            }
            Py_DECREF(id);
            if (rc < 0)
                goto fail;
        }
    }
    int waited = PyObject_IsTrue(K(core, K_KEYS_WAITED));
    if (waited < 0)
        goto fail;
    if (waited) {
        PyObject *r = PyObject_CallMethodOneArg(K(core, K_BLOCKING), str_after_write, c);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
    }
    goto done;
fail:
    Py_CLEAR(reply);
done:
    Py_DECREF(dirty);
    return reply;
}

/* What ``call`` checks before it moves anything, for cmd (a Command with its slots set): its
   commandstats record (*st, borrowed), and not a call it takes its slow path for but to time
   it. 0: an untimed call; 1: a timed one (one in 16 of a sampled command, every call of the
   others: the clock read around it, ``timed_call`` after); 2: not the common case (no record
   yet, a call slow for key tracking ...: the Python runs); -1: an exception. */
static int
call_ready(PyObject *core, PyObject *cmd, PyObject **st)
{
    PyObject *cmdstats = K(core, K_CMDSTATS), *memo = M(cmd, M_STAT_OF);
    if (!PyDict_CheckExact(cmdstats))
        return 2;
    /* the record remembered on the command for this core's dict (Command.stat_of: a dict
       keeps the record it gave a command, ServerCore.cmdstats), else looked up and
       remembered; borrowed either way (the dict holds it) */
    if (PyTuple_CheckExact(memo) && PyTuple_GET_SIZE(memo) == 2 &&
            PyTuple_GET_ITEM(memo, 0) == cmdstats) {
        *st = PyTuple_GET_ITEM(memo, 1);
    } else {
        *st = PyDict_GetItemWithError(cmdstats, cmd);
        if (*st == NULL)
            return PyErr_Occurred() ? -1 : 2;
        if (slot_set(cmd, command_off[M_STAT_OF], PyTuple_Pack(2, cmdstats, *st)) < 0)
            return -1;
    }
    if (Py_TYPE(*st) != stat_type || !slots_all_set(*st, stat_off, S_N))
        return 2;
    long long calls = slot_int(SLOT_AT(*st, stat_off[S_CALLS])),
              sample = slot_int(SLOT_AT(*st, stat_off[S_SAMPLE]));
    if (calls < 0 || sample < 0)
        return 2;
    int timed = !(calls & sample);
    if (timed) {
        long long timing = slot_int(SLOT_AT(*st, stat_off[S_TIMING]));
        if (timing < 0 || (calls & timing) || K(core, K_TRACKING_ON) != Py_False)
            return 2;
    }
    PyObject *propagates = M(cmd, M_PROPAGATES);
    if (propagates != Py_True && propagates != Py_False)
        return 2;
    return timed;
}

/* ``call``'s moves, once call_ready said 0 or 1 (``timed``): the client's counters, the
   handler (with the propagation request of a command that propagates), the call counted,
   a timed call's records; ``top`` as for call_propagating. The reply (new ref) or NULL. */
static PyObject *
call_moves(PyObject *core, PyObject *c, PyObject *cmd, PyObject *argv, PyObject *st, int timed,
           int top)
{
    long long t0 = 0, t1 = 0;
    if (slot_add(c, client_off[C_COMMANDS], 1) < 0)
        return NULL;
    slot_put(c, client_off[C_LAST_CMD], cmd);
    if (timed && clock_read(core, &t0) < 0)
        return NULL;
    PyObject *handler = M(cmd, M_HANDLER);
    Py_INCREF(handler);
    PyObject *reply = M(cmd, M_PROPAGATES) == Py_False
                      ? call_handler(core, c, cmd, handler, argv)
                      : call_propagating(core, c, cmd, handler, argv, top);
    Py_DECREF(handler);
    if (reply == NULL || slot_add(st, stat_off[S_CALLS], 1) < 0)
        goto fail;
    if (timed) {   /* self.timed_call(c, cmd, argv, st, self.clock_ns() - t0) */
        int quick = clock_read(core, &t1) < 0 ? -1 : timed_quick(core, c, st, t1 - t0);
        if (quick == 0) {
            PyObject *ns = PyLong_FromLongLong(t1 - t0);
            PyObject *r = ns == NULL ? NULL
                          : PyObject_CallMethodObjArgs(core, str_timed_call, c, cmd, argv,
                                                       st, ns, NULL);
            Py_XDECREF(ns);
            if (r == NULL)
                goto fail;
            Py_DECREF(r);
        }
        else if (quick < 0)
            goto fail;
    }
    return reply;
fail:
    Py_XDECREF(reply);
    return NULL;
}

/* Is name (a str) one of the n ASCII words? The bytes of a compact ASCII str compared
   (PyUnicode_CompareWithASCIIString cost ~80 instructions a word, six words a queued
   command), else that call. */
static int
is_multi_own(PyObject *name, const char *const *words, int n)
{
    if (!PyUnicode_IS_COMPACT_ASCII(name)) {
        for (int i = 0; i < n; i++)
            if (PyUnicode_CompareWithASCIIString(name, words[i]) == 0)
                return 1;
        return 0;
    }
    Py_ssize_t len = PyUnicode_GET_LENGTH(name);
    const char *data = (const char *)PyUnicode_1BYTE_DATA(name);
    for (int i = 0; i < n; i++)
        if (len > 0 && data[0] == words[i][0] && strlen(words[i]) == (size_t)len &&
                memcmp(data, words[i], (size_t)len) == 0)
            return 1;
    return 0;
}

/* execute's MULTI branch for an authenticated, unrestricted client outside subscribe mode,
   when the replication layer refuses nothing (no replica, a master without
   min-replicas-to-write, or a replica's master client: the stream it applies): a command other than MULTI's own (EXEC, DISCARD, MULTI, WATCH, QUIT,
   RESET) and not flagged no-multi is queued with its arguments' bytes counted
   (maxmemory-clients), +QUEUED answered. 1: done; 2: one of MULTI's own, to be called now
   (nothing moved); 0: not that case, nothing moved; -1: an exception. */
static int
queue_in_multi(PyObject *c, PyObject *cmd, PyObject *argv)
{
    static const char *const own[6] = {"exec", "discard", "multi", "watch", "quit", "reset"};
    PyObject *name = M(cmd, M_NAME), *q = C(c, C_MULTI_QUEUE), *out = C(c, C_OUT);
    if (M(cmd, M_NOMULTI) != Py_False || !PyUnicode_CheckExact(name) || !PyList_CheckExact(q) ||
            !PyList_CheckExact(out))
        return 0;
    if (is_multi_own(name, own, 6))
        return 2;
    /* if not c.multi_queue: c.multi_mem = 0; c.multi_mem += sum(map(len, argv)) + 8 * len */
    Py_ssize_t n = PyList_GET_SIZE(argv);
    long long mem = 8 * (long long)n, was = PyList_GET_SIZE(q) ? slot_int(C(c, C_MULTI_MEM)) : 0;
    if (was < 0)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyList_GET_ITEM(argv, i);
        if (!PyBytes_CheckExact(a))
            return 0;
        mem += PyBytes_GET_SIZE(a);
    }
    PyObject *item = PyTuple_Pack(2, cmd, argv);
    if (item == NULL)
        return -1;
    int rc = PyList_Append(q, item);
    Py_DECREF(item);
    if (rc < 0 || slot_set_int(c, client_off[C_MULTI_MEM], was + mem) < 0)
        return -1;
    slot_put(c, client_off[C_MEM_QUIET], Py_False);
    return PyList_Append(out, queued_reply) < 0 ? -1 : 1;
}

/* c.kind == "master": the client a replica's master stream runs as (the value is the literal
   pyrepl/replication sets, interned; another str equal to it is compared). */
static int
is_master_client(PyObject *c)
{
    PyObject *kind = C(c, C_KIND);
    return kind == str_master ||
           (PyUnicode_CheckExact(kind) && PyUnicode_Compare(kind, str_master) == 0);
}

/* The gate's test found it up: cluster mode alone (core.served_slots, set by refresh_gate
   only while no other gate is) lets a command run here when dispatch._gate's redirect
   (pyrepl/core/cluster.py) would, with no other move than c.cluster_slot: a client without
   ASKING or READONLY, our master (never redirected), or one not in MULTI whose command's
   keys are in one slot served here (or has none). That slot (-1: none), or SERVED_NOT. */
static int
cluster_step(PyObject *core, PyObject *c, PyObject *cmd, PyObject *argv)
{
    if (!slots_all_set(core, kcluster_off, KC_N) || !slots_all_set(c, ccluster_off, CC_N) ||
            !slots_all_set(cmd, mcluster_off, MC_N))
        return SERVED_NOT;
    const char *table = served_table(SLOT_AT(core, kcluster_off[KC_SERVED_SLOTS]));
    if (table == NULL || !is_zero(SLOT_AT(c, ccluster_off[CC_CLUSTER_FLAGS])))
        return SERVED_NOT;
    if (is_master_client(c))
        return -1;
    if (C(c, C_IN_MULTI) != Py_False)   /* (queued commands are routed; so is EXEC) */
        return SERVED_NOT;
    return served_slot(table, argv, SLOT_AT(cmd, mcluster_off[MC_FIRST_KEY]),
                       SLOT_AT(cmd, mcluster_off[MC_LAST_KEY]),
                       SLOT_AT(cmd, mcluster_off[MC_STEP]), SLOT_AT(cmd, mcluster_off[MC_KEYS_FN]));
}

static PyObject *
execute(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 3, "execute(core, c, argv)");
    PyObject *core = args[0], *c = args[1], *argv = args[2];
    if (Py_TYPE(core) != core_type || Py_TYPE(c) != client_type || !PyList_CheckExact(argv) ||
            PyList_GET_SIZE(argv) == 0 || !slots_all_set(core, core_off, K_N) ||
            !slots_all_set(c, client_off, C_N))
        goto general;
    /* execute: CLIENT REPLY, the command, its arity, the gate, the client's state */
    if (!is_zero(C(c, C_REPLY_MODE)))
        goto general;
    PyObject *cmd = PyDict_GetItemWithError(name_cache, PyList_GET_ITEM(argv, 0));
    if (cmd == NULL) {
        if (PyErr_Occurred())
            PyErr_Clear();   /* (an unhashable name: the reference says what it is) */
        goto general;
    }
    if (Py_TYPE(cmd) != command_type || !slots_all_set(cmd, command_off, M_N))
        goto general;
    long long lo = slot_int(M(cmd, M_MIN_ARGS)), hi = slot_int(M(cmd, M_MAX_ARGS));
    Py_ssize_t n = PyList_GET_SIZE(argv);
    if (lo < 0 || hi < 0 || n < lo || n > hi)
        goto general;
    /* maxmemory: the accounting's upper bound within the limit (else the reference's check,
       which may evict or refuse) */
    PyObject *maxmemory = K(core, K_MAXMEMORY);
    if (!is_zero(maxmemory) && !pyrepl_memacct_within(slot_int(maxmemory)))
        goto general;
    if (C(c, C_AUTHENTICATED) != Py_True || C(c, C_SUBS) != Py_None ||
            C(c, C_RESTRICTED) != Py_False)
        goto general;
    if (K(core, K_GATED) != Py_False) {
        /* the redirect's one move, c.cluster_slot, made now: whatever sends the request to
           the Python below makes it again (_gate's redirect runs first for this client) */
        int slot = cluster_step(core, c, cmd, argv);
        if (slot == SERVED_NOT)
            goto general;
        if (slot_set_int(c, ccluster_off[CC_CLUSTER_SLOT], slot) < 0)
            return NULL;
    }
    PyObject *guard = K(core, K_REPLICATION);
    if (C(c, C_IN_MULTI) != Py_False) {   /* MULTI: queued, when nothing refuses it */
        int queued = 0;
        if (C(c, C_IN_MULTI) == Py_True && (guard == Py_None || (
                K(core, K_EXPIRY_DELETES) == Py_True && is_zero(K(core, K_MIN_REPLICAS))) ||
                is_master_client(c)))
            queued = queue_in_multi(c, cmd, argv);
        if (queued < 0)
            return NULL;
        if (queued == 1)
            Py_RETURN_NONE;
        if (queued == 0)
            goto general;
        /* (2: EXEC and the others of MULTI's own run as outside MULTI; the replication
           layer, which refuses nothing here, is not asked again below) */
    }
    if (guard != Py_None) {
        /* the replication layer checks a replica's clients (READONLY, MASTERDOWN) but not
           its master, and nothing on a master ... */
        if (K(core, K_EXPIRY_DELETES) != Py_True) {
            if (!is_master_client(c))
                goto general;
        } else if (M(cmd, M_WRITE) != Py_False) {   /* ... but min-replicas-to-write */
            if (M(cmd, M_WRITE) != Py_True)
                goto general;
            if (!is_zero(K(core, K_MIN_REPLICAS)))
                goto general;
        }
    }
    PyObject *st;
    int timed = call_ready(core, cmd, &st);
    if (timed < 0)
        return NULL;
    if (timed > 1)
        goto general;
    /* -- from here on, the moves -- */
    Py_INCREF(cmd);
    Py_INCREF(st);
    Py_INCREF(guard);
    PyObject *result = NULL;
    PyObject *reply = call_moves(core, c, cmd, argv, st, timed, 1);
    if (reply == NULL)
        goto done;
    /* execute's tail: the propagation of a top-level call, then the reply */
    PyObject *pending = K(core, K_PENDING), *depth = K(core, K_CALL_DEPTH);
    if (pending == NULL || depth == NULL) {
        PyErr_SetString(PyExc_AttributeError, pending == NULL ? "_pending" : "_call_depth");
        goto done;
    }
    int some = PyObject_IsTrue(pending);
    if (some < 0)
        goto done;
    if (some) {
        int top = is_zero(depth) ? 1 : PyObject_RichCompareBool(depth, zero, Py_EQ);
        if (top < 0)
            goto done;
        if (top) {
            int fed = flush_request(core, c, argv);
            if (fed < 0)
                goto done;
            if (!fed) {
                PyObject *r = PyObject_CallMethodObjArgs(core, str_flush_propagation, c, argv,
                                                         NULL);
                if (r == NULL)
                    goto done;
                Py_DECREF(r);
            }
            if (guard != Py_None && set_woff(c, guard) < 0)
                goto done;
        }
    }
    if (append_reply(c, reply) == 0)
        result = Py_NewRef(Py_None);
done:
    Py_XDECREF(reply);
    Py_DECREF(guard);
    Py_DECREF(st);
    Py_DECREF(cmd);
    return result;
general: {
        PyObject *gargs[4] = {NULL, core, c, argv};
        return PyObject_Vectorcall(py_execute, gargs + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                   NULL);
    }
}

/* call(core, c, cmd, argv): ``ServerCore.call(c, cmd, argv)`` (pyrepl/core/dispatch.py), its
   common case here: what EXEC makes of each queued command, a script of each redis.call.
   The same checks as execute()'s call (call_ready), on a core, client and command of their
   exact classes; a write's propagation is always left in ``_pending`` for the caller, as
   the Python's. Anything else is the Python method. */
static PyObject *
call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 4, "call(core, c, cmd, argv)");
    PyObject *core = args[0], *c = args[1], *cmd = args[2], *argv = args[3], *st;
    if (Py_TYPE(core) != core_type || Py_TYPE(c) != client_type ||
            Py_TYPE(cmd) != command_type || !slots_all_set(core, core_off, K_N) ||
            !slots_all_set(c, client_off, C_N) || !slots_all_set(cmd, command_off, M_N))
        goto general;
    int timed = call_ready(core, cmd, &st);
    if (timed < 0)
        return NULL;
    if (timed > 1)
        goto general;
    Py_INCREF(st);
    PyObject *reply = call_moves(core, c, cmd, argv, st, timed, 0);
    Py_DECREF(st);
    return reply;
general:
    return PyObject_CallMethodObjArgs(core, str_call, c, cmd, argv, NULL);
}

/* propagate_call(core, c, argv, changed): core.propagate_call(c, argv, changed)
   (propagation.propagate_call), in C when a rewritten form (c.propagate_argv, a non-empty
   list: XADD's ID, SPOP's SREM ...) is all there is to propagate and the feed is the
   replication layer's: fed by feed_argv, then ``propagate_argv`` None and ``woff`` as
   propagate_now leaves them. A run's loop calls it (pyrepl/_plainrun.c). */
static PyObject *
propagate_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 4, "propagate_call(core, c, argv, changed)");
    PyObject *core = args[0], *c = args[1], *pa, *pending, *id;
    if (Py_TYPE(core) != core_type || !slots_all_set(core, core_off, K_N) ||
            Py_TYPE(c) != client_type || !slots_all_set(c, client_off, C_N) ||
            !PyList_CheckExact(pa = C(c, C_PROPAGATE_ARGV)) || PyList_GET_SIZE(pa) == 0 ||
            !PyList_CheckExact(pending = K(core, K_PENDING)) || PyList_GET_SIZE(pending) != 0 ||
            !feeds_replication(core))
        goto general;
    if ((id = db_id_of(c)) == NULL)
        return NULL;
    Py_INCREF(pa);
    int fed = feed_encoded(core, id, pa);
    Py_DECREF(id);
    Py_DECREF(pa);
    if (fed < 0)
        return NULL;
    if (fed == 0)   /* (not feed_argv's case: nothing moved) */
        goto general;
    slot_put(c, client_off[C_PROPAGATE_ARGV], Py_None);
    if (set_woff(c, K(core, K_REPLICATION)) < 0)
        return NULL;
    Py_RETURN_NONE;
general:
    return PyObject_VectorcallMethod(str_propagate_call, (PyObject *[]){core, c, args[2], args[3]},
                                     4, NULL);
}

SLOTS_MODULE(_dispatch, "ServerCore.execute for one request, in C when it is the common one.",
    FASTCALL("bind", bind, BIND_USAGE ": what execute() reads."),
    FASTCALL("bind_feed", bind_feed,
             "bind_feed(Replication, feed_request, feed_argv): the replication layer's write "
             "feed."),
    FASTCALL("execute", execute,
             "execute(core, c, argv): ServerCore.execute(c, argv), its common case in C."),
    FASTCALL("propagate_call", propagate_call,
             "propagate_call(core, c, argv, changed): core.propagate_call, a rewritten form "
             "fed in C."),
    FASTCALL("call", call,
             "call(core, c, cmd, argv): ServerCore.call(c, cmd, argv), its common case in C."))
