"""The judge: one SQL query per finding (``sql/finding_*.sql``) over temp views.

Input views (the contract between sources and judge, see DESIGN.md):

* ``commits`` — live commits (:func:`audit.commits.live_commits`), with ``is_latest``;
* ``epochs`` — topic, partition, broker_id, leader_epoch int, start_offset long, is_leader boolean;
* ``bounds`` — topic, partition, log_start_offset, local_log_start_offset (tiered storage: the first offset on the
  leader's disk; optional), log_end_offset, high_watermark (long),
  answered_by_broker int, authority string, history_captured_at timestamp, caches_disagree
  boolean, unclean_elections int, last_unclean_election timestamp; optional (KRaft metadata log):
  metadata_leader_epoch int, epoch_timeline array<struct<epoch int, started_at timestamp, leader int, unclean boolean>>;
* ``epoch_end_offsets`` — topic, partition, requested_epoch, leader_epoch, end_offset,
  answered_by_broker (OffsetsForLeaderEpoch answers; computed by ``sql/epoch_end_offsets.sql``
  from ``epochs`` when a source has caches, or given directly by the live-cluster source).

Each rule is a separately loadable, separately tested query returning :data:`FINDING_COLUMNS`.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .queries import epoch_end_offsets_sql, load_sql
from .spark import checkpoint_on_first_use
from .tables import FINDING_COLUMNS, FINDING_TYPES, SEVERITY_RANK


__all__ = [
    "OPTIONAL_INPUTS",
    "RESUME_TIER",
    "RULES",
    "TIMELINE_TYPE",
    "judge",
    "project_findings",
    "register_context",
    "run_rule",
    "with_verdicts",
]

#: finding name -> SQL file (without .sql) in ``sql/``; order = tie-break for verdicts.
RULES = {
    "LOG_TRUNCATION": "finding_log_truncation",
    "OFFSET_OUT_OF_RANGE": "finding_offset_out_of_range",
    "UNKNOWN_LEADER_EPOCH": "finding_unknown_leader_epoch",
    "BEHIND_METADATA_EPOCH": "finding_behind_metadata_epoch",
    "OFFSET_REWIND": "finding_offset_rewind",
    "EPOCH_UNVERIFIABLE": "finding_epoch_unverifiable",
    "REPLICA_DIVERGENCE": "finding_replica_divergence",
    "PARTITION_EXPANSION_ORDER": "finding_partition_expansion_order",
}
#: rules that need a view only some sources give: run only when :func:`judge` gets it
OPTIONAL_INPUTS = {"REPLICA_DIVERGENCE": "replicas", "PARTITION_EXPANSION_ORDER": "expansion_offsets"}
TIMELINE_TYPE = "array<struct<epoch:int, started_at:timestamp, leader:int, unclean:boolean>>"


def register_context(
    spark: SparkSession,
    commits: DataFrame,
    epochs: DataFrame,
    bounds: DataFrame,
    epoch_end_offsets: DataFrame | None = None,
    history: bool = False,
) -> DataFrame:
    """Register the input views and ``commit_context``; return the context DataFrame.

    ``history``: judge every live commit (``--mode history``) instead of only the latest one.
    """
    if "metadata_leader_epoch" not in bounds.columns:  # live clusters and inline tables have no metadata log
        bounds = bounds.withColumn("metadata_leader_epoch", F.lit(None).cast("int"))
    if "epoch_timeline" not in bounds.columns:
        bounds = bounds.withColumn("epoch_timeline", F.lit(None).cast(TIMELINE_TYPE))
    commits.createOrReplaceTempView("commits")
    epochs.createOrReplaceTempView("epochs")
    bounds.createOrReplaceTempView("bounds")
    if epoch_end_offsets is None:
        # materialised on its own: inlined into the context query its shuffles cost more than the query
        epoch_end_offsets = checkpoint_on_first_use(spark.sql(epoch_end_offsets_sql()))
    epoch_end_offsets.createOrReplaceTempView("epoch_end_offsets")
    ctx = spark.sql(load_sql("commit_context").replace("{judge_all}", "true" if history else "false"))
    # every rule reads the context: compute it once
    ctx = checkpoint_on_first_use(ctx)
    ctx.createOrReplaceTempView("commit_context")
    return ctx


def run_rule(spark: SparkSession, finding: str) -> DataFrame:
    """Run one rule over the registered ``commit_context`` view; returns FINDING_COLUMNS rows."""
    return project_findings(spark.sql(load_sql(RULES[finding])))


def project_findings(df: DataFrame, extra: tuple[str, ...] = ()) -> DataFrame:
    """Project ``df`` (a rule's result) onto :data:`FINDING_COLUMNS` in that order, typed, then the ``extra`` columns.

    A column the rule does not fill is null.
    """
    have = set(df.columns)
    # columns a rule does not fill (``cause*`` belong to LOG_TRUNCATION) are null.  One projection of SQL
    # expressions: built from Column objects it took some 290 py4j calls per rule (a call per function, cast,
    # alias and list element, and two per ``df.columns``, which PySpark does not cache)
    return df.selectExpr(
        *[
            f"CAST({f'`{c}`' if c in have else 'NULL'} AS {FINDING_TYPES[c]}) AS `{c}`"
            if c in FINDING_TYPES
            else f"`{c}`"
            for c in FINDING_COLUMNS
        ],
        *[f"`{c}`" for c in extra],
    )


def judge(
    spark: SparkSession,
    commits: DataFrame,
    epochs: DataFrame,
    bounds: DataFrame,
    epoch_end_offsets: DataFrame | None = None,
    history: bool = False,
    rules: list[str] | None = None,
    replicas: DataFrame | None = None,
    expansion_offsets: DataFrame | None = None,
) -> DataFrame:
    """All findings (union of every rule), columns :data:`FINDING_COLUMNS`.

    Rules of :data:`OPTIONAL_INPUTS` run only with their view:

    * ``replicas`` (broker_id int, topic string, partition int, log_end_offset bigint, high_watermark bigint,
      damage string; :func:`audit.sources.logdirs.read_log_dirs`): ``REPLICA_DIVERGENCE`` (``group_id`` null);
    * ``expansion_offsets`` (:func:`audit.sources.expansion.expansion_offsets`; needs the metadata log and
      every commit, ``--mode history``): ``PARTITION_EXPANSION_ORDER``.
    """
    register_context(spark, commits, epochs, bounds, epoch_end_offsets, history)
    given = {"replicas": replicas, "expansion_offsets": expansion_offsets}
    for view, df in given.items():
        if df is not None:
            df.createOrReplaceTempView(view)
    names = [n for n in (rules or list(RULES)) if n not in OPTIONAL_INPUTS or given[OPTIONAL_INPUTS[n]] is not None]
    # one plan for every rule over the materialised context: no job per rule (the caller writes the union once)
    parts = [run_rule(spark, name) for name in names]
    return reduce(DataFrame.union, parts)


#: Where Kafka's consumer will read a commit's next record from (tiered storage, KIP-405): ``remote`` below the
#: leader's local log start (fetched from the remote tier), ``local`` from there to the log end, null outside the
#: log or where a bound is unknown.  Without tiered storage the local log start is the log start: always local.
RESUME_TIER = (
    "CASE WHEN log_start_offset IS NULL OR log_end_offset IS NULL"
    " OR committed_offset < log_start_offset OR committed_offset > log_end_offset THEN CAST(NULL AS STRING)"
    " WHEN committed_offset < coalesce(local_log_start_offset, log_start_offset) THEN 'remote' ELSE 'local' END"
)


def with_verdicts(commits: DataFrame, findings: DataFrame, bounds: DataFrame | None = None) -> DataFrame:
    """Build the ``committed_offsets`` table: the latest live commit per group-partition, its verdict, bounds and lag.

    Each row is the latest live commit per group-partition with ``verdict``, the partition's bounds and the lag.

    ``verdict`` is ``OK`` or the name of the most severe finding on that commit (ties broken by
    the order of :data:`RULES`).  ``bounds`` (the judge's view of the same name: one row per topic-partition, from
    the authoritative replica offline, or the leader's ListOffsets answers live) gives ``log_start_offset``,
    ``local_log_start_offset`` (tiered storage: the first offset still on the leader's disk; the log start
    without it), ``log_end_offset`` and ``high_watermark`` (bigint offsets, null where unknown or without
    ``bounds``); ``resume_tier`` (:data:`RESUME_TIER`: ``local``/``remote``);
    ``lag`` is ``log_end_offset - committed_offset`` in records, not clamped: negative for a commit past the log
    end (the finding on the commit says why).  Live, ``log_end_offset`` is what ListOffsets LATEST answers a
    consumer (the high watermark), as in ``kafka-consumer-groups --describe``.  ``records_at_risk`` is the
    largest count any finding on the commit gives (null when none counts).

    Returns
    -------
    DataFrame
        Columns: group_id, topic, partition, committed_offset, committed_leader_epoch, metadata, commit_timestamp,
        value_version, topic_id, verdict, log_start_offset, local_log_start_offset, log_end_offset, high_watermark,
        lag, resume_tier, records_at_risk.
    """
    latest = commits.where("is_latest")
    key = ["group_id", "topic", "partition", "committed_offset", "commit_timestamp"]
    sev = F.create_map(*[x for k, v in SEVERITY_RANK.items() for x in (F.lit(k), F.lit(v))])
    order = F.create_map(*[x for i, k in enumerate(RULES) for x in (F.lit(k), F.lit(len(RULES) - i))])
    keyed = findings.where(F.col("group_id").isNotNull()).select(
        *key,
        "finding",
        (sev[F.col("severity")] * 100 + order[F.col("finding")]).alias("rank"),
        F.col("records_at_risk").cast("bigint").alias("records_at_risk"),
    )
    # the most severe finding's name and the largest count of records at risk, in one aggregate
    top = keyed.groupBy(*key).agg(
        F.max_by("finding", "rank").alias("finding"), F.max("records_at_risk").alias("records_at_risk")
    )
    # null-safe on commit_timestamp: a commit without one still takes its findings
    c, t = latest.alias("c"), top.alias("t")
    cond = [
        F.col(f"c.{k}").eqNullSafe(F.col(f"t.{k}")) if k == "commit_timestamp" else F.col(f"c.{k}") == F.col(f"t.{k}")
        for k in key
    ]
    out = c.join(t, cond, "left").select("c.*", "t.finding", "t.records_at_risk")
    if bounds is not None:
        local = (
            F.col("local_log_start_offset")
            if "local_log_start_offset" in bounds.columns
            else F.lit(None).cast("bigint").alias("local_log_start_offset")
        )
        out = out.join(
            bounds.select("topic", "partition", "log_start_offset", local, "log_end_offset", "high_watermark"),
            ["topic", "partition"],
            "left",
        )
    else:
        out = out.selectExpr(
            "*",
            "CAST(NULL AS BIGINT) AS log_start_offset",
            "CAST(NULL AS BIGINT) AS local_log_start_offset",
            "CAST(NULL AS BIGINT) AS log_end_offset",
            "CAST(NULL AS BIGINT) AS high_watermark",
        )
    return out.selectExpr(
        "group_id",
        "topic",
        "partition",
        "committed_offset",
        "committed_leader_epoch",
        "metadata",
        "commit_timestamp",
        "value_version",
        "topic_id",
        "coalesce(finding, 'OK') AS verdict",
        "CAST(log_start_offset AS BIGINT) AS log_start_offset",
        "CAST(local_log_start_offset AS BIGINT) AS local_log_start_offset",
        "CAST(log_end_offset AS BIGINT) AS log_end_offset",
        "CAST(high_watermark AS BIGINT) AS high_watermark",
        "CAST(log_end_offset - committed_offset AS BIGINT) AS lag",
        f"{RESUME_TIER} AS resume_tier",
        "records_at_risk",
    )
