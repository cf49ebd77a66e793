"""Lua scripting, differential against redis-server 7.0.15 (RESP2 and RESP3).

Ports the cases of Redis's tests/unit/scripting.tcl that a single connection can check:
conversions both ways, error texts and their ``script: <sha>, on @user_script:<line>.``
suffixes, the libraries (cjson, cmsgpack, bit, struct), globals protection, EVAL_RO, shebang
flags, SCRIPT LOAD/EXISTS/FLUSH, math.random's generator, and what a script propagates to a
replica (its effects, MULTI/EXEC-wrapped when more than one).
"""

from __future__ import annotations

import pytest

from tests.support.differential import check_propagation

pytestmark = [pytest.mark.slow, pytest.mark.interop]

SCRIPTS: list[tuple[str, ...]] = [
    # Lua -> Redis
    ("return 'hello'", "0"),
    ("return _G", "0"),
    ("local a = {}; setmetatable(a,{__index=function() foo() end}) return a", "0"),
    ("return 100.5", "0"),
    ("return -100.5", "0"),
    ("return 1e300", "0"),
    ("return 0/0", "0"),
    ("return true", "0"),
    ("return false", "0"),
    ("return nil", "0"),
    ("return {ok='fine'}", "0"),
    ("return {ok='a\\r\\nb'}", "0"),
    ("return {err='ERR this is an error'}", "0"),
    ("return {err='My Error'}", "0"),
    ("return {1,2,3,'ciao',{1,2}}", "0"),
    ("return {1,2,nil,4}", "0"),
    ("return {1,false,true,'x'}", "0"),
    ("return {double=3.14}", "0"),
    ("return {double=1/0}", "0"),
    ("return {big_number='123456789012345678901234567890'}", "0"),
    ("return {verbatim_string={format='txt', string='hello'}}", "0"),
    ("return {map={a=1}}", "0"),
    ("return {set={a=true}}", "0"),
    ("return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}", "2", "a{t}", "b{t}", "c{t}", "d{t}"),
    ("return {#KEYS, #ARGV}", "0", "x", "y"),
    ("return 'hello' --trailing comment", "0"),
    ("redis.setresp(3); return true", "0"),
    ("redis.setresp(3); return false", "0"),
    ("redis.setresp(3); return {true, false}", "0"),
    # Redis -> Lua
    ("redis.call('set','x','0'); local foo = redis.pcall('incr','x'); return {type(foo),foo}",
     "0"),
    ("redis.call('set','mykey','myval'); local foo = redis.pcall('get','mykey'); "
     "return {type(foo),foo}", "0"),
    ("redis.call('del','mylist'); redis.call('rpush','mylist','a','b','c'); "
     "local foo = redis.pcall('lrange','mylist',0,-1); return {type(foo),foo[1],foo[2],foo[3],#foo}",
     "0"),
    ("local foo = redis.pcall('set','mykey','myval'); return {type(foo),foo['ok']}", "0"),
    ("redis.call('set','mykey','myval'); local foo = redis.pcall('incr','mykey'); "
     "return {type(foo),foo['err']}", "0"),
    ("redis.call('del','mykey'); local foo = redis.pcall('get','mykey'); "
     "return {type(foo),foo == false}", "0"),
    ("redis.setresp(3); redis.call('del','mykey'); local foo = redis.pcall('get','mykey'); "
     "return {type(foo),foo == nil}", "0"),
    ("redis.call('hset','h','f','v'); redis.setresp(3); return redis.call('hgetall','h')", "0"),
    ("redis.call('hset','h','f','v'); redis.setresp(2); return redis.call('hgetall','h')", "0"),
    ("redis.call('hset','h','f','v'); redis.setresp(3); local r = redis.call('hgetall','h'); "
     "return {type(r.map), r.map.f}", "0"),
    ("redis.call('sadd','s','m'); redis.setresp(3); local r = redis.call('smembers','s'); "
     "return {type(r.set), tostring(r.set.m)}", "0"),
    ("redis.call('zadd','z','1.5','m'); redis.setresp(3); local r = redis.call('zscore','z','m'); "
     "return {type(r), tostring(r.double)}", "0"),
    ("redis.call('zadd','z','1.5','m'); return redis.call('zscore','z','m')", "0"),
    ("redis.setresp(3); return redis.call('zscore','z','m')", "0"),
    ("return redis.call('ping')", "0"),
    ("return redis.pcall('ping')['ok']", "0"),
    ("local value = 9007199254740991; redis.call('set','foo',value); "
     "return redis.call('get','foo')", "0"),
    ("redis.call('set', 'key', '12039611435714932082'); return redis.call('get', 'key')", "0"),
    ("redis.call('set','k',3.5); return redis.call('get','k')", "0"),
    ("return redis.call('select','9')", "0"),
    # errors
    ("return a", "0"),
    ("a=10", "0"),
    ("return redis.call()", "0"),
    ("return redis.pcall()", "0"),
    ("redis.call('nosuchcommand')", "0"),
    ("return redis.pcall('nosuchcommand')", "0"),
    ("redis.call('get','a','b','c')", "0"),
    ("redis.call('set','invalid')", "0"),
    ("redis.call('set','foo','bar'); redis.call('lpush','foo','val')", "0"),
    ("return redis.call('blpop','x',0)", "0"),
    ("return redis.pcall('brpoplpush','empty_list1', 'empty_list2',0)", "0"),
    ("return redis.pcall('bzpopmin','empty_zset', 0)", "0"),
    ("return redis.call('xread','BLOCK',0,'STREAMS','s','$')", "0"),
    ("redis.call('get', {})", "0"),
    ("return redis.pcall('get', nil)", "0"),
    ("redis.sha1hex()", "0"),
    ("error('boom')", "0"),
    ("error({err='CUSTOM boom'})", "0"),
    ("local t = nil\nreturn t.x", "0"),
    ("return redis.error_reply('My Error')", "0"),
    ("return redis.error_reply('-WRONG error')", "0"),
    ("return redis.error_reply()", "0"),
    ("return redis.status_reply('FINE')", "0"),
    ("return pcall(redis.call, 'nosuch')", "0"),
    ("local ok, e = pcall(function() error({err='X y'}) end) return e", "0"),
    ("return {unpack({1,2,3}, -2, 2147483647)}", "0"),
    ("return loadstring(string.dump(function() return 1 end))()", "0"),
    ("return loadstring('return 1+1')()", "0"),
    ("setmetatable(_G, {})", "0"),
    ("local g = getmetatable(_G)\ng.__index = {}", "0"),
    ("redis = function() return 1 end", "0"),
    ("_G = {}", "0"),
    ("redis.call = function() return 1 end", "0"),
    ("cjson.encode = function() return 1 end", "0"),
    ("cmsgpack.pack = function() return 1 end", "0"),
    ("bit.lshift = function() return 1 end", "0"),
    ("string.foo = 1", "0"),
    ("rawset(_G, 'x', 1)", "0"),
    ("getmetatable('').__index = function() return 1 end", "0"),
    ("getmetatable(nil).__index = function() return 1 end", "0"),
    ("loadfile('some file')", "0"),
    ("dofile('some file')", "0"),
    ("print('some data')", "0"),
    ("return os.time()", "0"),
    ("return type(debug)", "0"),
    ("return setfenv", "0"),
    ("return {type(pcall), type(xpcall), type(tostring), type(coroutine.create), _VERSION}", "0"),
    ("return redis.setresp(4)", "0"),
    ("redis.set_repl(7)", "0"),
    ("redis.log(redis.LOG_WARNING, 'from a script', 5)", "0"),
    ("redis.log(9, 'x')", "0"),
    ("redis.log('x')", "0"),
    ("return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, "
     "redis.REPL_ALL, redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
     "0"),
    ("return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}", "0"),
    ("return redis.replicate_commands()", "0"),
    ("return redis.breakpoint()", "0"),
    ("return redis.sha1hex('')", "0"),
    ("return redis.sha1hex('Pizza & Mandolino')", "0"),
    ("return x y", "0"),
    ("return 'hello'", "-12"),
    ("return 'hello'", "2", "a"),
    ("return 'hello'", "abc"),
    # math.random: Redis's lrand48, seeded
    ("math.randomseed(10); return tostring(math.random())", "0"),
    ("math.randomseed(20); return {tostring(math.random()), math.random(10), "
     "math.random(5, 8)}", "0"),
    ("return math.random(0)", "0"),
    # libraries
    ("return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')", "0"),
    ("local d = cjson.decode('{\"keya\": \"a\", \"keyb\": \"b\"}') return {d.keya, d.keyb}", "0"),
    ("return cjson.encode({1,2,3,{a='x'}})", "0"),
    ("return cjson.encode({a={b={c=1.5}}, s='q\"u/o\\ntab\\t'})", "0"),
    ("return cjson.encode(0.1)", "0"),
    ("return cjson.encode(1/3)", "0"),
    ("return cjson.encode(123456789012345)", "0"),
    ("return cjson.encode({[1]='a', [3]='c'})", "0"),
    ("return cjson.encode({})", "0"),
    ("return cjson.encode(cjson.null)", "0"),
    ("return cjson.encode('\\1\\127')", "0"),
    ("return {pcall(cjson.encode, {[20]=1})}", "0"),
    ("return {pcall(cjson.encode, 0/0)}", "0"),
    ("return cjson.decode('\"\\\\u00e9\\\\ud83d\\\\ude00\"')", "0"),
    ("return cjson.decode('[1,2,[3]]')[3][1]", "0"),
    ("return cjson.decode('{\"a\":null}').a == cjson.null", "0"),
    ("local encoded = cmsgpack.pack(0.1) local h = '' for i = 1, #encoded do "
     "h = h .. string.format('%02x',string.byte(encoded,i)) end return h", "0"),
    ("local encoded = cmsgpack.pack(-1099511627776) local h = '' for i = 1, #encoded do "
     "h = h .. string.format('%02x',string.byte(encoded,i)) end return h", "0"),
    ("local a = {x=nil,y=5} local b = {x=a} a['x'] = b local encoded = cmsgpack.pack(a) "
     "local h = '' for i = 1, #encoded do h = h .. string.format('%02x',string.byte(encoded,i)) "
     "end local re = cmsgpack.unpack(encoded) "
     "return {h, re.x.x.x.x.x.x.x.x.y == re.y, re.y == 5}", "0"),
    ("local e = cmsgpack.pack({1, 2.5, 'x', true, {a=1}}, 300, -5) "
     "return {e, cmsgpack.unpack(e)}", "0"),
    ("local e = cmsgpack.pack('a', 'b', 'c') local o, x = cmsgpack.unpack_limit(e, 1, 0) "
     "local o2, y = cmsgpack.unpack_one(e, o) return {o, x, o2, y}", "0"),
    ("return {bit.tobit(1), bit.band(1), bit.bxor(1,2), bit.bor(1,2,4,8,16,32,64,128)}", "0"),
    ("return {bit.tohex(65535, -2147483648), bit.tohex(-1), bit.tohex(255, 2), "
     "bit.tohex(255, -4)}", "0"),
    ("return {bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rol(1, 33), "
     "bit.ror(1, 1), bit.bswap(0x12345678), bit.bnot(0), bit.tobit(2^32 + 5.5)}", "0"),
    ("return bit.band('x')", "0"),
    ("return {struct.pack('>I2', 258), struct.pack('<i4', -2), struct.size('>iH')}", "0"),
    ("return {struct.unpack('>I2', '\\1\\2')}", "0"),
    ("return {struct.unpack('s', 'ab\\0')}", "0"),
    # shebang
    ("#!lua\nreturn 1", "0"),
    ("#!lua flags=no-writes\nreturn redis.call('get','x')", "0"),
    ("#!lua flags=no-writes\nreturn redis.call('set','x','1')", "0"),
    ("#!lua flags=no-writes,allow-oom,allow-stale,no-cluster,allow-cross-slot-keys\nreturn 2",
     "0"),
    ("#!lua flags=bad\nreturn 1", "0"),
    ("#!lua flags=\nreturn 1", "0"),
    ("#!lua flags=no-writes,,allow-oom\nreturn 1", "0"),
    ("#!lua name=x\nreturn 1", "0"),
    ("#!nolua\nreturn 1", "0"),
    ("#!lua", "0"),
    ("#!lua\nreturn a", "0"),
    # SORT and the scripting engine
    ("redis.call('del','myset') redis.call('sadd','myset',1,2,3,4,10) "
     "return redis.call('sort','myset','desc')", "0"),
    ("redis.call('del','myset') redis.call('sadd','myset','a','b','c','z','aa','aaa','azz') "
     "return redis.call('sort','myset','by','_')", "0"),
    ("redis.call('del','myset') redis.call('sadd','myset',3,1,2,10) "
     "return redis.call('sort','myset','by','_')", "0"),
    ("redis.call('del','myset') redis.call('sadd','myset','a','b','c') "
     "return redis.call('sort','myset','by','_','get','#','get','_:*')", "0"),
    ("redis.call('del','mylist') redis.call('rpush','mylist','b','a','c') "
     "return redis.call('sort','mylist','by','_')", "0"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_scripts_reply_like_redis(pairs, proto: int) -> None:
    p = pairs[proto]
    p.flushall()
    for script in SCRIPTS:
        p.check("EVAL", *script)
    p.check("SCRIPT", "FLUSH")


@pytest.mark.parametrize("proto", [2, 3])
def test_evalsha_script_load_exists_flush(pairs, proto: int) -> None:
    p = pairs[proto]
    p.flushall()
    p.check("SCRIPT", "FLUSH")
    p.check("SET", "mykey", "myval")
    p.check("EVALSHA", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey")
    p.check("EVAL", "return redis.call('get',KEYS[1])", "1", "mykey")
    p.check("EVALSHA", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey")
    p.check("EVALSHA", "FD758D1589D044DD850A6F05D52F2EEFD27F033F", "1", "mykey")
    p.check("EVALSHA", "NotValidShaSUM", "0")
    p.check("EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "0")
    p.check("EVALSHA_RO", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey")
    p.check("SCRIPT", "LOAD", "return 'loaded'")
    p.check("EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0")
    p.check("EVAL", "return 1+1", "0")
    p.check("SCRIPT", "EXISTS", "a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bd9",
            "a27e7e8a43702b7046d4f6a7ccf5b60cef6b9bda")
    p.check("SCRIPT", "LOAD", "return +")
    p.check("SCRIPT", "LOAD", "#!lua flags=x\nreturn 1")
    p.check("SCRIPT", "FLUSH", "ASYNC")
    p.check("SCRIPT", "FLUSH", "SYNC")
    p.check("SCRIPT", "FLUSH", "LAZY")
    p.check("EVALSHA", "fd758d1589d044dd850a6f05d52f2eefd27f033f", "1", "mykey")
    p.check("SCRIPT", "EXISTS", "fd758d1589d044dd850a6f05d52f2eefd27f033f")
    p.check("SCRIPT", "KILL")
    p.check("SCRIPT", "NOPE")
    p.check("SCRIPT", "HELP")
    p.check("EVAL_RO", "return redis.call('get', KEYS[1]);", "1", "mykey")
    p.check("EVAL_RO", "redis.call('del', KEYS[1]);", "1", "mykey")
    p.check("EVAL_RO", "#!lua\nreturn 1", "0")
    p.check("EVAL_RO", "#!lua flags=no-writes\nreturn redis.call('incr','c')", "0")
    p.check("EVAL_RO", "return redis.call('publish','ch','m')", "0")


def test_decr_if_gt_and_select(pair) -> None:
    decr_if_gt = """
        local current
        current = redis.call('get',KEYS[1])
        if not current then return nil end
        if current > ARGV[1] then
            return redis.call('decr',KEYS[1])
        else
            return redis.call('get',KEYS[1])
        end"""
    pair.check("SET", "foo", "5")
    for _ in range(5):
        pair.check("EVAL", decr_if_gt, "1", "foo", "2")
    pair.check("SELECT", "10")
    pair.check("SET", "mykey", "this is DB 10")
    pair.check("EVAL", "return redis.pcall('get',KEYS[1])", "1", "mykey")
    pair.check("EVAL", "return redis.pcall('select','9')", "0")
    pair.check("GET", "mykey")
    pair.check("EVAL", "redis.call('select','9'); return redis.call('set','k9','v')", "0")
    pair.check("GET", "k9")
    pair.check("SELECT", "9")
    pair.check("GET", "k9")
    pair.check("SELECT", "0")


def test_script_in_multi(pair) -> None:
    pair.check("MULTI")
    pair.check("EVAL", "return redis.call('incr', KEYS[1])", "1", "c")
    pair.check("EVAL", "return redis.call('blpop', KEYS[1], 0)", "1", "l")
    pair.check("EXEC")


def test_script_stats_like_redis(pair) -> None:
    pair.check("CONFIG", "RESETSTAT")
    pair.check("SET", "s", "x")
    pair.check("EVAL", "return redis.call('incr','s')", "0")
    pair.check("EVAL", "return redis.pcall('incr','s')", "0")
    pair.check("EVAL", "error('x')", "0")
    pair.check("EVAL", "return redis.call('nosuch')", "0")
    pair.check("EVAL_RO", "return redis.call('set','a','b')", "0")
    pair.check("INFO", "errorstats")
    a, b = pair.both("INFO", "commandstats")
    keep = (b"cmdstat_eval:", b"cmdstat_eval_ro:", b"cmdstat_incr:", b"cmdstat_set:")

    def calls(info: bytes) -> list[bytes]:
        return sorted(line.split(b",usec=")[0] + b"," + line.split(b",", 3)[-1]
                      for line in info.split(b"\r\n") if line.startswith(keep))

    assert calls(a) == calls(b), (calls(a), calls(b))


def test_misconf_and_readonly_rules(pair) -> None:
    """MISCONF for the writes of a no-shebang script, refusal of a writable shebang script."""
    # (no failed save here: the scripts only see the normal, writable master)
    pair.check("EVAL", "#!lua\nreturn redis.call('set','x','1')", "0")
    pair.check("EVAL", "#!lua flags=no-writes\nreturn redis.call('get','x')", "0")


def test_propagation_of_script_effects(tapped_redis) -> None:
    check_propagation(tapped_redis.port, [
        ("SADD", "myset", "a", "b", "c"),
        ("EVAL", "return redis.call('srem', 'myset', 'a')", "0"),
        ("EVAL", "return redis.call('mget', 'a', 'b')", "0"),
        ("SET", "expirekey", "1"),
        ("EVAL", "return redis.call('set', KEYS[1], ARGV[1])", "1", "k", "v"),
        ("EVAL", "redis.call('set','a','1'); redis.call('incrby','a','5'); return 1", "0"),
        ("EVAL", "redis.call('incrbyfloat', KEYS[1], 1)", "1", "f"),
        ("EVAL", "redis.call('set', KEYS[1], '1', 'KEEPTTL')", "1", "key"),
        ("EVAL", "redis.call('set','n','1'); redis.set_repl(redis.REPL_NONE); "
                 "redis.call('set','m','1'); redis.set_repl(redis.REPL_ALL); "
                 "redis.call('set','o','1')", "0"),
        ("EVAL", "redis.call('set','a','1'); redis.set_repl(redis.REPL_NONE); "
                 "redis.call('set','b','2'); redis.set_repl(redis.REPL_AOF); "
                 "redis.call('set','c','3'); redis.set_repl(redis.REPL_ALL); "
                 "redis.call('set','d','4')", "0"),
        ("EVAL", "redis.set_repl(redis.REPL_AOF); redis.call('set','c','3'); "
                 "redis.call('set','c2','3')", "0"),
        ("EVAL", "redis.set_repl(redis.REPL_REPLICA); redis.call('set','r','3')", "0"),
        ("EVAL", "redis.call('select', '3'); redis.call('set','db3','x'); "
                 "redis.call('select', '0'); redis.call('set','db0','y')", "0"),
        ("EVAL", "redis.call('set','e','1'); return redis.call('incr','myset')", "0"),
        ("EVAL", "return 1", "0"),
        ("EVAL_RO", "return redis.call('get','a')", "0"),
        ("SCRIPT", "LOAD", "return redis.call('incr', KEYS[1])"),
        ("EVALSHA", "1f8e8e2d4a4ac0a6e4c7bbf0bd4ac6dcd8d5e4c1", "1", "x"),
        ("EVALSHA", "2bab3b661081db58bd2341920e0ba7cf5dc77b25", "1", "x"),
    ])


def test_exec_of_queued_scripts_on_a_read_only_replica_as_redis(servers) -> None:
    """scripting.tcl's "no-writes shebang flag on replica": an EVAL queued on a master that
    became a read-only replica before EXEC aborts the transaction when its script declared
    flags without no-writes (a write by its flags), while a script without flags runs and
    its write is refused inside."""
    from tests.support.resp import RawClient

    seen = []
    for port in servers:
        with RawClient(port) as c, RawClient(port) as rr, RawClient(port) as rr2:
            got = [rr.call("MULTI"), rr.call("EVAL", "#!lua\nreturn 1", "0"),
                   rr2.call("MULTI"),
                   rr2.call("EVAL", "redis.call('set','x',1) return 1", "1", "x"),
                   c.call("REPLICAOF", "127.0.0.1", "1"), rr.call("EXEC"), rr2.call("EXEC"),
                   c.call("REPLICAOF", "NO", "ONE")]
            seen.append([g.split(b" script: ")[0] for g in got])
    assert seen[0] == seen[1]
    assert seen[0][5].startswith(b"-EXECABORT Transaction discarded because of: READONLY")
