"""The Great Expectations suites of the audit's output: one suite per table and one for ``summary.json``.

:func:`build_suites` builds them (nothing is validated here); :func:`import_gx` imports Great Expectations
lazily and quietly.  What each suite checks is listed in :mod:`audit.report.expectations`.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Dict, List, Tuple

from audit.report.expectations_config import ConfigSource, ExpectationsConfig, load_expectations_config
from audit.tables import FINDING_COLUMNS, GROUP_STATUSES

__all__ = [
    "ALL_ASSETS",
    "BOUNDS_REQUIRED",
    "COMMITS_REQUIRED",
    "COMMITTED_REQUIRED",
    "EPOCHS_REQUIRED",
    "GROUPS_REQUIRED",
    "PARQUET_ASSETS",
    "REQUIRED_ASSETS",
    "TRUNCATION_CAUSES",
    "build_suites",
    "import_gx",
]


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
