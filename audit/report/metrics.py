"""Prometheus metrics of an audit run: ``<output>/metrics.prom`` and, optionally, a Pushgateway push.

Made with ``prometheus_client`` (a :class:`~prometheus_client.CollectorRegistry` of gauges rendered by
:func:`~prometheus_client.generate_latest`, pushed by :func:`~prometheus_client.push_to_gateway`).
Every metric is a gauge describing the run that wrote it, named ``kafka_offset_audit_*``:

Per group-partition (labels ``group``, ``topic``, ``partition``), at most ``max_group_partitions``
of them, worst verdict first:

* ``kafka_offset_audit_committed_offset`` -- the latest live committed offset (offsets);
* ``kafka_offset_audit_committed_leader_epoch`` -- its committed leader epoch (-1: none committed);
* ``kafka_offset_audit_lag_offsets`` -- log end offset minus committed offset, **unclamped**: negative
  when the commit is past the log end (absent when the log end offset is unknown);
* ``kafka_offset_audit_records_at_risk`` -- the largest ``records_at_risk`` of the commit's findings
  (0 without one);
* ``kafka_offset_audit_verdict`` -- 1, with labels ``verdict`` (``OK`` or the most severe finding's
  name) and ``severity`` (``ok``, ``info``, ``warning``, ``error``, ``critical``).

Share groups' share-partitions (KIP-932) are group-partitions too (:func:`group_partition_rows`).

Per group (label ``group``), at most ``max_group_partitions`` of them, worst status first (the ``groups`` table,
:mod:`audit.groups`): ``kafka_offset_audit_group_lag_offsets`` and ``kafka_offset_audit_group_max_lag_offsets``
(the sum and the largest of its partitions' lag, unclamped; absent when no bounds are known),
``kafka_offset_audit_group_partitions_committed``, ``kafka_offset_audit_group_partitions_remote_tier`` (those whose
next record Kafka fetches from the remote tier: tiered storage), ``kafka_offset_audit_group_records_at_risk``,
``kafka_offset_audit_group_latest_commit_age_seconds`` and ``kafka_offset_audit_group_status`` (1, with labels
``status``: ``AT_RISK``, ``STALE``, ``WARN`` or ``OK``, and ``worst_verdict``).

Per diverged replica (REPLICA_DIVERGENCE; labels ``topic``, ``partition``, ``broker``, ``severity``), at most
``max_group_partitions`` of them, most records first: ``kafka_offset_audit_lost_lineage_records`` -- the records
only that replica holds, which it will truncate when it fetches again (records), and
``kafka_offset_audit_lost_lineage_divergence_offset`` -- where its log will be cut (offsets).

Per run: ``kafka_offset_audit_findings{finding,severity}``, ``kafka_offset_audit_findings_by_severity
{severity}`` (all four severities, zeros included), ``kafka_offset_audit_group_partitions`` (audited) and
``kafka_offset_audit_group_partitions_exported`` (in the per-group-partition metrics),
``kafka_offset_audit_records_read``, ``kafka_offset_audit_records_skipped{reason}``,
``kafka_offset_audit_offset_commits_live``, ``kafka_offset_audit_run_duration_seconds``,
``kafka_offset_audit_run_success`` (1: the audit completed and wrote its output; 0: it failed: pushed only, or
written with the judged tables when a later stage failed), ``kafka_offset_audit_exit_status``,
``kafka_offset_audit_failed_stage{stage}`` (1 per stage that failed: an internal error, exit status 3) and
``kafka_offset_audit_last_success_timestamp_seconds``.
"""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from typing import Any, Mapping, Sequence

from prometheus_client import CollectorRegistry, Gauge, generate_latest, push_to_gateway, pushadd_to_gateway
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..groups import worst_first
from ..tables import SEVERITIES
from ..tables import SEVERITY_RANK as _SEV_RANK


__all__ = [
    "DEFAULT_JOB",
    "DEFAULT_MAX_GROUP_PARTITIONS",
    "METRICS_FILENAME",
    "PREFIX",
    "MetricsError",
    "build_registry",
    "check_pushgateway",
    "failure_registry",
    "group_partition_query",
    "group_partition_rows",
    "group_query",
    "group_rows",
    "lost_lineage_query",
    "lost_lineage_rows",
    "parse_grouping",
    "push",
    "render",
]

