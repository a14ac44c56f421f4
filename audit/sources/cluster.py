"""Live cluster -> the same tables as the log-dir source, read-only.

* ``__consumer_offsets`` through the Spark 4 Python data source ``kafka_offsets_topic``
  (:mod:`audit.sources.kafka_datasource`: the partitions spread over the session's parallelism,
  ``read_committed``, no group, never commits), read with Fetch requests and decoded in the same
  task (``decoded=true``: :mod:`audit.sources.fetch`);
* OffsetsForLeaderEpoch answers for every (topic-partition, committed epoch) of a live commit and
  ListOffsets bounds from the leaders, through :class:`audit.sources.collector.OffsetCollector`
  (KIP-320 fencing, KIP-232 stale-metadata rejection, KIP-1102 rebootstrap, KIP-526 scoped metadata).

The driver collects only the distinct (topic, partition, epoch) requests: bounded by partitions
times epochs, never by commit count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..formats.segments import RAW_SCHEMA
from .logdirs import spark_schema
from ..spark import default_parallelism, distribute, is_connect


__all__ = [
    "BOUNDS_DDL",
    "CONNECTOR_ARTIFACT",
    "CONNECTOR_HOLD_BYTES",
    "CONNECTOR_REFUSED",
    "EEO_DDL",
    "EPOCHS_DDL",
    "ClusterTables",
    "cluster_tables",
    "connector_package",
    "live_collect",
    "read_offsets_connector",
    "read_offsets_topic",
    "read_share_state_topic",
]

EPOCHS_DDL = "topic string, partition int, broker_id int, leader_epoch int, start_offset bigint, is_leader boolean"
#: ``local_log_start_offset``: the leader's first local offset (ListOffsets EARLIEST_LOCAL, KIP-1005; null where
#: the leader does not support ListOffsets v8 or answered with an error), as the log-dir source's bounds carry it
BOUNDS_DDL = (
    "topic string, partition int, log_start_offset bigint, local_log_start_offset bigint, log_end_offset bigint, "
    "high_watermark bigint, leader_id int, answered_by_broker int, authority string, history_captured_at timestamp, "
    "replica_count int, caches_disagree boolean, unclean_elections int, last_unclean_election timestamp"
)
EEO_DDL = (
    "topic string, partition int, requested_epoch int, leader_epoch int, end_offset bigint, answered_by_broker int"
)


def _decode(batches):
    from audit.formats.segments import decode_offsets_rows

    for b in batches:
        yield decode_offsets_rows(b)


#: key and value bytes a connector task holds before summarising them (``--mode latest``)
CONNECTOR_HOLD_BYTES = 32 << 20


def _decode_latest(batches):
    """Apply ``--mode latest`` to the connector's rows, one ``__consumer_offsets`` partition per task.

    A task reads one partition in offset order, summarised :data:`CONNECTOR_HOLD_BYTES` of records at a time as
    the log-dir source summarises a segment (:func:`audit.formats.segments.decode_offsets_rows_latest`).
    """
    import pyarrow as pa

    from audit.formats.segments import decode_offsets_rows_latest

    held, size = [], 0
    for b in batches:
        held.append(b)
        size += b.nbytes
        if size >= CONNECTOR_HOLD_BYTES:
            yield from decode_offsets_rows_latest(pa.Table.from_batches(held))
            held, size = [], 0
    if held:
        yield from decode_offsets_rows_latest(pa.Table.from_batches(held))


def read_offsets_topic(
    spark: SparkSession,
    bootstrap_servers: str,
    client_config: str | None = None,
    consumer_factory: Callable[..., Any] | None = None,
    latest: bool = False,
) -> DataFrame:
    """Read ``__consumer_offsets`` of a live cluster as :data:`RAW_SCHEMA` rows plus ``broker_id`` (null).

    The read takes at most the session's default parallelism of tasks, decoded where they are read
    (``decoded=true``); ``latest`` (``--mode latest``): summarised per partition there too, as the log-dir source
    does per segment.
    """
    from .kafka_datasource import register

    # as many tasks as the session runs at once: each task reads its partitions with one client
    options = {
        "bootstrap.servers": bootstrap_servers,
        "tasks": str(default_parallelism(spark)),
        "decoded": "true",
        "latest": str(bool(latest)).lower(),
    }
    if client_config:
        options["client.properties"] = client_config
    if is_connect(spark):
        raw = _read_planned_here(spark, options, consumer_factory)
    else:
        register(spark, consumer_factory)
        raw = spark.read.format("kafka_offsets_topic").options(**options).load()
    return raw.withColumn("broker_id", F.lit(None).cast("int"))


def _read_planned_here(spark: SparkSession, options: dict, consumer_factory=None) -> DataFrame:
    """Plan the ``kafka_offsets_topic`` data source's read in this process, and read it with ``mapInArrow``.

    Over Spark Connect a Python data source is planned by a Python process of the server's driver, whose Python is
    the server's own (not the session's ``--python-env``) and whose files (``--client-config``) are not this
    client's.  Here the reader is built and its partitions listed (ListOffsets) by this client, exactly as the
    data source's planner does (:func:`audit.sources.kafka_datasource.reader_from_options`), then each task's
    ranges are read by ``mapInArrow`` on the executors, which run the session's Python.  Same rows
    (``options['decoded']`` must be true: :data:`RAW_SCHEMA`), same snapshot.
    """
    from .kafka_datasource import OffsetsTopicPartition, OffsetsTopicTask, reader_from_options

    reader = reader_from_options(options, consumer_factory)
    assert reader.decoded, "the Connect read yields decoded rows"
    tasks = [[(r.partition, r.start_offset, r.end_offset) for r in t.ranges] for t in reader.partitions()]
    schema = spark_schema(RAW_SCHEMA)

    def read_tasks(batches):
        for batch in batches:
            for ranges in batch.column(0).to_pylist():
                task = OffsetsTopicTask([OffsetsTopicPartition(r["p"], r["s"], r["e"]) for r in ranges])
                yield from reader.read(task)

    if not tasks:
        return spark.createDataFrame([], schema)
    plan = distribute(
        spark,
        [([{"p": p, "s": s, "e": e} for p, s, e in t],) for t in tasks],
        "ranges array<struct<p:int,s:bigint,e:bigint>>",
        len(tasks),
    )
    return plan.mapInArrow(read_tasks, schema)


#: Spark's own Kafka connector, matched to the running pyspark (``--source kafka-connector``)
CONNECTOR_ARTIFACT = "org.apache.spark:spark-sql-kafka-0-10_2.13"
#: client properties Spark's Kafka connector refuses as ``kafka.*`` options (it sets them itself)
CONNECTOR_REFUSED = {
    "group.id",
    "auto.offset.reset",
    "key.deserializer",
    "value.deserializer",
    "enable.auto.commit",
    "interceptor.classes",
    "bootstrap.servers",
}


def connector_package() -> str:
    """``spark-sql-kafka-0-10`` coordinates for this pyspark's version."""
    import pyspark

    return f"{CONNECTOR_ARTIFACT}:{pyspark.__version__}"


