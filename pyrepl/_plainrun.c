/* pyrepl._plainrun: the per-request loops of a run of plain commands (pyrepl/plainrun.py),
   in C.

   A pipelining client's run of one command (redis-benchmark -P16: sixteen SETs a read) is
   checked once and applied in one pass; what is left per request is a loop over the
   requests, which costs more in Python's interpreter than the dict operation it makes
   (bench/RESULTS.md, "Runs counted in C"). These loops make no decision of their own:
   ``run_length`` counts what plainrun.select would, ``store_pairs`` and ``lookup_strings`` are
   ``d[r[1]] = r[2]`` and ``d.get(r[1])`` for each request r (SET's and GET's whole runs,
   pyrepl/commands/strings.py), ``bulk_replies`` the wire bytes of a run's bulk-string and nil
   replies in one object (pyrepl/resp/writer.py's encode_replies). ``start`` and ``account``
   are plainrun.start's and plainrun.account's common case (a run of one command): the
   checks made once for a run and the client's and the command's counters, on the same slots
   (pyrepl/_slots.h), the Python function for anything else. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MODULE_NAME "pyrepl._plainrun"
#include "_slots.h"
#include "_memacct.h"
#include "_latency.h"
#include "keyspace/_ktable.h"
#include "_served.h"

static KTable_CAPI *kt;     /* the keyspace's table (keyspace/_ktable.h), on first use */

/* 1 when d is a KeyTable, 0 when a dict, -1 (an exception set) otherwise. */
static int
table_kind(PyObject *d, const char *usage)
{
    if (kt == NULL && (kt = PyCapsule_Import(KTABLE_CAPSULE, 0)) == NULL)
        return -1;
    if (kt->version != KTABLE_CAPI_VERSION) {
        kt = NULL;
        PyErr_SetString(PyExc_ImportError, "pyrepl.keyspace._ktable: another C API version");
        return -1;
    }
    if (Py_TYPE(d) == kt->type)
        return 1;
    if (PyDict_Check(d))
        return 0;
    usage_error(usage);
    return -1;
}

/* run_length(rest, name, min_args, max_args) -> int

   How many requests, taken from the end of rest (a list of requests, last first, as a
   reader's queue holds them), have ``name`` as their first argument (the same object, or
   equal bytes) and between min_args and max_args arguments: the run of one command that a
   pipelining client sent behind a request (pyrepl/plainrun.py's select). It stops at the
   first that does not qualify, so the work is proportional to the run found. */
/* run_length's count (rest a list, name bytes). */
static Py_ssize_t
count_run(PyObject *rest, PyObject *name, Py_ssize_t lo, Py_ssize_t hi)
{
    const char *nd = PyBytes_AS_STRING(name);
    Py_ssize_t nlen = PyBytes_GET_SIZE(name), n = PyList_GET_SIZE(rest), k = 0;
    while (k < n) {
        PyObject *r = PyList_GET_ITEM(rest, n - 1 - k);
        if (!PyList_Check(r))
            break;
        Py_ssize_t m = PyList_GET_SIZE(r);
        if (m < 1 || m < lo || m > hi)
            break;
        PyObject *a = PyList_GET_ITEM(r, 0);
        if (a != name && !(PyBytes_Check(a) && PyBytes_GET_SIZE(a) == nlen &&
                           memcmp(PyBytes_AS_STRING(a), nd, (size_t)nlen) == 0))
            break;
        k++;
    }
    return k;
}

static PyObject *
run_length(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[0]) || !PyBytes_Check(args[1]))
        return usage_error("run_length(rest: list, name: bytes, min_args, max_args)");
    Py_ssize_t lo = PyLong_AsSsize_t(args[2]), hi = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(count_run(args[0], args[1], lo, hi));
}

/* 1 when every request of reqs (a list) is a list of exactly n arguments, else 0. */
static int
all_of_len(PyObject *reqs, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(reqs); i++) {
        PyObject *r = PyList_GET_ITEM(reqs, i);
        if (!PyList_Check(r) || PyList_GET_SIZE(r) != n)
            return 0;
    }
    return 1;
}

/* store_pairs(d, reqs) -> bool

   ``for r in reqs: d[r[1]] = r[2]`` when every request is a list of exactly three (a plain
   SET); False, with nothing stored, when one is not. d: a KeyTable (a database's) or a dict. */
