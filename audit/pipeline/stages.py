"""One audit as named stages: the checks, then read, decode, partition state, judge, write, reports and commit.

:func:`preflight` runs the checks that need no Spark job; :func:`run` opens the source and runs the stages, each
named for :class:`audit.pipeline.config.AuditInternalError` (:mod:`audit.pipeline.judging` decodes and judges,
:mod:`audit.pipeline.summary` builds ``summary.json``, :mod:`audit.pipeline.reports` runs what reads the tables),
then commits the output and runs the push and the catalog tables.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

from pyspark.sql import SparkSession

from ..io.outputs import StagedOutput, check_output_parent, check_output_target
from ..sources.source import open_source
from ..spark import in_parallel
from . import config
from .config import EXIT_INTERNAL, AuditConfig, AuditInternalError, Failures, RunResult, usage_errors
from .judging import Decoded, Judged, context_tables, decode, judge_and_write
from .reports import (
    metric_and_console_queries,
    metric_and_console_rows,
    warm_report_imports,
    write_metrics,
    write_reports,
    write_reset_plan_stage,
)
from .summary import build_summary, exit_code, rules_not_run, share_queries, share_summary, summary_queries

__all__ = ["preflight", "run"]


class _Stage:
    """The stage a run is in, for :class:`AuditInternalError` (set by each step; read by the handler)."""

    def __init__(self) -> None:
        self.name = "start"

    def __call__(self, name: str) -> None:
        self.name = name


def preflight(cfg: AuditConfig, spark: SparkSession | None = None, *, cluster: bool = True) -> None:
    """Run the checks that need no Spark job, before any reading, so a bad argument fails in seconds.

    The output's parent must be a writable directory (:func:`audit.io.outputs.check_output_parent`);
    for a live audit (``cluster``) the ``--client-config`` file must parse
    (:func:`audit.sources.client_config.load_client_config`) and a bootstrap broker must answer a
    Metadata request within ``KOA_BOOTSTRAP_CHECK_MS`` (default 15 s,
    :func:`audit.sources.collector.check_bootstrap`).

    Raises
    ------
    audit.io.fs.InputError, audit.sources.client_config.ClientConfigError, audit.sources.collector.CollectorError
        Each naming what to fix (the CLI exits 2).
    audit.report.metrics.MetricsError
        With ``--pushgateway``, when it does not answer.
    """
    check_output_parent(cfg.output, spark)
    if cfg.expectations_config and cfg.reports:
        from ..report.expectations_config import load_expectations_config
        from ..io.fs import InputError

        try:
            load_expectations_config(cfg.expectations_config)
        except (OSError, ValueError) as exc:
            raise InputError(f"--expectations-config {cfg.expectations_config}: {exc}") from None
    if cfg.pushgateway:
        from ..report.metrics import check_pushgateway

        check_pushgateway(cfg.pushgateway)
    if cfg.bootstrap_servers and cluster:
        from ..sources.client_config import load_client_config
        from ..sources.collector import check_bootstrap

        client = load_client_config(cfg.client_config) if cfg.client_config else None
        check_bootstrap(client, bootstrap_servers=cfg.bootstrap_servers)


def run(
    cfg: AuditConfig, spark: SparkSession, *, consumer_factory=None, collect=None, checked: bool = False
) -> RunResult:
    """Audit log dirs (or a live cluster) and write the output contract under ``cfg.output``.

    ``consumer_factory``/``collect`` replace kafka-python in the live source (tests).
    Exit code: 0 when no finding reaches ``cfg.fail_on`` and the expectation suite passes, 1
    otherwise, 3 (:data:`EXIT_INTERNAL`) when a stage after the judged tables were written failed: the report,
    the expectation suite, the metrics, the console table, the history or the catalog tables.  Such a failure
    never discards the tables: ``findings/``, ``committed_offsets/``, the other tables and ``summary.json`` (its
    ``failed_stages``: stage, error, traceback) are written and the output committed; ``metrics.prom`` says
    ``run_success 0`` with ``failed_stage{stage}``.

    Raises :class:`audit.io.fs.InputError` for unusable inputs or an output
    directory that is unsafe to replace or cannot be written (the CLI maps it to exit 2),
    :class:`audit.sources.client_config.ClientConfigError` for a bad ``--client-config``, and
    :class:`audit.sources.collector.CollectorError` for an unreachable or unauthorised cluster
    (also when the failure surfaces in a Spark worker reading ``__consumer_offsets``);
    :class:`AuditInternalError` (exit 3) for any other failure before the tables were written, naming the stage
    (the previous output is then untouched).
    :func:`preflight` runs first unless ``checked`` says the caller ran it; its cluster check is
    skipped when ``consumer_factory``/``collect`` replace the real clients.
    """
    started = time.time()
    started_at = datetime.now(timezone.utc).isoformat()
    if not checked:
        preflight(cfg, spark, cluster=consumer_factory is None and collect is None)
    check_output_target(spark, cfg.output, cfg.log_dirs)
    if cfg.history:
        check_output_target(spark, cfg.history, cfg.log_dirs, replaced=False)
    stage = _Stage()
    if cfg.reports:
        warm_report_imports()
    try:
        stage("read")
        src = open_source(
            spark, cfg, lambda msg: config.progress(cfg, msg), consumer_factory=consumer_factory, collect=collect
        )
        from ..spark import tuned_for_input

        with tuned_for_input(spark, src.input_bytes()) as tuning:
            return _audit(cfg, spark, src, started, started_at, tuning, stage)
    except usage_errors():
        raise
    except AuditInternalError:
        raise
    except Exception as exc:
        raise AuditInternalError(stage.name, exc) from exc


def _history_changes(cfg, spark, summary: dict, j: Judged, started_at: str):
    """Run stage ``history`` (part 1): compare the findings and group statuses with the history's previous run.

    ``summary['history']`` is filled in; None without ``--history``.
    """
    if not cfg.history:
        return None
    from ..report.history import default_run_id, finding_changes, group_changes
    from ..tables import conform

    run_id = cfg.run_id or default_run_id(started_at)
    summary["history"] = {"dir": cfg.history, "run_id": run_id}
    changes, hinfo = finding_changes(spark, cfg.history, run_id, j.findings)
    changes = conform("finding_changes", changes).localCheckpoint()
    gchanges, ginfo = group_changes(spark, cfg.history, run_id, j.groups, hinfo["previous_run_id"])
    gchanges = conform("group_changes", gchanges).localCheckpoint()
    summary["history"].update(hinfo, **ginfo)
    config.progress(
        cfg,
        f"history: since run {hinfo['previous_run_id'] or '(none)'}: {hinfo['new']} new, "
        f"{hinfo['persisted']} persisted, {hinfo['resolved']} resolved; groups: "
        f"{ginfo['groups_changed']} changed status, {ginfo['groups_new']} new, {ginfo['groups_gone']} gone",
    )
    return changes, gchanges


def _written_tables(cfg, spark, out: StagedOutput, j: Judged, context: dict, started_at: str, failures: Failures):
    """Return the output's tables (name -> DataFrame, the rows written) and summary.json's ``history``.

    With ``--history``, the changes since the previous run are computed and written first (stage ``history``).
    """
    tables = {"findings": j.findings, "committed_offsets": j.committed, "groups": j.groups}
    if j.share_partitions is not None:
        tables["share_partitions"] = j.share_partitions
    tables.update(context)
    history: dict = {}
    changes = failures.guard("history", lambda: _history_changes(cfg, spark, history, j, started_at))
    if changes is not None and (
        failures.guard(
            "history",
            lambda: out.write_parquet_all({"finding_changes": changes[0], "group_changes": changes[1]}),
            default=False,
        )
        is not False
    ):
        tables["finding_changes"], tables["group_changes"] = changes
    return tables, history


def _bounded_rows(cfg, src, d: Decoded, j: Judged, state, failures: Failures):
    """Collect ``summary.json``'s aggregates (the share groups' too) and the metrics' and console's rows in one job.

    Should that job fail, the summary's queries are collected alone, and the metrics' and console's: theirs
    failing is recorded as their stages' failure and never loses ``summary.json``.

    Returns
    -------
    tuple
        Part (``summary``, ``share``, ``metrics_console``) -> name -> rows (``metrics_console`` None when its
        queries failed: recorded in ``failures``); and whether the console's queries were built.
    """
    from ..spark import collect_together

    parts = {
        "summary": summary_queries(src, d.raw, j.findings, state.epochs),
        "share": share_queries(d.share_raw, j.share_partitions),
    }
    parts["metrics_console"], console_built = metric_and_console_queries(cfg, j, state.bounds, failures)
    try:
        got = collect_together({f"{p}:{name}": q for p, queries in parts.items() for name, q in queries.items()})
    except Exception:  # noqa: BLE001 - collected again part by part: a failing report part is recorded below
        rows: dict = {p: collect_together(parts[p]) for p in ("summary", "share")}
        try:
            rows["metrics_console"] = collect_together(parts["metrics_console"])
        except Exception as exc:  # noqa: BLE001 - recorded, reported, exit status 3
            rows["metrics_console"] = None
            for stage_name in ("metrics", "console"):
                failures.record(stage_name, exc)
        return rows, console_built
    rows = {p: {} for p in parts}
    for key, part_rows in got.items():
        p, name = key.split(":", 1)
        rows[p][name] = part_rows
    return rows, console_built


def _summarize(cfg, src, d: Decoded, j: Judged, state, started_at: str, rows: dict) -> dict:
    """Stage ``summary``: summary.json's content, from the collected rows of :func:`_bounded_rows`."""
    summary = build_summary(cfg, src, (d.n_live, d.n_latest), started_at, rows["summary"])
    summary["share_groups"] = share_summary(d.share_raw, rows["share"])
    recovered = src.recovered
    summary["records_recovered"] = {"total": sum(r["records"] for r in recovered), "from_replicas": recovered}
    summary["rules_not_run"] = rules_not_run(cfg, state)
    return summary


