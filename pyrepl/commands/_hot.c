/* pyrepl.commands._hot: the common forms of the hottest write and read commands, in C.

   set(c, argv), get, incr, lpush, rpush, hset, zadd, exists, lpop, rpop, sadd, hincrby, expire,
   geoadd, del, bitcount, setbit, pfcount, mset, xadd, zpopmin, zpopmax, pexpireat, multi, exec,
   zrangebyscore, sinter, pfadd, zincrby, xreadgroup, spop and geosearch are the handlers of SET, GET,
   INCR, LPUSH, RPUSH, HSET, ZADD, EXISTS, LPOP, RPOP, SADD, HINCRBY, EXPIRE, GEOADD, DEL,
   BITCOUNT, SETBIT, PFCOUNT, MSET, XADD, ZPOPMIN, ZPOPMAX, PEXPIREAT, MULTI, EXEC,
   ZRANGEBYSCORE, SINTER, PFADD, ZINCRBY, XREADGROUP, SPOP and GEOSEARCH (pyrepl/commands/hot.py puts them
   in the command table). Each
   does what the Python handler's fast path does (pyrepl/commands/strings.py, lists.py,
   hashes.py, zsets.py, keys.py, sets.py, geo.py, bitmaps.py, hyperloglog.py, streams.py), on
   the same slots (pyrepl/_slots.h), for the
   form redis-benchmark and most clients send: SET key value, GET key, INCR key, LPUSH/RPUSH key
   value, HSET key field value, ZADD key <integer score> member, EXISTS key, LPOP/RPOP key, SADD
   key member, HINCRBY key field <integer>, EXPIRE key <seconds>, GEOADD key <lon> <lat> member,
   DEL key, BITCOUNT key [<start> <end>], SETBIT key <offset> 0|1, PFCOUNT key (its cached
   count), MSET key value [key value ...], XADD key <*|ms-seq> field value [field value ...]
   (onto the open tail node of a stream), ZPOPMIN / ZPOPMAX key (a big sorted set), PEXPIREAT
   key <ms> (what EXPIRE propagates as), MULTI and EXEC (a transaction without WATCH),
   ZRANGEBYSCORE key min max [WITHSCORES] (integer or infinite bounds), SINTER of 2 to 16
   keys, PFADD key element ... (a dense HyperLogLog), ZINCRBY key <integer> member,
   XREADGROUP GROUP g c [COUNT n] STREAMS key <ID> (a consumer's history), SPOP key (a set
   that keeps a member), GEOSEARCH key FROMLONLAT lon lat BYRADIUS radius unit [ASC|DESC]
   [COUNT n] (the members alone). In every other
   case, and whenever the Python handler would do more than the store (a key with a TTL, for
   GET, EXISTS and DEL one that is past; a WATCHed database, keyspace events on, a new list,
   hash or sorted set, a value of another type or form), it calls the Python handler before
   anything changed, so that stays the reference: tests/unit/test_hot.py runs both on the same random command streams and
   compares the replies, the dataset, the counters and what propagates.

   Why C (bench/RESULTS.md, "The hot commands' common forms in C"): with the dispatch, the
   reader and the reply in C, a lone SET's Python handler was ~1,500 of its ~10,200
   instructions (a frame and ~40 bytecodes around one dict store), and every command of a
   pipelined run of INCR, LPUSH, HSET or ZADD paid its frame too. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MODULE_NAME "pyrepl.commands._hot"
#include "../_slots.h"
#include "../_wbuf.h"
#include "_geohash.h"
#include "../keyspace/_ktable.h"
#include "../keyspace/_strtab.h"
#include "../keyspace/_lphash.h"
#include "../keyspace/_lplist.h"
#include "../keyspace/_lpzset.h"
#include "../keyspace/_listpack.h"   /* lp_encode_int, lp_encode_str: a stream entry */
#include "../keyspace/_streamid.h"

enum { H_SET, H_GET, H_INCR, H_LPUSH, H_RPUSH, H_HSET, H_ZADD, H_EXISTS, H_LPOP, H_RPOP,
       H_SADD, H_HINCRBY, H_EXPIRE, H_GEOADD, H_DEL, H_BITCOUNT, H_SETBIT, H_PFCOUNT, H_MSET,
       H_XADD, H_ZPOPMIN, H_ZPOPMAX, H_PEXPIREAT, H_MULTI, H_EXEC, H_ZRANGEBYSCORE, H_SINTER,
       H_PFADD, H_ZINCRBY, H_XREADGROUP, H_SPOP, H_GEOSEARCH, H_N };
static const char *const handler_names[H_N] = {
    "set", "get", "incr", "lpush", "rpush", "hset", "zadd", "exists", "lpop", "rpop", "sadd",
    "hincrby", "expire", "geoadd", "del", "bitcount", "setbit", "pfcount", "mset", "xadd",
    "zpopmin", "zpopmax", "pexpireat", "multi", "exec", "zrangebyscore", "sinter", "pfadd",
    "zincrby", "xreadgroup", "spop", "geosearch",
};
static PyObject *ref[H_N];   /* the Python handlers: the reference, and every other case */

enum { C_DB, C_CORE, C_PROPAGATE_ARGV, C_IN_MULTI, C_MULTI_QUEUE, C_MULTI_ERROR, C_WATCHED,
       C_DIRTY_CAS, C_RESTRICTED, C_OUT, C_PROTO, C_LAST_CMD, C_N };
static const char *const client_names[C_N] = {"db", "core", "propagate_argv", "in_multi",
                                              "multi_queue", "multi_error", "watched",
                                              "dirty_cas", "restricted", "out", "proto",
                                              "last_cmd"};
enum { D_DATA, D_EXPIRES, D_WATCHED, D_N };
static const char *const db_names[D_N] = {"data", "expires", "watched"};
enum { K_NOTIFY_MASK, K_DIRTY, K_STATS, K_NOW_MS, K_EXPIRY_DELETES, K_KEYS_WAITED,
       K_APPLYING_MASTER_STREAM, K_CALL_DEPTH, K_N };
static const char *const core_names[K_N] = {"notify_mask", "dirty", "stats", "now_ms",
                                            "expiry_deletes", "keys_waited",
                                            "applying_master_stream", "_call_depth"};
/* pyrepl/keyspace/stream.py's Stream, Node (its radix tree's listpacks) and Entries (an open
   node's decoded entries and listpack bytes): XADD's */
enum { S_NODES, S_LENGTH, S_LAST_ID, S_FIRST_ID, S_ENTRIES_ADDED, S_KEYS, S_GROUPS, S_N };
static const char *const stream_names[S_N] = {"nodes", "length", "last_id", "first_id",
                                              "entries_added", "keys", "groups"};
enum { N_MASTER, N_LAST, N_LIVE, N_DELETED, N_LP, N_D, N_N };
static const char *const node_names[N_N] = {"master", "last", "live", "deleted", "lp", "d"};
enum { E_FIELDS, E_IDS, E_FVS, E_FLAGS, E_OFFS, E_REST, E_COUNT, E_N };
static const char *const entries_names[E_N] = {"fields", "ids", "fvs", "flags", "offs", "rest",
                                               "count"};
enum { T_HITS, T_MISSES, T_N };
static const char *const stats_names[T_N] = {"keyspace_hits", "keyspace_misses"};

static Py_ssize_t client_off[C_N], db_off[D_N], core_off[K_N], stats_off[T_N];
static Py_ssize_t stream_off[S_N], node_off[N_N], entries_off[E_N];
static PyTypeObject *client_type, *db_type, *core_type, *stats_type, *deque_type, *zset_type;
static PyTypeObject *stream_type, *node_type, *entries_type;
static PyObject *ok;            /* pyrepl.resp.types.OK: SET's reply */
static PyObject *appendleft, *append, *popleft, *pop_right, *set_score;  /* deque's, ZSet's */
static PyObject *zero;          /* the int 0 (CPython's cached one): no keyspace events */
static PyObject *str_config, *str_lazy_user_del;   /* core.config.lazyfree_lazy_user_del */
static PyObject *str_max_bulk;   /* core.config.proto_max_bulk_len */
static PyObject *str_node_max_bytes, *str_node_max_entries;   /* stream-node-max-bytes/entries */
static PyObject *str_at, *str_remove;   /* ZSet's _at and remove */
static PyObject *str_score;   /* a sorted set's score (either encoding's) */
static PyObject *srem_name;   /* b"SREM": what SPOP propagates as */
static PyObject *name_pexpireat, *name_zadd;   /* what EXPIRE and GEOADD propagate as */
static int bound;   /* bind() ran to its end */
static long long added;         /* zset.ADDED, a result of set_score */
static KTable_CAPI *kt;         /* the keyspace's table (pyrepl/keyspace/_ktable.h) */
static LPHash_CAPI *lh;         /* small hashes (pyrepl/keyspace/_lphash.h) */
static LPList_CAPI *ll;         /* small lists (pyrepl/keyspace/_lplist.h) */
static LPZSet_CAPI *lz;         /* small sorted sets (pyrepl/keyspace/_lpzset.h) */
static StrTab_CAPI *st;         /* hash tables of bytes (pyrepl/keyspace/_strtab.h) */

/* bind(Client, Database, ServerCore, Stats, deque, ZSet, OK, ADDED, Stream, Node, Entries,
   handlers): handlers maps each name above to its Python handler. */
#define BIND_USAGE "bind(Client, Database, ServerCore, Stats, deque, ZSet, OK, ADDED, Stream, " \
                   "Node, Entries, handlers)"

static PyObject *
bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const slots_spec specs[11] = {
        SLOTS_OF(client), SLOTS_OF(db), SLOTS_OF(core), SLOTS_OF(stats),
        KEPT(&deque_type), KEPT(&zset_type), KEPT(&ok), KEPT(NULL),
        SLOTS_OF(stream), SLOTS_OF(node), SLOTS_OF(entries),
    };
    int form = nargs == 12 && PyDict_CheckExact(args[11]);
    if (bind_args(form, BIND_USAGE, args, specs, 11) < 0)
        return NULL;
    for (int i = 0; i < H_N; i++) {
        PyObject *h = PyDict_GetItemString(args[11], handler_names[i]);
        if (h == NULL) {
            PyErr_Format(PyExc_KeyError, "no Python handler for %s", handler_names[i]);
            return NULL;
        }
        keep(&ref[i], h);
    }
    added = PyLong_AsLongLong(args[7]);
    if (added == -1 && PyErr_Occurred())
        return NULL;
    if (keep_attr(&appendleft, args[4], "appendleft") || keep_attr(&append, args[4], "append") ||
            keep_attr(&popleft, args[4], "popleft") || keep_attr(&pop_right, args[4], "pop") ||
            keep_attr(&set_score, args[5], "set_score"))
        return NULL;
    if ((zero == NULL && (zero = PyLong_FromLong(0)) == NULL) ||
            intern(&str_config, "config") < 0 ||
            intern(&str_lazy_user_del, "lazyfree_lazy_user_del") < 0 ||
            intern(&str_max_bulk, "proto_max_bulk_len") < 0 ||
            intern(&str_node_max_bytes, "stream_node_max_bytes") < 0 ||
            intern(&str_node_max_entries, "stream_node_max_entries") < 0 ||
            intern(&str_at, "_at") < 0 || intern(&str_remove, "remove") < 0 ||
            intern(&str_score, "score") < 0 ||
            (srem_name == NULL && (srem_name = PyBytes_FromString("SREM")) == NULL))
        return NULL;
    if (kt == NULL && (kt = PyCapsule_Import(KTABLE_CAPSULE, 0)) == NULL)
        return NULL;
    if (kt->version != KTABLE_CAPI_VERSION) {
        kt = NULL;
        PyErr_SetString(PyExc_ImportError, "pyrepl.keyspace._ktable: another C API version");
        return NULL;
    }
    if (lh == NULL && (lh = PyCapsule_Import(LPHASH_CAPSULE, 0)) == NULL)
        return NULL;
    if (lh->version != LPHASH_CAPI_VERSION) {
        lh = NULL;
        PyErr_SetString(PyExc_ImportError, "pyrepl.keyspace._lphash: another C API version");
        return NULL;
    }
    if (lz == NULL && (lz = PyCapsule_Import(LPZSET_CAPSULE, 0)) == NULL)
        return NULL;
    if (lz->version != LPZSET_CAPI_VERSION) {
        lz = NULL;
        PyErr_SetString(PyExc_ImportError, "pyrepl.keyspace._lpzset: another C API version");
        return NULL;
    }
    if (ll == NULL && (ll = PyCapsule_Import(LPLIST_CAPSULE, 0)) == NULL)
        return NULL;
    if (ll->version != LPLIST_CAPI_VERSION) {
        ll = NULL;
        PyErr_SetString(PyExc_ImportError, "pyrepl.keyspace._lplist: another C API version");
        return NULL;
    }
    if (st == NULL && (st = PyCapsule_Import(STRTAB_CAPSULE, 0)) == NULL)
        return NULL;
    if (st->version != STRTAB_CAPI_VERSION) {
        st = NULL;
        PyErr_SetString(PyExc_ImportError, "pyrepl.keyspace._strtab: another C API version");
        return NULL;
    }
    bound = 1;
    Py_RETURN_NONE;
}

