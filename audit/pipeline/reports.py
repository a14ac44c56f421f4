"""The stages after the judged tables: report.html, the expectation suite, ``metrics.prom`` and the console table.

:func:`write_reports` runs the suite and report.html side by side;
:func:`metric_and_console_queries` builds the metrics' and the console's queries (collected with
``summary.json``'s) and :func:`metric_and_console_rows` renders their rows; :func:`write_metrics` writes
``metrics.prom``.  Each part runs
under :meth:`audit.pipeline.config.Failures.guard`: a failed one is recorded and leaves the tables alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from pyspark.sql import SparkSession

from ..io.outputs import StagedOutput
from ..report.console import console_queries, render_console
from ..tables import failing_severities
from . import config
from .config import AuditConfig, Failures
from .judging import Judged

__all__ = [
    "CONSOLE_FAILED",
    "metric_and_console_queries",
    "metric_and_console_rows",
    "warm_report_imports",
    "write_metrics",
    "write_reports",
    "write_reset_plan_stage",
]


def _metric_queries(cfg: AuditConfig, j: Judged, bounds) -> dict:
    """Build the per-group-partition, lost-lineage and per-group queries of ``metrics.prom``.

    Share-partitions are among the group-partitions.  Each query gives at most
    ``--metrics-max-group-partitions`` rows; :mod:`audit.report.metrics`.
    """
    from ..report.metrics import group_partition_query, group_query, lost_lineage_query

    limit = cfg.metrics_max_group_partitions
    if not limit:
        return {}
    queries = {
        "partitions": group_partition_query(j.committed, j.findings, bounds, limit, j.share_partitions),
        "groups": group_query(j.groups, limit),
    }
    lost = lost_lineage_query(j.findings, limit)
    if lost is not None:
        queries["lost"] = lost
    return queries


CONSOLE_FAILED = "(the console table failed: see summary.json's failed_stages)"


def metric_and_console_queries(cfg: AuditConfig, j: Judged, bounds, failures: Failures) -> tuple[dict, bool]:
    """Build stage ``metrics``' and ``console``'s bounded queries (name -> DataFrame, no Spark job).

    The names start ``m_`` (the metrics) and ``c_`` (the console).  A stage whose queries cannot be built is
    recorded in ``failures`` and has none.

    Returns
    -------
    tuple
        The queries, and whether the console's were built.
    """
    mq = failures.guard("metrics", lambda: _metric_queries(cfg, j, bounds))
    cq = failures.guard(
        "console", lambda: console_queries(j.findings, j.committed, bounds, cfg.max_rows, groups=j.groups)
    )
    queries = {**{f"m_{k}": v for k, v in (mq or {}).items()}, **{f"c_{k}": v for k, v in (cq or {}).items()}}
    return queries, cq is not None


def metric_and_console_rows(cfg: AuditConfig, console_built: bool, rows: dict | None, failures: Failures) -> tuple:
    """Run stage ``metrics`` (its rows) and ``console`` from the collected rows of their queries.

    ``console_built``: :func:`metric_and_console_queries` built the console's queries; ``rows``: the rows
    collected for those queries (the audit collects them with ``summary.json``'s aggregates), or None when that
    collect failed (the caller records the failure for both stages): no rows and :data:`CONSOLE_FAILED`.

    Returns
    -------
    tuple
        The metric rows (per group-partition, lost lineage, per group), the console text and the console's
        rows.
    """
    if rows is None:
        return ([], [], []), CONSOLE_FAILED, {}
    metric_rows = (rows.get("m_partitions", []), rows.get("m_lost", []), rows.get("m_groups", []))
    console, parts = CONSOLE_FAILED, {}
    if console_built:
        parts = {k[2:]: v for k, v in rows.items() if k.startswith("c_")}
        console = failures.guard("console", lambda: render_console(parts, cfg.max_rows), CONSOLE_FAILED)
    return metric_rows, console, parts


def write_metrics(
    cfg: AuditConfig, spark: SparkSession, out: StagedOutput, summary: dict, metric_rows: tuple[list, list, list]
):
    """Write ``metrics.prom`` (from :func:`metric_and_console_rows`) into the staged output.

    Returns
    -------
    CollectorRegistry
        The registry (pushed after the commit).
    """
    from ..report.metrics import METRICS_FILENAME, build_registry, render
    from ..io import fs

    rows, lost, group_metric_rows = metric_rows
    registry = build_registry(summary, rows, lost=lost, groups=group_metric_rows)
    fs.write_small(spark, out.path(METRICS_FILENAME), render(registry))
    summary["metrics"] = {
        "file": METRICS_FILENAME,
        "group_partitions_exported": len(rows),
        "group_partitions_left_out": max(
            0,
            summary["offset_commits"]["group_partitions"]
            + (summary.get("share_groups") or {}).get("share_partitions", 0)
            - len(rows),
        ),
        "pushgateway": cfg.pushgateway,
        "job": cfg.pushgateway_job if cfg.pushgateway else None,
    }
    return registry


def warm_report_imports() -> None:
    """Import the reports' slow libraries in a daemon thread: Great Expectations (about 3 s of Python), matplotlib.

    Started when an audit with reports begins, the imports run while the driver mostly waits for Spark (the
    read and the decode), instead of holding the GIL while the reports' own Spark queries are built.  A failed
    import is left to the stage that needs the library, which reports it.
    """
    import threading

    def imports() -> None:
        try:
            from ..report.expectations_suites import import_gx

            import_gx()
            import matplotlib.backends.backend_svg  # noqa: F401
        except Exception:  # noqa: BLE001 - the stage importing it again records the error
            pass

    threading.Thread(target=imports, name="koa-warm-imports", daemon=True).start()


def write_reports(cfg: AuditConfig, spark: SparkSession, out: StagedOutput, tables: dict, guarded) -> dict:
    """Run stage ``reports``: the Great Expectations suite (+ Data Docs) and report.html over the staged output.

    The suite (mostly Python: GX's pandas engine for small tables) runs in a thread while report.html's queries
    (one Spark job) run and the page is rendered; for an output that is not local (HDFS, S3 ...) both are built in
    a local temporary directory and then copied into it.  ``tables``: the staged tables (name -> DataFrame, the
    rows written), which report.html's queries read instead of the Parquet files (the suite validates what was
    written).

    ``guarded(stage, fn, default)`` runs each part (stages ``expectations`` and ``html_report``) so that one
    failing leaves the other and the tables alone (:mod:`audit.pipeline.stages`).  The suite fails on findings at
    or above ``--fail-on`` (none for ``never``); its other expectations are data-quality checks with thresholds
    from ``--expectations-config``.

    Returns
    -------
    dict
        summary.json's ``reports``; a failed part is ``{"error": ...}`` in it.
    """
    from concurrent.futures import ThreadPoolExecutor

    from ..io import fs
    from ..report.expectations import run_expectations
    from ..report.expectations_config import load_expectations_config
    from ..report.html import REPORT_FILENAME, write_html_report
    from ..spark import inheriting

    remote = not fs.is_local(out.staging)
    local = tempfile.mkdtemp(prefix="koa-reports-") if remote else fs.local_path(out.staging)
    tables_dir = out.staging if remote else None
    failed = object()

    def suite():
        ecfg = load_expectations_config(cfg.expectations_config)
        ecfg = ecfg.model_copy(update={"fail_on_severities": failing_severities(cfg.fail_on)})
        return run_expectations(spark, local, ecfg, tables_dir=tables_dir)

    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="koa-expectations") as pool:
            running = pool.submit(inheriting(suite))

            def wait_for_suite():
                try:
                    running.result()
                except Exception:  # noqa: BLE001 - the suite's own stage records it below
                    pass

            page = guarded(
                "html_report",
                lambda: write_html_report(
                    spark,
                    local,
                    display_dir=out.committed,
                    tables_dir=tables_dir,
                    wait_for=wait_for_suite,
                    tables=tables,
                ),
                failed,
            )
            outcome = guarded("expectations", running.result, failed)
        if outcome is not failed:
            stats = outcome.statistics
            passed = "passed" if outcome.success else "FAILED"
            config.progress(
                cfg,
                f"expectations: {passed} ({stats.get('successful_expectations')}/{stats.get('evaluated_expectations')})",
            )
        if remote:
            for name in ("expectations", "data_docs", REPORT_FILENAME):
                if os.path.exists(os.path.join(local, name)):
                    fs.upload(spark, os.path.join(local, name), out.path(name))
    finally:
        if remote:
            shutil.rmtree(local, ignore_errors=True)
    return {
        "expectations": _suite_summary(None if outcome is failed else outcome),
        "html_report": "report.html" if page not in (None, failed) else None,
    }


def _suite_summary(outcome) -> dict:
    """Build summary.json's ``reports.expectations``: the suite's success, failed checks and statistics.

    Also where its result and Data Docs are; ``{"error": ...}`` when the suite did not run to the end (``outcome``
    None).
    """
    if outcome is None:
        return {"error": "the expectation suite failed: see failed_stages"}
    return {
        "success": bool(outcome.success),
        "failed": list(outcome.failed_checks),
        "statistics": {k: v for k, v in outcome.statistics.items() if k != "by_asset"},
        "result": "expectations/validation_result.json",
        "data_docs": "data_docs/index.html",
    }


def write_reset_plan_stage(cfg: AuditConfig, out: StagedOutput) -> dict:
    """Run stage ``reset_plan``: ``reset_plan/`` of the staged output, from its written tables (pyarrow, no Spark).

    Returns
    -------
    dict
        summary.json's ``reset_plan`` (:meth:`audit.report.reset_plan.ResetPlan.summary`); for an output that is
        not local, why there is none (``kafka-offset-audit plan`` makes it from a local copy).
    """
    from ..io import fs
    from ..report.reset_plan import PLAN_DIRNAME, build_reset_plan, read_plan_inputs, write_reset_plan

    if not fs.is_local(out.staging):
        return {"skipped": "the output is not local: run kafka-offset-audit plan on a local copy of it"}
    staging = fs.local_path(out.staging)
    plan = build_reset_plan(fail_on=cfg.fail_on, **read_plan_inputs(staging))
    write_reset_plan(plan, os.path.join(staging, PLAN_DIRNAME))
    if plan.groups:
        config.progress(
            cfg, f"reset plan: {len(plan.groups)} group(s) in {PLAN_DIRNAME}/ (never applied: see its README.md)"
        )
    return plan.summary()
