"""The HTML report's Spark queries: the bounded rows the page shows, all collected in one Spark job.

:func:`report_queries` builds them: the findings listed, the per-group counts of the chart, the partitions to plot,
the verdict counts, the ``groups`` rows, the epochs, bounds, committed offsets and broker events of the plotted
partitions and the changes since the previous run.  The audit collects them in the same job as ``summary.json``'s
aggregates; :func:`report_rows` shapes the rows for the page.  Every query is limited: only bounded data reaches
the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Tuple

from ..io import fs
from ..tables import SEVERITIES, TABLES

__all__ = ["ReportLimits", "read_table", "report_queries", "report_rows"]


#: The findings table's columns (the output contract, :data:`audit.tables.TABLES`); those present are collected.
_FINDING_COLUMNS = tuple(c.name for c in TABLES["findings"])


def _severity_rank_expr(col_name: str = "severity"):
    from pyspark.sql import functions as F

    expr = None
    for rank, sev in enumerate(SEVERITIES):
        cond = F.col(col_name) == F.lit(sev)
        expr = F.when(cond, F.lit(rank)) if expr is None else expr.when(cond, F.lit(rank))
    return expr.otherwise(F.lit(len(SEVERITIES)))  # type: ignore[union-attr]  # SEVERITIES is not empty


def read_table(spark, tables_dir: str, name: str):
    path = f"{tables_dir}/{name}"
    if not fs.exists(spark, path):
        return None
    return fs.read_parquet(spark, path)


def _count(df):
    """``df``'s row count as a one-row query (``n``)."""
    from pyspark.sql import functions as F

    return df.agg(F.count(F.lit(1)).alias("n"))


def _findings_queries(findings_df, max_findings: int) -> Dict[str, Any]:
    """Query the findings listed (most severe first, at most ``max_findings``) and their total."""
    from pyspark.sql import functions as F

    have = set(findings_df.columns)
    cols = [c for c in _FINDING_COLUMNS if c in have]
    rows = (
        findings_df.select(*cols)
        .withColumn("_rank", _severity_rank_expr())
        .orderBy(
            "_rank",
            F.col("records_at_risk").desc_nulls_last() if "records_at_risk" in cols else F.lit(0),
            "group_id",
            "topic",
            "partition",
            "finding",
        )
        .limit(max_findings)
        .drop("_rank")
    )
    return {"findings": rows, "findings_n": _count(findings_df)}


def _group_count_queries(findings_df, max_groups: int) -> Dict[str, Any]:
    """Query findings per group by severity (most critical first, at most ``max_groups``) and the number of groups."""
    from pyspark.sql import functions as F

    per_group = (
        findings_df.where(F.col("group_id").isNotNull())
        .groupBy("group_id")
        .agg(
            *[F.sum(F.when(F.col("severity") == s, 1).otherwise(0)).alias(s) for s in SEVERITIES],
            F.count(F.lit(1)).alias("_total"),
        )
    )
    rows = per_group.orderBy(F.col(SEVERITIES[0]).desc(), F.col("_total").desc(), "group_id").limit(max_groups)
    return {"group_counts": rows, "group_counts_n": _count(per_group)}


def _plot_partition_queries(findings_df, max_plots: int) -> Dict[str, Any]:
    """Query the (topic, partition) keys to plot, with their divergences, and the number of partitions with findings.

    The keys are ordered most records at risk first (the sum over the partition's findings), then the most
    severe.
    """
    from pyspark.sql import functions as F

    risk = F.col("records_at_risk") if "records_at_risk" in findings_df.columns else F.lit(0)
    per_tp = (
        findings_df.withColumn("_rank", _severity_rank_expr())
        .groupBy("topic", "partition")
        .agg(
            F.min("_rank").alias("_worst"),
            F.count(F.lit(1)).alias("_n"),
            F.coalesce(F.sum(risk), F.lit(0)).alias("records_at_risk"),
            F.slice(
                F.array_sort(
                    F.collect_set(
                        F.when(
                            F.col("finding").isin("LOG_TRUNCATION", "REPLICA_DIVERGENCE"), F.col("divergence_offset")
                        )
                    )
                ),
                1,
                10,
            ).alias("divergences"),
        )
    )
    rows = per_tp.orderBy(F.col("records_at_risk").desc(), "_worst", F.col("_n").desc(), "topic", "partition").limit(
        max_plots
    )
    return {"plots": rows, "plots_n": _count(per_tp)}


