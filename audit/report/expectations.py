"""Great Expectations suite over the audit's output directory.

``run_expectations(spark, output_dir)`` reads the Parquet tables the audit
wrote (``findings/``, ``committed_offsets/``, ``commits/`` if present,
``epochs/``, ``bounds/``) and ``summary.json``, validates each one
against its own expectation suite through a GX Checkpoint, writes the combined validation
result to ``<output>/expectations/validation_result.json`` and builds a Data
Docs site into ``<output>/data_docs/`` (``index.html``).

Where GX computes (``ExpectationsConfig.engine``): a table of at most
``pandas_max_rows`` rows (default 200,000) is read once into the driver (pyarrow
for a local output, one Spark ``toPandas`` otherwise) and validated by GX's
pandas engine; a larger one is validated by GX's Spark engine in the caller's
SparkSession, which runs one or more Spark jobs per expectation (about 140 for
the whole suite), the fixed cost that dominated a small audit.

The GX context is ephemeral (in memory): nothing is written to the repository
or the home directory; only the two output paths above are touched.

What the suites check (thresholds from :class:`ExpectationsConfig`):

* findings: contract columns present; keys not null; ``finding`` and
  ``severity`` in the known sets and paired as AUDIT_RULES.md says; no finding
  of a failing severity (default: no ``critical``); a ``LOG_TRUNCATION`` row
  carries ``divergence_offset`` below its committed offset and
  ``records_at_risk`` >= 1; every row has a ``detail`` text.
* committed_offsets: contract columns present; at least N rows;
  ``(group_id, topic, partition)`` unique; ``committed_offset`` >= 0;
  ``committed_leader_epoch`` >= -1; the share of verifiable commits
  (epoch >= 0) above a floor; ``verdict`` is ``OK`` or a known finding;
  ``value_version`` known.
* commits (history mode, when present): offsets >= 0, epochs >= -1, value
  versions known.
* epochs: epochs and start offsets >= 0; one entry per (topic, partition,
  broker, epoch).
* bounds: one row per (topic, partition); 0 <= log start <= high watermark <=
  log end.
* groups (when present): one row per group, a known status, and consistent
  with the other tables: its partitions are the group's rows in
  ``committed_offsets/``, its finding counts its rows in ``findings/``, its worst
  verdict is one of its partitions' verdicts at the most severe of their
  severities, and every group of ``committed_offsets/`` has its row.
* summary (from ``summary.json``): records were read; optionally the skipped
  fraction and corrupt batch count are bounded; its findings total equals the
  number of rows in ``findings/``.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shutil
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from audit.io import fs
from audit.tables import FINDING_COLUMNS, GROUP_STATUSES
from audit.report.expectations_config import (
    ConfigSource,
    ExpectationsConfig,
    load_expectations_config,
)


__all__ = [
    "ALL_ASSETS",
    "BOUNDS_REQUIRED",
    "COMMITS_REQUIRED",
    "COMMITTED_REQUIRED",
    "DATA_DOCS_DIRNAME",
    "EPOCHS_REQUIRED",
    "GROUPS_REQUIRED",
    "PARQUET_ASSETS",
    "REQUIRED_ASSETS",
    "RESULT_RELPATH",
    "TRUNCATION_CAUSES",
    "ExpectationsOutcome",
    "FailedExpectation",
    "build_suites",
    "import_gx",
    "run_expectations",
]

log = logging.getLogger(__name__)

#: Tables read from the output directory, in validation order.
PARQUET_ASSETS: Tuple[str, ...] = ("findings", "committed_offsets", "commits", "epochs", "bounds")
#: Everything that can be validated: the tables plus ``groups`` (checked against the tables it sums) and
#: ``summary`` (summary.json).
ALL_ASSETS: Tuple[str, ...] = PARQUET_ASSETS + ("groups", "summary")
#: Tables that must exist; the others are validated only when present.
REQUIRED_ASSETS: Tuple[str, ...] = ("findings", "committed_offsets", "epochs", "bounds")

#: ``cause`` of a LOG_TRUNCATION (``sql/finding_log_truncation.sql``).
TRUNCATION_CAUSES = ("unclean_election", "replica_divergence", "stale_client_epoch", "unknown")
#: the columns each table must have for the suite (its ``expect_table_columns_to_match_set`` checks): subsets of
#: the output contract, :data:`audit.tables.TABLES`
COMMITTED_REQUIRED = (
    "group_id",
    "topic",
    "partition",
    "committed_offset",
    "committed_leader_epoch",
    "metadata",
    "commit_timestamp",
    "value_version",
    "verdict",
)
COMMITS_REQUIRED = COMMITTED_REQUIRED[:-1] + ("source_partition", "source_offset")
EPOCHS_REQUIRED = ("topic", "partition", "broker_id", "leader_epoch", "start_offset", "is_leader")
GROUPS_REQUIRED = (
    "group_id",
    "group_type",
    "group_state",
    "partitions_committed",
    "total_lag",
    "max_lag",
    "worst_verdict",
    "worst_severity",
    "worst_topic",
    "worst_partition",
    "findings_critical",
    "findings_error",
    "findings_warning",
    "findings_info",
    "latest_commit_timestamp",
    "latest_commit_age_seconds",
    "status",
)
BOUNDS_REQUIRED = (
    "topic",
    "partition",
    "log_start_offset",
    "local_log_start_offset",
    "log_end_offset",
    "high_watermark",
    "leader_id",
)

RESULT_RELPATH = os.path.join("expectations", "validation_result.json")
DATA_DOCS_DIRNAME = "data_docs"
_SITE_NAME = "audit_output"


@dataclass(frozen=True)
class FailedExpectation:
    """One expectation that did not pass.

    ``check`` is the stable name this module gives the expectation (e.g.
    ``findings.no_failing_severity``); ``observed`` is GX's result dict
    (observed value, unexpected counts and a few unexpected values);
    ``exception`` is set when GX could not evaluate it (e.g. a missing column).
    """

    asset: str
    check: str
    expectation_type: str
    column: Optional[str]
    observed: Dict[str, Any]
    exception: Optional[str] = None


@dataclass(frozen=True)
class ExpectationsOutcome:
    """What :func:`run_expectations` found.

    Attributes
    ----------
    success : bool
        Every evaluated expectation passed.
    statistics : dict
        ``evaluated_expectations``, ``successful_expectations``, ``unsuccessful_expectations``, ``success_percent``
        over all assets, plus ``by_asset`` with the same four per asset.
    result_path : str
        Path of the combined validation result JSON.
    data_docs_index : str or None
        Path of the Data Docs ``index.html`` (None when not built).
    failed : list of FailedExpectation
        The expectations that failed.
    skipped_assets : list of str
        Optional tables that were absent (e.g. ``commits``).
    """

    success: bool
    statistics: Dict[str, Any]
    result_path: str
    data_docs_index: Optional[str]
    failed: List[FailedExpectation] = field(default_factory=list)
    skipped_assets: List[str] = field(default_factory=list)

    @property
    def failed_checks(self) -> List[str]:
        """Names (``<asset>.<check>``) of the failed expectations, sorted."""
        return sorted(f.check for f in self.failed)


# --------------------------------------------------------------------------- suites


def _spark_connect_guard() -> None:
    """Keep ``pyspark.sql.connect`` from ending the process while Great Expectations imports it.

    GX's ``compatibility/pyspark.py`` imports ``pyspark.sql.connect.dataframe`` (and treats an ImportError as
    "no Spark Connect").  In a process whose ``__main__`` has no file (``python -c``, a script on stdin),
    pyspark takes itself for a doctest run and, when Spark Connect's client dependencies (grpcio ...) are
    missing, calls ``sys.exit(0)`` (``pyspark/sql/connect/utils.py``, ``check_dependencies``): an audit run
    that way ended silently with exit status 0, whatever it found.  There, and only when those dependencies
    are missing (``pyspark.testing.utils.should_test_connect``), the module is marked absent, so its import
    raises the ImportError GX expects.
    """
    if "pyspark.sql.connect" in sys.modules:
        return
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None or hasattr(main, "__file__") or hasattr(sys, "ps1"):
        return
    from pyspark.testing.utils import should_test_connect

    if not should_test_connect:
        sys.modules["pyspark.sql.connect"] = None  # type: ignore[assignment]  # import of it (and its submodules) raises ModuleNotFoundError


def _defer_scipy_stats() -> None:
    """Leave ``scipy.stats`` unloaded until something uses it.

    Three of GX's modules (the KL-divergence expectation and two Kolmogorov-Smirnov metrics, none of which this
    suite uses) run ``from scipy import stats`` when GX is imported; loading ``scipy.stats`` was about 0.7 s of
    GX's 2.7 s import here, taken while the Spark JVM starts.  Before GX is imported, ``scipy.stats`` is set up
    with the standard library's ``importlib.util.LazyLoader``: the module object exists (on ``scipy`` and in
    ``sys.modules``) and the first attribute read of it loads it in full, so any use sees the real module.
    Nothing happens when ``scipy.stats`` is already imported or scipy is missing.
    """
    if "scipy.stats" in sys.modules:
        return
    import importlib.util

    try:
        import scipy

        spec = importlib.util.find_spec("scipy.stats")
    except ImportError:
        return
    if spec is None or spec.loader is None:
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["scipy.stats"] = module
    spec.loader.exec_module(module)
    scipy.stats = module  # ``from scipy import stats`` reads the attribute before importing


def import_gx():
    """Import great_expectations lazily, quietly (its import is slow and chatty).

    See :func:`_spark_connect_guard` and :func:`_defer_scipy_stats`.
    """
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    _spark_connect_guard()
    _defer_scipy_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import great_expectations as gx  # noqa: WPS433
    return gx


def build_suites(config: ConfigSource = None) -> Dict[str, Any]:
    """Build the expectation suites, one per asset, without validating anything.

    Parameters
    ----------
    config : ConfigSource
        An :class:`ExpectationsConfig`, a mapping of overrides, a JSON/YAML path, or None for the defaults.

    Returns
    -------
    dict of str to gx.ExpectationSuite
        ``{asset_name: gx.ExpectationSuite}`` for ``findings``, ``committed_offsets``, ``commits``, ``epochs``,
        ``bounds`` and ``summary``.  Every expectation's ``meta["check"]`` holds its stable name
        (``<asset>.<check>``).
    """
    cfg = load_expectations_config(config)
    gx = import_gx()
    E = gx.expectations
    suites: Dict[str, Any] = {}
    for asset, checks_of in (
        ("findings", _findings_checks),
        ("committed_offsets", _committed_checks),
        ("commits", _commits_checks),
        ("epochs", _epochs_checks),
        ("bounds", _bounds_checks),
        ("groups", _groups_checks),
        ("summary", _summary_checks),
    ):
        checks = checks_of(E, cfg)
        for check, exp in checks:
            exp.meta = {"check": f"{asset}.{check}"}
        suites[asset] = gx.ExpectationSuite(name=f"{cfg.suite_prefix}.{asset}", expectations=[exp for _, exp in checks])
    return suites


def _columns(E: Any, cols) -> Any:
    """Expect that the table has (at least) the columns ``cols``."""
    return E.ExpectTableColumnsToMatchSet(column_set=list(cols), exact_match=False)


def _not_null(E: Any, col: str) -> Any:
    """Expect that ``col`` has no null."""
    return E.ExpectColumnValuesToNotBeNull(column=col)


def _findings_checks(E: Any, cfg: ExpectationsConfig) -> List[Tuple[str, Any]]:
    """Return the ``findings`` suite's ``(check, expectation)`` pairs."""
    from great_expectations.expectations.row_conditions import Column

    is_trunc = Column("finding") == "LOG_TRUNCATION"
    per_group = Column("finding") != "REPLICA_DIVERGENCE"  # the per-partition finding has no group
    f_checks: List[Tuple[str, Any]] = [
        ("columns", _columns(E, FINDING_COLUMNS)),
        ("group_id_not_null", E.ExpectColumnValuesToNotBeNull(column="group_id", row_condition=per_group)),
        ("topic_not_null", _not_null(E, "topic")),
        ("partition_not_negative", E.ExpectColumnValuesToBeBetween(column="partition", min_value=0)),
        ("finding_known", E.ExpectColumnValuesToBeInSet(column="finding", value_set=list(cfg.known_findings))),
        ("severity_known", E.ExpectColumnValuesToBeInSet(column="severity", value_set=list(cfg.known_severities))),
        (
            "severity_matches_finding",
            E.ExpectColumnPairValuesToBeInSet(
                column_A="finding",
                column_B="severity",
                value_pairs_set=cfg.finding_severity_pairs(),
                ignore_row_if="either_value_is_missing",
            ),
        ),
        (
            "detail_present",
            E.ExpectColumnValueLengthsToBeBetween(column="detail", min_value=max(cfg.min_detail_length, 0)),
        ),
        ("detail_not_null", _not_null(E, "detail")),
        (
            "truncation_cause_known",
            E.ExpectColumnValuesToBeInSet(column="cause", value_set=list(TRUNCATION_CAUSES), row_condition=is_trunc),
        ),
        (
            "truncation_has_divergence",
            E.ExpectColumnValuesToNotBeNull(column="divergence_offset", row_condition=is_trunc),
        ),
        (
            "truncation_records_at_risk",
            E.ExpectColumnValuesToBeBetween(column="records_at_risk", min_value=1, row_condition=is_trunc),
        ),
        (
            "truncation_divergence_below_commit",
            E.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="committed_offset",
                column_B="divergence_offset",
                or_equal=False,
                ignore_row_if="either_value_is_missing",
                # a share group's state can sit below the divergence point with acknowledged batches past it
                row_condition=(is_trunc & Column("group_type").is_null())
                | (is_trunc & (Column("group_type") != "share")),
            ),
        ),
    ]
    if cfg.fail_on_severities:
        f_checks.insert(
            1,
            (
                "no_failing_severity",
                E.ExpectColumnValuesToNotBeInSet(column="severity", value_set=list(cfg.fail_on_severities)),
            ),
        )
    return f_checks


