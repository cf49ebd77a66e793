"""Redis/Valkey log files among the inputs: finding them by content, reading each node's rotated
set in one Spark task, naming the nodes, and preferring the richer source when several describe
the same node.

Theory of operation
-------------------
:func:`split_inputs` lists the input files (any Hadoop file system) and reads the first lines
of each (gunzipped when the bytes say gzip): a file is a Redis/Valkey log when
:func:`pyrepl.analytics.redislog.sniff` says so, else it stays on the NDJSON path, which Spark
reads in the JVM as before. The log files are read with ``binaryFiles``; the files of one rotated
set (one directory, one name once rotation suffixes are stripped) go to one task and are parsed
oldest first (by their first timestamp), so a sync that spans a rotation keeps one ``sync_id``
and a file that lost its start-up lines still knows its port. Each set yields its events with a
placeholder node and a :class:`SetInfo`; the driver collects the infos (small) and
:func:`resolve_nodes` names every node ``host:port``: its port from its own log, its host from
the way the other logs name it (a master's "Replica 10.0.0.7:6379 asks ..." at the moment the
replica with port 6379 logged its PSYNC to that master), or from the only host any log pairs with
that port. Events whose node cannot be named (no port in the whole set: a pyrepl server log, a
set without its start) are dropped and counted.

When pyrepl's own events, a log and ``pyrepl collect``'s samples describe the same node,
:func:`prefer_sources` keeps, for each node and time, the events of the richest source:
pyrepl's NDJSON, then the Redis/Valkey logs, then the collector's (inferred ones last).
"""

from __future__ import annotations

import bisect
import datetime as dt
import gzip
import os
import re
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyrepl.analytics import logline, redislog
from pyrepl.analytics.schema import field_names

HEAD_BYTES = 16 * 1024
HEAD_LINES = 40
MATCH_S = 2.0          # a master's decision and the replica's PSYNC, at most this far apart
# the clocks of a log and of the collector that sampled the same node may differ by this much
# (an inferred event is matched with logged ones in its window widened by it: prefer_sources)
MATCH_CLOCK_S = 0.1
_ROTATION = re.compile(r"(?:\.gz|\.\d+|[-_.]\d{8}(?:\d{2,6})?|[-_.]\d{4}-\d\d-\d\d(?:[T_-][\d:]+)?)$")
LOG_BAD = ("log-unparseable", "log-unknown")


def timezone(name: str | None) -> dt.tzinfo:
    """``UTC`` (default), ``+02:00`` / ``-0530``, or an IANA name (``Europe/Paris``)."""
    if not name or name.upper() in ("UTC", "Z", "GMT"):
        return dt.UTC
    m = re.fullmatch(r"([+-])(\d\d):?(\d\d)", name)
    if m:
        off = dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return dt.timezone(-off if m.group(1) == "-" else off)
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def _text(data: bytes) -> str:
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", "replace")


def _head_text(data: bytes) -> str:
    if data[:2] == b"\x1f\x8b":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            data = d.decompress(data, HEAD_BYTES)
        except zlib.error:
            return ""
    return data[:HEAD_BYTES].decode("utf-8", "replace")


def kind_of(head: bytes) -> str | None:
    """redislog.REDIS / VALKEY for a log file's first bytes, else None."""
    return logline.sniff(_head_text(head).splitlines()[:HEAD_LINES])


# -- listing and sniffing the inputs ----------------------------------------------------------------

def _local(p: str) -> str | None:
    if p.startswith("file:"):
        return re.sub(r"^file:(//)?", "", p)
    return None if re.match(r"^[A-Za-z][\w+.-]*://", p) else p