def _write_first_summary(cfg, out: StagedOutput, summary: dict, started: float, failures: Failures) -> None:
    """Run stage ``reset_plan`` and write ``summary.json`` the first time: the tables are complete.

    It is written before any report runs (the suite reads it); the last write, after the reports, completes it.
    """
    summary["elapsed_seconds"] = round(time.time() - started, 3)
    # the reset plan reads the written tables; the report links each group to its plan
    reset_plan = failures.guard("reset_plan", lambda: write_reset_plan_stage(cfg, out))
    if reset_plan is not None:
        summary["reset_plan"] = reset_plan
    summary["failed_stages"] = failures.failed
    out.write_json("summary.json", summary)


def _append_history(cfg, spark, summary: dict, j: Judged) -> None:
    """Stage ``history`` (part 2): this run's findings and groups appended to ``--history``."""
    from ..report.history import append_run

    appended = append_run(
        spark, cfg.history, summary["history"]["run_id"], summary, j.findings, cfg.output, groups=j.groups
    )
    replaced = f" (replaced {len(appended['replaced'])} dir(s) of the same run id)" if appended["replaced"] else ""
    config.progress(cfg, f"history: run {appended['run_id']} appended to {cfg.history}{replaced}")


def _open_output(cfg: AuditConfig, spark: SparkSession) -> tuple[StagedOutput, dict]:
    """Open the staged output, after removing what killed runs left beside it (reported as progress)."""
    out = StagedOutput(spark, cfg.output)
    leftovers = out.clean_leftovers()
    if leftovers["removed"]:
        config.progress(
            cfg, f"removed {len(leftovers['removed'])} staging dir(s) of killed runs: {', '.join(leftovers['removed'])}"
        )
    if leftovers.get("restored"):
        config.progress(
            cfg, f"restored the previous output from a run killed in its commit: {', '.join(leftovers['restored'])}"
        )
    if leftovers["kept"]:
        config.progress(cfg, f"left alone (another host's or a live run's): {', '.join(leftovers['kept'])}")
    return out, leftovers