def _committed_checks(E: Any, cfg: ExpectationsConfig) -> List[Tuple[str, Any]]:
    """Return the ``committed_offsets`` suite's ``(check, expectation)`` pairs."""
    verdicts = ["OK"] + list(cfg.known_findings)
    c_checks: List[Tuple[str, Any]] = [
        ("columns", _columns(E, COMMITTED_REQUIRED)),
        ("row_count", E.ExpectTableRowCountToBeBetween(min_value=cfg.min_committed_offsets)),
        ("key_unique", E.ExpectCompoundColumnsToBeUnique(column_list=["group_id", "topic", "partition"])),
        ("group_id_not_null", _not_null(E, "group_id")),
        ("committed_offset_not_null", _not_null(E, "committed_offset")),
        ("committed_offset_not_negative", E.ExpectColumnValuesToBeBetween(column="committed_offset", min_value=0)),
        ("leader_epoch_valid", E.ExpectColumnValuesToBeBetween(column="committed_leader_epoch", min_value=-1)),
        ("verdict_known", E.ExpectColumnValuesToBeInSet(column="verdict", value_set=verdicts)),
        (
            "value_version_known",
            E.ExpectColumnValuesToBeInSet(column="value_version", value_set=list(cfg.known_value_versions)),
        ),
    ]
    if cfg.min_verifiable_commit_share > 0:
        c_checks.append(
            (
                "verifiable_share",
                E.ExpectColumnValuesToBeBetween(
                    column="committed_leader_epoch", min_value=0, mostly=float(cfg.min_verifiable_commit_share)
                ),
            )
        )
    return c_checks


