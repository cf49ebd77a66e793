"""Failovers decided by the cluster: a replica's election (automatic or manual) and
migration, and a master's vote — Redis 7.0's cluster.c, both sides of one exchange, sans-io.

Theory of operation: when a replica sees its master FAIL (or an operator asked for a manual
failover), it waits 500–1000 ms plus a second per better-placed sibling (its *rank*: siblings
with a greater replication offset), then bumps the current epoch and asks every node for its
vote (FAILOVER_AUTH_REQUEST). A master serving slots grants one vote per epoch
(:func:`vote_if_needed`), at most one per failed master every two node timeouts, and only for
slots whose owners have no newer config epoch. With votes from a majority of the masters the
replica takes its master's slots under the election's epoch and tells everyone (PONGs). A
manual failover (CLUSTER FAILOVER) first asks the master to pause writes (MFSTART) and waits
until its own offset equals the one the paused master announces, so no write is lost; FORCE
skips that wait, TAKEOVER the election too. A replica of a master with the most replicas may
move to a master left with none (:func:`handle_replica_migration`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyrepl.cluster import wire
from pyrepl.cluster.state import (
    BROADCAST_ALL,
    BROADCAST_LOCAL_SLAVES,
    MF_PAUSE_MULT,
    MF_TIMEOUT,
    OK,
    REPLICA_MIGRATION_DELAY,
    TODO_FSYNC_CONFIG,
    TODO_HANDLE_FAILOVER,
    TODO_HANDLE_MANUALFAILOVER,
    TODO_SAVE_CONFIG,
    TODO_UPDATE_STATE,
    ClusterState,
    bitmap_slots,
)

if TYPE_CHECKING:
    from pyrepl.cluster.node import ClusterNode
    from pyrepl.cluster.wire import Message

# why a replica cannot fail over (CLUSTER_CANT_FAILOVER_*)
CANT_NONE, CANT_DATA_AGE, CANT_WAITING_DELAY, CANT_EXPIRED, CANT_WAITING_VOTES = range(5)
CANT_RELOG_PERIOD = 300_000     # ms
_CANT_TEXT = {
    CANT_DATA_AGE: "Disconnected from master for longer than allowed. Please check the "
                   "'cluster-replica-validity-factor' configuration option.",
    CANT_WAITING_DELAY: "Waiting the delay before I can start a new failover.",
    CANT_EXPIRED: "Failover attempt expired.",
    CANT_WAITING_VOTES: "Waiting for votes, but majority still not reached.",
}


# -- the master's side ----------------------------------------------------------------------

def vote_if_needed(st: ClusterState, node: ClusterNode, request: Message) -> None:
    """clusterSendFailoverAuthIfNeeded."""
    me = st.myself
    master = node.master
    force_ack = bool(request.mflags[0] & wire.FLAG0_FORCEACK)
    if me.is_replica or me.numslots == 0:
        return
    if request.current_epoch < st.current_epoch:
        st.log("warning", f"Failover auth denied to {node.name}: reqEpoch "
               f"({request.current_epoch}) < curEpoch({st.current_epoch})")
        _vote(st, node, "denied", "old-epoch", request)
        return
    if st.last_vote_epoch == st.current_epoch:
        st.log("warning", f"Failover auth denied to {node.name}: already voted for epoch "
               f"{st.current_epoch}")
        _vote(st, node, "denied", "already-voted", request)
        return
    if node.is_master or master is None or (not master.failed and not force_ack):
        if node.is_master:
            why = "it is a master node"
        elif master is None:
            why = "I don't know its master"
        else:
            why = "its master is up"
        st.log("warning", f"Failover auth denied to {node.name}: {why}")
        _vote(st, node, "denied", "not-a-replica" if node.is_master else "unknown-master"
              if master is None else "master-up", request)
        return
    timeout2 = st.cfg.node_timeout * 2
    if st.now - master.voted_time < timeout2:
        st.log("warning", f"Failover auth denied to {node.name}: can't vote about this master "
               f"before {timeout2 - (st.now - master.voted_time)} milliseconds")
        _vote(st, node, "denied", "voted-recently", request)
        return
    for j in bitmap_slots(request.myslots):
        owner = st.slots[j]
        if owner is None or st.slot_unclaimed(j) or owner.config_epoch <= request.config_epoch:
            continue
        st.log("warning", f"Failover auth denied to {node.name}: slot {j} epoch "
               f"({owner.config_epoch}) > reqEpoch ({request.config_epoch})")
        _vote(st, node, "denied", "stale-slots", request)
        return
    st.last_vote_epoch = st.current_epoch
    master.voted_time = st.now
    st.do_before_sleep(TODO_SAVE_CONFIG | TODO_FSYNC_CONFIG)
    if node.link is not None:
        m = st.header(wire.FAILOVER_AUTH_ACK)
        st.send(node.link, wire.encode(m), wire.FAILOVER_AUTH_ACK)
    st.log("warning", f"Failover auth granted to {node.name} for epoch {st.current_epoch}")
    _vote(st, node, "granted", None, request)


def _vote(st: ClusterState, node: ClusterNode, result: str, reason: str | None,
          request: Message) -> None:
    st.event("cluster_election", result, node, role="master", reason=reason,
             config_epoch=request.current_epoch)


def master_start_manual(st: ClusterState, replica: ClusterNode) -> None:
    """MFSTART from one of our replicas: writes paused while it catches up and takes over
    (the PINGs we send it meanwhile carry FLAG0_PAUSED and our offset)."""
    reset_manual(st)
    st.mf_end = st.now + MF_TIMEOUT
    st.mf_replica = replica
    st.host.pause_writes(st.now + MF_TIMEOUT * MF_PAUSE_MULT)
    st.log("warning", f"Manual failover requested by replica {replica.name}.")


# -- the replica's side ---------------------------------------------------------------------

def reset_manual(st: ClusterState) -> None:
    """resetManualFailover (a master that paused for one unpauses)."""
    if st.mf_replica is not None:
        st.host.unpause_writes()
    st.mf_end = 0
    st.mf_can_start = False
    st.mf_replica = None
    st.mf_master_offset = -1


def manual_check_timeout(st: ClusterState) -> None:
    if st.mf_end and st.mf_end < st.now:
        st.log("warning", "Manual failover timed out.")
        reset_manual(st)


def handle_manual(st: ClusterState) -> None:
    """clusterHandleManualFailover: start once our offset reaches the paused master's."""
    if st.mf_end == 0 or st.mf_can_start or st.mf_master_offset == -1:
        return
    if st.mf_master_offset == st.host.repl_offset():
        st.mf_can_start = True
        st.log("warning", "All master replication stream processed, manual failover can "
               "start.")
        st.do_before_sleep(TODO_HANDLE_FAILOVER)
        return
    st.do_before_sleep(TODO_HANDLE_MANUALFAILOVER)