/* What every common form needs, found for a request of n arguments whose key (argv[key_at],
   hot_case's argv[1]) is bytes: the client's database's table (a KeyTable: get touches the
   key's age, as Redis's lookupKey, and set stamps it, as setKey), with no TTL on the key, no
   WATCH on the database and no keyspace events on; the core, for its counters. ``ttl``: TTL_NONE, the key has no TTL;
   TTL_LIVE, it may have one still to come (the key is not expired: a lookup finds it as it
   finds a key without one); TTL_ANY, any (the caller checks it: h->expires is the database's
   TTL table). 1 when all holds, 0 otherwise (nothing moved, no error set), -1 on an
   exception. */
enum { TTL_NONE, TTL_LIVE, TTL_ANY };

/* 1 when key has no TTL in expires or one still to come, 0 when it is past (a lookup would
   expire the key: Database.expire_if_needed, the reference's), -1 on an exception. */
static int
ttl_live(PyObject *core, PyObject *expires, PyObject *key)
{
    PyObject *when = kt->peek(expires, key);
    if (when == NULL)
        return PyErr_Occurred() ? -1 : 1;
    long long at = slot_int(when), now = slot_int(SLOT_AT(core, core_off[K_NOW_MS]));
    Py_DECREF(when);
    return at >= 0 && now >= 0 && at > now;
}
typedef struct {
    PyObject *c, *core, *data, *expires, *key;
} Hot;

static int
hot_case_at(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t n, Hot *h, int ttl,
            Py_ssize_t key_at)
{
    if (nargs != 2)
        return 0;
    PyObject *c = args[0], *argv = args[1];
    if (Py_TYPE(c) != client_type || !PyList_CheckExact(argv) || PyList_GET_SIZE(argv) != n)
        return 0;
    PyObject *db = SLOT_AT(c, client_off[C_DB]), *core = SLOT_AT(c, client_off[C_CORE]);
    if (db == NULL || core == NULL || Py_TYPE(db) != db_type || Py_TYPE(core) != core_type ||
            !slots_all_set(db, db_off, D_N) || !slots_all_set(core, core_off, K_N))
        return 0;
    PyObject *data = SLOT_AT(db, db_off[D_DATA]), *expires = SLOT_AT(db, db_off[D_EXPIRES]),
             *watched = SLOT_AT(db, db_off[D_WATCHED]), *key = PyList_GET_ITEM(argv, key_at);
    if (Py_TYPE(data) != kt->type || Py_TYPE(expires) != kt->type ||
            !PyDict_CheckExact(watched) || PyDict_GET_SIZE(watched) != 0 ||
            SLOT_AT(core, core_off[K_NOTIFY_MASK]) != zero || !PyBytes_CheckExact(key))
        return 0;
    if (ttl == TTL_NONE && kt->len(expires) != 0) {
        int has = kt->contains(expires, key);
        if (has != 0)
            return has < 0 ? -1 : 0;
    } else if (ttl == TTL_LIVE && kt->len(expires) != 0) {
        int live = ttl_live(core, expires, key);
        if (live <= 0)
            return live;
    }
    h->c = c;
    h->expires = expires;
    h->core = core;
    h->data = data;
    h->key = key;
    return 1;
}

/* hot_case_at of the key at argv[1] */
static int
hot_case(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t n, Hot *h, int ttl)
{
    return hot_case_at(args, nargs, n, h, ttl, 1);
}

/* The command's Python handler (the reference) for the same call. */
static PyObject *
reference(int which, PyObject *const *args, Py_ssize_t nargs)
{
    return PyObject_Vectorcall(ref[which], args, nargs, NULL);
}

/* A handler's start: ``h`` set for the common case of a request of n words; for any other,
   the reference's reply (NULL on an exception) returned at once. */
#define HOT_CASE(which, n) HOT_CASE_TTL(which, n, TTL_NONE)
#define HOT_CASE_TTL(which, n, ttl)                                         \
    Hot h;                                                                  \
    do {                                                                    \
        if (!bound)                                                         \
            return unbound_error(MODULE_NAME, handler_names[which]);       \
        int on_ = hot_case(args, nargs, (n), &h, (ttl));                    \
        if (on_ <= 0)                                                       \
            return on_ < 0 ? NULL : reference((which), args, nargs);        \
    } while (0)

/* core.dirty += 1, then the reply (stolen) handed back; NULL on an exception. */
static PyObject *
dirtied(Hot *h, PyObject *reply)
{
    if (reply != NULL && slot_add(h->core, core_off[K_DIRTY], 1) < 0)
        Py_CLEAR(reply);
    return reply;
}

/* SET key value; a TTL still to come goes with the old value (an expired key's lookup, which
   deletes and propagates it, is the reference's) */
static PyObject *
hot_set(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE_TTL(H_SET, 3, TTL_LIVE);
    if ((kt->len(h.expires) != 0 && kt->del(h.expires, h.key) < 0) ||
            kt->set(h.data, h.key, PyList_GET_ITEM(args[1], 2)) < 0)
        return NULL;
    return dirtied(&h, Py_NewRef(ok));
}

/* MSET key value [key value ...]: every key without a TTL or with one still to come (checked
   before anything moves; a key past its TTL is the reference's, whose lookup expires it) */
static PyObject *
hot_mset(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t n = nargs == 2 && PyList_CheckExact(args[1]) ? PyList_GET_SIZE(args[1]) : 0;
    if (n < 3 || n % 2 == 0)   /* (the arity's error: the reference's) */
        n = 0;
    HOT_CASE_TTL(H_MSET, n, TTL_ANY);
    PyObject *argv = args[1];
    int timed = kt->len(h.expires) != 0;
    for (Py_ssize_t j = 1; j < n; j += 2) {
        PyObject *key = PyList_GET_ITEM(argv, j);
        int live = PyBytes_CheckExact(key) ? (timed ? ttl_live(h.core, h.expires, key) : 1) : 0;
        if (live <= 0)
            return live < 0 ? NULL : reference(H_MSET, args, nargs);
    }
    for (Py_ssize_t j = 1; j < n; j += 2) {   /* (Database.set: the value, the TTL gone) */
        PyObject *key = PyList_GET_ITEM(argv, j);
        if ((timed && kt->del(h.expires, key) < 0) ||
                kt->set(h.data, key, PyList_GET_ITEM(argv, j + 1)) < 0)
            return NULL;
    }
    if (slot_add(h.core, core_off[K_DIRTY], (n - 1) / 2) < 0)
        return NULL;
    return Py_NewRef(ok);
}

/* GET key: a string, or nil (a miss); the key may have a TTL still to come */
static PyObject *
hot_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE_TTL(H_GET, 2, TTL_LIVE);
    PyObject *v = kt->get(h.data, h.key);     /* (a new reference) */
    if (v == NULL && PyErr_Occurred())
        return NULL;
    PyObject *stats = SLOT_AT(h.core, core_off[K_STATS]);
    if ((v != NULL && !PyBytes_CheckExact(v)) ||      /* (WRONGTYPE) */
            Py_TYPE(stats) != stats_type || !slots_all_set(stats, stats_off, T_N)) {
        Py_XDECREF(v);
        return reference(H_GET, args, nargs);
    }
    if (slot_add(stats, stats_off[v == NULL ? T_MISSES : T_HITS], 1) < 0) {
        Py_XDECREF(v);
        return NULL;
    }
    return v == NULL ? Py_NewRef(Py_None) : v;
}

/* EXISTS key: 1 or 0, the key's age untouched (LOOKUP_NOTOUCH), a hit or a miss counted; the
   key may have a TTL still to come */
static PyObject *
hot_exists(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE_TTL(H_EXISTS, 2, TTL_LIVE);
    PyObject *v = kt->peek(h.data, h.key);    /* (a new reference) */
    if (v == NULL && PyErr_Occurred())
        return NULL;
    int found = v != NULL;
    Py_XDECREF(v);
    PyObject *stats = SLOT_AT(h.core, core_off[K_STATS]);
    if (Py_TYPE(stats) != stats_type || !slots_all_set(stats, stats_off, T_N))
        return reference(H_EXISTS, args, nargs);
    if (slot_add(stats, stats_off[found ? T_HITS : T_MISSES], 1) < 0)
        return NULL;
    return PyLong_FromLong(found);
}

/* core.config.<name> (new ref), NULL on an exception. */
static PyObject *
config_value(PyObject *core, PyObject *name)
{
    PyObject *cfg = PyObject_GetAttr(core, str_config);
    PyObject *v = cfg == NULL ? NULL : PyObject_GetAttr(cfg, name);
    Py_XDECREF(cfg);
    return v;
}

/* A config value that is a plain int (-1 when it is not, or on an exception: *err set). */
static long long
config_int(PyObject *core, PyObject *name, int *err)
{
    PyObject *v = config_value(core, name);
    if (v == NULL) {
        *err = 1;
        return -1;
    }
    long long x = slot_int(v);
    Py_DECREF(v);
    return x;
}

/* DEL key, without lazyfree-lazy-user-del: 1 when the key was there (its value freed now, its
   TTL, one still to come, gone with it), 0 when not (the directive not read: nothing to free) */
static PyObject *
hot_del(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE_TTL(H_DEL, 2, TTL_LIVE);
    int there = kt->contains(h.data, h.key);
    if (there <= 0)
        return there < 0 ? NULL : PyLong_FromLong(0);
    PyObject *lazy = config_value(h.core, str_lazy_user_del);
    if (lazy == NULL)
        return NULL;
    Py_DECREF(lazy);
    if (lazy != Py_False)   /* (UNLINK's way: the reference) */
        return reference(H_DEL, args, nargs);
    int r = kt->del(h.data, h.key);
    if (r > 0 && kt->len(h.expires) != 0 && kt->del(h.expires, h.key) < 0)   /* (its TTL) */
        r = -1;
    if (r < 0)
        return NULL;
    return r ? dirtied(&h, PyLong_FromLong(1)) : PyLong_FromLong(0);
}

/* INCR key: a missing key counts from 0. A string that is an integer is kept in the table's
   entry (keyspace/_ktable.c, "values"): read and stored as one, no text made. The key's age is
   touched once, by the store (Redis's lookupKeyWrite, then an overwrite that keeps it). */
static PyObject *
hot_incr(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(H_INCR, 2);
    long long x = 0;
    int found = kt->peek_int(h.data, h.key, &x);
    if (found < 0)
        return NULL;
    if (found == KT_OTHER)
        return reference(H_INCR, args, nargs);   /* (WRONGTYPE, text, or past 62 bits) */
    x += 1;     /* (|x| < 2**62: no overflow) */
    if (kt->set_int(h.data, h.key, x) < 0)
        return NULL;
    return dirtied(&h, PyLong_FromLongLong(x));
}

/* LPUSH / RPUSH key element, onto an existing list: its length */
static PyObject *
push(int which, PyObject *method, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(which, 3);
    PyObject *lst = kt->get(h.data, h.key);   /* (a new reference) */
    if (lst != NULL && Py_TYPE(lst) == ll->type && PyBytes_CheckExact(PyList_GET_ITEM(args[1], 2))) {
        Py_ssize_t n = ll->push_fit(lst, PyList_GET_ITEM(args[1], 2), which == H_LPUSH);
        Py_DECREF(lst);
        if (n == -2)
            return reference(which, args, nargs);   /* (it becomes a deque) */
        return n < 0 ? NULL : dirtied(&h, PyLong_FromSsize_t(n));
    }
    if (lst == NULL || Py_TYPE(lst) != deque_type) {
        Py_XDECREF(lst);
        return PyErr_Occurred() ? NULL : reference(which, args, nargs);   /* (a new list) */
    }
    PyObject *margs[2] = {lst, PyList_GET_ITEM(args[1], 2)};
    PyObject *r = PyObject_Vectorcall(method, margs, 2, NULL);
    Py_ssize_t len = r == NULL ? -1 : PyObject_Size(lst);
    Py_XDECREF(r);
    Py_DECREF(lst);
    return len < 0 ? NULL : dirtied(&h, PyLong_FromSsize_t(len));
}

static PyObject *
hot_lpush(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return push(H_LPUSH, appendleft, args, nargs);
}

static PyObject *
hot_rpush(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return push(H_RPUSH, append, args, nargs);
}

/* LPOP / RPOP key, from a list (a deque: the big form) that keeps an element after it: the
   element popped (a list left empty is deleted: the reference does it); nil for no key */
static PyObject *
pop(int which, PyObject *method, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(which, 2);
    PyObject *lst = kt->get(h.data, h.key);   /* (a new reference) */
    if (lst == NULL)        /* no such key: nil, nothing counted (the reference's answer) */
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_ssize_t len = Py_TYPE(lst) == deque_type ? PyObject_Size(lst) : 0;
    if (len < 2) {
        Py_XDECREF(lst);
        return PyErr_Occurred() ? NULL : reference(which, args, nargs);
    }
    PyObject *v = PyObject_Vectorcall(method, &lst, 1, NULL);
    Py_DECREF(lst);
    return v == NULL ? NULL : dirtied(&h, v);
}

static PyObject *
hot_lpop(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return pop(H_LPOP, popleft, args, nargs);
}

static PyObject *
hot_rpop(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return pop(H_RPOP, pop_right, args, nargs);
}