def _commits_checks(E: Any, cfg: ExpectationsConfig) -> List[Tuple[str, Any]]:
    """Return the ``commits`` suite's ``(check, expectation)`` pairs (history mode)."""
    return [
        ("columns", _columns(E, COMMITS_REQUIRED)),
        ("committed_offset_not_negative", E.ExpectColumnValuesToBeBetween(column="committed_offset", min_value=0)),
        ("leader_epoch_valid", E.ExpectColumnValuesToBeBetween(column="committed_leader_epoch", min_value=-1)),
        (
            "value_version_known",
            E.ExpectColumnValuesToBeInSet(column="value_version", value_set=list(cfg.known_value_versions)),
        ),
    ]


def _epochs_checks(E: Any, cfg: ExpectationsConfig) -> List[Tuple[str, Any]]:
    """Return the ``epochs`` suite's ``(check, expectation)`` pairs."""
    return [
        ("columns", _columns(E, EPOCHS_REQUIRED)),
        ("leader_epoch_not_negative", E.ExpectColumnValuesToBeBetween(column="leader_epoch", min_value=0)),
        ("start_offset_not_negative", E.ExpectColumnValuesToBeBetween(column="start_offset", min_value=0)),
        (
            "entry_unique",
            E.ExpectCompoundColumnsToBeUnique(column_list=["topic", "partition", "broker_id", "leader_epoch"]),
        ),
    ]