static PyObject *
store_pairs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char usage[] = "store_pairs(d: KeyTable | dict, reqs: list)";
    if (nargs != 2 || !PyList_Check(args[1]))
        return usage_error(usage);
    PyObject *d = args[0], *reqs = args[1];
    int table = table_kind(d, usage);
    if (table < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(reqs), i;
    if (!all_of_len(reqs, 3))
        Py_RETURN_FALSE;
    for (i = 0; i < n && i < PyList_GET_SIZE(reqs); i++) {
        PyObject *r = PyList_GET_ITEM(reqs, i);
        if (!PyList_Check(r) || PyList_GET_SIZE(r) != 3)   /* (a key's __eq__ changed reqs) */
            return PyErr_Format(PyExc_RuntimeError, "store_pairs: reqs changed");
        PyObject *k = PyList_GET_ITEM(r, 1), *v = PyList_GET_ITEM(r, 2);
        if ((table ? kt->set(d, k, v) : PyDict_SetItem(d, k, v)) < 0)
            return NULL;
    }
    Py_RETURN_TRUE;
}

/* lookup_strings(d, reqs) -> list or None

   ``[d.get(r[1]) for r in reqs]`` when every value found is bytes (a plain GET's), else None;
   every request must be a list of two or more. d: a KeyTable (get touches each key's age, as
   GET's lookupKey) or a dict. */
static PyObject *
lookup_strings(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char usage[] = "lookup_strings(d: KeyTable | dict, reqs: list)";
    if (nargs != 2 || !PyList_Check(args[1]))
        return usage_error(usage);
    PyObject *d = args[0], *reqs = args[1];
    int table = table_kind(d, usage);
    if (table < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(reqs);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(reqs, i);
        if (!PyList_Check(r) || PyList_GET_SIZE(r) < 2) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_ValueError, "lookup_strings: a request without a key");
            return NULL;
        }
        PyObject *k = PyList_GET_ITEM(r, 1);
        /* (a KeyTable's get answers a new reference, a dict's a borrowed one) */
        PyObject *v = table ? kt->get(d, k) : Py_XNewRef(PyDict_GetItemWithError(d, k));
        if (v == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(out);
                return NULL;
            }
            v = Py_NewRef(Py_None);
        } else if (!PyBytes_CheckExact(v)) {
            Py_DECREF(v);
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

/* count_keys(d, reqs) -> list or None

   ``[int(r[1] in d) for r in reqs]`` when every request is a list of exactly two (a one-key
   EXISTS), else None; no key's age touched (EXISTS's LOOKUP_NOTOUCH). d: a KeyTable or a
   dict. */
static PyObject *
count_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char usage[] = "count_keys(d: KeyTable | dict, reqs: list)";
    if (nargs != 2 || !PyList_Check(args[1]))
        return usage_error(usage);
    PyObject *d = args[0], *reqs = args[1];
    int table = table_kind(d, usage);
    if (table < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(reqs), i;
    if (!all_of_len(reqs, 2))
        Py_RETURN_NONE;
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *r;
        if (i >= PyList_GET_SIZE(reqs) || !PyList_Check(r = PyList_GET_ITEM(reqs, i)) ||
                PyList_GET_SIZE(r) != 2) {   /* (a key's __eq__ changed reqs) */
            Py_DECREF(out);
            return PyErr_Format(PyExc_RuntimeError, "count_keys: reqs changed");
        }
        PyObject *k = PyList_GET_ITEM(r, 1);
        int has = table ? kt->contains(d, k) : PyDict_Contains(d, k);
        if (has < 0) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, PyLong_FromLong(has));   /* (0 and 1: CPython's cached) */
    }
    return out;
}

/* The decimal digits of v >= 0. */
static int
ndigits(Py_ssize_t v)
{
    int k = 1;
    while (v >= 10) {
        v /= 10;
        k++;
    }
    return k;
}

/* int_replies(replies) -> bytes or None

   The wire bytes of a run's replies when each is an int (":<n>\r\n", what writer.encode
   writes for one in either protocol) that fits a long long, in one bytes object; None when
   one is anything else. */
static PyObject *
int_replies(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1 || !PyList_Check(args[0]))
        return usage_error("int_replies(replies: list)");
    PyObject *replies = args[0];
    Py_ssize_t n = PyList_GET_SIZE(replies);
    if (n > PY_SSIZE_T_MAX / 24)
        return PyErr_NoMemory();
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 24);
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out);
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(replies, i);
        int overflow = 0;
        long long v = PyLong_CheckExact(r) ? PyLong_AsLongLongAndOverflow(r, &overflow) : 0;
        if (!PyLong_CheckExact(r) || overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        at += resp_header(w + at, ':', v);
    }
    if (_PyBytes_Resize(&out, at) < 0)
        return NULL;
    return out;
}