METRICS_FILENAME = "metrics.prom"
PREFIX = "kafka_offset_audit"
DEFAULT_JOB = "kafka_offset_audit"
#: per-group-partition series kept by default (x5 metrics each): Prometheus cardinality, not memory, is the limit
DEFAULT_MAX_GROUP_PARTITIONS = 50_000
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class MetricsError(ValueError):
    """A bad ``--pushgateway`` / grouping argument, or a Pushgateway that does not answer."""


def group_partition_rows(
    committed: DataFrame, findings: DataFrame, bounds: DataFrame, limit: int, shares: DataFrame | None = None
) -> list[dict]:
    """:func:`group_partition_query` collected: at most ``limit`` dicts."""
    return [r.asDict() for r in group_partition_query(committed, findings, bounds, limit, shares).collect()]


def group_partition_query(
    committed: DataFrame, findings: DataFrame, bounds: DataFrame, limit: int, shares: DataFrame | None = None
) -> DataFrame:
    """Query the per-group-partition metric values, worst first, at most ``limit`` rows (sorted and limited; no job).

    ``committed``: ``committed_offsets`` (group_id, topic, partition, committed_offset bigint,
    committed_leader_epoch int, commit_timestamp, verdict string); ``findings``: the findings table
    (severity, records_at_risk bigint, group_type string); ``bounds``: topic, partition, log_end_offset bigint;
    ``shares``: the ``share_partitions`` table (KIP-932) or None.

    A share-partition is a row like a consumer group's partition (group ids are one namespace): its start offset
    (SPSO) as ``committed_offset``, the leader epoch its state was written under, its ``lag`` and
    ``records_at_risk`` as ``share_partitions`` has them, and the worst severity of the share group's findings on
    it (which may be about an older leader epoch's state than the newest).

    Returns
    -------
    DataFrame
        Rows (collected as dicts) with group_id, topic, partition, committed_offset, committed_leader_epoch, lag
        (bigint, log_end_offset - committed_offset, unclamped; None without a log end offset), records_at_risk
        (bigint), verdict, severity (``ok`` or the verdict's finding severity).
    """
    keys = ["group_id", "topic", "partition", "committed_offset", "commit_timestamp"]
    rank = F.create_map(*[x for k, v in _SEV_RANK.items() for x in (F.lit(k), F.lit(v))])
    worst = findings.groupBy(*keys).agg(
        F.max(rank[F.col("severity")]).alias("sev_rank"),
        F.max(F.coalesce("records_at_risk", F.lit(0))).alias("records_at_risk"),
    )
    by_rank = F.create_map(*[x for k, v in _SEV_RANK.items() for x in (F.lit(v), F.lit(k))])
    rows = (
        committed.select(*keys, "committed_leader_epoch", "verdict")
        .join(worst, keys, "left")
        .join(bounds.select("topic", "partition", "log_end_offset"), ["topic", "partition"], "left")
        .select(
            "group_id",
            "topic",
            "partition",
            "committed_offset",
            "committed_leader_epoch",
            (F.col("log_end_offset") - F.col("committed_offset")).alias("lag"),
            F.coalesce("records_at_risk", F.lit(0)).alias("records_at_risk"),
            "verdict",
            F.coalesce(by_rank[F.col("sev_rank")], F.lit("ok")).alias("severity"),
            F.coalesce("sev_rank", F.lit(0)).alias("_rank"),
        )
    )
    if shares is not None and "group_type" in findings.columns:
        gtp = ["group_id", "topic", "partition"]
        share_worst = (
            findings.where(F.col("group_type") == "share")
            .groupBy(*gtp)
            .agg(F.max(rank[F.col("severity")]).alias("sev_rank"))
        )
        rows = rows.unionByName(
            shares.join(share_worst, gtp, "left").select(
                *gtp,
                F.col("start_offset").alias("committed_offset"),
                F.col("leader_epoch").alias("committed_leader_epoch"),
                "lag",
                F.coalesce("records_at_risk", F.lit(0)).alias("records_at_risk"),
                "verdict",
                F.coalesce(by_rank[F.col("sev_rank")], F.lit("ok")).alias("severity"),
                F.coalesce("sev_rank", F.lit(0)).alias("_rank"),
            )
        )
    return (
        rows.orderBy(F.col("_rank").desc(), F.col("records_at_risk").desc(), "group_id", "topic", "partition")
        .drop("_rank")
        .limit(limit)
    )


def group_rows(groups: DataFrame, limit: int) -> list[dict]:
    """:func:`group_query` collected: at most ``limit`` dicts."""
    return [r.asDict() for r in group_query(groups, limit).collect()]


