"""The compiled parts, each a hot path a profile showed Python could not bring to issue 15's
goals (bench/RESULTS.md has the figures): the request reader's fast path
(pyrepl/resp/_scan.c, "The request reader in C"), the sorted set's index
(pyrepl/keyspace/_zbtree.c, "The sorted set as a B+tree"), the keyspace's table with a 24-bit age
per key in the size of a dict's entry (pyrepl/keyspace/_ktable.c, "KeyTable: the keyspace's table
(issue 37)") and the per-request loops of a run of plain
commands (pyrepl/_plainrun.c, "Runs counted in C"), and a client read's bookkeeping
(pyrepl/net/_serve.c, with pyrepl/_slots.h shared with _scan.c: "A lone request's bookkeeping
in C"; the master link's read on a replica too, and the replica's apply of its
master's stream, pyrepl/replication/replica/_streamread.c: "A replica's read in C"), the memory accounting that sizes used_memory (pyrepl/_memacct.c, which reads
pymalloc's pools: "Memory accounting (issue 37 part 1)"), a sealed stream node's decoding
(pyrepl/keyspace/_streamlp.c: "Streams kept as listpacks (issue 37 part 4)"), a small hash, a set of
integers, a small list and a small sorted set in Redis's own encodings
(pyrepl/keyspace/_lphash.c, _intset.c, _lplist.c, _lpzset.c, with pyrepl/keyspace/_listpack.h shared with _streamlp.c: "Small containers in
Redis's encodings (issue 37 part 4)"), the hashtable-encoded set and hash with their keys inline
(pyrepl/keyspace/_strtab.c: StrSet and StrDict, a compact dict of length-prefixed key blobs) and a
request's dispatch around its
handler with a write's feed into the replication stream (pyrepl/_dispatch.c, pyrepl/replication/_feed.c: "The dispatch in C"),
a reply value's wire bytes (pyrepl/resp/_encode.c), HyperLogLog's hash and dense adds
(pyrepl/keyspace/_hll.c) and a geo search's candidates and partial sort
(pyrepl/commands/_geo.c), all three in "Every command at Redis's speed (issue 39)", a script's
redis.call, EVAL's runner and EVALSHA on lupa's own Lua state (pyrepl/scripting/_luacall.c,
with the part of Lua's C API it resolves from lupa's module in pyrepl/scripting/_luaapi.h:
"EVALSHA's calls in C (issue 39)"), LZF
for the RDB's strings (pyrepl/rdb/_codec.c: "Full sync, SAVE and load of big values (issue 39)")
and DEBUG DIGEST's SHA1s (pyrepl/keyspace/_digest.c: "DEBUG DIGEST in C (issue 39)"). The packages are every
package under pyrepl/ (found, so that a new one cannot be left out of the wheel) and cli/ as
pyrepl.cli, with the data files the analytics job reads at run time (its log4j2 configuration,
its JIT directive) and the commands' key specs (pyrepl/commands/keyspecs.json, generated data).
Everything else is in setup.cfg.

Every extension is optional: where one does not build (no C compiler), the install goes on and
pyrepl runs as plain Python on the extensions' Python references (pyrepl/native.py, which
lists the same twenty-two: tests/unit/test_native.py checks it)."""

from setuptools import Extension, find_packages, setup