/* bulk_replies(replies, nil) -> bytes or None

   The wire bytes of a run's replies when each is bytes (a bulk string: "$<len>\r\n<bytes>\r\n")
   or None (``nil``: RESP2's "$-1\r\n" or RESP3's "_\r\n"), in one bytes object; None when one
   is anything else. What pyrepl/resp/writer.py's encode writes for each, joined. */
static PyObject *
bulk_replies(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0]) || !PyBytes_Check(args[1]))
        return usage_error("bulk_replies(replies: list, nil: bytes)");
    PyObject *replies = args[0], *nil = args[1];
    Py_ssize_t n = PyList_GET_SIZE(replies), i, size = 0;
    Py_ssize_t nil_len = PyBytes_GET_SIZE(nil);
    for (i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(replies, i);
        if (r == Py_None) {
            size += nil_len;
        } else if (PyBytes_CheckExact(r)) {
            Py_ssize_t len = PyBytes_GET_SIZE(r);
            /* "$" len "\r\n" data "\r\n" */
            size += 1 + ndigits(len) + 2 + len + 2;
        } else {
            Py_RETURN_NONE;
        }
        if (size < 0) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out);
    for (i = 0; i < n; i++) {
        PyObject *r = PyList_GET_ITEM(replies, i);
        if (r == Py_None) {
            memcpy(w, PyBytes_AS_STRING(nil), (size_t)nil_len);
            w += nil_len;
        } else {   /* (not resp_bulk_at: the digits' count is known here, ~27 instructions
                      a reply less) */
            Py_ssize_t len = PyBytes_GET_SIZE(r);
            int k = ndigits(len);
            Py_ssize_t v = len;
            *w = '$';
            for (int j = k; j > 0; j--) {
                w[j] = (char)('0' + v % 10);
                v /= 10;
            }
            w += 1 + k;
            *w++ = '\r';
            *w++ = '\n';
            memcpy(w, PyBytes_AS_STRING(r), (size_t)len);
            w += len;
            *w++ = '\r';
            *w++ = '\n';
        }
    }
    return out;
}

/* -- account -------------------------------------------------------------------------- */

enum {
    AK_CMDSTATS, AK_LATENCY_TRACKING, AK_GATED, AK_KEYS_WAITED, AK_TRACKING_ON, AK_MAXMEMORY,
    AK_RUN_MAXMEMORY, AK_DIRTY, AK_CALL_DEPTH, AK_PENDING, AK_N
};
static const char *const ak_names[AK_N] = {
    "cmdstats", "latency_tracking", "gated", "keys_waited", "tracking_on", "maxmemory",
    "run_maxmemory", "dirty", "_call_depth", "_pending",
};
enum { AC_COMMANDS, AC_LAST_CMD, AC_IN_MULTI, AC_REPLY_MODE, AC_PROPAGATE_ARGV, AC_DB, AC_N };
static const char *const ac_names[AC_N] = {"commands", "last_cmd", "in_multi", "reply_mode",
                                           "propagate_argv", "db"};
enum { AM_PLAIN, AM_MIN_ARGS, AM_MAX_ARGS, AM_PROPAGATES, AM_HANDLER, AM_N };
static const char *const am_names[AM_N] = {"plain", "min_args", "max_args", "propagates",
                                           "handler"};
/* served_run's slots of the core, the client and the command: read behind the gate only
   (not among the slots every run checks) */
static const char *const akc_names[1] = {"served_slots"};
enum { ACC_CLUSTER_FLAGS, ACC_CLUSTER_SLOT, ACC_KIND, ACC_N };
static const char *const acc_names[ACC_N] = {"cluster_flags", "cluster_slot", "kind"};
enum { AMC_FIRST_KEY, AMC_LAST_KEY, AMC_STEP, AMC_KEYS_FN, AMC_N };
static const char *const amc_names[AMC_N] = {"first_key", "last_key", "step", "keys_fn"};
static Py_ssize_t akc_off[1], acc_off[ACC_N], amc_off[AMC_N];
enum { AS_CALLS, AS_TIMED_NS, AS_TIMED, AS_LATENCY, AS_TIMING, AS_N };
static const char *const as_names[AS_N] = {"calls", "timed_ns", "timed", "latency", "timing"};
enum { AL_BUCKETS, AL_N };
static const char *const al_names[AL_N] = {"buckets"};
enum { AD_ID, AD_N };
static const char *const ad_names[AD_N] = {"id"};
static Py_ssize_t ak_off[AK_N], ac_off[AC_N], am_off[AM_N], as_off[AS_N], al_off[AL_N],
                  ad_off[AD_N];
