"""Lua scripting with Redis 7.0.15's semantics (EVAL, EVALSHA, SCRIPT), on a real Lua 5.1.

Theory of operation: :class:`pyrepl.scripting.engine.ScriptEngine` owns one Lua 5.1 state
(``lupa.lua51``) set up as Redis's ``scriptingInit`` sets up its own: the allowed globals only,
the ``redis`` table, the cjson / cmsgpack / bit / struct libraries (``libs``), read-only
library tables and a locked global table (``sandbox``), and the error handler that gives
errors their ``script: <sha>, on @user_script:<line>.`` suffix. Scripts are compiled once into
the cache (``cache``) under their SHA1, like Redis's ``f_<sha>`` registry entries. Commands
run from a script go through the server core's ``call`` on a pseudo-client, and their replies
are converted to Lua values and back (``convert``) as Redis's RESP parser callbacks and
``luaReplyToRedisReply`` do. The package never imports the core: the command module
(``pyrepl.commands.scripting``) creates the engine lazily as ``core.scripts``.
"""

from __future__ import annotations