def read_offsets_connector(
    spark: SparkSession,
    bootstrap_servers: str,
    client_config: str | None = None,
    topic: str = "__consumer_offsets",
    latest: bool = False,
) -> DataFrame:
    """Read ``__consumer_offsets`` through Spark's Kafka connector (``spark-sql-kafka-0-10``).

    The rows are :data:`RAW_SCHEMA` rows plus ``broker_id`` (null), decoded by the same
    :func:`audit.formats.segments.decode_offsets_rows`.

    Assign mode on every partition of ``topic``: the partitions come from one Metadata request naming only
    ``topic`` (:meth:`audit.sources.collector.OffsetCollector.fetch_metadata`, KIP-526).  The connector's
    default Admin-based offset fetching leaves internal topics out even in assign mode (``__consumer_offsets``
    reads as empty), so this sets ``spark.sql.streaming.kafka.useDeprecatedOffsetFetching=true`` on the
    session: its consumer-based fetching reads them.  ``startingOffsets``
    earliest, ``endingOffsets`` latest, ``kafka.isolation.level=read_committed`` (aborted TxnOffsetCommits and
    control batches dropped, as Kafka's readers do), and ``failOnDataLoss=false`` because a compacted topic
    and transaction markers leave offset gaps that the connector would otherwise report as lost data.  The
    properties of ``client_config`` go to the connector's consumers as ``kafka.*`` options, except those it
    sets itself (:data:`CONNECTOR_REFUSED`).  The connector's jar must be on the classpath
    (``spark.jars.packages`` / ``--packages`` :func:`connector_package`).

    Raises
    ------
    audit.sources.collector.CollectorError
        The cluster has no such topic.
    """
    import json

    from .client_config import parse_properties
    from .collector import CollectorError, open_collector

    with open_collector(client_config, bootstrap_servers=bootstrap_servers) as collector:
        state = collector.fetch_metadata([topic])
    parts = sorted(p for t, p in state if t == topic)
    if not parts:
        raise CollectorError(f"{topic} not found on {bootstrap_servers} (or the principal lacks DESCRIBE on it)")
    # the connector's default Admin-based offset fetching skips internal topics: __consumer_offsets reads as
    # empty (seen on 4.4.0 and 3.9.2 brokers with spark-sql-kafka 4.2.0); its consumer-based fetching does not
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("assign", json.dumps({topic: parts}))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "false")
    )
    if client_config:
        with open(client_config, encoding="utf-8") as fh:
            props = parse_properties(fh.read())
        for key, value in props.items():
            if key not in CONNECTOR_REFUSED:
                reader = reader.option(f"kafka.{key}", value)
    rows = reader.load().select(
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        (F.unix_micros("timestamp") / 1000).cast("long").alias("timestamp"),
        "key",
        "value",
    )
    raw = rows.mapInArrow(_decode_latest if latest else _decode, spark_schema(RAW_SCHEMA))
    return raw.withColumn("broker_id", F.lit(None).cast("int"))