static PyTypeObject *ak_type, *ac_type, *am_type, *as_type, *al_type, *ad_type;
static PyObject *name_cache, *py_account, *py_start, *py_propagating, *reply_error;
static PyObject *propagate_call;   /* (core, c, argv, changed): _dispatch's, or the Python */
static PyObject *str_end_span, *str_propagate_now, *str_failed_call, *str_master;
static int bound;   /* bind() ran to its end */

/* (account and start: plainrun's; propagating_loop: dispatch's; propagate_call: _dispatch's,
   or propagation's without it) */
#define BIND_USAGE "bind(ServerCore, Client, Command, CommandStat, LatencyHistogram, " \
                   "NAME_CACHE, account, start, Database, ReplyError, propagating_loop, " \
                   "propagate_call)"

static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const slots_spec specs[12] = {
        SLOTS_OF(ak), SLOTS_OF(ac), SLOTS_OF(am), SLOTS_OF(as), SLOTS_OF(al),
        KEPT(&name_cache), KEPT(&py_account), KEPT(&py_start), SLOTS_OF(ad), KEPT(&reply_error),
        KEPT(&py_propagating), KEPT(&propagate_call),
    };
    if (bind_args(nargs == 12 && PyDict_CheckExact(args[5]), BIND_USAGE, args, specs, 12) < 0 ||
            slots_bind(args[0], akc_names, 1, akc_off) < 0 ||
            slots_bind(args[1], acc_names, ACC_N, acc_off) < 0 ||
            slots_bind(args[2], amc_names, AMC_N, amc_off) < 0)
        return NULL;
    if (intern(&str_end_span, "end_span") < 0 ||
            intern(&str_propagate_now, "propagate_now") < 0 ||
            intern(&str_failed_call, "failed_call") < 0 || intern(&str_master, "master") < 0)
        return NULL;
    bound = 1;
    Py_RETURN_NONE;
}

/* plainrun.served_run for a run of one command (first, then rest's last k, last first):
   how many of rest's it keeps (the run cut before its first request whose keys the cluster
   redirect would not let run here with no check: _served.h), -1 when not even first's (no
   run), -2 when the Python must say (a flag or kind of another type); c.cluster_slot set
   to the run's last slot, as the redirect would leave it. */
static Py_ssize_t
served_run(const char *table, PyObject *c, PyObject *cmd0, PyObject *first, PyObject *rest,
           Py_ssize_t k)
{
    if (!slots_all_set(c, acc_off, ACC_N) || !slots_all_set(cmd0, amc_off, AMC_N))
        return -2;
    PyObject *flags = SLOT_AT(c, acc_off[ACC_CLUSTER_FLAGS]), *kind = SLOT_AT(c, acc_off[ACC_KIND]);
    if (!PyLong_CheckExact(flags) || !PyUnicode_CheckExact(kind))
        return -2;
    if (Py_SIZE(flags) != 0)   /* (ASKING, READONLY: one by one through the Python) */
        return -1;
    int slot = -1;
    if (kind != str_master && PyUnicode_Compare(kind, str_master) != 0) {
        PyObject *fk = SLOT_AT(cmd0, amc_off[AMC_FIRST_KEY]),
                 *lk = SLOT_AT(cmd0, amc_off[AMC_LAST_KEY]),
                 *step = SLOT_AT(cmd0, amc_off[AMC_STEP]),
                 *fn = SLOT_AT(cmd0, amc_off[AMC_KEYS_FN]);
        Py_ssize_t n = PyList_GET_SIZE(rest);
        for (Py_ssize_t i = 0; i <= k; i++) {
            PyObject *r = i == 0 ? first : PyList_GET_ITEM(rest, n - i);
            int s = served_slot(table, r, fk, lk, step, fn);
            if (s == SERVED_NOT) {
                k = i - 1;
                break;
            }
            slot = s;
        }
        if (k < 0)
            return -1;
    }
    return slot_set_int(c, acc_off[ACC_CLUSTER_SLOT], slot) < 0 ? -3 : k;
}

/* start(core, c, first, rest): plainrun.start, in C when the run is ``first``'s command
   repeated (its common case: a pipelining client's run of one command) or there is none
   (None); the Python function otherwise (which also answers None). Returns (cmds, reqs,
   True). */
