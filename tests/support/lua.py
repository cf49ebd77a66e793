"""A Lua function library for FUNCTION LOAD (the function tests of every kind)."""

from __future__ import annotations

#: A function library (FUNCTION LOAD) the function tests share: ``put`` writes and counts,
#: ``get`` is a no-writes function with a description.
LIB = ("#!lua name=lib\n"
       "local function put(keys, args) redis.call('set', keys[1], args[1]) "
       "return redis.call('incr', 'calls') end\n"
       "redis.register_function('put', put)\n"
       "redis.register_function{function_name='get', callback=function(keys) "
       "return redis.call('get', keys[1]) end, flags={'no-writes'}, description='read'}")
