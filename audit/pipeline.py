"""run(config, spark): sources -> commits -> judge -> outputs.  No rules of its own."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from . import __version__
from .commits import live_commits, with_transaction_state
from .formats.offsets import RECORD_TYPE_NAMES
from .groups import DEFAULT_STALE_AFTER_SECONDS, group_status
from .judge import judge, with_verdicts
from .owners import group_tables, subscribed_topics, with_owners
from .io.outputs import StagedOutput, check_output_parent, check_output_target
from .report.console import CONSOLE_FINDINGS, console_queries, render_console
from .sources.source import cache_disagreements
from .sources.source import open_source
from .spark import collect_together, in_parallel
from .tables import SEVERITIES, failing_severities, fails


__all__ = [
    "in_scope",
    "CONSOLE_FAILED",
    "EXIT_INTERNAL",
    "MAX_COUNTED_VERSION",
    "MAX_TRACEBACK",
    "MAX_WHERE",
    "OTHER_KIND",
    "RECORD_COLUMNS",
    "AuditConfig",
    "AuditInternalError",
    "Decoded",
    "Judged",
    "RunResult",
    "preflight",
    "run",
    "usage_errors",
]

#: the decoded columns the commit and summary stages read (file names stay in ``raw`` for issues)
RECORD_COLUMNS = [
    "source_partition",
    "kind",
    "offset",
    "timestamp",
    "is_transactional",
    "producer_id",
    "control_type",
    "record_type",
    "group_id",
    "topic",
    "partition",
    "is_tombstone",
    "value_version",
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp",
    "topic_id",
    "decode_error",
    "broker_id",
    "record_count",
    "live_count",
    "group_generation",
    "group_protocol_type",
    "group_protocol",
    "group_members",
    "group_owners",
    "member_id",
]
#: exit status of a run whose stage failed (an internal error; :class:`AuditInternalError`); the CLI's others: 0 clean,
#: 1 findings or a failed suite, 2 usage, input or cluster (:func:`usage_errors`)
EXIT_INTERNAL = 3
#: characters of a failed stage's traceback kept in ``summary.json`` (its last ones)
MAX_TRACEBACK = 4000
MAX_WHERE = 1000
#: ``records_read.by_record_type`` stays bounded whatever bytes the log holds: record types other than
#: :data:`audit.formats.offsets.RECORD_TYPE_NAMES` (and -1, a key too short for one) and value versions outside
#: -1 .. MAX_COUNTED_VERSION are counted under one ``OTHER_KIND`` each (``records_skipped.where`` keeps the first
#: records' own types, files and positions)
MAX_COUNTED_VERSION = 127
OTHER_KIND = -32768


class AuditConfig(BaseModel):
    """Arguments of ``kafka-offset-audit audit`` / ``jobs/audit_offsets.py``."""

    log_dirs: list[str] = Field(default_factory=list)
    bootstrap_servers: str | None = None
    client_config: str | None = None
    groups: str | None = None
    topics: str | None = None
    exclude_groups: str | None = None
    exclude_topics: str | None = None
    max_rows: int = CONSOLE_FINDINGS
    format: Literal["table", "json"] = "table"
    output: str
    mode: Literal["latest", "history"] = "latest"
    fail_on: Literal["critical", "error", "warning", "never"] = "error"
    quiet: bool = False
    reports: bool = True
    expectations_config: str | None = None
    table_prefix: str | None = None
    pushgateway: str | None = None
    pushgateway_job: str = "kafka_offset_audit"
    pushgateway_labels: list[str] = Field(default_factory=list)
    metrics_max_group_partitions: int = Field(default=50_000, ge=0)
    stale_after_seconds: int = Field(default=DEFAULT_STALE_AFTER_SECONDS, ge=0)
    history: str | None = None
    run_id: str | None = None
    max_concurrency: int | None = Field(default=None, ge=1, le=64)
    source: Literal["kafka-python", "kafka-connector"] = "kafka-python"

    @model_validator(mode="after")
    def _one_source(self):
        if bool(self.log_dirs) == bool(self.bootstrap_servers):
            raise ValueError(
                "give either --log-dirs DIR [DIR ...] or --bootstrap-servers HOST:PORT, not both or neither"
            )
        if self.source == "kafka-connector" and not self.bootstrap_servers:
            raise ValueError("--source kafka-connector reads a live cluster: give --bootstrap-servers")
        if self.max_rows < 1:
            raise ValueError(f"--max-rows {self.max_rows}: give a number of rows of at least 1")
        for name in ("groups", "topics", "exclude_groups", "exclude_topics"):
            pattern = getattr(self, name)
            if pattern:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    flag = name.replace("_", "-")
                    raise ValueError(f"--{flag} is not a valid regular expression: {exc}") from exc
        from .report.metrics import MetricsError, parse_grouping

        try:
            parse_grouping(self.pushgateway_labels)
        except MetricsError as exc:
            raise ValueError(str(exc)) from None
        if self.run_id is not None and (not self.run_id.strip() or "/" in self.run_id or len(self.run_id) > 200):
            raise ValueError(f"--run-id {self.run_id!r}: give a non-empty id without '/' (at most 200 characters)")
        if self.history is not None:
            h, o = self.history.rstrip("/"), self.output.rstrip("/")
            if not h.strip() or h == o or h.startswith(o + "/") or o.startswith(h + "/"):
                raise ValueError(
                    f"--history {self.history!r} must be a directory apart from --output (the output "
                    "is replaced on every run; the history accumulates)"
                )
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", self.pushgateway_job):
            raise ValueError(f"--pushgateway-job {self.pushgateway_job!r}: use letters, digits and _")
        return self

    @field_validator("output")
    @classmethod
    def _output_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("--output must name a directory")
        return v


@dataclass
class RunResult:
    """One audit's outcome: its exit status, ``summary.json``'s content, the console text, and the console's rows.

    The console's rows are ``findings``, ``groups`` and ``committed``: dicts, at most ``--max-rows`` each and one
    more to tell that there are more; empty when the console stage failed.
    """

    exit_code: int
    summary: dict
    console: str
    console_rows: dict = field(default_factory=dict)


class AuditInternalError(RuntimeError):
    """The audit failed in ``stage`` through no fault of its input or arguments (exit status 3).

    ``stage``: where it failed (``read``, ``decode``, ``judge``, ``write`` ...); ``cause``: the exception;
    ``output``: what is left of the output (``None``: nothing was written, the previous output is untouched).
    """

    def __init__(self, stage: str, cause: BaseException, output: str | None = None):
        self.stage, self.cause, self.output = stage, cause, output
        super().__init__(f"internal error in stage {stage!r}: {type(cause).__name__}: {cause}")


class _Stage:
    """The stage a run is in, for :class:`AuditInternalError` (set by each step; read by the handler)."""

    def __init__(self) -> None:
        self.name = "start"

    def __call__(self, name: str) -> None:
        self.name = name


def usage_errors() -> tuple[type[BaseException], ...]:
    """Return the errors whose message names what the user must fix (exit status 2): not internal errors.

    The CLI maps these to exit status 2.
    """
    from .report.metrics import MetricsError
    from .sources.client_config import ClientConfigError
    from .sources.collector import CollectorError
    from .io.fs import InputError

    return InputError, CollectorError, ClientConfigError, MetricsError


def _failure(stage: str, exc: BaseException) -> dict:
    """Describe a failed stage as ``summary.json`` records it: stage, error (type and message), traceback's tail."""
    import traceback

    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"stage": stage, "error": f"{type(exc).__name__}: {exc}", "traceback": tb[-MAX_TRACEBACK:]}