static PyObject *
start(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 4, "start(core, c, first, rest)");
    PyObject *core = args[0], *c = args[1], *first = args[2], *rest = args[3];
    if (py_start == NULL || Py_TYPE(core) != ak_type || !slots_all_set(core, ak_off, AK_N) ||
            Py_TYPE(c) != ac_type || !slots_all_set(c, ac_off, AC_N) ||
            !PyList_CheckExact(first) || PyList_GET_SIZE(first) == 0 ||
            !PyBytes_CheckExact(PyList_GET_ITEM(first, 0)) || !PyList_CheckExact(rest))
        goto general;
    PyObject *name = PyList_GET_ITEM(first, 0);
    PyObject *cmd0 = PyDict_GetItemWithError(name_cache, name), *st0, *cmdstats;
    if (cmd0 == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;     /* (core.name_cache is NAME_CACHE) */
    }
    if (Py_TYPE(cmd0) != am_type || !slots_all_set(cmd0, am_off, AM_N))
        goto general;
    /* the Python's first test, when one of its terms answers it: no run (a MULTI, an EXEC,
       a command queued inside them, a replica's master stream of those) */
    PyObject *gated = SLOT_AT(core, ak_off[AK_GATED]);
    const char *table = NULL;   /* (the gate up for cluster mode alone: plainrun.served_run) */
    if (SLOT_AT(cmd0, am_off[AM_PLAIN]) == Py_False ||
            (gated == Py_True && SLOT_AT(core, akc_off[0]) == Py_None) ||
            SLOT_AT(core, ak_off[AK_KEYS_WAITED]) == Py_True ||
            SLOT_AT(core, ak_off[AK_TRACKING_ON]) == Py_True ||
            SLOT_AT(c, ac_off[AC_IN_MULTI]) == Py_True ||
            slot_int(SLOT_AT(c, ac_off[AC_REPLY_MODE])) > 0)
        Py_RETURN_NONE;
    if (SLOT_AT(cmd0, am_off[AM_PLAIN]) != Py_True ||
            (gated != Py_False && (gated != Py_True ||
                (table = served_table(SLOT_AT(core, akc_off[0]))) == NULL)) ||
            (slot_int(SLOT_AT(core, ak_off[AK_MAXMEMORY])) != 0 &&      /* (evict.room_for_run) */
             !pyrepl_memacct_within(slot_int(SLOT_AT(core, ak_off[AK_RUN_MAXMEMORY])))) ||
            SLOT_AT(core, ak_off[AK_KEYS_WAITED]) != Py_False ||
            SLOT_AT(core, ak_off[AK_TRACKING_ON]) != Py_False ||
            SLOT_AT(c, ac_off[AC_IN_MULTI]) != Py_False ||
            slot_int(SLOT_AT(c, ac_off[AC_REPLY_MODE])) != 0 ||
            !PyDict_CheckExact(cmdstats = SLOT_AT(core, ak_off[AK_CMDSTATS])))
        goto general;
    st0 = PyDict_GetItemWithError(cmdstats, cmd0);
    if (st0 == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto general;
    }
    long long timing, lo, hi;
    if (Py_TYPE(st0) != as_type || !slots_all_set(st0, as_off, AS_N) ||
            (timing = slot_int(SLOT_AT(st0, as_off[AS_TIMING]))) <= 0 ||
            (lo = slot_int(SLOT_AT(cmd0, am_off[AM_MIN_ARGS]))) < 0 ||
            (hi = slot_int(SLOT_AT(cmd0, am_off[AM_MAX_ARGS]))) < 0 ||
            PyList_GET_SIZE(first) < lo || PyList_GET_SIZE(first) > hi)
        goto general;
    Py_ssize_t k = count_run(rest, name, lo > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : (Py_ssize_t)lo,
                             hi > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : (Py_ssize_t)hi);
    if (k == 0)
        goto general;
    Py_ssize_t n = PyList_GET_SIZE(rest);
    if (table != NULL) {
        k = served_run(table, c, cmd0, first, rest, k);
        if (k == -3)
            return NULL;
        if (k == -2)
            goto general;
        if (k == -1)
            Py_RETURN_NONE;
    }
    /* reqs = rest[-k:] + [first], reversed; cmds = [cmd0] * (k + 1) */
    PyObject *reqs = PyList_New(k + 1), *cmds = PyList_New(k + 1);
    if (reqs == NULL || cmds == NULL) {
        Py_XDECREF(reqs);
        Py_XDECREF(cmds);
        return NULL;
    }
    for (Py_ssize_t i = 0; i <= k; i++) {
        PyObject *r = i == 0 ? first : PyList_GET_ITEM(rest, n - i);
        Py_INCREF(r);
        PyList_SET_ITEM(reqs, i, r);
        Py_INCREF(cmd0);
        PyList_SET_ITEM(cmds, i, cmd0);
    }
    PyObject *run = PyTuple_Pack(3, cmds, reqs, Py_True);
    Py_DECREF(cmds);
    Py_DECREF(reqs);
    return run;