/* HSET key field value, into an existing hash (a listpack that still fits one after it, or a
   StrDict, a hash table: no field TTLs): 1 for a new field */
static PyObject *
hot_hset(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(H_HSET, 4);
    PyObject *hash = kt->get(h.data, h.key);  /* (a new reference) */
    if (hash != NULL && Py_TYPE(hash) == lh->type &&
            PyBytes_CheckExact(PyList_GET_ITEM(args[1], 2)) &&
            PyBytes_CheckExact(PyList_GET_ITEM(args[1], 3))) {
        int r = lh->set_fit(hash, PyList_GET_ITEM(args[1], 2), PyList_GET_ITEM(args[1], 3));
        Py_DECREF(hash);
        if (r == -2)
            return reference(H_HSET, args, nargs);  /* (it becomes a hash table) */
        return r < 0 ? NULL : dirtied(&h, PyLong_FromLong(r));
    }
    if (hash == NULL || Py_TYPE(hash) != st->dict_type ||
            !PyBytes_CheckExact(PyList_GET_ITEM(args[1], 2)) ||
            !PyBytes_CheckExact(PyList_GET_ITEM(args[1], 3))) {
        Py_XDECREF(hash);
        return PyErr_Occurred() ? NULL : reference(H_HSET, args, nargs);
    }
    int r = st->dict_set(hash, PyList_GET_ITEM(args[1], 2), PyList_GET_ITEM(args[1], 3));
    Py_DECREF(hash);
    return r < 0 ? NULL : dirtied(&h, PyLong_FromLong(r));
}

/* SADD key member, into an existing set of strings (a StrSet, a hash table): 1 for a new
   member, 0 (nothing dirtied) for one it holds */
static PyObject *
hot_sadd(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(H_SADD, 3);
    PyObject *m = PyList_GET_ITEM(args[1], 2);
    PyObject *s = kt->get(h.data, h.key);   /* (a new reference) */
    if (s == NULL || Py_TYPE(s) != st->set_type || !PyBytes_CheckExact(m)) {
        Py_XDECREF(s);
        return PyErr_Occurred() ? NULL : reference(H_SADD, args, nargs);   /* (a new set) */
    }
    int r = st->set_add(s, m);
    Py_DECREF(s);
    if (r < 0)
        return NULL;
    return r ? dirtied(&h, PyLong_FromLong(1)) : PyLong_FromLong(0);
}

/* SPOP key of a set in its hash-table form (a StrSet) that keeps a member after it: a member
   at random (the set's generator, as random_member), removed; SREM key member propagates
   instead. An intset (Python's random), the last member (its key goes), no key, another
   type: the reference. */
static PyObject *
hot_spop(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(H_SPOP, 2);
    PyObject *s = kt->get(h.data, h.key);   /* (a new reference) */
    if (s == NULL || Py_TYPE(s) != st->set_type || PyObject_Size(s) < 2) {
        Py_XDECREF(s);
        return PyErr_Occurred() ? NULL : reference(H_SPOP, args, nargs);
    }
    PyObject *m = st->set_pop_random(s);
    Py_DECREF(s);
    PyObject *pa = m == NULL ? NULL : PyList_New(3);
    if (pa == NULL) {
        Py_XDECREF(m);
        return NULL;
    }
    PyList_SET_ITEM(pa, 0, Py_NewRef(srem_name));
    PyList_SET_ITEM(pa, 1, Py_NewRef(h.key));
    PyList_SET_ITEM(pa, 2, Py_NewRef(m));
    if (slot_set(h.c, client_off[C_PROPAGATE_ARGV], pa) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return dirtied(&h, m);
}

/* p[0:n] is a decimal integer as Redis writes one, of 1 to 18 digits (no sign but '-', no
   leading zero, not "-0"): 1 with *out set, else 0. (Any such text reads as the same number
   wherever an integer argument or value is parsed; two of them add without overflow.) */
static int
small_int_text(const char *p, Py_ssize_t n, long long *out)
{
    int neg = n > 0 && p[0] == '-';
    p += neg;
    n -= neg;
    if (n < 1 || n > 18 || (p[0] == '0' && (n > 1 || neg)))
        return 0;
    long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

/* small_int_text of the bytes b */
static int
small_int(PyObject *b, long long *out)
{
    return PyBytes_CheckExact(b) && small_int_text(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), out);
}

/* v's decimal text as bytes (new ref; NULL on an exception). */
static PyObject *
int_text(long long v)
{
    char digits[24], *p = digits + sizeof digits;   /* written from its end */
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    return PyBytes_FromStringAndSize(p, digits + sizeof digits - p);
}

/* c.propagate_argv = [name, key, <v's text>(, last)]: what the reference writes for a command
   it propagates rewritten (*name made once); -1 on an exception. */
static int
propagate_as(Hot *h, PyObject **name, const char *text, long long v, PyObject *last)
{
    if (*name == NULL && (*name = PyBytes_FromString(text)) == NULL)
        return -1;
    PyObject *pa = PyList_New(last == NULL ? 3 : 4);
    if (pa == NULL)
        return -1;
    PyList_SET_ITEM(pa, 0, Py_NewRef(*name));
    PyList_SET_ITEM(pa, 1, Py_NewRef(h->key));
    PyList_SET_ITEM(pa, 2, int_text(v));
    if (last != NULL)
        PyList_SET_ITEM(pa, 3, Py_NewRef(last));
    if (PyList_GET_ITEM(pa, 0) == NULL || PyList_GET_ITEM(pa, 2) == NULL) {
        Py_DECREF(pa);
        return -1;
    }
    Py_XSETREF(SLOT_AT(h->c, client_off[C_PROPAGATE_ARGV]), pa);
    return 0;
}

/* HINCRBY key field increment, in an existing hash table (a StrDict), the increment and any
   value there small integers (small_int): the new value, stored as its text */
static PyObject *
hot_hincrby(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(H_HINCRBY, 4);
    PyObject *f = PyList_GET_ITEM(args[1], 2), *old;
    long long by, x = 0;
    if (!small_int(PyList_GET_ITEM(args[1], 3), &by) || !PyBytes_CheckExact(f))
        return reference(H_HINCRBY, args, nargs);
    PyObject *hash = kt->get(h.data, h.key);  /* (a new reference) */
    if (hash == NULL || Py_TYPE(hash) != st->dict_type ||
            ((old = st->dict_get(hash, f)) != NULL && !small_int(old, &x))) {
        Py_XDECREF(hash);
        return PyErr_Occurred() ? NULL : reference(H_HINCRBY, args, nargs);
    }
    x += by;
    PyObject *text = int_text(x);
    int r = text == NULL ? -1 : st->dict_set(hash, f, text);
    Py_XDECREF(text);
    Py_DECREF(hash);
    return r < 0 ? NULL : dirtied(&h, PyLong_FromLongLong(x));
}

/* EXPIRE key seconds, seconds an integer of 1 to 12 digits (not 0), on a master, for a key
   that is there and not expired (with a TTL or without): its TTL set to now + seconds, 1
   answered, and PEXPIREAT key <when> to propagate (c.propagate_argv), as the reference does;
   0 for no key */
static PyObject *
hot_expire(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE_TTL(H_EXPIRE, 3, TTL_ANY);
    long long secs, now = slot_int(SLOT_AT(h.core, core_off[K_NOW_MS]));
    if (!small_int(PyList_GET_ITEM(args[1], 2), &secs) || secs < 1 || secs > 999999999999LL ||
            now < 0 || SLOT_AT(h.core, core_off[K_EXPIRY_DELETES]) != Py_True)
        return reference(H_EXPIRE, args, nargs);
    if (kt->len(h.expires) != 0) {   /* a TTL in the past: the lookup expires the key */
        PyObject *was = kt->peek(h.expires, h.key);
        if (was == NULL && PyErr_Occurred())
            return NULL;
        long long old = was == NULL ? 0 : slot_int(was);
        Py_XDECREF(was);
        if (was != NULL && old <= now)
            return reference(H_EXPIRE, args, nargs);
    }
    PyObject *v = kt->get(h.data, h.key);   /* (a new reference; the age touched) */
    if (v == NULL)   /* no such key: 0, nothing changed */
        return PyErr_Occurred() ? NULL : PyLong_FromLong(0);
    Py_DECREF(v);
    long long when = now + secs * 1000;
    PyObject *w = PyLong_FromLongLong(when);
    int rc = w == NULL ? -1 : kt->set(h.expires, h.key, w);
    Py_XDECREF(w);
    if (rc < 0 || propagate_as(&h, &name_pexpireat, "PEXPIREAT", when, NULL) < 0)
        return NULL;
    return dirtied(&h, PyLong_FromLong(1));
}

/* PEXPIREAT key when, when an integer of 1 to 18 digits, for a key that is there and not
   expired (with a TTL or without): its TTL set to when, 1 answered, propagated as it came; 0
   for no key. What EXPIRE propagates as, so a replica applies its master's EXPIREs here (its
   master's stream: a time already past sets the TTL, the master's DEL will come). A past
   time on a master (the key deleted, DEL propagated) and a client's TTL on a writable
   replica (remembered for the replica's own expiry) are the reference's. */
static PyObject *
hot_pexpireat(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE_TTL(H_PEXPIREAT, 3, TTL_LIVE);
    long long when, now = slot_int(SLOT_AT(h.core, core_off[K_NOW_MS]));
    PyObject *deletes = SLOT_AT(h.core, core_off[K_EXPIRY_DELETES]);
    if (!small_int(PyList_GET_ITEM(args[1], 2), &when) || when < 0 || now < 0 ||
            (deletes == Py_True ? when <= now :
             deletes != Py_False ||
             SLOT_AT(h.core, core_off[K_APPLYING_MASTER_STREAM]) != Py_True))
        return reference(H_PEXPIREAT, args, nargs);
    PyObject *v = kt->get(h.data, h.key);   /* (a new reference; the age touched) */
    if (v == NULL)   /* no such key: 0, nothing changed */
        return PyErr_Occurred() ? NULL : PyLong_FromLong(0);
    Py_DECREF(v);
    PyObject *w = PyLong_FromLongLong(when);
    int rc = w == NULL ? -1 : kt->set(h.expires, h.key, w);
    Py_XDECREF(w);
    return rc < 0 ? NULL : dirtied(&h, PyLong_FromLong(1));
}

/* -- MULTI and EXEC (pyrepl/commands/transactions.py) --------------------------------- */

/* EXEC's callees, found on its first call (their modules import the command table, which
   imports this one): fastpath.call (ServerCore.call, in C), writer.encode, NO_REPLY and
   transactions.run_queue (the reference's loop, for the rest of a queue once the client is
   restricted). */
static PyObject *call_fn, *encode_fn, *no_reply, *run_queue_fn;

static int
exec_bind(void)
{
    return keep_import(&call_fn, "pyrepl.fastpath", "call") < 0 ||
           keep_import(&encode_fn, "pyrepl.resp.writer", "encode") < 0 ||
           keep_import(&no_reply, "pyrepl.resp.types", "NO_REPLY") < 0 ||
           keep_import(&run_queue_fn, "pyrepl.commands.transactions", "run_queue") < 0 ? -1 : 0;
}

/* The client (args[0]) of a call (c, argv) when it is a Client with its slots set. */
static PyObject *
tx_client(PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || Py_TYPE(args[0]) != client_type ||
            !slots_all_set(args[0], client_off, C_N))
        return NULL;
    return args[0];
}

/* EXEC's replies are written one after the other into one buffer (what writer.encode makes
   of each: bulk strings, integers and +OK here, the rest by encode itself), handed to the
   client's output as one bytes object. */

/* reply's wire bytes written to b; -1 on an exception. */
static int
buf_reply(wbuf *b, PyObject *reply, PyObject *proto)
{
    if (PyBytes_CheckExact(reply))
        return wbuf_bulk(b, PyBytes_AS_STRING(reply), PyBytes_GET_SIZE(reply));
    if (PyLong_CheckExact(reply)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(reply, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (!overflow)
            return wbuf_header(b, ':', v);
    } else if (reply == ok) {
        return wbuf_put(b, "+OK\r\n", 5);
    }
    PyObject *eargs[2] = {reply, proto};
    PyObject *wire = PyObject_Vectorcall(encode_fn, eargs, 2, NULL);
    if (wire == NULL)
        return -1;
    int rc = PyBytes_Check(wire) ? wbuf_put(b, PyBytes_AS_STRING(wire), PyBytes_GET_SIZE(wire))
                                 : (PyErr_SetString(PyExc_TypeError, "encode: bytes"), -1);
    Py_DECREF(wire);
    return rc;
}

/* What b holds, inserted into out at index at (appended: at == its length); b emptied. */
static int
buf_flush(wbuf *b, PyObject *out, Py_ssize_t at)
{
    if (b->len == 0)
        return 0;
    PyObject *data = PyBytes_FromStringAndSize((const char *)b->b, b->len);
    if (data == NULL)
        return -1;
    b->len = 0;
    int rc = PyList_Insert(out, at, data);
    Py_DECREF(data);
    return rc;
}

/* MULTI outside a transaction: in MULTI, with a new queue and no error; +OK */
static PyObject *
hot_multi(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bound)
        return unbound_error(MODULE_NAME, "multi");
    PyObject *c = tx_client(args, nargs);
    if (c == NULL || SLOT_AT(c, client_off[C_IN_MULTI]) != Py_False)
        return reference(H_MULTI, args, nargs);
    if (slot_set(c, client_off[C_MULTI_QUEUE], PyList_New(0)) < 0)
        return NULL;
    slot_put(c, client_off[C_IN_MULTI], Py_True);
    slot_put(c, client_off[C_MULTI_ERROR], Py_False);
    return Py_NewRef(ok);
}