@dataclass
class ClusterTables:
    epochs: DataFrame
    bounds: DataFrame
    epoch_end_offsets: DataFrame
    info: dict
    #: topic_id string, topic string (Metadata v10+): names KIP-848 assignments' topic ids
    topic_names: DataFrame | None = None


def cluster_tables(
    spark: SparkSession,
    commits: DataFrame,
    collect: Callable[..., Any],
    history: bool = False,
    share_topics: list[str] | None = None,
    share_requests: Callable[[dict], tuple[list, list]] | None = None,
) -> ClusterTables:
    """Ask the cluster what the judge needs for ``commits``.

    Share groups (KIP-932): ``share_topics`` (topic names the share groups' members subscribe to) are looked up
    with the commits' topics, then ``share_requests(topic_ids)`` (``topic_ids``: name -> ``Uuid.toString()`` of
    every topic looked up) gives the ``(epoch_requests, bounds_partitions)`` of the share-partition states, asked
    in a second round; its answers join the tables.

    ``collect(epoch_requests, bounds_partitions)`` returns a collector ``CollectionResult``
    (rows ``epoch_end_offsets`` and ``bounds``; see :mod:`audit.sources.collector`; a bounds row without
    ``local_log_start_offset`` gives null there).  The live
    source has no full epoch caches: ``epochs`` holds each partition's current leader epoch
    (start offset unknown) so UNKNOWN_LEADER_EPOCH can compare against it.  Only the latest
    commits' epochs are asked for unless ``history``.
    """
    judged = commits if history else commits.where("is_latest")
    reqs = [
        (r.topic, r.partition, r.committed_leader_epoch)
        for r in judged.where("committed_leader_epoch >= 0")
        .select("topic", "partition", "committed_leader_epoch")
        .distinct()
        .collect()
    ]
    parts = [(r.topic, r.partition) for r in commits.select("topic", "partition").distinct().collect()]
    result = collect(reqs, parts + [(t, 0) for t in sorted(set(share_topics or ()))])
    topic_ids = dict(getattr(result, "topic_ids", None) or {})
    bounds_list, eeo_list = list(result.bounds), list(result.epoch_end_offsets)
    problems = list(getattr(result, "problems", []))
    share_reqs: list = []
    if share_requests is not None:
        share_reqs = _share_round(collect, share_requests, topic_ids, bounds_list, eeo_list, problems)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    epochs_rows = [
        (b["topic"], b["partition"], b["leader_id"], b.get("leader_epoch"), None, True)
        for b in bounds_list
        if b.get("leader_epoch") is not None and b.get("leader_epoch") >= 0
    ]
    eeo_rows = [
        (e["topic"], e["partition"], e["requested_epoch"], e["leader_epoch"], e["end_offset"], e["answered_by_broker"])
        for e in eeo_list
    ]
    return ClusterTables(
        epochs=spark.createDataFrame(epochs_rows, EPOCHS_DDL),
        bounds=spark.createDataFrame(_bounds_rows(bounds_list, now), BOUNDS_DDL),
        epoch_end_offsets=spark.createDataFrame(eeo_rows, EEO_DDL),
        topic_names=spark.createDataFrame(
            sorted((v, k) for k, v in topic_ids.items()),
            "topic_id string, topic string",
        ),
        info={
            "epoch_requests": len(reqs) + len(share_reqs),
            "partitions": len(parts),
            "problems": [str(p) for p in problems][:100],
            "stats": dict(getattr(result, "stats", {}) or {}),
        },
    )