def _for_partitions_query(df, keys_df, max_rows: int):
    return df.join(keys_df, on=["topic", "partition"], how="inner").limit(max_rows)


def _commits_for_partitions_query(df, keys_df, max_per_partition: int):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    have = set(df.columns)
    rank = F.when(F.col("verdict") == "OK", F.lit(9)).otherwise(F.lit(0)) if "verdict" in have else F.lit(0)
    w = Window.partitionBy("topic", "partition").orderBy(rank, "group_id")
    cols = [
        c
        for c in (
            "group_id",
            "topic",
            "partition",
            "committed_offset",
            "committed_leader_epoch",
            "verdict",
            "commit_timestamp",
            "owner_client_id",
            "owner_client_host",
        )
        if c in have
    ]
    return (
        df.select(*cols)
        .join(keys_df, on=["topic", "partition"], how="inner")
        .withColumn("_rn", F.row_number().over(w))
        .withColumn("_n", F.count(F.lit(1)).over(Window.partitionBy("topic", "partition")))
        .where(F.col("_rn") <= max_per_partition)
    )


def _verdict_query(committed_df):
    """Query committed offsets per verdict (None without the table or its column)."""
    if committed_df is None or "verdict" not in committed_df.columns:
        return None
    return committed_df.groupBy("verdict").count().orderBy("verdict").limit(100)


def _groups_queries(groups_df, max_rows: int) -> Dict[str, Any]:
    """Query the ``groups`` table's rows, the number of groups, and groups and records at risk per status.

    The rows come worst status first (then most records at risk, most lag), at most ``max_rows``; none without
    the table.
    """
    if groups_df is None:
        return {}
    from pyspark.sql import functions as F

    from ..groups import worst_first

    rows = worst_first(groups_df).limit(max_rows)
    statuses = groups_df.groupBy("status").agg(F.count(F.lit(1)).alias("n"), F.sum("records_at_risk").alias("risk"))
    return {"groups": rows, "groups_n": _count(groups_df), "statuses": statuses}


def _status_counts(rows: List[Dict[str, Any]]) -> Dict[str, Tuple[int, int]]:
    """``{status: (groups, records at risk)}`` from :func:`_groups_queries`' ``statuses`` rows."""
    return {str(r["status"]): (int(r["n"]), int(r["risk"] or 0)) for r in rows}


@dataclass(frozen=True)
class ReportLimits:
    """How many rows report.html lists or plots at most (:func:`audit.report.html.write_html_report`'s keywords)."""

    max_findings: int = 5000
    max_plots: int = 20
    max_groups_per_plot: int = 25
    max_groups_in_chart: int = 40
    max_epoch_rows: int = 100_000
    max_changes: int = 200
    max_groups_in_table: int = 500


def report_queries(table: Callable[[str], Any], limits: ReportLimits) -> Dict[str, Any]:
    """Build every bounded query report.html collects (name -> DataFrame), for one Spark job.

    ``table(name)`` gives an output table as a DataFrame, or None when the output has none; ``findings`` is
    required.  The plotted partitions' epochs, bounds, committed offsets and broker events join the query of the
    partitions to plot itself (no round trip for its keys).  Collect them with
    :func:`audit.spark.collect_together`, alone or with other bounded queries, and give the rows to
    :func:`report_rows`.

    Raises
    ------
    FileNotFoundError
        Without a ``findings`` table.
    """
    findings_df = table("findings")
    if findings_df is None:
        raise FileNotFoundError("the output has no findings/ table")
    committed_df = table("committed_offsets")
    queries: Dict[str, Any] = {
        **_findings_queries(findings_df, limits.max_findings),
        **_group_count_queries(findings_df, limits.max_groups_in_chart),
        **_plot_partition_queries(findings_df, limits.max_plots),
        **_groups_queries(table("groups"), limits.max_groups_in_table),
    }
    verdict_query = _verdict_query(committed_df)
    if verdict_query is not None:
        queries["verdicts"] = verdict_query
    queries.update(
        _plotted_partition_queries(
            queries["plots"].select("topic", "partition"),
            table("epochs"),
            table("bounds"),
            committed_df,
            table("broker_timeline"),
            limits,
        )
    )
    queries.update(_change_queries(table("finding_changes"), table("group_changes"), limits.max_changes))
    return queries