def group_query(groups: DataFrame, limit: int) -> DataFrame:
    """Query the per-group metric values from the ``groups`` table, worst status first, at most ``limit`` rows.

    The order is worst status, then most records at risk, most lag (sorted and limited; no job).  Columns:
    group_id, status, worst_verdict, partitions_committed, partitions_remote, total_lag, max_lag, records_at_risk,
    latest_commit_age_seconds.
    """
    rows = (
        worst_first(groups)
        .select(
            "group_id",
            "status",
            "worst_verdict",
            "partitions_committed",
            "partitions_remote",
            "total_lag",
            "max_lag",
            "records_at_risk",
            "latest_commit_age_seconds",
        )
        .limit(limit)
    )
    return rows


def lost_lineage_rows(findings: DataFrame, limit: int) -> list[dict]:
    """:func:`lost_lineage_query` collected: at most ``limit`` dicts (none without the column)."""
    query = lost_lineage_query(findings, limit)
    return [] if query is None else [r.asDict() for r in query.collect()]


def lost_lineage_query(findings: DataFrame, limit: int) -> DataFrame | None:
    """Query the REPLICA_DIVERGENCE findings as metric values, most records first, at most ``limit``.

    Sorted and limited; no job.  Columns: topic, partition, replica_broker, divergence_offset, records_at_risk,
    severity.  None for a findings table without ``replica_broker``.
    """
    if "replica_broker" not in findings.columns:
        return None
    return (
        findings.where(F.col("finding") == "REPLICA_DIVERGENCE")
        .select("topic", "partition", "replica_broker", "divergence_offset", "records_at_risk", "severity")
        .orderBy(F.col("records_at_risk").desc(), "topic", "partition", "replica_broker")
        .limit(limit)
    )


def build_registry(
    summary: Mapping[str, Any],
    rows: list[dict],
    *,
    success: bool = True,
    now: float | None = None,
    lost: Sequence[dict] = (),
    groups: Sequence[dict] = (),
) -> CollectorRegistry:
    """Build a registry holding the run's metrics (see the module docstring).

    ``summary``: the run's ``summary.json`` content (``findings.by_name``/``by_severity``,
    ``records_read.total``, ``records_skipped.by_reason``, ``offset_commits``, ``elapsed_seconds``,
    ``exit_status``); the per-finding severity comes from ``findings.by_name_severity`` when given, a list
    of ``{"finding", "severity", "count"}``.  ``rows``: :func:`group_partition_rows`; ``lost``:
    :func:`lost_lineage_rows`; ``groups``: :func:`group_rows`.
    """
    reg = CollectorRegistry()
    _group_partition_gauges(reg, rows)
    if groups:
        _group_gauges(reg, groups)
    if lost:
        _lost_lineage_gauges(reg, lost)
    _summary_gauges(reg, summary, len(rows))
    failed = [f.get("stage") for f in summary.get("failed_stages") or []]
    _run_gauges(reg, summary.get("elapsed_seconds"), success and not failed, summary.get("exit_status"), now, failed)
    return reg


def _gauge(reg: CollectorRegistry, name: str, doc: str, labels: Sequence[str] = (), unit: str = "") -> Gauge:
    """Register a gauge ``kafka_offset_audit_<name>`` in ``reg`` and return it."""
    return Gauge(f"{PREFIX}_{name}", doc, labelnames=labels, unit=unit, registry=reg)


def _group_partition_gauges(reg: CollectorRegistry, rows: list[dict]) -> None:
    """Register and set the per-group-partition gauges of ``rows`` (:func:`group_partition_rows`); returns None."""
    gp = ("group", "topic", "partition")
    offset = _gauge(reg, "committed_offset", "Latest live committed offset of the group-partition (offsets).", gp)
    epoch = _gauge(reg, "committed_leader_epoch", "Leader epoch committed with that offset (-1: none).", gp)
    lag = _gauge(
        reg,
        "lag_offsets",
        "Log end offset minus committed offset, unclamped: negative when the commit is past the log end.",
        gp,
    )
    risk = _gauge(
        reg, "records_at_risk", "Records the group would skip or re-read per its worst finding (0: none).", gp
    )
    verdict = _gauge(
        reg,
        "verdict",
        "1 per group-partition; labels give OK or its most severe finding.",
        gp + ("verdict", "severity"),
    )
    for r in rows:
        key = (str(r["group_id"]), str(r["topic"]), str(r["partition"]))
        offset.labels(*key).set(r["committed_offset"])
        epoch.labels(*key).set(-1 if r["committed_leader_epoch"] is None else r["committed_leader_epoch"])
        if r["lag"] is not None:
            lag.labels(*key).set(r["lag"])
        risk.labels(*key).set(r["records_at_risk"] or 0)
        verdict.labels(*key, str(r["verdict"]), str(r["severity"])).set(1)