/* EXEC of a transaction with no error at queueing, no WATCH, by an unrestricted client: out
   of MULTI, "*<n>" and each queued command's reply (fastpath.call, then its bytes as
   writer.encode makes them in the client's protocol: buf_reply) appended to its output as
   one bytes object (cut where a command wrote to it itself), one call level deeper (the
   transaction propagates as one unit, after it ran); NO_REPLY. A client restricted by a
   command of the transaction (AUTH) has the rest run by transactions.run_queue. */
static PyObject *
hot_exec(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bound)
        return unbound_error(MODULE_NAME, "exec");
    PyObject *c = tx_client(args, nargs), *core, *queue, *out, *watched;
    if (c == NULL || SLOT_AT(c, client_off[C_IN_MULTI]) != Py_True ||
            SLOT_AT(c, client_off[C_MULTI_ERROR]) != Py_False ||
            SLOT_AT(c, client_off[C_DIRTY_CAS]) != Py_False ||
            SLOT_AT(c, client_off[C_RESTRICTED]) != Py_False ||
            !PyList_CheckExact(watched = SLOT_AT(c, client_off[C_WATCHED])) ||
            PyList_GET_SIZE(watched) != 0 ||
            !PyList_CheckExact(queue = SLOT_AT(c, client_off[C_MULTI_QUEUE])) ||
            !PyList_CheckExact(out = SLOT_AT(c, client_off[C_OUT])) ||
            Py_TYPE(core = SLOT_AT(c, client_off[C_CORE])) != core_type ||
            !slots_all_set(core, core_off, K_N) ||
            slot_int(SLOT_AT(core, core_off[K_CALL_DEPTH])) < 0)
        return reference(H_EXEC, args, nargs);
    if (exec_bind() < 0)
        return NULL;
    /* c.in_multi = False; c.multi_queue = []; c.unwatch_all() (no key watched) */
    PyObject *fresh = PyList_New(0), *fresh_watched = PyList_New(0);
    if (fresh == NULL || fresh_watched == NULL) {
        Py_XDECREF(fresh);
        Py_XDECREF(fresh_watched);
        return NULL;
    }
    Py_INCREF(queue);
    Py_INCREF(out);
    Py_INCREF(core);
    PyObject *exec_cmd = Py_NewRef(SLOT_AT(c, client_off[C_LAST_CMD])), *result = NULL;
    slot_put(c, client_off[C_IN_MULTI], Py_False);
    slot_set(c, client_off[C_MULTI_QUEUE], fresh);
    slot_set(c, client_off[C_WATCHED], fresh_watched);
    slot_put(c, client_off[C_DIRTY_CAS], Py_False);
    Py_ssize_t n = PyList_GET_SIZE(queue);
    uint8_t local[512];   /* (the heap only past it) */
    wbuf buf;
    wbuf_local(&buf, local, sizeof local);
    int rc = wbuf_header(&buf, '*', n);
    if (rc < 0 || slot_add(core, core_off[K_CALL_DEPTH], 1) < 0) {
        wbuf_free(&buf);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        PyObject *item = PyList_GET_ITEM(queue, i);
        if (SLOT_AT(c, client_off[C_RESTRICTED]) != Py_False) {   /* (AUTH inside) */
            PyObject *start = PyLong_FromSsize_t(i);
            PyObject *rargs[5] = {c, core, queue, start, exec_cmd};
            PyObject *r = start == NULL || buf_flush(&buf, out, PyList_GET_SIZE(out)) < 0
                              ? NULL : PyObject_Vectorcall(run_queue_fn, rargs, 5, NULL);
            Py_XDECREF(start);
            rc = r == NULL ? -1 : 1;
            Py_XDECREF(r);
            break;
        }
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "EXEC: a queued command is (cmd, argv)");
            rc = -1;
            break;
        }
        PyObject *cargs[4] = {core, c, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1)};
        Py_ssize_t before = PyList_GET_SIZE(out);
        PyObject *reply = PyObject_Vectorcall(call_fn, cargs, 4, NULL);
        if (reply == NULL) {
            rc = -1;
            break;
        }
        /* what the command wrote itself (SUBSCRIBE's frames) comes after the replies before
           it, as it would have had each been appended at once */
        PyObject *proto = SLOT_AT(c, client_off[C_PROTO]);
        if (proto == NULL)
            PyErr_SetString(PyExc_AttributeError, "proto");
        rc = proto == NULL || (PyList_GET_SIZE(out) != before &&
                               buf_flush(&buf, out, before) < 0) ? -1
                 : buf_reply(&buf, reply, proto);
        Py_DECREF(reply);
    }
    /* (finally: the replies so far go out and core._call_depth -= 1, an exception kept; an
       error of either when there was none) */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    int back = buf_flush(&buf, out, PyList_GET_SIZE(out)) < 0 ? -1 : 0;
    wbuf_free(&buf);
    if (slot_add(core, core_off[K_CALL_DEPTH], -1) < 0 && back == 0)
        back = -1;
    if (et != NULL) {
        if (back < 0)
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    } else if (back == 0 && rc >= 0) {
        result = Py_NewRef(no_reply);
    }
done:
    Py_DECREF(exec_cmd);
    Py_DECREF(core);
    Py_DECREF(out);
    Py_DECREF(queue);
    return result;
}

/* -- ZRANGEBYSCORE key min max [WITHSCORES] ------------------------------------------- */

/* A score bound as zslParseRange reads it, in the forms clients send: an optional "(" (then
   exclusive), then an integer as small_int_text reads one (a double as strtod reads it: both
   round the same integer to nearest), or "-inf", "+inf", "inf". 1 with *v, *ex set; 0 for
   any other form (the reference parses it, and answers its error). */
static int
score_bound(PyObject *b, double *v, int *ex)
{
    if (!PyBytes_CheckExact(b))
        return 0;
    const char *p = PyBytes_AS_STRING(b);
    Py_ssize_t n = PyBytes_GET_SIZE(b);
    *ex = n > 0 && p[0] == '(';
    p += *ex;
    n -= *ex;
    if ((n == 4 && memcmp(p, "-inf", 4) == 0) || (n == 4 && memcmp(p, "+inf", 4) == 0) ||
            (n == 3 && memcmp(p, "inf", 3) == 0)) {
        *v = p[0] == '-' ? -Py_HUGE_VAL : Py_HUGE_VAL;
        return 1;
    }
    long long x;
    if (!small_int_text(p, n, &x))
        return 0;
    *v = (double)x;
    return 1;
}

static PyObject *str_bisect, *str_range, *listpack_zset;   /* ZSet's _bisect, _range */

/* zset.score_start(score, ex) (ex) or score_stop(score, ex) (!ex, the bound the other way
   round): z._bisect of score, or of the next double up; len(z) for +inf where that is past
   every score. -1 on an exception. */
static Py_ssize_t
zbisect(PyObject *z, double score, int next_up)
{
    if (next_up) {
        if (score == Py_HUGE_VAL)
            return PyObject_Length(z);
        score = nextafter(score, Py_HUGE_VAL);
    }
    return call_index(z, str_bisect, score);
}

/* A read of h's key as a sorted set (either encoding), as lookup_read and its type check:
   1 with *z (a new reference; the age touched) and a hit counted; 0 for no key, a miss
   counted; 2 for a value of another type (the reference answers WRONGTYPE); -1 on an
   exception. */
static int
zset_read(Hot *h, PyObject *stats, PyObject **z)
{
    if (keep_import(&listpack_zset, "pyrepl.keyspace.zset", "ListpackZSet") < 0)
        return -1;
    *z = kt->get(h->data, h->key);
    if (*z == NULL)
        return PyErr_Occurred() || slot_add(stats, stats_off[T_MISSES], 1) < 0 ? -1 : 0;
    if (Py_TYPE(*z) != zset_type && (PyObject *)Py_TYPE(*z) != listpack_zset) {
        Py_DECREF(*z);
        return 2;
    }
    if (slot_add(stats, stats_off[T_HITS], 1) < 0) {
        Py_DECREF(*z);
        return -1;
    }
    return 1;
}

/* ZRANGEBYSCORE key min max [WITHSCORES] of a sorted set (either encoding), the bounds in
   score_bound's forms: zrange_generic's reply (the members, with their scores as a flat
   array in RESP2 and as pairs in RESP3), a hit counted; an empty array and a miss for no
   key. The key may have a TTL still to come. */
