/* pyrepl.net._serve: a client connection's read, in C when it is the common one.

   received(protocol, data) is ``ClientProtocol.data_received(data)`` (pyrepl/net/server.py)
   with ``Client.receive_data`` and ``Client.data_to_send`` (pyrepl/core/client.py) inside it: the
   same moves, in the same order, on the same slots (read and written at their offsets in the
   instances: pyrepl/_slots.h). What it does itself is only the bookkeeping around the
   commands: the clock, the byte and read/write counters, handing the read to the request
   reader (pyrepl.resp.fastreader.first) and the reply to the transport (or straight to its
   socket when uvloop's write would do just that: send_reply), and the loop over a pipeline's
   requests (``Client.process``'s common case: process() below). The commands run
   where they always run: ``ServerCore.execute`` (its common case in C: pyrepl/_dispatch.c),
   or a run of plain commands at once (``ServerCore.execute_run``).

   Why C (bench/RESULTS.md, "A lone request's bookkeeping in C"): at -P1 a request is a read,
   and these ~34 lines of the three Python methods cost ~600 ns of a lone SET's ~1.5 us in
   process (the whole Python floor's SET costs ~450 ns), for loads and stores of slots.

   The common case: AOF is off, the protocol and client are exactly ClientProtocol and Client,
   the data is bytes, and the client is open, not closing, not blocked and not a replica being streamed
   to. Anything else calls the Python method, which stays the reference;
   tests/unit/test_serve.py drives both on the same random command streams and compares the
   replies and every slot of the client and of the stats after each read. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <unistd.h>
#include <time.h>

#define MODULE_NAME "pyrepl.net._serve"
#include "../_slots.h"
#include "../keyspace/_ktable.h"

#if PY_VERSION_HEX < 0x030E0000
#define PyBytes_Join _PyBytes_Join   /* (public from 3.14 on) */
#endif

/* bind()'s arguments: the classes whose slots received() moves (their slots below, in this
   order), and what it calls. */
#define BIND_USAGE "bind(ClientProtocol, Client, Stats, FastRespReader, ServerCore, Command, " \
                   "NAME_CACHE, execute, execute_run, first, release, Database)"

enum { P_SERVER, P_CORE, P_CLIENT, P_TRANSPORT, P_N };
static const char *const proto_names[P_N] = {"server", "core", "client", "transport"};

enum {
    C_CLOSED, C_CLOSE_AFTER_REPLY, C_BLOCKED, C_STREAM, C_NET_IN, C_LAST_INTERACTION,
    C_READER, C_OUT, C_OBUF_HELD, C_NET_OUT, C_MEM_QUIET, C_WRITE_PAUSED, C_IN_MULTI, C_DB,
    C_TRANSPORT, C_OUT_FD, C_N
};
static const char *const client_names[C_N] = {
    "closed", "close_after_reply", "blocked", "stream", "net_in", "last_interaction_ms",
    "reader", "out", "obuf_held", "net_out", "mem_quiet", "write_paused", "in_multi", "db",
    "transport", "out_fd",
};

enum { T_NET_IN, T_READS, T_NET_OUT, T_WRITES, T_N };
static const char *const stats_names[T_N] = {
    "net_input_bytes", "total_reads_processed", "net_output_bytes", "total_writes_processed",
};

enum { R_QUEUE, R_SPENT, R_N };
static const char *const reader_names[R_N] = {"queue", "spent"};

enum { K_STATS, K_NOW_MS, K_PENDING_FLUSH, K_SHUTDOWN_ASAP, K_AOF_ON, K_MAXMEMORY_CLIENTS,
       K_OBUF_NORMAL, K_N };
static const char *const core_names[K_N] = {"stats", "now_ms", "pending_flush", "shutdown_asap",
                                            "aof_on", "maxmemory_clients", "obuf_normal"};

/* bind_master_link()'s: the master link's protocol (net/replica_io.py) and its ReplicaIO */
#define LINK_USAGE "bind_master_link(_MasterLinkProtocol, ReplicaIO, ServerCore)"
enum { L_IO, L_TOKEN, L_RDB, L_N };
static const char *const link_names[L_N] = {"io", "token", "rdb"};
enum { I_SERVER, I_N };
static const char *const io_names[I_N] = {"server"};
/* the core's slots it moves (its own binding: the link's module binds them) */
enum { LK_NOW_MS, LK_PENDING_FLUSH, LK_SHUTDOWN_ASAP, LK_REPLICATION, LK_N };
static const char *const lcore_names[LK_N] = {"now_ms", "pending_flush", "shutdown_asap",
                                              "replication"};
static Py_ssize_t link_off[L_N], io_off[I_N], lcore_off[LK_N];
static PyTypeObject *link_type, *io_type, *lcore_type;
static PyObject *py_link_received;   /* _MasterLinkProtocol.data_received: the reference */
static int link_bound;   /* bind_master_link() ran to its end */
static PyObject *str_core, *str_stop_event, *str_is_set, *str_replica, *str_on_data,
                *str_failed;

enum { M_PLAIN, M_N };
static const char *const command_names[M_N] = {"plain"};

enum { D_DATA, D_EXPIRES, D_N };
static const char *const database_names[D_N] = {"data", "expires"};
static Py_ssize_t database_off[D_N];
static PyTypeObject *database_type;
static KTable_CAPI *kt;   /* the keyspace's table's C API (NULL: no prefetch) */

static Py_ssize_t proto_off[P_N], client_off[C_N], stats_off[T_N], reader_off[R_N],
                  core_off[K_N], command_off[M_N];
static PyTypeObject *proto_type, *client_type, *stats_type, *reader_type, *core_type,
                    *command_type;
