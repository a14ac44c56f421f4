"""Share groups (KIP-932): their share-partition states judged against the partitions' leader-epoch history.

A share group commits no offsets: the share coordinator keeps each share-partition's state (start offset, the
state batches of acknowledged, archived and released records) in ``__share_group_state``
(:mod:`audit.formats.share_state`).  The rules are SQL (``sql/share_states.sql`` replays the records per
share-partition as ``ShareCoordinatorShard.replay`` does, ``sql/share_context.sql`` adds the OffsetsForLeaderEpoch
answer for each state's leader epoch and counts its batches, ``sql/finding_share_*.sql`` are the rules,
``sql/share_partitions.sql`` the table); this module only registers their views.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .judge import TIMELINE_TYPE, project_findings
from .queries import epoch_end_offsets_sql, load_sql
from .spark import checkpoint_on_first_use


__all__ = [
    "SHARE_RECORD_COLUMNS",
    "SHARE_RULES",
    "judge_shares",
    "share_records",
]

#: finding -> SQL file of the share rules (their findings carry ``group_type = 'share'``)
SHARE_RULES = {
    "LOG_TRUNCATION": "finding_share_log_truncation",
    "OFFSET_OUT_OF_RANGE": "finding_share_offset_out_of_range",
}
SHARE_RECORD_COLUMNS = (
    "group_id",
    "topic_id",
    "partition",
    "source_partition",
    "offset",
    "timestamp",
    "record_type",
    "is_tombstone",
    "state_epoch",
    "leader_epoch",
    "start_offset",
    "delivery_complete_count",
    "state_batches",
)


def share_records(share_raw: DataFrame) -> DataFrame:
    """Return the decoded records of ``share_raw`` that the share coordinator would load.

    ``share_raw`` holds :data:`audit.formats.share_state.SHARE_RAW_SCHEMA` rows; the records kept are
    ``kind = 'record'`` with no ``decode_error``, in the columns :data:`SHARE_RECORD_COLUMNS`.
    """
    return share_raw.where((F.col("kind") == "record") & F.col("decode_error").isNull()).select(*SHARE_RECORD_COLUMNS)


def judge_shares(
    spark: SparkSession,
    share_raw: DataFrame,
    epochs: DataFrame,
    bounds: DataFrame,
    topic_names: DataFrame | None,
    epoch_end_offsets: DataFrame | None = None,
) -> tuple[DataFrame, DataFrame]:
    """Judge the share groups in ``share_raw``: return ``(findings, share_partitions)``.

    ``epochs``, ``bounds``: the judge's views of those names (:mod:`audit.judge`); ``topic_names`` (topic_id
    string, topic string) names the states' topic ids: a state whose topic id it does not hold is not judged.
    ``epoch_end_offsets``: OffsetsForLeaderEpoch answers (topic, partition, requested_epoch, leader_epoch,
    end_offset, answered_by_broker) when a live cluster gave them; None: computed from ``epochs`` by
    ``sql/epoch_end_offsets.sql``.
    ``findings``: :data:`audit.judge.FINDING_COLUMNS` rows of ``sql/finding_share_log_truncation.sql`` and
    ``sql/finding_share_offset_out_of_range.sql`` (``committed_offset`` = the share-partition start offset,
    ``committed_leader_epoch`` = the leader epoch the state was written under, ``commit_timestamp`` = when).
    ``share_partitions``: ``sql/share_partitions.sql`` (columns: ``audit.tables.TABLES['share_partitions']``).
    Registers the temp views ``share_records``, ``share_topic_names``, ``share_states``, ``share_epochs``,
    ``share_bounds``, ``share_epoch_requests``, ``share_epoch_end_offsets``, ``share_context`` and
    ``share_findings`` (names of their own: the consumer-group judge may run beside it).
    """
    share_records(share_raw).createOrReplaceTempView("share_records")
    if topic_names is None:
        topic_names = spark.createDataFrame([], "topic_id string, topic string")
    topic_names.select("topic_id", "topic").where(
        "topic_id IS NOT NULL AND topic IS NOT NULL"
    ).distinct().createOrReplaceTempView("share_topic_names")
    states = checkpoint_on_first_use(spark.sql(load_sql("share_states")))
    states.createOrReplaceTempView("share_states")
    # columns only some sources give (a live cluster has no metadata log, no replica files)
    for name, type_ in (
        ("metadata_leader_epoch", "int"),
        ("epoch_timeline", TIMELINE_TYPE),
        ("caches_disagree", "boolean"),
        ("unclean_elections", "int"),
        ("authority", "string"),
    ):
        if name not in bounds.columns:
            bounds = bounds.withColumn(name, F.lit(None).cast(type_))
    epochs.createOrReplaceTempView("share_epochs")
    bounds.createOrReplaceTempView("share_bounds")
    states.where("judged AND topic IS NOT NULL").selectExpr(
        "topic", "partition", "written_leader_epoch AS committed_leader_epoch"
    ).createOrReplaceTempView("share_epoch_requests")
    if epoch_end_offsets is None:
        epoch_end_offsets = spark.sql(epoch_end_offsets_sql("share_epoch_requests", "share_epochs", "share_bounds"))
    epoch_end_offsets.createOrReplaceTempView("share_epoch_end_offsets")
    ctx = checkpoint_on_first_use(spark.sql(load_sql("share_context")))
    ctx.createOrReplaceTempView("share_context")
    parts = [project_findings(spark.sql(load_sql(sql)), ("records_in_log",)) for sql in SHARE_RULES.values()]
    full = checkpoint_on_first_use(parts[0].union(parts[1]))
    full.createOrReplaceTempView("share_findings")
    return full.drop("records_in_log"), spark.sql(load_sql("share_partitions"))
