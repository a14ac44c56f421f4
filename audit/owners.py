"""Whose consumer is it: partition owners and group state from classic groups' GroupMetadataValue records.

``__consumer_offsets`` holds, next to the offset commits, one GroupMetadataValue per completed generation of
every classic group (``GroupMetadataValue.json``): its protocol type and assignor, and per member the
``member_id``, ``group.instance.id``, ``client.id``, the host the coordinator saw and the assignment
(``ConsumerProtocolAssignment.json``), decoded by :func:`audit.formats.offsets.decode_group_metadata_value`.
The rules are ``sql/group_state.sql`` and ``sql/partition_owners.sql``; this module only feeds them.

KIP-848 consumer groups (``group.protocol=consumer``) write per member a ``ConsumerGroupMemberMetadataValue``
(client.id, host) and a ``ConsumerGroupCurrentMemberAssignmentValue`` (partitions by topic id), named through
the KRaft metadata log's topic ids when it is among the inputs.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .queries import load_sql
from .spark import checkpoint_on_first_use


__all__ = [
    "GROUP_RECORD_TYPES",
    "OWNER_COLUMNS",
    "OWNER_TYPES",
    "group_records",
    "group_tables",
    "subscribed_topics",
    "with_owners",
]

#: classic GroupMetadata (2), KIP-848 ConsumerGroupMetadata (3), ConsumerGroupMemberMetadata (5),
#: ConsumerGroupCurrentMemberAssignment (8), KIP-932 ShareGroupMemberMetadata (10), ShareGroupMetadata (11) and
#: ShareGroupCurrentMemberAssignment (14), KIP-1071 StreamsGroupMetadata (17), StreamsGroupMemberMetadata (19),
#: StreamsGroupCurrentMemberAssignment (22) and StreamsGroupTopology (23)
GROUP_RECORD_TYPES = (2, 3, 5, 8, 10, 11, 14, 17, 19, 22, 23)
#: columns :func:`with_owners` adds, in order, with their types
OWNER_TYPES = {
    "group_type": "string",
    "group_state": "string",
    "group_protocol_type": "string",
    "group_protocol": "string",
    "owner_member_id": "string",
    "owner_group_instance_id": "string",
    "owner_client_id": "string",
    "owner_client_host": "string",
    "owner_process_id": "string",
    "owner_generation": "int",
    "owner_assigned_at": "timestamp",
}
OWNER_COLUMNS = list(OWNER_TYPES)


def group_records(records: DataFrame) -> DataFrame:
    """Return the GroupMetadataValue rows of ``records`` the group coordinator would load.

    ``records`` are RAW_SCHEMA ``kind='record'`` rows with ``txn_state``
    (:func:`audit.commits.with_transaction_state`).  The rows kept are decoded (a member assignment that did not
    decode, ``malformed_assignment``, leaves the record's other members; a record with too many to hold,
    ``owners_over_limit``, keeps its state) and not in an aborted or pending transaction.  Columns: group_id,
    source_partition, offset, timestamp (ms), is_tombstone, group_generation, group_protocol_type, group_protocol,
    group_members, group_owners.
    """
    return records.where(
        F.col("record_type").isin(*GROUP_RECORD_TYPES)
        & F.col("txn_state").isin("none", "committed")
        & (F.col("decode_error").isNull() | F.col("decode_error").isin("malformed_assignment", "owners_over_limit"))
    ).select(
        "record_type",
        "group_id",
        "member_id",
        "source_partition",
        "offset",
        "timestamp",
        "is_tombstone",
        "group_generation",
        "group_protocol_type",
        "group_protocol",
        "group_members",
        "group_owners",
    )


def group_tables(
    spark: SparkSession, records: DataFrame, topic_names: DataFrame | None = None
) -> tuple[DataFrame, DataFrame]:
    """Build ``(group_state, partition_owners)`` from ``records`` (see :func:`group_records`).

    They are the outputs of ``sql/group_state.sql`` (one row per group) and ``sql/partition_owners.sql`` (one row
    per assigned group-partition).  ``topic_names`` (topic_id string, topic string; e.g. from
    ``leader_timeline``) names the topic ids of KIP-848 assignments; without it those give no owner.  Registers
    the temp views ``group_records`` (checkpointed by the first job that reads it: no job of its own) and
    ``topic_names``.
    """
    # both queries read the view several times (their CTEs are inlined): the group records, a small part of
    # ``records``, are computed once
    checkpoint_on_first_use(group_records(records)).createOrReplaceTempView("group_records")
    if topic_names is None:
        topic_names = spark.createDataFrame([], "topic_id string, topic string")
    topic_names.select("topic_id", "topic").where("topic IS NOT NULL").distinct().createOrReplaceTempView("topic_names")
    return spark.sql(load_sql("group_state")), spark.sql(load_sql("partition_owners"))


def with_owners(df: DataFrame, group_state: DataFrame, owners: DataFrame) -> DataFrame:
    """Append :data:`OWNER_COLUMNS` to ``df`` (keyed by group_id, topic, partition).

    The columns are the group's type (Kafka's GroupType: classic, consumer, share, streams), state, protocol type
    and assignor, and the partition's last owner (null for a group with no GroupMetadataValue: standalone
    consumers that only commit, KIP-848 consumer groups).
    """
    gs = group_state.select("group_id", "group_type", "group_state", "group_protocol_type", "group_protocol")
    ow = owners.select("group_id", "topic", "partition", *[c for c in OWNER_COLUMNS if c.startswith("owner_")])
    out = df.join(gs, "group_id", "left").join(ow, ["group_id", "topic", "partition"], "left")
    # SQL expressions: one py4j call per column instead of three or four
    return out.selectExpr(
        *[f"`{c}`" for c in df.columns], *[f"CAST(`{c}` AS {OWNER_TYPES[c]}) AS `{c}`" for c in OWNER_COLUMNS]
    )


def subscribed_topics(
    records: DataFrame,
    groups: str | None = None,
    topics: str | None = None,
    exclude_groups: str | None = None,
    exclude_topics: str | None = None,
) -> list[str]:
    """Return the topic names share groups' members subscribe to.

    They come from ShareGroupMemberMetadataValue (record type 10) in ``records`` (RAW_SCHEMA ``kind='record'``
    rows); on a live cluster they name the topic ids of ``__share_group_state``.  ``groups``/``topics``,
    ``exclude_groups``/``exclude_topics``: the audit's ``--groups``/``--topics`` and
    ``--exclude-groups``/``--exclude-topics`` regular expressions (whole names), so that no topic outside the
    scope is looked up.  A distinct collect: one row per topic.
    """
    rows = records.where((F.col("record_type") == 10) & F.col("group_owners").isNotNull())
    if groups:
        rows = rows.where(F.col("group_id").rlike(f"^(?:{groups})$"))
    if exclude_groups:
        rows = rows.where(~F.col("group_id").rlike(f"^(?:{exclude_groups})$"))
    names = rows.select(F.explode("group_owners.topic").alias("topic")).where("topic IS NOT NULL")
    if topics:
        names = names.where(F.col("topic").rlike(f"^(?:{topics})$"))
    if exclude_topics:
        names = names.where(~F.col("topic").rlike(f"^(?:{exclude_topics})$"))
    return sorted(r.topic for r in names.distinct().collect())