def _progress(cfg: AuditConfig, msg: str) -> None:
    """Print a progress line: on stdout, or on stderr when stdout carries JSON (``--format json``).

    No line with ``--quiet``.
    """
    if not cfg.quiet:
        out = sys.stderr if cfg.format == "json" else sys.stdout
        print(f"[kafka-offset-audit {time.strftime('%H:%M:%S')}] {msg}", flush=True, file=out)


def in_scope(commits, cfg: AuditConfig):
    """Keep the ``commits`` in the audit's scope.

    In scope: group ids and topic names that ``--groups``/``--topics`` match whole, less those
    ``--exclude-groups``/``--exclude-topics`` match whole (Java regular expressions, Spark's ``rlike``).
    """
    if cfg.groups:
        commits = commits.where(F.col("group_id").rlike(f"^(?:{cfg.groups})$"))
    if cfg.topics:
        commits = commits.where(F.col("topic").rlike(f"^(?:{cfg.topics})$"))
    if cfg.exclude_groups:
        commits = commits.where(~F.col("group_id").rlike(f"^(?:{cfg.exclude_groups})$"))
    if cfg.exclude_topics:
        commits = commits.where(~F.col("topic").rlike(f"^(?:{cfg.exclude_topics})$"))
    return commits


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
        from .report.expectations_config import load_expectations_config
        from .io.fs import InputError

        try:
            load_expectations_config(cfg.expectations_config)
        except (OSError, ValueError) as exc:
            raise InputError(f"--expectations-config {cfg.expectations_config}: {exc}") from None
    if cfg.pushgateway:
        from .report.metrics import check_pushgateway

        check_pushgateway(cfg.pushgateway)
    if cfg.bootstrap_servers and cluster:
        from .sources.client_config import load_client_config
        from .sources.collector import check_bootstrap

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
    try:
        stage("read")
        src = open_source(
            spark, cfg, lambda msg: _progress(cfg, msg), consumer_factory=consumer_factory, collect=collect
        )
        from .spark import tuned_for_input

        with tuned_for_input(spark, src.input_bytes()) as tuning:
            return _audit(cfg, spark, src, started, started_at, tuning, stage)
    except usage_errors():
        raise
    except AuditInternalError:
        raise
    except Exception as exc:
        raise AuditInternalError(stage.name, exc) from exc


