/* pyrepl.scripting._luacall: a script's redis.call / redis.pcall, EVAL's runner and
   EVALSHA's common case in C, on lupa's own Lua state.

   The reference (pyrepl/scripting/engine.py, sandbox.py, convert.py) runs a script through
   lupa: ``vm.run(func, proto, numkeys, *args)`` converts each argument into Lua, calls the
   bootstrap's runner and converts its results back; ``redis.call`` is a Python callable, so
   every call converts its Lua arguments into a tuple of Python values (lua_argv makes them an
   argv), runs ``ScriptEngine._call_raise`` and converts the reply back into Lua through
   ``ReplyToLua`` (a lupa table per array). That glue cost more than the command: ~2 µs a
   redis.call GET, ~1 µs a run (bench/RESULTS.md, "EVALSHA's calls in C").

   Here the same moves are C functions of the same Lua state, which the state loads itself:
   ``package.loadlib(<this file>, "pyrepl_luacall_open")`` hands the opener its lua_State, and
   the opener answers a table: ``call`` and ``pcall`` (the sandbox makes them redis.call and
   redis.pcall), ``keep`` (a compiled script kept in the registry: its reference),
   ``set_runner`` (what run() needs of the bootstrap: the real globals, the error handler and
   the runner's end, ``conclude``), ``tick`` (the garbage collector's pacing, one count for
   run()'s runs and the bootstrap's) and ``id`` (the state's number for run()). The Lua API is
   lupa's (pyrepl/scripting/_luaapi.h).

   redis.call: the arguments become an argv here (strings as they are, numbers as "%.17g", as
   Redis's luaArgsToRedisArgv); scriptCall's common case (call_common: a master, an
   unrestricted caller, a ``script_plain`` command, a write after the script's first) calls
   the command here, anything else ``ScriptEngine.run_call(ctx, argv)``, which makes
   scriptCall's checks and runs it (the one Python for both paths); the reply value becomes the Lua
   value Redis's RESP parser would have made, as ``ReplyToLua.convert`` does, table for table,
   in the same order of stores. A refused call (the engine's CallError) is the Lua error
   {err=..., ignore_error_stats_update=true} for redis.call and that table as the result for
   redis.pcall, as the reference's ``_unwrap`` and ``_pcall`` make it.

   run(id, ref, proto, numkeys, argv): the reference's ``vm.run`` for argv[3:] as Redis's
   luaCallFunction makes it, without the bootstrap's runner in between: KEYS and ARGV set
   in the globals here, the script called under the error handler, a result that is not a
   table answered here ("v" and the value), anything else by ``conclude``; the results
   converted as lupa converts them (a Lua number that is an integer as an int). evalsha /
   EVALSHA's and EVALSHA_RO's handlers: ``ScriptEngine.eval``'s moves for a cached script
   without a shebang on a master (see evalsha), NotImplemented otherwise, the Python handler
   then. tests/unit/test_luacall.py runs scripts both ways and compares.

   The C functions run under lupa's calls too (FCALL, a debugging session), where lupa has
   released the GIL: each takes it (PyGILState_Ensure) and gives it back before a Lua error. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MODULE_NAME "pyrepl.scripting._luacall"
#include "../_slots.h"
#include "_luaapi.h"
#include "../resp/_names.h"

#define BIND_USAGE "bind(lupa_file, CallError, Status, Raw, NULL_ARRAY, Map, SetReply, " \
                   "Verbatim, ReplyError, BigNumber, parse_resp, format_double, error_text, " \
                   "texts)"
#define MAX_DEPTH 1000

typedef struct {
    lua_State *L;
    int id;
    int self_ref;      /* this userdata's registry reference (it lives until lua_close) */
    int globals;       /* set_runner's: the real globals table, the error handler and the */
    int handler;       /* runner's end (conclude), registry references; LUA_NOREF before */
    int conclude;
    int runs;          /* runs since the last garbage collector step (tick) */
    PyObject *engine;  /* the ScriptEngine (attach); NULL before */
} state;

/* The states by number (run()'s and EVALSHA's way to one): a slot freed when its state
   closes, the table grown as needed (libc's allocator: the opener runs where lupa has
   released the GIL). */
static state **states;
static int n_states;
static int bound;
static PyObject *call_error, *status_type, *raw_type, *null_array, *map_type, *set_type,
                *verbatim_type, *reply_error, *big_number, *parse_resp, *format_double,
                *error_text;
/* The texts of redis.call's own refusals: outside a script, no argument, a bad argument. */
static PyObject *text_outside, *text_noargs, *text_args;
static PyObject *kind_value;   /* b"v": conclude's kind of a value that is not a table */
static PyObject *str_ctx, *str_client, *str_proto, *str_run_call, *str_text, *str_ignore,
                *str_items, *str_data, *str_fmt, *str_message, *str_digits, *str_ldb,
                *str_core, *str_expiry_deletes, *str_out, *str_lower;

/* bind_call()'s: what run_call's common case reads, for call_common. */
/* RunContext's fields, every one (evalsha makes it: new_ctx) */
enum { X_CALLER, X_SHA, X_READ_ONLY, X_ALLOW_OOM, X_OOM, X_START_NS, X_WRITE_DIRTY,
       X_REPL_FLAGS, X_RESP, X_TIMEDOUT, X_KILLED, X_EVAL_MODE, X_ARGV, X_ALLOW_CROSS_SLOT,
       X_N };
static const char *const ctx_names[X_N] = {"caller", "sha", "read_only", "allow_oom", "oom",
                                           "start_ns", "write_dirty", "repl_flags", "resp",
                                           "timedout", "killed", "eval_mode", "argv",
                                           "allow_cross_slot"};
static PyObject *propagate_all_obj;
enum { C_RESTRICTED, C_CORE, C_LDB_MODE, C_DB, C_USER, C_IN_MULTI, C_PROTO, C_PROPAGATE_ARGV,
       C_OUT, C_N };
static const char *const client_names[C_N] = {"restricted", "core", "ldb_mode", "db", "user",
                                              "in_multi", "proto", "propagate_argv", "out"};
/* and what evalsha reads: the core's, a script's, a Lua state's (LuaVM) */
enum { K_EXPIRY_DELETES, K_MAXMEMORY, K_CLOCK_NS, K_CONFIG, K_MONITORS, K_GATED, K_N };
static const char *const core_names[K_N] = {"expiry_deletes", "maxmemory", "clock_ns", "config",
                                            "monitors", "gated"};
/* core.scripts: the engine, a slot unset until the first script (so not in core_names, whose
   slots must all be set) */
static const char *const core_engine_names[1] = {"scripts"};
static Py_ssize_t core_engine_off[1];
enum { S_FLAGS, S_REF, S_SHA, S_N };
static const char *const script_names[S_N] = {"flags", "ref", "sha"};
enum { V_ACCEL_ID, V_HOOK_ON, V_LUA, V_N };
static const char *const vm_names[V_N] = {"accel_id", "hook_on", "lua"};
enum { E_CTX, E_LDB, E_CLIENT, E_VM, E_LUA, E_CACHE, E_CORE, E_N };
static const char *const engine_names[E_N] = {"ctx", "ldb", "client", "vm", "lua", "cache",
                                              "core"};
