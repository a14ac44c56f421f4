"""A history of audits (``--history DIR``): each run's findings and summary appended, keyed by run id.

Layout under ``DIR`` (Parquet, partitioned by run date then run id, readable with
``spark.read.parquet(f"{DIR}/findings")``; set ``spark.sql.sources.partitionColumnTypeInference.enabled``
to false to keep ``run_id`` and ``run_date`` strings):

* ``runs/run_date=YYYY-MM-DD/run_id=ID/attempt=A/`` -- one row per run: run_id string, run_time timestamp
  (UTC), output string, exit_status int, findings_total/critical/error/warning/info bigint,
  group_partitions bigint, records_read bigint, records_skipped bigint, summary_json string;
* ``findings/run_date=YYYY-MM-DD/run_id=ID/attempt=A/`` -- the run's findings table
  (:data:`audit.tables.FINDING_COLUMNS` and the owner columns) plus run_time;
* ``groups/run_date=YYYY-MM-DD/run_id=ID/attempt=A/`` -- the run's ``groups`` table (``audit.tables``) plus
  run_time (runs appended before the table existed have none).

Nothing is renamed, so the same steps hold on a local disk, HDFS and an object store.  Each append is an
*attempt* (``A``: its UTC start, then a random suffix, so attempts sort by time) written straight into its own
partition directories: first its findings, then its ``runs`` row, the commit marker.  A run is the newest
attempt of its run id that has a ``runs`` row; a rerun with the same run id (whatever date it ran on) writes a
new attempt and only once its marker is written removes the older attempts of that run id.  A process killed
at any step therefore leaves the history with either the old attempt or the new one committed, never neither,
never both; an attempt without a marker is never read (:func:`committed`) and is removed by the next append of
its run id.  Readers outside this module should read through the ``runs`` table the same way (join on
``run_id`` and ``attempt``).  Directories written before attempts existed (no ``attempt=``) read as committed
attempts with a null ``attempt``.

:func:`finding_changes` compares this run's findings with the previous run's (the newest run with
another run id), keyed by (group_id, topic, partition, finding): ``new``, ``persisted`` or ``resolved``;
:func:`group_changes` compares the groups' status the same way.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..io import fs


__all__ = [
    "CHANGE_COLUMNS",
    "GROUP_CHANGE_COLUMNS",
    "KEY",
    "LEGACY_ATTEMPT",
    "RUNS_SCHEMA",
    "append_run",
    "committed",
    "default_run_id",
    "finding_changes",
    "group_changes",
    "new_attempt",
    "partition_value",
    "previous_run",
]

KEY = ["group_id", "topic", "partition", "finding"]
#: the join key: a REPLICA_DIVERGENCE row has no group, its replica's broker stands for it
_JOIN = ["_subject", "topic", "partition", "finding"]
CHANGE_COLUMNS = [
    "status",
    "group_id",
    "topic",
    "partition",
    "finding",
    "severity",
    "previous_severity",
    "committed_offset",
    "previous_committed_offset",
    "records_at_risk",
    "detail",
]
RUNS_SCHEMA = (
    "run_id string, run_time timestamp, output string, exit_status int, findings_total bigint, "
    "findings_critical bigint, findings_error bigint, findings_warning bigint, findings_info bigint, "
    "group_partitions bigint, records_read bigint, records_skipped bigint, summary_json string"
)


def default_run_id(started_at: str) -> str:
    """Return the run id when none is given: the run's start time, ``2026-11-23T18:40:05.123456Z``."""
    return datetime.fromisoformat(started_at).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _read(spark: SparkSession, history: str, table: str) -> DataFrame | None:
    """Read every row of ``table`` in ``history``, committed or not, with an ``attempt`` column.

    ``attempt`` is null for directories written before attempts existed; None when there is no row.
    """
    base = f"{fs.to_uri(history).rstrip('/')}/{table}"
    names = fs.children(spark, base)
    if not names or not any(n.startswith("run_date=") for n in names):
        return None
    # run ids and dates stay strings ("007" must not become 7): partition type inference off for this read
    key = "spark.sql.sources.partitionColumnTypeInference.enabled"
    before = spark.conf.get(key, "true")
    spark.conf.set(key, "false")
    try:
        df = spark.read.option("basePath", base).parquet(base)
    finally:
        spark.conf.set(key, before or "true")
    return df if "attempt" in df.columns else df.withColumn("attempt", F.lit(None).cast("string"))