@dataclass
class Decoded:
    """The decode stage's result.

    ``raw``: every decoded record, read issue and control record
    (:data:`audit.formats.offsets.RAW_SCHEMA` with ``txn_state``; lazy, read again only by the summary);
    ``records``: its ``kind='record'`` rows (:data:`RECORD_COLUMNS`); ``commits``: the live commits in scope
    (:func:`audit.commits.live_commits`, materialised once); ``n_live``/``n_latest``: live commits and
    group-partitions; ``share_raw``: ``__share_group_state`` decoded (None when not read); ``share_topics``: the
    share groups' topics in scope (a live cluster) or None.
    """

    raw: DataFrame
    records: DataFrame
    commits: DataFrame
    n_live: int
    n_latest: int
    share_raw: DataFrame | None
    share_topics: list[str] | None


@dataclass
class Judged:
    """The judged tables, each written once and read back from the written files (no job).

    ``findings``, ``committed`` (``committed_offsets``), ``groups``, ``share_partitions`` (None without share
    groups), and the owner tables they were joined with (``group_state``, ``owners``:
    :func:`audit.owners.group_tables`).
    """

    findings: DataFrame
    committed: DataFrame
    groups: DataFrame
    share_partitions: DataFrame | None
    group_state: DataFrame
    owners: DataFrame


class _Failures:
    """Stages after the judged tables that failed: the run goes on and exits 3, the tables are kept."""

    def __init__(self) -> None:
        self.failed: list[dict] = []

    def guard(self, name: str, fn, default=None):
        """``fn()``; an exception is recorded (summary.json's ``failed_stages``) and ``default`` returned."""
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - recorded, reported, exit status 3
            self.record(name, exc)
            return default

    def record(self, name: str, exc: BaseException) -> None:
        """Stage ``name`` failed with ``exc``: kept for ``failed_stages`` and said on stderr."""
        self.failed.append(_failure(name, exc))
        print(
            f"kafka-offset-audit: stage {name!r} failed: {type(exc).__name__}: {exc} "
            "(the judged tables are still written)",
            file=sys.stderr,
            flush=True,
        )

    def has(self, name: str) -> bool:
        return any(f["stage"] == name for f in self.failed)


def _commit_counts() -> list:
    """Return the decode's counts: live commits, group-partitions (latest commits), rows of the commits table."""
    return [
        F.sum("live_count").alias("live"),
        F.count(F.when(F.col("is_latest"), 1)).alias("latest"),
        F.count(F.lit(1)).alias("rows"),
    ]


def _decode(cfg: AuditConfig, src, tuning) -> Decoded:
    """Run stage ``decode``: the source's records, their transactions resolved, folded into live commits.

    One checkpoint, counted by an observation: 1 Spark job, plus whatever the source's read runs.
    """
    raw = with_transaction_state(src.read_offsets(), all_rows=True)
    records = raw.where(F.col("kind") == "record").select(*RECORD_COLUMNS, "txn_state")
    # counted while the checkpoint runs (an observation, not a job of its own)
    counts = Observation("commits")
    commits = (
        in_scope(live_commits(records, latest_only=cfg.mode == "latest"), cfg)
        .observe(counts, *_commit_counts())
        .localCheckpoint()
    )
    got = counts.get
    if not {"live", "latest", "rows"} <= set(got):  # Spark Connect may return no metrics for a checkpoint
        got = commits.agg(*_commit_counts()).first().asDict()
    n_live, n_latest, n_rows = (got[k] for k in ("live", "latest", "rows"))
    tuning.decide(int(n_rows))  # what the rest of the audit handles is known only now
    _progress(cfg, f"decode: {int(n_live or 0)} live commits of {int(n_latest or 0)} group-partitions")
    # share groups (KIP-932): their state is read only where __consumer_offsets holds share group records (a live
    # cluster: no request for __share_group_state, nor an ACL denial, where no share group ever ran)
    share_raw = None
    if not cfg.bootstrap_servers or records.where(F.col("record_type").isin(10, 11, 14, 15)).limit(1).count():
        share_raw = src.read_share_state()
    # the share groups' topics named for a live cluster: only those in --groups/--topics scope (KIP-526)
    share_topics = (
        subscribed_topics(records, cfg.groups, cfg.topics, cfg.exclude_groups, cfg.exclude_topics)
        if share_raw is not None
        else None
    )
    return Decoded(raw, records, commits, int(n_live or 0), int(n_latest or 0), share_raw, share_topics)