def _share_round(
    collect: Callable[..., Any],
    share_requests: Callable[[dict], tuple[list, list]],
    topic_ids: dict,
    bounds_list: list,
    eeo_list: list,
    problems: list,
) -> list:
    """Collect the epoch requests of the share-partition states (``share_requests(topic_ids)``).

    When there are any requests or partitions, their answers (a second ``collect``) are added to ``bounds_list``
    (partitions not there yet), ``eeo_list``, ``topic_ids`` and ``problems``.
    """
    share_reqs, share_parts = share_requests(topic_ids)
    if share_reqs or share_parts:
        more = collect(share_reqs, share_parts)
        known = {(b["topic"], b["partition"]) for b in bounds_list}
        bounds_list += [b for b in more.bounds if (b["topic"], b["partition"]) not in known]
        eeo_list += list(more.epoch_end_offsets)
        topic_ids.update(getattr(more, "topic_ids", None) or {})
        problems += list(getattr(more, "problems", []))
    return share_reqs


def _bounds_rows(bounds_list: list, now: datetime) -> list[tuple]:
    """Build the :data:`BOUNDS_DDL` rows of the collector's bounds (answered by the leader, captured ``now``)."""
    return [
        (
            b["topic"],
            b["partition"],
            b["log_start_offset"],
            b.get("local_log_start_offset"),
            b["log_end_offset"],
            b["high_watermark"],
            b["leader_id"],
            b["leader_id"],
            "OffsetsForLeaderEpoch/ListOffsets from the leader",
            now,
            None,
            False,
            0,
            None,
        )
        for b in bounds_list
    ]


def live_collect(
    bootstrap_servers: str, client_config: str | None = None, max_concurrency: int | None = None
) -> Callable[..., Any]:
    """Build a ``collect`` for :func:`cluster_tables` backed by a real :class:`OffsetCollector`.

    ``max_concurrency``: requests in flight at once, the collector's default when None.
    """

    def collect(reqs, parts):
        from .collector import open_collector

        overrides = {"max_concurrency": max_concurrency} if max_concurrency else {}
        with open_collector(client_config, bootstrap_servers=bootstrap_servers, **overrides) as collector:
            return collector.collect(reqs, bounds_partitions=parts)

    return collect


def read_share_state_topic(
    spark: SparkSession,
    bootstrap_servers: str,
    client_config: str | None = None,
    consumer_factory: Callable[..., Any] | None = None,
) -> DataFrame | None:
    """Read ``__share_group_state`` of a live cluster (KIP-932 share groups), read-only like ``__consumer_offsets``.

    The rows are :data:`audit.formats.share_state.SHARE_RAW_SCHEMA` rows: each partition's
    ``[log start, read_committed end)`` captured here (ListOffsets), read by Fetch requests to the leaders in at
    most the session's default parallelism of tasks and decoded there.  None when the cluster has no such topic
    (before Kafka 4.0, or no share group ever initialised).

    Raises
    ------
    audit.sources.kafka_datasource.KafkaOffsetsTopicError
        As the ``__consumer_offsets`` read does.
    """
    import pyarrow as pa

    from ..formats.share_state import SHARE_RAW_SCHEMA, SHARE_STATE_TOPIC, decode_share_state_rows
    from .kafka_datasource import KafkaOffsetsTopicError, OffsetsTopicPartition, OffsetsTopicTask, reader_from_options

    options = {
        "bootstrap.servers": bootstrap_servers,
        "tasks": str(default_parallelism(spark)),
        "topic": SHARE_STATE_TOPIC,
    }
    if client_config:
        options["client.properties"] = client_config
    reader = reader_from_options(options, consumer_factory)
    try:
        tasks = [[(r.partition, r.start_offset, r.end_offset) for r in t.ranges] for t in reader.partitions()]
    except KafkaOffsetsTopicError as exc:
        if "not found" in str(exc) or "UnknownTopicOrPartition" in str(exc):
            return None
        raise
    schema = spark_schema(SHARE_RAW_SCHEMA)
    tasks = [t for t in tasks if any(e > s for _, s, e in t)]
    if not tasks:
        return spark.createDataFrame([], schema)

    def read_tasks(batches):
        from audit.formats.fetched import RECORDS_SCHEMA

        for batch in batches:
            for ranges in batch.column(0).to_pylist():
                task = OffsetsTopicTask([OffsetsTopicPartition(r["p"], r["s"], r["e"]) for r in ranges])
                rows: list = []
                for item in reader.read(task):
                    if isinstance(item, tuple):  # the consumer engine's records
                        rows.append(item)
                        continue
                    yield decode_share_state_rows(item)
                if rows:
                    cols = [pa.array(c, f.type) for c, f in zip(zip(*rows), RECORDS_SCHEMA)]
                    yield decode_share_state_rows(pa.RecordBatch.from_arrays(cols, schema=RECORDS_SCHEMA))

    plan = distribute(
        spark,
        [([{"p": p, "s": s, "e": e} for p, s, e in t],) for t in tasks],
        "ranges array<struct<p:int,s:bigint,e:bigint>>",
        len(tasks),
    )
    return plan.mapInArrow(read_tasks, schema)
