"""``pyrepl collect``: sync events for nodes that do not log them (Redis, Valkey, or pyrepl
without a sync log), from periodic INFO samples.

Theory of operation: the I/O shell (:mod:`pyrepl.net.collect`) polls each node's INFO every
``--every`` seconds; :mod:`pyrepl.collect.info` turns the text into a typed :class:`Sample`;
:mod:`pyrepl.collect.infer` compares a node's new sample with its previous one (the only history
kept) and gives the events pyrepl would have logged — psync decisions from the sync counters, link
downs and ups from ``master_link_status``, replicas appearing and leaving, role, replid and run_id
changes — plus the samples themselves (``info_sample``, ``replica_lag``);
:mod:`pyrepl.collect.links` joins the two ends of each link across nodes within a poll round.
Everything here is sans-io: timestamps come in with the samples.
"""