def start_manual(st: ClusterState, force: bool, takeover: bool) -> None:
    """CLUSTER FAILOVER on a replica (the caller checked it may): TAKEOVER claims the slots
    at once under an epoch of our own; FORCE starts the election without the master's
    pause; neither asks the master for MFSTART first."""
    reset_manual(st)
    st.mf_end = st.now + MF_TIMEOUT
    me = st.myself
    st.mf_kind = "takeover" if takeover else "force" if force else "manual"
    if takeover:
        st.log("warning", "Taking over the master (user request).")
        st.bump_epoch_without_consensus()
        replace_master(st)
    elif force:
        st.log("warning", "Forced failover user request accepted.")
        st.mf_can_start = True
    else:
        st.log("warning", "Manual failover user request accepted.")
        assert me.master is not None
        if me.master.link is not None:
            m = st.header(wire.MFSTART)
            st.send(me.master.link, wire.encode(m), wire.MFSTART)


def rank(st: ClusterState) -> int:
    """clusterGetSlaveRank: siblings (that may fail over) with a greater offset than ours."""
    master = st.myself.master
    if master is None:
        return 0
    mine = st.host.repl_offset()
    return sum(1 for r in master.replicas
               if r is not st.myself and not r.cant_failover and r.repl_offset > mine)


def log_cant_failover(st: ClusterState, reason: int) -> None:
    """clusterLogCantFailover: once a reason, again every 5 minutes, never while the master
    failed only recently."""
    if reason == st.cant_failover_reason and \
            st.now - st.cant_failover_logged < CANT_RELOG_PERIOD:
        return
    st.cant_failover_reason = reason
    master = st.myself.master
    if master is not None and master.failed and \
            st.now - master.fail_time < st.cfg.node_timeout + 5000:
        return
    st.cant_failover_logged = st.now
    st.log("warning", "Currently unable to failover: "
           + _CANT_TEXT.get(reason, "Unknown reason code."))


def replace_master(st: ClusterState) -> None:
    """clusterFailoverReplaceYourMaster: master now, with the old master's slots."""
    me = st.myself
    old = me.master
    if me.is_master or old is None:
        return
    st.set_node_as_master(me)
    st.host.unset_master()
    for j in list(old.slot_list()):
        st.del_slot(j)
        st.add_slot(me, j)
    st.event("cluster_failover", st.mf_kind if st.mf_end else "auto", old,
             config_epoch=me.config_epoch)
    st.update_state()
    st.save_config(True)
    st.broadcast_pong(BROADCAST_ALL)
    reset_manual(st)


