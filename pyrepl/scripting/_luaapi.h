/* pyrepl/scripting/_luaapi.h: the part of Lua 5.1's C API that _luacall.c calls, resolved at
   run time in the Lua that lupa.lua51 carries (its extension module exports the whole API).

   The declarations are Lua 5.1.5's lua.h and lauxlib.h (the types, the pseudo-indices, the
   type tags, the functions' signatures); each function is a pointer, filled by luaapi_resolve
   from the module's symbols with dlsym, and the macros below make the calls read as Lua's own.
   Nothing is linked: the one Lua in the process is lupa's, whose states these functions must
   work on (a second copy of Lua would compare its own nil object's address, not lupa's). */

#ifndef PYREPL_LUAAPI_H
#define PYREPL_LUAAPI_H

#include <dlfcn.h>
#include <stddef.h>

typedef struct lua_State lua_State;
typedef double lua_Number;
typedef int (*lua_CFunction)(lua_State *L);

#define LUA_REGISTRYINDEX (-10000)
#define LUA_GLOBALSINDEX (-10002)
#define lua_upvalueindex(i) (LUA_GLOBALSINDEX - (i))
#define LUA_MULTRET (-1)
#define LUA_NOREF (-2)
#define LUA_MINSTACK 20

#define LUA_TNONE (-1)
#define LUA_TNIL 0
#define LUA_TBOOLEAN 1
#define LUA_TLIGHTUSERDATA 2
#define LUA_TNUMBER 3
#define LUA_TSTRING 4
#define LUA_TTABLE 5
#define LUA_TFUNCTION 6
#define LUA_TUSERDATA 7
#define LUA_TTHREAD 8
#define LUA_MASKLINE (1 << 2)

/* X(return type, name, parameters) for every function used. */
#define LUAAPI_FUNCTIONS(X)                                                        \
    X(int, lua_gettop, (lua_State *L))                                             \
    X(void, lua_settop, (lua_State *L, int idx))                                   \
    X(int, lua_checkstack, (lua_State *L, int sz))                                 \
    X(int, lua_type, (lua_State *L, int idx))                                      \
    X(const char *, lua_tolstring, (lua_State *L, int idx, size_t *len))           \
    X(lua_Number, lua_tonumber, (lua_State *L, int idx))                           \
    X(int, lua_toboolean, (lua_State *L, int idx))                                 \
    X(void *, lua_touserdata, (lua_State *L, int idx))                             \
    X(void, lua_pushnil, (lua_State *L))                                           \
    X(void, lua_pushnumber, (lua_State *L, lua_Number n))                          \
    X(void, lua_pushlstring, (lua_State *L, const char *s, size_t len))            \
    X(void, lua_pushboolean, (lua_State *L, int b))                                \
    X(void, lua_pushvalue, (lua_State *L, int idx))                                \
    X(void, lua_pushcclosure, (lua_State *L, lua_CFunction fn, int n))             \
    X(void, lua_createtable, (lua_State *L, int narr, int nrec))                   \
    X(void, lua_rawseti, (lua_State *L, int idx, int n))                           \
    X(void, lua_rawgeti, (lua_State *L, int idx, int n))                           \
    X(void, lua_rawset, (lua_State *L, int idx))                                   \
    X(void, lua_setfield, (lua_State *L, int idx, const char *k))                  \
    X(void *, lua_newuserdata, (lua_State *L, size_t sz))                          \
    X(int, lua_setmetatable, (lua_State *L, int objindex))                         \
    X(int, lua_pcall, (lua_State *L, int nargs, int nresults, int errfunc))        \
    X(int, lua_error, (lua_State *L))                                              \
    X(int, lua_gc, (lua_State *L, int what, int data))                             \
    X(int, lua_gethookmask, (lua_State *L))                                        \
    X(int, luaL_ref, (lua_State *L, int t))                                        \
    X(void, luaL_unref, (lua_State *L, int t, int ref))

#define LUAAPI_POINTER(ret, name, params) static ret(*p_##name) params;
LUAAPI_FUNCTIONS(LUAAPI_POINTER)
#undef LUAAPI_POINTER

#define lua_gettop p_lua_gettop
#define lua_settop p_lua_settop
#define lua_checkstack p_lua_checkstack
#define lua_type p_lua_type
#define lua_tolstring p_lua_tolstring
#define lua_tonumber p_lua_tonumber
#define lua_toboolean p_lua_toboolean
#define lua_touserdata p_lua_touserdata
#define lua_pushnil p_lua_pushnil
#define lua_pushnumber p_lua_pushnumber
#define lua_pushlstring p_lua_pushlstring
#define lua_pushboolean p_lua_pushboolean
#define lua_pushvalue p_lua_pushvalue
#define lua_pushcclosure p_lua_pushcclosure
#define lua_createtable p_lua_createtable
#define lua_rawseti p_lua_rawseti
#define lua_rawgeti p_lua_rawgeti
#define lua_rawset p_lua_rawset
#define lua_setfield p_lua_setfield
#define lua_newuserdata p_lua_newuserdata
#define lua_setmetatable p_lua_setmetatable
#define lua_pcall p_lua_pcall
#define lua_error p_lua_error
#define lua_gc p_lua_gc
#define lua_gethookmask p_lua_gethookmask
#define luaL_ref p_luaL_ref
#define luaL_unref p_luaL_unref

#define lua_pop(L, n) lua_settop(L, -(n)-1)
#define lua_newtable(L) lua_createtable(L, 0, 0)

/* Every pointer from the library at path (already loaded by the process: RTLD_NOLOAD); the
   name of the first symbol missing, NULL when all are there. */
static const char *
luaapi_resolve(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (lib == NULL)
        return "the library itself (not loaded)";
#define LUAAPI_RESOLVE(ret, name, params)                          \
    if ((*(void **)&p_##name = dlsym(lib, #name)) == NULL)         \
        return #name;
    LUAAPI_FUNCTIONS(LUAAPI_RESOLVE)
#undef LUAAPI_RESOLVE
    return NULL;   /* (the handle stays open: the functions must) */
}

#endif
