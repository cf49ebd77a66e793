"""``pyrepl collect``'s INFO parsing: Redis 7.0.15's own text (a master and its replica, as
``redis-cli INFO server replication stats memory`` printed them, CRLF and all), the
``slaveN`` lines, the servers it tells apart, and that no text makes it raise."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pyrepl.collect.info import (
    NO_REPLID,
    ReplicaEntry,
    parse_info,
    parse_replica_line,
    replica_entries,
    server_of,
    to_sample,
)

MASTER_INFO = "\r\n".join("""# Server
redis_version:7.0.15
redis_mode:standalone
run_id:409ffc6f30048138ed04a4458bf55f6a7c55b778
tcp_port:17001
uptime_in_seconds:3

# Memory
used_memory:1058800
mem_replication_backlog:20508
mem_total_replication_buffers:20504
mem_clients_slaves:0

# Stats
total_net_repl_output_bytes:309
sync_full:1
sync_partial_ok:0
sync_partial_err:0

# Replication
role:master
connected_slaves:2
slave0:ip=127.0.0.1,port=17002,state=online,offset=50,lag=1
slave1:ip=127.0.0.1,port=17003,state=wait_bgsave,offset=0,lag=0
master_failover_state:no-failover
master_replid:bdf506586ca39f06d6cc43a9419eb8c8c7fc4f52
master_replid2:0000000000000000000000000000000000000000
master_repl_offset:50
second_repl_offset:-1
repl_backlog_active:1
repl_backlog_size:1048576
repl_backlog_first_byte_offset:1
repl_backlog_histlen:50
""".splitlines()) + "\r\n"

REPLICA_INFO = """# Server
redis_version:7.0.15
run_id:ee91e668508647c1e1c2420501c195ce2409e060
uptime_in_seconds:3

