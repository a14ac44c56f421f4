"""The output tables' contract: every column, its Spark type, and whether (and when) it may be null.

Both sources (broker log dirs, a live cluster) write these tables under ``--output``; the report, the
expectation suite, the metrics, the console table and the history read them.  :func:`conform` gives a
table exactly these columns, in this order, with these types (a column a source does not produce is all
null: the live source has no leader-epoch caches, no KRaft metadata log, no replica files), so a reader sees
one schema whatever the mode.  A column marked nullable may be null in a real run (``null_when`` says when);
every reader must handle that.  ``tests/pipeline/test_null_shapes.py`` runs every output consumer over tables with
nulls wherever this contract allows them, and checks that real runs of both sources keep the non-null
columns non-null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


__all__ = [
    "FAIL_ON_CHOICES",
    "FINDING_COLUMNS",
    "FINDING_TYPES",
    "GROUP_STATUSES",
    "SEVERITIES",
    "SEVERITY_RANK",
    "TABLES",
    "TABLE_SUMMARY",
    "Column",
    "conform",
    "ddl",
    "failing_severities",
    "fails",
    "markdown",
    "struct",
]

#: The findings' severities, most severe first: every ranking, count and ``--fail-on`` gate derives from this.
SEVERITIES: tuple[str, ...] = ("critical", "error", "warning", "info")
#: severity -> rank, higher is more severe (critical 4 ... info 1)
SEVERITY_RANK: dict[str, int] = {s: len(SEVERITIES) - i for i, s in enumerate(SEVERITIES)}
#: The ``groups`` table's ``status`` values, worst first: every "worst group first" order derives from this.
GROUP_STATUSES: tuple[str, ...] = ("AT_RISK", "STALE", "WARN", "OK")
#: ``--fail-on`` choices: a severity (it and every more severe one fail the run) or ``never``
FAIL_ON_CHOICES: tuple[str, ...] = (*SEVERITIES[:-1], "never")


def failing_severities(fail_on: str) -> list[str]:
    """Return the severities that fail a run under ``--fail-on fail_on``, most severe first (``never``: none).

    Raises
    ------
    ValueError
        A value not in :data:`FAIL_ON_CHOICES`.
    """
    if fail_on not in FAIL_ON_CHOICES:
        raise ValueError(f"--fail-on takes one of {', '.join(FAIL_ON_CHOICES)}, not {fail_on!r}")
    return [] if fail_on == "never" else list(SEVERITIES[: SEVERITIES.index(fail_on) + 1])


def fails(fail_on: str, by_severity: Mapping[str, int]) -> bool:
    """Tell whether findings counted by severity fail the run under ``--fail-on fail_on``.

    The counts are ``summary.json``'s ``findings.by_severity``.
    """
    return any(by_severity.get(s, 0) for s in failing_severities(fail_on))


@dataclass(frozen=True)
class Column:
    name: str
    type: str  #: Spark SQL type (DDL)
    nullable: bool = True
    null_when: str = ""


def _c(name: str, type_: str, null_when: str | None = None) -> Column:
    """Declare a column; non-null unless ``null_when`` says when it is null."""
    return Column(name, type_, null_when is not None, null_when or "")


_OWNER = [
    _c(
        "group_type",
        "string",
        "the group wrote no group record (commits made by Admin or a standalone consumer, or the group's records "
        "were removed)",
    ),
    _c("group_state", "string", "the group's metadata record is gone (deleted group, or commits made by Admin only)"),
    _c("group_protocol_type", "string", "as group_state"),
    _c("group_protocol", "string", "as group_state, or no member chose a protocol"),
    _c("owner_member_id", "string", "no member of the group's last generation owned the partition"),
    _c("owner_group_instance_id", "string", "no owner, or a dynamic member (no group.instance.id)"),
    _c("owner_client_id", "string", "no owner"),
    _c("owner_client_host", "string", "no owner"),
    _c("owner_process_id", "string", "no owner, or not a streams group (KIP-1071: the Kafka Streams instance)"),
    _c("owner_generation", "int", "no owner"),
    _c("owner_assigned_at", "timestamp", "no owner, or the assignment's time is unknown"),
]

_LOCAL_START_NULL = (
    "the partition's bounds are unknown, or a live leader before Kafka 3.8 (no ListOffsets EARLIEST_LOCAL, "
    "KIP-1005); equal to log_start_offset unless the topic has tiered storage (KIP-405)"
)

#: a finding's key: group (none for a replica's finding), topic-partition, finding and its severity
_FINDING_KEY = [
    _c("group_id", "string", "REPLICA_DIVERGENCE: a replica's finding, no group"),
    _c("topic", "string"),
    _c("partition", "int"),
    _c("finding", "string"),
    _c("severity", "string"),
]
#: a live offset commit (OffsetCommitValue, schema file OffsetCommitValue.json) and its group-partition
_COMMIT = [
    _c("group_id", "string"),
    _c("topic", "string"),
    _c("partition", "int"),
    _c("committed_offset", "bigint"),
    _c("committed_leader_epoch", "int", "a commit made without a leader epoch (OffsetCommitValue v0-v2)"),
    _c("metadata", "string", "the commit carried no metadata string"),
    _c("commit_timestamp", "timestamp", "the record carried no commit timestamp"),
    _c("value_version", "smallint"),
    _c(
        "topic_id",
        "string",
        "the value carries no topic id (OffsetCommitValue before v4, or a v4 value from a broker "
        "before 4.1, which leaves the tagged topicId out)",
    ),
]

TABLES: dict[str, list[Column]] = {
    "findings": [
        *_FINDING_KEY,
        _c("committed_offset", "bigint", "REPLICA_DIVERGENCE"),
        _c("committed_leader_epoch", "int", "REPLICA_DIVERGENCE, or a commit made without a leader epoch (v0-v2)"),
        _c("commit_timestamp", "timestamp", "REPLICA_DIVERGENCE"),
        _c("divergence_offset", "bigint", "findings other than LOG_TRUNCATION and REPLICA_DIVERGENCE"),
        _c("records_at_risk", "bigint", "the finding counts no records"),
        _c("epoch_end_offset", "bigint", "no end offset was known for the committed epoch"),
        _c("log_start_offset", "bigint", "the partition's bounds are unknown (no replica read, no leader answered)"),
        _c("log_end_offset", "bigint", "as log_start_offset"),
        _c("previous_offset", "bigint", "findings other than OFFSET_REWIND"),
        _c("previous_leader_epoch", "int", "findings other than OFFSET_REWIND"),
        _c("answered_by_broker", "int", "no broker's cache or answer was used"),
        _c("detail", "string"),
        _c("cause", "string", "findings other than LOG_TRUNCATION, or its cause is unknown"),
        _c("cause_leader_epoch", "int", "no cause"),
        _c("cause_leader", "int", "no cause"),
        _c("cause_time", "timestamp", "no cause, or no KRaft metadata log was read"),
        _c("replica_broker", "int", "findings other than REPLICA_DIVERGENCE"),
        _c("groups_consumed", "array<string>", "findings other than REPLICA_DIVERGENCE"),
        _c("offset_at_expansion", "bigint", "findings other than PARTITION_EXPANSION_ORDER"),
        _c("expansion_partition", "int", "findings other than PARTITION_EXPANSION_ORDER"),
        *_OWNER,
    ],
    "committed_offsets": [
        *_COMMIT,
        _c("verdict", "string"),
        _c("log_start_offset", "bigint", "the partition's bounds are unknown (no replica read, no leader answered)"),
        _c("local_log_start_offset", "bigint", _LOCAL_START_NULL),
        _c("log_end_offset", "bigint", "as log_start_offset"),
        _c("high_watermark", "bigint", "as log_start_offset, or no replica's checkpoint holds it"),
        _c("lag", "bigint", "as log_start_offset"),
        _c(
            "resume_tier",
            "string",
            "the commit is outside [log_start_offset, log_end_offset] (its finding says so), or the bounds are "
            "unknown; else `remote` below local_log_start_offset (tiered storage), `local` from it on",
        ),
        _c("records_at_risk", "bigint", "no finding on the commit counts records"),
        *_OWNER,
    ],
    "groups": [
        _c("group_id", "string"),
        _c(
            "group_type",
            "string",
            "the group wrote no group record (commits made by Admin or a standalone "
            "consumer, or the group's records were removed)",
        ),
        _c("group_state", "string", "as group_type"),
        _c("group_protocol_type", "string", "as group_type"),
        _c(
            "group_protocol",
            "string",
            "as group_type, or no member chose a protocol, or a consumer group "
            "(KIP-848: the assignor runs in the coordinator)",
        ),
        _c("group_members", "int", "as group_type"),
        _c("partitions_committed", "bigint"),
        _c("partitions_unknown", "bigint"),
        _c("partitions_remote", "bigint"),
        _c("total_lag", "bigint", "no committed partition's bounds are known"),
        _c("max_lag", "bigint", "as total_lag"),
        _c("max_lag_topic", "string", "as total_lag"),
        _c("max_lag_partition", "int", "as total_lag"),
        _c("worst_verdict", "string"),
        _c("worst_severity", "string", "every committed partition is OK"),
        _c("worst_topic", "string", "as worst_severity"),
        _c("worst_partition", "int", "as worst_severity"),
        _c("findings_critical", "bigint"),
        _c("findings_error", "bigint"),
        _c("findings_warning", "bigint"),
        _c("findings_info", "bigint"),
        _c("records_at_risk", "bigint", "no finding of the group counts records"),
        _c("latest_commit_timestamp", "timestamp", "no commit of the group carried a commit timestamp"),
        _c("latest_commit_age_seconds", "bigint", "as latest_commit_timestamp"),
        _c("audited_as_of", "timestamp"),
        _c("status", "string"),
    ],
    "commits": [
        *_COMMIT,
        _c("source_partition", "int"),
        _c("source_offset", "bigint"),
    ],
    "epochs": [
        _c("topic", "string"),
        _c("partition", "int"),
        _c("broker_id", "int", "a live cluster's partition without a leader"),
        _c("leader_epoch", "int"),
        _c(
            "start_offset",
            "bigint",
            "a live cluster: the leader's current epoch, whose start offset "
            "OffsetsForLeaderEpoch does not give (always null there)",
        ),
        _c("is_leader", "boolean"),
    ],
    "bounds": [
        _c("topic", "string"),
        _c("partition", "int"),
        _c("log_start_offset", "bigint", "no replica of the partition was read, or its leader did not answer"),
        _c("local_log_start_offset", "bigint", _LOCAL_START_NULL),
        _c("log_end_offset", "bigint", "as log_start_offset"),
        _c("high_watermark", "bigint", "as log_start_offset, or no replica's checkpoint holds it"),
        _c("leader_id", "int", "no leader is known (offline partition, or no metadata log read)"),
        _c("answered_by_broker", "int", "no replica was read"),
        _c("authority", "string", "no replica was read"),
        _c("history_captured_at", "timestamp", "no replica was read"),
        _c("replica_count", "bigint", "a live cluster (no replica files are read)"),
        _c("caches_disagree", "boolean", "a live cluster"),
        _c("unclean_elections", "int", "a live cluster"),
        _c("last_unclean_election", "timestamp", "no unclean election is known"),
        _c("metadata_leader_epoch", "int", "no KRaft metadata log was read (a live cluster, or no controller's dir)"),
        _c(
            "epoch_timeline",
            "array<struct<epoch:int,started_at:timestamp,leader:int,unclean:boolean>>",
            "as metadata_leader_epoch",
        ),
        _c(
            "remote_storage_enabled",
            "boolean",
            "a live cluster (the brokers answer the tiered bounds themselves), or no replica was read; offline: "
            "the topic's `remote.storage.enable` (KRaft metadata log) or its segments in `__remote_log_metadata`",
        ),
        _c(
            "remote_log_start_offset",
            "bigint",
            "not tiered, a live cluster, `__remote_log_metadata` not among the inputs, or no remote segment left",
        ),
        _c("remote_log_end_offset", "bigint", "as remote_log_start_offset"),
        _c("remote_segments", "bigint", "not tiered, a live cluster, or `__remote_log_metadata` not among the inputs"),
    ],
    "share_partitions": [
        _c("group_id", "string"),
        _c("topic", "string"),
        _c("partition", "int"),
        _c("topic_id", "string"),
        _c("start_offset", "bigint"),
        _c("leader_epoch", "int", "no record of the share-partition's state carried a leader epoch"),
        _c("state_epoch", "int", "the state's snapshot is gone (pruned) and only updates remain"),
        _c("delivery_complete_count", "int"),
        _c("state_written_at", "timestamp", "the record carried no timestamp"),
        _c("log_start_offset", "bigint", "the partition's bounds are unknown (no replica read, no leader answered)"),
        _c("log_end_offset", "bigint", "as log_start_offset"),
        _c("high_watermark", "bigint", "as log_start_offset, or no replica's checkpoint holds it"),
        _c("lag", "bigint", "as log_start_offset"),
        _c("verdict", "string"),
        _c("records_at_risk", "bigint", "no finding on the share-partition counts records"),
        _c("records_in_log", "bigint", "as records_at_risk"),
        _c("divergence_offset", "bigint", "no state of the share-partition sits past a divergence point"),
        _c("records_in_flight_lost", "bigint", "no state of the share-partition sits past a divergence point"),
    ],
    "leader_timeline": [
        _c("topic", "string", "the topic's TopicRecord is not in the metadata log read"),
        _c("topic_id", "string"),
        _c("partition", "int"),
        _c("metadata_offset", "bigint"),
        _c("changed_at", "timestamp", "the record's batch carried no timestamp"),
        _c("record_type", "string"),
        _c("leader", "int", "the record left the leader unchanged"),
        _c("leader_epoch", "int", "as leader"),
        _c("partition_epoch", "int", "as leader"),
        _c("isr", "array<int>", "the record left the ISR unchanged"),
        _c("eligible_leader_replicas", "array<int>", "the record left the ELR unchanged, or a version before KIP-966"),
        _c("leader_recovery_state", "tinyint", "the record left it unchanged"),
        _c("unclean_election", "boolean"),
        _c("topic_removed_at", "timestamp", "the topic was not deleted"),
    ],
    "broker_timeline": [
        _c("broker_id", "int"),
        _c("broker_epoch", "bigint", "the record carries no broker epoch"),
        _c("metadata_offset", "bigint"),
        _c("changed_at", "timestamp", "the record's batch carried no timestamp"),
        _c("record_type", "string"),
        _c("event", "string"),
    ],
    "finding_changes": [
        _c("status", "string"),
        *_FINDING_KEY,
        _c("previous_severity", "string", "status new"),
        _c("committed_offset", "bigint", "REPLICA_DIVERGENCE"),
        _c("previous_committed_offset", "bigint", "status new, or REPLICA_DIVERGENCE"),
        _c("records_at_risk", "bigint", "the finding counts no records"),
        _c("detail", "string"),
    ],
    "group_changes": [
        _c("change", "string"),
        _c("group_id", "string"),
        _c("status", "string", "change gone"),
        _c("previous_status", "string", "change new"),
        _c("worst_verdict", "string", "change gone"),
        _c("previous_worst_verdict", "string", "change new"),
        _c("total_lag", "bigint", "change gone, or no bounds known"),
        _c("previous_total_lag", "bigint", "change new, or no bounds known then"),
        _c("records_at_risk", "bigint", "change gone, or no finding counts records"),
        _c("previous_records_at_risk", "bigint", "change new, or no finding counted records then"),
    ],
}


#: the columns every rule's query returns, in order: ``findings/`` without the group's type and owner columns, which
#: are joined on after judging (:func:`audit.judge.project_findings`)
FINDING_COLUMNS: list[str] = [c.name for c in TABLES["findings"] if c.name not in {o.name for o in _OWNER}]
#: their Spark SQL types
FINDING_TYPES: dict[str, str] = {c.name: c.type for c in TABLES["findings"] if c.name in FINDING_COLUMNS}


def ddl(name: str) -> str:
    """Return the table's schema as a Spark DDL string (``topic string, partition int, ...``)."""
    return ", ".join(f"`{c.name}` {c.type}" for c in TABLES[name])