enum { H_BY_SHA, H_N };
static const char *const cache_names[H_N] = {"by_sha"};
static Py_ssize_t core_off[K_N], script_off[S_N], vm_off[V_N], engine_off[E_N], cache_off[H_N];
static PyTypeObject *core_type, *script_type, *vm_type, *engine_type, *cache_type;
/* EVALSHA's and EVALSHA_RO's Python handlers (bind_handlers): where evalsha declines */
static PyObject *py_evalsha, *py_evalsha_ro;
#define E(o, i) SLOT_AT(o, engine_off[i])
#define CL(o, i) SLOT_AT(o, client_off[i])
#define K(o, i) SLOT_AT(o, core_off[i])
static long long compat_flags;
static PyObject *str_vm, *str_lua, *str_cache, *str_by_sha,
                *str_busy_reply_threshold, *str_set_busy, *str_answer, *proto2;
enum { M_SCRIPT_PLAIN, M_SUBCOMMANDS, M_MIN_ARGS, M_MAX_ARGS, M_WRITE, M_N };
static const char *const command_names[M_N] = {"script_plain", "subcommands", "min_args",
                                               "max_args", "write"};
static Py_ssize_t ctx_off[X_N], client_off[C_N], command_off[M_N];
static PyTypeObject *ctx_type, *client_type, *command_type;
static PyObject *name_cache, *commands, *py_call;
static long long propagate_all;
static int call_bound;   /* bind_call() ran to its end */
#define BIND_CALL_USAGE "bind_call(RunContext, Client, Command, NAME_CACHE, COMMANDS, call, " \
                        "PROPAGATE_ALL, ServerCore, Script, LuaVM, COMPAT, ScriptEngine, " \
                        "ScriptCache)"

/* -- a reply value as the Lua value Redis's RESP parser makes (ReplyToLua.convert) ---------- */

static int push_reply(lua_State *L, PyObject *v, int resp, int depth);

/* {key = <string of bytes b>} */
static void
push_wrapped(lua_State *L, const char *key, PyObject *b)
{
    lua_createtable(L, 0, 1);
    lua_pushlstring(L, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
    lua_setfield(L, -2, key);
}

/* {err = <text, utf-8>, ignore_error_stats_update = true when ignore} (the engine's
   _err_table); -1 with a Python error set. */
static int
push_err_table(lua_State *L, PyObject *text, int ignore)
{
    PyObject *b = PyUnicode_AsEncodedString(text, "utf-8", "replace");
    if (b == NULL)
        return -1;
    lua_createtable(L, 0, 2);
    lua_pushlstring(L, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
    lua_setfield(L, -2, "err");
    Py_DECREF(b);
    if (ignore) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "ignore_error_stats_update");
    }
    return 0;
}

/* A table of items' values at 1..n, nils stored too (a nil hole made as Redis's lua_settable
   makes it, as the reference's ``fill`` does); with ``pairs`` (a RESP2 map) each item a
   (key, value) pair, flattened: key, value, key, value ... at 1..2n. -1 with a Python error
   set. */
static int
push_items(lua_State *L, PyObject *items, int resp, int depth, int pairs)
{
    PyObject *seq = PySequence_Fast(items, "a reply's items");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **it = PySequence_Fast_ITEMS(seq);
    lua_newtable(L);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (pairs && (!PyTuple_Check(it[i]) || PyTuple_GET_SIZE(it[i]) != 2)) {
            PyErr_SetString(PyExc_TypeError, "a Map's items are (key, value) pairs");
            Py_DECREF(seq);
            return -1;
        }
        for (int j = 0; j <= pairs; j++) {
            if (push_reply(L, pairs ? PyTuple_GET_ITEM(it[i], j) : it[i], resp, depth + 1) < 0) {
                Py_DECREF(seq);
                return -1;
            }
            lua_rawseti(L, -2, (int)(pairs ? 2 * i + j + 1 : i + 1));
        }
    }
    Py_DECREF(seq);
    return 0;
}

static int
push_array(lua_State *L, PyObject *items, int resp, int depth)
{
    return push_items(L, items, resp, depth, 0);
}

