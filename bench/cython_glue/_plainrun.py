# Data for bench/bench_cython_glue.py, not pyrepl code: nothing imports or builds it from
# here (setup.py does not list it, bench/ is no package). Cython pure-Python-mode prototype of
# pyrepl/_plainrun.c (slots read by getattr); its types are in _plainrun.pxd.
# The script copies it into a throwaway export of the tree as pyrepl/_plainrun.py
# in place of pyrepl/_plainrun.c, compiles it with Cython and counts instructions per command
# (bench/RESULTS.md, "The C glue in Cython's pure Python mode?", issue 36 part 3).
# Measured, not used: it did not come within the 5 % of the C.

"""pyrepl._plainrun: the per-request loops of a run of plain commands (pyrepl/plainrun.py),
compiled.

Plain Python that Cython compiles (its "pure Python mode": the types are in _plainrun.pxd
beside this file, so that the same file runs as it is, uncompiled). These loops make no
decision of their own: ``run_length`` counts what plainrun.select would, ``store_pairs`` and
``lookup_strings`` are ``d[r[1]] = r[2]`` and ``d.get(r[1])`` for each request r (SET's and
GET's whole runs, pyrepl/commands/strings.py), ``bulk_replies`` the wire bytes of a run's
bulk-string and nil replies in one object (pyrepl/resp/writer.py's encode_replies). ``start``
and ``account`` are plainrun.start's and plainrun.account's common case (a run of one
command): the checks made once for a run and the client's and the command's counters, the
Python function for anything else.
"""

BIND_USAGE = ("bind(ServerCore, Client, Command, CommandStat, LatencyHistogram, NAME_CACHE, "
              "account, start)")

_bound = False
_core_type = _client_type = _command_type = _stat_type = _hist_type = None
_name_cache = None
_py_account = _py_start = None
_CRLF = b"\r\n"
# "$<n>\r\n" for the lengths of most bulk strings
_HEADERS = [b"$%d\r\n" % n for n in range(1024)]


def _unbound(name):
    return RuntimeError(f"pyrepl._plainrun.{name} called before its module's bind()")


def _count_run(rest, name, lo, hi):
    """run_length's count (rest a list, name bytes)."""
    n = len(rest)
    k = 0
    while k < n:
        r = rest[n - 1 - k]
        if not isinstance(r, list):
            break
        m = len(r)
        if m < 1 or m < lo or m > hi:
            break
        a = r[0]
        if a is not name and not (isinstance(a, bytes) and a == name):
            break
        k += 1
    return k


def run_length(rest, name, min_args, max_args):
    """run_length(rest, name, min_args, max_args) -> int: how many requests at the end of
    rest (last first) are name's with an argument count in [min_args, max_args]."""
    if not isinstance(rest, list) or not isinstance(name, bytes):
        raise TypeError("run_length(rest: list, name: bytes, min_args, max_args)")
    return _count_run(rest, name, _ssize(min_args), _ssize(max_args))


def _ssize(v):
    """v as a Py_ssize_t (an int beyond: the largest)."""
    if v > 0x7FFFFFFFFFFFFFFF:
        return 0x7FFFFFFFFFFFFFFF
    return v


def store_pairs(d, reqs):
    """store_pairs(d, reqs) -> bool: d[r[1]] = r[2] for each request r when all are lists of
    three; else False and nothing stored."""
    if type(d) is not dict or type(reqs) is not list:
        raise TypeError("store_pairs(d: dict, reqs: list)")
    dd = d
    rs = reqs
    for r in rs:
        if type(r) is not list or len(r) != 3:
            return False
    for r in rs:
        if type(r) is not list or len(r) != 3:   # (a key's __eq__ changed reqs)
            raise RuntimeError("store_pairs: reqs changed")
        req = r
        dd[req[1]] = req[2]
    return True


def lookup_strings(d, reqs):
    """lookup_strings(d, reqs) -> list or None: d.get(r[1]) for each request r, when every
    value found is bytes; else None."""
    if type(d) is not dict or type(reqs) is not list:
        raise TypeError("lookup_strings(d: dict, reqs: list)")
    dd = d
    out = []
    for r in reqs:
        if type(r) is not list or len(r) < 2:
            raise ValueError("lookup_strings: a request without a key")
        req = r
        v = dd.get(req[1])
        if v is not None and type(v) is not bytes:
            return None
        out.append(v)
    return out