general:
    return PyObject_Vectorcall(py_start, args, nargs, NULL);
}

/* account(core, c, cmds, one, ns): plainrun.account, in C for a run of one command whose
   stats record exists; the Python function otherwise. */
static PyObject *
account(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 5, "account(core, c, cmds, one, ns)");
    PyObject *core = args[0], *c = args[1], *cmds = args[2];
    long long ns = slot_int(args[4]);
    if (py_account == NULL || args[3] != Py_True || ns < 0 || !PyList_CheckExact(cmds) ||
            PyList_GET_SIZE(cmds) == 0 || Py_TYPE(core) != ak_type ||
            !slots_all_set(core, ak_off, AK_N) || Py_TYPE(c) != ac_type ||
            !slots_all_set(c, ac_off, AC_N) || !PyDict_CheckExact(SLOT_AT(core, ak_off[AK_CMDSTATS])))
        goto general;
    PyObject *st = PyDict_GetItemWithError(SLOT_AT(core, ak_off[AK_CMDSTATS]),
                                           PyList_GET_ITEM(cmds, 0));
    if (st == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto general;
    }
    PyObject *hist;
    if (Py_TYPE(st) != as_type || !slots_all_set(st, as_off, AS_N) ||
            Py_TYPE(hist = SLOT_AT(st, as_off[AS_LATENCY])) != al_type ||
            !slots_all_set(hist, al_off, AL_N))
        goto general;
    /* core.latency_tracking: the directive's value (dispatch.refresh_timing) */
    PyObject *flag = SLOT_AT(core, ak_off[AK_LATENCY_TRACKING]);
    if (flag != Py_True && flag != Py_False)
        goto general;
    int tracking = flag == Py_True;
    Py_ssize_t n = PyList_GET_SIZE(cmds);
    long long per_call = ns / n;
    Py_INCREF(st);
    PyObject *result = NULL;
    if (slot_add(c, ac_off[AC_COMMANDS], n) < 0)
        goto done;
    slot_put(c, ac_off[AC_LAST_CMD], PyList_GET_ITEM(cmds, n - 1));
    if (slot_add(st, as_off[AS_CALLS], n) < 0 || slot_add(st, as_off[AS_TIMED_NS], per_call) < 0 ||
            slot_add(st, as_off[AS_TIMED], 1) < 0)
        goto done;
    if (tracking) {   /* CommandStat.record: the bucket of Redis's latency histogram */
        long long v = per_call / 1000 * 1000;
        if (latency_add(hist, SLOT_AT(hist, al_off[AL_BUCKETS]), v == 0 ? 1 : v) < 0)
            goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(st);
    return result;
general:
    return PyObject_Vectorcall(py_account, args, nargs, NULL);
}

/* -- propagating ---------------------------------------------------------------------- */

/* core.end_span(c, reqs, a, b, db.id): requests a to b - 1 propagated as they arrived; -1
   with an error set on failure. */