/* {<name> = {k = v ...}} of a map's pairs (set: {k = true}); a key that is nil skipped. */
static int
push_keyed(lua_State *L, const char *name, PyObject *items, int is_set, int depth)
{
    PyObject *seq = PySequence_Fast(items, "a reply's items");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **it = PySequence_Fast_ITEMS(seq);
    lua_createtable(L, 0, 1);
    lua_newtable(L);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = it[i], *x = NULL;
        if (!is_set) {
            if (!PyTuple_Check(k) || PyTuple_GET_SIZE(k) != 2) {
                PyErr_SetString(PyExc_TypeError, "a Map's items are (key, value) pairs");
                Py_DECREF(seq);
                return -1;
            }
            x = PyTuple_GET_ITEM(k, 1);
            k = PyTuple_GET_ITEM(k, 0);
        }
        if (push_reply(L, k, 3, depth + 1) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (lua_type(L, -1) == LUA_TNIL) {
            lua_pop(L, 1);
            continue;
        }
        if (is_set)
            lua_pushboolean(L, 1);
        else if (push_reply(L, x, 3, depth + 1) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        lua_rawset(L, -3);
    }
    Py_DECREF(seq);
    lua_setfield(L, -2, name);
    return 0;
}

/* attr of v (bytes), pushed as {key = it} or as the string itself */
static int
push_attr_bytes(lua_State *L, PyObject *v, PyObject *attr, const char *key)
{
    PyObject *b = PyObject_GetAttr(v, attr);
    if (b == NULL)
        return -1;
    if (!PyBytes_Check(b)) {
        Py_DECREF(b);
        PyErr_SetString(PyExc_TypeError, "a reply's bytes were expected");
        return -1;
    }
    if (key != NULL)
        push_wrapped(L, key, b);
    else
        lua_pushlstring(L, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
    Py_DECREF(b);
    return 0;
}

/* error_text("-" + e.message) of a ReplyError e: the text its Lua table holds (a new
   reference, NULL with an error set). */
static PyObject *
reply_error_text(PyObject *e)
{
    PyObject *msg = PyObject_GetAttr(e, str_message);
    PyObject *dash = msg == NULL ? NULL : PyUnicode_FromString("-");
    PyObject *full = dash == NULL ? NULL : PyUnicode_Concat(dash, msg);
    PyObject *text = full == NULL ? NULL : PyObject_CallOneArg(error_text, full);
    Py_XDECREF(msg);
    Py_XDECREF(dash);
    Py_XDECREF(full);
    return text;
}

static int
push_reply(lua_State *L, PyObject *v, int resp, int depth)
{
    if (depth > MAX_DEPTH) {
        PyErr_SetString(PyExc_RecursionError, "a reply nested too deep for a script");
        return -1;
    }
    if (!lua_checkstack(L, 6)) {
        PyErr_SetString(PyExc_MemoryError, "the Lua stack is full");
        return -1;
    }
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyBytes_Type) {
        lua_pushlstring(L, PyBytes_AS_STRING(v), (size_t)PyBytes_GET_SIZE(v));
        return 0;
    }
    if (t == &PyLong_Type || (t != &PyBool_Type && PyLong_Check(v))) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred())
            return -1;
        if (!overflow) {
            lua_pushnumber(L, (lua_Number)x);
            return 0;
        }
        double d = PyLong_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        lua_pushnumber(L, d);
        return 0;
    }
    if (v == Py_None || v == null_array) {
        if (resp == 2)
            lua_pushboolean(L, 0);
        else
            lua_pushnil(L);
        return 0;
    }
    if (t == (PyTypeObject *)raw_type) {
        PyObject *data = PyObject_GetAttr(v, str_data);
        if (data == NULL)
            return -1;
        if (!PyBytes_Check(data)) {
            Py_DECREF(data);
            PyErr_SetString(PyExc_TypeError, "Raw.data: bytes were expected");
            return -1;
        }
        const char *s = PyBytes_AS_STRING(data);
        Py_ssize_t n = PyBytes_GET_SIZE(data);
        const char *crlf = n >= 2 ? strstr(s, "\r\n") : NULL;   /* (bytes end with a NUL) */
        int rc;
        if (n > 0 && s[0] == '+' && crlf == s + n - 2) {      /* +OK, +PONG: {ok=...} */
            lua_createtable(L, 0, 1);
            lua_pushlstring(L, s + 1, (size_t)(n - 3));
            lua_setfield(L, -2, "ok");
            rc = 0;
        } else {
            PyObject *parsed = PyObject_CallOneArg(parse_resp, data);
            rc = parsed == NULL ? -1 : push_reply(L, parsed, resp, depth + 1);
            Py_XDECREF(parsed);
        }
        Py_DECREF(data);
        return rc;
    }
    if (t == &PyList_Type || t == &PyTuple_Type)
        return push_array(L, v, resp, depth);
    if (t == (PyTypeObject *)status_type) {
        PyObject *text = PyObject_GetAttr(v, str_text);
        if (text == NULL)
            return -1;
        PyObject *b = PyUnicode_AsUTF8String(text);
        Py_DECREF(text);
        if (b == NULL)
            return -1;
        push_wrapped(L, "ok", b);
        Py_DECREF(b);
        return 0;
    }
    if (PyObject_TypeCheck(v, (PyTypeObject *)reply_error)) {
        PyObject *text = reply_error_text(v);
        if (text == NULL)
            return -1;
        int rc = push_err_table(L, text, 1);
        Py_DECREF(text);
        return rc;
    }
    if (t == (PyTypeObject *)map_type || t == (PyTypeObject *)set_type) {
        int is_set = t == (PyTypeObject *)set_type;
        PyObject *items = PyObject_GetAttr(v, str_items);
        if (items == NULL)
            return -1;
        int rc;
        if (resp == 3) {
            rc = push_keyed(L, is_set ? "set" : "map", items, is_set, depth);
        } else if (is_set) {
            rc = push_array(L, items, 2, depth);
        } else {                                /* RESP2: the pairs flattened */
            rc = push_items(L, items, 2, depth, 1);
        }
        Py_DECREF(items);
        return rc;
    }
    if (t == &PyFloat_Type) {
        if (resp == 2) {
            PyObject *b = PyObject_CallOneArg(format_double, v);
            if (b == NULL)
                return -1;
            if (!PyBytes_Check(b)) {
                Py_DECREF(b);
                PyErr_SetString(PyExc_TypeError, "format_double: bytes were expected");
                return -1;
            }
            lua_pushlstring(L, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
            Py_DECREF(b);
            return 0;
        }
        lua_createtable(L, 0, 1);
        lua_pushnumber(L, PyFloat_AS_DOUBLE(v));
        lua_setfield(L, -2, "double");
        return 0;
    }
    if (t == &PyBool_Type) {
        if (resp == 2)
            lua_pushnumber(L, v == Py_True ? 1 : 0);
        else
            lua_pushboolean(L, v == Py_True);
        return 0;
    }
    if (t == (PyTypeObject *)verbatim_type) {
        if (resp == 2)
            return push_attr_bytes(L, v, str_data, NULL);
        PyObject *fmt = PyObject_GetAttr(v, str_fmt);
        if (fmt == NULL)
            return -1;
        PyObject *fmt3 = PyBytes_Check(fmt) ? PyBytes_FromStringAndSize(
            PyBytes_AS_STRING(fmt), PyBytes_GET_SIZE(fmt) < 3 ? PyBytes_GET_SIZE(fmt) : 3)
            : NULL;
        Py_DECREF(fmt);
        if (fmt3 == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "Verbatim.fmt: bytes were expected");
            return -1;
        }
        lua_createtable(L, 0, 1);
        lua_createtable(L, 0, 2);
        lua_pushlstring(L, PyBytes_AS_STRING(fmt3), (size_t)PyBytes_GET_SIZE(fmt3));
        Py_DECREF(fmt3);
        lua_setfield(L, -2, "format");
        if (push_attr_bytes(L, v, str_data, NULL) < 0)
            return -1;
        lua_setfield(L, -2, "string");
        lua_setfield(L, -2, "verbatim_string");
        return 0;
    }
    if (t == (PyTypeObject *)big_number)
        return push_attr_bytes(L, v, str_digits, resp == 2 ? NULL : "big_number");
    if (PyUnicode_Check(v)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        if (s == NULL)
            return -1;
        lua_pushlstring(L, s, (size_t)n);
        return 0;
    }
    if (resp == 2)
        lua_pushboolean(L, 0);
    else
        lua_pushnil(L);
    return 0;
}

/* -- redis.call and redis.pcall ------------------------------------------------------------ */

/* Argument i (1-based) as an argv entry: a string's bytes, a number's "%.17g"; NULL without
   an error set for any other type. */
static PyObject *
argv_entry(lua_State *L, int i)
{
    int type = lua_type(L, i);
    if (type == LUA_TSTRING) {
        size_t n;
        const char *s = lua_tolstring(L, i, &n);
        /* (the first: the command's name, kept as the request reader keeps it) */
        return i == 1 ? name_object(s, (Py_ssize_t)n)
                      : PyBytes_FromStringAndSize(s, (Py_ssize_t)n);
    }
    if (type == LUA_TNUMBER) {
        char buf[64];
        int n = snprintf(buf, sizeof buf, "%.17g", (double)lua_tonumber(L, i));
        return PyBytes_FromStringAndSize(buf, n);
    }
    return NULL;
}

/* The error of a Python exception (set) for Lua: a CallError's text and flag (ignore 0 or 1),
   anything else's str() (ignore -1: a plain error, not a table). A new reference to the text
   (NULL when even that failed: the text is then a fixed one). */
static PyObject *
fetch_error(int *ignore)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *text = NULL;
    *ignore = -1;
    if (value != NULL && PyObject_TypeCheck(value, (PyTypeObject *)call_error)) {
        text = PyObject_GetAttr(value, str_text);
        PyObject *flag = text == NULL ? NULL : PyObject_GetAttr(value, str_ignore);
        if (flag != NULL) {
            *ignore = PyObject_IsTrue(flag) == 1;
            Py_DECREF(flag);
        } else {
            Py_CLEAR(text);
        }
    }
    if (text == NULL && value != NULL) {
        PyErr_Clear();
        *ignore = -1;
        text = PyObject_Str(value);
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
    return text;
}

/* engine.<name> (slot i of a ScriptEngine, read at its offset): a new reference, NULL with
   an error set. */
static PyObject *
engine_attr(PyObject *eng, int i, PyObject *name)
{
    if (call_bound && Py_TYPE(eng) == engine_type && SLOT_AT(eng, engine_off[i]) != NULL)
        return Py_NewRef(SLOT_AT(eng, engine_off[i]));
    return PyObject_GetAttr(eng, name);
}

/* The command of argv[0]: its exact spelling's (NAME_CACHE, as the dispatch), else its
   lowercase's, then cached under the spelling as resolve_command caches a client's (a plain
   command: no container; a protected one is never script_plain); a borrowed reference, NULL
   (no error) for none. */
