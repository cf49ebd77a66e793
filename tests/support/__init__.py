"""Helpers the tests share, one module a subject (imported as ``tests.support.<module>``).

Processes and clients: ``procs`` (free ports, ServerProcess, starting pyrepl and redis-server),
``resp`` (the raw RESP client and codec), ``redispy`` (redis-py views of a server), ``waits``
(bounded waits), ``load`` (write loads), ``realpair`` (a pyrepl master with Redis replicas),
``differential`` (pyrepl and Redis side by side, the propagation taps), ``aof`` (the AOF tests'
servers, crashes and dataset snapshots), ``rawreplica`` and ``syncload`` (a raw Redis 8 replica,
a full sync under load), ``collect_scenario`` (a Redis fleet under ``pyrepl collect``),
``tlscerts`` (test certificates).

In-process cores: ``cores`` (a ServerCore at a fake clock), ``master_side`` and
``replica_side`` (each side's OS boundary in memory, with its harness), ``memnet`` (real cores
wired in memory), ``execpaths`` (comparing execution paths), ``collect_samples`` (INFO samples
of a hand-made fleet).

Data and checks: ``paths`` (the repository, tests/data, Redis's sources), ``rdb`` (golden RDB
files, an RDB's digest), ``lua`` (a function library), ``checks`` (error texts and assertion
helpers).
"""