def _bounds_checks(E: Any, cfg: ExpectationsConfig) -> List[Tuple[str, Any]]:
    """Return the ``bounds`` suite's ``(check, expectation)`` pairs."""
    return [
        ("columns", _columns(E, BOUNDS_REQUIRED)),
        ("key_unique", E.ExpectCompoundColumnsToBeUnique(column_list=["topic", "partition"])),
        ("log_start_not_negative", E.ExpectColumnValuesToBeBetween(column="log_start_offset", min_value=0)),
        (
            "log_end_not_below_start",
            E.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="log_end_offset",
                column_B="log_start_offset",
                or_equal=True,
                ignore_row_if="either_value_is_missing",
            ),
        ),
        (
            # tiered storage: the local log starts at or after the log start (UnifiedLog.localLogStartOffset)
            "local_log_start_not_below_start",
            E.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="local_log_start_offset",
                column_B="log_start_offset",
                or_equal=True,
                ignore_row_if="either_value_is_missing",
            ),
        ),
        (
            "high_watermark_not_above_end",
            E.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A="log_end_offset",
                column_B="high_watermark",
                or_equal=True,
                ignore_row_if="either_value_is_missing",
            ),
        ),
    ]


def _groups_checks(E: Any, cfg: ExpectationsConfig) -> List[Tuple[str, Any]]:
    """Return the ``groups`` suite's ``(check, expectation)`` pairs.

    They check the table against the tables it sums (the ``check_*`` columns of :func:`_groups_frame`).
    """
    return [
        ("columns", _columns(E, GROUPS_REQUIRED)),
        ("key_unique", E.ExpectColumnValuesToBeUnique(column="group_id")),
        ("status_known", E.ExpectColumnValuesToBeInSet(column="status", value_set=list(GROUP_STATUSES))),
        (
            "partitions_match_committed",
            E.ExpectColumnPairValuesToBeEqual(column_A="partitions_committed", column_B="check_partitions"),
        ),
        ("findings_match", E.ExpectColumnPairValuesToBeEqual(column_A="findings_total", column_B="check_findings")),
        (
            "worst_verdict_is_a_partitions",
            E.ExpectColumnValuesToBeInSet(column="check_worst_present", value_set=[1]),
        ),
        (
            "worst_severity_matches",
            E.ExpectColumnPairValuesToBeEqual(
                column_A="worst_severity", column_B="check_worst_severity", ignore_row_if="both_values_are_missing"
            ),
        ),
        (
            "every_committed_group",
            E.ExpectColumnPairValuesToBeEqual(column_A="groups_rows", column_B="committed_groups"),
        ),
    ]