static PyObject *
command_of(PyObject *name)
{
    PyObject *cmd = PyDict_GetItemWithError(name_cache, name);
    if (cmd != NULL || PyErr_Occurred())
        return cmd;
    PyObject *low = PyObject_CallMethodNoArgs(name, str_lower);
    if (low == NULL)
        return NULL;
    cmd = PyDict_GetItemWithError(commands, low);
    Py_DECREF(low);
    if (cmd != NULL && Py_TYPE(cmd) == command_type &&
            SLOT_AT(cmd, command_off[M_SCRIPT_PLAIN]) == Py_True &&
            SLOT_AT(cmd, command_off[M_SUBCOMMANDS]) != NULL &&
            PyDict_CheckExact(SLOT_AT(cmd, command_off[M_SUBCOMMANDS])) &&
            PyDict_GET_SIZE(SLOT_AT(cmd, command_off[M_SUBCOMMANDS])) == 0 &&
            PyDict_GET_SIZE(name_cache) < 4096 && PyDict_SetItem(name_cache, name, cmd) < 0)
        return NULL;
    return cmd;
}

/* ScriptEngine.run_call's common case: no debugging session, an unrestricted caller, the
   script's effects replicated as they are, a master (no stale replica to refuse for), a
   command that scripts may call without the checks of a first write (``script_plain``,
   its arity right, a write only after the script's first) -- the command called as run_call
   calls it, the script client's output dropped. The reply (a new reference); NULL without
   an error where run_call must decide; NULL with one on a failure. */
static PyObject *
call_common(state *st, PyObject *ctx, PyObject *argv)
{
    if (!call_bound || Py_TYPE(ctx) != ctx_type)
        return NULL;
    PyObject *caller = SLOT_AT(ctx, ctx_off[X_CALLER]);
    PyObject *flags = SLOT_AT(ctx, ctx_off[X_REPL_FLAGS]);
    if (caller == NULL || Py_TYPE(caller) != client_type ||
            SLOT_AT(caller, client_off[C_RESTRICTED]) != Py_False || flags == NULL ||
            !PyLong_CheckExact(flags) || PyLong_AsLongLong(flags) != propagate_all)
        return NULL;
    PyObject *cmd = command_of(PyList_GET_ITEM(argv, 0));
    if (cmd == NULL || Py_TYPE(cmd) != command_type ||
            SLOT_AT(cmd, command_off[M_SCRIPT_PLAIN]) != Py_True)
        return NULL;
    PyObject *subs = SLOT_AT(cmd, command_off[M_SUBCOMMANDS]);
    long long n = PyList_GET_SIZE(argv);
    if (subs == NULL || !PyDict_CheckExact(subs) || PyDict_GET_SIZE(subs) != 0 ||
            !slots_all_set(cmd, command_off, M_N))
        return NULL;
    long long lo = PyLong_AsLongLong(SLOT_AT(cmd, command_off[M_MIN_ARGS]));
    long long hi = PyLong_AsLongLong(SLOT_AT(cmd, command_off[M_MAX_ARGS]));
    if (PyErr_Occurred() || n < lo || n > hi)
        return NULL;
    if (SLOT_AT(cmd, command_off[M_WRITE]) != Py_False &&
            (SLOT_AT(ctx, ctx_off[X_READ_ONLY]) != Py_False ||
             SLOT_AT(ctx, ctx_off[X_WRITE_DIRTY]) != Py_True))
        return NULL;
    PyObject *ldb = engine_attr(st->engine, E_LDB, str_ldb);
    if (ldb == NULL)
        return NULL;
    Py_DECREF(ldb);
    if (ldb != Py_None)
        return NULL;
    PyObject *core = engine_attr(st->engine, E_CORE, str_core);
    if (core == NULL)
        return NULL;
    /* a master, not gated (cluster mode keeps the gate up: its checks are run_call's) */
    PyObject *master = Py_TYPE(core) == core_type && K(core, K_GATED) == Py_False
        ? K(core, K_EXPIRY_DELETES) : NULL;
    PyObject *client = master != Py_True ? NULL
                                         : engine_attr(st->engine, E_CLIENT, str_client);
    if (client != NULL && (Py_TYPE(client) != client_type ||
                           SLOT_AT(client, client_off[C_OUT]) == NULL))
        Py_CLEAR(client);
    PyObject *reply = NULL;
    if (client != NULL) {
        PyObject *args[4] = {core, client, cmd, argv};
        reply = PyObject_Vectorcall(py_call, args, 4, NULL);
        PyObject *out = reply == NULL ? NULL : SLOT_AT(client, client_off[C_OUT]);
        if (out != NULL && !(PyList_CheckExact(out) && PyList_GET_SIZE(out) == 0)) {
            int full = PyObject_IsTrue(out);    /* (the reference: if client.out: ...) */
            if (full < 0 || (full == 1 && slot_set(client, client_off[C_OUT], PyList_New(0)) < 0))
                Py_CLEAR(reply);
        }
    }
    Py_DECREF(core);
    Py_XDECREF(client);
    return reply;
}

/* redis.call's own refusal (outside a script, no or a bad argument): its {err=...} table, or,
   with no memory for it, the text alone. */
static void
push_refusal(lua_State *L, PyObject *text)
{
    if (push_err_table(L, text, 0) < 0) {
        PyErr_Clear();
        lua_pushlstring(L, "ERR out of memory", 17);
    }
}

/* The reply of the call the arguments 1..argc make (pushed, 0), or its refusal: the error
   value pushed, 1 for a CallError's table, 2 for a plain error string. The GIL is held. */
