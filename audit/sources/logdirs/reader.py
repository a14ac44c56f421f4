"""The reading entry: :func:`read_log_dirs` turns broker log dirs into the tables the judge reads.

Steps: the replicas table and the small files (:mod:`.small_files`) beside the KRaft metadata log's replay
(:mod:`.kraft_metadata`); the replicas of stale topic incarnations left out; the bounds from each partition's
authoritative replica (:mod:`.replicas`); then the chosen replicas' ``__consumer_offsets`` and
``__share_group_state`` segments decoded with ``mapInArrow`` (:mod:`.decoders`) and the read issues gathered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from ...spark import broadcast_unless_small, checkpoint_on_first_use, compact, in_parallel, small_tables
from .decoders import decode_offsets_files, decode_offsets_latest, decode_share_state_files, decoder_issues
from .files import binary_files, spark_schema
from .inventory import EPOCH_CHECKPOINT, METADATA_TOPIC, OFFSETS_TOPIC, SHARE_STATE_TOPIC, Inventory, discover
from .kraft_metadata import MetadataState, metadata_state, remote_tier
from .replicas import (
    REPLICA_SCHEMA,
    chosen_segments,
    offsets_segments,
    partition_bounds,
    replica_authority,
    replica_rows,
    replicas_table,
    topic_id_mismatch_rows,
    topic_id_mismatches,
)
from .recovery import bad_row
from .small_files import SmallFileTables, log_end_offsets, read_small_file_tables


@dataclass
class LogDirTables:
    """DataFrames produced from log dirs (see :func:`read_log_dirs`)."""

    raw_offsets: DataFrame
    replicas: DataFrame
    epochs: DataFrame
    bounds: DataFrame
    metadata_partitions: DataFrame
    read_issues: DataFrame
    inventory: Inventory
    offsets_replicas: dict[int, dict]
    metadata_source: str | None
    epoch_end_offsets: DataFrame | None = None
    leader_timeline: DataFrame | None = None
    broker_timeline: DataFrame | None = None
    topic_id_mismatches: list[dict] = field(default_factory=list)
    #: ``__share_group_state`` rows (:data:`audit.formats.share_state.SHARE_RAW_SCHEMA`) of the chosen replica of each
    #: of its partitions, materialised; None when the log dirs hold none
    share_raw: DataFrame | None = None
    #: rows of ``raw_offsets`` that :func:`audit.sources.logdirs.recovery.recover_from_replicas` fills from another
    #: replica (skipped batches, undecodable records), counted while it was materialised; None when not counted
    bad_rows: int | None = None


@dataclass
class _PartitionTables:
    """The partition-state tables of a read (built with small-table settings)."""

    small: SmallFileTables
    replicas: DataFrame
    rep_cache: DataFrame
    metadata: MetadataState
    stale_replicas: list[dict]
    remote_issues: DataFrame | None
    remote_uris: list[str]
    bounds: DataFrame
    timeline: tuple[DataFrame, DataFrame] | None
    epochs: DataFrame


def read_log_dirs(
    spark: SparkSession, roots: list[str], reduce_latest: bool = False, inventory: Inventory | None = None
) -> LogDirTables:
    """Read broker log dirs into DataFrames.

    Returns :class:`LogDirTables` with

    - ``raw_offsets``: :data:`audit.formats.segments.RAW_SCHEMA` rows of the chosen replica of
      every ``__consumer_offsets`` partition, plus ``broker_id int`` (``reduce_latest``: only
      the rows ``--mode latest`` reads, summarised per segment by :mod:`audit.formats.latest`), materialised;
    - ``replicas``: broker_id, topic, partition, log_start_offset, log_end_offset (long, offsets),
      high_watermark, max_epoch, epoch_checkpoint_mtime (ms), segment_count, damage, damage_file,
      damage_detail (strings, null when intact: :func:`replica_damage`) per partition replica;
    - ``epochs``: topic, partition, broker_id, leader_epoch int, start_offset long, is_leader boolean;
    - ``bounds``: topic, partition, log_start_offset, log_end_offset, high_watermark (long),
      leader_id int, answered_by_broker int, authority string, history_captured_at timestamp,
      replica_count int, caches_disagree boolean, unclean_elections int, last_unclean_election timestamp,
      metadata_leader_epoch int (the partition's leader epoch per the KRaft metadata log, null without it),
      epoch_timeline array<struct<epoch int, started_at timestamp, leader int, unclean boolean>> (when each
      leader epoch began, its first leader, whether an unclean election began it; ditto);
    - ``metadata_partitions``: the KRaft metadata replay per partition (may be empty);
    - ``leader_timeline``: every partition state change in the KRaft metadata log (``sql/leader_timeline.sql``
      gives the columns), None without the metadata log;
    - ``broker_timeline``: every broker registration, fencing, unfencing, controlled shutdown and
      unregistration in it (``sql/broker_timeline.sql``), None without the metadata log;
    - ``read_issues``: file, position, reason, detail, records_affected of everything skipped, and one row
      per damaged replica (reason = its ``damage``, detail naming the replica the audit used instead).

    ``inventory``: :func:`discover`'s result for ``roots`` when the caller already listed them.
    Raises :class:`InputError` for unusable paths.
    """
    inv = inventory if inventory is not None else discover(spark, roots)
    # the partition-state tables (a few rows per replica) with small-table settings, whatever the commits' size
    with small_tables(spark, 3 * len(inv.replicas)):
        tables = _partition_tables(spark, inv)
        chosen, seg_uris, seg_sizes, share_uris = _choose_segments(inv, tables.bounds)
    raw = _offsets_raw(spark, seg_uris, seg_sizes, chosen, reduce_latest)
    share_raw = _share_raw(spark, share_uris)
    # materialised: the decode runs once (and query plans stay short); the epochs table beside it.  The rows
    # recovery fills are counted meanwhile (an observation: no job of its own)
    bad = Observation("recoverable")
    raw = raw.observe(bad, F.count_if(bad_row() & F.col("source_partition").isNotNull()).alias("n"))
    raw, epochs, share_raw = in_parallel(
        raw.localCheckpoint,
        lambda: checkpoint_on_first_use(tables.epochs),
        (share_raw.localCheckpoint if share_raw is not None else lambda: None),
    )
    raw = compact(raw)

    decoded = seg_uris + tables.metadata.uris + [u for u, _ in share_uris] + tables.remote_uris
    read_issues = _read_issues(spark, tables, decoded, share_raw)
    leader_timeline, broker_timeline = tables.timeline if tables.timeline else (None, None)
    return LogDirTables(
        raw,
        tables.replicas,
        epochs,
        tables.bounds,
        tables.metadata.metadata_partitions,
        read_issues,
        inv,
        chosen,
        tables.metadata.source,
        leader_timeline=leader_timeline,
        broker_timeline=broker_timeline,
        topic_id_mismatches=tables.stale_replicas,
        share_raw=share_raw,
        bad_rows=bad.get.get("n"),  # Spark Connect may give no metrics for a checkpoint: None, counted later
    )


def _partition_tables(spark: SparkSession, inv: Inventory) -> _PartitionTables:
    """Build the replicas, bounds and epochs tables, the KRaft metadata log's replay and the remote tier.

    The replicas and bounds are materialised; the replicas of another incarnation of their topic are left out
    of them.
    """
    rows = replica_rows(inv)
    replicas0 = compact(spark.createDataFrame(rows, REPLICA_SCHEMA))
    small = read_small_file_tables(spark, inv, replicas0, [row.tail_path for row in rows])

    # KRaft metadata log (if any replica of __cluster_metadata-0 is among the inputs): its replay needs only the
    # metadata replicas' log end offsets, so it runs beside the replicas table
    meta_reps = [r for r in inv.replicas if r.topic == METADATA_TOPIC and r.segments]
    meta_tails = {row.broker_id: (row.tail_path, row.last_segment_base) for row in rows if row.topic == METADATA_TOPIC}
    replicas, meta = in_parallel(
        lambda: replicas_table(replicas0, small),
        lambda: metadata_state(spark, meta_reps, log_end_offsets(small.small, meta_tails)),
    )
    replicas, rep_cache, stale_replicas = _drop_stale_replicas(replicas, small.rep_cache, meta.current_ids)

    # the timelines' queries are planned beside the bounds' (checkpointed by the job that chooses the segments)
    remote, remote_issues, remote_uris = remote_tier(spark, inv)
    bounds, timeline = in_parallel(
        lambda: checkpoint_on_first_use(
            partition_bounds(
                replica_authority(replicas, meta.metadata_partitions), rep_cache, meta.metadata_partitions, remote
            )
        ),
        meta.timeline or (lambda: None),
    )
    epochs = rep_cache.join(
        bounds.select("topic", "partition", F.col("answered_by_broker").alias("leader_b")),
        ["topic", "partition"],
        "left",
    ).select(
        "topic",
        "partition",
        "broker_id",
        "leader_epoch",
        "start_offset",
        F.coalesce(F.col("broker_id") == F.col("leader_b"), F.lit(False)).alias("is_leader"),
    )
    return _PartitionTables(
        small, replicas, rep_cache, meta, stale_replicas, remote_issues, remote_uris, bounds, timeline, epochs
    )


def _drop_stale_replicas(
    replicas: DataFrame, rep_cache: DataFrame, current_ids: DataFrame | None
) -> tuple[DataFrame, DataFrame, list[dict]]:
    """Drop from ``replicas`` and ``rep_cache`` the replicas of another incarnation of their topic.

    Also returns the topic id mismatches (:func:`audit.sources.logdirs.replicas.topic_id_mismatches`) for the
    summary.
    """
    # replicas of another incarnation of their topic are none of its replicas: out of epochs, bounds and
    # REPLICA_DIVERGENCE (kept in the summary)
    # (all of them, not only the ones the summary lists)
    mismatches = topic_id_mismatch_rows(replicas, current_ids)
    stale_replicas = topic_id_mismatches(replicas, current_ids)
    if any(s["stale"] for s in stale_replicas):
        stale_df = mismatches.where("stale").select("broker_id", "topic", "partition").localCheckpoint()
        replicas = replicas.join(stale_df, ["broker_id", "topic", "partition"], "left_anti")
        rep_cache = rep_cache.join(stale_df, ["broker_id", "topic", "partition"], "left_anti")
    return replicas, rep_cache, stale_replicas


def _choose_segments(
    inv: Inventory, bounds: DataFrame
) -> tuple[dict[int, dict], list[str], list[int], list[tuple[str, int]]]:
    """Choose the replica of every ``__consumer_offsets`` and ``__share_group_state`` partition and its segments.

    Returns the chosen replica of every ``__consumer_offsets`` partition (partition -> answered_by_broker,
    authority, replica_count), the URIs and sizes of its segments to decode, and the (uri, size) of the segments
    of the chosen replicas of ``__share_group_state``: one replica per partition (a few rows per partition).
    """
    chosen_rows = (
        bounds.where(F.col("topic").isin(OFFSETS_TOPIC, SHARE_STATE_TOPIC))
        .select("topic", "partition", "answered_by_broker", "authority", "replica_count")
        .collect()
    )
    chosen = {row["partition"]: row.asDict() for row in chosen_rows if row["topic"] == OFFSETS_TOPIC}
    share_uris = chosen_segments(
        inv,
        SHARE_STATE_TOPIC,
        {r["partition"]: r["answered_by_broker"] for r in chosen_rows if r["topic"] == SHARE_STATE_TOPIC},
    )
    seg_uris, seg_sizes = offsets_segments(inv, chosen)
    return chosen, seg_uris, seg_sizes, share_uris


def _offsets_raw(
    spark: SparkSession, seg_uris: list[str], seg_sizes: list[int], chosen: dict[int, dict], reduce_latest: bool
) -> DataFrame:
    """Decode the chosen ``__consumer_offsets`` segments (lazily): RAW_SCHEMA rows plus ``broker_id``."""
    from ...formats.segments import RAW_SCHEMA

    if not seg_uris:
        return spark.createDataFrame([], spark_schema(RAW_SCHEMA)).withColumn("broker_id", F.lit(None).cast("int"))
    decoder = decode_offsets_latest if reduce_latest else decode_offsets_files
    raw = binary_files(spark, seg_uris, seg_sizes).mapInArrow(decoder, spark_schema(RAW_SCHEMA))
    pmap = spark.createDataFrame(
        [(int(p), int(v["answered_by_broker"])) for p, v in chosen.items()], "source_partition int, broker_id int"
    )
    return raw.join(broadcast_unless_small(pmap), "source_partition", "left")


def _share_raw(spark: SparkSession, share_uris: list[tuple[str, int]]) -> DataFrame | None:
    """Decode the chosen ``__share_group_state`` segments (lazily); None when there is none."""
    if not share_uris:
        return None
    from ...formats.share_state import SHARE_RAW_SCHEMA

    return binary_files(spark, [u for u, _ in share_uris], [z for _, z in share_uris]).mapInArrow(
        decode_share_state_files, spark_schema(SHARE_RAW_SCHEMA)
    )


def _file_issues(rows: DataFrame) -> DataFrame:
    """Read-issue rows (file, position, reason, detail, records_affected) of :data:`SMALL_SCHEMA` issue rows."""
    return rows.select(
        F.col("path").alias("file"),
        F.col("issue_position").alias("position"),
        F.col("issue_reason").alias("reason"),
        F.col("issue_detail").alias("detail"),
        F.lit(0).alias("records_affected"),
    )


def _damage_issues(replicas: DataFrame, bounds: DataFrame) -> DataFrame:
    """Return one read-issue row per damaged replica (reason = its ``damage``).

    Its detail names the replica the audit used instead.
    """
    return (
        replicas.where(F.col("damage").isNotNull())
        .join(bounds.select("topic", "partition", "answered_by_broker"), ["topic", "partition"], "left")
        .select(
            F.col("damage_file").alias("file"),
            F.lit(None).cast("long").alias("position"),
            F.col("damage").alias("reason"),
            F.concat(
                F.col("damage_detail"),
                F.when(
                    F.col("answered_by_broker") != F.col("broker_id"),
                    F.concat(
                        F.lit("; the audit used broker "),
                        F.col("answered_by_broker").cast("string"),
                        F.lit("'s replica instead"),
                    ),
                ).otherwise(F.lit("; no intact replica, so this partition's findings rest on it")),
            ).alias("detail"),
            F.lit(0).alias("records_affected"),
        )
    )


def _read_issues(
    spark: SparkSession, tables: _PartitionTables, decoded: list[str], share_raw: DataFrame | None
) -> DataFrame:
    """Collect everything skipped as read-issue rows.

    Everything skipped: the small files' issues (but those of the files in ``decoded``, whose decoders report
    them), the bad leader-epoch cache lines, the damaged replicas, and the decoders' issues.
    """
    small = tables.small
    tail_issues = small.small.where((F.col("file_kind") != EPOCH_CHECKPOINT) & F.col("issue_reason").isNotNull())
    if decoded:  # the decoders report those files' issues themselves
        decoded_df = spark.createDataFrame([(u,) for u in decoded], "path string")
        tail_issues = tail_issues.join(broadcast_unless_small(decoded_df), "path", "left_anti")
    issues = [_file_issues(tail_issues), _file_issues(small.bad_cache_lines)]
    issues.append(_damage_issues(tables.replicas, tables.bounds))
    if tables.metadata.issues is not None:
        issues.append(tables.metadata.issues)
    if tables.remote_issues is not None:
        issues.append(tables.remote_issues)
    if share_raw is not None:
        issues.append(decoder_issues(share_raw, SHARE_STATE_TOPIC))
    read_issues = issues[0]
    for d in issues[1:]:
        read_issues = read_issues.unionByName(d)
    return read_issues