def _summary_checks(E: Any, cfg: ExpectationsConfig) -> List[Tuple[str, Any]]:
    """Return the ``summary`` suite's ``(check, expectation)`` pairs.

    They check ``summary.json``'s figures (:func:`_summary_row`).
    """
    s_checks: List[Tuple[str, Any]] = [
        ("records_read", E.ExpectColumnValuesToBeBetween(column="records_read_total", min_value=cfg.min_records_read)),
        (
            "findings_total_matches",
            E.ExpectColumnPairValuesToBeEqual(column_A="findings_total", column_B="findings_rows"),
        ),
    ]
    if cfg.max_skipped_fraction is not None:
        s_checks.append(
            (
                "skipped_fraction",
                E.ExpectColumnValuesToBeBetween(column="skipped_fraction", max_value=float(cfg.max_skipped_fraction)),
            )
        )
    if cfg.max_corrupt_batches is not None:
        s_checks.append(
            (
                "corrupt_batches",
                E.ExpectColumnValuesToBeBetween(column="corrupt_batches", max_value=int(cfg.max_corrupt_batches)),
            )
        )
    return s_checks


# --------------------------------------------------------------------------- inputs


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


def _read_inputs(
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


# --------------------------------------------------------------------------- running


def _result_format(cfg: ExpectationsConfig) -> Dict[str, Any]:
    return {
        "result_format": cfg.result_format,
        "partial_unexpected_count": cfg.partial_unexpected_count,
    }


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (_dt.datetime, _dt.date)):
        return obj.isoformat()
    if hasattr(obj, "to_json_dict"):
        return obj.to_json_dict()
    try:  # numpy / pandas scalars of the pandas engine: the plain value (pd.NA -> None)
        import numpy as np
        import pandas as pd

        if obj is pd.NA or obj is pd.NaT:
            return None
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, pd.Timestamp):
            return obj.isoformat()
    except ImportError:  # pragma: no cover
        pass
    return str(obj)