def committed(spark: SparkSession, history: str, table: str) -> DataFrame | None:
    """Return ``table``'s rows of committed runs only; None when the history has no committed run.

    For each run id, the rows are those of the newest attempt that has a ``runs`` row (see the module docstring).
    """
    from pyspark.sql.window import Window

    runs = _read(spark, history, "runs")
    if runs is None:
        return None
    w = Window.partitionBy("run_id").orderBy(F.col("attempt").desc_nulls_last())
    latest = runs.withColumn("_n", F.row_number().over(w)).where("_n = 1").drop("_n")
    if table == "runs":
        return latest
    df = _read(spark, history, table)
    if df is None:
        return None
    keys = latest.select(F.col("run_id").alias("_r"), F.col("attempt").alias("_a"))
    return df.join(keys, (df["run_id"] == keys["_r"]) & df["attempt"].eqNullSafe(keys["_a"]), "left_semi")


def previous_run(spark: SparkSession, history: str, run_id: str) -> dict | None:
    """Return the newest run in ``history`` whose run id is not ``run_id``, or None.

    The run is ``{"run_id", "run_time"}`` (ISO 8601 UTC string).
    """
    runs = committed(spark, history, "runs")
    if runs is None:
        return None
    row = (
        runs.where(F.col("run_id") != run_id)
        .orderBy(F.col("run_time").desc())
        .select("run_id", F.date_format("run_time", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'").alias("run_time"))
        .limit(1)
        .collect()
    )  # formatted in the session time zone, UTC
    return {"run_id": row[0]["run_id"], "run_time": row[0]["run_time"]} if row else None


def finding_changes(spark: SparkSession, history: str, run_id: str, findings: DataFrame) -> tuple[DataFrame, dict]:
    """Compare the run's findings with the previous run's in ``history``.

    Returns (changes, info): ``changes`` has :data:`CHANGE_COLUMNS` (status ``new``, ``persisted`` or
    ``resolved``; for ``resolved`` rows the current-run columns are the previous run's values), ``info``
    ``{"previous_run_id", "previous_run_time", "new", "persisted", "resolved"}`` (counts; an aggregate
    collect).  Without a previous run every finding is ``new``.  In ``--mode history`` a group-partition
    may carry one finding per commit: the most severe (then newest) of each key is compared.
    """
    prev = previous_run(spark, history, run_id)
    cur = _one_per_key(findings)
    if prev is not None:
        old = committed(spark, history, "findings")
        old = _one_per_key(old.where(F.col("run_id") == prev["run_id"])) if old is not None else None
    else:
        old = None
    if old is None:
        old = cur.limit(0)
    o = old.select(
        *_JOIN,
        F.col("group_id").alias("_old_group"),
        F.col("severity").alias("previous_severity"),
        F.col("committed_offset").alias("previous_committed_offset"),
        F.col("detail").alias("previous_detail"),
        F.col("records_at_risk").alias("previous_records_at_risk"),
        F.lit(True).alias("_old"),
    )
    c = cur.select(
        *_JOIN, "group_id", "severity", "committed_offset", "records_at_risk", "detail", F.lit(True).alias("_cur")
    )
    j = c.join(o, _JOIN, "full_outer").withColumn("group_id", F.coalesce("group_id", "_old_group"))
    status = F.when(F.col("_cur") & F.col("_old"), "persisted").when(F.col("_cur"), "new").otherwise("resolved")
    changes = j.select(
        status.alias("status"),
        *KEY,
        F.coalesce("severity", "previous_severity").alias("severity"),
        "previous_severity",
        F.coalesce("committed_offset", "previous_committed_offset").alias("committed_offset"),
        "previous_committed_offset",
        F.coalesce("records_at_risk", "previous_records_at_risk").alias("records_at_risk"),
        F.coalesce("detail", "previous_detail").alias("detail"),
    )
    counts = {r["status"]: int(r["n"]) for r in changes.groupBy("status").agg(F.count("*").alias("n")).collect()}
    info = {
        "previous_run_id": prev["run_id"] if prev else None,
        "previous_run_time": prev["run_time"] if prev else None,
        **{k: counts.get(k, 0) for k in ("new", "persisted", "resolved")},
    }
    return changes, info


GROUP_CHANGE_COLUMNS = [
    "change",
    "group_id",
    "status",
    "previous_status",
    "worst_verdict",
    "previous_worst_verdict",
    "total_lag",
    "previous_total_lag",
    "records_at_risk",
    "previous_records_at_risk",
]


def group_changes(
    spark: SparkSession, history: str, run_id: str, groups: DataFrame, previous_run_id: str | None = None
) -> tuple[DataFrame, dict]:
    """Compare the run's ``groups`` table with the previous run's in ``history``.

    The previous run is the newest committed run with another run id, or ``previous_run_id``.  The result has one
    row per group whose status changed (``change``: ``new`` -- not in the previous run's table, ``gone`` -- only
    there, ``changed`` -- another status), with both runs' status, worst verdict, total lag and records at risk
    (:data:`GROUP_CHANGE_COLUMNS`).  A previous run appended before ``groups`` was kept compares as empty (every
    group ``new``).  Returns (changes, info): ``info`` ``{"groups_new", "groups_gone", "groups_changed"}`` (an
    aggregate collect).
    """
    if previous_run_id is None:
        prev = previous_run(spark, history, run_id)
        previous_run_id = prev["run_id"] if prev else None
    old = committed(spark, history, "groups") if previous_run_id is not None else None
    cols = ["group_id", "status", "worst_verdict", "total_lag", "records_at_risk"]
    old = (
        old.where(F.col("run_id") == previous_run_id).select(*cols)  # type: ignore[arg-type]
        if old is not None
        else groups.select(*cols).limit(0)
    )
    o = old.select("group_id", *[F.col(c).alias(f"previous_{c}") for c in cols[1:]], F.lit(True).alias("_old"))
    c = groups.select(*cols, F.lit(True).alias("_cur"))
    j = c.join(o, "group_id", "full_outer")
    change = (
        F.when(F.col("_cur") & F.col("_old"), F.when(F.col("status") != F.col("previous_status"), F.lit("changed")))
        .when(F.col("_cur"), F.lit("new"))
        .otherwise(F.lit("gone"))
    )
    changes = j.select(
        change.alias("change"),
        "group_id",
        "status",
        "previous_status",
        "worst_verdict",
        "previous_worst_verdict",
        "total_lag",
        "previous_total_lag",
        "records_at_risk",
        "previous_records_at_risk",
    ).where(F.col("change").isNotNull())
    counts = {r["change"]: int(r["n"]) for r in changes.groupBy("change").agg(F.count("*").alias("n")).collect()}
    return changes, {f"groups_{k}": counts.get(k, 0) for k in ("new", "gone", "changed")}


def _one_per_key(findings: DataFrame) -> DataFrame:
    """Keep the most severe (then newest) finding per key, with ``_subject``.

    ``_subject`` is the group, or for a finding without one (REPLICA_DIVERGENCE) its replica's broker, so such
    rows compare across runs (a null never joins).
    """
    from pyspark.sql.window import Window
    from ..tables import SEVERITY_RANK

    broker = F.col("replica_broker").cast("string") if "replica_broker" in findings.columns else F.lit(None)
    findings = findings.withColumn(
        "_subject", F.coalesce(F.col("group_id"), F.concat(F.lit("\u0000replica "), broker), F.lit("\u0000"))
    )
    rank = F.create_map(*[x for k, v in SEVERITY_RANK.items() for x in (F.lit(k), F.lit(v))])
    w = Window.partitionBy(*_JOIN).orderBy(rank[F.col("severity")].desc(), F.col("commit_timestamp").desc_nulls_last())
    return findings.withColumn("_n", F.row_number().over(w)).where("_n = 1").drop("_n")


#: the characters Spark escapes in a partition directory's value (``ExternalCatalogUtils.escapePathName``)
_ESCAPED = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(1, 0x20)}


def partition_value(value: str) -> str:
    """Write ``value`` as Spark writes it in a ``name=value`` partition directory (``%XX`` for escaped characters).

    Partition discovery then reads back ``value`` itself (an Airflow run id has ``:`` and ``+``).
    """
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


#: the attempt a run written before attempts existed becomes (sorts before every real one)
LEGACY_ATTEMPT = "00000000T000000000000Z-legacy"


def _migrate_legacy(spark: SparkSession, base: str) -> list[str]:
    """Move each run directory written before attempts existed into ``run_id=ID/attempt=<LEGACY_ATTEMPT>/``.

    Such a directory is ``run_id=ID/`` holding Parquet files; once moved, old and new runs read as one table (Spark
    refuses a partition tree of mixed depth).  Through a hidden name (``_legacy-...``, which readers skip),
    finished by the next append should a process be killed half-way.  Returns the moved directories.
    """
    moved = []
    for name in ("runs", "findings"):
        for date_dir in fs.children(spark, f"{base}/{name}") or []:
            if not date_dir.startswith("run_date="):
                continue
            parent = f"{base}/{name}/{date_dir}"
            for child in fs.children(spark, parent) or []:
                if child.startswith("_legacy-run_id="):
                    run = child[len("_legacy-") :]
                elif child.startswith("run_id=") and [
                    n for n in fs.children(spark, f"{parent}/{child}") or [] if not n.startswith(("attempt=", "_", "."))
                ]:
                    run = child
                    fs.rename(spark, f"{parent}/{run}", f"{parent}/_legacy-{run}")
                else:
                    continue
                fs.mkdirs(spark, f"{parent}/{run}")
                fs.rename(spark, f"{parent}/_legacy-{run}", f"{parent}/{run}/attempt={LEGACY_ATTEMPT}")
                moved.append(f"{name}/{date_dir}/{run}")
    return moved


def new_attempt() -> str:
    """Return an attempt id: its UTC start to the microsecond, then a random suffix (sorts by time)."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:8]


def append_run(
    spark: SparkSession,
    history: str,
    run_id: str,
    summary: dict,
    findings: DataFrame,
    output: str,
    groups: DataFrame | None = None,
) -> dict:
    """Append this run to ``history`` as a new attempt, replacing an earlier committed run with the same ``run_id``.

    ``summary`` is as in summary.json, ``findings`` its findings table; the earlier run is replaced once this one
    is committed (module docstring).  ``groups``: the run's groups table, kept next to the findings.

    Returns
    -------
    dict
        ``{"dir", "run_id", "run_date", "attempt", "replaced"}`` (``replaced``: partition dirs of earlier attempts
        of this run id that were removed, committed or not).
    """
    from ..io.outputs import kill_point

    base = fs.to_uri(history).rstrip("/")
    run_time = datetime.fromisoformat(summary["started_at"]).astimezone(timezone.utc)
    run_date = run_time.strftime("%Y-%m-%d")
    attempt = new_attempt()
    sev = summary["findings"]["by_severity"]
    row = [
        (
            run_id,
            run_time,
            output,
            int(summary.get("exit_status") or 0),
            int(summary["findings"]["total"]),
            *(int(sev.get(s, 0)) for s in ("critical", "error", "warning", "info")),
            int(summary["offset_commits"]["group_partitions"]),
            int(summary["records_read"]["total"]),
            int(sum(summary["records_skipped"]["by_reason"].values())),
            json.dumps(summary, default=str),
        )
    ]
    leaf = f"run_date={run_date}/run_id={partition_value(run_id)}/attempt={attempt}"
    _migrate_legacy(spark, base)
    # the findings first, then the runs row: that row commits the attempt
    (
        findings.withColumn("run_time", F.lit(run_time.strftime("%Y-%m-%d %H:%M:%S.%f")).cast("timestamp"))
        .drop("run_id", "run_date", "attempt")
        .write.mode("overwrite")
        .parquet(f"{base}/findings/{leaf}")
    )
    if groups is not None:
        (
            groups.withColumn("run_time", F.lit(run_time.strftime("%Y-%m-%d %H:%M:%S.%f")).cast("timestamp"))
            .drop("run_id", "run_date", "attempt")
            .write.mode("overwrite")
            .parquet(f"{base}/groups/{leaf}")
        )
    kill_point("history-findings")
    # an aware datetime is converted as UTC whatever the machine's zone; the literal above is read in the
    # session time zone, UTC (audit.spark.build_session)
    spark.createDataFrame(row, RUNS_SCHEMA).drop("run_id").write.mode("overwrite").parquet(f"{base}/runs/{leaf}")
    kill_point("history-marker")
    replaced = []
    for name in (
        "runs",
        "findings",
        "groups",
    ):  # the marker's table first: an attempt left with findings only is never read
        for date_dir in fs.children(spark, f"{base}/{name}") or []:
            if not date_dir.startswith("run_date="):
                continue
            run_dir = f"{base}/{name}/{date_dir}/run_id={partition_value(run_id)}"
            for a in fs.children(spark, run_dir) or []:
                if a != f"attempt={attempt}":
                    fs.delete(spark, f"{run_dir}/{a}")
                    replaced.append(f"{name}/{date_dir}/run_id={partition_value(run_id)}/{a}")
            if date_dir != f"run_date={run_date}" and not [
                n for n in fs.children(spark, run_dir) or [] if not n.startswith(("_", "."))
            ]:
                fs.delete(spark, run_dir)
    return {"dir": history, "run_id": run_id, "run_date": run_date, "attempt": attempt, "replaced": replaced}