static int
call_pushed(state *st, lua_State *L, int argc)
{
    PyObject *ctx = NULL, *argv = NULL, *reply = NULL, *refusal = NULL;
    int status = 0;
    if (st->engine == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "redis.call before the engine attached");
        goto failed;
    }
    ctx = engine_attr(st->engine, E_CTX, str_ctx);
    if (ctx == NULL)
        goto failed;
    if (ctx == Py_None)
        refusal = text_outside;
    else if (argc == 0)
        refusal = text_noargs;
    if (refusal != NULL) {
        Py_DECREF(ctx);
        lua_settop(L, 0);
        push_refusal(L, refusal);
        return 1;
    }
    argv = PyList_New(argc);
    if (argv == NULL)
        goto failed;
    for (int i = 0; i < argc; i++) {
        PyObject *a = argv_entry(L, i + 1);
        if (a == NULL) {
            if (PyErr_Occurred())
                goto failed;
            Py_DECREF(ctx);
            Py_DECREF(argv);
            lua_settop(L, 0);
            push_refusal(L, text_args);
            return 1;
        }
        PyList_SET_ITEM(argv, i, a);
    }
    reply = call_common(st, ctx, argv);
    if (reply == NULL && PyErr_Occurred())
        goto failed;
    if (reply != NULL && PyObject_TypeCheck(reply, (PyTypeObject *)reply_error)) {
        /* (what run_call raises for an error reply: its table, the error counted) */
        PyObject *text = reply_error_text(reply);
        if (text == NULL)
            goto failed;
        PyObject *call_err = PyObject_CallFunction(call_error, "OO", text, Py_True);
        Py_DECREF(text);
        if (call_err != NULL) {
            PyErr_SetObject(call_error, call_err);
            Py_DECREF(call_err);
        }
        goto failed;
    }
    if (reply == NULL) {
        PyObject *args[3] = {st->engine, ctx, argv};
        reply = PyObject_VectorcallMethod(str_run_call, args,
                                          3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    if (reply == NULL)
        goto failed;
    /* the script client's protocol (redis.setresp's), as the reference converts with */
    PyObject *client = engine_attr(st->engine, E_CLIENT, str_client);
    long resp = -1;
    if (client != NULL && Py_TYPE(client) == client_type && CL(client, C_PROTO) != NULL) {
        resp = PyLong_AsLong(CL(client, C_PROTO));
    } else if (client != NULL) {
        PyObject *proto = PyObject_GetAttr(client, str_proto);
        resp = proto == NULL ? -1 : PyLong_AsLong(proto);
        Py_XDECREF(proto);
    }
    Py_XDECREF(client);
    if (resp == -1 && PyErr_Occurred())
        goto failed;
    lua_settop(L, 0);
    if (push_reply(L, reply, (int)resp, 0) < 0) {
        lua_settop(L, 0);
        goto failed;
    }
    Py_DECREF(ctx);
    Py_DECREF(argv);
    Py_DECREF(reply);
    return 0;

failed:
    Py_XDECREF(ctx);
    Py_XDECREF(argv);
    Py_XDECREF(reply);
    int ignore;
    PyObject *text = fetch_error(&ignore);
    lua_settop(L, 0);
    if (text != NULL && PyUnicode_Check(text) && ignore >= 0) {
        status = push_err_table(L, text, ignore) < 0 ? 2 : 1;
        if (status == 2)
            PyErr_Clear();
    } else {
        status = 2;
    }
    if (status == 2) {
        Py_ssize_t n = 0;
        const char *s = text != NULL && PyUnicode_Check(text)
                            ? PyUnicode_AsUTF8AndSize(text, &n) : NULL;
        if (s == NULL) {
            PyErr_Clear();
            s = "error during redis.call";
            n = (Py_ssize_t)strlen(s);
        }
        lua_settop(L, 0);
        lua_pushlstring(L, s, (size_t)n);
    }
    Py_XDECREF(text);
    return status;
}

static int
generic_call(lua_State *L, int protected)
{
    state *st = (state *)lua_touserdata(L, lua_upvalueindex(1));
    int argc = lua_gettop(L);
    PyGILState_STATE gil = PyGILState_Ensure();
    int status = call_pushed(st, L, argc);
    PyGILState_Release(gil);
    if (status == 0 || (status == 1 && protected))
        return 1;
    return lua_error(L);    /* (never returns; nothing of Python's is held) */
}

static int
lua_redis_call(lua_State *L)
{
    return generic_call(L, 0);
}

static int
lua_redis_pcall(lua_State *L)
{
    return generic_call(L, 1);
}

/* keep(f): f kept in the registry; its reference. */
static int
lua_keep(lua_State *L)
{
    lua_settop(L, 1);
    lua_pushnumber(L, (lua_Number)luaL_ref(L, LUA_REGISTRYINDEX));
    return 1;
}

/* set_runner(G, err_handler, conclude): what run() needs of the bootstrap -- the real
   globals table (KEYS and ARGV go there), the error handler a script runs under, and the
   runner's end for what run() does not answer itself. */
static int
lua_set_runner(lua_State *L)
{
    state *st = (state *)lua_touserdata(L, lua_upvalueindex(1));
    int *refs[3] = {&st->globals, &st->handler, &st->conclude};
    lua_settop(L, 3);
    for (int i = 2; i >= 0; i--) {     /* (luaL_ref pops the top) */
        if (*refs[i] != LUA_NOREF)
            luaL_unref(L, LUA_REGISTRYINDEX, *refs[i]);
        *refs[i] = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    return 0;
}

/* luaCallFunction's garbage collector pacing: a step of LUA_GC_CYCLE_PERIOD every
   LUA_GC_CYCLE_PERIOD runs, counted here for run()'s and the bootstrap's (tick()) alike. */
#define GC_CYCLE_PERIOD 50
#define LUA_GCSTEP 5

static int
lua_gc_step(lua_State *L)
{
    lua_gc(L, LUA_GCSTEP, GC_CYCLE_PERIOD);
    return 0;
}

/* tick(): a run counted (the bootstrap's runs, inside their pcall). */
static int
lua_tick(lua_State *L)
{
    state *st = (state *)lua_touserdata(L, lua_upvalueindex(1));
    if (++st->runs >= GC_CYCLE_PERIOD) {
        st->runs = 0;
        lua_gc(L, LUA_GCSTEP, GC_CYCLE_PERIOD);
    }
    return 0;
}

/* The state's userdata collected (lua_close): its number free, its engine let go. */
static int
lua_state_gc(lua_State *L)
{
    state *st = (state *)lua_touserdata(L, 1);
    if (st == NULL || st->id < 0)
        return 0;
    if (states[st->id] == st)
        states[st->id] = NULL;
    st->id = -1;
    if (st->engine != NULL) {
        PyGILState_STATE gil = PyGILState_Ensure();
        Py_CLEAR(st->engine);
        PyGILState_Release(gil);
    }
    return 0;
}

static void
push_closure(lua_State *L, state *st, lua_CFunction fn, const char *name)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, st->self_ref);
    lua_pushcclosure(L, fn, 1);
    lua_setfield(L, -2, name);
}

/* The opener package.loadlib finds: {id=, call=, pcall=, keep=, set_runner=, tick=}, or nil
   and a message. */
int
pyrepl_luacall_open(lua_State *L)
{
    int id = -1;
    for (int i = 0; i < n_states && id < 0; i++)
        if (states[i] == NULL)
            id = i;
    if (id < 0 && bound) {
        int more = n_states ? 2 * n_states : 8;
        state **grown = (state **)realloc(states, (size_t)more * sizeof(state *));
        if (grown != NULL) {
            memset(grown + n_states, 0, (size_t)(more - n_states) * sizeof(state *));
            id = n_states;
            states = grown;
            n_states = more;
        }
    }
    if (!bound || id < 0) {
        const char *why = bound ? "no memory for another Lua state"
                                : "pyrepl's _luacall is not bound";
        lua_pushnil(L);
        lua_pushlstring(L, why, strlen(why));
        return 2;
    }
    state *st = (state *)lua_newuserdata(L, sizeof(state));
    st->L = L;
    st->id = id;
    st->globals = st->handler = st->conclude = LUA_NOREF;
    st->runs = 0;
    st->engine = NULL;
    lua_createtable(L, 0, 1);
    lua_pushcclosure(L, lua_state_gc, 0);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    st->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    states[id] = st;
    lua_createtable(L, 0, 6);
    lua_pushnumber(L, id);
    lua_setfield(L, -2, "id");
    push_closure(L, st, lua_redis_call, "call");
    push_closure(L, st, lua_redis_pcall, "pcall");
    push_closure(L, st, lua_keep, "keep");
    push_closure(L, st, lua_set_runner, "set_runner");
    push_closure(L, st, lua_tick, "tick");
    return 1;
}

/* -- the Python side ----------------------------------------------------------------------- */

/* A value run() hands back, as lupa converts it: a string as bytes, a number as an int when
   it is one (else a float), a boolean, nil as None; a table, function ... as its type's name
   (the runner answers none where it matters: its error message, its flag). */
static PyObject *
lua_to_py(lua_State *L, int i)
{
    switch (lua_type(L, i)) {
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, i, &n);
        return PyBytes_FromStringAndSize(s, (Py_ssize_t)n);
    }
    case LUA_TNUMBER: {
        double d = (double)lua_tonumber(L, i);
        if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == (double)(long long)d)
            return PyLong_FromLongLong((long long)d);
        return PyFloat_FromDouble(d);
    }
    case LUA_TBOOLEAN:
        return PyBool_FromLong(lua_toboolean(L, i));
    case LUA_TNIL:
    case LUA_TNONE:
        Py_RETURN_NONE;
    case LUA_TTABLE:
        return PyUnicode_FromString("table");
    case LUA_TFUNCTION:
        return PyUnicode_FromString("function");
    default:
        return PyUnicode_FromString("userdata");
    }
}