def run_expectations(
    spark,
    output_dir: str,
    config: ConfigSource = None,
    assets: Optional[Sequence[str]] = None,
    tables_dir: Optional[str] = None,
) -> ExpectationsOutcome:
    """Validate an audit output directory with Great Expectations.

    The pandas engine is used for small tables, Spark for large ones: ``ExpectationsConfig.engine``.

    Parameters
    ----------
    spark : SparkSession
        The active ``pyspark.sql.SparkSession`` (GX validates in it).
    output_dir : str
        The audit's output directory, holding the Parquet tables ``findings/``, ``committed_offsets/``,
        ``epochs/``, ``bounds/``, optionally ``commits/`` (history mode) and ``summary.json``.  The tables need
        the contract's columns (see the module docstring); extra columns are allowed.
    config : ConfigSource
        Thresholds: an :class:`ExpectationsConfig`, a mapping of overrides, a JSON/YAML file path, or None for
        the defaults.
    assets : sequence of str, optional
        Validate only these of :data:`ALL_ASSETS` (default: all); e.g. ``["committed_offsets"]`` for a quick
        check.
    tables_dir : str, optional
        Where the tables and ``summary.json`` are, when not in ``output_dir``: any Hadoop-compatible URI (the
        audit's staged output on HDFS, S3 ...); ``output_dir`` is then a local directory for the validation
        result and Data Docs only.

    Returns
    -------
    ExpectationsOutcome
        Side effects: writes ``<output_dir>/expectations/validation_result.json`` (overall success and
        statistics, the config used, and each asset's GX validation result) and, unless
        ``config.build_data_docs`` is false, replaces ``<output_dir>/data_docs/`` with a fresh Data Docs site.

    Raises
    ------
    FileNotFoundError
        ``output_dir`` or a required table is missing.
    pydantic.ValidationError, ValueError
        A bad config or asset name, or ``engine='pandas'`` with a table above ``pandas_max_rows``.
    """
    cfg = load_expectations_config(config)
    wanted = _wanted_assets(assets)
    output_dir = os.path.abspath(output_dir)
    if not os.path.isdir(output_dir):
        raise FileNotFoundError(f"audit output directory not found: {output_dir}")

    gx = import_gx()
    suites = build_suites(cfg)
    frames, skipped = _read_inputs(spark, tables_dir or output_dir, wanted, cfg)
    _add_group_type(frames)

    docs_dir = os.path.join(output_dir, DATA_DOCS_DIRNAME)
    ctx = _ephemeral_context(gx, cfg, docs_dir)
    run_id = gx.RunIdentifier(run_name=f"audit-{os.path.basename(output_dir)}")
    cached: List[Any] = []
    try:
        results = _validate_frames(gx, ctx, frames, suites, cfg, run_id, cached)
        docs_index = _build_data_docs(ctx, cfg, docs_dir)
    finally:
        for df in cached:
            try:
                df.unpersist()
            except Exception:  # pragma: no cover
                pass

    return _write_outcome(output_dir, cfg, results, skipped, docs_index)


