"""Self-contained HTML report of an audit output directory.

``write_html_report(spark, output_dir)`` writes ``<output_dir>/report.html``:
a single file that opens offline (no external script, stylesheet, font or
image: plots are matplotlib SVGs, text kept as text, embedded as base64 ``data:`` URIs, CSS and
the small table filter script are inline).

Sections:

1. What to do: how many groups will lose, skip or replay records (the ``groups`` table's ``AT_RISK``) and
   on which topics, then the first actions of the most severe findings (their ``detail``'s ``Action:``).
2. Since the previous run (with ``--history``).
3. Findings, most severe first, each with its ``detail`` text (what is
   wrong, the risk, the action); capped at ``max_findings`` rows with a note,
   in pages of ``FINDINGS_PAGE_SIZE`` with a severity and text filter.
4. Per consumer group: the ``groups`` table, and a chart of findings per group stacked by severity.
5. For every topic-partition with a finding (capped at ``max_plots``, the
   most records at risk first, then the most severe; a note counts the rest): its leader-epoch history per replica as steps (x: offset,
   y: leader epoch), the log start/end offsets, the divergence points of
   ``LOG_TRUNCATION`` findings, and every group's committed offset marked at
   (offset, committed epoch).
6. Run summary (``summary.json``: records read/skipped, where corrupt data was skipped, findings by name and
   severity, elapsed time), verdict counts of ``committed_offsets/``, the Great Expectations outcome
   (``expectations/validation_result.json``, link to ``data_docs/``), and the inputs as tables in a collapsed
   section.

The markup is in Jinja2 templates (``audit/report/templates/``: ``report.html.j2``, one template per section, and
the stylesheet and script it inlines), every value escaped.  This module reads the tables and renders the page;
:mod:`audit.report.html_queries` collects the rows and :mod:`audit.report.html_views` shapes them and draws the
plots.

Only bounded data is collected from Spark: at most ``max_findings``
findings, the per-group counts of at most ``max_groups_in_chart`` groups, and
epochs, bounds and committed offsets of the plotted partitions only.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
from typing import Any, Callable, Dict, List, Mapping, Optional

from ..io import fs
from ..tables import SEVERITIES
from .html_queries import ReportLimits, read_table, report_queries, report_rows
from .html_views import (
    FINDINGS_PAGE_SIZE,
    changes_view,
    findings_view,
    groups_view,
    plot_views,
    summary_view,
    todo_view,
)
from .plots import plot_group_chart


__all__ = [
    "FINDINGS_PAGE_SIZE",
    "REPORT_FILENAME",
    "ReportLimits",
    "html_report_queries",
    "write_html_report",
]

REPORT_FILENAME = "report.html"


def _template_env():
    """Build the Jinja2 environment of ``audit/report/templates/``.

    Every ``{{ value }}`` is escaped as :func:`html.escape` does (quotes too), None rendered as nothing.
    """
    global _ENV
    if _ENV is None:
        from jinja2 import Environment, PackageLoader
        from markupsafe import Markup

        def finalize(value: Any) -> Any:
            if value is None:
                return ""
            if isinstance(value, Markup):
                return value
            return Markup(html.escape(str(value), quote=True))

        _ENV = Environment(
            loader=PackageLoader("audit.report", "templates"),
            autoescape=True,
            finalize=finalize,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
    return _ENV


_ENV: Any = None


def _static(name: str):
    """Read a file of ``templates/`` (the page's stylesheet and script), inlined as is."""
    from importlib.resources import files

    from markupsafe import Markup

    return Markup((files("audit.report") / "templates" / name).read_text(encoding="utf-8"))


def html_report_queries(
    spark, tables_dir: str, tables: Mapping[str, Any] | None = None, limits: ReportLimits | None = None
) -> Dict[str, Any]:
    """Build the bounded queries report.html collects (name -> DataFrame; no Spark job).

    The tables come from ``tables`` (name -> DataFrame, the rows written) or else from ``tables_dir``.  Collect
    them with :func:`audit.spark.collect_together`, alone or with other bounded queries, and shape the rows with
    :func:`audit.report.html_queries.report_rows`.

    Raises
    ------
    FileNotFoundError
        ``tables_dir`` has no ``findings/`` table.
    """
    given = dict(tables or {})

    def table(name: str):
        return given[name] if name in given else read_table(spark, tables_dir, name)

    try:
        return report_queries(table, limits or ReportLimits())
    except FileNotFoundError:
        raise FileNotFoundError(f"findings/ not found under {tables_dir}") from None


def write_html_report(
    spark,
    output_dir: str,
    *,
    max_findings: int = ReportLimits.max_findings,
    max_plots: int = ReportLimits.max_plots,
    max_groups_per_plot: int = ReportLimits.max_groups_per_plot,
    max_groups_in_chart: int = ReportLimits.max_groups_in_chart,
    max_epoch_rows: int = ReportLimits.max_epoch_rows,
    max_skipped_locations: int = 200,
    max_changes: int = ReportLimits.max_changes,
    max_groups_in_table: int = ReportLimits.max_groups_in_table,
    title: str = "Kafka consumer offset audit",
    display_dir: str | None = None,
    tables_dir: str | None = None,
    wait_for: Callable[[], Any] | None = None,
    tables: Mapping[str, Any] | None = None,
) -> str:
    """Write ``<output_dir>/report.html``, a self-contained report of an audit run.

    The Spark queries (:func:`html_report_queries`: the findings, per-group and per-partition aggregates,
    verdict counts and groups, the plotted partitions' epochs, bounds, commits and broker events, the changes)
    run in one job.

    Parameters
    ----------
    spark : SparkSession
        An active ``pyspark.sql.SparkSession``.
    output_dir : str
        The audit's output directory.  Reads ``findings/`` (required; columns ``group_id, topic, partition,
        finding, severity, committed_offset, committed_leader_epoch, commit_timestamp, divergence_offset,
        records_at_risk, epoch_end_offset, log_start_offset, log_end_offset, previous_offset,
        previous_leader_epoch, answered_by_broker, detail``), and when present ``committed_offsets/``
        (``group_id, topic, partition, committed_offset, committed_leader_epoch, verdict``), ``epochs/``
        (``topic, partition, broker_id, leader_epoch, start_offset, is_leader``), ``bounds/`` (``topic,
        partition, log_start_offset, log_end_offset, high_watermark, leader_id``), ``summary.json`` and
        ``expectations/validation_result.json``; the ``Per group`` section lists ``groups/`` (group_id, status,
        group_type, group_state, partitions_committed, total_lag, max_lag, worst_verdict, findings_*,
        records_at_risk, latest_commit_timestamp, latest_commit_age_seconds).
    max_findings : int
        Most findings listed in the table (most severe first); a note says how many were left out.
    max_plots : int
        Most topic-partitions plotted (those with the most severe findings first); a note says how many were
        left out.
    max_groups_per_plot : int
        Most groups' committed offsets marked per plot (groups with a finding first).
    max_groups_in_chart : int
        Most groups in the findings-per-group chart.
    max_epoch_rows : int
        Most epoch-cache rows collected for all plots together.
    max_skipped_locations : int
        Most ``records_skipped.where`` entries listed.
    max_changes : int
        Most rows listed per status (new, resolved, persisted) of ``finding_changes/`` (written with
        ``--history``).
    max_groups_in_table : int
        Most rows of ``groups/`` listed (worst status first); a note says how many were left out.
    title : str
        The page title.
    display_dir : str, optional
        The output directory named on the page (default ``output_dir``).
    tables_dir : str, optional
        Where the tables and ``summary.json`` are, when not in ``output_dir``: any Hadoop-compatible URI;
        ``output_dir`` is then a local directory holding ``expectations/`` and receiving ``report.html``.
    wait_for : callable, optional
        Called once the tables are collected and the plots drawn, before ``expectations/validation_result.json``
        is read and the page put together: a caller running the expectation suite at the same time passes its
        wait (its errors propagate).
    tables : mapping, optional
        The output's tables the caller holds in memory, name -> Spark DataFrame with the rows written under that
        name (the audit passes its materialised tables); those are not read back.  A table absent from it is
        read from ``tables_dir``.

    Returns
    -------
    str
        The path of the written ``report.html``.

    Raises
    ------
    FileNotFoundError
        ``output_dir`` or its ``findings/`` table is missing.
    """
    output_dir = os.path.abspath(output_dir)
    tables_dir = tables_dir or output_dir
    from ..spark import collect_together

    limits = ReportLimits(
        max_findings=max_findings,
        max_plots=max_plots,
        max_groups_per_plot=max_groups_per_plot,
        max_groups_in_chart=max_groups_in_chart,
        max_epoch_rows=max_epoch_rows,
        max_changes=max_changes,
        max_groups_in_table=max_groups_in_table,
    )
    first, second = report_rows(collect_together(html_report_queries(spark, tables_dir, tables, limits)))

    summary = fs.read_json(spark, f"{tables_dir}/summary.json")
    plan = fs.read_json(spark, f"{tables_dir}/reset_plan/plan.json") or {}
    plots = plot_views(first["plot_rows"], first["rows"], second)
    group_uri = plot_group_chart(first["group_counts"])

    # the plots are drawn: now the expectation suite's result, when a caller runs it at the same time
    if wait_for is not None:
        wait_for()
    expectations = _read_validation_result(output_dir)

    page = _render_page(
        first,
        second,
        plots,
        group_uri,
        summary,
        expectations,
        plan,
        title=title,
        display_dir=display_dir or output_dir,
        output_dir=output_dir,
        max_findings=max_findings,
        max_plots=max_plots,
        max_groups_in_chart=max_groups_in_chart,
        max_groups_in_table=max_groups_in_table,
        max_changes=max_changes,
        max_skipped_locations=max_skipped_locations,
    )
    return _write_page(output_dir, page)


def _render_page(
    first: Mapping[str, Any],
    second: Mapping[str, Any],
    plots: List[Dict[str, Any]],
    group_uri: Optional[str],
    summary: Optional[Dict[str, Any]],
    expectations: Optional[Dict[str, Any]],
    plan: Mapping[str, Any],
    *,
    title: str,
    display_dir: str,
    output_dir: str,
    max_findings: int,
    max_plots: int,
    max_groups_in_chart: int,
    max_groups_in_table: int,
    max_changes: int,
    max_skipped_locations: int,
) -> str:
    """Render the report page's HTML (``templates/report.html.j2``).

    From the collected rows (:func:`audit.report.html_queries.report_rows`), the drawn plots and the expectation
    result.
    """
    history = (summary or {}).get("history")
    groups = groups_view(first["group_rows"], first["n_group_rows"], max_groups_in_table)
    groups.update(
        chart=group_uri,
        chart_cap=max_groups_in_chart,
        chart_left_out=max(0, first["n_groups"] - len(first["group_counts"])),
    )
    return (
        _template_env()
        .get_template("report.html.j2")
        .render(
            title=title,
            css=_static("report.css"),
            script=_static("report.js"),
            display_dir=display_dir,
            generated=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            history=history,
            todo=todo_view(first["statuses"], first["rows"], first["total"], plan=plan),
            changes=changes_view(history, second["change_rows"], max_changes, second["gchange_rows"]),
            findings=findings_view(first["rows"], first["total"], max_findings),
            severities=SEVERITIES,
            groups=groups,
            plots=plots,
            plots_left_out=max(0, first["n_tp"] - len(first["plot_rows"])),
            max_plots=max_plots,
            summary=summary_view(summary, first["verdicts"], expectations, output_dir, max_skipped_locations),
        )
    )


def _read_validation_result(output_dir: str) -> Optional[Dict[str, Any]]:
    """``<output_dir>/expectations/validation_result.json`` as loaded JSON; None when absent."""
    exp_path = os.path.join(output_dir, "expectations", "validation_result.json")
    if not os.path.isfile(exp_path):
        return None
    with open(exp_path, "r", encoding="utf-8") as fh:
        return json.load(fh)


def _write_page(output_dir: str, page: str) -> str:
    """Write ``page`` to ``<output_dir>/report.html`` atomically (a temporary file, then a rename).

    Returns
    -------
    str
        The path.
    """
    path = os.path.join(output_dir, REPORT_FILENAME)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.replace(tmp, path)
    return path