static state *
state_of(PyObject *id_obj)
{
    long id = PyLong_AsLong(id_obj);
    if (id == -1 && PyErr_Occurred())
        return NULL;
    if (id < 0 || id >= n_states || states[id] == NULL) {
        PyErr_Format(PyExc_LookupError, "no Lua state %ld", id);
        return NULL;
    }
    return states[id];
}

/* Push argv[from:from + n] as a table 1..n. */
static int
push_strings(lua_State *L, PyObject *argv, Py_ssize_t from, Py_ssize_t n)
{
    lua_createtable(L, (int)n, 0);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PyList_GET_ITEM(argv, from + i);
        if (!PyBytes_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "run: argv holds bytes");
            return -1;
        }
        lua_pushlstring(L, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        lua_rawseti(L, -2, (int)(i + 1));
    }
    return 0;
}

/* Lua's values from index from to the top as a tuple (a new reference; NULL with an error
   set). */
static PyObject *
values_from(lua_State *L, int from)
{
    int top = lua_gettop(L);
    PyObject *out = PyTuple_New(top < from ? 0 : top - from + 1);
    for (int i = from; out != NULL && i <= top; i++) {
        PyObject *x = lua_to_py(L, i);
        if (x == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i - from, x);
    }
    return out;
}

/* A run of the script of registry reference ref, KEYS argv[3:3 + numkeys] and ARGV the
   rest, as luaCallFunction makes it: KEYS and ARGV set in the real globals, the script
   called under the error handler with one result, the garbage collector paced. What it
   answers is conclude's answer: ("v", value) for a value that is not a table, made here
   (the hook as the script found it: not left in line mode by SCRIPT KILL); anything else
   by conclude itself (its results as a tuple). A new reference; NULL with an error set. */
static PyObject *
run_state(state *st, long ref, long proto, Py_ssize_t numkeys, PyObject *argv)
{
    if (st->conclude == LUA_NOREF) {
        PyErr_SetString(PyExc_RuntimeError, "run: the state has no runner");
        return NULL;
    }
    lua_State *L = st->L;
    Py_ssize_t nargv = PyList_GET_SIZE(argv) - 3 - numkeys;
    if (!lua_checkstack(L, 8))
        return PyErr_NoMemory();
    int base = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, st->handler);        /* base + 1 */
    lua_rawgeti(L, LUA_REGISTRYINDEX, st->globals);        /* base + 2 */
    lua_pushlstring(L, "KEYS", 4);
    if (push_strings(L, argv, 3, numkeys) < 0)
        goto fail;
    lua_rawset(L, base + 2);
    lua_pushlstring(L, "ARGV", 4);
    if (push_strings(L, argv, 3 + numkeys, nargv) < 0)
        goto fail;
    lua_rawset(L, base + 2);
    lua_settop(L, base + 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, (int)ref);
    int ok = lua_pcall(L, 0, 1, base + 1) == 0;           /* its result (or error): base + 2 */
    if (++st->runs >= GC_CYCLE_PERIOD) {
        st->runs = 0;
        lua_pushcclosure(L, lua_gc_step, 0);
        if (lua_pcall(L, 0, 0, 0) != 0)   /* (a finalizer's error: the step's, not the run's) */
            lua_settop(L, base + 2);
    }
    PyObject *out;
    if (ok && lua_type(L, base + 2) != LUA_TTABLE && !(lua_gethookmask(L) & LUA_MASKLINE)) {
        PyObject *v = lua_to_py(L, base + 2);
        out = v == NULL ? NULL : PyTuple_Pack(2, kind_value, v);
        Py_XDECREF(v);
        lua_settop(L, base);
        return out;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, st->conclude);
    lua_pushboolean(L, ok);
    lua_pushvalue(L, base + 2);
    lua_pushnumber(L, (lua_Number)proto);
    if (lua_pcall(L, 3, LUA_MULTRET, 0) != 0) {
        PyObject *msg = lua_to_py(L, lua_gettop(L));
        lua_settop(L, base);
        if (msg != NULL) {
            PyErr_Format(PyExc_RuntimeError, "the script runner failed: %S", msg);
            Py_DECREF(msg);
        }
        return NULL;
    }
    out = values_from(L, base + 3);
    lua_settop(L, base);
    return out;
fail:
    lua_settop(L, base);
    return NULL;
}

static PyObject *
run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    BOUND_ENTRY(bound, nargs, 5, "run(id, ref, proto, numkeys, argv)");
    state *st = state_of(args[0]);
    if (st == NULL)
        return NULL;
    long ref = PyLong_AsLong(args[1]), proto = PyLong_AsLong(args[2]);
    Py_ssize_t numkeys = PyLong_AsSsize_t(args[3]);
    PyObject *argv = args[4];
    if (PyErr_Occurred())
        return NULL;
    if (!PyList_CheckExact(argv) || numkeys < 0 || PyList_GET_SIZE(argv) < 3 + numkeys)
        return usage_error("run(id, ref, proto, numkeys, argv): argv a list of 3 + numkeys "
                           "or more");
    return run_state(st, ref, proto, numkeys, argv);
}

/* attach(id, engine): the ScriptEngine whose run_call the state's redis.call calls. */
static PyObject *
attach(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    BOUND_ENTRY(bound, nargs, 2, "attach(id, engine)");
    state *st = state_of(args[0]);
    if (st == NULL)
        return NULL;
    keep(&st->engine, args[1]);
    Py_RETURN_NONE;
}

static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 14 || !PyUnicode_Check(args[0]) || !PyTuple_Check(args[13]) ||
            PyTuple_GET_SIZE(args[13]) != 3)
        return usage_error(BIND_USAGE);
    const char *missing = luaapi_resolve(PyUnicode_AsUTF8(args[0]));
    if (missing != NULL) {
        PyErr_Format(PyExc_ImportError, "lupa's Lua API is not there: %s", missing);
        return NULL;
    }
    PyObject **where[] = {&call_error, &status_type, &raw_type, &null_array, &map_type,
                          &set_type, &verbatim_type, &reply_error, &big_number, &parse_resp,
                          &format_double, &error_text};
    for (int i = 0; i < 12; i++)
        keep(where[i], args[i + 1]);
    keep(&text_outside, PyTuple_GET_ITEM(args[13], 0));
    keep(&text_noargs, PyTuple_GET_ITEM(args[13], 1));
    keep(&text_args, PyTuple_GET_ITEM(args[13], 2));
    if (kind_value == NULL && (kind_value = PyBytes_FromStringAndSize("v", 1)) == NULL)
        return NULL;
    if (intern(&str_ctx, "ctx") < 0 || intern(&str_client, "client") < 0 ||
            intern(&str_proto, "proto") < 0 || intern(&str_run_call, "run_call") < 0 ||
            intern(&str_text, "text") < 0 || intern(&str_ignore, "ignore") < 0 ||
            intern(&str_items, "items") < 0 || intern(&str_data, "data") < 0 ||
            intern(&str_fmt, "fmt") < 0 || intern(&str_message, "message") < 0 ||
            intern(&str_digits, "digits") < 0 || intern(&str_ldb, "ldb") < 0 ||
            intern(&str_core, "core") < 0 || intern(&str_expiry_deletes, "expiry_deletes") < 0 ||
            intern(&str_out, "out") < 0 || intern(&str_lower, "lower") < 0)
        return NULL;
    bound = 1;
    Py_RETURN_NONE;
}