static PyObject *py_data_received;   /* ClientProtocol.data_received: the reference */
static PyObject *py_execute;         /* pyrepl._dispatch.execute (ServerCore.execute) */
static PyObject *py_execute_run;     /* ServerCore.execute_run (pyrepl/core/dispatch.py) */
static PyObject *py_process;         /* Client.process: the reference of process() below */
static PyObject *py_first;           /* pyrepl.resp.fastreader.first */
static PyObject *py_release;         /* pyrepl.resp.fastreader.release */
static PyObject *name_cache;         /* pyrepl.core.dispatch.NAME_CACHE (core.name_cache) */
static int bound;   /* bind() ran to its end */
/* The int 0 itself (CPython's cached small int): maxmemory-clients off, tested by identity. */
static PyObject *zero;
static PyObject *str_write, *str_close, *str_schedule_flush, *str_shutdown_from_command,
                *str_flush_scheduled, *str_after_read, *str_flush_pending;
static PyObject *py_write_client;   /* pyrepl.net.server.write_client: the reference of
                                       write_one() below (imported at the first flush) */

#define P(o, i) SLOT_AT(o, proto_off[i])
#define C(o, i) SLOT_AT(o, client_off[i])

static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const slots_spec specs[12] = {
        SLOTS_OF(proto), SLOTS_OF(client), SLOTS_OF(stats), SLOTS_OF(reader), SLOTS_OF(core),
        SLOTS_OF(command), KEPT(&name_cache), KEPT(&py_execute), KEPT(&py_execute_run),
        KEPT(&py_first), KEPT(&py_release), SLOTS_OF(database),
    };
    if (bind_args(nargs == 12 && PyDict_CheckExact(args[6]), BIND_USAGE, args, specs,
                  12) < 0 ||
            keep_attr(&py_data_received, args[0], "data_received") ||
            keep_attr(&py_process, args[1], "process") || intern(&str_write, "write") ||
            intern(&str_close, "close") ||
            intern(&str_schedule_flush, "schedule_flush") ||
            intern(&str_shutdown_from_command, "shutdown_from_command") ||
            intern(&str_flush_scheduled, "_flush_scheduled") ||
            intern(&str_after_read, "after_read") || intern(&str_core, "core") ||
            intern(&str_flush_pending, "flush_pending"))
        return NULL;
    if (zero == NULL && (zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    kt = ktable_capi_or_null();   /* (without it: no prefetch) */
    bound = 1;
    Py_RETURN_NONE;
}

/* Call a method with no argument and drop its result; -1 on an exception. */
static int
call_method0(PyObject *o, PyObject *name)
{
    PyObject *r = PyObject_CallMethodNoArgs(o, name);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* b"".join(out): a list of exact bytes copied straight (no buffer protocol a piece); the
   general join for anything else. New reference. */
static PyObject *
join_bytes(PyObject *out)
{
    Py_ssize_t n = PyList_GET_SIZE(out), total = 0, i;
    for (i = 0; i < n; i++) {
        PyObject *b = PyList_GET_ITEM(out, i);
        if (!PyBytes_CheckExact(b) || PyBytes_GET_SIZE(b) > PY_SSIZE_T_MAX - total)
            break;
        total += PyBytes_GET_SIZE(b);
    }
    if (i < n) {
        PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);
        if (empty == NULL)
            return NULL;
        PyObject *data = PyBytes_Join(empty, out);
        Py_DECREF(empty);
        return data;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, total);
    if (data == NULL)
        return NULL;
    char *p = PyBytes_AS_STRING(data);
    for (i = 0; i < n; i++) {
        PyObject *b = PyList_GET_ITEM(out, i);
        memcpy(p, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        p += PyBytes_GET_SIZE(b);
    }
    return data;
}

/* Client.data_to_send, for a client whose ``out`` holds something: the bytes (new ref). */
static PyObject *
data_to_send(PyObject *c, PyObject *stats)
{
    PyObject *out = C(c, C_OUT), *data;
    if (PyList_GET_SIZE(out) == 1) {
        data = PyList_GET_ITEM(out, 0);
        Py_INCREF(data);
    } else if ((data = join_bytes(out)) == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyObject_Size(data);
    PyObject *fresh = PyList_New(0), *zero = PyLong_FromLong(0);
    if (n < 0 || fresh == NULL || zero == NULL) {
        Py_XDECREF(fresh);
        Py_XDECREF(zero);
        Py_DECREF(data);
        return NULL;
    }
    Py_XSETREF(C(c, C_OUT), fresh);
    Py_XSETREF(C(c, C_OBUF_HELD), zero);
    if (slot_add(c, client_off[C_NET_OUT], n) < 0 ||
            slot_add(stats, stats_off[T_NET_OUT], n) < 0 ||
            slot_add(stats, stats_off[T_WRITES], 1) < 0) {
        Py_DECREF(data);
        return NULL;
    }
    return data;
}

/* A reader's ``queue`` (i = R_QUEUE) or ``spent`` (R_SPENT) as a truth value: 1, 0, or -1
   on an exception. (received() reads client.reader again each time, as the Python code
   does.) */
static int
reader_flag(PyObject *reader, int i)
{
    PyObject *v;
    if (reader != NULL && Py_TYPE(reader) == reader_type &&
            (v = SLOT_AT(reader, reader_off[i])) != NULL)
        return PyObject_IsTrue(v);
    if (reader == NULL) {
        PyErr_SetString(PyExc_AttributeError, "reader");
        return -1;
    }
    v = PyObject_GetAttrString(reader, reader_names[i]);
    if (v == NULL)
        return -1;
    int on = PyObject_IsTrue(v);
    Py_DECREF(v);
    return on;
}

/* f(a, b, ...): a vectorcall of n arguments (new reference, NULL on an exception). */
static inline PyObject *
call_n(PyObject *f, PyObject **args, size_t n)
{
    return PyObject_Vectorcall(f, args + 1, n | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* Client.process(argv) (pyrepl/core/client.py) for c, its common case: the requests a read
   left in the reader's queue, one by one. argv (borrowed) is the first, or Py_None. What
   the Python loop makes per request in Python is made here: the next request is the
   queue's last (``reader.gets()`` with a queue), ``core.execute_run`` is skipped for a
   command the name cache knows as not plain (its ``plainrun.start`` refuses such a first
   request before anything else, so the call would answer False), ``execute`` is the C
   dispatch, and the read's end is ``reader.spent and not reader.queue``. Anything else
   (an empty queue: the pure reader's gets(), an output limit for normal clients, a client
   closing or blocked by something other than a bool and None) hands the loop, from the
   request in hand, to the Python method: the reference (tests/unit/test_serve.py).
   A new reference to None, or NULL on an exception. */
static PyObject *
process(PyObject *core, PyObject *c, PyObject *argv)
{
    PyObject *reader = C(c, C_READER), *r;
    if (reader == NULL || Py_TYPE(reader) != reader_type)
        goto python;
    Py_INCREF(reader);   /* (the loop keeps the reader it started with, as the Python's) */
    Py_INCREF(argv);
    for (;;) {
        PyObject *closing = C(c, C_CLOSE_AFTER_REPLY), *blocked = C(c, C_BLOCKED);
        if (closing == Py_True || (closing == Py_False && blocked != NULL &&
                                   blocked != Py_None)) {
            r = Py_NewRef(Py_None);   /* (the loop's condition: done) */
            break;
        }
        PyObject *q = SLOT_AT(reader, reader_off[R_QUEUE]);
        if (closing != Py_False || blocked == NULL || q == NULL || !PyList_CheckExact(q) ||
                SLOT_AT(core, core_off[K_OBUF_NORMAL]) != Py_False)
            goto hand_over;
        if (argv == Py_None) {   /* reader.gets(): the queue's last */
            Py_ssize_t n = PyList_GET_SIZE(q);
            if (n == 0)
                goto hand_over;
            /* (q.pop(): the list's reference to its last item becomes ours; its allocation
               is kept, as the reader empties and refills that list) */
            PyObject *next = PyList_GET_ITEM(q, n - 1);
            Py_SET_SIZE(q, n - 1);
            Py_SETREF(argv, next);
        }
        int ran = 0;
        /* rest: a run may start here (not in MULTI: the commands are queued one by one) */
        if (PyList_GET_SIZE(q) && C(c, C_IN_MULTI) != Py_True) {
            PyObject *cmd = NULL;
            if (PyList_CheckExact(argv) && PyList_GET_SIZE(argv)) {
                cmd = PyDict_GetItemWithError(name_cache, PyList_GET_ITEM(argv, 0));
                if (cmd == NULL && PyErr_Occurred()) {
                    r = NULL;
                    break;
                }
            }
            if (cmd == NULL || Py_TYPE(cmd) != command_type ||
                    SLOT_AT(cmd, command_off[M_PLAIN]) != Py_False) {
                PyObject *rargs[5] = {NULL, core, c, argv, q};
                Py_INCREF(q);
                r = call_n(py_execute_run, rargs, 4);
                Py_DECREF(q);
                ran = r == NULL ? -1 : PyObject_IsTrue(r);
                Py_XDECREF(r);
                if (ran < 0) {
                    r = NULL;
                    break;
                }
            }
        }
        if (!ran) {
            PyObject *eargs[4] = {NULL, core, c, argv};
            r = call_n(py_execute, eargs, 3);
            if (r == NULL)
                break;
            Py_DECREF(r);
        }
        int spent = reader_flag(reader, R_SPENT);   /* reader.spent and not reader.queue */
        if (spent > 0) {
            int queued = reader_flag(reader, R_QUEUE);
            spent = queued < 0 ? -1 : !queued;
        }
        if (spent < 0) {
            r = NULL;
            break;
        }
        if (spent) {   /* the read is all run: its requests go */
            PyObject *largs[2] = {NULL, reader};
            r = call_n(py_release, largs, 1);
            if (r != NULL)
                Py_SETREF(r, Py_NewRef(Py_None));
            break;
        }
        Py_SETREF(argv, Py_NewRef(Py_None));
    }
    Py_DECREF(argv);
    Py_DECREF(reader);
    return r;
hand_over: {
        PyObject *pargs[3] = {NULL, c, argv};
        r = call_n(py_process, pargs, 2);
        Py_DECREF(argv);
        Py_DECREF(reader);
        return r;
    }
python: {
        PyObject *pargs[3] = {NULL, c, argv};
        return call_n(py_process, pargs, 2);
    }
}

/* the core whose server's pass ends in a check handle (hook_pass; the last one hooked,
   borrowed: the hook holds it, unhook_pass clears it): its flush needs no schedule */
static PyObject *hooked_core;

/* The core's flags after a callback (ReplicaIO._dispatch's tail, ClientProtocol.data_received's):
   a flush asked for and not yet scheduled, a SHUTDOWN to act on; offs are the offsets of
   ``pending_flush`` and ``shutdown_asap``. -1 on an exception. */

static int
after_callback(PyObject *server, PyObject *core, const Py_ssize_t offs[2])
{
    static const char *const names[2] = {"pending_flush", "shutdown_asap"};
    PyObject *calls[2] = {str_schedule_flush, str_shutdown_from_command};
    for (int i = 0; i < 2; i++) {
        PyObject *v = SLOT_AT(core, offs[i]);
        if (v == NULL)   /* (as Python's read of an unset slot) */
            PyErr_Format(PyExc_AttributeError, "'ServerCore' object has no attribute '%s'",
                         names[i]);
        int on = v == NULL ? -1 : PyObject_IsTrue(v);
        if (on > 0 && i == 0 && core == hooked_core)
            continue;   /* (the pass's end flushes it: _flush_scheduled is always true) */
        if (on > 0 && i == 0) {   /* (schedule_flush does nothing once it is scheduled) */
            v = PyObject_GetAttr(server, str_flush_scheduled);
            if (v == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
                PyErr_Clear();   /* (a server without the flag: ask it) */
                v = Py_NewRef(Py_False);
            }
            int scheduled = v == NULL ? -1 : PyObject_IsTrue(v);
            Py_XDECREF(v);
            on = scheduled < 0 ? -1 : !scheduled;
        }
        if (on < 0 || (on && call_method0(server, calls[i]) < 0))
            return -1;
    }
    return 0;
}

/* uvloop's stream transports (uvloop.loop.TCPTransport, UnixTransport) and the unbound
   is_closing and get_write_buffer_size of each; direct < 0 once uvloop is known to be
   absent (an asyncio loop: every reply goes through the transport's write) */
static PyTypeObject *uv_types[2];
static PyObject *uv_is_closing[2], *uv_buffered[2];
static int direct;   /* 0 not looked up yet, 1 found, -1 absent */

static int
find_uvloop(void)
{
    static const char *const names[2] = {"TCPTransport", "UnixTransport"};
    PyObject *mod = PyImport_ImportModule("uvloop.loop");
    if (mod == NULL) {
        PyErr_Clear();
        return direct = -1;
    }
    for (int i = 0; i < 2; i++) {
        PyObject *type = PyObject_GetAttrString(mod, names[i]);
        if (type == NULL || !PyType_Check(type) ||
                (uv_is_closing[i] = PyObject_GetAttrString(type, "is_closing")) == NULL ||
                (uv_buffered[i] = PyObject_GetAttrString(type, "get_write_buffer_size")) == NULL) {
            Py_XDECREF(type);
            Py_DECREF(mod);
            PyErr_Clear();
            return direct = -1;
        }
        uv_types[i] = (PyTypeObject *)type;   /* (kept: the module holds it for good) */
    }
    Py_DECREF(mod);
    return direct = 1;
}

/* A reply's bytes to the client's transport t: written here to the socket fd when t is one of
   uvloop's stream transports over fd, open, with nothing of its own still to write (then
   uvloop's write would do just this: one write(2) at once, pyrepl/net/server.py's
   write_client), else, and for what the socket does not take (its rest as a copy, or all of
   it on an error: uvloop's write then meets the same error and closes the transport as it
   always does), t.write(bytes). This spares uvloop's write of ~1,000 instructions a reply
   (bench/RESULTS.md). The client's ``out_fd`` is the fd of its transport when it is one of
   these (ClientProtocol.connection_made), else -1. 1 when it wrote them all itself, 0 when
   the transport's write had them (or their rest), -1 on an exception. */
static int
send_reply(PyObject *t, long long fd, PyObject *bytes)
{
    PyObject *rest = bytes;
    int i = direct == 0 && fd >= 0 ? find_uvloop() : direct;
    i = i < 0 || fd < 0 ? -1 : Py_TYPE(t) == uv_types[0] ? 0 : Py_TYPE(t) == uv_types[1] ? 1 : -1;
    if (i >= 0 && PyBytes_CheckExact(bytes) && PyBytes_GET_SIZE(bytes) > 0) {
        PyObject *v = PyObject_Vectorcall(uv_is_closing[i], &t, 1, NULL);
        if (v == NULL)
            return -1;
        int open = v == Py_False;
        Py_DECREF(v);
        long long held = -1;   /* (the bytes it holds, once known to be open) */
        if (open) {
            if ((v = PyObject_Vectorcall(uv_buffered[i], &t, 1, NULL)) == NULL)
                return -1;
            held = slot_int(v);
            Py_DECREF(v);
        }
        if (held == 0) {
            const char *p = PyBytes_AS_STRING(bytes);
            Py_ssize_t n = PyBytes_GET_SIZE(bytes);
            ssize_t w;
            do
                w = write((int)fd, p, (size_t)n);   /* (as uvloop: non-blocking, SIGPIPE ignored) */
            while (w < 0 && errno == EINTR);
            if (w == n)
                return 1;
            if (w > 0 && (rest = PyBytes_FromStringAndSize(p + w, n - w)) == NULL)
                return -1;
        }
    }
    PyObject *r = PyObject_CallMethodOneArg(t, str_write, rest);
    if (rest != bytes)
        Py_DECREF(rest);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* send_reply(transport, fd, data): send_reply() above on its own (tests/unit/test_serve.py
   holds it to transport.write(data)): True when it wrote data itself. */
static PyObject *
send_reply_entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyLong_CheckExact(args[1]) || !PyBytes_CheckExact(args[2]))
        return usage_error("send_reply(transport, fd: int, data: bytes)");
    long long fd = PyLong_AsLongLong(args[1]);
    if ((fd == -1 && PyErr_Occurred()) || intern(&str_write, "write") < 0)
        return NULL;
    int r = send_reply(args[0], fd, args[2]);
    return r < 0 ? NULL : PyBool_FromLong(r);
}

/* write_client(c) (pyrepl/net/server.py): a client's replies handed to its transport, then
   the transport closed if the client asked for it (QUIT). The common case here: a Client
   with its slots set, open, not a replica being streamed to, its transport not paused and
   there; anything else calls write_client. -1 on an exception. */
static int
write_one(PyObject *c, PyObject *stats)
{
    PyObject *t, *out, *r;
    if (Py_TYPE(c) != client_type || !slots_all_set(c, client_off, C_N) ||
            C(c, C_CLOSED) != Py_False || C(c, C_STREAM) != Py_None ||
            C(c, C_WRITE_PAUSED) != Py_False || !PyList_CheckExact(out = C(c, C_OUT)) ||
            (t = C(c, C_TRANSPORT)) == Py_None) {
        if (keep_import(&py_write_client, "pyrepl.net.server", "write_client") < 0)
            return -1;
        PyObject *wargs[2] = {NULL, c};
        r = call_n(py_write_client, wargs, 1);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    Py_INCREF(t);
    int rc = 0;
    if (PyList_GET_SIZE(out)) {
        PyObject *bytes = data_to_send(c, stats);
        rc = bytes == NULL || send_reply(t, slot_int(C(c, C_OUT_FD)), bytes) < 0 ? -1 : 0;
        Py_XDECREF(bytes);
    }
    int closing = rc < 0 ? -1 : PyObject_IsTrue(C(c, C_CLOSE_AFTER_REPLY));
    if (closing < 0 || (closing && call_method0(t, str_close) < 0))
        rc = -1;
    Py_DECREF(t);
    return rc;
}

/* ``Server.flush_pending()`` (pyrepl/net/server.py) for server and its core: the clients of
   ``core.pending_flush`` written (write_one), the list swapped for a new one before the first
   write, as the Python's (what a write queues waits for the next pass). With the AOF on (its
   buffer written first) or a core that is not the common one, the Python method. A new
   reference to None, or NULL on an exception. (Keeping the list and cutting the written
   clients from its front instead, to spare the new list and its growth, measured no
   different: 10,974 instructions a lone SET against 10,937.) */
static PyObject *
flush_core(PyObject *server, PyObject *core)
{
    PyObject *pending, *stats, *result = NULL;
    if (Py_TYPE(core) != core_type || !slots_all_set(core, core_off, K_N) ||
            SLOT_AT(core, core_off[K_AOF_ON]) != Py_False ||
            !PyList_CheckExact(pending = SLOT_AT(core, core_off[K_PENDING_FLUSH])) ||
            Py_TYPE(stats = SLOT_AT(core, core_off[K_STATS])) != stats_type ||
            !slots_all_set(stats, stats_off, T_N))
        return PyObject_CallMethodNoArgs(server, str_flush_pending);
    if (PyList_GET_SIZE(pending) == 0)
        Py_RETURN_NONE;
    Py_INCREF(pending);
    Py_INCREF(stats);
    if (slot_set(core, core_off[K_PENDING_FLUSH], PyList_New(0)) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pending); i++)
        if (write_one(PyList_GET_ITEM(pending, i), stats) < 0)
            goto done;
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(stats);
    Py_DECREF(pending);
    return result;
}

/* flush(server) is ``Server._flush_deferred()``, what the loop's call_soon runs once a
   pass's reads are done: the flag cleared, then flush_pending (flush_core). */
static PyObject *
flush(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 1, "flush(server)");
    PyObject *server = args[0];
    if (PyObject_SetAttr(server, str_flush_scheduled, Py_False) < 0)
        return NULL;
    PyObject *core = PyObject_GetAttr(server, str_core);
    if (core == NULL)
        return NULL;
    PyObject *r = flush_core(server, core);
    Py_DECREF(core);
    return r;
}

/* -- The pass's end on uvloop's own loop (Redis's beforeSleep) -------------------------------

   With call_soon, the pass's flush costs ~5,000 instructions a pass (bench/RESULTS.md, "Replies
   at the end of the pass"): the schedule (the flag, the call_soon's handle), then uvloop's idle
   phase (its handler, the ready queue, the handle's call). A libuv check handle on the loop
   (uvloop exports libuv's functions and the loop's uv_loop_t: uvloop.loop.libuv_get_loop_t_ptr)
   runs after every poll phase, in the same pass as the reads, for the cost of taking the GIL:
   hook_pass() starts one for a server, its callback flushes core.pending_flush when it holds
   anything (flush_core), unhook_pass() closes it before the loop closes (uvloop's close walks
   the loop's handles as its own: a check handle left open would be taken for one of them).
   The libuv calls are found in uvloop's module by name (dlsym); a loop that is not uvloop's,
   or a uvloop without them, keeps call_soon (Server.schedule_flush). */

enum { UV_CHECK_TYPE = 2 };   /* uv.h's UV_CHECK (uv_handle_type: stable across libuv 1.x) */
static int (*uv_check_init_f)(void *loop, void *check);
static int (*uv_check_start_f)(void *check, void (*cb)(void *check));
static int (*uv_check_stop_f)(void *check);
static void (*uv_close_f)(void *handle, void (*cb)(void *handle));
static void (*uv_unref_f)(void *handle);
static size_t (*uv_handle_size_f)(int type);

typedef struct {
    PyObject *server, *core, *loop;   /* strong references, dropped by the close's callback */
    _Alignas(max_align_t) unsigned char check[];   /* the uv_check_t (uv_handle_size) */
} pass_hook;

#define HOOK_OF(check) ((pass_hook *)((char *)(check) - offsetof(pass_hook, check)))
#define HOOK_CAPSULE "pyrepl.net._serve.pass_hook"

/* the libuv functions, from uvloop's module (path: its file); -1 with an error set */
static int
find_libuv(const char *path)
{
    if (uv_handle_size_f != NULL)
        return 0;
    void *so = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (so == NULL) {
        PyErr_Format(PyExc_OSError, "uvloop's module is not loaded: %s", path);
        return -1;
    }
    void *f[6];
    static const char *const names[6] = {"uv_check_init", "uv_check_start", "uv_check_stop",
                                          "uv_close", "uv_unref", "uv_handle_size"};
    for (int i = 0; i < 6; i++)
        if ((f[i] = dlsym(so, names[i])) == NULL) {
            dlclose(so);   /* (RTLD_NOLOAD: only the count taken above) */
            PyErr_Format(PyExc_OSError, "uvloop's module has no %s", names[i]);
            return -1;
        }
    /* (the module stays loaded: uvloop's import holds it, and the count taken above too) */
    *(void **)&uv_check_init_f = f[0];
    *(void **)&uv_check_start_f = f[1];
    *(void **)&uv_check_stop_f = f[2];
    *(void **)&uv_close_f = f[3];
    *(void **)&uv_unref_f = f[4];
    *(void **)&uv_handle_size_f = f[5];
    return 0;
}

/* The check's callback, after each poll phase (without the GIL: uvloop runs libuv with it
   released): the pass's replies written when any wait. An exception goes to the loop's
   exception handler, as call_soon's callback's would. */
static void
on_pass_end(void *check)
{
    pass_hook *k = HOOK_OF(check);
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *pending = SLOT_AT(k->core, core_off[K_PENDING_FLUSH]);
    if (pending == NULL || !PyList_CheckExact(pending) || PyList_GET_SIZE(pending)) {
        PyObject *r = flush_core(k->server, k->core);
        if (r == NULL) {
            PyObject *e = PyErr_GetRaisedException();
            PyObject *ctx = Py_BuildValue("{s:s,s:O}", "message",
                                          "pyrepl: the pass's writes failed", "exception", e);
            r = ctx == NULL ? NULL
                            : PyObject_CallMethod(k->loop, "call_exception_handler", "O", ctx);
            Py_XDECREF(ctx);
            Py_XDECREF(e);
            if (r == NULL)
                PyErr_WriteUnraisable(k->server);
        }
        Py_XDECREF(r);
    }
    PyGILState_Release(g);
}

static void
on_closed(void *check)
{
    pass_hook *k = HOOK_OF(check);
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(k->server);
    Py_DECREF(k->core);
    Py_DECREF(k->loop);
    PyMem_RawFree(k);
    PyGILState_Release(g);
}

/* hook_pass(loop, uv_loop_capsule, uvloop_path, server): a started check handle on the loop,
   as a capsule for unhook_pass(). */
static PyObject *
hook_pass(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 4, "hook_pass(loop, uv_loop_capsule, uvloop_path, server)");
    PyObject *loop = args[0], *server = args[3];
    const char *path = PyUnicode_Check(args[2]) ? PyUnicode_AsUTF8(args[2]) : NULL;
    void *uvloop = PyCapsule_GetPointer(args[1], NULL);
    if (path == NULL || uvloop == NULL || find_libuv(path) < 0)
        return NULL;
    PyObject *core = PyObject_GetAttr(server, str_core);
    if (core == NULL)
        return NULL;
    if (Py_TYPE(core) != core_type) {
        Py_DECREF(core);
        PyErr_SetString(PyExc_TypeError, "hook_pass: the server's core is not a ServerCore");
        return NULL;
    }
    pass_hook *k = PyMem_RawCalloc(1, sizeof(pass_hook) + uv_handle_size_f(UV_CHECK_TYPE));
    if (k == NULL) {
        Py_DECREF(core);
        return PyErr_NoMemory();
    }
    k->server = Py_NewRef(server);
    k->core = core;
    k->loop = Py_NewRef(loop);
    PyObject *capsule = PyCapsule_New(k, HOOK_CAPSULE, NULL);
    if (capsule == NULL || uv_check_init_f(uvloop, k->check) != 0) {
        Py_XDECREF(capsule);   /* (init failed: nothing of libuv's holds it) */
        Py_DECREF(k->server);
        Py_DECREF(k->core);
        Py_DECREF(k->loop);
        PyMem_RawFree(k);
        return capsule == NULL ? NULL
                               : PyErr_Format(PyExc_OSError, "uv_check_init failed");
    }
    uv_check_start_f(k->check, on_pass_end);
    uv_unref_f(k->check);   /* (the loop's run does not wait for it) */
    hooked_core = core;
    return capsule;
}

/* unhook_pass(capsule): the check stopped and closed (freed by its close callback, at the
   loop's next run); a second call does nothing. */
static PyObject *
unhook_pass(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 1, "unhook_pass(capsule)");
    pass_hook *k = PyCapsule_GetPointer(args[0], HOOK_CAPSULE);
    if (k == NULL)
        return NULL;
    /* (the capsule's context marks it closed: k is freed once libuv has closed it) */
    if (PyCapsule_GetContext(args[0]) == NULL) {
        if (PyCapsule_SetContext(args[0], args[0]) < 0)
            return NULL;
        uv_check_stop_f(k->check);
        uv_close_f(k->check, on_closed);
        if (hooked_core == k->core)
            hooked_core = NULL;
    }
    Py_RETURN_NONE;
}

/* A pipelined read's keys started towards the cache before its first request runs: each
   request's argv[1] (keyspace/_ktable.h's ktable_prefetch_request), first the one in hand,
   then the reader's queue from its end (the order they run in), so that a read of commands
   on random keys waits for memory about once rather than once a request (redis-benchmark
   -P16 on 100,000 keys: bench/RESULTS.md). Only a hint: a key that is none, a database
   that a SELECT in the read leaves, cost a few loads; nothing changes, so the Python
   (ClientProtocol.data_received) has no counterpart. */
static void
prefetch_read(PyObject *c, PyObject *argv)
{
    PyObject *db = C(c, C_DB);
    if (kt != NULL && Py_TYPE(db) == database_type && slots_all_set(db, database_off, D_N))
        ktable_prefetch_read(kt, SLOT_AT(db, database_off[D_DATA]),
                             SLOT_AT(db, database_off[D_EXPIRES]), argv,
                             SLOT_AT(C(c, C_READER), reader_off[R_QUEUE]));
}

static PyObject *
received(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 2, "received(protocol, data)");
    PyObject *proto = args[0], *data = args[1];
    if (Py_TYPE(proto) != proto_type || !PyBytes_CheckExact(data) ||
            !slots_all_set(proto, proto_off, P_N))
        goto general;
    PyObject *c = P(proto, P_CLIENT), *core = P(proto, P_CORE);
    if (Py_TYPE(c) != client_type || !slots_all_set(c, client_off, C_N) ||
            C(c, C_CLOSED) != Py_False || C(c, C_CLOSE_AFTER_REPLY) != Py_False ||
            C(c, C_BLOCKED) != Py_None || C(c, C_STREAM) != Py_None ||
            Py_TYPE(C(c, C_READER)) != reader_type || !PyList_CheckExact(C(c, C_OUT)) ||
            !slots_all_set(C(c, C_READER), reader_off, R_N))
        goto general;
    /* (with AOF on, a reply may have to wait for the AOF's write; with an output limit for
       normal clients, each reply is checked against it: the Python decides) */
    if (Py_TYPE(core) != core_type || !slots_all_set(core, core_off, K_N) ||
            SLOT_AT(core, core_off[K_AOF_ON]) != Py_False ||
            SLOT_AT(core, core_off[K_OBUF_NORMAL]) != Py_False ||
            !PyList_CheckExact(SLOT_AT(core, core_off[K_PENDING_FLUSH])))
        goto general;
    PyObject *stats = SLOT_AT(core, core_off[K_STATS]);
    if (Py_TYPE(stats) != stats_type || !slots_all_set(stats, stats_off, T_N))
        goto general;
    Py_INCREF(stats);
    /* -- ClientProtocol.data_received -- */
    Py_INCREF(c);
    Py_INCREF(core);
    PyObject *result = NULL, *argv = NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);   /* int(time.time() * 1000) */
    PyObject *now = PyLong_FromLongLong((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    if (now == NULL)
        goto done;
    slot_put(core, core_off[K_NOW_MS], now);
    /* -- Client.receive_data: the counters, then the reader -- */
    Py_ssize_t len = PyBytes_GET_SIZE(data);
    if (slot_add(c, client_off[C_NET_IN], len) < 0 ||
            slot_add(stats, stats_off[T_NET_IN], len) < 0 ||
            slot_add(stats, stats_off[T_READS], 1) < 0)
        goto done;
    slot_put(c, client_off[C_LAST_INTERACTION], now);
    PyObject *reader = C(c, C_READER);
    Py_INCREF(reader);
    PyObject *fargs[3] = {NULL, reader, data};
    argv = PyObject_Vectorcall(py_first, fargs + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (argv == NULL) {
        Py_DECREF(reader);
        goto done;
    }
    Py_DECREF(reader);
    int queued = argv == Py_None ? 1 : reader_flag(C(c, C_READER), R_QUEUE);
    if (queued < 0)
        goto done;
    PyObject *r;
    if (!queued) {   /* a lone request: run it here */
        PyObject *eargs[4] = {NULL, core, c, argv};   /* execute(core, c, argv) */
        r = PyObject_Vectorcall(py_execute, eargs + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (r != NULL) {
            Py_DECREF(r);
            /* reader.spent and not reader.queue */
            int spent = reader_flag(C(c, C_READER), R_SPENT);
            if (spent > 0) {
                queued = reader_flag(C(c, C_READER), R_QUEUE);
                spent = queued < 0 ? -1 : !queued;
            }
            if (spent < 0) {
                r = NULL;
            } else if (spent) {
                r = Py_None;   /* the read is all run */
                Py_INCREF(r);
            } else {
                r = process(core, c, Py_None);
            }
        }
    } else {
        prefetch_read(c, argv);
        r = process(core, c, argv);
    }
    if (r == NULL)
        goto done;
    Py_DECREF(r);
    /* -- back in ClientProtocol.data_received: the reply, then what the commands asked -- */
    PyObject *out = C(c, C_OUT);
    if (out == NULL || !PyList_CheckExact(out)) {
        PyErr_SetString(PyExc_TypeError, "Client.out is not a list");
        goto done;
    }
    /* maxmemory-clients (0: off, the common case): the replies are written now, the client's
       memory counted after them (ServerCore.after_read) unless it is quiet (nothing buffered
       before or after the read, its transport not paused); otherwise they leave with the
       pass's other replies (Server._flush_deferred: flush() below) */
    PyObject *mmc = SLOT_AT(core, core_off[K_MAXMEMORY_CLIENTS]);
    int evicting = mmc == zero ? 0 : PyObject_IsTrue(mmc);
    int closing = evicting < 0 ? -1 : PyObject_IsTrue(C(c, C_CLOSE_AFTER_REPLY));
    if (closing < 0)
        goto done;
    if (PyList_GET_SIZE(out) || closing) {
        if (!evicting) {
            if (PyList_Append(SLOT_AT(core, core_off[K_PENDING_FLUSH]), c) < 0)
                goto done;
        } else if (write_one(c, stats) < 0) {
            goto done;
        }
    }
    if (evicting && C(c, C_MEM_QUIET) == Py_True && C(c, C_WRITE_PAUSED) == Py_False) {
        int spent = reader_flag(C(c, C_READER), R_SPENT);
        if (spent > 0) {
            int queued = reader_flag(C(c, C_READER), R_QUEUE);
            spent = queued < 0 ? -1 : !queued;
        }
        if (spent < 0)
            goto done;
        evicting = !spent;
    }
    if (evicting) {
        r = PyObject_CallMethodOneArg(core, str_after_read, c);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    const Py_ssize_t flag_offs[2] = {core_off[K_PENDING_FLUSH], core_off[K_SHUTDOWN_ASAP]};
    if (after_callback(P(proto, P_SERVER), core, flag_offs) < 0)
        goto done;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(now);
    Py_XDECREF(argv);
    Py_DECREF(stats);
    Py_DECREF(core);
    Py_DECREF(c);
    return result;
general: {
        PyObject *gargs[3] = {NULL, proto, data};
        return call_n(py_data_received, gargs, 2);
    }
}

static PyObject *
bind_master_link(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const slots_spec specs[3] = {SLOTS_OF(link), SLOTS_OF(io), SLOTS_OF(lcore)};
    if (bind_args(nargs == 3, LINK_USAGE, args, specs, 3) < 0 ||
            keep_attr(&py_link_received, args[0], "data_received") ||
            intern(&str_core, "core") || intern(&str_stop_event, "_stop_event") ||
            intern(&str_is_set, "is_set") || intern(&str_replica, "replica") ||
            intern(&str_on_data, "on_data") || intern(&str_failed, "_failed") ||
            intern(&str_schedule_flush, "schedule_flush") ||
            intern(&str_shutdown_from_command, "shutdown_from_command") ||
            intern(&str_flush_scheduled, "_flush_scheduled"))
        return NULL;
    link_bound = 1;
    Py_RETURN_NONE;
}

/* link_received(protocol, data) is ``_MasterLinkProtocol.data_received(data)``
   (net/replica_io.py), a read of the master link's main channel, with ``ReplicaIO._dispatch``
   inside it: the replica side (``core.replication.replica``), nothing if the server is
   stopping, the clock, the side's ``on_data`` (its common case in C: the replica's
   _streamread.c), an exception (not a BaseException) to ``ReplicaIO._failed``, then the
   core's flags. The common case: protocol, ReplicaIO and core exactly those classes, the
   main channel (not the rdb channel), bytes; anything else calls
   the method, the reference (tests/unit/test_replica_io.py compares both). */
static PyObject *
link_received(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(link_bound, nargs, 2, "link_received(protocol, data)");
    PyObject *proto = args[0], *data = args[1];
    if (Py_TYPE(proto) != link_type || !PyBytes_CheckExact(data) ||
            !slots_all_set(proto, link_off, L_N) || SLOT_AT(proto, link_off[L_RDB]) != Py_False)
        goto general;
    PyObject *io = SLOT_AT(proto, link_off[L_IO]);
    if (Py_TYPE(io) != io_type || !slots_all_set(io, io_off, I_N))
        goto general;
    PyObject *server = Py_NewRef(SLOT_AT(io, io_off[I_SERVER]));
    PyObject *core = PyObject_GetAttr(server, str_core), *side = NULL, *result = NULL;
    PyObject *token = Py_NewRef(SLOT_AT(proto, link_off[L_TOKEN]));
    if (core == NULL)
        goto done;
    if (Py_TYPE(core) != lcore_type || !slots_all_set(core, lcore_off, LK_N)) {
        Py_DECREF(core);
        Py_DECREF(server);
        Py_DECREF(token);
        goto general;
    }
    /* -- ReplicaIO._dispatch: the side, unless the server stops -- */
    PyObject *repl = SLOT_AT(core, lcore_off[LK_REPLICATION]);
    if (repl == Py_None) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if ((side = PyObject_GetAttr(repl, str_replica)) == NULL)
        goto done;
    if (side == Py_None) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *ev = PyObject_GetAttr(server, str_stop_event);
    if (ev == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            goto done;
        PyErr_Clear();
        ev = Py_NewRef(Py_None);
    }
    int stopping = 0;
    if (ev != Py_None) {
        PyObject *r = PyObject_CallMethodNoArgs(ev, str_is_set);
        stopping = r == NULL ? -1 : PyObject_IsTrue(r);
        Py_XDECREF(r);
    }
    Py_DECREF(ev);
    if (stopping < 0)
        goto done;
    if (stopping) {   /* shutting down: the links are being closed, nothing reconnects */
        result = Py_NewRef(Py_None);
        goto done;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);   /* int(time.time() * 1000) */
    PyObject *now = PyLong_FromLongLong((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    if (now == NULL)
        goto done;
    slot_set(core, lcore_off[LK_NOW_MS], now);
    PyObject *callback = PyObject_GetAttr(side, str_on_data);
    if (callback == NULL)
        goto done;
    PyObject *cargs[3] = {NULL, token, data};
    PyObject *r = call_n(callback, cargs, 2);
    if (r == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            Py_DECREF(callback);
            goto done;
        }
        /* a bug must not kill the loop: log, drop, retry (the Python's) */
        PyObject *e = PyErr_GetRaisedException();
        PyObject *fargs[5] = {io, callback, Py_False, token, e};
        r = PyObject_VectorcallMethod(str_failed, fargs, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                      NULL);
        Py_DECREF(e);
    }
    Py_DECREF(callback);
    if (r == NULL)
        goto done;
    Py_DECREF(r);
    const Py_ssize_t flag_offs[2] = {lcore_off[LK_PENDING_FLUSH], lcore_off[LK_SHUTDOWN_ASAP]};
    if (after_callback(server, core, flag_offs) < 0)
        goto done;
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(side);
    Py_XDECREF(core);
    Py_DECREF(server);
    Py_DECREF(token);
    return result;
general: {
        PyObject *gargs[3] = {NULL, proto, data};
        return call_n(py_link_received, gargs, 2);
    }
}

SLOTS_MODULE(_serve, "A client connection's read, in C when it is the common one.",
    FASTCALL("bind", bind,
             BIND_USAGE ": the classes whose slots received() moves, and what it calls."),
    FASTCALL("received", received,
             "received(protocol, data): ClientProtocol.data_received(data), its common case in "
             "C."),
    FASTCALL("send_reply", send_reply_entry,
             "send_reply(transport, fd, data): a reply's bytes written as write_one writes "
             "them; True when written to fd directly"),
    FASTCALL("flush", flush,
             "flush(server): Server._flush_deferred(), the loop pass's writes, its common case "
             "in C."),
    FASTCALL("hook_pass", hook_pass,
             "hook_pass(loop, uv_loop_capsule, uvloop_path, server): the pass's writes at the "
             "end of each pass of uvloop's loop (a libuv check handle)."),
    FASTCALL("unhook_pass", unhook_pass,
             "unhook_pass(hook): hook_pass's handle closed (before the loop closes)."),
    FASTCALL("bind_master_link", bind_master_link,
             LINK_USAGE ": the classes whose slots link_received() reads."),
    FASTCALL("link_received", link_received,
             "link_received(protocol, data): _MasterLinkProtocol.data_received(data), its "
             "common case in C."))