def _audit(
    cfg: AuditConfig, spark: SparkSession, src, started: float, started_at: str, tuning, stage: _Stage
) -> RunResult:
    """Run the audit after the checks, as named stages.

    The stages: decode, partition state, judge (writing the judged tables), write (the other tables, beside the
    summary), reports, commit (see :func:`run`).
    """
    from ..queries import parse_ahead

    parse_ahead(spark)
    stage("decode")
    d = decode(cfg, src, tuning)
    stage("partition state")
    state = src.partition_state(
        d.commits, history=cfg.mode == "history", share_raw=d.share_raw, share_topics=d.share_topics
    )
    out, leftovers = _open_output(cfg, spark)
    failures = Failures()
    guarded = failures.guard
    try:
        stage("judge")
        context = context_tables(cfg, d, state)
        # the tables beside the judged ones are written while the judge writes its own
        j, _ = in_parallel(
            lambda: judge_and_write(cfg, spark, d, state, out, started_at), lambda: out.write_parquet_all(context)
        )
        stage("write")
        tables, history = _written_tables(cfg, spark, out, j, context, started_at, failures)
        # one Spark job for summary.json, the metrics and the console
        rows, console_built = _bounded_rows(cfg, src, d, j, state, failures)
        summary = _summarize(cfg, src, d, j, state, started_at, rows)
        summary.update(history, output_leftovers=leftovers)
        n_findings = summary["findings"]["total"]
        config.progress(cfg, f"judge: {n_findings} findings over {d.n_latest} group-partitions")
        _write_first_summary(cfg, out, summary, started, failures)
        stage("reports")
        metric_rows, console, console_rows = metric_and_console_rows(
            cfg, console_built, rows.get("metrics_console"), failures
        )
        # the suite (mostly Python) runs while report.html's queries (one Spark job) do
        if cfg.reports:
            summary["reports"] = write_reports(cfg, spark, out, tables, guarded)
        if cfg.history and not failures.has("history"):
            guarded("history", lambda: _append_history(cfg, spark, summary, j))
        summary["exit_status"] = EXIT_INTERNAL if failures.failed else exit_code(cfg, summary)
        summary["elapsed_seconds"] = round(time.time() - started, 3)
        registry = guarded("metrics", lambda: write_metrics(cfg, spark, out, summary, metric_rows))
        if failures.failed:
            summary["exit_status"] = EXIT_INTERNAL
        stage("write")
        out.write_json("summary.json", summary)
        out.commit()
    except BaseException:
        out.abort()
        raise
    config.progress(cfg, f"write: {cfg.output} ({n_findings} findings)")
    _after_commit(cfg, spark, out, summary, failures, registry, metric_rows)
    return RunResult(summary["exit_status"], summary, console, console_rows)