static PyObject *
hot_zrangebyscore(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t argc = nargs == 2 && PyList_CheckExact(args[1]) ? PyList_GET_SIZE(args[1]) : 0;
    HOT_CASE_TTL(H_ZRANGEBYSCORE, argc == 5 ? 5 : 4, TTL_LIVE);
    PyObject *argv = args[1], *stats = SLOT_AT(h.core, core_off[K_STATS]);
    double lo, hi;
    int loex, hiex, withscores = 0;
    if (argc == 5) {
        PyObject *o = PyList_GET_ITEM(argv, 4);
        if (!PyBytes_CheckExact(o) || PyBytes_GET_SIZE(o) != 10 ||
                PyOS_strnicmp(PyBytes_AS_STRING(o), "withscores", 10) != 0)
            return reference(H_ZRANGEBYSCORE, args, nargs);
        withscores = 1;
    }
    if (!score_bound(PyList_GET_ITEM(argv, 2), &lo, &loex) ||
            !score_bound(PyList_GET_ITEM(argv, 3), &hi, &hiex) ||
            Py_TYPE(stats) != stats_type || !slots_all_set(stats, stats_off, T_N))
        return reference(H_ZRANGEBYSCORE, args, nargs);
    if (intern(&str_bisect, "_bisect") < 0 || intern(&str_range, "_range") < 0)
        return NULL;
    PyObject *z;
    int found = zset_read(&h, stats, &z);
    if (found != 1)
        return found == 0 ? PyList_New(0) :
               found == 2 ? reference(H_ZRANGEBYSCORE, args, nargs) : NULL;
    PyObject *out = NULL, *items = NULL;
    Py_ssize_t start = zbisect(z, lo, loex), stop;
    if (start < 0 || (stop = zbisect(z, hi, !hiex)) < 0)
        goto done;
    if (start >= stop) {
        out = PyList_New(0);
        goto done;
    }
    PyObject *zargs[3] = {z, PyLong_FromSsize_t(start), PyLong_FromSsize_t(stop)};
    if (zargs[1] != NULL && zargs[2] != NULL)
        items = PyObject_VectorcallMethod(str_range, zargs, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                          NULL);
    Py_XDECREF(zargs[1]);
    Py_XDECREF(zargs[2]);
    if (items == NULL)
        goto done;
    if (!PyList_CheckExact(items)) {
        PyErr_SetString(PyExc_TypeError, "ZRANGEBYSCORE: _range gave no list");
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(items);
    int pairs = withscores && slot_int(SLOT_AT(h.c, client_off[C_PROTO])) == 3;
    out = PyList_New(withscores && !pairs ? 2 * n : n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        PyObject *it = PyList_GET_ITEM(items, i);
        if (!PyTuple_CheckExact(it) || PyTuple_GET_SIZE(it) != 2) {
            PyErr_SetString(PyExc_TypeError, "ZRANGEBYSCORE: items are (score, member)");
            Py_CLEAR(out);
            break;
        }
        PyObject *score = PyTuple_GET_ITEM(it, 0), *member = PyTuple_GET_ITEM(it, 1);
        if (!withscores) {
            PyList_SET_ITEM(out, i, Py_NewRef(member));
        } else if (pairs) {
            PyObject *pair = PyList_New(2);
            if (pair == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(pair, 0, Py_NewRef(member));
            PyList_SET_ITEM(pair, 1, Py_NewRef(score));
            PyList_SET_ITEM(out, i, pair);
        } else {
            PyList_SET_ITEM(out, 2 * i, Py_NewRef(member));
            PyList_SET_ITEM(out, 2 * i + 1, Py_NewRef(score));
        }
    }
done:
    Py_XDECREF(items);
    Py_DECREF(z);
    return out;
}

/* -- SINTER key [key ...] ---------------------------------------------------------------- */

static PyObject *set_types, *set_reply, *str_intersection;   /* sets.SET_TYPES, SetReply */

#define SINTER_MAX_KEYS 16

/* SINTER of 2 to 16 keys, each a set (sets.SET_TYPES) or missing, none with a TTL past:
   sets._inter's intersection (the smallest set's ``intersection`` of the others, in the
   order sorted() by size leaves them), as a SetReply, a hit or a miss counted for each key
   as its lookup_read does; an empty reply when one is missing. */
static PyObject *
hot_sinter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t argc = nargs == 2 && PyList_CheckExact(args[1]) ? PyList_GET_SIZE(args[1]) : 0;
    if (argc < 3 || argc > SINTER_MAX_KEYS + 1)
        return reference(H_SINTER, args, nargs);
    HOT_CASE_TTL(H_SINTER, argc, TTL_LIVE);
    PyObject *argv = args[1], *stats = SLOT_AT(h.core, core_off[K_STATS]);
    Py_ssize_t k = argc - 1;
    if (Py_TYPE(stats) != stats_type || !slots_all_set(stats, stats_off, T_N))
        return reference(H_SINTER, args, nargs);
    if (keep_import(&set_types, "pyrepl.commands.sets", "SET_TYPES") < 0 ||
            keep_import(&set_reply, "pyrepl.resp.types", "SetReply") < 0 ||
            intern(&str_intersection, "intersection") < 0)
        return NULL;
    /* every key a set or missing, with no TTL past (else nothing moved: the reference) */
    for (Py_ssize_t i = 1; i <= k; i++) {
        PyObject *key = PyList_GET_ITEM(argv, i);
        if (!PyBytes_CheckExact(key))
            return reference(H_SINTER, args, nargs);
        if (i > 1 && kt->len(h.expires) != 0) {
            int live = ttl_live(h.core, h.expires, key);
            if (live <= 0)
                return live < 0 ? NULL : reference(H_SINTER, args, nargs);
        }
        PyObject *v = kt->peek(h.data, key);
        if (v == NULL && PyErr_Occurred())
            return NULL;
        int ok = v == NULL || PySet_Contains(set_types, (PyObject *)Py_TYPE(v)) == 1;
        Py_XDECREF(v);
        if (!ok)
            return PyErr_Occurred() ? NULL : reference(H_SINTER, args, nargs);
    }
    /* _load_sets: each looked up (its age touched) and counted; then _inter */
    PyObject *sets[SINTER_MAX_KEYS];
    Py_ssize_t got = 0;
    int missing = 0;
    PyObject *result = NULL;
    for (Py_ssize_t i = 1; i <= k; i++) {
        PyObject *v = kt->get(h.data, PyList_GET_ITEM(argv, i));
        if (v == NULL && PyErr_Occurred())
            goto done;
        if (slot_add(stats, stats_off[v == NULL ? T_MISSES : T_HITS], 1) < 0) {
            Py_XDECREF(v);
            goto done;
        }
        if (v == NULL)
            missing = 1;
        else
            sets[got++] = v;
    }
    if (missing) {
        PyObject *empty = PyTuple_New(0);
        result = empty == NULL ? NULL : PyObject_CallOneArg(set_reply, empty);
        Py_XDECREF(empty);
        goto done;
    }
    /* sorted(sets, key=len): a stable insertion sort of k <= 16 */
    Py_ssize_t lens[SINTER_MAX_KEYS];
    for (Py_ssize_t i = 0; i < got; i++)
        if ((lens[i] = PyObject_Length(sets[i])) < 0)
            goto done;
    for (Py_ssize_t i = 1; i < got; i++) {
        PyObject *sv = sets[i];
        Py_ssize_t lv = lens[i], j = i;
        for (; j > 0 && lens[j - 1] > lv; j--) {
            sets[j] = sets[j - 1];
            lens[j] = lens[j - 1];
        }
        sets[j] = sv;
        lens[j] = lv;
    }
    /* first.intersection(*[s for s in ordered[1:] if s is not first]) */
    PyObject *cargs[SINTER_MAX_KEYS + 1];
    Py_ssize_t m = 0;
    cargs[m++] = sets[0];
    for (Py_ssize_t i = 1; i < got; i++)
        if (sets[i] != sets[0])
            cargs[m++] = sets[i];
    PyObject *r = PyObject_VectorcallMethod(str_intersection, cargs,
                                            (size_t)m | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r != NULL) {
        result = PyObject_CallOneArg(set_reply, r);
        Py_DECREF(r);
    }
done:
    for (Py_ssize_t i = 0; i < got; i++)
        Py_DECREF(sets[i]);
    return result;
}

/* ZADD's store of member at score in the sorted set z (a listpack that still fits it, or a
   skiplist; NULL: no key): 0 unchanged, 1 added, 2 updated; 3 when not a case for here (no
   key, another type, a listpack that would no longer fit), nothing changed: the caller's
   reference runs; -1 on an exception. */
static int
zset_store_in(PyObject *z, PyObject *member, double score)
{
    if (z != NULL && PyObject_TypeCheck(z, lz->type) && PyBytes_CheckExact(member)) {
        int r = lz->set_score_fit(z, member, score);
        return r == -2 ? 3 : r;   /* (it becomes a skiplist: the reference) */
    }
    if (z == NULL || Py_TYPE(z) != zset_type)
        return PyErr_Occurred() ? -1 : 3;
    PyObject *f = PyFloat_FromDouble(score);
    if (f == NULL)
        return -1;
    PyObject *zargs[3] = {z, member, f};
    PyObject *r = PyObject_Vectorcall(set_score, zargs, 3, NULL);
    Py_DECREF(f);
    if (r == NULL)
        return -1;
    long long result = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (result == -1 && PyErr_Occurred())
        return -1;
    return result == 0 ? 0 : result == added ? 1 : 2;   /* (UNCHANGED, ADDED, UPDATED) */
}

/* zset_store_in of the value at h->key */
static int
zset_store(Hot *h, PyObject *member, double score)
{
    PyObject *z = kt->get(h->data, h->key);   /* (a new reference) */
    int r = zset_store_in(z, member, score);
    Py_XDECREF(z);
    return r;
}

/* ZADD key score member, score an integer of 1 to 15 digits (exact as a double, as float()
   reads it), into an existing sorted set: 1 for a new member */
static PyObject *
hot_zadd(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(H_ZADD, 4);
    PyObject *s = PyList_GET_ITEM(args[1], 2);
    if (!PyBytes_CheckExact(s) || PyBytes_GET_SIZE(s) < 1 || PyBytes_GET_SIZE(s) > 15)
        return reference(H_ZADD, args, nargs);
    long long score = 0;
    for (Py_ssize_t i = 0; i < PyBytes_GET_SIZE(s); i++) {
        char d = PyBytes_AS_STRING(s)[i];
        if (d < '0' || d > '9')
            return reference(H_ZADD, args, nargs);
        score = score * 10 + (d - '0');
    }
    int r = zset_store(&h, PyList_GET_ITEM(args[1], 3), (double)score);
    if (r == 3)
        return reference(H_ZADD, args, nargs);
    if (r < 0)
        return NULL;
    return r == 0 ? PyLong_FromLong(0) : dirtied(&h, PyLong_FromLong(r == 1));
}

/* ZINCRBY key increment member, the increment an integer of 1 to 15 digits (exact as a double)
   with an optional '-', on an existing sorted set (either encoding; a listpack that still fits
   the member): the member's score plus the increment stored (zset_store, as ZADD's), the new
   score the reply; dirty += 1 when it changed. A finite increment on a score never makes a NaN
   (the reference's error). */
static PyObject *
hot_zincrby(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(H_ZINCRBY, 4);
    PyObject *s = PyList_GET_ITEM(args[1], 2), *member = PyList_GET_ITEM(args[1], 3);
    Py_ssize_t n = PyBytes_CheckExact(s) ? PyBytes_GET_SIZE(s) : 0;
    const char *d = n ? PyBytes_AS_STRING(s) : NULL;
    Py_ssize_t i = d != NULL && d[0] == '-';
    if (n - i < 1 || n - i > 15 || !PyBytes_CheckExact(member))
        return reference(H_ZINCRBY, args, nargs);
    long long by = 0;
    for (Py_ssize_t k = i; k < n; k++) {
        if (d[k] < '0' || d[k] > '9')
            return reference(H_ZINCRBY, args, nargs);
        by = by * 10 + (d[k] - '0');
    }
    double score = i ? -(double)by : (double)by;
    PyObject *z = kt->get(h.data, h.key);   /* (a new reference) */
    if (z == NULL || (Py_TYPE(z) != zset_type && !PyObject_TypeCheck(z, lz->type))) {
        Py_XDECREF(z);
        return PyErr_Occurred() ? NULL : reference(H_ZINCRBY, args, nargs);
    }
    PyObject *cur = PyObject_CallMethodOneArg(z, str_score, member);
    if (cur == NULL) {
        Py_DECREF(z);
        return NULL;
    }
    if (cur != Py_None) {
        double was = PyFloat_AsDouble(cur);
        Py_DECREF(cur);
        if (was == -1.0 && PyErr_Occurred()) {
            Py_DECREF(z);
            return NULL;
        }
        score += was;
    } else {
        Py_DECREF(cur);
    }
    int r = zset_store_in(z, member, score);
    Py_DECREF(z);
    if (r == 3)
        return reference(H_ZINCRBY, args, nargs);
    if (r < 0)
        return NULL;
    PyObject *reply = PyFloat_FromDouble(score);
    return r == 0 ? reply : dirtied(&h, reply);
}

/* b is a decimal number as clients write coordinates: an optional '-', digits, and an optional
   '.' with digits after it, 1 to 24 bytes: 1 with *out its value (correctly rounded, as
   float() and strtod read it), else 0. */
static int
plain_double(PyObject *b, double *out)
{
    if (!PyBytes_CheckExact(b))
        return 0;
    const char *p = PyBytes_AS_STRING(b);
    Py_ssize_t n = PyBytes_GET_SIZE(b), i = p[0] == '-', digits = 0, dot = -1;
    if (n < 1 || n > 24)
        return 0;
    for (; i < n; i++) {
        if (p[i] >= '0' && p[i] <= '9')
            digits++;
        else if (p[i] == '.' && dot < 0 && digits > 0)
            dot = i;
        else
            return 0;
    }
    if (digits == 0 || dot == n - 1)
        return 0;
    char *end;
    *out = PyOS_string_to_double(p, &end, NULL);   /* (b ends with a NUL, as bytes do) */
    if (*out == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return end == p + n;
}


/* The set bits of n bytes at p. x86-64's baseline has no POPCNT instruction, so
   __builtin_popcountll is a libgcc call of ~20 instructions a word; the loop is compiled a
   second time for the CPUs that have it (nearly all), chosen once at load (an ifunc). */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
__attribute__((target_clones("popcnt", "default")))
#endif
static long long
popcount(const unsigned char *p, Py_ssize_t n)
{
    long long count = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        count += __builtin_popcountll(w);
    }
    for (; i < n; i++)
        count += __builtin_popcount(p[i]);
    return count;
}

/* BITCOUNT key [start end], a byte range of small integers (small_int), of a string: its set
   bits in the range (negative indexes from the end, clamped, as the reference's _byte_range);
   a hit counted */
static PyObject *
hot_bitcount(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bound)
        return unbound_error(MODULE_NAME, handler_names[H_BITCOUNT]);
    Py_ssize_t n = nargs == 2 && PyList_CheckExact(args[1]) ? PyList_GET_SIZE(args[1]) : 0;
    Hot h;
    int on = n == 2 || n == 4 ? hot_case(args, nargs, n, &h, 0) : 0;
    long long start = 0, end = -1;
    if (on > 0 && n == 4 && (!small_int(PyList_GET_ITEM(args[1], 2), &start) ||
                             !small_int(PyList_GET_ITEM(args[1], 3), &end)))
        on = 0;
    if (on <= 0)
        return on < 0 ? NULL : reference(H_BITCOUNT, args, nargs);
    PyObject *v = kt->get(h.data, h.key);     /* (a new reference) */
    PyObject *stats = SLOT_AT(h.core, core_off[K_STATS]);
    if (v == NULL || !PyBytes_CheckExact(v) || Py_TYPE(stats) != stats_type ||
            !slots_all_set(stats, stats_off, T_N)) {   /* (a miss, WRONGTYPE: the reference) */
        Py_XDECREF(v);
        return PyErr_Occurred() ? NULL : reference(H_BITCOUNT, args, nargs);
    }
    if (slot_add(stats, stats_off[T_HITS], 1) < 0) {
        Py_DECREF(v);
        return NULL;
    }
    long long len = PyBytes_GET_SIZE(v), count = 0;
    if (n == 2) {
        end = len - 1;
    } else if (start < 0 && end < 0 && start > end) {
        end = start - 1;   /* (nothing to count) */
    } else {
        if (start < 0)
            start += len;
        if (end < 0)
            end += len;
        if (start < 0)
            start = 0;
        if (end < 0)
            end = 0;
        if (end > len - 1)
            end = len - 1;
    }
    if (start <= end)
        count = popcount((const unsigned char *)PyBytes_AS_STRING(v) + start, end - start + 1);
    Py_DECREF(v);
    return PyLong_FromLongLong(count);
}

/* SETBIT key offset 0|1, the offset a small integer (small_int) within proto-max-bulk-len,
   into a string that is there or a new key: the bit's old value; the string stored again (a
   new bytes, the table's entry kept) when the bit changes or the string grows (zeros up to
   the bit's byte, as lookupStringForBitCommand grows it) */
