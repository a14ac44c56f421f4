"""Read what the log dirs' internal topics say about every partition.

The KRaft metadata log (``__cluster_metadata``) is replayed into one row per partition (leaders, leader
epochs, unclean elections, the timelines, each topic's current id; ``PartitionRegistration.merge``), and the
remote tier of tiered storage is read from ``__remote_log_metadata`` (KIP-405).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ...spark import checkpoint_on_first_use, compact
from .decoders import decode_metadata_files, decode_remote_metadata_files, decoder_issues, metadata_schema
from .files import binary_files, spark_schema
from .inventory import REMOTE_LOG_METADATA_TOPIC, Inventory, Replica

#: :func:`remote_tier`'s columns (``sql/remote_tier.sql``)
REMOTE_TIER_DDL = (
    "topic_id string, topic string, partition int, remote_log_start_offset bigint, remote_log_end_offset bigint, "
    "remote_segments bigint"
)

METADATA_PARTITIONS_DDL = (
    "topic string, partition int, last_leader int, leader_epoch int, "
    "unclean_elections int, last_unclean_election timestamp, "
    "epoch_timeline array<struct<epoch:int, started_at:timestamp, leader:int, unclean:boolean>>, "
    "remote_storage_enable boolean"
)


def _remote_metadata_segments(inv: Inventory) -> list[tuple[str, int]]:
    """Return (uri, size) of the segments of one replica of each ``__remote_log_metadata`` partition.

    The replica is the one that goes furthest (highest last segment base offset, then most bytes; followers copy
    the leader's records).
    """
    best: dict[int, Replica] = {}
    for r in inv.replicas:
        if r.topic != REMOTE_LOG_METADATA_TOPIC or not r.segments:
            continue
        key = (r.segments[-1][0], sum(z for _b, _u, z in r.segments), -r.broker_id)
        cur = best.get(r.partition)
        if cur is None or key > (cur.segments[-1][0], sum(z for _b, _u, z in cur.segments), -cur.broker_id):
            best[r.partition] = r
    return [(uri, size) for _p, r in sorted(best.items()) for _b, uri, size in r.segments if size > 0]


def remote_tier(spark: SparkSession, inv: Inventory) -> tuple[DataFrame | None, DataFrame | None, list[str]]:
    """Read the remote tier per topic-partition (:data:`REMOTE_TIER_DDL`, ``sql/remote_tier.sql``) from the log dirs.

    The source is the log dirs' ``__remote_log_metadata`` (tiered storage's topic-based
    RemoteLogMetadataManager, KIP-405).  Lazy: decoded inside the job that materialises the bounds.

    Returns
    -------
    tuple
        The remote tier, the read issues of its records (file, position, reason, detail, records_affected) and
        the URIs decoded; ``(None, None, [])`` when the log dirs hold none of it.
    """
    segs = _remote_metadata_segments(inv)
    if not segs:
        return None, None, []
    from ...formats.remote_log_metadata import REMOTE_RAW_SCHEMA
    from ...queries import load_sql

    uris = [u for u, _ in segs]
    raw = binary_files(spark, uris, [z for _, z in segs]).mapInArrow(
        decode_remote_metadata_files, spark_schema(REMOTE_RAW_SCHEMA)
    )
    raw.createOrReplaceTempView("remote_log_metadata")
    return spark.sql(load_sql("remote_tier")), decoder_issues(raw, REMOTE_LOG_METADATA_TOPIC), uris


class MetadataState(NamedTuple):
    """What :func:`metadata_state` returns."""

    #: one row per partition (:data:`METADATA_PARTITIONS_DDL`), checkpointed
    metadata_partitions: DataFrame
    #: which replica was used (None: no metadata log)
    source: str | None
    #: read-issue rows of the metadata log, or None
    issues: DataFrame | None
    #: the URIs decoded
    uris: list[str]
    #: a function returning the leader timeline (``sql/leader_timeline.sql``) with the broker timeline
    #: (``sql/broker_timeline.sql``), or None
    timeline: Callable[[], tuple[DataFrame, DataFrame]] | None
    #: each topic name's current id (``sql/topic_ids.sql``), or None
    current_ids: DataFrame | None


def metadata_state(spark, meta_reps: list[Replica], ends: dict[int, int | None]) -> MetadataState:
    """Replay ``__cluster_metadata`` into one row per partition.

    Uses the replica of ``__cluster_metadata-0`` with the highest log end offset (ties: the
    lowest broker id, which is usually a dedicated controller).  Leader epochs follow
    ``PartitionRegistration.merge``: a PartitionRecord sets (leader, epoch); a
    PartitionChangeRecord whose ``leader`` is not -2 (NO_LEADER_CHANGE) sets the leader and
    bumps the epoch by one.  ``last_leader`` is the last leader >= 0 (after a clean shutdown
    the final state is leader -1).  ``unclean_elections`` counts records with
    ``leader_recovery_state = 1`` (RECOVERING).

    ``ends``: broker id -> log end offset of the ``__cluster_metadata-0`` replicas
    (:func:`audit.sources.logdirs.small_files.log_end_offsets`).

    Returns (partition state (checkpointed), which replica was used, issue rows or None, the URIs decoded, a
    function returning the leader timeline of ``sql/leader_timeline.sql`` with the broker timeline of
    ``sql/broker_timeline.sql``, or None, and each topic name's current id (``sql/topic_ids.sql``) or None).
    """
    if not meta_reps:
        return MetadataState(
            spark.createDataFrame([], METADATA_PARTITIONS_DDL).localCheckpoint(), None, None, [], None, None
        )
    best = sorted(meta_reps, key=lambda r: (-(ends.get(r.broker_id) or -1), r.broker_id))[0]
    uris = [u for _b, u, size in best.segments if size > 0]
    snap_end = None
    if best.snapshots:
        snap_end, snap_uri = best.snapshots[-1]
        uris = [snap_uri] + uris
    meta = binary_files(spark, uris).mapInArrow(decode_metadata_files, spark_schema(metadata_schema()))
    meta = meta.withColumn("is_snapshot", F.col("source_file").endswith(".checkpoint"))
    if snap_end is not None:
        meta = meta.where(F.col("is_snapshot") | (F.col("offset") >= snap_end))
    meta = meta.withColumn(
        "seq", F.when(F.col("is_snapshot"), F.col("offset") - F.lit(1 << 50)).otherwise(F.col("offset"))
    ).cache()
    meta = compact(meta)
    issues = meta.where(F.col("decode_error").isNotNull()).select(
        F.col("source_file").alias("file"),
        F.col("issue_position").alias("position"),
        F.coalesce("issue_reason", F.lit("metadata_record_undecodable")).alias("reason"),
        F.col("decode_error").alias("detail"),
        F.when(F.col("issue_reason").isNotNull(), F.lit(0)).otherwise(F.lit(1)).alias("records_affected"),
    )
    meta.createOrReplaceTempView("metadata_records")
    from ...queries import load_sql

    state = checkpoint_on_first_use(spark.sql(load_sql("metadata_replay")))

    current_ids = spark.sql(load_sql("topic_ids"))

    def timeline():
        return spark.sql(load_sql("leader_timeline")), spark.sql(load_sql("broker_timeline"))

    return MetadataState(state, f"broker {best.broker_id} {best.dir_uri}", issues, uris, timeline, current_ids)