def struct(name: str):
    """Return the table's schema as a :class:`pyspark.sql.types.StructType`, nullability as in :data:`TABLES`."""
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    return StructType([StructField(c.name, _parse_datatype_string(c.type), c.nullable) for c in TABLES[name]])


def conform(name: str, df):
    """Return ``df`` with exactly the contract's columns of table ``name``, in order, cast to the contract's types.

    A column ``df`` lacks is all null.  One projection (a ``selectExpr``), no job.

    Raises
    ------
    KeyError
        A table the contract does not name.
    ValueError
        A column ``df`` has that the contract lacks (a new column must be added here first, with when it is null).
    """
    have = df.columns
    extra = [c for c in have if c not in {x.name for x in TABLES[name]}]
    if extra:
        raise ValueError(f"{name}: columns {extra} are not in audit.tables.TABLES[{name!r}]")
    present = set(have)
    return df.selectExpr(
        *[
            f"CAST(`{c.name}` AS {c.type}) AS `{c.name}`"
            if c.name in present
            else f"CAST(NULL AS {c.type}) AS `{c.name}`"
            for c in TABLES[name]
        ]
    )


#: one line per table for the generated column reference (``docs/columns.md``)
TABLE_SUMMARY = {
    "findings": "one row per finding (a group's committed offset, or a replica for REPLICA_DIVERGENCE)",
    "committed_offsets": "the latest live commit per group-partition, with its verdict, bounds and lag",
    "groups": "one row per group with committed offsets: lag, worst verdict and status",
    "commits": "every live commit with its `__consumer_offsets` position (`--mode history`)",
    "epochs": "every replica's leader-epoch cache entries",
    "bounds": "log start and end offsets, high watermark and leader per partition",
    "share_partitions": "one row per share-partition of a share group (KIP-932, `__share_group_state` among the "
    "inputs): its start offset, lag and verdict",
    "leader_timeline": "every partition state change of the KRaft metadata log (when it is among the inputs)",
    "broker_timeline": "every broker registration, fencing and shutdown event of the KRaft metadata log",
    "finding_changes": "this run's findings against the previous run's (`--history`)",
    "group_changes": "the groups whose status changed since the previous run (`--history`)",
}


def markdown() -> str:
    """Render the column reference page (``docs/columns.md``).

    It lists every table of :data:`TABLES`, every column with its Spark type and when it is null.
    ``python -m audit.tables > docs/columns.md`` writes it; a test keeps it current.
    """
    lines = [
        "# Output columns",
        "",
        "Generated from `audit/tables.py` (`python -m audit.tables > docs/columns.md`); what each table is for,",
        "and how the output directory is committed, is in [the output contract](outputs.md). Both sources write",
        "every column; a column the source cannot know is null, and *null when* says when.",
        "",
    ]
    for name, cols in TABLES.items():
        lines += [
            f"## `{name}/`",
            "",
            TABLE_SUMMARY[name][0].upper() + TABLE_SUMMARY[name][1:] + ".",
            "",
            "| column | type | null when |",
            "|---|---|---|",
        ]
        lines += [
            f"| `{c.name}` | `{c.type}` | {c.null_when.replace('|', '/') if c.nullable else 'never'} |" for c in cols
        ]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
