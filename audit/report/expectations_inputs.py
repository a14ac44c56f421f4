"""The inputs the expectation suites validate: the audit's tables read as pandas or Spark DataFrames.

A table of at most ``ExpectationsConfig.pandas_max_rows`` rows is read once into the driver (pyarrow for a local
output, one Spark ``toPandas`` otherwise); a larger one stays a Spark DataFrame.  ``groups`` is read with the
columns that check it against ``committed_offsets/`` and ``findings/``, and ``summary.json`` becomes a one-row
frame.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from audit.io import fs
from audit.report.expectations_config import ExpectationsConfig
from audit.report.expectations_suites import GROUPS_REQUIRED, PARQUET_ASSETS, REQUIRED_ASSETS

__all__ = ["add_group_type", "read_inputs"]


def _sum_counts(node: Any) -> int:
    """Sum the integer leaves of a ``{name: count}`` mapping (tolerates nesting)."""
    if isinstance(node, bool):
        return 0
    if isinstance(node, (int, float)):
        return int(node)
    if isinstance(node, dict):
        return sum(_sum_counts(v) for v in node.values())
    return 0


def _summary_row(summary: Dict[str, Any], findings_rows: int) -> Dict[str, Any]:
    """Return the ``summary.json`` figures the suite checks, as one row (column -> value)."""
    read = _sum_counts((summary.get("records_read") or {}).get("by_record_type") or {})
    skipped_block = summary.get("records_skipped") or {}
    skipped = _sum_counts(skipped_block.get("by_reason") or {})
    where = skipped_block.get("where") or []
    findings_total = _sum_counts((summary.get("findings") or {}).get("by_name") or {})
    total = read + skipped
    return {
        "records_read_total": read,
        "records_skipped_total": skipped,
        "skipped_fraction": (skipped / total) if total else 0.0,
        "corrupt_batches": len(where),
        "findings_total": findings_total,
        "findings_rows": findings_rows,
    }


def _summary_frame(spark, summary: Dict[str, Any], findings_rows: int):
    """One-row Spark DataFrame of :func:`_summary_row`."""
    from pyspark.sql.types import DoubleType, LongType, StructField, StructType

    row = _summary_row(summary, findings_rows)
    schema = StructType([StructField(k, DoubleType() if k == "skipped_fraction" else LongType(), False) for k in row])
    return spark.createDataFrame([tuple(row.values())], schema=schema)


def _local_rows(path: str) -> Optional[int]:
    """Count the rows of a local Parquet table directory from its files' footers (no Spark job).

    Returns
    -------
    int or None
        None when ``path`` is not local or a footer does not read.
    """
    if not fs.is_local(path):
        return None
    import pyarrow.parquet as pq

    try:
        return sum(pq.read_metadata(f).num_rows for f in fs.parquet_files(path))
    except (OSError, ValueError):
        return None


def _to_pandas(table):
    """Convert an Arrow table to pandas, integer columns as pandas' nullable integers.

    A null stays null and a value stays an integer, as GX's Spark engine sees them; plain ``to_pandas`` would make
    floats.
    """
    import pandas as pd
    import pyarrow as pa

    ints = {
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
    }
    return table.to_pandas(types_mapper=ints.get)


def _table_frame(spark, path: str, cfg: ExpectationsConfig):
    """Return ``(frame, rows)`` of one table, a pandas or a Spark DataFrame.

    A pandas DataFrame for GX's pandas engine when ``cfg`` allows it and the table has at most
    ``cfg.pandas_max_rows`` rows (read by pyarrow when local, else by one Spark ``toPandas`` after a ``count``),
    otherwise a Spark DataFrame (rows None: not counted).

    Raises
    ------
    ValueError
        For ``engine='pandas'`` and a table above the limit.
    """
    if cfg.engine == "spark":
        return fs.read_parquet(spark, path), None
    rows = _local_rows(path)
    if rows is not None and rows <= cfg.pandas_max_rows:
        import pyarrow.dataset as pads

        return _to_pandas(pads.dataset(fs.local_path(path), format="parquet").to_table()), rows
    sdf = fs.read_parquet(spark, path)
    if rows is None:
        rows = sdf.count()
    if rows <= cfg.pandas_max_rows:
        return _to_pandas(sdf.toArrow()), rows  # bounded by pandas_max_rows
    if cfg.engine == "pandas":
        raise ValueError(
            f"{path} has {rows} rows, above pandas_max_rows={cfg.pandas_max_rows}: "
            "raise the limit or use engine 'auto' or 'spark'"
        )
    return sdf, None


def _groups_frame(spark, tables_dir: str, cfg: ExpectationsConfig):
    """Return the ``groups`` table with the figures it must agree with, recomputed from the other tables.

    The figures are recomputed from ``committed_offsets/`` and ``findings/`` (one Spark job):
    ``check_partitions`` (the group's committed rows), ``check_findings`` (its findings rows; ``findings_total``
    sums the table's four counts), ``check_worst_present`` (1 when a committed row of the group has the worst
    verdict at the worst topic-partition, or the verdict ``OK`` with none), ``check_worst_severity`` (the most
    severe severity of the group's verdicts' findings), ``groups_rows`` and ``committed_groups`` (the tables'
    numbers of groups).  pandas when at most ``cfg.pandas_max_rows`` groups.
    """
    from pyspark.sql import functions as F

    g = fs.read_parquet(spark, f"{tables_dir}/groups")
    c = fs.read_parquet(spark, f"{tables_dir}/committed_offsets")
    f = fs.read_parquet(spark, f"{tables_dir}/findings").where(F.col("group_id").isNotNull())
    out = _groups_checked(g, c, f)
    if cfg.engine == "spark":
        return out
    rows = _local_rows(f"{tables_dir}/groups")  # one row per group (its footers, no job), else counted
    if rows is None:
        rows = out.count()
    if rows <= cfg.pandas_max_rows:
        return _to_pandas(out.toArrow())
    if cfg.engine == "pandas":
        raise ValueError(
            f"groups/ has {rows} rows, above pandas_max_rows={cfg.pandas_max_rows}: "
            "raise the limit or use engine 'auto' or 'spark'"
        )
    return out


def _groups_checked(g, c, f):
    """Join the groups table ``g`` with its ``check_*`` columns and the tables' group counts.

    A Spark DataFrame, no job (see :func:`_groups_frame`), from ``committed_offsets`` ``c`` and the group
    findings ``f``.
    """
    from pyspark.sql import functions as F

    per_committed = c.groupBy("group_id").agg(F.count(F.lit(1)).alias("check_partitions"))
    per_findings = f.groupBy("group_id").agg(F.count(F.lit(1)).alias("check_findings"))
    counts = g.agg(F.count(F.lit(1)).alias("groups_rows")).crossJoin(
        c.agg(F.count_distinct("group_id").alias("committed_groups"))
    )
    return (
        g.join(per_committed, "group_id", "left")
        .join(per_findings, "group_id", "left")
        .join(_group_worst_severity(c, f), "group_id", "left")
        .join(_group_worst_present(g, c), "group_id", "left")
        .crossJoin(counts)
        .select(
            *GROUPS_REQUIRED,
            F.coalesce("check_partitions", F.lit(0)).alias("check_partitions"),
            (
                F.col("findings_critical")
                + F.col("findings_error")
                + F.col("findings_warning")
                + F.col("findings_info")
            ).alias("findings_total"),
            F.coalesce("check_findings", F.lit(0)).alias("check_findings"),
            F.coalesce("check_worst_present", F.lit(0)).alias("check_worst_present"),
            "check_worst_severity",
            "groups_rows",
            "committed_groups",
        )
    )


def _group_worst_severity(c, f):
    """Return ``(group_id, check_worst_severity)``: the most severe severity of each group's verdicts' findings.

    That is, of the findings matching each group's committed rows' verdicts (null without one); a Spark
    DataFrame, no job.
    """
    from pyspark.sql import functions as F

    rank = F.create_map(
        *[x for i, sev in enumerate(("info", "warning", "error", "critical"), 1) for x in (F.lit(sev), F.lit(i))]
    )
    by_rank = F.create_map(
        *[x for i, sev in enumerate(("info", "warning", "error", "critical"), 1) for x in (F.lit(i), F.lit(sev))]
    )
    key = ["group_id", "topic", "partition", "committed_offset"]
    verdict_sev = (
        c.join(
            f.select(*key, F.col("finding").alias("verdict"), rank[F.col("severity")].alias("r")),
            key + ["verdict"],
            "left",
        )
        .groupBy("group_id")
        .agg(F.count(F.lit(1)).alias("rows_joined"), F.max("r").alias("r"))
    )
    return verdict_sev.select("group_id", by_rank[F.col("r")].alias("check_worst_severity"))


def _group_worst_present(g, c):
    """Return ``(group_id, check_worst_present = 1)`` of the groups whose worst verdict is present.

    Those whose worst verdict is a committed row's verdict at the worst topic-partition (any, without one); a
    Spark DataFrame, no job.
    """
    from pyspark.sql import functions as F

    return (
        g.alias("g")
        .join(
            c.alias("c"),
            (F.col("g.group_id") == F.col("c.group_id"))
            & (F.col("g.worst_verdict") == F.col("c.verdict"))
            & (
                F.col("g.worst_topic").isNull()
                | ((F.col("g.worst_topic") == F.col("c.topic")) & (F.col("g.worst_partition") == F.col("c.partition")))
            ),
            "left_semi",
        )
        .select("group_id", F.lit(1).alias("check_worst_present"))
    )


def read_inputs(
    spark, tables_dir: str, wanted: Sequence[str], cfg: Optional[ExpectationsConfig] = None
) -> Tuple[Dict[str, Any], List[str]]:
    """Read the wanted tables (local path or Hadoop URI), each as a pandas or Spark DataFrame.

    Each is read by :func:`_table_frame`; absent optional ones are reported.
    """
    cfg = cfg or ExpectationsConfig()
    frames: Dict[str, Any] = {}
    skipped: List[str] = []
    counted: Dict[str, Optional[int]] = {}
    for name in PARQUET_ASSETS:
        if name not in wanted and not (name == "findings" and "summary" in wanted):
            continue
        path = f"{tables_dir}/{name}"
        if not fs.exists(spark, path):
            if name in REQUIRED_ASSETS and name in wanted:
                raise FileNotFoundError(f"audit output table {name}/ is missing under {tables_dir}")
            if name in wanted:
                skipped.append(name)
            continue
        if name in wanted:
            frames[name], counted[name] = _table_frame(spark, path, cfg)
        elif name == "findings":
            counted[name] = _local_rows(path)
    if "groups" in wanted:
        if fs.exists(spark, f"{tables_dir}/groups"):
            frames["groups"] = _groups_frame(spark, tables_dir, cfg)
        else:  # an output written before the table existed
            skipped.append("groups")
    if "summary" in wanted:
        summary = fs.read_json(spark, f"{tables_dir}/summary.json")
        findings_path = f"{tables_dir}/findings"
        if summary is None:
            skipped.append("summary")
        elif not fs.exists(spark, findings_path):
            raise FileNotFoundError(f"audit output table findings/ is missing under {tables_dir}")
        else:
            findings_rows = counted.get("findings")
            if findings_rows is None:
                findings_rows = fs.read_parquet(spark, findings_path).count()
            if cfg.engine == "spark":
                frames["summary"] = _summary_frame(spark, summary, findings_rows)
            else:
                import pandas as pd

                frames["summary"] = pd.DataFrame([_summary_row(summary, findings_rows)])
    return frames, skipped


def add_group_type(frames: Dict[str, Any]) -> None:
    """Give ``frames["findings"]`` a null ``group_type`` column when it has none, in place.

    Such an output was written before the column existed.

    Returns
    -------
    None
    """
    f = frames.get("findings")
    if f is not None and "group_type" not in f.columns:
        if hasattr(f, "sparkSession"):
            frames["findings"] = f.selectExpr("*", "CAST(NULL AS STRING) AS group_type")
        else:
            frames["findings"] = f.assign(group_type=None)