def _group_gauges(reg: CollectorRegistry, groups: Sequence[dict]) -> None:
    """Register and set the per-group gauges of ``groups`` (:func:`group_rows`); returns None."""
    g = ("group",)
    g_lag = _gauge(
        reg,
        "group_lag_offsets",
        "Sum of the group's partitions' lag (log end offset minus committed offset, unclamped).",
        g,
    )
    g_max = _gauge(reg, "group_max_lag_offsets", "Largest lag of the group's partitions (unclamped).", g)
    g_parts = _gauge(reg, "group_partitions_committed", "Partitions the group has committed offsets for.", g)
    g_remote = _gauge(
        reg,
        "group_partitions_remote_tier",
        "Committed partitions whose next record Kafka fetches from the remote tier (tiered storage, KIP-405).",
        g,
    )
    g_risk = _gauge(reg, "group_records_at_risk", "Records at risk over the group's findings (0: none).", g)
    g_age = _gauge(reg, "group_latest_commit_age_seconds", "Age of the group's latest commit at the audit.", g)
    g_status = _gauge(
        reg,
        "group_status",
        "1 per group; labels give its status and worst verdict.",
        g + ("status", "worst_verdict"),
    )
    for r in groups:
        gid = str(r["group_id"])
        if r["total_lag"] is not None:
            g_lag.labels(gid).set(r["total_lag"])
        if r["max_lag"] is not None:
            g_max.labels(gid).set(r["max_lag"])
        g_parts.labels(gid).set(int(r["partitions_committed"] or 0))
        g_remote.labels(gid).set(int(r.get("partitions_remote") or 0))
        g_risk.labels(gid).set(int(r["records_at_risk"] or 0))
        if r["latest_commit_age_seconds"] is not None:
            g_age.labels(gid).set(r["latest_commit_age_seconds"])
        g_status.labels(gid, str(r["status"]), str(r["worst_verdict"])).set(1)


def _lost_lineage_gauges(reg: CollectorRegistry, lost: Sequence[dict]) -> None:
    """Register and set the per-diverged-replica gauges of ``lost`` (:func:`lost_lineage_rows`); returns None."""
    lp = ("topic", "partition", "broker", "severity")
    lost_records = _gauge(
        reg,
        "lost_lineage_records",
        "Records only this replica holds past the divergence offset: it "
        "truncates them when it fetches again (REPLICA_DIVERGENCE).",
        lp,
    )
    lost_at = _gauge(reg, "lost_lineage_divergence_offset", "Where this replica's log will be cut (offsets).", lp[:3])
    for r in lost:
        key = (str(r["topic"]), str(r["partition"]), str(r["replica_broker"]))
        lost_records.labels(*key, str(r["severity"])).set(int(r["records_at_risk"] or 0))
        if r["divergence_offset"] is not None:
            lost_at.labels(*key).set(int(r["divergence_offset"]))


def _summary_gauges(reg: CollectorRegistry, summary: Mapping[str, Any], exported: int) -> None:
    """Register and set the per-run counts of ``summary``; return None.

    The counts are findings, group-partitions, ``exported`` of them in the per-group-partition metrics, commits,
    records read and skipped.
    """
    findings = summary.get("findings") or {}
    by_sev = _gauge(reg, "findings_by_severity", "Findings of this run by severity.", ("severity",))
    for s in SEVERITIES:
        by_sev.labels(s).set(int((findings.get("by_severity") or {}).get(s, 0)))
    by_name = _gauge(reg, "findings", "Findings of this run by name and severity.", ("finding", "severity"))
    for f in findings.get("by_name_severity") or []:
        by_name.labels(f["finding"], f["severity"]).set(int(f["count"]))
    commits = summary.get("offset_commits") or {}
    _gauge(reg, "group_partitions", "Group-partitions audited (latest live commit each).").set(
        int(commits.get("group_partitions") or 0)
    )
    _gauge(
        reg,
        "group_partitions_exported",
        "Group-partitions in the per-group-partition metrics (worst first, capped).",
    ).set(exported)
    _gauge(reg, "offset_commits_live", "Live offset commits read.").set(int(commits.get("live") or 0))
    _gauge(reg, "records_read", "Records read from __consumer_offsets.").set(
        int((summary.get("records_read") or {}).get("total") or 0)
    )
    skipped = _gauge(reg, "records_skipped", "Records or byte ranges skipped as unreadable, by reason.", ("reason",))
    for reason, n in ((summary.get("records_skipped") or {}).get("by_reason") or {}).items():
        skipped.labels(str(reason)).set(int(n))