setup(packages=[*find_packages(include=["pyrepl", "pyrepl.*"]), "pyrepl.cli"],
      package_dir={"pyrepl": "pyrepl", "pyrepl.cli": "cli"},
      package_data={"pyrepl.analytics": ["*.properties", "*.json"],
                    "pyrepl.commands": ["keyspecs.json"]},
      ext_modules=[
    Extension("pyrepl.resp._scan", ["pyrepl/resp/_scan.c"],
              depends=["pyrepl/_slots.h", "pyrepl/resp/_names.h"], extra_compile_args=["-O2"],
              optional=True),
    Extension("pyrepl.resp._encode", ["pyrepl/resp/_encode.c"],
              depends=["pyrepl/_slots.h", "pyrepl/_wbuf.h"], extra_compile_args=["-O2"],
              optional=True),
    Extension("pyrepl.keyspace._hll", ["pyrepl/keyspace/_hll.c"], depends=["pyrepl/_slots.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.commands._geo", ["pyrepl/commands/_geo.c"],
              depends=["pyrepl/_slots.h", "pyrepl/commands/_geohash.h",
                       "pyrepl/keyspace/_zbtree.h", "pyrepl/keyspace/_lpzset.h"],
              extra_compile_args=["-O2"], libraries=["m"], optional=True),
    Extension("pyrepl.rdb._codec", ["pyrepl/rdb/_codec.c"],
              depends=["pyrepl/_slots.h", "pyrepl/_wbuf.h"], extra_compile_args=["-O2"],
              optional=True),
    Extension("pyrepl.scripting._luacall", ["pyrepl/scripting/_luacall.c"],
              depends=["pyrepl/_slots.h", "pyrepl/scripting/_luaapi.h",
                       "pyrepl/resp/_names.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl._plainrun", ["pyrepl/_plainrun.c"],
              depends=["pyrepl/_slots.h", "pyrepl/keyspace/_ktable.h", "pyrepl/_memacct.h",
                       "pyrepl/_latency.h", "pyrepl/_served.h", "pyrepl/keyspace/_hashslot.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl._dispatch", ["pyrepl/_dispatch.c"],
              depends=["pyrepl/_slots.h", "pyrepl/_memacct.h", "pyrepl/_latency.h",
                       "pyrepl/_served.h", "pyrepl/keyspace/_hashslot.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.replication._feed", ["pyrepl/replication/_feed.c"],
              depends=["pyrepl/_slots.h"], extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.replication.replica._streamread",
              ["pyrepl/replication/replica/_streamread.c"],
              depends=["pyrepl/_slots.h", "pyrepl/keyspace/_ktable.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.net._serve", ["pyrepl/net/_serve.c"],
              depends=["pyrepl/_slots.h", "pyrepl/keyspace/_ktable.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.commands._hot", ["pyrepl/commands/_hot.c"],
              depends=["pyrepl/_slots.h", "pyrepl/_wbuf.h", "pyrepl/keyspace/_ktable.h",
                       "pyrepl/_memacct.h", "pyrepl/keyspace/_lphash.h", "pyrepl/keyspace/_lplist.h",
                       "pyrepl/keyspace/_lpzset.h", "pyrepl/keyspace/_strtab.h",
                       "pyrepl/commands/_geohash.h", "pyrepl/keyspace/_listpack.h",
                       "pyrepl/keyspace/_streamid.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl._memacct", ["pyrepl/_memacct.c"], depends=["pyrepl/_memacct.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.keyspace._zbtree", ["pyrepl/keyspace/_zbtree.c"],
              depends=["pyrepl/keyspace/_zbtree.h"], extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.keyspace._streamlp", ["pyrepl/keyspace/_streamlp.c"],
              depends=["pyrepl/keyspace/_listpack.h", "pyrepl/keyspace/_streamid.h",
                       "pyrepl/_slots.h", "pyrepl/_wbuf.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.keyspace._digest", ["pyrepl/keyspace/_digest.c"],
              depends=["pyrepl/_slots.h", "pyrepl/keyspace/_streamid.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.keyspace._lphash", ["pyrepl/keyspace/_lphash.c"],
              depends=["pyrepl/keyspace/_listpack.h", "pyrepl/keyspace/_lphash.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.keyspace._intset", ["pyrepl/keyspace/_intset.c"],
              depends=["pyrepl/keyspace/_listpack.h"], extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.keyspace._lplist", ["pyrepl/keyspace/_lplist.c"],
              depends=["pyrepl/keyspace/_listpack.h", "pyrepl/keyspace/_lplist.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.keyspace._lpzset", ["pyrepl/keyspace/_lpzset.c"],
              depends=["pyrepl/keyspace/_listpack.h", "pyrepl/keyspace/_lpzset.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.keyspace._ktable", ["pyrepl/keyspace/_ktable.c"],
              depends=["pyrepl/keyspace/_ktable.h", "pyrepl/keyspace/_listpack.h",
                       "pyrepl/keyspace/_pairs.h", "pyrepl/keyspace/_hashslot.h"],
              extra_compile_args=["-O2"], optional=True),
    Extension("pyrepl.keyspace._strtab", ["pyrepl/keyspace/_strtab.c"],
              depends=["pyrepl/keyspace/_strtab.h", "pyrepl/keyspace/_pairs.h"],
              extra_compile_args=["-O2"], optional=True),
])