static PyObject *
zero_int(void)
{
    static PyObject *zero;
    if (zero == NULL)
        zero = PyLong_FromLong(0);
    return zero;
}

/* -- EVALSHA's common case ----------------------------------------------------------------- */


/* numkeys as EVALSHA's client writes it (the digits of a count, no sign, no leading zero):
   its value, -1 for anything else (the Python parses it). */
static Py_ssize_t
plain_count(PyObject *b)
{
    if (!PyBytes_CheckExact(b))
        return -1;
    Py_ssize_t n = PyBytes_GET_SIZE(b);
    const char *s = PyBytes_AS_STRING(b);
    if (n < 1 || n > 9 || (s[0] == '0' && n > 1))
        return -1;
    Py_ssize_t v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* RunContext(c, sha, ro, False, False, start) as its __init__ makes it, the defaults its
   fields declare (test_luacall compares the two); start stolen. */
static PyObject *
new_ctx(PyObject *c, PyObject *sha, PyObject *ro, PyObject *start)
{
    PyObject *ctx = ctx_type->tp_alloc(ctx_type, 0);
    if (ctx == NULL) {
        Py_DECREF(start);
        return NULL;
    }
    PyObject *values[X_N] = {c, sha, ro, Py_False, Py_False, start, Py_False, propagate_all_obj,
                             proto2, Py_False, Py_False, Py_True, Py_None, Py_True};
    for (int i = 0; i < X_N; i++)
        slot_put(ctx, ctx_off[i], values[i]);
    Py_DECREF(start);
    return ctx;
}

/* evalsha(engine, c, argv, ro): ScriptEngine.eval for an EVALSHA (EVALSHA_RO) of a cached
   script without a shebang, on a master without maxmemory, outside a debugging session,
   with nobody MONITORing, no script running and the busy hook as the configuration wants it
   -- eval, _eval, _prepare and _execute's moves in their order (the script client set up,
   the run context made and held in engine.ctx while the C runner runs), the reply of a
   string or a table's RESP made here, any other by engine._answer. NotImplemented, before
   anything moved, where the Python must run it. */
static PyObject *
evalsha(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    BOUND_ENTRY(call_bound, nargs, 4, "evalsha(engine, c, argv, ro)");
    PyObject *eng = args[0], *c = args[1], *argv = args[2], *ro = args[3];
    PyObject *client = NULL, *vm = NULL, *lua = NULL, *cache = NULL, *by_sha = NULL,
             *threshold = NULL;
    PyObject *result = Py_NewRef(Py_NotImplemented);
    if (Py_TYPE(c) != client_type || !PyList_CheckExact(argv) || PyList_GET_SIZE(argv) < 3 ||
            !slots_all_set(c, client_off, C_N) || CL(c, C_LDB_MODE) != Py_None)
        return result;
    PyObject *core = CL(c, C_CORE);
    if (Py_TYPE(core) != core_type || !slots_all_set(core, core_off, K_N) ||
            K(core, K_EXPIRY_DELETES) != Py_True || !PyLong_CheckExact(K(core, K_MAXMEMORY)) ||
            Py_SIZE(K(core, K_MAXMEMORY)) != 0)
        return result;
    Py_ssize_t numkeys = plain_count(PyList_GET_ITEM(argv, 2));
    if (numkeys < 0 || numkeys > PyList_GET_SIZE(argv) - 3)
        return result;
    if (Py_TYPE(eng) != engine_type || !slots_all_set(eng, engine_off, E_N) ||
            E(eng, E_CTX) != Py_None || E(eng, E_LDB) != Py_None ||
            Py_TYPE(E(eng, E_CACHE)) != cache_type ||
            SLOT_AT(E(eng, E_CACHE), cache_off[H_BY_SHA]) == NULL)
        return result;
    client = Py_NewRef(E(eng, E_CLIENT));
    vm = Py_NewRef(E(eng, E_VM));
    lua = Py_NewRef(E(eng, E_LUA));
    cache = Py_NewRef(E(eng, E_CACHE));
    by_sha = Py_NewRef(SLOT_AT(cache, cache_off[H_BY_SHA]));
    PyObject *monitors = K(core, K_MONITORS);   /* (borrowed: nobody runs meanwhile) */
    PyObject *script = PyDict_CheckExact(by_sha)
                           ? PyDict_GetItemWithError(by_sha, PyList_GET_ITEM(argv, 1)) : NULL;
    if (PyErr_Occurred())
        goto failed;
    if (script == NULL || Py_TYPE(script) != script_type ||
            !slots_all_set(script, script_off, S_N) || Py_TYPE(client) != client_type ||
            Py_TYPE(vm) != vm_type || !slots_all_set(vm, vm_off, V_N) ||
            SLOT_AT(vm, vm_off[V_LUA]) != lua || !PyDict_CheckExact(monitors) ||
            PyDict_GET_SIZE(monitors) != 0)
        goto done;
    long long flags = slot_int(SLOT_AT(script, script_off[S_FLAGS]));
    long long ref = slot_int(SLOT_AT(script, script_off[S_REF]));
    long long id = slot_int(SLOT_AT(vm, vm_off[V_ACCEL_ID]));
    if (flags != compat_flags || ref <= 0 || id < 0 || id >= n_states || states[id] == NULL)
        goto done;
    /* the busy hook as busy-reply-threshold wants it (else _execute sets it) */
    threshold = PyObject_GetAttr(K(core, K_CONFIG), str_busy_reply_threshold);
    if (threshold == NULL)
        goto failed;
    int want;
    if (PyLong_CheckExact(threshold)) {         /* (the config's int: no comparison call) */
        int overflow;
        long long t = PyLong_AsLongLongAndOverflow(threshold, &overflow);
        want = overflow > 0 || t > 0;
    } else if ((want = PyObject_RichCompareBool(threshold, zero_int(), Py_GT)) < 0) {
        goto failed;
    }
    if ((want ? Py_True : Py_False) != SLOT_AT(vm, vm_off[V_HOOK_ON]))
        goto done;

    /* eval: the effects propagated, never EVALSHA itself; _prepare: the run context */
    PyObject *empty = PyList_New(0);
    if (empty == NULL)
        goto failed;
    Py_XSETREF(CL(c, C_PROPAGATE_ARGV), empty);
    PyObject *start = PyObject_CallNoArgs(K(core, K_CLOCK_NS));
    if (start == NULL)
        goto failed;
    PyObject *ctx = new_ctx(c, SLOT_AT(script, script_off[S_SHA]), ro, start);
    if (ctx == NULL)
        goto failed;
    /* _execute: the script client as the caller's, the context current while it runs */
    slot_put(client, client_off[C_DB], CL(c, C_DB));
    slot_put(client, client_off[C_PROTO], proto2);
    slot_put(client, client_off[C_USER], CL(c, C_USER));
    slot_put(client, client_off[C_IN_MULTI], Py_False);
    slot_put(eng, engine_off[E_CTX], ctx);
    long proto = PyLong_AsLong(CL(c, C_PROTO));
    PyObject *res = proto == -1 && PyErr_Occurred()
                        ? NULL : run_state(states[id], (long)ref, proto, numkeys, argv);
    /* (the finally: no context, the busy state ended) */
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    slot_put(eng, engine_off[E_CTX], Py_None);
    int ok = 1;
    if (SLOT_AT(ctx, ctx_off[X_TIMEDOUT]) == Py_True) {
        PyObject *r = PyObject_CallMethodOneArg(core, str_set_busy, Py_None);
        ok = r != NULL;
        Py_XDECREF(r);
    }
    if (exc_type != NULL) {
        if (!ok)
            PyErr_Clear();
        PyErr_Restore(exc_type, exc_value, exc_tb);
        ok = 0;
    }
    if (!ok || res == NULL) {
        Py_XDECREF(res);
        Py_DECREF(ctx);
        goto failed;
    }
    Py_SETREF(result, NULL);
    PyObject *kind = PyTuple_GET_SIZE(res) >= 2 ? PyTuple_GET_ITEM(res, 0) : NULL;
    PyObject *value = kind != NULL ? PyTuple_GET_ITEM(res, 1) : NULL;
    if (SLOT_AT(ctx, ctx_off[X_KILLED]) != Py_False || kind == NULL || !PyBytes_Check(kind) ||
            PyBytes_GET_SIZE(kind) != 1) {
        result = PyObject_CallMethodObjArgs(eng, str_answer, c, ctx, res, NULL);
    } else if (PyBytes_AS_STRING(kind)[0] == 'v' && (PyBytes_CheckExact(value) ||
                                                      PyLong_CheckExact(value))) {
        result = Py_NewRef(value);   /* (an int here is one a long long holds: lua_to_py) */
    } else if (PyBytes_AS_STRING(kind)[0] == 'v' && (value == Py_None || (
            PyBool_Check(value) && SLOT_AT(ctx, ctx_off[X_RESP]) == proto2))) {
        /* nil, and a boolean of a script in RESP2 (_reply: 1 or a null) */
        result = value == Py_True ? PyLong_FromLong(1) : Py_NewRef(Py_None);
    } else if (PyBytes_AS_STRING(kind)[0] == 'r' && PyBytes_CheckExact(value)) {
        result = PyObject_CallOneArg(raw_type, value);
    } else {
        result = PyObject_CallMethodObjArgs(eng, str_answer, c, ctx, res, NULL);
    }
    Py_DECREF(res);
    Py_DECREF(ctx);
    goto done;

failed:
    Py_CLEAR(result);
done:
    Py_XDECREF(client);
    Py_XDECREF(vm);
    Py_XDECREF(lua);
    Py_XDECREF(cache);
    Py_XDECREF(by_sha);
    Py_XDECREF(threshold);
    return result;
}

/* EVALSHA's handler (ro: EVALSHA_RO's): evalsha on the core's engine, else the Python
   handler (which makes the engine on first use). */
static PyObject *
evalsha_command(PyObject *const *args, Py_ssize_t nargs, PyObject *ro, PyObject *fallback)
{
    if (fallback == NULL)
        return unbound_error(MODULE_NAME, "evalsha_command");
    if (nargs != 2)
        return usage_error("a command handler's (c, argv)");
    PyObject *c = args[0];
    if (call_bound && Py_TYPE(c) == client_type && CL(c, C_CORE) != NULL) {
        PyObject *core = CL(c, C_CORE),
                 *eng = Py_TYPE(core) == core_type ? SLOT_AT(core, core_engine_off[0]) : NULL;
        if (eng != NULL && eng != Py_None) {   /* (none yet: the Python handler makes it) */
            Py_INCREF(eng);
            PyObject *call_args[4] = {eng, c, args[1], ro};
            PyObject *reply = evalsha(NULL, call_args, 4);
            Py_DECREF(eng);
            if (reply != Py_NotImplemented)
                return reply;
            Py_DECREF(reply);
        }
    }
    return PyObject_Vectorcall(fallback, args, 2, NULL);
}

static PyObject *
evalsha_handler(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return evalsha_command(args, nargs, Py_False, py_evalsha);
}

static PyObject *
evalsha_ro_handler(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return evalsha_command(args, nargs, Py_True, py_evalsha_ro);
}

/* bind_handlers(evalsha, evalsha_ro): the Python handlers the C ones stand for. */
static PyObject *
bind_handlers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2)
        return usage_error("bind_handlers(evalsha, evalsha_ro)");
    keep(&py_evalsha, args[0]);
    keep(&py_evalsha_ro, args[1]);
    Py_RETURN_NONE;
}

