"""Choose replicas: the per-replica table, stale incarnations, each partition's authoritative replica and bounds.

Replica choice: the per-replica table (log start and end offsets, leader-epoch cache, damage), the replicas of
another topic incarnation (KIP-516 topic ids), the authoritative replica of every partition and the partition
bounds it gives, and the segments decoded from each partition's chosen replica.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...spark import checkpoint_on_first_use
from ..source import cache_disagreements
from .inventory import OFFSETS_TOPIC, Inventory, Replica
from .kraft_metadata import REMOTE_TIER_DDL
from .small_files import SmallFileTables


def replica_damage(replicas: DataFrame) -> DataFrame:
    """Flag partition replicas whose files contradict themselves, so an intact replica is preferred.

    Input columns: broker_id int, topic string, partition int, dir_uri string, tail_path string (the newest
    non-empty segment, null when the replica holds no record), tail_epoch int (the newest leader epoch its last
    batches carry, -1 for legacy message sets), epoch_checkpoint string (null when the file
    is missing), cache_issue string (a ``bad_checkpoint_*`` reason of that file), max_epoch int (null: no
    entry), log_end_offset long, high_watermark long (the broker's ``replication-offset-checkpoint``).
    Adds ``damage`` string (null when intact), ``damage_file`` and ``damage_detail`` string:

    - ``leader_epoch_cache_missing``: records with leader epochs (or another replica with a cache) but no
      ``leader-epoch-checkpoint`` (a broker creates the file with the log, ``LeaderEpochCheckpointFile``);
    - ``leader_epoch_cache_unreadable``: the file has a bad header or line (the broker could not load it);
    - ``leader_epoch_cache_empty``: the same, with an empty file (every appended v2 batch assigns its epoch,
      ``LeaderEpochFileCache.assign``);
    - ``log_end_below_high_watermark``: the segments end below the broker's checkpointed high watermark,
      which never exceeds its log end offset: records are missing (an emptied or cut segment), or the copy
      was taken while the broker ran.
    """
    from pyspark.sql.window import Window

    has_data = F.col("tail_path").isNotNull()
    others = F.max(F.col("max_epoch").isNotNull().cast("int")).over(Window.partitionBy("topic", "partition")) == 1
    # a cache is owed when the newest batches carry a leader epoch (v2), or another replica has one; legacy message
    # sets (magic 0/1, a log from before KIP-101) carry none and may have no cache at all
    owed = has_data & (F.coalesce(F.col("tail_epoch") >= 0, F.lit(False)) | others)
    where = F.concat(
        F.lit("broker "),
        F.col("broker_id").cast("string"),
        F.lit("'s replica of "),
        F.col("topic"),
        F.lit("-"),
        F.col("partition").cast("string"),
        F.lit(": "),
    )
    cases = [
        (
            owed & F.col("epoch_checkpoint").isNull(),
            "leader_epoch_cache_missing",
            F.concat(F.col("dir_uri"), F.lit("/leader-epoch-checkpoint")),
            F.concat(where, F.lit("holds records but no leader-epoch-checkpoint")),
        ),
        (
            has_data & F.col("cache_issue").isNotNull(),
            "leader_epoch_cache_unreadable",
            F.col("epoch_checkpoint"),
            F.concat(where, F.lit("its leader-epoch-checkpoint does not parse ("), F.col("cache_issue"), F.lit(")")),
        ),
        (
            owed & F.col("max_epoch").isNull(),
            "leader_epoch_cache_empty",
            F.col("epoch_checkpoint"),
            F.concat(where, F.lit("holds records with leader epochs but its leader-epoch-checkpoint is empty")),
        ),
        (
            F.col("log_end_offset") < F.col("high_watermark"),
            "log_end_below_high_watermark",
            F.coalesce("tail_path", "dir_uri"),
            F.concat(
                where,
                F.lit("its segments end at offset "),
                F.col("log_end_offset").cast("string"),
                F.lit(" below its checkpointed high watermark "),
                F.col("high_watermark").cast("string"),
                F.lit(" (records missing, or copied while the broker ran)"),
            ),
        ),
    ]
    damage, file, detail = F.lit(None).cast("string"), F.lit(None).cast("string"), F.lit(None).cast("string")
    for cond, reason, f, d in reversed(cases):
        damage = F.when(cond, F.lit(reason)).otherwise(damage)
        file = F.when(cond, f).otherwise(file)
        detail = F.when(cond, d).otherwise(detail)
    return replicas.withColumn("damage", damage).withColumn("damage_file", file).withColumn("damage_detail", detail)


REPLICA_SCHEMA = T.StructType(
    [
        T.StructField("broker_id", T.IntegerType()),
        T.StructField("log_dir", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("first_segment_base", T.LongType()),
        T.StructField("last_segment_base", T.LongType()),
        T.StructField("tail_path", T.StringType()),
        T.StructField("epoch_checkpoint", T.StringType()),
        T.StructField("epoch_checkpoint_mtime", T.LongType()),
        T.StructField("segment_count", T.IntegerType()),
        T.StructField("dir_uri", T.StringType()),
        T.StructField("partition_metadata", T.StringType()),
    ]
)


class ReplicaRow(NamedTuple):
    """One :data:`REPLICA_SCHEMA` row: a replica's files as the listing found them."""

    broker_id: int
    log_dir: str
    topic: str
    partition: int
    first_segment_base: int | None
    last_segment_base: int | None
    #: the newest non-empty segment (None when the replica holds no record)
    tail_path: str | None
    epoch_checkpoint: str | None
    epoch_checkpoint_mtime: int | None
    segment_count: int
    dir_uri: str
    partition_metadata: str | None


def replica_rows(inv: Inventory) -> list[ReplicaRow]:
    """One :class:`ReplicaRow` per replica of ``inv``, in its order."""
    rows = []
    for r in inv.replicas:
        bases = [base for base, _uri, _size in r.segments]
        nonempty = [uri for _base, uri, size in r.segments if size > 0]
        rows.append(
            ReplicaRow(
                broker_id=r.broker_id,
                log_dir=r.log_dir,
                topic=r.topic,
                partition=r.partition,
                first_segment_base=bases[0] if bases else None,
                last_segment_base=bases[-1] if bases else None,
                tail_path=nonempty[-1] if nonempty else None,
                epoch_checkpoint=r.epoch_checkpoint,
                epoch_checkpoint_mtime=r.epoch_checkpoint_mtime,
                segment_count=len(r.segments),
                dir_uri=r.dir_uri,
                partition_metadata=r.partition_metadata,
            )
        )
    return rows


def replicas_table(replicas0: DataFrame, small: SmallFileTables) -> DataFrame:
    """Build the replicas table of :func:`audit.sources.logdirs.read_log_dirs`, materialised.

    It is ``replicas0`` (:data:`REPLICA_SCHEMA`) with the offsets, epochs and topic ids its small files give,
    and its damage (:func:`replica_damage`).
    """
    with_tails = (
        replicas0.join(small.tails, replicas0.tail_path == small.tails.path, "left")
        .drop("path")
        .join(small.topic_ids, "partition_metadata", "left")
    )
    log_end_offset = F.greatest("last_segment_base", "tail_end")
    replicas = (
        with_tails.join(small.checkpoints, ["broker_id", "topic", "partition"], "left")
        .join(small.max_epoch, ["broker_id", "topic", "partition"], "left")
        .join(small.cache_issues, "epoch_checkpoint", "left")
        # Kafka's LogLoader: max(checkpoint, first segment) without tiered storage; the local log start
        # (UnifiedLog.localLogStartOffset) is that in every case. partition_bounds applies the tiered rule.
        .withColumn("log_start_offset", F.greatest("first_segment_base", "ckpt_log_start"))
        .withColumn("local_log_start_offset", F.col("log_start_offset"))
        .withColumn("log_end_offset", log_end_offset)
    )
    return checkpoint_on_first_use(
        replica_damage(replicas).select(
            "broker_id",
            "log_dir",
            "topic",
            "partition",
            "log_start_offset",
            "local_log_start_offset",
            "ckpt_log_start",
            "log_end_offset",
            "high_watermark",
            "max_epoch",
            "epoch_checkpoint_mtime",
            "segment_count",
            "damage",
            "damage_file",
            "damage_detail",
            "topic_id",
        )
    )


MAX_TOPIC_ID_MISMATCHES = 1000


def topic_id_mismatches(replicas: DataFrame, current_ids: DataFrame | None) -> list[dict]:
    """Return the first :data:`MAX_TOPIC_ID_MISMATCHES` rows of :func:`topic_id_mismatch_rows`, as dicts.

    They are for the summary.
    """
    rows = topic_id_mismatch_rows(replicas, current_ids)
    return [
        r.asDict() for r in rows.orderBy("topic", "partition", "broker_id").limit(MAX_TOPIC_ID_MISMATCHES).collect()
    ]


def topic_id_mismatch_rows(replicas: DataFrame, current_ids: DataFrame | None) -> DataFrame:
    """Find the replicas whose ``partition.metadata`` topic id is not their topic's (KIP-516 topic ids).

    Columns: broker_id, topic, partition, topic_id (the replica's), log_end_offset, current_topic_id (null: the
    topic is deleted), stale (bool), reason.

    With the KRaft metadata log (``current_ids``: ``sql/topic_ids.sql``), a replica is ``stale`` when its id is
    not the current one of a topic the log names: an earlier incarnation's replica (``stale_incarnation``), or
    a deleted topic's (``deleted_topic``).  A broker that comes back finds such a dir and renames it ``-stray``
    or deletes it (``LogManager``, KAFKA-14616); a backup taken while it was down still holds it.  Without the
    metadata log the current id is unknown: replicas of one partition that disagree on their id are returned
    with ``stale`` False (``conflicting_topic_ids``) and stay in the audit.  ``replicas`` needs broker_id, topic,
    partition, topic_id, log_end_offset.
    """
    from pyspark.sql.window import Window

    cols = ["broker_id", "topic", "partition", "topic_id", "log_end_offset"]
    if current_ids is not None:
        named = F.col("topic_ids").isNotNull()
        rows = (
            replicas.where(F.col("topic_id").isNotNull())
            .select(*cols)
            .join(current_ids, "topic", "left")
            .where(named & (F.col("current_topic_id").isNull() | (F.col("topic_id") != F.col("current_topic_id"))))
            .select(
                *cols,
                "current_topic_id",
                F.lit(True).alias("stale"),
                F.when(F.col("current_topic_id").isNull(), F.lit("deleted_topic"))
                .otherwise(F.lit("stale_incarnation"))
                .alias("reason"),
            )
        )
    else:
        w = Window.partitionBy("topic", "partition")
        rows = (
            replicas.where(F.col("topic_id").isNotNull())
            .select(*cols)
            .withColumn("ids", F.size(F.collect_set("topic_id").over(w)))
            .where(F.col("ids") > 1)
            .select(
                *cols,
                F.lit(None).cast("string").alias("current_topic_id"),
                F.lit(False).alias("stale"),
                F.lit("conflicting_topic_ids").alias("reason"),
            )
        )
    return rows


def replica_authority(replicas: DataFrame, state: DataFrame) -> DataFrame:
    """Rank each partition's replicas.

    Intact ones (:func:`replica_damage`) first; among them the metadata log's last leader, else the newest epoch,
    the highest end offset.
    """
    from pyspark.sql.window import Window

    r = replicas.join(state.select("topic", "partition", "last_leader"), ["topic", "partition"], "left")
    is_meta_leader = F.coalesce(F.col("broker_id") == F.col("last_leader"), F.lit(False))
    w = Window.partitionBy("topic", "partition").orderBy(
        F.col("damage").isNull().desc(),
        is_meta_leader.desc(),
        F.col("max_epoch").desc_nulls_last(),
        F.col("log_end_offset").desc_nulls_last(),
        F.col("broker_id").asc(),
    )
    return (
        r.withColumn("rank", F.row_number().over(w))
        .withColumn("replica_count", F.count(F.lit(1)).over(Window.partitionBy("topic", "partition")))
        .withColumn(
            "authority",
            F.concat(
                F.when(is_meta_leader, F.lit("leader per metadata log"))
                .when(F.col("replica_count") == 1, F.lit("only replica"))
                .otherwise(F.lit("replica with newest epoch and highest end offset")),
                F.when(
                    F.col("damage").isNotNull(),
                    F.concat(F.lit(", damaged ("), F.col("damage"), F.lit("): no intact replica")),
                ).otherwise(F.lit("")),
            ),
        )
    )


def partition_bounds(
    authority: DataFrame, rep_cache: DataFrame, state: DataFrame, remote_tier: DataFrame | None = None
) -> DataFrame:
    """One row per partition from its authoritative replica (``rank`` 1 of :func:`replica_authority`).

    ``log_start_offset`` is Kafka's log start: without tiered storage the highest of the replicas' (each the
    larger of its ``log-start-offset-checkpoint`` entry and its first segment's base offset, as ``LogLoader``
    loads it).  For a partition of a topic with ``remote.storage.enable=true`` (KRaft metadata log, or segments
    in ``__remote_log_metadata``: ``remote_tier``) the local segments say nothing about it (KIP-405: they are
    deleted once uploaded, while the log start stays where the remote tier starts): it is the highest of the
    checkpointed log start and the first remote segment still held (``RemoteLogManager`` moves the log start
    there on leadership and remote retention), else the earliest leader-epoch-cache entry (the cache of a
    tiered log is only truncated at the log start), else the local log start.  ``local_log_start_offset`` is
    the authoritative replica's first local offset (``UnifiedLog.localLogStartOffset``: the larger of the log
    start and its first segment's base offset).
    """
    if remote_tier is None:
        remote_tier = authority.sparkSession.createDataFrame([], REMOTE_TIER_DDL)
    lead = _with_log_starts(authority, rep_cache, state, remote_tier).where(F.col("rank") == 1)
    disagree = (
        cache_disagreements(rep_cache)
        .select("topic", "partition")
        .distinct()
        .withColumn("caches_disagree", F.lit(True))
    )
    return (
        lead.join(
            state.select(
                "topic",
                "partition",
                "unclean_elections",
                "last_unclean_election",
                F.col("leader_epoch").alias("metadata_leader_epoch"),
                "epoch_timeline",
            ),
            ["topic", "partition"],
            "left",
        )
        .join(disagree, ["topic", "partition"], "left")
        .select(*_bounds_columns())
    )


def _with_log_starts(authority: DataFrame, rep_cache: DataFrame, state: DataFrame, remote_tier: DataFrame):
    """Add to ``authority`` the remote tier and the log start offsets of each replica.

    That is: the remote tier of each replica's topic id, ``remote_storage_enabled``, and the partition's
    ``log_start_offset`` (tiered or not) and the replica's ``local_log_start_offset`` (:func:`partition_bounds`
    gives the rules).
    """
    from pyspark.sql.window import Window

    part = Window.partitionBy("topic", "partition")
    authority = authority.join(
        state.select("topic", "partition", F.col("remote_storage_enable").alias("tiered_by_config")),
        ["topic", "partition"],
        "left",
    )
    # the remote tier of the topic id the replica holds (a name created again keeps its old segments' records)
    rt = remote_tier.withColumnRenamed("topic_id", "remote_topic_id")
    authority = authority.join(rt, ["topic", "partition"], "left").withColumn(
        "remote_segments",
        F.when(F.col("topic_id").isNull() | (F.col("topic_id") == F.col("remote_topic_id")), F.col("remote_segments")),
    )
    tiered = F.coalesce(F.col("tiered_by_config"), F.lit(False)) | F.col("remote_segments").isNotNull()
    cache_start = rep_cache.groupBy("topic", "partition").agg(F.min("start_offset").alias("cache_start"))
    # A log start offset never decreases and followers only copy the leader's, so the highest any replica
    # recorded is a lower bound of the leader's: it covers a leader whose log-start-offset-checkpoint has
    # not caught up (a copy taken within the broker's checkpoint interval, 30 s after its start at first).
    untiered_start = F.max("log_start_offset").over(part)
    tiered_start = F.coalesce(
        F.greatest(F.max("ckpt_log_start").over(part), F.col("remote_log_start_offset")),
        F.col("cache_start"),
        untiered_start,
    )
    return (
        authority.join(cache_start, ["topic", "partition"], "left")
        .withColumn("remote_storage_enabled", tiered)
        .withColumn("log_start_offset", F.when(tiered, tiered_start).otherwise(untiered_start))
        .withColumn("local_log_start_offset", F.greatest("local_log_start_offset", "log_start_offset"))
    )


def _bounds_columns() -> list:
    """Return the bounds table's columns, from the authoritative replica's row joined with the partition state."""
    return [
        "topic",
        "partition",
        "log_start_offset",
        "local_log_start_offset",
        "log_end_offset",
        F.coalesce("high_watermark", "log_end_offset").alias("high_watermark"),
        F.coalesce("last_leader", "broker_id").alias("leader_id"),
        F.col("broker_id").alias("answered_by_broker"),
        "authority",
        F.timestamp_millis("epoch_checkpoint_mtime").alias("history_captured_at"),
        "replica_count",
        F.coalesce("caches_disagree", F.lit(False)).alias("caches_disagree"),
        F.coalesce("unclean_elections", F.lit(0)).alias("unclean_elections"),
        "last_unclean_election",
        "metadata_leader_epoch",
        "epoch_timeline",
        "remote_storage_enabled",
        "remote_log_start_offset",
        "remote_log_end_offset",
        "remote_segments",
    ]


def chosen_segments(inv: Inventory, topic: str, chosen: dict[int, int]) -> list[tuple[str, int]]:
    """Return (uri, size) of the non-empty segments of ``topic``'s chosen replica per partition.

    ``chosen``: partition -> broker id, from the bounds' authority; a partition whose chosen replica is missing
    takes any replica with segments.
    """
    by_partition: dict[int, list[Replica]] = defaultdict(list)
    for r in inv.replicas:
        if r.topic == topic and r.segments:
            by_partition[r.partition].append(r)
    out: list[tuple[str, int]] = []
    for p, reps in sorted(by_partition.items()):
        rep = next((r for r in reps if r.broker_id == chosen.get(p)), reps[0])
        out.extend((uri, size) for _b, uri, size in rep.segments if size > 0)
    return out


def offsets_segments(inv: Inventory, chosen: dict[int, dict]) -> tuple[list[str], list[int]]:
    """Return (uris, sizes) of the non-empty ``__consumer_offsets`` segments to decode.

    They are those of the chosen replica of each partition (``chosen``: partition -> its bounds row's
    answered_by_broker, authority, replica_count), in partition order.  A partition with no bounds row (no epoch
    cache and no tail) still needs a replica: it takes any, added to ``chosen`` as the ``only replica``.
    """
    seg_uris, seg_sizes = [], []
    rep_index = {(r.broker_id, r.topic, r.partition): r for r in inv.replicas}
    for p, info in sorted(chosen.items()):
        rep = rep_index.get((info["answered_by_broker"], OFFSETS_TOPIC, p))
        if rep is None:
            continue
        for _base, uri, size in rep.segments:
            if size > 0:
                seg_uris.append(uri)
                seg_sizes.append(size)
    for rep in inv.replicas:
        if rep.topic == OFFSETS_TOPIC and rep.partition not in chosen and rep.segments:
            chosen[rep.partition] = {
                "partition": rep.partition,
                "answered_by_broker": rep.broker_id,
                "authority": "only replica",
                "replica_count": 1,
            }
            for _b, uri, size in rep.segments:
                if size > 0:
                    seg_uris.append(uri)
                    seg_sizes.append(size)
    return seg_uris, seg_sizes