def file_statuses(spark: Any, paths: Sequence[str]) -> Iterable[Any]:
    """Hadoop's status of every file under the paths (directories recursively, globs
    expanded), on any Hadoop file system."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for p in paths:
        path = jvm.org.apache.hadoop.fs.Path(p)
        fs = path.getFileSystem(conf)
        for st in fs.globStatus(path) or []:
            it = fs.listFiles(st.getPath(), True)
            while it.hasNext():
                yield it.next()


def list_files(spark: Any, paths: Sequence[str]) -> list[str]:
    """Every file under the paths, skipping names that start with "." or "_" as Spark does."""
    return [f.getPath().toString() for f in file_statuses(spark, paths)
            if not f.getPath().getName().startswith((".", "_"))]


def head(spark: Any, path: str) -> bytes:
    local = _local(path)
    if local is not None:
        with open(local, "rb") as f:
            return f.read(HEAD_BYTES)
    jvm = spark.sparkContext._jvm
    p = jvm.org.apache.hadoop.fs.Path(path)
    fs = p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    n = min(HEAD_BYTES, int(fs.getFileStatus(p).getLen()))
    stream = fs.open(p)
    try:   # one py4j call for the whole head (commons-io is on Spark's class path)
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream, n))
    finally:
        stream.close()


def split_inputs(spark: Any, paths: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """(NDJSON files, {log file: kind}). When no file is a log, the NDJSON list is ``paths``
    itself (Spark lists them as it always did)."""
    files = list_files(spark, paths)
    logs: dict[str, str] = {}
    for f in files:
        k = kind_of(head(spark, f))
        if k is not None:
            logs[f] = k
    if not logs:
        return list(paths), {}
    return [f for f in files if f not in logs], logs


# -- one rotated set per task -----------------------------------------------------------------------

def set_key(path: str) -> str:
    """The rotated set a file belongs to: its directory and its name without rotation marks
    (``redis.log.1``, ``redis.log.2.gz``, ``redis-20261123.log.gz`` -> ``redis.log``)."""
    d, name = os.path.split(_local(path) or path)
    prev = None
    while prev != name:
        prev, name = name, _ROTATION.sub("", name)
    return f"{d}/{name}"


@dataclass
class SetInfo:
    """What the driver needs from one parsed set to name its nodes and count its lines."""
    key: str
    tag: str
    ports: dict[str, int | None] = field(default_factory=dict)   # placeholder -> own port
    events: dict[str, int] = field(default_factory=dict)         # placeholder -> events
    peers: list[str] = field(default_factory=list)
    marks: list[tuple[float, str, str, str]] = field(default_factory=list)  # ts, m|r, ph, peer
    counts: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, int] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)


def _span(text: str, tz: dt.tzinfo) -> tuple[float, float]:
    """(first, last) timestamp of a file: the order of a rotated set (ties: the shorter span
    first, it ended before the other went on)."""
    lines = text.splitlines()
    first = last = float("inf")
    for line in lines[:200]:
        parts = logline.split_line(line.strip(), tz)
        if parts is not None:
            first = parts[2]
            break
    for line in reversed(lines[-200:]):
        parts = logline.split_line(line.strip(), tz)
        if parts is not None:
            last = parts[2]
            break
    return first, last


def parse_set(key: str, files: Iterable[tuple[str, bytes]], tz: dt.tzinfo,
              kinds: dict[str, str] | None = None
              ) -> tuple[list[dict[str, Any]], list[tuple[str, str]], SetInfo]:
    """Parse one rotated set: (events with placeholder nodes, bad lines (kind, text), info)."""
    texts = sorted(((_span(t, tz), p, t) for p, t in ((p, _text(b)) for p, b in files)))
    tag = f"{zlib.crc32(key.encode()) & 0xffffffff:08x}"
    parser = redislog.LogParser(tag, tz)
    bad: list[tuple[str, str]] = []
    for _, _, text in texts:
        for line in text.splitlines():
            before = parser.counts["log-unparseable"] + parser.counts["log-unknown"]
            parser.feed(line)
            if parser.counts["log-unparseable"] + parser.counts["log-unknown"] != before:
                bad.append(("log-unparseable" if not logline.split_line(line.strip(), tz)
                            else "log-unknown", line[:2000]))
    events = parser.finish()
    known = [p for p in parser.ports.values() if p]
    fallback = Counter(known).most_common(1)[0][0] if known else None
    info = SetInfo(key, tag, peers=sorted(parser.peers), counts=dict(parser.counts),
                   unknown=parser.unknown[:5])
    kc: Counter = Counter()
    for _, p, _ in texts:
        kc[(kinds or {}).get(p, redislog.REDIS)] += 1
    info.kinds = dict(kc)
    n: Counter = Counter()
    for ev in events:
        ph = ev["node"]
        n[ph] += 1
        if ph not in info.ports:
            pid = ph.rsplit("#", 1)[1]
            info.ports[ph] = parser.ports.get(pid) or fallback
        if ev["event"] == "psync_decision" or ev["event"] == "psync_sent":
            info.marks.append((ev["ts"], "m" if ev["role"] == "master" else "r", ph,
                               ev["peer"]))
    info.events = dict(n)
    return events, bad, info


# -- naming the nodes -------------------------------------------------------------------------------

def _hp(name: str) -> tuple[str, int | None]:
    host, _, port = name.rpartition(":")
    return host, int(port) if port.isdigit() else None


def resolve_nodes(infos: Sequence[SetInfo]) -> dict[str, str | None]:
    """placeholder -> host:port (None when the node's port is unknown)."""
    port_of = {ph: p for i in infos for ph, p in i.ports.items()}
    votes: dict[str, Counter] = defaultdict(Counter)
    # replica-side PSYNCs by (master port, replica port): sorted times, the replica, the host
    r_marks: dict[tuple[int | None, int | None], list[tuple[float, str, str]]] = defaultdict(list)
    for i in infos:
        for ts, side, ph, peer in i.marks:
            if side == "r":
                h, p = _hp(peer)
                r_marks[(p, port_of.get(ph))].append((ts, ph, h))
    for v in r_marks.values():
        v.sort()
    for i in infos:
        for ts, side, ph, peer in i.marks:
            if side != "m":
                continue
            rh, rp = _hp(peer)
            cand = r_marks.get((port_of.get(ph), rp), [])
            lo = bisect.bisect_left(cand, (ts - MATCH_S, "", ""))
            for t2, rph, mh in cand[lo:]:
                if t2 > ts + MATCH_S:
                    break
                votes[ph][mh] += 1
                votes[rph][rh] += 1
    hosts_by_port: dict[int, set[str]] = defaultdict(set)
    for i in infos:
        for peer in i.peers:
            h, p = _hp(peer)
            if p is not None:
                hosts_by_port[p].add(h)
    out: dict[str, str | None] = {}
    for ph, port in port_of.items():
        if port is None:
            out[ph] = None
        elif votes[ph]:
            out[ph] = f"{votes[ph].most_common(1)[0][0]}:{port}"
        elif len(hosts_by_port[port]) == 1:
            out[ph] = f"{next(iter(hosts_by_port[port]))}:{port}"
        else:
            out[ph] = f"unknown:{port}"
    return out


def name_events(events: Iterable[dict[str, Any]], names: dict[str, str | None]
                ) -> list[dict[str, Any]]:
    out = []
    for ev in events:
        node = names.get(ev["node"])
        if node is not None:
            out.append({**ev, "node": node})
    return out


def parse_logs(files: dict[str, bytes], tz: dt.tzinfo = dt.UTC
               ) -> tuple[list[dict[str, Any]], list[SetInfo]]:
    """The pure-Python path (tests, small inputs): {path: bytes} -> named events, infos."""
    sets: dict[str, list[tuple[str, bytes]]] = defaultdict(list)
    for p, b in files.items():
        sets[set_key(p)].append((p, b))
    events: list[dict[str, Any]] = []
    infos = []
    for key, fs in sorted(sets.items()):
        ev, _, info = parse_set(key, fs, tz)
        events += ev
        infos.append(info)
    return sorted(name_events(events, resolve_nodes(infos)), key=lambda e: e["ts"]), infos


def log_summary(infos: Sequence[SetInfo], names: dict[str, str | None]) -> dict[str, Any]:
    """The ``input.logs`` part of summary.json."""
    c: Counter = Counter()
    kinds: Counter = Counter()
    unnamed = 0
    for i in infos:
        c.update(i.counts)
        kinds.update(i.kinds)
        unnamed += sum(n for ph, n in i.events.items() if names.get(ph) is None)
    return {"files": dict(sorted(kinds.items())), "sets": len(infos),
            "lines": c["lines"], "replication_lines": c["replication"], "other_lines": c["other"],
            "unparseable": c["log-unparseable"], "unknown": c["log-unknown"],
            "unnamed_events": unnamed,
            "unknown_hosts": sum(1 for n in set(names.values())
                                 if n is not None and n.startswith("unknown:")),
            "unknown_examples": [u for i in infos for u in i.unknown][:10]}


# -- Spark ------------------------------------------------------------------------------------------

def read_logs(spark: Any, logs: dict[str, str], tz_name: str | None = None
              ) -> tuple[Any, dict[str, Any]]:
    """The log files -> a DataFrame of FIELDS + ``_corrupt_record`` + ``lagline`` + ``logbad``
    (one row per event, and one per bad line with its kind), and the ``input.logs`` summary."""
    from pyspark import StorageLevel
    from pyspark.sql import types as T

    from pyrepl.analytics.schema import spark_schema

    tz = timezone(tz_name)
    sc = spark.sparkContext
    kinds = dict(logs)
    bykey: dict[str, list[str]] = defaultdict(list)
    for p in logs:
        bykey[set_key(p)].append(p)
    rdd = sc.binaryFiles(",".join(_escape(p) for p in logs), minPartitions=min(len(bykey), 64))

    def one(item: tuple[str, Iterable[tuple[str, bytes]]]) -> Iterable[tuple[str, Any]]:
        ev, bad, info = parse_set(item[0], list(item[1]), tz, kinds)
        yield "info", info
        for e in ev:
            yield "ev", e
        for b in bad:
            yield "bad", b

    parsed = rdd.map(lambda kv: (set_key(kv[0]), kv)).groupByKey(
        numPartitions=max(1, min(len(bykey), sc.defaultParallelism * 2))).flatMap(one) \
        .persist(StorageLevel.MEMORY_AND_DISK)
    infos = [x[1] for x in parsed.filter(lambda x: x[0] == "info").collect()]
    names = resolve_nodes(infos)
    bnames = sc.broadcast(names)
    cols = field_names()

    def row(x: tuple[str, Any]) -> tuple[Any, ...]:
        if x[0] == "bad":
            return (*([None] * len(cols)), x[1][1], False, x[1][0])
        e = x[1]
        e = {**e, "node": bnames.value.get(e["node"])}
        return (*(e.get(c) for c in cols), None, False, None)

    rows = parsed.filter(lambda x: x[0] != "info").map(row) \
        .filter(lambda t: t[-1] is not None or t[cols.index("node")] is not None)
    schema = T.StructType([*spark_schema(with_corrupt=True).fields,
                           T.StructField("lagline", T.BooleanType(), False),
                           T.StructField("logbad", T.StringType(), True)])
    return spark.createDataFrame(rows, schema), log_summary(infos, names)


def _escape(p: str) -> str:
    """binaryFiles takes a comma-separated list of globs: quote what a glob would expand."""
    return re.sub(r"([,{}\[\]*?\\])", r"\\\1", p)


# -- several sources of one node --------------------------------------------------------------------

def source_rank(F: Any, source: Any = None, inferred: Any = None) -> Any:
    """0 pyrepl's own NDJSON, 1 a Redis/Valkey log, 2 the collector, 3 its inferred events
    (of the columns ``source`` and ``inferred`` unless given others)."""
    src = F.col("source") if source is None else source
    inf = F.col("inferred") if inferred is None else inferred
    return (F.when(src.isNull() | (src == "pyrepl"), 0)
            .when(src.isin(redislog.REDIS, redislog.VALKEY), 1)
            .when(F.coalesce(inf, F.lit(0)) == 1, 3).otherwise(2))


def match_key(F: Any) -> Any:
    """What a change is, to match an inferred event with a logged one: the event, and for a
    PSYNC decision whether it was partial."""
    c = F.col
    return (F.when(c("event") == "psync_decision",
                   F.concat(F.lit("psync_decision:"),
                            F.when(F.coalesce(c("result"), F.lit("")) == "continue",
                                   F.lit("partial")).otherwise(F.lit("full"))))
            .otherwise(c("event")))


def name_unknown(sev: Any, known: Any = None) -> Any:
    """Name each ``unknown:PORT`` node (a log whose host no other log gave:
    :func:`resolve_nodes`) as the other sources (pyrepl's events, the collector's) name it, so
    that one sync seen by a log and by another source is one: an unknown master by the
    replicas' PSYNCs to a host with its port that match its decisions (the replica it named,
    within ``MATCH_S``), an unknown replica by the masters' decisions for a host with its port
    that match its PSYNCs; failing that, the one name with that port among all the events'
    nodes and peers (and the names in ``known``: a column ``_n``, of the lag samples and the
    collector's samples). Several candidates: the most votes (then the least name); none:
    left."""
    F = _F()
    c = F.col

    def port(col: Any) -> Any:
        return F.substring_index(col, ":", -1)

    def unknown(col: Any) -> Any:
        return col.startswith("unknown:")

    def side(event: str, tag: str) -> Any:
        return sev.filter(c("event") == event).select(
            c("node").alias(f"{tag}a"), c("peer").alias(f"{tag}b"), c("ts").alias(f"{tag}t"))

    dec, sent = side("psync_decision", "_d"), side("psync_sent", "_s")
    near = F.abs(c("_dt") - c("_st")) <= F.lit(MATCH_S)
    votes = dec.filter(unknown(c("_da"))).join(
        sent, (c("_db") == c("_sa")) & (port(c("_sb")) == port(c("_da"))) & near
        & ~unknown(c("_sb"))).select(c("_da").alias("_u"), c("_sb").alias("_n")).unionByName(
        sent.filter(unknown(c("_sa"))).join(
            dec, (c("_sb") == c("_da")) & (port(c("_db")) == port(c("_sa"))) & near
            & ~unknown(c("_db"))).select(c("_sa").alias("_u"), c("_db").alias("_n")))
    best = votes.groupBy("_u", "_n").agg(F.count(F.lit(1)).alias("_v")) \
        .groupBy("_u").agg(F.min(F.struct((-c("_v")).alias("v"), c("_n").alias("n")))
                           .getField("n").alias("_voted"))
    names = sev.select(c("node").alias("_n")).unionByName(sev.select(c("peer").alias("_n")))
    if known is not None:
        names = names.unionByName(known.select("_n"))
    names = names.filter(c("_n").isNotNull() & ~unknown(c("_n"))).distinct()
    only = names.groupBy(port(c("_n")).alias("_p")).agg(
        F.count(F.lit(1)).alias("_k"), F.min("_n").alias("_only")).filter(c("_k") == 1)
    mapping = sev.filter(unknown(c("node"))).select(c("node").alias("_u")).distinct() \
        .withColumn("_p", port(c("_u"))) \
        .join(best, "_u", "left").join(only, "_p", "left") \
        .select("_u", F.coalesce(c("_voted"), c("_only")).alias("_name")) \
        .filter(c("_name").isNotNull())
    return sev.join(F.broadcast(mapping), c("node") == c("_u"), "left") \
        .withColumn("node", F.coalesce(c("_name"), c("node"))).drop("_u", "_name")


PARTIAL_KEY, FULL_KEY = "psync_decision:partial", "psync_decision:full"
REPLIES = ("continue", "full", "rdbchannel", "dualchannel", "sync")


def richer_changes(rich: Any) -> Any:
    """What the richer sources' events (``rich``) tell of each node's changes, as (``_rn``
    node, ``_rk`` match_key, ``_rt`` time, ``_rp`` the other end): each event of its own
    node; and a master's PSYNC decisions seen from the other end too, each replica's PSYNC reply from that master that
    no richer decision of the master pairs with (within ``MATCH_S``). A dual-channel sync is
    also a partial one in the master's counters (its main channel's PSYNC): it tells both."""
    F = _F()
    c = F.col
    own = rich.select(c("node").alias("_rn"), match_key(F).alias("_rk"), c("ts").alias("_rt"),
                      c("peer").alias("_rp"))
    decs = rich.filter(c("event") == "psync_decision").select(
        c("node").alias("_dn"), c("peer").alias("_dp"), c("ts").alias("_dt"))
    replies = rich.filter((c("event") == "psync_reply") & c("peer").isNotNull()
                          & c("result").isin(*REPLIES)) \
        .join(decs, (c("_dn") == c("peer")) & (c("_dp") == c("node"))
              & (F.abs(c("_dt") - c("ts")) <= F.lit(MATCH_S)), "left_anti")
    seen = replies.select(c("peer").alias("_rn"), F.when(
        c("result") == "continue", F.lit(PARTIAL_KEY)).otherwise(F.lit(FULL_KEY)).alias("_rk"),
        c("ts").alias("_rt"), c("node").alias("_rp"))
    dual = rich.filter((c("event") == "psync_decision") & (c("result") == "dualchannel")) \
        .select(c("node").alias("_rn"), c("ts").alias("_rt"), c("peer").alias("_rp")) \
        .unionByName(replies.filter(c("result") == "dualchannel").select(
            c("peer").alias("_rn"), c("ts").alias("_rt"), c("node").alias("_rp"))) \
        .withColumn("_rk", F.lit(PARTIAL_KEY))
    return own.unionByName(seen).unionByName(dual)


def prefer_sources(sev: Any) -> Any:
    """Drop each event of a node that a richer source covers (its events of that node span
    the event's time; an inferred event's whole window, (``since``, ``ts``]): the same sync
    is not counted twice. A no-op with one source.

    The collector's inferred events not covered so (a log read while its node still ran,
    before the collector's last samples; a log that starts after the collector's first) are
    matched one by one: an inferred change happened in (``since``, ``ts``]; of the inferred
    events of one node, change (``match_key``), time and window, as many are dropped as the
    richer sources logged that change of that node in the window (widened by
    ``MATCH_CLOCK_S`` each side: :func:`richer_changes`, which counts a master's PSYNC
    decisions seen from the replica's end too), those naming a peer the richer sources name
    there first, then those naming none, each by (sync_id, peer)."""
    from pyspark.sql import Window

    F = _F()
    c = F.col
    ranked = sev.withColumn("_rank", source_rank(F))
    cover = ranked.groupBy(c("node").alias("_node"), c("_rank").alias("_crank")).agg(
        F.min("ts").alias("_t0"), F.max("ts").alias("_t1"))
    matchable = (c("_rank") == 3) & c("since").isNotNull()
    start = F.when(matchable, c("since")).otherwise(c("ts"))
    kept = ranked.join(F.broadcast(cover), (c("node") == c("_node"))
                       & (c("_crank") < c("_rank")) & (start >= c("_t0"))
                       & (c("ts") <= c("_t1")), "left_anti")
    inferred = kept.filter(matchable).withColumn("_key", match_key(F))
    rich = richer_changes(ranked.filter(c("_rank") < 3))
    wins = inferred.select("node", "_key", "ts", "since").distinct()
    hits = wins.join(rich, (c("node") == c("_rn")) & (c("_key") == c("_rk"))
                     & (c("_rt") > c("since") - F.lit(MATCH_CLOCK_S))
                     & (c("_rt") <= c("ts") + F.lit(MATCH_CLOCK_S))) \
        .groupBy("node", "_key", "ts", "since").agg(F.count(F.lit(1)).alias("_hits"),
                                                     F.collect_set("_rp").alias("_peers"))
    # the ones those sources name first, then the unnamed, then the others (syncs of other
    # replicas that only the collector saw)
    order = Window.partitionBy("node", "_key", "ts", "since").orderBy(
        F.when(F.array_contains(c("_peers"), c("peer")), 0).when(c("peer").isNull(), 1)
        .otherwise(2), c("sync_id").asc_nulls_first(), c("peer").asc_nulls_first())
    left = inferred.join(hits, ["node", "_key", "ts", "since"], "left") \
        .withColumn("_nth", F.row_number().over(order)) \
        .filter(c("_nth") > F.coalesce(c("_hits"), F.lit(0))) \
        .drop("_key", "_nth", "_hits", "_peers")
    return kept.filter(~matchable).unionByName(left).drop("_rank")


def _F() -> Any:
    from pyspark.sql import functions as F

    return F