static PyObject *
hot_setbit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(H_SETBIT, 4);
    long long offset, on;
    if (!small_int(PyList_GET_ITEM(args[1], 2), &offset) || offset < 0 ||
            !small_int(PyList_GET_ITEM(args[1], 3), &on) || (on != 0 && on != 1))
        return reference(H_SETBIT, args, nargs);
    int err = 0;
    long long limit = config_int(h.core, str_max_bulk, &err);
    if (err)
        return NULL;
    PyObject *v = kt->get(h.data, h.key);     /* (a new reference; NULL: no key) */
    if ((v == NULL && PyErr_Occurred()) || (v != NULL && !PyBytes_CheckExact(v)) ||
            limit < 0 || (offset >> 3) >= limit) {   /* (WRONGTYPE, past the limit) */
        Py_XDECREF(v);
        return PyErr_Occurred() ? NULL : reference(H_SETBIT, args, nargs);
    }
    Py_ssize_t byte = (Py_ssize_t)(offset >> 3), had = v != NULL ? PyBytes_GET_SIZE(v) : 0;
    unsigned char mask = (unsigned char)(1 << (7 - (offset & 7)));
    unsigned char was = byte < had ? (unsigned char)PyBytes_AS_STRING(v)[byte] : 0;
    long old = (was & mask) != 0;
    if (old == on && byte < had) {
        Py_DECREF(v);
        return PyLong_FromLong(old);
    }
    /* a fresh object to write in (with its bytes given, a 1-byte string would be CPython's
       shared one), grown with zeros to reach the byte */
    Py_ssize_t size = byte < had ? had : byte + 1;
    PyObject *now = PyBytes_FromStringAndSize(NULL, size);
    if (now != NULL) {
        if (had)
            memcpy(PyBytes_AS_STRING(now), PyBytes_AS_STRING(v), (size_t)had);
        memset(PyBytes_AS_STRING(now) + had, 0, (size_t)(size - had));
    }
    Py_XDECREF(v);
    if (now == NULL)
        return NULL;
    PyBytes_AS_STRING(now)[byte] = (char)(on ? was | mask : was & ~mask);
    int rc = kt->set(h.data, h.key, now);
    Py_DECREF(now);
    return rc < 0 ? NULL : dirtied(&h, PyLong_FromLong(old));
}

#define HLL_HDR_SIZE 16
#define HLL_DENSE_SIZE (HLL_HDR_SIZE + ((1 << 14) * 6 + 7) / 8)

/* PFCOUNT key, of a HyperLogLog whose cardinality is cached in its header (the top bit of its
   last byte clear: pyrepl/keyspace/hll.py's cached_card): that cardinality; a hit counted */
static PyObject *
hot_pfcount(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(H_PFCOUNT, 2);
    PyObject *v = kt->get(h.data, h.key);     /* (a new reference) */
    PyObject *stats = SLOT_AT(h.core, core_off[K_STATS]);
    const unsigned char *p = v != NULL && PyBytes_CheckExact(v)
                             ? (const unsigned char *)PyBytes_AS_STRING(v) : NULL;
    Py_ssize_t n = p != NULL ? PyBytes_GET_SIZE(v) : 0;
    /* hll.is_hll: the header, a known encoding, a dense one of its size; the cache valid */
    if (p == NULL || n < HLL_HDR_SIZE || memcmp(p, "HYLL", 4) != 0 || p[4] > 1 ||
            (p[4] == 0 && n != HLL_DENSE_SIZE) || (p[15] & 0x80) ||
            Py_TYPE(stats) != stats_type || !slots_all_set(stats, stats_off, T_N)) {
        Py_XDECREF(v);
        return PyErr_Occurred() ? NULL : reference(H_PFCOUNT, args, nargs);
    }
    unsigned long long card = 0;
    for (int i = 7; i >= 0; i--)
        card = card << 8 | p[8 + i];
    Py_DECREF(v);
    if (slot_add(stats, stats_off[T_HITS], 1) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(card);
}

/* PFADD key element [element ...] into a dense HyperLogLog (hll.is_hll's checks, a key with
   no TTL or one still to come): hll.dense_add (C, pyrepl/keyspace/_hll.c) over the elements,
   in place when the table and this call are all that hold the string, else on a copy stored
   under the key (its TTL kept, as the reference's _store); core.dirty += the registers that
   grew; 1 when one did, else 0 */
static PyObject *dense_add_fn;   /* pyrepl.keyspace.hll.dense_add */

static PyObject *
hot_pfadd(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t n = nargs == 2 && PyList_CheckExact(args[1]) ? PyList_GET_SIZE(args[1]) : 0;
    if (n < 3)
        return bound ? reference(H_PFADD, args, nargs) : unbound_error(MODULE_NAME, "pfadd");
    HOT_CASE_TTL(H_PFADD, n, TTL_LIVE);
    if (keep_import(&dense_add_fn, "pyrepl.keyspace.hll", "dense_add") < 0)
        return NULL;
    PyObject *v = kt->get(h.data, h.key);     /* (a new reference) */
    const unsigned char *p = v != NULL && PyBytes_CheckExact(v)
                             ? (const unsigned char *)PyBytes_AS_STRING(v) : NULL;
    if (p == NULL || PyBytes_GET_SIZE(v) != HLL_DENSE_SIZE || memcmp(p, "HYLL", 4) != 0 ||
            p[4] != 0) {
        Py_XDECREF(v);
        return PyErr_Occurred() ? NULL : reference(H_PFADD, args, nargs);
    }
    /* in place when only the table and this call hold the string (nobody sees it change:
       no reply, no other key, no watcher) */
    PyObject *start = PyLong_FromLong(2);
    PyObject *call_args[4] = {v, args[1], start, Py_REFCNT(v) == 2 ? Py_True : Py_False};
    PyObject *got = start == NULL ? NULL : PyObject_Vectorcall(dense_add_fn, call_args, 4, NULL);
    Py_XDECREF(start);
    Py_DECREF(v);
    if (got == NULL)
        return NULL;
    long long updated = PyTuple_CheckExact(got) && PyTuple_GET_SIZE(got) == 2
                        ? slot_int(PyTuple_GET_ITEM(got, 0)) : -1;
    PyObject *dense = updated > 0 ? PyTuple_GET_ITEM(got, 1) : NULL;
    int rc = updated < 0 ? -1 : 0;
    if (rc < 0)
        PyErr_SetString(PyExc_TypeError, "dense_add: (updated, hll or None) was expected");
    else if (dense != NULL && (!PyBytes_CheckExact(dense) ||
                               (dense != v && kt->set(h.data, h.key, dense) < 0) ||
                               slot_add(h.core, core_off[K_DIRTY], updated) < 0))
        rc = -1;
    Py_DECREF(got);
    if (rc < 0)
        return NULL;
    return PyLong_FromLong(updated > 0);
}

/* GEOADD key longitude latitude member, the coordinates plain decimals (plain_double) in
   range, into an existing sorted set: 1 for a new member; what changed propagates as ZADD key
   <score> member, as the reference writes it. The score is geohashEncodeWGS84's 52 bits
   (pyrepl/keyspace/geohash.py's encode_score: the same operations on the same doubles). */
static PyObject *
hot_geoadd(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(H_GEOADD, 5);
    double lon, lat;
    uint64_t bits;   /* (step 26: the 52 bits are the score, align52 moves nothing) */
    if (!plain_double(PyList_GET_ITEM(args[1], 2), &lon) ||
            !plain_double(PyList_GET_ITEM(args[1], 3), &lat) ||
            !geohash_encode(lon, lat, 26, &bits))
        return reference(H_GEOADD, args, nargs);
    PyObject *member = PyList_GET_ITEM(args[1], 4);
    int r = zset_store(&h, member, (double)bits);
    if (r == 3)
        return reference(H_GEOADD, args, nargs);
    if (r <= 0)
        return r < 0 ? NULL : PyLong_FromLong(0);
    /* (52 bits: a long long) */
    if (propagate_as(&h, &name_zadd, "zadd", (long long)bits, member) < 0)
        return NULL;
    return dirtied(&h, PyLong_FromLong(r == 1));
}

/* -- GEOSEARCH key FROMLONLAT lon lat BYRADIUS radius unit [ASC|DESC] [COUNT n] ---------- */

static PyObject *search_circle;   /* pyrepl.commands._geo.search_circle */

/* w (bytes) is the ASCII word ``lower`` in any case */
static int
word_is(PyObject *w, const char *lower, Py_ssize_t n)
{
    return PyBytes_CheckExact(w) && PyBytes_GET_SIZE(w) == n &&
           PyOS_strnicmp(PyBytes_AS_STRING(w), lower, (size_t)n) == 0;
}
#define WORD_IS(w, lit) word_is((w), (lit), (Py_ssize_t)sizeof(lit) - 1)

/* metres per unit (geo._UNITS), 0 for another word */
static double
unit_of(PyObject *b)
{
    return WORD_IS(b, "m") ? 1.0 : WORD_IS(b, "km") ? 1000.0 : WORD_IS(b, "ft") ? 0.3048 :
           WORD_IS(b, "mi") ? 1609.34 : 0.0;
}

/* GEOSEARCH of a circle around a point, in this form: FROMLONLAT then BYRADIUS, the numbers
   plain decimals (plain_double) in range, then ASC or DESC and COUNT n (n a positive
   small_int_text) at most once each, in either order; the key a sorted set (either
   encoding) or missing, with no TTL past. The reply is geo._georadius_generic's without
   WITH* options: the members found, sorted by distance when asked (and, with COUNT, ascending
   when not), the first n; a hit counted, or a miss and an empty reply. Every other form
   (ANY, WITH*, FROMMEMBER, BYBOX, an error to answer) and a search search_circle leaves to
   the Python is the reference's. */
static PyObject *
hot_geosearch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t argc = nargs == 2 && PyList_CheckExact(args[1]) ? PyList_GET_SIZE(args[1]) : 0;
    HOT_CASE_TTL(H_GEOSEARCH, argc >= 8 && argc <= 11 ? argc : 8, TTL_LIVE);
    PyObject *argv = args[1], *stats = SLOT_AT(h.core, core_off[K_STATS]);
    double lon, lat, radius, conversion;
    long long count = 0;
    long sort = 0;     /* geo._SORT_NONE, 1 _SORT_ASC, 2 _SORT_DESC */
    if (!WORD_IS(PyList_GET_ITEM(argv, 2), "fromlonlat") ||
            !plain_double(PyList_GET_ITEM(argv, 3), &lon) ||
            !plain_double(PyList_GET_ITEM(argv, 4), &lat) ||
            lon < GEO_LONG_MIN || lon > GEO_LONG_MAX || lat < GEO_LAT_MIN || lat > GEO_LAT_MAX ||
            !WORD_IS(PyList_GET_ITEM(argv, 5), "byradius") ||
            !plain_double(PyList_GET_ITEM(argv, 6), &radius) || !(radius >= 0.0) ||
            (conversion = unit_of(PyList_GET_ITEM(argv, 7))) == 0.0 ||
            Py_TYPE(stats) != stats_type || !slots_all_set(stats, stats_off, T_N))
        return reference(H_GEOSEARCH, args, nargs);
    for (Py_ssize_t i = 8; i < argc; i++) {
        PyObject *o = PyList_GET_ITEM(argv, i);
        long s = WORD_IS(o, "asc") ? 1 : WORD_IS(o, "desc") ? 2 : 0;
        if (sort == 0 && s != 0) {
            sort = s;
        } else if (count == 0 && WORD_IS(o, "count") && i + 1 < argc) {
            PyObject *n = PyList_GET_ITEM(argv, ++i);
            if (!PyBytes_CheckExact(n) ||
                    !small_int_text(PyBytes_AS_STRING(n), PyBytes_GET_SIZE(n), &count) ||
                    count <= 0)
                return reference(H_GEOSEARCH, args, nargs);
        } else {
            return reference(H_GEOSEARCH, args, nargs);
        }
    }
    if (count && sort == 0)
        sort = 1;
    if (keep_import(&search_circle, "pyrepl.commands._geo", "search_circle") < 0)
        return NULL;
    PyObject *z;
    int got = zset_read(&h, stats, &z);
    if (got != 1)
        return got == 0 ? PyList_New(0) : got == 2 ? reference(H_GEOSEARCH, args, nargs) : NULL;
    PyObject *found = NULL, *out = NULL;
    PyObject *sargs[9] = {z, PyFloat_FromDouble(lon), PyFloat_FromDouble(lat),
                          PyFloat_FromDouble(conversion), PyFloat_FromDouble(radius),
                          Py_NewRef(zero), PyLong_FromLong(sort), PyLong_FromLongLong(count),
                          Py_True};
    int made = 1;
    for (int i = 1; i < 8; i++)
        made &= sargs[i] != NULL;
    if (made)
        found = PyObject_Vectorcall(search_circle, sargs, 9, NULL);
    for (int i = 1; i < 8; i++)
        Py_XDECREF(sargs[i]);
    if (found == Py_None) {     /* (a search the Python makes: its reply, its hit) */
        Py_DECREF(z);
        Py_DECREF(found);
        if (slot_add(stats, stats_off[T_HITS], -1) < 0)
            return NULL;
        return reference(H_GEOSEARCH, args, nargs);
    }
    if (found != NULL && (!PyTuple_CheckExact(found) || PyTuple_GET_SIZE(found) != 2 ||
                          !PyList_CheckExact(PyTuple_GET_ITEM(found, 1)))) {
        PyErr_SetString(PyExc_TypeError, "GEOSEARCH: search_circle gave no (found, members)");
        goto done;
    }
    if (found != NULL)
        out = Py_NewRef(PyTuple_GET_ITEM(found, 1));
done:
    Py_XDECREF(found);
    Py_DECREF(z);
    return out;
}

