"""``summary.json``'s content: the records read and skipped, the offset commits, the findings, the share groups.

:func:`summary_queries` builds every bounded aggregate (collected by the pipeline in one Spark job) and
:func:`build_summary` makes the summary from their rows; :func:`share_summary` counts the share groups'
state, :func:`rules_not_run` tells why a rule did not judge, and :func:`exit_code` reads the exit status off a
summary.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import __version__
from ..formats.record_types import RECORD_TYPE_NAMES
from ..sources.source import cache_disagreements
from ..tables import SEVERITIES, fails
from .config import AuditConfig

__all__ = [
    "MAX_COUNTED_VERSION",
    "MAX_WHERE",
    "OTHER_KIND",
    "build_summary",
    "exit_code",
    "rules_not_run",
    "share_queries",
    "share_summary",
    "summary_queries",
]

#: the most skipped records (``records_skipped.where``) and epoch-cache disagreements ``summary.json`` lists
MAX_WHERE = 1000
#: ``records_read.by_record_type`` stays bounded whatever bytes the log holds: record types other than
#: :data:`audit.formats.record_types.RECORD_TYPE_NAMES` (and -1, a key too short for one) and value versions outside
#: -1 .. MAX_COUNTED_VERSION are counted under one ``OTHER_KIND`` each (``records_skipped.where`` keeps the first
#: records' own types, files and positions)
MAX_COUNTED_VERSION = 127
OTHER_KIND = -32768


def rules_not_run(cfg: AuditConfig, state) -> dict:
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


def exit_code(cfg: AuditConfig, summary: dict) -> int:
    """1 when a finding reaches ``--fail-on`` or the expectation suite failed, else 0."""
    code = 1 if fails(cfg.fail_on, summary["findings"]["by_severity"]) else 0
    if summary.get("reports", {}).get("expectations", {}).get("success") is False:
        code = 1
    return code


def _inputs(cfg, src) -> dict:
    scope = {"groups": cfg.groups, "topics": cfg.topics}
    scope.update(
        {k: v for k, v in (("exclude_groups", cfg.exclude_groups), ("exclude_topics", cfg.exclude_topics)) if v}
    )
    return {"mode": cfg.mode, "fail_on": cfg.fail_on, **scope, **src.inputs()}


def share_queries(share_raw, share_partitions) -> dict[str, DataFrame]:
    """Build :func:`share_summary`'s two aggregates (``share_states``, ``share_judged``); none without share state."""
    if share_raw is None:
        return {}
    return {
        "share_states": share_raw.groupBy("kind", "decode_error").agg(F.count("*").alias("n")),
        "share_judged": share_partitions.agg(
            F.count("*").alias("n"),
            F.count_distinct("group_id").alias("groups"),
            F.count_if(F.col("verdict") != "OK").alias("with_findings"),
        ),
    }


def share_summary(share_raw, rows: dict) -> dict:
    """Build summary.json's ``share_groups``.

    Whether ``__share_group_state`` was read, its records by outcome, and the share-partitions judged: from the
    rows of :func:`share_queries` (``rows``, collected by the caller with other bounded queries).
    """
    if share_raw is None:
        return {"state_read": False}
    counts = {(r["kind"], r["decode_error"]): int(r["n"]) for r in rows["share_states"]}
    judged = rows["share_judged"][0]
    return {
        "state_read": True,
        "state_records": sum(n for (kind, err), n in counts.items() if kind == "record" and err is None),
        "state_records_skipped": {err: n for (kind, err), n in counts.items() if err is not None},
        "share_partitions": int(judged["n"]),
        "share_groups": int(judged["groups"]),
        "share_partitions_with_findings": int(judged["with_findings"] or 0),
    }


def build_summary(cfg, src, live_counts, started_at, parts: dict) -> dict:
    """Build summary.json content from the rows of :func:`summary_queries` (``parts``).

    The caller collects them with other bounded queries (:func:`audit.spark.collect_together`): each is an
    aggregate bounded by names (record types and versions beyond the known ones counted together:
    :data:`OTHER_KIND`) or a ``take`` of at most :data:`MAX_WHERE`.
    """
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


def summary_queries(src, raw, findings, epochs) -> dict[str, DataFrame]:
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