def _wanted_assets(assets: Optional[Sequence[str]]) -> List[str]:
    """Return the assets to validate (all of :data:`ALL_ASSETS` for None).

    Raises
    ------
    ValueError
        For an unknown or empty selection.
    """
    wanted = list(ALL_ASSETS) if assets is None else list(assets)
    unknown = sorted(set(wanted) - set(ALL_ASSETS))
    if unknown or not wanted:
        raise ValueError(f"assets must be a non-empty subset of {list(ALL_ASSETS)}: {unknown}")
    return wanted


def _add_group_type(frames: Dict[str, Any]) -> None:
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


def _ephemeral_context(gx: Any, cfg: ExpectationsConfig, docs_dir: str) -> Any:
    """Create an ephemeral GX context, quiet (no analytics, no progress bars).

    Its only Data Docs site is ``docs_dir`` (emptied first) when ``cfg.build_data_docs``, else none.
    """
    ctx = gx.get_context(mode="ephemeral")
    try:
        ctx.enable_analytics(False)
    except Exception:  # pragma: no cover - older/newer GX without the switch
        pass
    try:
        ctx.variables.progress_bars = {"globally": False, "metric_calculations": False}
    except Exception:  # pragma: no cover
        pass
    for site in list((ctx.get_config().data_docs_sites or {}).keys()):
        ctx.delete_data_docs_site(site)
    if cfg.build_data_docs:
        if os.path.isdir(docs_dir):
            shutil.rmtree(docs_dir)
        ctx.add_data_docs_site(
            site_name=_SITE_NAME,
            site_config={
                "class_name": "SiteBuilder",
                "show_how_to_buttons": False,
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": docs_dir,
                },
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
    return ctx


def _validate_frames(
    gx: Any,
    ctx: Any,
    frames: Dict[str, Any],
    suites: Dict[str, Any],
    cfg: ExpectationsConfig,
    run_id: Any,
    cached: List[Any],
) -> Dict[str, Any]:
    """Run each frame's suite through its own GX Checkpoint.

    A Spark frame is persisted for its run and appended to ``cached`` (the caller unpersists them).

    Returns
    -------
    dict
        ``{asset_name: validation result}``.
    """
    datasources: Dict[str, Any] = {}
    results: Dict[str, Any] = {}
    for asset_name, df in frames.items():
        engine = "spark" if hasattr(df, "sparkSession") else "pandas"
        if engine == "spark":
            df = df.persist()
            cached.append(df)
        if engine not in datasources:
            datasources[engine] = (
                ctx.data_sources.add_spark(name="audit_output", persist=False)
                if engine == "spark"
                else ctx.data_sources.add_pandas(name="audit_output_pandas")
            )
        asset = datasources[engine].add_dataframe_asset(name=asset_name)
        batch_def = asset.add_batch_definition_whole_dataframe(name=f"{asset_name}_all")
        gx_suite = ctx.suites.add(suites[asset_name])
        vdef = ctx.validation_definitions.add(
            gx.ValidationDefinition(name=f"validate_{asset_name}", data=batch_def, suite=gx_suite)
        )
        checkpoint = ctx.checkpoints.add(
            gx.Checkpoint(
                name=f"checkpoint_{asset_name}",
                validation_definitions=[vdef],
                actions=[],
                result_format=_result_format(cfg),
            )
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cp_result = checkpoint.run(batch_parameters={"dataframe": df}, run_id=run_id)
        results[asset_name] = list(cp_result.run_results.values())[0]
    return results


def _build_data_docs(ctx: Any, cfg: ExpectationsConfig, docs_dir: str) -> Optional[str]:
    """Build the Data Docs site into ``docs_dir`` and make it work offline when ``cfg.build_data_docs``.

    Returns
    -------
    str or None
        The path of its ``index.html``, None when not built.
    """
    if not cfg.build_data_docs:
        return None
    ctx.build_data_docs(site_names=[_SITE_NAME])
    index = os.path.join(docs_dir, "index.html")
    docs_index = index if os.path.isfile(index) else None
    if docs_index:
        from .offline_docs import make_offline

        make_offline(docs_dir)  # GX's pages load their assets from CDNs: bundle them
    return docs_index


def _exception_message(info: Any) -> Optional[str]:
    """Get the message of GX's exception_info.

    GX's exception_info is either one {raised_exception, exception_message} dict or,
    for metric errors, a dict of them keyed by metric id.
    """
    if not isinstance(info, dict):
        return None
    if "raised_exception" in info or "exception_message" in info:
        if info.get("raised_exception") or info.get("exception_message"):
            return str(info.get("exception_message"))
        return None
    messages = [
        str(v.get("exception_message")) for v in info.values() if isinstance(v, dict) and v.get("exception_message")
    ]
    return "; ".join(dict.fromkeys(messages)) or None


def _write_outcome(
    output_dir: str,
    cfg: ExpectationsConfig,
    results: Dict[str, Any],
    skipped: List[str],
    docs_index: Optional[str],
) -> ExpectationsOutcome:
    failed: List[FailedExpectation] = []
    by_asset: Dict[str, Dict[str, Any]] = {}
    totals = {"evaluated_expectations": 0, "successful_expectations": 0, "unsuccessful_expectations": 0}
    for asset_name, vr in results.items():
        stats = dict(vr.statistics)
        by_asset[asset_name] = {
            k: stats.get(k)
            for k in (
                "evaluated_expectations",
                "successful_expectations",
                "unsuccessful_expectations",
                "success_percent",
            )
        }
        for k in totals:
            totals[k] += int(stats.get(k) or 0)
        for r in vr.results:
            if r.success:
                continue
            conf = r.expectation_config
            meta = conf.meta or {}
            exc = _exception_message(r.exception_info)
            failed.append(
                FailedExpectation(
                    asset=asset_name,
                    check=str(meta.get("check", f"{asset_name}.{conf.type}")),
                    expectation_type=conf.type,
                    column=conf.kwargs.get("column"),
                    observed=json.loads(json.dumps(r.result or {}, default=_json_default)),
                    exception=exc,
                )
            )
    evaluated = totals["evaluated_expectations"]
    statistics: Dict[str, Any] = dict(totals)
    statistics["success_percent"] = 100.0 * totals["successful_expectations"] / evaluated if evaluated else 100.0
    statistics["by_asset"] = by_asset
    success = all(vr.success for vr in results.values())

    result_path = os.path.join(output_dir, RESULT_RELPATH)
    os.makedirs(os.path.dirname(result_path), exist_ok=True)
    document = {
        "success": success,
        "statistics": statistics,
        "failed_checks": sorted(f.check for f in failed),
        "skipped_assets": skipped,
        "data_docs_index": docs_index,
        "config": cfg.model_dump(),
        "validation_results": {name: vr.to_json_dict() for name, vr in results.items()},
    }
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(document, fh, indent=2, default=_json_default)

    log.info(
        "audit output expectations %s: %d of %d met%s; result %s",
        "passed" if success else "FAILED",
        totals["successful_expectations"],
        evaluated,
        f" (failed: {', '.join(sorted(f.check for f in failed))})" if failed else "",
        result_path,
    )
    return ExpectationsOutcome(
        success=success,
        statistics=statistics,
        result_path=result_path,
        data_docs_index=docs_index,
        failed=failed,
        skipped_assets=skipped,
    )