/* -- XADD -------------------------------------------------------------------------------------- */

#define STREAM_LISTPACK_MAX_SIZE (1LL << 30)
#define FLAG_SAMEFIELDS 2
static const u128 MAX_ID = ~(u128)0;


/* An ID written as Redis writes one, "<ms>-<seq>", each part a uint64 in canonical decimal
   (no sign, no leading zero but "0" itself), or with ``bare_ms`` "<ms>" alone (seq 0, as
   XREADGROUP reads it): 1 with *out set, else 0 (any other form is the reference's to parse,
   and reads as the same ID where it parses). */
static int
canonical_id(PyObject *b, u128 *out, int bare_ms)
{
    if (!PyBytes_CheckExact(b))
        return 0;
    const char *p = PyBytes_AS_STRING(b), *end = p + PyBytes_GET_SIZE(b);
    unsigned long long part[2];
    for (int k = 0; k < 2; k++) {
        const char *start = p;
        unsigned long long v = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            unsigned d = (unsigned)(*p - '0');
            if (v > (~0ULL - d) / 10)
                return 0;   /* (past 2^64 - 1) */
            v = v * 10 + d;
            p++;
        }
        if (p == start || (p - start > 1 && *start == '0'))
            return 0;
        part[k] = v;
        if (k == 0) {
            if (p == end && bare_ms) {
                part[1] = 0;
                break;
            }
            if (p == end || *p != '-')
                return 0;
            p++;
        }
    }
    if (p != end)
        return 0;
    *out = (u128)part[0] << 64 | part[1];
    return 1;
}

/* XADD key <*|ms-seq> field value [field value ...] onto the stream s (given: the ID
   canonical_id read, NULL for '*'), the tail node open (Node.lp
   None: Entries.rest its listpack bytes) with room for the entry under stream-node-max-bytes
   and stream-node-max-entries: Stream.append and Node.add of pyrepl/keyspace/stream.py, the
   entry's bytes as _streamlp.entry writes them. The new ID's text (new); NULL with nothing
   changed and no error set when the case is not this one, NULL with an error on an
   exception. */
static PyObject *
xadd_append(Hot *h, PyObject *s, PyObject *argv, const u128 *given)
{
    Py_ssize_t n = PyList_GET_SIZE(argv), nf = (n - 3) / 2;
    PyObject *nodes = SLOT_AT(s, stream_off[S_NODES]);
    if (!PyList_CheckExact(nodes) || PyList_GET_SIZE(nodes) == 0)
        return NULL;   /* (a new node: the reference) */
    PyObject *node = PyList_GET_ITEM(nodes, PyList_GET_SIZE(nodes) - 1);
    if (Py_TYPE(node) != node_type || !slots_all_set(node, node_off, N_N) ||
            SLOT_AT(node, node_off[N_LP]) != Py_None)
        return NULL;   /* (a sealed tail: unsealed by the reference) */
    PyObject *d = SLOT_AT(node, node_off[N_D]);
    if (Py_TYPE(d) != entries_type || !slots_all_set(d, entries_off, E_N))
        return NULL;
    PyObject *fields = SLOT_AT(d, entries_off[E_FIELDS]), *rest = SLOT_AT(d, entries_off[E_REST]);
    PyObject *lists[4] = {SLOT_AT(d, entries_off[E_IDS]), SLOT_AT(d, entries_off[E_FVS]),
                          SLOT_AT(d, entries_off[E_FLAGS]), SLOT_AT(d, entries_off[E_OFFS])};
    if (!PyList_CheckExact(fields) || !PyByteArray_CheckExact(rest))
        return NULL;
    for (int i = 0; i < 4; i++)
        if (!PyList_CheckExact(lists[i]))
            return NULL;
    u128 last, master;
    long long now = slot_int(SLOT_AT(h->core, core_off[K_NOW_MS]));
    long long live = slot_int(SLOT_AT(node, node_off[N_LIVE]));
    long long deleted = slot_int(SLOT_AT(node, node_off[N_DELETED]));
    long long count = slot_int(SLOT_AT(d, entries_off[E_COUNT]));
    long long length = slot_int(SLOT_AT(s, stream_off[S_LENGTH]));
    long long entries_added = slot_int(SLOT_AT(s, stream_off[S_ENTRIES_ADDED]));
    if (stream_id_value(SLOT_AT(s, stream_off[S_LAST_ID]), &last) < 0 ||
            stream_id_value(SLOT_AT(node, node_off[N_MASTER]), &master) < 0) {
        PyErr_Clear();   /* (not IDs: the reference's to see) */
        return NULL;
    }
    if (last == MAX_ID || now < 0 || live < 0 || deleted < 0 || count < 0 || length < 0 ||
            entries_added < 0)
        return NULL;   /* (an exhausted stream's error: the reference's) */
    /* the fields and values: bytes, within a listpack's size */
    long long total = 0;
    for (Py_ssize_t j = 3; j < n; j++) {
        PyObject *x = PyList_GET_ITEM(argv, j);
        if (!PyBytes_CheckExact(x))
            return NULL;
        total += PyBytes_GET_SIZE(x);
    }
    if (total > STREAM_LISTPACK_MAX_SIZE)
        return NULL;
    int err = 0;
    long long max_bytes = config_int(h->core, str_node_max_bytes, &err);
    long long max_entries = err ? -1 : config_int(h->core, str_node_max_entries, &err);
    if (err)
        return NULL;   /* (the error set: the caller sees it) */
    if (max_bytes < 0 || max_entries < 0)
        return NULL;
    if (max_bytes == 0 || max_bytes > STREAM_LISTPACK_MAX_SIZE)
        max_bytes = STREAM_LISTPACK_MAX_SIZE;
    Py_ssize_t at = PyByteArray_GET_SIZE(rest);
    if (7 + lp_int_size(live) + lp_int_size(deleted) + at + total >= max_bytes ||
            (max_entries && live + deleted >= max_entries))
        return NULL;   /* (a new node) */
    /* the new ID: the one given (above the last: else the reference's error), or the
       clock's millisecond, or the last ID's next */
    uint64_t last_ms = (uint64_t)(last >> 64);
    u128 nid = (unsigned long long)now > last_ms ? (u128)(unsigned long long)now << 64 : last + 1;
    if (given != NULL) {
        if (*given <= last || *given == 0)
            return NULL;
        nid = *given;
    }
    /* the fields as the master entry's: FLAG_SAMEFIELDS, the values only */
    int same = PyList_GET_SIZE(fields) == nf;
    for (Py_ssize_t j = 0; same && j < nf; j++) {
        PyObject *a = PyList_GET_ITEM(fields, j), *b = PyList_GET_ITEM(argv, 3 + 2 * j);
        same = PyBytes_CheckExact(a) && PyBytes_GET_SIZE(a) == PyBytes_GET_SIZE(b) &&
               memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(a)) == 0;
    }
    int flags = same ? FLAG_SAMEFIELDS : 0;
    /* everything that can fail before anything moves */
    PyObject *reply = stream_id_text(nid), *eid = stream_id_int(nid);
    PyObject *fv = PyList_GetSlice(argv, 3, n), *off = PyLong_FromSsize_t(at);
    PyObject *flag = PyLong_FromLong(flags);
    PyObject *out = given != NULL ? Py_NewRef(Py_None) : PyList_GetSlice(argv, 0, n);
    Py_ssize_t room = 3 * 10 + 2 * 10;   /* flags, the ID's two deltas, the counts */
    for (Py_ssize_t j = 3; j < n; j++)
        room += LP_ENTRY_MAX(PyBytes_GET_SIZE(PyList_GET_ITEM(argv, j)));
    if (reply == NULL || eid == NULL || fv == NULL || off == NULL || flag == NULL ||
            out == NULL || PyByteArray_Resize(rest, at + room) < 0) {
        Py_XDECREF(reply);
        Py_XDECREF(eid);
        Py_XDECREF(fv);
        Py_XDECREF(off);
        Py_XDECREF(flag);
        Py_XDECREF(out);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return NULL;
    }
    /* Node.add: the entry's listpack items (int64 deltas from the master ID, as lpAppendInteger
       stores a uint64 difference) */
    uint8_t *o = (uint8_t *)PyByteArray_AS_STRING(rest) + at, *o0 = o;
    o += lp_encode_int(o, flags);
    o += lp_encode_int(o, (int64_t)((uint64_t)(nid >> 64) - (uint64_t)(master >> 64)));
    o += lp_encode_int(o, (int64_t)((uint64_t)nid - (uint64_t)master));
    if (!same)
        o += lp_encode_int(o, nf);
    for (Py_ssize_t j = same ? 4 : 3; j < n; j += same ? 2 : 1) {
        PyObject *x = PyList_GET_ITEM(argv, j);
        o += lp_encode_str(o, (const uint8_t *)PyBytes_AS_STRING(x), PyBytes_GET_SIZE(x));
    }
    o += lp_encode_int(o, same ? nf + 3 : nf * 2 + 4);
    (void)PyByteArray_Resize(rest, at + (o - o0));   /* (a shrink: it cannot fail) */
    if (given == NULL) {   /* (the ID propagates, not '*'; one given propagates as it came) */
        PyObject *star = PyList_GET_ITEM(out, 2);
        PyList_SET_ITEM(out, 2, Py_NewRef(reply));
        Py_DECREF(star);
    }
    PyObject *items[4] = {eid, fv, flag, off};
    int rc = 0;
    for (int i = 0; i < 4; i++)
        rc |= PyList_Append(lists[i], items[i]);
    Py_DECREF(fv);
    Py_DECREF(flag);
    Py_DECREF(off);
    if (rc < 0 ||
            slot_set_int(d, entries_off[E_COUNT], count + (same ? nf + 4 : nf * 2 + 5)) < 0 ||
            slot_set_int(node, node_off[N_LIVE], live + 1) < 0 ||
            slot_set_int(s, stream_off[S_LENGTH], length + 1) < 0 ||
            slot_set_int(s, stream_off[S_ENTRIES_ADDED], entries_added + 1) < 0) {
        Py_DECREF(eid);
        Py_DECREF(reply);
        Py_DECREF(out);
        return NULL;
    }
    slot_put(node, node_off[N_LAST], eid);
    slot_put(s, stream_off[S_LAST_ID], eid);
    if (length == 0)
        slot_put(s, stream_off[S_FIRST_ID], eid);
    Py_DECREF(eid);
    if (given == NULL)
        Py_XSETREF(SLOT_AT(h->c, client_off[C_PROPAGATE_ARGV]), out);
    else
        Py_DECREF(out);
    return reply;
}

/* XADD key <*|ms-seq> field value [field value ...] (no trimming or NOMKSTREAM; an ID given
   as Redis writes one: what a master's stream carries) onto an existing stream, no client
   blocked on a key (a stream that grows wakes its readers: the reference's): the new ID
   (xadd_append) */
static PyObject *
hot_xadd(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t n = nargs == 2 && PyList_CheckExact(args[1]) ? PyList_GET_SIZE(args[1]) : 0;
    if (n < 5 || n % 2 == 0)   /* (the arity's and the fields' errors: the reference's) */
        n = 0;
    HOT_CASE_TTL(H_XADD, n, TTL_LIVE);
    PyObject *idarg = PyList_GET_ITEM(args[1], 2);
    u128 given;
    int star = PyBytes_CheckExact(idarg) && PyBytes_GET_SIZE(idarg) == 1 &&
               PyBytes_AS_STRING(idarg)[0] == '*';
    if ((!star && !canonical_id(idarg, &given, 0)) ||
            SLOT_AT(h.core, core_off[K_KEYS_WAITED]) != Py_False)
        return reference(H_XADD, args, nargs);
    PyObject *s = kt->get(h.data, h.key);     /* (a new reference) */
    if (s == NULL || Py_TYPE(s) != stream_type || !slots_all_set(s, stream_off, S_N)) {
        Py_XDECREF(s);   /* (a new stream, WRONGTYPE: the reference) */
        return PyErr_Occurred() ? NULL : reference(H_XADD, args, nargs);
    }
    PyObject *reply = xadd_append(&h, s, args[1], star ? NULL : &given);
    Py_DECREF(s);
    if (reply == NULL)
        return PyErr_Occurred() ? NULL : reference(H_XADD, args, nargs);
    return dirtied(&h, reply);
}

/* ZPOPMIN / ZPOPMAX key, of a sorted set in its big form (a ZSet: ZIndex in C) that keeps a
   member after it: [member, score] of its first (last) member, as the reference's flat pair
   for either protocol; [] for no key (nothing counted) */