def _judge_and_write(
    cfg: AuditConfig, spark: SparkSession, d: Decoded, state, out: StagedOutput, started_at: str
) -> Judged:
    """Run stage ``judge``: the rules (:func:`audit.judge.judge`), joined with the groups' owners, as ``findings/``.

    Then ``committed_offsets/`` and ``groups/`` are written from it (and ``share_partitions/``).  Each table is
    written once and read back from its files for what follows
    (:meth:`audit.io.outputs.StagedOutput.write_table`): one Spark job per table, nothing judged twice.
    """
    from .tables import conform

    history = cfg.mode == "history"
    timeline = state.leader_timeline
    names = timeline.select("topic_id", "topic") if timeline is not None else state.topic_names
    # the owner tables, joined into findings, committed offsets and share-partitions: computed once
    group_state, owners = group_tables(spark, d.records, names)
    group_state, owners = group_state.localCheckpoint(), owners.localCheckpoint()
    findings = with_owners(
        judge(
            spark,
            d.commits,
            state.epochs,
            state.bounds,
            epoch_end_offsets=state.epoch_end_offsets,
            history=history,
            replicas=state.replicas,
            expansion_offsets=state.expansion_offsets,
        ),
        group_state,
        owners,
    )
    share_partitions = None
    if d.share_raw is not None:
        from .share import judge_shares

        # share states name their topic by id: the metadata log's names, and each replica's partition.metadata
        share_names = state.replicas.select("topic_id", "topic") if state.replicas is not None else None
        if names is not None:
            share_names = names if share_names is None else share_names.unionByName(names.select("topic_id", "topic"))
        # a live cluster answered OffsetsForLeaderEpoch for the states' epochs; log dirs: computed from the caches
        live_eeo = state.epoch_end_offsets if cfg.bootstrap_servers else None
        share_findings, shares = judge_shares(spark, d.share_raw, state.epochs, state.bounds, share_names, live_eeo)
        share_findings = with_owners(in_scope(share_findings, cfg), group_state, owners).withColumn(
            "group_type", F.coalesce(F.col("group_type"), F.lit("share"))
        )
        findings = findings.unionByName(share_findings)
        share_partitions = out.write_table("share_partitions", conform("share_partitions", in_scope(shares, cfg)))
    findings = out.write_table("findings", conform("findings", findings))
    committed = out.write_table(
        "committed_offsets",
        conform(
            "committed_offsets", with_owners(with_verdicts(d.commits, findings, state.bounds), group_state, owners)
        ),
    )
    # ages against the audit's own time when it reads a live cluster; log dirs: the newest audited commit
    as_of = datetime.fromisoformat(started_at) if cfg.bootstrap_servers else None
    groups = out.write_table(
        "groups",
        conform("groups", group_status(spark, committed, findings, group_state, as_of, cfg.stale_after_seconds)),
    )
    return Judged(findings, committed, groups, share_partitions, group_state, owners)


def _context_tables(cfg: AuditConfig, d: Decoded, state) -> dict:
    """Return the tables written beside the judged ones (name -> DataFrame, conformed).

    ``epochs``, ``bounds``, the timelines where the metadata log was read, ``commits`` in ``--mode history``.
    """
    from .tables import conform

    tables = {}
    if cfg.mode == "history":
        tables["commits"] = conform("commits", d.commits.drop("is_latest", "broker_id", "live_count"))
    tables.update(epochs=conform("epochs", state.epochs), bounds=conform("bounds", state.bounds))
    if state.leader_timeline is not None:
        tables["leader_timeline"] = conform("leader_timeline", state.leader_timeline)
    if state.broker_timeline is not None:
        tables["broker_timeline"] = conform("broker_timeline", state.broker_timeline)
    return tables


def _history_changes(cfg, spark, summary: dict, j: Judged, started_at: str):
    """Run stage ``history`` (part 1): compare the findings and group statuses with the history's previous run.

    ``summary['history']`` is filled in; None without ``--history``.
    """
    if not cfg.history:
        return None
    from .report.history import default_run_id, finding_changes, group_changes
    from .tables import conform

    run_id = cfg.run_id or default_run_id(started_at)
    summary["history"] = {"dir": cfg.history, "run_id": run_id}
    changes, hinfo = finding_changes(spark, cfg.history, run_id, j.findings)
    changes = conform("finding_changes", changes).localCheckpoint()
    gchanges, ginfo = group_changes(spark, cfg.history, run_id, j.groups, hinfo["previous_run_id"])
    gchanges = conform("group_changes", gchanges).localCheckpoint()
    summary["history"].update(hinfo, **ginfo)
    _progress(
        cfg,
        f"history: since run {hinfo['previous_run_id'] or '(none)'}: {hinfo['new']} new, "
        f"{hinfo['persisted']} persisted, {hinfo['resolved']} resolved; groups: "
        f"{ginfo['groups_changed']} changed status, {ginfo['groups_new']} new, {ginfo['groups_gone']} gone",
    )
    return changes, gchanges


def _summarize(cfg, spark, src, d: Decoded, j: Judged, state, started_at: str, failures: _Failures):
    """Stage ``summary``: summary.json's content (aggregates of bounded size) and the history's changes."""
    summary = _summary(cfg, src, d.raw, (d.n_live, d.n_latest), j.findings, started_at, state.epochs)
    summary["share_groups"] = _share_summary(d.share_raw, j.share_partitions)
    recovered = src.recovered
    summary["records_recovered"] = {"total": sum(r["records"] for r in recovered), "from_replicas": recovered}
    summary["rules_not_run"] = _rules_not_run(cfg, state)
    changes = failures.guard("history", lambda: _history_changes(cfg, spark, summary, j, started_at))
    return summary, changes


