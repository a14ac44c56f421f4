"""The ``groups`` table: one row per group with committed offsets, its lag, worst verdict and status.

The rules are ``sql/groups.sql``; this module only registers its views and fills its placeholders.  The status
words are the audit's own, not Burrow's (``docs/metrics.md`` maps them to Burrow's nearest statuses): ``AT_RISK`` (an error or critical finding), ``STALE`` (the latest commit
is older than ``stale_after_seconds`` at the audit while the group's partitions grew past it), ``WARN`` (a warning
finding), ``OK``.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .judge import RULES
from .queries import load_sql
from .tables import GROUP_STATUSES


__all__ = [
    "DEFAULT_STALE_AFTER_SECONDS",
    "group_status",
    "worst_first",
]

#: ``--stale-after`` default: a day without a commit while records wait
DEFAULT_STALE_AFTER_SECONDS = 24 * 3600


def _rule_order() -> str:
    return "array(" + ", ".join(f"'{name}'" for name in RULES) + ")"


def group_status(
    spark: SparkSession,
    committed: DataFrame,
    findings: DataFrame,
    group_info: DataFrame | None,
    as_of: datetime | None = None,
    stale_after_seconds: int = DEFAULT_STALE_AFTER_SECONDS,
) -> DataFrame:
    """Build the ``groups`` table from the ``committed_offsets`` and ``findings`` tables and ``group_info``.

    Columns and types: ``audit.tables.TABLES['groups']``.  The inputs are the ``committed_offsets`` table
    (:func:`audit.judge.with_verdicts`: verdict, lag, records_at_risk), the ``findings`` table and ``group_info``
    (``sql/group_state.sql``: group_id, group_type, group_state, group_protocol_type, group_protocol,
    group_members; ``None``: no group records read).

    ``as_of``: the audit's time for ages (a live cluster: when the audit started); ``None`` takes the newest
    commit of the audited groups (log dirs carry no clock of their own).  ``latest_commit_age_seconds`` is in
    seconds; ``total_lag``, ``max_lag`` and ``records_at_risk`` in records, lag unclamped (negative past the log
    end).  Registers the temp views ``group_committed``, ``group_findings`` and ``group_info``.

    Raises
    ------
    ValueError
        A negative ``stale_after_seconds``.
    """
    if stale_after_seconds < 0:
        raise ValueError(f"stale_after_seconds must be 0 or more, not {stale_after_seconds}")
    if group_info is None:
        group_info = spark.createDataFrame(
            [],
            "group_id string, group_type string, group_state string, "
            "group_protocol_type string, group_protocol string, group_members int",
        )
    if "resume_tier" not in committed.columns:  # an output written before tiered storage was known
        committed = committed.withColumn("resume_tier", F.lit(None).cast("string"))
    committed.createOrReplaceTempView("group_committed")
    findings.createOrReplaceTempView("group_findings")
    group_info.createOrReplaceTempView("group_info")
    if as_of is None:
        as_of_sql = "CAST(NULL AS TIMESTAMP)"
    else:
        as_of_utc = as_of.astimezone(timezone.utc) if as_of.tzinfo else as_of.replace(tzinfo=timezone.utc)
        as_of_sql = f"TIMESTAMP '{as_of_utc.strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'"
    text = (
        load_sql("groups")
        .replace("{as_of}", as_of_sql)
        .replace("{stale_after_seconds}", str(int(stale_after_seconds)))
        .replace("{rule_order}", _rule_order())
    )
    return spark.sql(text)


def worst_first(groups: DataFrame) -> DataFrame:
    """Sort ``groups`` (the ``groups`` table) worst first.

    The order is by ``status`` in :data:`audit.tables.GROUP_STATUSES` order (an unknown status last), then most
    ``records_at_risk``, most ``total_lag`` (nulls last), then ``group_id``.  A sort only: no Spark job.
    """
    rank = F.create_map(*[x for i, st in enumerate(GROUP_STATUSES) for x in (F.lit(st), F.lit(i))])
    return groups.orderBy(
        F.coalesce(rank[F.col("status")], F.lit(len(GROUP_STATUSES))),
        F.col("records_at_risk").desc_nulls_last(),
        F.col("total_lag").desc_nulls_last(),
        "group_id",
    )