# Replication
role:slave
master_host:127.0.0.1
master_port:17001
master_link_status:down
master_last_io_seconds_ago:1
master_sync_in_progress:1
slave_read_repl_offset:50
slave_repl_offset:48
master_link_down_since_seconds:7
slave_priority:100
connected_slaves:0
master_replid:bdf506586ca39f06d6cc43a9419eb8c8c7fc4f52
master_replid2:1111111111111111111111111111111111111111
master_repl_offset:48
second_repl_offset:20
repl_backlog_active:1
repl_backlog_size:1048576
repl_backlog_first_byte_offset:1
repl_backlog_histlen:48
"""


def test_a_redis_master() -> None:
    s = to_sample("10.0.0.1:6379", 1000.5, parse_info(MASTER_INFO))
    assert s.node == "10.0.0.1:6379" and s.ts == 1000.5
    assert s.role == "master" and not s.is_replica and not s.link_up
    assert s.server == "redis 7.0.15" and s.uptime_s == 3
    assert s.run_id == "409ffc6f30048138ed04a4458bf55f6a7c55b778"
    assert s.replid == "bdf506586ca39f06d6cc43a9419eb8c8c7fc4f52" and s.replid2 == NO_REPLID
    assert (s.master_repl_offset, s.second_repl_offset) == (50, -1)
    assert s.backlog_active and s.backlog_size == 1048576
    assert (s.backlog_first_byte, s.backlog_histlen) == (1, 50)
    # the first byte offset is master_repl_offset - histlen + 1
    assert s.backlog_first_byte == s.master_repl_offset - s.backlog_histlen + 1
    assert (s.sync_full, s.sync_partial_ok, s.sync_partial_err) == (1, 0, 0)
    assert (s.repl_buffers_mem, s.backlog_mem) == (20504, 20508)
    assert s.connected_replicas == 2
    assert s.replicas == (ReplicaEntry("127.0.0.1", 17002, "online", 50, 1),
                          ReplicaEntry("127.0.0.1", 17003, "wait_bgsave", 0, 0))
    assert [e.addr for e in s.replicas] == ["127.0.0.1:17002", "127.0.0.1:17003"]
    assert [e.online for e in s.replicas] == [True, False]
    assert s.master_addr is None and s.link_status is None and s.replica_offset is None


def test_a_redis_replica_with_its_link_down() -> None:
    s = to_sample("10.0.0.2:6379", 5.0, parse_info(REPLICA_INFO))
    assert s.role == "replica" and s.is_replica and not s.link_up
    assert s.master_addr == "127.0.0.1:17001" and s.link_status == "down"
    assert s.link_down_since_s == 7 and s.sync_in_progress
    assert s.replica_offset == 48 and s.master_repl_offset == 48
    assert s.replid2 == "1" * 40 and s.second_repl_offset == 20
    assert s.replicas == () and s.connected_replicas == 0
    # no memory section: unknown, not zero
    assert s.repl_buffers_mem is None and s.backlog_mem is None
    up = to_sample("r", 6.0, parse_info(REPLICA_INFO.replace("link_status:down", "link_status:up")
                                        .replace("master_link_down_since_seconds:7\n", "")))
    assert up.link_up and up.link_down_since_s is None


def test_down_since_minus_one_is_unknown_and_old_servers_sum_their_buffers() -> None:
    s = to_sample("n", 0.0, parse_info("role:slave\nmaster_host:h\nmaster_port:1\n"
                                       "master_link_down_since_seconds:-1\n"
                                       "mem_replication_backlog:100\nmem_clients_slaves:30\n"))
    assert s.link_down_since_s is None and s.master_addr == "h:1"
    assert s.repl_buffers_mem == 130 and s.backlog_mem == 100


def test_replica_lines() -> None:
    assert parse_replica_line("ip=::1,port=6380,state=send_bulk,offset=7,lag=2") == \
        ReplicaEntry("::1", 6380, "send_bulk", 7, 2)
    assert parse_replica_line("ip=1.2.3.4,port=1") == ReplicaEntry("1.2.3.4", 1, "", 0, None)
    assert parse_replica_line("127.0.0.1,6380,online") is None  # Redis 2.6's form: no names
    assert parse_replica_line("ip=1.2.3.4,port=x,state=online") is None
    # INFO prints slaveN in list order; a dict may hold them in any order
    info = {"slave1": "ip=b,port=2,state=online,offset=1,lag=0", "slave10": "ip=c,port=3",
            "slave0": "ip=a,port=1,state=online,offset=1,lag=0", "slave_read_only": "1",
            "slave2": "garbage"}
    assert [e.ip for e in replica_entries(info)] == ["a", "b", "c"]


def test_servers() -> None:
    assert server_of({"redis_version": "7.0.15"}) == "redis 7.0.15"
    assert server_of({"redis_version": "7.2.4", "server_name": "valkey",
                      "valkey_version": "8.1.1"}) == "valkey 8.1.1"
    assert server_of({"redis_version": "7.0.15", "pyrepl_version": "0.1.0"}) == "pyrepl 0.1.0"
    assert server_of({}) == ""


def test_odd_numbers_are_unknown_not_errors() -> None:
    s = to_sample("n", 0.0, parse_info("role:master\nmaster_repl_offset:lots\n"
                                       "repl_backlog_size:1.5e3\nsecond_repl_offset:\n"
                                       "sync_full:-\n"))
    assert s.master_repl_offset == 0 and s.backlog_size == 1500
    assert s.second_repl_offset == -1 and s.sync_full == 0


NAMES = st.text(st.characters(codec="ascii", exclude_characters=":\r\n#"), min_size=1,
                max_size=12).filter(lambda x: x.strip() == x and x)
VALUES = st.text(st.characters(codec="ascii", exclude_characters="\r\n"), max_size=20) \
    .filter(lambda x: x.strip() == x)


@given(st.dictionaries(NAMES, VALUES, max_size=12), st.sampled_from(["\n", "\r\n"]))
def test_parse_info_reads_back_what_was_written(fields: dict, eol: str) -> None:
    text = "# Section" + eol + eol.join(f"{k}:{v}" for k, v in fields.items()) + eol
    assert parse_info(text) == fields


@given(st.text(max_size=400))
def test_any_text_gives_a_sample(text: str) -> None:
    s = to_sample("n", 1.0, parse_info(text))
    assert s.role in ("master", "replica")
    assert all(isinstance(e.port, int) for e in s.replicas)