def _append_history(cfg, spark, summary: dict, j: Judged) -> None:
    """Stage ``history`` (part 2): this run's findings and groups appended to ``--history``."""
    from .report.history import append_run

    appended = append_run(
        spark, cfg.history, summary["history"]["run_id"], summary, j.findings, cfg.output, groups=j.groups
    )
    replaced = f" (replaced {len(appended['replaced'])} dir(s) of the same run id)" if appended["replaced"] else ""
    _progress(cfg, f"history: run {appended['run_id']} appended to {cfg.history}{replaced}")


def _open_output(cfg: AuditConfig, spark: SparkSession) -> tuple[StagedOutput, dict]:
    """Open the staged output, after removing what killed runs left beside it (reported as progress)."""
    out = StagedOutput(spark, cfg.output)
    leftovers = out.clean_leftovers()
    if leftovers["removed"]:
        _progress(
            cfg, f"removed {len(leftovers['removed'])} staging dir(s) of killed runs: {', '.join(leftovers['removed'])}"
        )
    if leftovers.get("restored"):
        _progress(
            cfg, f"restored the previous output from a run killed in its commit: {', '.join(leftovers['restored'])}"
        )
    if leftovers["kept"]:
        _progress(cfg, f"left alone (another host's or a live run's): {', '.join(leftovers['kept'])}")
    return out, leftovers


def _audit(
    cfg: AuditConfig, spark: SparkSession, src, started: float, started_at: str, tuning, stage: _Stage
) -> RunResult:
    """Run the audit after the checks, as named stages.

    The stages: decode, partition state, judge (writing the judged tables), write (the other tables, beside the
    summary), reports, commit (see :func:`run`).
    """
    from .queries import parse_ahead

    parse_ahead(spark)
    stage("decode")
    d = _decode(cfg, src, tuning)
    stage("partition state")
    state = src.partition_state(
        d.commits, history=cfg.mode == "history", share_raw=d.share_raw, share_topics=d.share_topics
    )
    out, leftovers = _open_output(cfg, spark)
    failures = _Failures()
    guarded = failures.guard
    try:
        stage("judge")
        context = _context_tables(cfg, d, state)
        # the tables beside the judged ones are written while the judge writes its own
        j, _ = in_parallel(
            lambda: _judge_and_write(cfg, spark, d, state, out, started_at), lambda: out.write_parquet_all(context)
        )
        stage("write")
        tables = {"findings": j.findings, "committed_offsets": j.committed, "groups": j.groups}
        if j.share_partitions is not None:
            tables["share_partitions"] = j.share_partitions
        summary, changes = _summarize(cfg, spark, src, d, j, state, started_at, failures)
        tables.update(context)
        summary["output_leftovers"] = leftovers
        if changes is not None and (
            guarded(
                "history",
                lambda: out.write_parquet_all({"finding_changes": changes[0], "group_changes": changes[1]}),
                default=False,
            )
            is not False
        ):
            tables["finding_changes"], tables["group_changes"] = changes
        n_findings = summary["findings"]["total"]
        _progress(cfg, f"judge: {n_findings} findings over {d.n_latest} group-partitions")
        summary["elapsed_seconds"] = round(time.time() - started, 3)
        summary["failed_stages"] = failures.failed
        out.write_json("summary.json", summary)  # the tables are complete: written before any report runs
        stage("reports")
        # the reports, the metrics' rows and the console table only read: side by side
        reports, (metric_rows, console, console_rows) = in_parallel(
            (lambda: _reports(cfg, spark, out, tables, guarded)) if cfg.reports else (lambda: None),
            lambda: _metric_and_console_rows(cfg, j, state.bounds, failures),
        )
        if reports is not None:
            summary["reports"] = reports
        if cfg.history and not failures.has("history"):
            guarded("history", lambda: _append_history(cfg, spark, summary, j))
        summary["exit_status"] = EXIT_INTERNAL if failures.failed else _exit_code(cfg, summary)
        summary["elapsed_seconds"] = round(time.time() - started, 3)
        registry = guarded("metrics", lambda: _metrics(cfg, spark, out, summary, metric_rows))
        if failures.failed:
            summary["exit_status"] = EXIT_INTERNAL
        stage("write")
        out.write_json("summary.json", summary)
        out.commit()
    except BaseException:
        out.abort()
        raise
    _progress(cfg, f"write: {cfg.output} ({n_findings} findings)")
    _after_commit(cfg, spark, out, summary, failures, registry, metric_rows)
    return RunResult(summary["exit_status"], summary, console, console_rows)