static int
end_span(PyObject *core, PyObject *c, PyObject *reqs, Py_ssize_t a, Py_ssize_t b, PyObject *db)
{
    PyObject *pa = PyLong_FromSsize_t(a), *pb = PyLong_FromSsize_t(b);
    PyObject *id = Py_TYPE(db) == ad_type && SLOT_AT(db, ad_off[AD_ID]) != NULL
                   ? Py_NewRef(SLOT_AT(db, ad_off[AD_ID])) : PyObject_GetAttrString(db, "id");
    PyObject *r = NULL;
    if (pa != NULL && pb != NULL && id != NULL) {
        PyObject *cargs[6] = {core, c, reqs, pa, pb, id};
        r = PyObject_VectorcallMethod(str_end_span, cargs, 6, NULL);
    }
    Py_XDECREF(pa);
    Py_XDECREF(pb);
    Py_XDECREF(id);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* cmd's handler on argv: its reply, or for a ReplyError core.failed_call(c, cmd, e)'s (the
   error, counted); NULL on any other exception. */
static PyObject *
handled(PyObject *core, PyObject *c, PyObject *cmd, PyObject *argv)
{
    PyObject *hargs[2] = {c, argv};
    PyObject *r = PyObject_Vectorcall(SLOT_AT(cmd, am_off[AM_HANDLER]), hargs, 2, NULL);
    if (r != NULL || !PyErr_ExceptionMatches(reply_error))
        return r;
    PyObject *e = PyErr_GetRaisedException();
    PyObject *fargs[4] = {core, c, cmd, e};
    r = PyObject_VectorcallMethod(str_failed_call, fargs, 4, NULL);
    Py_DECREF(e);
    return r;
}

/* o is a non-empty list (or otherwise true): 1, 0, -1 with an error set */
static int
nonempty(PyObject *o)
{
    if (o != NULL && PyList_CheckExact(o))
        return PyList_GET_SIZE(o) != 0;
    return o == NULL ? 0 : PyObject_IsTrue(o);
}

/* propagating(core, c, cmds, reqs, replies): dispatch.propagating_loop (run_propagating's
   loop after a whole-run form), in C: each handler called at call depth + 1, its reply
   appended to replies (a ReplyError's through core.failed_call); a write that changed the
   dataset and propagates as it arrived joins the span (fed by core.end_span), anything else
   ends it and propagates through core.propagate_call, a command that never propagates
   through core.propagate_now when it queued something. The Python function for a call of
   other than its common types. */
static PyObject *
propagating(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    BOUND_ENTRY(bound, nargs, 5, "propagating(core, c, cmds, reqs, replies)");
    PyObject *core = args[0], *c = args[1], *cmds = args[2], *reqs = args[3],
             *replies = args[4];
    if (py_propagating == NULL || Py_TYPE(core) != ak_type || !slots_all_set(core, ak_off, AK_N) ||
            Py_TYPE(c) != ac_type || !slots_all_set(c, ac_off, AC_N) ||
            !PyList_CheckExact(cmds) || !PyList_CheckExact(reqs) ||
            !PyList_CheckExact(replies) || PyList_GET_SIZE(cmds) != PyList_GET_SIZE(reqs) ||
            slot_int(SLOT_AT(core, ak_off[AK_CALL_DEPTH])) < 0)
        goto general;
    Py_ssize_t n = PyList_GET_SIZE(cmds);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *cmd = PyList_GET_ITEM(cmds, i);
        if (Py_TYPE(cmd) != am_type || !slots_all_set(cmd, am_off, AM_N))
            goto general;
    }
    Py_INCREF(cmds);
    Py_INCREF(reqs);
    PyObject *depth = Py_NewRef(SLOT_AT(core, ak_off[AK_CALL_DEPTH]));
    PyObject *deeper = PyLong_FromLongLong(slot_int(depth) + 1);
    PyObject *span_db = Py_NewRef(SLOT_AT(c, ac_off[AC_DB]));
    Py_ssize_t span = -1;   /* the span's first request (-1: no span open) */
    int failed = deeper == NULL;
    slot_put(c, ac_off[AC_PROPAGATE_ARGV], Py_None);
    for (Py_ssize_t i = 0; !failed && i < n && i < PyList_GET_SIZE(cmds) &&
                           i < PyList_GET_SIZE(reqs); i++) {
        PyObject *cmd = PyList_GET_ITEM(cmds, i), *argv = PyList_GET_ITEM(reqs, i), *r;
        int propagates = PyObject_IsTrue(SLOT_AT(cmd, am_off[AM_PROPAGATES]));
        if (propagates < 0) {
            failed = 1;
            break;
        }
        if (!propagates) {
            if (span >= 0) {   /* (before it: a key it expires propagates at once) */
                failed = end_span(core, c, reqs, span, i, span_db) < 0;
                span = -1;
            }
            r = failed ? NULL : handled(core, c, cmd, argv);
            if (r == NULL || PyList_Append(replies, r) < 0) {
                Py_XDECREF(r);
                failed = 1;
                break;
            }
            Py_DECREF(r);
            int pending = nonempty(SLOT_AT(core, ak_off[AK_PENDING]));
            if (pending != 0) {
                PyObject *pargs[3] = {core, c, argv};
                r = pending < 0 ? NULL
                                : PyObject_VectorcallMethod(str_propagate_now, pargs, 3, NULL);
                Py_XDECREF(r);
                failed = r == NULL;
            }
            continue;
        }
        /* the dirty counter's value before (its object when not a plain int) */
        long long was = slot_int(SLOT_AT(core, ak_off[AK_DIRTY]));
        PyObject *was_o = was < 0 ? Py_XNewRef(SLOT_AT(core, ak_off[AK_DIRTY])) : NULL;
        slot_put(core, ak_off[AK_CALL_DEPTH], deeper);   /* (internal propagation waits) */
        r = handled(core, c, cmd, argv);
        slot_put(core, ak_off[AK_CALL_DEPTH], depth);
        if (r == NULL || PyList_Append(replies, r) < 0) {
            Py_XDECREF(r);
            Py_XDECREF(was_o);
            failed = 1;
            break;
        }
        Py_DECREF(r);
        PyObject *dirty = SLOT_AT(core, ak_off[AK_DIRTY]);
        long long now = slot_int(dirty);
        int changed = was >= 0 && now >= 0 ? was != now
                      : dirty == NULL || was_o == NULL ? dirty != was_o
                      : PyObject_RichCompareBool(dirty, was_o, Py_NE);
        Py_XDECREF(was_o);
        int pending = nonempty(SLOT_AT(core, ak_off[AK_PENDING]));
        if (changed < 0 || pending < 0) {
            failed = 1;
            break;
        }
        PyObject *pa = SLOT_AT(c, ac_off[AC_PROPAGATE_ARGV]);
        int verbatim = changed && pa == Py_None && !pending;
        if (span >= 0 && !(verbatim && SLOT_AT(c, ac_off[AC_DB]) == span_db)) {
            failed = end_span(core, c, reqs, span, i, span_db) < 0;
            span = -1;
        }
        if (failed)
            break;
        if (!verbatim && (changed || pa != Py_None || pending)) {   /* (else it does nothing) */
            PyObject *pargs[4] = {core, c, argv, changed ? Py_True : Py_False};
            r = PyObject_Vectorcall(propagate_call, pargs, 4, NULL);
            Py_XDECREF(r);
            failed = r == NULL;
        } else if (verbatim && span < 0) {
            span = i;
            Py_SETREF(span_db, Py_NewRef(SLOT_AT(c, ac_off[AC_DB])));
        }
    }
    slot_put(core, ak_off[AK_CALL_DEPTH], depth);
    if (span >= 0) {   /* (on an exception: the writes before the failing one) */
        PyObject *exc = PyErr_Occurred() ? PyErr_GetRaisedException() : NULL;
        int rc = end_span(core, c, reqs, span, PyList_GET_SIZE(replies), span_db);
        if (exc != NULL) {
            if (rc < 0)
                PyErr_Clear();
            PyErr_SetRaisedException(exc);
        } else {
            failed = failed || rc < 0;
        }
    }
    Py_DECREF(span_db);
    Py_DECREF(depth);
    Py_XDECREF(deeper);
    Py_DECREF(cmds);
    Py_DECREF(reqs);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
general:
    return PyObject_Vectorcall(py_propagating, args, nargs, NULL);
}