def bulk_replies(replies, nil):
    """bulk_replies(replies, nil) -> bytes or None: the wire bytes of replies that are all
    bytes (bulk strings) or None (nil); else None."""
    if type(replies) is not list or type(nil) is not bytes:
        raise TypeError("bulk_replies(replies: list, nil: bytes)")
    parts = []
    for r in replies:
        if r is None:
            parts.append(nil)
        elif type(r) is bytes:
            b = r
            n = len(b)
            parts.append(_HEADERS[n] if n < 1024 else b"$%d\r\n" % n)
            parts.append(b)
            parts.append(_CRLF)
        else:
            return None
    return b"".join(parts)


def bind(core, client, command, stat, hist, name_cache, account, start):
    """The classes whose attributes account() and start() read, and the Python they stand
    for."""
    global _bound, _core_type, _client_type, _command_type, _stat_type, _hist_type
    global _name_cache, _py_account, _py_start
    if type(name_cache) is not dict:
        raise TypeError(BIND_USAGE)
    _core_type, _client_type, _command_type = core, client, command
    _stat_type, _hist_type = stat, hist
    _name_cache, _py_account, _py_start = name_cache, account, start
    _bound = True


def _small(v):
    """v when it is an int in [0, 2**63); -1 for anything else."""
    if type(v) is not int:
        return -1
    if v < 0 or v > 0x7FFFFFFFFFFFFFFF:
        return -1
    return v


def start(core, c, first, rest):
    """start(core, c, first, rest): plainrun.start, its common case (a run of ``first``'s
    command repeated) compiled; the Python function otherwise (which also answers None).
    Returns (cmds, reqs, True)."""
    if not _bound:
        raise _unbound("start")
    if type(core) is not _core_type or type(c) is not _client_type or \
            type(first) is not list or type(rest) is not list:
        return _py_start(core, c, first, rest)
    f = first
    if len(f) == 0:
        return _py_start(core, c, first, rest)
    name = f[0]
    if type(name) is not bytes:
        return _py_start(core, c, first, rest)
    cmd0 = _name_cache.get(name)
    if cmd0 is None or type(cmd0) is not _command_type or cmd0.plain is not True or \
            core.gated is not False or core.keys_waited is not False or \
            core.tracking_on is not False or c.in_multi is not False or \
            _small(c.reply_mode) != 0:
        return _py_start(core, c, first, rest)
    cmdstats = core.cmdstats
    if type(cmdstats) is not dict:
        return _py_start(core, c, first, rest)
    st0 = cmdstats.get(cmd0)
    if st0 is None or type(st0) is not _stat_type or _small(st0.timing) <= 0:
        return _py_start(core, c, first, rest)
    lo = _small(cmd0.min_args)
    hi = _small(cmd0.max_args)
    if lo < 0 or hi < 0 or len(f) < lo or len(f) > hi:
        return _py_start(core, c, first, rest)
    rs = rest
    k = _count_run(rs, name, lo, hi)
    if k == 0:
        return _py_start(core, c, first, rest)
    # reqs = rest[-k:] + [first], reversed; cmds = [cmd0] * (k + 1)
    n = len(rs)
    reqs = [first]
    for i in range(1, k + 1):
        reqs.append(rs[n - i])
    return [cmd0] * (k + 1), reqs, True


def account(core, c, cmds, one, ns):
    """account(core, c, cmds, one, ns): plainrun.account, its common case (a run of one
    command whose stats record exists) compiled; the Python function otherwise."""
    if not _bound:
        raise _unbound("account")
    nsv = _small(ns)
    if one is not True or nsv < 0 or type(cmds) is not list or \
            type(core) is not _core_type or type(c) is not _client_type:
        return _py_account(core, c, cmds, one, ns)
    cl = cmds
    n = len(cl)
    if n == 0:
        return _py_account(core, c, cmds, one, ns)
    cmdstats = core.cmdstats
    if type(cmdstats) is not dict:
        return _py_account(core, c, cmds, one, ns)
    st = cmdstats.get(cl[0])
    if st is None or type(st) is not _stat_type:
        return _py_account(core, c, cmds, one, ns)
    hist = st.latency
    if type(hist) is not _hist_type:
        return _py_account(core, c, cmds, one, ns)
    counts = hist.counts
    if type(counts) is not dict:
        return _py_account(core, c, cmds, one, ns)
    tracking = bool(core.config.latency_tracking)
    per_call = nsv // n
    c.commands += n
    c.last_cmd = cl[n - 1]
    st.calls += n
    st.timed_ns += per_call
    st.timed += 1
    if tracking:   # CommandStat.record: the bucket of Redis's latency histogram
        v = per_call // 1000 * 1000
        if v == 0:
            v = 1
        shift = 0   # (v | 255).bit_length() - 8
        x = (v | 255) >> 8
        while x:
            x >>= 1
            shift += 1
        low = v >> shift << shift
        counts[low] = counts.get(low, 0) + 1
    return None