def _after_commit(cfg, spark, out: StagedOutput, summary: dict, failures: _Failures, registry, metric_rows) -> None:
    """Run the stages after the commit: the Pushgateway push and the catalog tables (``--table-prefix``).

    A failed catalog registration turns the committed run's exit status to 3 and rewrites its summary and
    metrics.
    """
    if cfg.pushgateway and registry is not None:
        from .report.metrics import parse_grouping, push

        push(cfg.pushgateway, registry, job=cfg.pushgateway_job, grouping=parse_grouping(cfg.pushgateway_labels))
        _progress(cfg, f"metrics: pushed to {cfg.pushgateway} (job {cfg.pushgateway_job})")
    if not cfg.table_prefix:
        return

    def register():
        from .io.outputs import register_tables

        names = register_tables(spark, out.committed, cfg.table_prefix)
        _progress(cfg, f"tables: {', '.join(names)}")

    n_failed = len(failures.failed)
    failures.guard("tables", register)
    if len(failures.failed) == n_failed:
        return
    # the output is committed: its summary.json and metrics.prom say so now
    summary["exit_status"] = EXIT_INTERNAL
    from .report.metrics import METRICS_FILENAME, build_registry, render
    from .io import fs as _fs

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


def _rules_not_run(cfg: AuditConfig, state) -> dict:
    """Tell why a rule that needs more than committed offsets did not judge (finding -> reason).

    Also returns the old partitions whose offset at an expansion could not be read (an aggregate collect).
    """
    out = {}
    if state.replicas is None:
        out["REPLICA_DIVERGENCE"] = "a live cluster: no replica's files are read"
    if state.expansion_offsets is None:
        out["PARTITION_EXPANSION_ORDER"] = (
            "needs every commit: run with --mode history"
            if cfg.mode != "history"
            else "needs the KRaft metadata log: audit log dirs that include the controller's"
            if state.leader_timeline is None
            else "no audited group committed past offset 0 on a partition added by an expansion"
        )
    else:
        unread = state.expansion_offsets.where(F.col("issue").isNotNull()).groupBy("issue").count().collect()
        if unread:
            out["PARTITION_EXPANSION_ORDER (partly)"] = "; ".join(
                f"{r['count']} old partition(s): {r['issue']}" for r in unread
            )
    return out


def _exit_code(cfg: AuditConfig, summary: dict) -> int:
    """1 when a finding reaches ``--fail-on`` or the expectation suite failed, else 0."""
    code = 1 if fails(cfg.fail_on, summary["findings"]["by_severity"]) else 0
    if summary.get("reports", {}).get("expectations", {}).get("success") is False:
        code = 1
    return code


def _metric_queries(cfg: AuditConfig, j: Judged, bounds) -> dict:
    """Build the per-group-partition, lost-lineage and per-group queries of ``metrics.prom``.

    Share-partitions are among the group-partitions.  Each query gives at most
    ``--metrics-max-group-partitions`` rows; :mod:`audit.report.metrics`.
    """
    from .report.metrics import group_partition_query, group_query, lost_lineage_query

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


def _metric_and_console_rows(cfg: AuditConfig, j: Judged, bounds, failures: _Failures) -> tuple[tuple, str, dict]:
    """Run stage ``metrics`` (its rows) and ``console``: their queries collected together in one Spark job.

    A failed stage is recorded in ``failures`` and gives no rows / :data:`CONSOLE_FAILED`.

    Returns
    -------
    tuple
        The metric rows (per group-partition, lost lineage, per group), the console text and the console's
        rows.
    """
    mq = failures.guard("metrics", lambda: _metric_queries(cfg, j, bounds))
    cq = failures.guard(
        "console", lambda: console_queries(j.findings, j.committed, bounds, cfg.max_rows, groups=j.groups)
    )
    queries = {**{f"m_{k}": v for k, v in (mq or {}).items()}, **{f"c_{k}": v for k, v in (cq or {}).items()}}
    try:
        rows = collect_together(queries)
    except Exception as exc:  # noqa: BLE001 - both stages' rows are lost: each recorded, exit status 3
        for name, q in (("metrics", mq), ("console", cq)):
            if q is not None:
                failures.record(name, exc)
        return ([], [], []), CONSOLE_FAILED, {}
    metric_rows = (rows.get("m_partitions", []), rows.get("m_lost", []), rows.get("m_groups", []))
    console, parts = CONSOLE_FAILED, {}
    if cq is not None:
        parts = {k[2:]: v for k, v in rows.items() if k.startswith("c_")}
        console = failures.guard("console", lambda: render_console(parts, cfg.max_rows), CONSOLE_FAILED)
    return metric_rows, console, parts


def _metrics(
    cfg: AuditConfig, spark: SparkSession, out: StagedOutput, summary: dict, metric_rows: tuple[list, list, list]
):
    """Write ``metrics.prom`` (from :func:`_metric_and_console_rows`) into the staged output.

    Returns
    -------
    CollectorRegistry
        The registry (pushed after the commit).
    """
    from .report.metrics import METRICS_FILENAME, build_registry, render
    from .io import fs

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