def _run_gauges(
    reg: CollectorRegistry,
    elapsed: float | None,
    success: bool,
    exit_status: int | None,
    now: float | None,
    failed_stages: Sequence[str] = (),
) -> None:
    Gauge(f"{PREFIX}_run_duration_seconds", "Wall time of the audit run.", registry=reg).set(float(elapsed or 0))
    Gauge(f"{PREFIX}_run_success", "1: the audit completed and wrote its output; 0: it failed.", registry=reg).set(
        1 if success else 0
    )
    if exit_status is not None:
        Gauge(
            f"{PREFIX}_exit_status",
            "Exit status (0 clean, 1 findings at --fail-on, 2 bad input, 3 internal error).",
            registry=reg,
        ).set(int(exit_status))
    if failed_stages:
        stage = Gauge(
            f"{PREFIX}_failed_stage",
            "1 per stage of the run that failed (an internal error; exit status 3).",
            labelnames=("stage",),
            registry=reg,
        )
        for name in dict.fromkeys(str(s) for s in failed_stages):
            stage.labels(name).set(1)
    if success:
        Gauge(
            f"{PREFIX}_last_success_timestamp_seconds",
            "When the last successful audit finished (Unix time).",
            registry=reg,
        ).set(now if now is not None else time.time())


def render(registry: CollectorRegistry) -> bytes:
    """Render the Prometheus text exposition format (what ``metrics.prom`` holds)."""
    return generate_latest(registry)


def parse_grouping(pairs: list[str] | None) -> dict[str, str]:
    """``["cluster=prod", ...]`` -> grouping key.  Raises :class:`MetricsError` on a bad pair or label name."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not _LABEL_NAME.fullmatch(key) or key.startswith("__") or key == "job" or not value:
            raise MetricsError(
                f"--pushgateway-label {pair!r}: give LABEL=VALUE with a Prometheus label name "
                "(letters, digits, _; not job or __*) and a non-empty value"
            )
        out[key] = value
    return out


def check_pushgateway(url: str, timeout: float = 5.0) -> None:
    """Fail fast unless ``url`` is a Pushgateway that answers ``GET /-/healthy``.

    Raises :class:`MetricsError` naming the URL and what went wrong.
    """
    if not re.match(r"^https?://", url):
        raise MetricsError(f"--pushgateway {url!r}: give an http:// or https:// URL, e.g. http://pushgateway:9091")
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/-/healthy", timeout=timeout) as resp:
            if resp.status != 200:
                raise MetricsError(f"--pushgateway {url}: /-/healthy answered HTTP {resp.status}")
    except urllib.error.HTTPError as exc:
        raise MetricsError(f"--pushgateway {url}: /-/healthy answered HTTP {exc.code}; is it a Pushgateway?") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise MetricsError(
            f"--pushgateway {url} is unreachable ({reason}); check the URL or drop --pushgateway"
        ) from None


def push(
    url: str,
    registry: CollectorRegistry,
    *,
    job: str = DEFAULT_JOB,
    grouping: Mapping[str, str] | None = None,
    replace: bool = True,
    timeout: float = 30.0,
) -> None:
    """Push ``registry`` to the Pushgateway at ``url`` under ``job`` and ``grouping``.

    ``replace``: PUT, replacing every metric of the group (a completed run); otherwise POST, replacing
    only the metrics pushed (a failed run's ``run_success 0`` keeps the last good run's results).
    Raises :class:`MetricsError` when the push fails.
    """
    fn = push_to_gateway if replace else pushadd_to_gateway
    try:
        fn(url, job=job, registry=registry, grouping_key=dict(grouping or {}), timeout=timeout)
    except (urllib.error.URLError, OSError) as exc:
        raise MetricsError(f"pushing metrics to {url} failed: {getattr(exc, 'reason', exc)}") from None


def failure_registry(elapsed: float, exit_status: int | None, stage: str | None = None) -> CollectorRegistry:
    """Build the metrics pushed when a run fails before writing its output.

    They are run_success 0, duration, exit status and, for an internal error, ``failed_stage{stage}``.
    """
    reg = CollectorRegistry()
    _run_gauges(reg, elapsed, False, exit_status, None, [stage] if stage else [])
    return reg
