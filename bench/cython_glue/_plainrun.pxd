# Data for bench/bench_cython_glue.py, not pyrepl code: nothing imports or builds it from
# here (setup.py does not list it, bench/ is no package). The types of _plainrun.py (an
# augmenting .pxd).
# The script copies it into a throwaway export of the tree as pyrepl/_plainrun.pxd
# in place of pyrepl/_plainrun.c, compiles it with Cython and counts instructions per command
# (bench/RESULTS.md, "The C glue in Cython's pure Python mode?", issue 36 part 3).
# Measured, not used: it did not come within the issue's 5 % of the C.

# The C types of _plainrun.py when Cython compiles it (pure Python mode: this file augments
# the .py, which runs as it is without it).

import cython

cdef bint _bound
cdef object _core_type, _client_type, _command_type, _stat_type, _hist_type
cdef dict _name_cache
cdef object _py_account, _py_start
cdef bytes _CRLF
cdef list _HEADERS

@cython.locals(n=Py_ssize_t, k=Py_ssize_t, m=Py_ssize_t)
cdef Py_ssize_t _count_run(list rest, bytes name, Py_ssize_t lo, Py_ssize_t hi) except -1

cdef Py_ssize_t _ssize(object v) except? -1
cdef long long _small(object v) except? -2

cpdef run_length(rest, name, min_args, max_args)

@cython.locals(dd=dict, rs=list, req=list)
cpdef store_pairs(d, reqs)

@cython.locals(dd=dict, out=list, req=list)
cpdef lookup_strings(d, reqs)

@cython.locals(parts=list, b=bytes, n=Py_ssize_t)
cpdef bulk_replies(replies, nil)

@cython.locals(f=list, rs=list, lo="long long", hi="long long", k=Py_ssize_t, n=Py_ssize_t,
               i=Py_ssize_t, reqs=list, cmdstats=dict)
cpdef start(core, c, first, rest)

@cython.locals(nsv="long long", cl=list, n=Py_ssize_t, cmdstats=dict, counts=dict,
               tracking=bint, per_call="long long", v="long long", x="long long", shift=int,
               low="long long")
cpdef account(core, c, cmds, one, ns)