def handle_replica_failover(st: ClusterState) -> None:
    """clusterHandleSlaveFailover."""
    me = st.myself
    now = st.now
    auth_age = now - st.failover_auth_time
    needed = st.size // 2 + 1
    manual = st.mf_end != 0 and st.mf_can_start
    st.todo &= ~TODO_HANDLE_FAILOVER
    auth_timeout = max(st.cfg.node_timeout * 2, 2000)
    auth_retry = auth_timeout * 2
    master = me.master
    if me.is_master or master is None or (not master.failed and not manual) or \
            (st.cfg.replica_no_failover and not manual) or master.numslots == 0:
        st.cant_failover_reason = CANT_NONE
        return
    data_age = st.host.replica_data_age_ms()
    if data_age > st.cfg.node_timeout:
        data_age -= st.cfg.node_timeout
    if st.cfg.replica_validity_factor and data_age > \
            st.cfg.repl_ping_replica_period * 1000 + \
            st.cfg.node_timeout * st.cfg.replica_validity_factor:
        if not manual:
            log_cant_failover(st, CANT_DATA_AGE)
            return
    if auth_age > auth_retry:
        st.failover_auth_time = now + 500 + st.rng.randrange(500)
        st.failover_auth_count = 0
        st.failover_auth_sent = False
        st.failover_auth_rank = rank(st)
        st.failover_auth_time += st.failover_auth_rank * 1000
        if st.mf_end:
            st.failover_auth_time = now
            st.failover_auth_rank = 0
            st.do_before_sleep(TODO_HANDLE_FAILOVER)
        st.log("warning", f"Start of election delayed for {st.failover_auth_time - now} "
               f"milliseconds (rank #{st.failover_auth_rank}, offset "
               f"{st.host.repl_offset()}).")
        st.broadcast_pong(BROADCAST_LOCAL_SLAVES)
        return
    if not st.failover_auth_sent and st.mf_end == 0:
        newrank = rank(st)
        if newrank > st.failover_auth_rank:
            added = (newrank - st.failover_auth_rank) * 1000
            st.failover_auth_time += added
            st.failover_auth_rank = newrank
            st.log("warning", f"Replica rank updated to #{newrank}, added {added} "
                   "milliseconds of delay.")
    if now < st.failover_auth_time:
        log_cant_failover(st, CANT_WAITING_DELAY)
        return
    if auth_age > auth_timeout:
        log_cant_failover(st, CANT_EXPIRED)
        return
    if not st.failover_auth_sent:
        st.current_epoch += 1
        st.failover_auth_epoch = st.current_epoch
        st.log("warning", f"Starting a failover election for epoch {st.current_epoch}.")
        st.event("cluster_election", "started", me.master, role="replica",
                 rank=st.failover_auth_rank, offset=st.host.repl_offset(),
                 config_epoch=st.current_epoch)
        m = st.header(wire.FAILOVER_AUTH_REQUEST)
        if st.mf_end:
            m.mflags = bytes([m.mflags[0] | wire.FLAG0_FORCEACK]) + m.mflags[1:]
        st.broadcast(wire.encode(m), wire.FAILOVER_AUTH_REQUEST)
        st.failover_auth_sent = True
        st.do_before_sleep(TODO_SAVE_CONFIG | TODO_UPDATE_STATE | TODO_FSYNC_CONFIG)
        return
    if st.failover_auth_count >= needed:
        st.log("warning", "Failover election won: I'm the new master.")
        if me.config_epoch < st.failover_auth_epoch:
            me.config_epoch = st.failover_auth_epoch
            st.log("warning", f"configEpoch set to {me.config_epoch} after successful "
                   "failover")
        replace_master(st)
    else:
        log_cant_failover(st, CANT_WAITING_VOTES)


def handle_replica_migration(st: ClusterState, max_replicas: int) -> None:
    """clusterHandleSlaveMigration: the replica with the smallest name among those of the
    masters with the most working replicas moves to an orphaned master, once it has been
    orphaned for a while and ours keeps more than cluster-migration-barrier."""
    me = st.myself
    if st.state != OK:
        return
    mymaster = me.master
    if mymaster is None:
        return
    ok = sum(1 for r in mymaster.replicas if not r.failed and not r.timed_out)
    if ok <= st.cfg.migration_barrier:
        return
    candidate = me
    target: ClusterNode | None = None
    from pyrepl.cluster.node import MIGRATE_TO
    for node in st.nodes.values():
        okreplicas = 0
        orphaned = not (node.is_replica or node.failed) and bool(node.flags & MIGRATE_TO)
        if node.is_master:
            okreplicas = node.non_failing_replicas()
        if okreplicas > 0:
            orphaned = False
        if orphaned:
            if target is None and node.numslots > 0:
                target = node
            if not node.orphaned_time:
                node.orphaned_time = st.now
        else:
            node.orphaned_time = 0
        if okreplicas == max_replicas:
            for r in node.replicas:
                if r.name < candidate.name:
                    candidate = r
    if target is not None and candidate is me and \
            st.now - target.orphaned_time > REPLICA_MIGRATION_DELAY:
        st.log("warning", f"Migrating to orphaned master {target.name}")
        st.set_master(target)