SLOTS_MODULE(_plainrun, "The per-request loops of a run of plain commands, in C.",
    FASTCALL("run_length", run_length,
             "run_length(rest, name, min_args, max_args) -> int: how many requests at the end "
             "of rest (last first) are name's with an argument count in [min_args, max_args]."),
    FASTCALL("store_pairs", store_pairs,
             "store_pairs(d, reqs) -> bool: d[r[1]] = r[2] for each request r when all are "
             "lists of three; else False and nothing stored."),
    FASTCALL("int_replies", int_replies,
             "int_replies(replies) -> bytes or None: each reply's \":<n>\\r\\n\", when every "
             "one is an int; else None."),
    FASTCALL("count_keys", count_keys,
             "count_keys(d, reqs) -> list or None: int(r[1] in d) for each request r, when "
             "every one is [name, key]; else None."),
    FASTCALL("lookup_strings", lookup_strings,
             "lookup_strings(d, reqs) -> list or None: d.get(r[1]) for each request r, when "
             "every value found is bytes; else None."),
    FASTCALL("bulk_replies", bulk_replies,
             "bulk_replies(replies, nil) -> bytes or None: the wire bytes of replies that are "
             "all bytes (bulk strings) or None (nil); else None."),
    FASTCALL("bind", bind,
             BIND_USAGE ": the classes whose slots account() and start() read, and the Python "
             "they stand for."),
    FASTCALL("start", start, "start(core, c, first, rest): plainrun.start, its common case in C."),
    FASTCALL("propagating", propagating,
             "propagating(core, c, cmds, reqs, replies): dispatch.propagating_loop in C."),
    FASTCALL("account", account,
             "account(core, c, cmds, one, ns): plainrun.account, its common case in C."))