/* bind_call(RunContext, Client, Command, NAME_CACHE, COMMANDS, call, PROPAGATE_ALL): what
   call_common reads and calls (made once the core's modules are imported: the first
   engine's). */
static PyObject *
bind_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const slots_spec specs[] = {
        {ctx_names, X_N, ctx_off, (PyObject **)&ctx_type},
        {client_names, C_N, client_off, (PyObject **)&client_type},
        {command_names, M_N, command_off, (PyObject **)&command_type},
        KEPT(&name_cache), KEPT(&commands), KEPT(&py_call), KEPT(NULL),
        {core_names, K_N, core_off, (PyObject **)&core_type},
        {script_names, S_N, script_off, (PyObject **)&script_type},
        {vm_names, V_N, vm_off, (PyObject **)&vm_type},
        KEPT(NULL),
        {engine_names, E_N, engine_off, (PyObject **)&engine_type},
        {cache_names, H_N, cache_off, (PyObject **)&cache_type},
    };
    if (bind_args(nargs == 13 && PyDict_CheckExact(args[3]) && PyDict_CheckExact(args[4]) &&
                      PyLong_CheckExact(args[6]) && PyLong_CheckExact(args[10]),
                  BIND_CALL_USAGE, args, specs, 13) < 0 ||
            slots_bind(args[7], core_engine_names, 1, core_engine_off) < 0)
        return NULL;
    PyObject *fields = PyObject_GetAttrString(args[0], "__slots__");
    Py_ssize_t nfields = fields == NULL ? -1 : PyObject_Length(fields);
    Py_XDECREF(fields);
    if (nfields != X_N) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "RunContext has %zd fields, %s knows %d", nfields,
                         MODULE_NAME, X_N);
        return NULL;
    }
    keep(&propagate_all_obj, args[6]);
    propagate_all = PyLong_AsLongLong(args[6]);
    compat_flags = PyLong_AsLongLong(args[10]);
    if (PyErr_Occurred())
        return NULL;
    if (intern(&str_vm, "vm") < 0 || intern(&str_lua, "lua") < 0 ||
            intern(&str_cache, "cache") < 0 || intern(&str_by_sha, "by_sha") < 0 ||
            intern(&str_set_busy, "set_busy") < 0 ||
            intern(&str_busy_reply_threshold, "busy_reply_threshold") < 0 ||
            intern(&str_answer, "_answer") < 0 ||
            (proto2 == NULL &&
                                                   (proto2 = PyLong_FromLong(2)) == NULL))
        return NULL;
    call_bound = 1;
    Py_RETURN_NONE;
}

SLOTS_MODULE(_luacall, "A script's redis.call and EVAL's runner in C, on lupa's Lua state.",
    FASTCALL("bind", bind, BIND_USAGE),
    FASTCALL("bind_call", bind_call, BIND_CALL_USAGE),
    FASTCALL("evalsha_handler", evalsha_handler, "EVALSHA's handler (c, argv)."),
    FASTCALL("evalsha_ro_handler", evalsha_ro_handler, "EVALSHA_RO's handler (c, argv)."),
    FASTCALL("bind_handlers", bind_handlers, "bind_handlers(evalsha, evalsha_ro): the Python "
             "handlers the C ones stand for"),
    FASTCALL("evalsha", evalsha, "evalsha(engine, c, argv, ro): EVALSHA's common case, or "
             "NotImplemented"),
    FASTCALL("attach", attach, "attach(id, engine): the engine whose run_call redis.call calls"),
    FASTCALL("run", run, "run(id, ref, proto, numkeys, argv): the state's runner on argv[3:]"))
