"""The Lua side of the scripting environment: globals, protection, ``redis`` table, runner.

Theory of operation: Redis 7.0.15 runs scripts in a Lua whose tables can be made read-only
(a patch of its bundled Lua): the global table and every library table reachable from it are
locked, reading a missing global raises "Script attempted to access nonexistent global
variable", and any write raises "Attempt to modify a readonly table". A stock Lua 5.1 has no
read-only tables, so :data:`BOOTSTRAP` builds the same behaviour from proxies: every protected
table is an empty proxy whose ``__index`` is the real table and whose ``__newindex`` raises,
scripts get the global proxy as their environment, and ``rawset``/``setmetatable``/
``getmetatable``/``rawget``/``next``/``pairs``/``ipairs``/``loadstring``/``load`` are wrapped
so that they see through the proxies and never hand out a real table or the unsandboxed
environment. Only Redis's allow-listed globals exist (no ``print``, ``dofile``, ``loadfile``,
``os``, ``io``, ``debug``, ``setfenv``, ...), and binary chunks are refused as Redis's Lua
refuses them.

The bootstrap chunk is named ``=[redis]``; the error handler (``__redis__err__handler``,
Redis's own code) skips the frames of that chunk so an error raised by a wrapper is reported
at the user's line, as Redis reports an error raised by its C functions.

``run(f, caller_proto, nkeys, ...)`` sets KEYS/ARGV, calls the script under the handler and
converts what it returns: a non-table value goes back to Python as is (the fast path), a
table is encoded to RESP here with ``rawget``/``next`` exactly as ``luaReplyToRedisReply``
walks it, and an error (raised or returned) comes back as its parts.
"""

from __future__ import annotations

CHUNK_NAME = b"=[redis]"

#: Nesting depth at which a returned table gets "-ERR reached lua stack limit" (Redis fails
#: lua_checkstack there: the Lua C stack of LUAI_MAXCSTACK slots is full).
REPLY_MAX_DEPTH = 7997