def report_rows(got: Mapping[str, List[Dict[str, Any]]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Shape the collected rows of :func:`report_queries` for the page: ``(first, second)``.

    ``first``: ``rows``/``total`` (findings), ``group_counts``/``n_groups`` (per group by severity),
    ``plot_rows``/``n_tp`` (the partitions to plot), ``verdicts`` (verdict -> count), ``group_rows``/
    ``n_group_rows`` and ``statuses`` (the groups table).  ``second``: ``epoch_rows``, ``bound_rows``,
    ``commit_rows`` and ``broker_rows`` of the plotted partitions, ``change_rows`` (new, resolved, persisted) and
    ``gchange_rows`` (the groups' changes).
    """
    first = {
        "rows": got["findings"],
        "total": int(got["findings_n"][0]["n"]),
        "group_counts": {r["group_id"]: {s: int(r[s] or 0) for s in SEVERITIES} for r in got["group_counts"]},
        "n_groups": int(got["group_counts_n"][0]["n"]),
        "plot_rows": got["plots"],
        "n_tp": int(got["plots_n"][0]["n"]),
        "verdicts": {str(r["verdict"]): int(r["count"]) for r in got.get("verdicts", [])},
        "group_rows": got.get("groups", []),
        "n_group_rows": int(got["groups_n"][0]["n"]) if "groups_n" in got else 0,
        "statuses": _status_counts(got.get("statuses", [])),
    }
    second = {
        "epoch_rows": got.get("epochs", []),
        "bound_rows": got.get("bounds", []),
        "commit_rows": got.get("commits", []),
        "change_rows": [r for status in ("new", "resolved", "persisted") for r in got.get(f"changes_{status}", [])],
        "broker_rows": got.get("brokers", []),
        "gchange_rows": got.get("group_changes", []),
    }
    return first, second


def _plotted_partition_queries(keys_df, epochs_df, bounds_df, committed_df, broker_df, limits: ReportLimits):
    """Query the epochs, bounds, committed offsets of the partitions ``keys_df`` names, and the newest broker events."""
    from pyspark.sql import functions as F

    out: Dict[str, Any] = {}
    if epochs_df is not None:
        out["epochs"] = _for_partitions_query(epochs_df, keys_df, limits.max_epoch_rows)
    if bounds_df is not None:
        out["bounds"] = _for_partitions_query(bounds_df, keys_df, limits.max_plots * 4 + 1)
    if committed_df is not None:
        out["commits"] = _commits_for_partitions_query(committed_df, keys_df, limits.max_groups_per_plot)
    # the newest broker events only (a long-lived cluster fences and unfences on every restart)
    if broker_df is not None:
        out["brokers"] = (
            broker_df.where("changed_at IS NOT NULL").orderBy(F.col("changed_at").desc()).limit(limits.max_epoch_rows)
        )
    return out


def _change_queries(changes_df, group_changes_df, max_changes: int) -> Dict[str, Any]:
    """Query the findings' changes since the previous run (per status) and the groups' changes (``--history``)."""
    from pyspark.sql import functions as F

    out: Dict[str, Any] = {}
    if changes_df is not None:
        for status in ("new", "resolved", "persisted"):
            out[f"changes_{status}"] = (
                changes_df.where(F.col("status") == status)
                .orderBy(_severity_rank_expr(), "group_id", "topic", "partition", "finding")
                .limit(max_changes)
            )
    if group_changes_df is not None:
        order = F.create_map(F.lit("changed"), F.lit(0), F.lit("new"), F.lit(1), F.lit("gone"), F.lit(2))
        out["group_changes"] = group_changes_df.orderBy(order[F.col("change")], "group_id").limit(max_changes)
    return out
