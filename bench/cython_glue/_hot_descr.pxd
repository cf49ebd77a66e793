# Data for bench/bench_cython_glue.py, not pyrepl code: nothing imports or builds it from
# here (setup.py does not list it, bench/ is no package). The types of _hot_descr.py and its
# C snippet (_get/_put).
# The script copies it into a throwaway export of the tree as pyrepl/commands/_hot.pxd
# in place of pyrepl/commands/_hot.c, compiles it with Cython and counts instructions per command
# (bench/RESULTS.md, "The C glue in Cython's pure Python mode?", issue 36 part 3).
# Measured, not used: it did not come within the issue's 5 % of the C.

# The C types of _hot.py when Cython compiles it (pure Python mode: this file augments the
# .py, which runs as it is without it).

import cython

cdef bint _bound
cdef object _client_type, _db_type, _core_type, _stats_type, _deque_type, _zset_type
cdef object _ok
cdef list _int_text
cdef long long _added
cdef object _appendleft, _append, _set_score
cdef object _ref_set, _ref_get, _ref_incr, _ref_lpush, _ref_rpush, _ref_hset, _ref_zadd
cdef object _ZERO
cdef object _d_db, _d_core, _d_data, _d_expires, _d_watched
cdef object _d_notify_mask, _d_dirty, _d_stats, _d_hits, _d_misses

cdef extern from *:
    """
    static inline PyObject *hot_slot_get(PyObject *d, PyObject *o) {
        return Py_TYPE(d)->tp_descr_get(d, o, NULL);
    }
    static inline int hot_slot_put(PyObject *d, PyObject *o, PyObject *v) {
        return Py_TYPE(d)->tp_descr_set(d, o, v);
    }
    """
    object _get "hot_slot_get"(object d, object o)
    int _put "hot_slot_put"(object d, object o, object v) except -1
cdef object _h_core
cdef dict _h_data

@cython.locals(args=list, data=dict, expires=dict, watched=dict)
cdef int _hot_case(object c, object argv, Py_ssize_t n) except -1

@cython.locals(n=Py_ssize_t, s="const unsigned char *", x="long long", i=Py_ssize_t,
               d="unsigned char")
cdef long long _canonical_counter(bytes v)

@cython.locals(b=bytes, n=Py_ssize_t, p="const unsigned char *", x="long long", i=Py_ssize_t,
               d="unsigned char")
cdef long long _short_score(object s)

@cython.locals(args=list)
cpdef set(c, argv)
@cython.locals(args=list)
cpdef get(c, argv)
@cython.locals(args=list, x="long long")
cpdef incr(c, argv)
@cython.locals(args=list)
cdef _push(c, argv, method, ref)
cpdef lpush(c, argv)
cpdef rpush(c, argv)
@cython.locals(args=list, hash=dict, before=Py_ssize_t)
cpdef hset(c, argv)
@cython.locals(args=list, score="long long", result="long long")
cpdef zadd(c, argv)