BOOTSTRAP = rb"""
local PY, LIBS, MAXDEPTH, FMODE, DEPRECATED, ACCEL = ...
local type, error, rawget, rawset, rawequal, next, select, tostring, tonumber, setmetatable,
      getmetatable, pcall, xpcall, unpack, setfenv, loadstring, load, ipairs, pairs =
      type, error, rawget, rawset, rawequal, next, select, tostring, tonumber, setmetatable,
      getmetatable, pcall, xpcall, unpack, setfenv, loadstring, load, ipairs, pairs
local fmt, concat, gsub, sub, find, floor, ceil =
      string.format, table.concat, string.gsub, string.sub, string.find, math.floor, math.ceil
local dbg = debug
local getinfo, sethook = dbg.getinfo, dbg.sethook
local INTERNAL = '=[redis]'
local RO = 'Attempt to modify a readonly table'

-- proxies ---------------------------------------------------------------------------------
local REAL = setmetatable({}, {__mode = 'k'})     -- proxy -> real table
local SHOWN = setmetatable({}, {__mode = 'k'})    -- real metatable -> what getmetatable shows
local NONE = {}
local function ro_newindex() error(RO, 2) end
local function protect(t, shown_mt)
  local mt = {__index = t, __newindex = ro_newindex}
  local p = setmetatable({}, mt)
  REAL[p] = t
  SHOWN[mt] = shown_mt or NONE
  return p
end
local function real(t) return REAL[t] or t end

local function copy(src, names)
  local t = {}
  for _, n in ipairs(names) do t[n] = src[n] end
  return t
end

-- the globals -----------------------------------------------------------------------------
local G = {}           -- the real globals table (never reachable from scripts)
local GP               -- its proxy: the scripts' environment and _G

local function missing_global(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end

G.xpcall, G.tostring, G.next, G.assert, G.tonumber, G.rawequal = xpcall, tostring, nil,
  assert, tonumber, rawequal
G.collectgarbage, G.type, G.select, G.unpack, G.gcinfo, G.error =
  collectgarbage, type, select, unpack, gcinfo, error
G._VERSION = _VERSION

G.next = function(t, k) return next(real(t), k) end
G.pairs = function(t)
  if REAL[t] then return G.next, t, nil end
  return pairs(t)
end
G.ipairs = function(t)
  if REAL[t] then return ipairs(REAL[t]) end
  return ipairs(t)
end
G.rawget = function(t, k) return rawget(real(t), k) end
G.rawset = function(t, k, v)
  if REAL[t] then error(RO, 0) end
  return rawset(t, k, v)
end
G.setmetatable = function(t, mt)
  if REAL[t] then error(RO, 0) end
  return setmetatable(t, mt)
end
G.getmetatable = function(o)
  local mt = getmetatable(o)
  if mt == nil then return nil end
  local shown = SHOWN[mt]
  if shown == NONE then return nil end
  if shown ~= nil then return shown end
  return mt
end
local function sandboxed(f, e)
  if f then setfenv(f, GP) end
  return f, e
end
local function binary(s) return type(s) == 'string' and sub(s, 1, 1) == '\27' end
G.loadstring = function(s, name)
  if binary(s) then
    return nil, fmt('[string "%s"]:1: unexpected symbol near \'<\\27>\'', name or '?')
  end
  return sandboxed(loadstring(s, name))
end
G.load = function(f, name)
  local first = true
  local function reader()
    local piece = f()
    if first and binary(piece) then piece = nil end
    first = false
    return piece
  end
  return sandboxed(load(reader, name))
end
-- pcall must return every value, nils included: count them with select.
local function pack(...) return select('#', ...), {...} end
G.pcall = function(...)
  local n, r = pack(pcall(...))
  if not r[1] then
    local e = r[2]
    if type(e) == 'userdata' then e = PY.unwrap(e) end
    if type(e) == 'table' then
      local m = e.err
      if type(m) == 'string' or type(m) == 'number' then e = m end
    end
    return false, e
  end
  return unpack(r, 1, n)
end

-- libraries (wrapped copies: a script never reaches the runtime's own tables) -------------
G.string = protect(copy(string, {'byte', 'char', 'dump', 'find', 'format', 'gmatch', 'gsub',
  'len', 'lower', 'match', 'rep', 'reverse', 'sub', 'upper', 'gfind'}))
G.table = protect(copy(table, {'concat', 'insert', 'maxn', 'remove', 'sort', 'foreach',
  'foreachi', 'getn', 'setn'}))
local math_t = copy(math, {'abs', 'acos', 'asin', 'atan', 'atan2', 'ceil', 'cos', 'cosh', 'deg',
  'exp', 'floor', 'fmod', 'frexp', 'huge', 'ldexp', 'log', 'log10', 'max', 'min', 'mod',
  'modf', 'pi', 'pow', 'rad', 'sin', 'sinh', 'sqrt', 'tan', 'tanh'})
G.coroutine = protect(copy(coroutine, {'create', 'resume', 'running', 'status', 'wrap',
  'yield'}))

-- luaL_where for errors of the wrappers that stand in for C functions: the first user frame
local function where()
  local lvl = 2
  local i = getinfo(lvl, 'Sl')
  while i and (i.source == INTERNAL or i.what == 'C') do lvl = lvl + 1; i = getinfo(lvl, 'Sl') end
  if i and i.currentline > 0 then return i.short_src .. ':' .. i.currentline .. ': ' end
  return ''
end
local function argerr(i, fname, msg)
  error(where() .. fmt("bad argument #%d to '%s' (%s)", i, fname, msg), 0)
end
local function checkint(i, fname, n, ...)
  local v = select(i, ...)
  local x = tonumber(v)
  if x == nil then
    argerr(i, fname, 'number expected, got ' .. (i > n and 'no value' or type(v)))
  end
  if x >= 0 then return floor(x) end
  return ceil(x)
end
-- unpack with Redis's overflow guard (luaB_unpack: "too many results to unpack")
G.unpack = function(...)
  local nargs = select('#', ...)
  local t, i, e = ...
  if type(t) ~= 'table' then
    argerr(1, 'unpack', 'table expected, got ' .. (nargs < 1 and 'no value' or type(t)))
  end
  t = real(t)
  if i == nil then i = 1 else i = checkint(2, 'unpack', nargs, ...) end
  if e == nil then e = #t else e = checkint(3, 'unpack', nargs, ...) end
  if i > e then return end
  local n = (e - i) % 4294967296
  if n >= 2147483647 or n + 1 + nargs > 8000 then error(where() .. 'too many results to unpack', 0) end
  -- the real unpack checks its C stack against the arguments it got: hand it as many
  if nargs == 1 then return unpack(t) elseif nargs == 2 then return unpack(t, i) end
  return unpack(t, i, e)
end
math_t.random = PY.random
math_t.randomseed = PY.randomseed
G.math = protect(math_t)

-- Library tables built in Python: functions answer (true, results...) or (false, message).
for name, lib in pairs(LIBS) do
  local t = {}
  for fname, f in pairs(lib.funcs) do t[fname] = f end
  for k, v in pairs(lib.values) do t[k] = v end
  if lib.lua then lib.lua(t) end
  G[name] = protect(t)
end

-- the string metatable: its __index is the protected string table, and it shows read-only
local smt = getmetatable('')
smt.__index = G.string
SHOWN[smt] = protect({__index = G.string})

-- errors ----------------------------------------------------------------------------------
local function errtab(s)
  return {err = s}
end

local P_unwrap = PY.unwrap
local function err_handler(err)
  local where = false
  if type(err) == 'userdata' then err = P_unwrap(err); where = type(err) == 'string' end
  local lvl = 2
  local i = getinfo(lvl, 'nSl')
  if i and i.what == 'C' then lvl = 3; i = getinfo(lvl, 'nSl') end
  while i and (i.source == INTERNAL or i.what == 'C') do lvl = lvl + 1; i = getinfo(lvl, 'nSl') end
  -- a library's luaL_error names its caller's line, as luaL_where(L, 1) does
  if where and i and i.currentline > 0 then err = i.short_src .. ':' .. i.currentline .. ': ' .. err end
  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end
G.__redis__err__handler = err_handler

-- the Lua debugger's view of a value (ldbCatStackValueRec) -------------------------------------
local P_repr_str = PY.ldb_repr_str
local function ldb_repr(v, level)
  if level == 10 then return '<max recursion level reached! Nested table?>' end
  level = level + 1
  local t = type(v)
  if t == 'string' then return P_repr_str(v) end
  if t == 'boolean' then return v and 'true' or 'false' end
  if t == 'number' then return fmt('%g', v) end
  if t == 'nil' then return 'nil' end
  if t == 'table' then
    local expected, is_array, r1, r2 = 1, true, {}, {}
    local k, x = next(v)
    while k ~= nil do
      if is_array and (type(k) ~= 'number' or k ~= expected) then is_array = false end
      r1[#r1 + 1] = ldb_repr(x, level)
      r2[#r2 + 1] = '[' .. ldb_repr(k, level) .. ']=' .. ldb_repr(x, level)
      expected = expected + 1
      k, x = next(v, k)
    end
    return '{' .. concat(is_array and r1 or r2, '; ') .. '}'
  end
  local addr = gsub(tostring(v), '^[^:]*: ', '')
  local names = {['function'] = 'function', userdata = 'userdata', thread = 'thread'}
  return '"' .. (names[t] or 'unknown') .. '@' .. addr .. '"'
end

-- the redis table -------------------------------------------------------------------------
local R = {}
local P_acl, P_getresp = PY.acl, PY.getresp
local SRESP = 2
local function raise(msg) error({err = 'ERR ' .. msg}) end

-- C functions to Lua, so a script's `return redis.call(...)` keeps its frame (a tail call to
-- a Lua wrapper would lose the line an error is reported at): _luacall's (ACCEL:
-- pyrepl/scripting/_luacall.c), which take Redis's 7999 arguments (LUAI_MAXCSTACK 8000), or
-- the reference's Python callables, which lupa calls after checking for two free Lua C stack
-- slots (7997 arguments).
R.call = ACCEL and ACCEL.call or PY.call
R.pcall = ACCEL and ACCEL.pcall or PY.pcall
R.sha1hex = PY.sha1hex
local function lua_err_text(s)
  if sub(s, 1, 1) == '-' then
    local sp = find(s, ' ', 1, true)
    local code, msg
    if not sp then code, msg = 'ERR', sub(s, 2) else code, msg = sub(s, 2, sp - 1), sub(s, sp + 1) end
    msg = gsub(gsub(msg, '^[\r\n]+', ''), '[\r\n]+$', '')
    return code .. ' ' .. msg
  end
  return 'ERR ' .. gsub(gsub(s, '^[\r\n]+', ''), '[\r\n]+$', '')
end
R.error_reply = function(...)
  local n = select('#', ...)
  local last = select(n > 0 and n or 1, ...)
  if n ~= 1 or type(last) ~= 'string' then return errtab('ERR wrong number or type of arguments') end
  local e = ...
  if sub(e, 1, 1) ~= '-' then e = '-' .. e end
  return errtab(lua_err_text(e))
end
R.status_reply = function(...)
  local n = select('#', ...)
  local last = select(n > 0 and n or 1, ...)
  if n ~= 1 or type(last) ~= 'string' then return errtab('ERR wrong number or type of arguments') end
  return {ok = (...)}
end
R.log = PY.log
R.LOG_DEBUG, R.LOG_VERBOSE, R.LOG_NOTICE, R.LOG_WARNING = 0, 1, 2, 3
R.REDIS_VERSION_NUM = PY.version_num
R.REDIS_VERSION = PY.version
R.setresp = PY.setresp
R.set_repl = PY.setrepl
R.REPL_NONE, R.REPL_AOF, R.REPL_SLAVE, R.REPL_REPLICA, R.REPL_ALL = 0, 1, 2, 2, 3
R.acl_check_cmd = P_acl
if not FMODE then   -- eval.c adds these three; the functions engine has none of them
  local P_ldb_state, P_ldb_log = PY.ldb_state, PY.ldb_log
  R.breakpoint = PY.ldb_breakpoint   -- true in a debugging session, which stops next line
  R.debug = function(...)            -- a log line in a debugging session's console
    local active, line = P_ldb_state()
    if not active then return end
    local parts = {}
    for i = 1, select('#', ...) do parts[i] = ldb_repr((select(i, ...)), 0) end
    P_ldb_log('<debug> line ' .. line .. ': ' .. concat(parts, ', '))
  end
  R.replicate_commands = function() return true end
end
G.redis = protect(R)

-- the global proxy ------------------------------------------------------------------------
local gmt = {__index = G, __newindex = ro_newindex}
setmetatable(G, {__index = missing_global})
GP = setmetatable({}, gmt)
REAL[GP] = G
SHOWN[gmt] = protect({__index = missing_global, __newindex = ro_newindex})
G._G = GP

-- lua-enable-deprecated-api: setfenv, getfenv and newproxy (Redis's allow-list lets them in).
-- The runtime's own globals and the sandbox's functions stay out of reach: an environment that
-- is not one a script set reads as the scripts' own, and the wrappers' cannot be changed.
if DEPRECATED then
  local RG = getfenv(1)
  local function level(f)   -- a stack level counted from the caller, past this wrapper
    if type(f) == 'number' and f > 0 then return f + 1 end
    return f
  end
  local function internal(f)
    return type(f) == 'function' and getinfo(f, 'S').source == INTERNAL
  end
  G.getfenv = function(...)
    local f = ...
    if select('#', ...) == 0 or f == nil then f = 1 end
    if type(f) == 'userdata' then return GP end   -- redis.call & co.: C functions in Redis
    local ok, e = pcall(getfenv, level(f))
    if not ok then error(where() .. gsub(e, "'%?'", "'getfenv'", 1), 0) end
    if e == RG or e == G then return GP end
    return e
  end
  G.setfenv = function(f, t)
    if internal(f) then error("'setfenv' cannot change environment of given object", 2) end
    if type(f) == 'number' and f > 0 and internal(getinfo(f + 1, 'f').func) then
      error("'setfenv' cannot change environment of given object", 2)
    end
    local ok, e = pcall(setfenv, level(f), t)
    if not ok then error(where() .. gsub(e, "'%?'", "'setfenv'", 1), 0) end
    return e
  end
  G.newproxy = newproxy
end

-- Lua -> RESP (luaReplyToRedisReply) --------------------------------------------------------
local function san(s) return (gsub(s, '[\r\n]', ' ')) end
-- a RESP3 reply (its head, then the text s) for a RESP3 client, else s as a bulk string
local function text_reply(out, n, cp, head, s)
  out[n + 1] = cp == 3 and head .. s .. '\r\n' or '$' .. #s .. '\r\n' .. s .. '\r\n'
end
local conv
conv = function(v, out, cp, d)
  local n = #out
  if d >= MAXDEPTH then out[n + 1] = '-ERR reached lua stack limit\r\n'; return end
  local t = type(v)
  if t == 'string' then
    out[n + 1] = '$' .. #v .. '\r\n'; out[n + 2] = v; out[n + 3] = '\r\n'
  elseif t == 'number' then
    out[n + 1] = fmt(':%d\r\n', v)
  elseif t == 'boolean' then
    if SRESP == 2 then
      out[n + 1] = v and ':1\r\n' or (cp == 3 and '_\r\n' or '$-1\r\n')
    elseif cp == 3 then
      out[n + 1] = v and '#t\r\n' or '#f\r\n'
    else
      out[n + 1] = v and ':1\r\n' or ':0\r\n'
    end
  elseif t == 'table' then
    local x = rawget(v, 'err')
    if type(x) == 'string' then out[n + 1] = '-' .. san(x) .. '\r\n'; return end
    x = rawget(v, 'ok')
    if type(x) == 'string' then out[n + 1] = '+' .. san(x) .. '\r\n'; return end
    x = rawget(v, 'double')
    if type(x) == 'number' then
      local s
      if x == 1/0 then s = 'inf' elseif x == -1/0 then s = '-inf' else s = fmt('%.17g', x) end
      text_reply(out, n, cp, ',', s)
      return
    end
    x = rawget(v, 'big_number')
    if type(x) == 'string' then text_reply(out, n, cp, '(', san(x)); return end
    x = rawget(v, 'verbatim_string')
    if type(x) == 'table' then
      local f, s = rawget(x, 'format'), rawget(x, 'string')
      if type(f) == 'string' and type(s) == 'string' then
        text_reply(out, n, cp, '=' .. (#s + 4) .. '\r\n' .. sub(f, 1, 3) .. ':', s)
        return
      end
    end
    -- a map (its keys and values) or else a set (its keys), counted once converted
    x = rawget(v, 'map')
    local map = type(x) == 'table'
    if not map then x = rawget(v, 'set') end
    if type(x) == 'table' then
      out[n + 1] = false
      local len = 0
      for k, val in next, x do
        conv(k, out, cp, d + 1)
        if map then conv(val, out, cp, d + 1) end
        len = len + 1
      end
      if map then out[n + 1] = (cp == 3 and '%' .. len or '*' .. 2 * len) .. '\r\n'
      else out[n + 1] = (cp == 3 and '~' or '*') .. len .. '\r\n' end
      return
    end
    out[n + 1] = false
    local j = 1
    while true do
      local e = rawget(v, j)
      if e == nil then break end
      conv(e, out, cp, d + 1)
      j = j + 1
    end
    out[n + 1] = '*' .. (j - 1) .. '\r\n'
  else
    out[n + 1] = cp == 3 and '_\r\n' or '$-1\r\n'
  end
end

-- the busy-script hook: PY.hook() answers true once SCRIPT KILL asked to stop the script.
local P_hook = PY.hook
local hook, line_mode
hook = function()
  local i = getinfo(2, 'S')
  if i and i.source == INTERNAL then return end   -- never inside the sandbox's own code
  if line_mode or P_hook() then
    if not line_mode then line_mode = true; sethook(hook, 'l') end
    error({err = 'ERR Script killed by user with SCRIPT KILL...'})
  end
end
local function set_hook(on)
  line_mode = false
  if on then sethook(hook, '', 100000) else sethook() end
end


-- the runner ------------------------------------------------------------------------------
local finish
local function split_args(nk, ...)
  local all = {...}
  local n = select('#', ...)
  local keys, argv = {}, {}
  for i = 1, nk do keys[i] = all[i] end
  for i = nk + 1, n do argv[i - nk] = all[i] end
  return keys, argv
end
local function run(f, cp, nk, ...)
  local keys, argv = split_args(nk, ...)
  G.KEYS = keys
  G.ARGV = argv
  SRESP = 2
  local ok, res = xpcall(f, err_handler)
  return finish(ok, res, cp)
end
-- a function (FCALL): the callback gets the keys and the arguments as its two parameters
local function frun(f, cp, nk, ...)
  local keys, argv = split_args(nk, ...)
  SRESP = 2
  local ok, res = xpcall(function() return f(keys, argv) end, err_handler)
  return finish(ok, res, cp)
end
-- luaCallFunction's garbage collector pacing: a step of 50 every 50 runs (LUA_GC_CYCLE_PERIOD),
-- counted in C when _luacall is there (its runs and these in one count)
local runs = 0
local tick = ACCEL and ACCEL.tick or function()
  runs = runs + 1
  if runs == 50 then collectgarbage('step', 50); runs = 0 end
end
-- what a run answers once the script ended: ok, and its result or its error
local function conclude(ok, res, cp)
  if line_mode then set_hook(true) end
  if not ok then
    if type(res) ~= 'table' then return 'x', tostring(res) end
    local m = res.err
    if type(m) == 'number' then m = tostring(m) end
    local line = res.line
    if type(line) == 'number' then line = tostring(line) end
    return 'e', m, res.source, line, res.ignore_error_stats_update
  end
  if type(res) ~= 'table' then return 'v', res end
  SRESP = P_getresp()
  local e = rawget(res, 'err')
  if type(e) == 'string' then return 'e', e, nil, nil, res.ignore_error_stats_update end
  local out = {}
  conv(res, out, cp, 0)
  return 'r', concat(out)
end
finish = function(ok, res, cp)
  tick()
  return conclude(ok, res, cp)
end
-- _luacall's runs (luaCallFunction's moves in C): KEYS and ARGV set in G, the script called
-- under err_handler, its result answered in C unless conclude must (an error, a table, the
-- hook left in line mode)
if ACCEL then ACCEL.set_runner(G, err_handler, conclude) end

local function compile(body, name)
  local f, e = loadstring(body, name or '@user_script')
  if not f then return nil, e end
  setfenv(f, GP)
  return f
end

local gc_count = function() return collectgarbage('count') end

-- the Lua debugger (pyrepl/scripting/ldb.py holds the session; here what needs the stack) --
local P_ldb_line, P_ldb_read, P_ldb_cmd, P_ldb_send, P_ldb_src, P_ldb_step, P_ldb_resumed =
  PY.ldb_line, PY.ldb_read, PY.ldb_cmd, PY.ldb_send, PY.ldb_source_line, PY.ldb_set_step,
  PY.ldb_resumed
local P_ldb_log = PY.ldb_log
-- the level of the script's innermost frame, seen from the caller of this function
local function script_level()
  local lvl = 3
  local i = getinfo(lvl, 'S')
  while i and i.source == INTERNAL do lvl = lvl + 1; i = getinfo(lvl, 'S') end
  return lvl - 1
end
local function ldb_print(name)
  local base = script_level()
  local lvl = base
  while getinfo(lvl, 'S') do
    local i = getinfo(lvl, 'S')
    if i.source ~= INTERNAL then
      local j = 1
      while true do
        local n, v = dbg.getlocal(lvl, j)
        if n == nil then break end
        if n == name then P_ldb_log('<value> ' .. ldb_repr(v, 0), true) return end
        j = j + 1
      end
    end
    lvl = lvl + 1
  end
  if name == 'ARGV' or name == 'KEYS' then
    P_ldb_log('<value> ' .. ldb_repr(rawget(G, name), 0), true)
  else
    P_ldb_log('No such variable.')
  end
end
local function ldb_print_all()
  local lvl = script_level()
  local vars, j = 0, 1
  while true do
    local n, v = dbg.getlocal(lvl, j)
    if n == nil then break end
    if not find(n, '(*temporary)', 1, true) then
      P_ldb_log('<value> ' .. n .. ' = ' .. ldb_repr(v, 0), true)
      vars = vars + 1
    end
    j = j + 1
  end
  if vars == 0 then P_ldb_log('No local variables in the current context.') end
end
local function ldb_trace()
  local base = script_level()
  local lvl = base
  while true do
    local i = getinfo(lvl, 'Snl')
    if not i then break end
    if find(i.short_src, 'user_script', 1, true) then
      P_ldb_log(fmt('%s %s:', lvl == base and 'In' or 'From', i.name or 'top level'))
      P_ldb_src(i.currentline)
    end
    lvl = lvl + 1
  end
end
local function ldb_eval(args)
  local code = concat(args, ' ', 3)
  local f = loadstring('return ' .. code, '@ldb_eval')
  if not f then
    local e
    f, e = loadstring(code, '@ldb_eval')
    if not f then P_ldb_log('<error> ' .. tostring(e)) return end
  end
  setfenv(f, GP)
  local ok, r = pcall(f)
  if not ok then
    if type(r) == 'table' then r = rawget(r, 'err') end
    P_ldb_log('<error> ' .. tostring(r))
    return
  end
  P_ldb_log('<retval> ' .. ldb_repr(r, 0), true)
end
local function ldb_redis(args)
  P_ldb_step(true)               -- (redis.call logs the command and its reply)
  pcall(R.call, unpack(args, 3))
  P_ldb_step(false)
end
-- ldbRepl: commands until one resumes the script; false when the client is gone
local function ldb_repl()
  while true do
    local r = {P_ldb_read()}
    local st = r[1]
    if st == 'lost' then return false end
    if st == 'err' then raise(r[2]) end
    local act = P_ldb_cmd(unpack(r, 2))
    if act == 'step' or act == 'continue' then return true end
    if act == 'abort' then raise('script aborted for user request') end
    if act == 'trace' then ldb_trace()
    elseif act == 'eval' then ldb_eval(r)
    elseif act == 'redis' then ldb_redis(r)
    elseif act == 'print' then
      if #r == 3 then ldb_print(r[3]) else ldb_print_all() end
    end
    if act ~= 'done' then P_ldb_send() end
  end
end
local ldb_hook = function(event, line)
  local i = getinfo(2, 'Sl')
  if not i or not find(i.short_src, 'user_script', 1, true) then return end
  local reason = P_ldb_line(line or i.currentline, event == 'count')
  if not reason then return end
  if not ldb_repl() and reason == 'timeout reached, infinite loop?' then
    raise('timeout during Lua debugging with client closing connection')
  end
  P_ldb_resumed()
end
local function set_ldb_hook(on)
  if on then sethook(ldb_hook, 'l', 100000) else sethook() end
end
-- what building the sandbox left behind (its chunk's temporaries) is not the state's size
if not FMODE then return run, compile, set_hook, gc_count, nil, set_ldb_hook end

-- the functions engine (function_lua.c): loading a library -----------------------------------
-- While a library's code runs (FUNCTION LOAD, RDB, FUNCTION RESTORE) the globals show only
-- the library API: a `redis` table with register_function, log and the version fields; any
-- other name is a "nonexistent global variable" error, as Redis's LIBRARY_API table.
local lower = string.lower
local LOADING = false
local FLAG_NAMES = {['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
                   ['no-cluster'] = true, ['allow-cross-slot-keys'] = true}
local P_register = PY.register
local function isstr(v) local t = type(v) return t == 'string' or t == 'number' end
local function read_flags(t)
  local out, j = {}, 1
  while true do
    local v = t[j]
    if v == nil then break end
    if not isstr(v) then return nil end
    local name = lower(tostring(v))
    if not FLAG_NAMES[name] then return nil end
    out[#out + 1] = name
    j = j + 1
  end
  return out
end
local function register_function(...)
  if not LOADING then raise('redis.register_function can only be called on FUNCTION LOAD command') end
  local argc = select('#', ...)
  if argc < 1 or argc > 2 then raise('wrong number of arguments to redis.register_function') end
  local name, desc, cb, flags
  if argc == 1 then
    local t = ...
    if type(t) ~= 'table' then
      raise('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
    end
    for k, v in next, real(t) do
      if not isstr(k) then raise('named argument key given to redis.register_function is not a string') end
      local key = lower(tostring(k))
      if key == 'function_name' then
        if not isstr(v) then raise('function_name argument given to redis.register_function must be a string') end
        name = tostring(v)
      elseif key == 'description' then
        if not isstr(v) then raise('description argument given to redis.register_function must be a string') end
        desc = tostring(v)
      elseif key == 'callback' then
        if type(v) ~= 'function' then raise('callback argument given to redis.register_function must be a function') end
        cb = v
      elseif key == 'flags' then
        if type(v) ~= 'table' then raise('flags argument to redis.register_function must be a table representing function flags') end
        flags = read_flags(v)
        if not flags then raise('unknown flag given') end
      else
        raise('unknown argument given to redis.register_function')
      end
    end
    if not name then raise('redis.register_function must get a function name argument') end
    if not cb then raise('redis.register_function must get a callback argument') end
  else
    local a, b = ...
    if not isstr(a) then raise('first argument to redis.register_function must be a string') end
    if type(b) ~= 'function' then raise('second argument to redis.register_function must be a function') end
    name, cb = tostring(a), b
  end
  local err = P_register(name, cb, flags or {}, desc)
  if err then raise(err) end
end
local LR = {register_function = register_function, log = PY.log,
            LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
            REDIS_VERSION_NUM = PY.version_num, REDIS_VERSION = PY.version}
setmetatable(LR, {__index = missing_global})
local LG = {redis = protect(LR)}
setmetatable(LG, {__index = missing_global})

local P_load_expired = PY.load_expired
local load_hook_line = function()
  local i = getinfo(2, 'S')
  if i and i.source == INTERNAL then return end   -- never inside the sandbox's own code
  error({err = 'ERR FUNCTION LOAD timeout'})
end
local load_hook = function()
  local i = getinfo(2, 'S')
  if i and i.source == INTERNAL then return end
  if P_load_expired() then
    sethook(load_hook_line, 'l')
    error({err = 'ERR FUNCTION LOAD timeout'})
  end
end
-- run a library's compiled code: true, or false and Redis's error text
local function load_lib(f, limited)
  gmt.__index = LG
  LOADING = true
  line_mode = false
  if limited then sethook(load_hook, '', 100000) else sethook() end
  local ok, e = pcall(f)
  sethook()
  LOADING = false
  gmt.__index = G
  if ok then return true end
  if type(e) == 'userdata' then e = P_unwrap(e) end
  if type(e) == 'table' then
    local m = rawget(e, 'err')
    if isstr(m) then return false, tostring(m) end
    return false, '(null)'
  end
  return false, 'ERR ' .. tostring(e)
end

return frun, compile, set_hook, gc_count, load_lib
"""