def _reports(
    cfg: AuditConfig, spark: SparkSession, out: StagedOutput, tables: dict | None = None, guarded=None
) -> dict:
    """Great Expectations checkpoint (+ Data Docs) and report.html over the staged outputs.

    ``tables``: the staged tables still in memory (name -> DataFrame, the rows written): report.html's queries
    read them instead of the Parquet files (the suite validates what was written).

    ``guarded(stage, fn, default)`` runs each part (stages ``expectations`` and ``html_report``) so that one
    failing leaves the other and the tables alone (:func:`_audit`); without it an error propagates.  A failed
    part is ``{"error": ...}`` in the result.

    The suite fails on findings at or above ``--fail-on`` (none for ``never``); its other
    expectations are data-quality checks with thresholds from ``--expectations-config``.
    Spark reads the staged tables wherever they are; for an output that is not local (HDFS,
    S3 ...) the reports are built in a local temporary directory and then copied into it.
    """
    from .report.expectations import run_expectations
    from .report.expectations_config import load_expectations_config
    from .report.html import REPORT_FILENAME, write_html_report
    from .io import fs

    if guarded is None:

        def guarded(_stage, fn, default=None):
            return fn()

    remote = not fs.is_local(out.staging)
    local = tempfile.mkdtemp(prefix="koa-reports-") if remote else fs.local_path(out.staging)
    tables_dir = out.staging if remote else None
    failed = object()
    try:
        ecfg = load_expectations_config(cfg.expectations_config)
        ecfg = ecfg.model_copy(update={"fail_on_severities": failing_severities(cfg.fail_on)})
        # the suite (mostly Python: GX's pandas engine for small tables) runs while the report's queries do
        from concurrent.futures import ThreadPoolExecutor

        from .spark import inheriting

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="koa-expectations") as pool:
            suite = pool.submit(inheriting(run_expectations), spark, local, ecfg, tables_dir=tables_dir)

            def wait_for_suite():
                try:
                    suite.result()
                except Exception:  # noqa: BLE001 - the suite's own stage records it below
                    pass

            html = guarded(
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
            outcome = guarded("expectations", suite.result, failed)
        if outcome is not failed:
            stats = outcome.statistics
            passed = "passed" if outcome.success else "FAILED"
            _progress(
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
        "html_report": "report.html" if html not in (None, failed) else None,
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


def _inputs(cfg, src) -> dict:
    scope = {"groups": cfg.groups, "topics": cfg.topics}
    scope.update(
        {k: v for k, v in (("exclude_groups", cfg.exclude_groups), ("exclude_topics", cfg.exclude_topics)) if v}
    )
    return {"mode": cfg.mode, "fail_on": cfg.fail_on, **scope, **src.inputs()}


def _share_summary(share_raw, share_partitions) -> dict:
    """Build summary.json's ``share_groups``.

    Whether ``__share_group_state`` was read, its records by outcome, and the share-partitions judged (an
    aggregate collect each).
    """
    if share_raw is None:
        return {"state_read": False}
    counts = {
        (r["kind"], r["decode_error"]): int(r["n"])
        for r in share_raw.groupBy("kind", "decode_error").agg(F.count("*").alias("n")).collect()
    }
    judged = share_partitions.agg(
        F.count("*").alias("n"), F.count_distinct("group_id").alias("groups"), F.count_if(F.col("verdict") != "OK")
    ).first()
    return {
        "state_read": True,
        "state_records": sum(n for (kind, err), n in counts.items() if kind == "record" and err is None),
        "state_records_skipped": {err: n for (kind, err), n in counts.items() if err is not None},
        "share_partitions": int(judged[0]),
        "share_groups": int(judged[1]),
        "share_partitions_with_findings": int(judged[2] or 0),
    }


def _summary(cfg, src, raw, live_counts, findings, started_at, epochs) -> dict:
    """Build summary.json content.

    Every collect here is an aggregate bounded by names (record types and versions beyond the known ones counted
    together: :data:`OTHER_KIND`) or a ``take`` of at most :data:`MAX_WHERE`.  All of them run in one Spark job
    (:func:`audit.spark.collect_together`).
    """
    parts = collect_together(_summary_queries(src, raw, findings, epochs))
    records, commits, by_reason = _record_counts(parts["by_kind"])
    for r in parts["issues"]:
        by_reason[r["reason"]] = by_reason.get(r["reason"], 0) + int(r["n"])
    n_live, n_latest = live_counts
    commits["deleted_by_tombstone"] = int(commits.pop("_decoded_live_or_committed") - n_live)
    commits["live"] = int(n_live)
    commits["group_partitions"] = int(n_latest)
    where_keys = ("file", "position", "reason", "detail", "record_type")
    return {
        "tool": "kafka-offset-audit",
        "version": __version__,
        "started_at": started_at,
        "inputs": _inputs(cfg, src),
        "records_read": records,
        "offset_commits": commits,
        "records_skipped": {
            "by_reason": by_reason,
            "where": [{k: r[k] for k in where_keys} for r in parts["where"]],
            "where_truncated": sum(by_reason.values()) > MAX_WHERE,
        },
        "findings": _finding_counts(parts["findings"]),
        "epoch_cache_disagreements": [
            {
                "topic": r["topic"],
                "partition": r["partition"],
                "leader_epoch": r["leader_epoch"],
                "start_offset_by_broker": dict(r["start_offset_by_broker"]),
            }
            for r in parts["disagree"]
        ],
    }


def _summary_queries(src, raw, findings, epochs) -> dict[str, DataFrame]:
    """Build the summary's bounded queries.

    Records by kind, type, version, tombstone, transaction state and decode error (``by_kind``), read issues by
    reason (``issues``), the first skipped records (``where``), findings by name and severity (``findings``), and
    leader-epoch caches that disagree (``disagree``).
    """
    skipped = raw.where((F.col("kind") == "issue") | F.col("decode_error").isNotNull()).select(
        F.col("source_file").alias("file"),
        "position",
        F.col("decode_error").alias("reason"),
        "detail",
        F.col("records_affected"),
        "record_type",
    )
    skipped = skipped.unionByName(src.read_issues.withColumn("record_type", F.lit(None).cast("short")))
    record_type = (
        F.when(F.col("record_type").isin(-1, *RECORD_TYPE_NAMES), F.col("record_type"))
        .when(F.col("record_type").isNotNull(), F.lit(OTHER_KIND))
        .alias("record_type")
    )
    value_version = (
        F.when(F.col("value_version").between(-1, MAX_COUNTED_VERSION), F.col("value_version"))
        .when(F.col("value_version").isNotNull(), F.lit(OTHER_KIND))
        .alias("value_version")
    )
    return {
        "by_kind": raw.groupBy("kind", record_type, value_version, "is_tombstone", "txn_state", "decode_error").agg(
            F.sum(F.when(F.col("kind") == "issue", 1).otherwise(F.col("record_count"))).alias("n"),
            F.count("*").alias("rows"),
        ),
        "issues": src.read_issues.groupBy("reason").agg(F.count("*").alias("n")),
        "where": skipped.orderBy("file", "position").limit(MAX_WHERE),
        "findings": findings.groupBy("finding", "severity").count().orderBy("finding", "severity"),
        "disagree": cache_disagreements(epochs).orderBy("topic", "partition", "leader_epoch").limit(MAX_WHERE),
    }


def _record_counts(by_kind: list[dict]) -> tuple[dict, dict, dict]:
    """Count, from the ``by_kind`` rows, ``records_read``, ``offset_commits`` and the skipped records by reason.

    ``offset_commits`` comes with ``_decoded_live_or_committed``, the commits not aborted or pending, for the
    caller to set ``deleted_by_tombstone``.
    """
    by_type: dict[str, Any] = {}
    kinds: dict[str, Any] = {}
    txn: dict[str, Any] = {}
    by_reason: dict[str, Any] = {}
    # kind 'count' rows stand for records a latest-mode summary folded away (all non-transactional)
    folded = 0
    for r in by_kind:
        kind, n = ("record" if r["kind"] == "count" else r["kind"]), int(r["n"] or 0)
        kinds[kind] = kinds.get(kind, 0) + n
        if r["kind"] == "issue" or r["decode_error"] is not None:
            by_reason[r["decode_error"]] = by_reason.get(r["decode_error"], 0) + int(r["rows"])
        if kind != "record":
            continue
        name = RECORD_TYPE_NAMES.get(
            r["record_type"], "other record types" if r["record_type"] == OTHER_KIND else f"type_{r['record_type']}"
        )
        version = "(other)" if r["value_version"] == OTHER_KIND else r["value_version"]
        key = f"{name} tombstone" if r["is_tombstone"] else f"{name} v{version}"
        by_type[key] = by_type.get(key, 0) + n
        offset_commit = r["record_type"] in (0, 1) and r["is_tombstone"] is False
        if r["kind"] == "count" and offset_commit:
            folded += n
        elif r["kind"] == "record" and offset_commit:
            txn[r["txn_state"]] = txn.get(r["txn_state"], 0) + n
    txn["none"] = txn.get("none", 0) + folded
    records = {
        "total": int(sum(kinds.values())) - int(kinds.get("issue", 0)),
        "control_records": int(kinds.get("control", 0)),
        "by_record_type": by_type,
    }
    commits = {
        "decoded": int(sum(txn.values())),
        "transactional_aborted": int(txn.get("aborted", 0)),
        "transactional_pending": int(txn.get("pending", 0)),
        "_decoded_live_or_committed": sum(txn.get(k, 0) for k in ("none", "committed")),
    }
    return records, commits, by_reason


def _finding_counts(rows: list[dict]) -> dict:
    """summary.json's ``findings``: total, by name, by severity (every severity present) and by both."""
    sev = {s: 0 for s in SEVERITIES}
    names: dict[str, Any] = {}
    name_sev: list = []
    for r in rows:
        sev[r["severity"]] += r["count"]
        names[r["finding"]] = names.get(r["finding"], 0) + r["count"]
        name_sev.append({"finding": r["finding"], "severity": r["severity"], "count": int(r["count"])})
    return {"total": int(sum(sev.values())), "by_name": names, "by_severity": sev, "by_name_severity": name_sev}