static PyObject *
zpop(int which, int last, PyObject *const *args, Py_ssize_t nargs)
{
    HOT_CASE(which, 2);
    PyObject *z = kt->get(h.data, h.key);   /* (a new reference) */
    if (z == NULL)
        return PyErr_Occurred() ? NULL : PyList_New(0);
    Py_ssize_t n = Py_TYPE(z) == zset_type ? PyObject_Size(z) : 0;
    if (n < 2) {   /* (a listpack, the last member: its key goes; WRONGTYPE) */
        Py_DECREF(z);
        return PyErr_Occurred() ? NULL : reference(which, args, nargs);
    }
    PyObject *at = PyLong_FromSsize_t(last ? n - 1 : 0), *item = NULL, *reply = NULL, *r;
    if (at != NULL)
        item = PyObject_CallMethodOneArg(z, str_at, at);
    Py_XDECREF(at);
    if (item != NULL && (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2))
        PyErr_SetString(PyExc_TypeError, "ZSet._at: a (score, member) pair");
    else if (item != NULL && (reply = PyList_New(2)) != NULL) {
        PyList_SET_ITEM(reply, 0, Py_NewRef(PyTuple_GET_ITEM(item, 1)));
        PyList_SET_ITEM(reply, 1, Py_NewRef(PyTuple_GET_ITEM(item, 0)));
        r = PyObject_CallMethodOneArg(z, str_remove, PyTuple_GET_ITEM(item, 1));
        if (r == NULL)
            Py_CLEAR(reply);
        Py_XDECREF(r);
    }
    Py_XDECREF(item);
    Py_DECREF(z);
    return reply == NULL ? NULL : dirtied(&h, reply);
}

static PyObject *
hot_zpopmin(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return zpop(H_ZPOPMIN, 0, args, nargs);
}

static PyObject *
hot_zpopmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return zpop(H_ZPOPMAX, 1, args, nargs);
}

/* -- XREADGROUP's history ---------------------------------------------------------------------- */

/* pyrepl/keyspace/stream.py's Group, Consumer, Nack and Pel (a dict of Nacks by ID, its IDs in
   order in ``ids``): a consumer's history */
enum { XG_CONSUMERS, XG_N };
static const char *const group_names[XG_N] = {"consumers"};
enum { XC_SEEN_TIME, XC_PEL, XC_N };
static const char *const consumer_names[XC_N] = {"seen_time", "pel"};
enum { XN_DELIVERY_TIME, XN_DELIVERY_COUNT, XN_N };
static const char *const nack_names[XN_N] = {"delivery_time", "delivery_count"};
enum { XP_IDS, XP_N };
static const char *const pel_names[XP_N] = {"ids"};
static Py_ssize_t group_off[XG_N], consumer_off[XC_N], nack_off[XN_N], pel_off[XP_N];
static PyTypeObject *group_type, *consumer_type, *nack_type, *pel_type;
static PyObject *history_reply;   /* _streamlp.history_reply (Stream.history_reply's C) */
static PyObject *null_array, *map_type;   /* pyrepl.resp.types' NULL_ARRAY and Map */
static int streams_bound;   /* bind_streams() ran to its end */

#define BIND_STREAMS_USAGE "bind_streams(Group, Consumer, Nack, Pel, history_reply, " \
                           "NULL_ARRAY, Map)"

static PyObject *
bind_streams(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const slots_spec specs[7] = {
        SLOTS_OF(group), SLOTS_OF(consumer), SLOTS_OF(nack), SLOTS_OF(pel),
        KEPT(&history_reply), KEPT(&null_array), KEPT(&map_type),
    };
    if (bind_args(nargs == 7, BIND_STREAMS_USAGE, args, specs, 7) < 0)
        return NULL;
    streams_bound = 1;
    Py_RETURN_NONE;
}

/* XREADGROUP GROUP group consumer [COUNT n] STREAMS key id, the id a history's (ms or ms-seq,
   not '>', canonical_id's), n 0 to 18 digits (small_int's), on a stream whose group and consumer exist:
   streamReplyWithRangeFromConsumerPEL as streams._history does it (the consumer's PEL from
   id + 1, the first n IDs; each entry the stream still holds delivered once more, now), the
   consumer seen now, and the stream looked up twice, as _xread's two loops count their hits.
   Nothing propagates (a history read changes no entry). Every other form, a missing stream,
   group or consumer (NOGROUP; a new consumer's event and propagation), another type: the
   reference. */
static PyObject *
hot_xreadgroup(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *argv = nargs == 2 && PyList_CheckExact(args[1]) ? args[1] : NULL;
    Py_ssize_t n = argv == NULL || !streams_bound ? 0 : PyList_GET_SIZE(argv);
    long long count = 0;
    u128 id = 0;   /* (ms or ms-seq; '-', '+', '>', '$', a NUL ...: the reference) */
    if ((n != 7 && n != 9) || !word_is(PyList_GET_ITEM(argv, 1), "group", 5) ||
            !word_is(PyList_GET_ITEM(argv, n - 3), "streams", 7) ||
            (n == 9 && (!word_is(PyList_GET_ITEM(argv, 4), "count", 5) ||
                        !small_int(PyList_GET_ITEM(argv, 5), &count) || count < 0)) ||
            !canonical_id(PyList_GET_ITEM(argv, n - 1), &id, 1))
        n = 0;
    Hot h;
    if (!bound)
        return unbound_error(MODULE_NAME, handler_names[H_XREADGROUP]);
    int on = hot_case_at(args, nargs, n, &h, TTL_LIVE, n - 2);
    if (on <= 0)
        return on < 0 ? NULL : reference(H_XREADGROUP, args, nargs);
    PyObject *gname = PyList_GET_ITEM(argv, 2), *cname = PyList_GET_ITEM(argv, 3);
    PyObject *stats = SLOT_AT(h.core, core_off[K_STATS]);
    PyObject *s = kt->get(h.data, h.key);   /* (a new reference) */
    if (s == NULL && PyErr_Occurred())
        return NULL;
    PyObject *groups = s != NULL && Py_TYPE(s) == stream_type &&
                       slots_all_set(s, stream_off, S_N) ? SLOT_AT(s, stream_off[S_GROUPS])
                                                         : NULL;
    PyObject *g = groups != NULL && PyDict_CheckExact(groups) && PyBytes_CheckExact(gname)
                  ? PyDict_GetItemWithError(groups, gname) : NULL;
    PyObject *consumers = g != NULL && Py_TYPE(g) == group_type &&
                          slots_all_set(g, group_off, XG_N) ? SLOT_AT(g, group_off[XG_CONSUMERS])
                                                            : NULL;
    PyObject *cons = consumers != NULL && PyDict_CheckExact(consumers) &&
                     PyBytes_CheckExact(cname) ? PyDict_GetItemWithError(consumers, cname)
                                               : NULL;
    PyObject *pel = cons != NULL && Py_TYPE(cons) == consumer_type &&
                    slots_all_set(cons, consumer_off, XC_N) ? SLOT_AT(cons, consumer_off[XC_PEL])
                                                            : NULL;
    PyObject *ids = pel != NULL && Py_TYPE(pel) == pel_type && slots_all_set(pel, pel_off, XP_N)
                    ? SLOT_AT(pel, pel_off[XP_IDS]) : NULL;
    if (ids == NULL || !PyList_CheckExact(ids) || Py_TYPE(stats) != stats_type ||
            !slots_all_set(stats, stats_off, T_N)) {
        Py_XDECREF(s);
        return PyErr_Occurred() ? NULL : reference(H_XREADGROUP, args, nargs);
    }
    /* pel.from_id(id + 1, count): its first ID from there (a bisection), count of them */
    u128 start = id + 1;   /* (MAX_ID + 1 wraps to 0, as & MAX_ID does) */
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(ids);
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        u128 at;
        if (stream_id_value(PyList_GET_ITEM(ids, mid), &at) < 0) {
            Py_DECREF(s);
            return NULL;
        }
        if (at < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    Py_ssize_t end = PyList_GET_SIZE(ids);
    if (count > 0 && end - lo > count)
        end = lo + (Py_ssize_t)count;
    PyObject *want = PyList_GetSlice(ids, lo, end), *r = NULL;
    if (want != NULL) {
        PyObject *hargs[4] = {SLOT_AT(s, stream_off[S_KEYS]), SLOT_AT(s, stream_off[S_NODES]),
                              want, null_array};
        r = PyObject_Vectorcall(history_reply, hargs, 4, NULL);
        Py_DECREF(want);
    }
    if (r == Py_None) {   /* (a listpack history_reply does not take: the reference) */
        Py_DECREF(r);
        Py_DECREF(s);
        return reference(H_XREADGROUP, args, nargs);
    }
    /* the second loop's lookup (its hit, the key's age) */
    PyObject *again = r == NULL ? NULL : kt->get(h.data, h.key);
    Py_DECREF(s);
    Py_XDECREF(again);
    if (again == NULL) {
        Py_XDECREF(r);
        return NULL;
    }
    if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 2 ||
            !PyList_CheckExact(PyTuple_GET_ITEM(r, 1))) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "history_reply: an (out, found) pair");
        return NULL;
    }
    PyObject *out = PyTuple_GET_ITEM(r, 0), *found = PyTuple_GET_ITEM(r, 1);
    PyObject *now = SLOT_AT(h.core, core_off[K_NOW_MS]);
    if (slot_add(stats, stats_off[T_HITS], 2) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    slot_put(cons, consumer_off[XC_SEEN_TIME], now);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(found); k++) {
        PyObject *nack = PyDict_GetItemWithError(pel, PyList_GET_ITEM(found, k));
        if (nack == NULL || Py_TYPE(nack) != nack_type ||
                !slots_all_set(nack, nack_off, XN_N)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a consumer's PEL holds a Nack for each ID");
            Py_DECREF(r);
            return NULL;
        }
        slot_put(nack, nack_off[XN_DELIVERY_TIME], now);
        if (slot_add(nack, nack_off[XN_DELIVERY_COUNT], 1) < 0) {
            Py_DECREF(r);
            return NULL;
        }
    }
    /* [[key, out]] (RESP2), Map([(key, out)]) */
    PyObject *one = NULL, *reply = NULL;
    if (slot_int(SLOT_AT(h.c, client_off[C_PROTO])) == 2) {
        one = PyList_New(2);
        if (one != NULL) {
            PyList_SET_ITEM(one, 0, Py_NewRef(h.key));
            PyList_SET_ITEM(one, 1, Py_NewRef(out));
            reply = PyList_New(1);
            if (reply != NULL)
                PyList_SET_ITEM(reply, 0, Py_NewRef(one));
        }
    } else {
        one = PyTuple_Pack(2, h.key, out);
        PyObject *pairs = one == NULL ? NULL : PyList_New(1);
        if (pairs != NULL) {
            PyList_SET_ITEM(pairs, 0, Py_NewRef(one));
            reply = PyObject_CallOneArg(map_type, pairs);
            Py_DECREF(pairs);
        }
    }
    Py_XDECREF(one);
    Py_DECREF(r);
    return reply;
}

SLOTS_MODULE(_hot,
    "The common forms of the hottest commands, in C (the Python handlers for the rest).",
    FASTCALL("bind", bind,
             BIND_USAGE ": the classes whose slots the handlers read, and the Python handlers "
             "they stand for."),
    FASTCALL("set", hot_set, "SET's handler."), FASTCALL("get", hot_get, "GET's handler."),
    FASTCALL("incr", hot_incr, "INCR's handler."), FASTCALL("lpush", hot_lpush, "LPUSH's handler."),
    FASTCALL("rpush", hot_rpush, "RPUSH's handler."), FASTCALL("hset", hot_hset, "HSET's handler."),
    FASTCALL("zadd", hot_zadd, "ZADD's handler."),
    FASTCALL("exists", hot_exists, "EXISTS's handler."),
    FASTCALL("lpop", hot_lpop, "LPOP's handler."), FASTCALL("rpop", hot_rpop, "RPOP's handler."),
    FASTCALL("sadd", hot_sadd, "SADD's handler."),
    FASTCALL("spop", hot_spop, "SPOP's handler."),
    FASTCALL("hincrby", hot_hincrby, "HINCRBY's handler."),
    FASTCALL("expire", hot_expire, "EXPIRE's handler."),
    FASTCALL("pexpireat", hot_pexpireat, "PEXPIREAT's handler."),
    FASTCALL("multi", hot_multi, "MULTI's handler."),
    FASTCALL("exec", hot_exec, "EXEC's handler."),
    FASTCALL("zrangebyscore", hot_zrangebyscore, "ZRANGEBYSCORE's handler."),
    FASTCALL("sinter", hot_sinter, "SINTER's handler."),
    FASTCALL("geoadd", hot_geoadd, "GEOADD's handler."),
    FASTCALL("geosearch", hot_geosearch, "GEOSEARCH's handler."),
    FASTCALL("del", hot_del, "DEL's handler."),
    FASTCALL("bitcount", hot_bitcount, "BITCOUNT's handler."),
    FASTCALL("setbit", hot_setbit, "SETBIT's handler."),
    FASTCALL("pfcount", hot_pfcount, "PFCOUNT's handler."),
    FASTCALL("pfadd", hot_pfadd, "PFADD's handler."),
    FASTCALL("zincrby", hot_zincrby, "ZINCRBY's handler."),
    FASTCALL("mset", hot_mset, "MSET's handler."),
    FASTCALL("xadd", hot_xadd, "XADD's handler."),
    FASTCALL("zpopmin", hot_zpopmin, "ZPOPMIN's handler."),
    FASTCALL("zpopmax", hot_zpopmax, "ZPOPMAX's handler."),
    FASTCALL("xreadgroup", hot_xreadgroup, "XREADGROUP's handler."),
    FASTCALL("bind_streams", bind_streams,
             BIND_STREAMS_USAGE ": the classes of a consumer's history, and what its reply is "
             "made with."))
