"""Decoded ``__consumer_offsets`` records -> live offset commits (the ``commits`` table).

Applies what a ``read_committed`` reader and the group coordinator's loader
(``GroupMetadataManager.loadGroupsAndOffsets`` / ``GroupCoordinatorShard`` replay) apply:

* transactional offset commits count only when the producer's next transaction marker in the
  same partition is COMMIT; ABORT drops them, no marker yet means still pending (not live);
* a tombstone for an offset key deletes every earlier commit of that key (deleting a group
  tombstones each of its offsets); a group metadata tombstone alone deletes no commit: the loader
  keeps the offsets, and a classic group converted to a KIP-848 consumer group leaves exactly that;
* records that failed to decode are not commits (the pipeline's summary counts them).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window


__all__ = [
    "KEY",
    "live_commits",
    "with_transaction_state",
]

KEY = ["group_id", "topic", "partition"]


def with_transaction_state(raw: DataFrame, all_rows: bool = False) -> DataFrame:
    """Add ``txn_state`` string to the ``kind='record'`` rows of :data:`RAW_SCHEMA` input.

    ``none`` (not transactional), ``committed``, ``aborted`` or ``pending`` (no marker yet),
    decided by the first control record of the same producer after the record in the same
    ``__consumer_offsets`` partition (KIP-98 markers: control_type 0 ABORT, 1 COMMIT).
    Returns the record rows only, or with ``all_rows`` every input row (``txn_state`` null
    for the other kinds: control, issue, count).
    """
    recs = raw.where(F.col("kind") == "record")
    markers = raw.where(F.col("kind") == "control").select(
        F.col("source_partition").alias("m_sp"),
        F.col("producer_id").alias("m_pid"),
        F.col("offset").alias("m_offset"),
        F.col("control_type").alias("m_type"),
    )
    txn = recs.where(F.col("is_transactional")).select("source_partition", "producer_id", "offset")
    outcome = (
        txn.join(
            markers,
            (txn.source_partition == markers.m_sp)
            & (txn.producer_id == markers.m_pid)
            & (markers.m_offset > txn["offset"]),
            "left",
        )
        .groupBy("source_partition", "offset")
        .agg(F.min_by("m_type", "m_offset").alias("txn_outcome"))
    )
    # only transactional records need the marker join; the rest pass straight through
    txn_recs = recs.where(F.col("is_transactional")).join(outcome, ["source_partition", "offset"], "left")
    plain = recs.where(~F.col("is_transactional")).withColumn("txn_outcome", F.lit(None).cast("short"))
    recs = plain.unionByName(txn_recs)
    if all_rows:
        recs = recs.unionByName(
            raw.where(F.col("kind") != "record").withColumn("txn_outcome", F.lit(None).cast("short"))
        )
    return recs.withColumn(
        "txn_state",
        F.when(F.col("kind") != "record", F.lit(None).cast("string"))
        .when(~F.col("is_transactional"), F.lit("none"))
        .when(F.col("txn_outcome") == 1, F.lit("committed"))
        .when(F.col("txn_outcome") == 0, F.lit("aborted"))
        .otherwise(F.lit("pending")),
    ).drop("txn_outcome")


def _as_commits(df: DataFrame) -> DataFrame:
    return df.select(
        *KEY,
        "committed_offset",
        F.col("leader_epoch").alias("committed_leader_epoch"),
        "metadata",
        F.timestamp_millis("commit_timestamp").alias("commit_timestamp"),
        "value_version",
        "topic_id",
        "source_partition",
        F.col("offset").alias("source_offset"),
        "is_latest",
        "broker_id",
        F.col("live_count").cast("long").alias("live_count"),
    )


def live_commits(records: DataFrame, latest_only: bool = False) -> DataFrame:
    """Live offset commits from :func:`with_transaction_state` output.

    Returns the ``commits`` table: group_id string, topic string, partition int,
    committed_offset long, committed_leader_epoch int, metadata string,
    commit_timestamp timestamp, value_version short, topic_id string (the v4 value's tagged ``topicId``, Kafka's
    ``Uuid.toString()`` form, null when it has none), source_partition int, source_offset long,
    is_latest boolean (the group-partition's newest live commit, what a restarting consumer
    resumes from), broker_id int (the replica it was read from), live_count long (summing it
    over all rows gives the number of live commits).

    ``latest_only`` (``--mode latest``): keep per group-partition only the rows the latest-mode
    rules read — the latest live commit (carrying the key's ``live_count``), its predecessor,
    and the earlier commit with the highest (leader epoch, offset).  Input rows may be
    per-segment summaries (:mod:`audit.formats.latest`): a row's ``live_count`` is the number
    of live commits it stands for.

    One shuffle: rows are distributed by ``group_id``, which clusters every per-key window
    (group_id, topic, partition).
    """
    ok = records.where(
        F.col("txn_state").isin("none", "committed") & F.col("decode_error").isNull() & F.col("record_type").isin(0, 1)
    )
    order = F.struct("source_partition", "offset")
    by_key = Window.partitionBy(*KEY)
    # A GroupMetadata tombstone alone deletes no commit: deleting a group (deleteGroups, expiry) also
    # tombstones each of its offsets, and converting a classic group to a KIP-848 consumer group writes
    # the group tombstone while its offsets stay valid (GroupMetadataManager.convertToConsumerGroup).
    # The coordinator loading the log does the same: offsets outlive a group tombstone.
    live = (
        ok.repartition("group_id")
        .where(F.col("record_type").isin(0, 1))
        .withColumn("key_deleted_at", F.max(F.when(F.col("is_tombstone"), order)).over(by_key))
        .where(~F.col("is_tombstone") & (F.col("key_deleted_at").isNull() | (order > F.col("key_deleted_at"))))
    )
    if not latest_only:
        commits = live.withColumn("is_latest", order == F.max(order).over(by_key)).withColumn("live_count", F.lit(1))
        return _as_commits(commits)
    newest = Window.partitionBy(*KEY).orderBy(order.desc())
    live = live.withColumn("rn", F.row_number().over(newest)).withColumn("n_live", F.sum("live_count").over(by_key))
    highest_epoch = Window.partitionBy(*KEY).orderBy(
        (F.col("rn") == 1).asc(), F.col("leader_epoch").desc(), order.desc()
    )
    live = live.withColumn("ref_rn", F.row_number().over(highest_epoch))
    keep = live.where((F.col("rn") <= 2) | ((F.col("ref_rn") == 1) & (F.col("rn") > 1)))
    return _as_commits(
        keep.withColumn("is_latest", F.col("rn") == 1).withColumn(
            "live_count", F.when(F.col("rn") == 1, F.col("n_live")).otherwise(F.lit(0))
        )
    )