def _after_commit(cfg, spark, out: StagedOutput, summary: dict, failures: Failures, registry, metric_rows) -> None:
    """Run the stages after the commit: the Pushgateway push and the catalog tables (``--table-prefix``).

    A failed catalog registration turns the committed run's exit status to 3 and rewrites its summary and
    metrics.
    """
    if cfg.pushgateway and registry is not None:
        from ..report.metrics import parse_grouping, push

        push(cfg.pushgateway, registry, job=cfg.pushgateway_job, grouping=parse_grouping(cfg.pushgateway_labels))
        config.progress(cfg, f"metrics: pushed to {cfg.pushgateway} (job {cfg.pushgateway_job})")
    if not cfg.table_prefix:
        return

    def register():
        from ..io.outputs import register_tables

        names = register_tables(spark, out.committed, cfg.table_prefix)
        config.progress(cfg, f"tables: {', '.join(names)}")

    n_failed = len(failures.failed)
    failures.guard("tables", register)
    if len(failures.failed) == n_failed:
        return
    # the output is committed: its summary.json and metrics.prom say so now
    summary["exit_status"] = EXIT_INTERNAL
    from ..report.metrics import METRICS_FILENAME, build_registry, render
    from ..io import fs as _fs

    base = out.committed
    _fs.write_small(spark, f"{base}/summary.json", json.dumps(summary, indent=2, default=str).encode())
    if out.object_store:  # the marker too, naming the same run
        marker = dict(
            summary,
            run_dir=out.committed,
            previous_run_dir=(_fs.read_json(spark, f"{out.output}/summary.json") or {}).get("previous_run_dir"),
        )
        _fs.write_small(spark, f"{out.output}/summary.json", json.dumps(marker, indent=2, default=str).encode())
    if registry is not None:
        rows, lost, group_metric_rows = metric_rows
        _fs.write_small(
            spark,
            f"{base}/{METRICS_FILENAME}",
            render(build_registry(summary, rows, lost=lost, groups=group_metric_rows)),
        )
