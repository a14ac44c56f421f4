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
the stylesheet and script it inlines), every value escaped; this module collects and prepares the data and draws
the plots.

Only bounded data is collected from Spark: at most ``max_findings``
findings, the per-group counts of at most ``max_groups_in_chart`` groups, and
epochs, bounds and committed offsets of the plotted partitions only.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
from collections import defaultdict
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..io import fs
from ..tables import SEVERITIES, TABLES
from .plots import fmt_ts as _fmt_ts
from .plots import plot_group_chart, plot_partition


__all__ = [
    "FINDINGS_PAGE_SIZE",
    "REPORT_FILENAME",
    "write_html_report",
]

REPORT_FILENAME = "report.html"
#: findings per page of the findings table (the page's script pages and filters them)
FINDINGS_PAGE_SIZE = 100


def _cause_text(r: dict) -> str:
    """Format a LOG_TRUNCATION's cause under its name: ``unclean election: epoch 2, leader 2, at 07:14:55`` ..."""
    cause = r.get("cause")
    if not cause:
        return ""
    text = cause.replace("_", " ")
    if cause == "unclean_election" and r.get("cause_leader_epoch") is not None:
        text += (
            f": epoch {r.get('cause_leader_epoch')}, leader {r.get('cause_leader')}, at {_fmt_ts(r.get('cause_time'))}"
        )
    return text


#: The findings table's columns (the output contract, :data:`audit.tables.TABLES`); those present are collected.
_FINDING_COLUMNS = tuple(c.name for c in TABLES["findings"])


def _replica_text(r: dict) -> str:
    """Name, for a REPLICA_DIVERGENCE, the broker holding the lost lineage and the groups that consumed into it instead.

    A REPLICA_DIVERGENCE has no group; the text is empty for any other finding.
    """
    if r.get("group_id") is None and r.get("replica_broker") is not None:
        groups = list(r.get("groups_consumed") or [])
        text = f"replica on broker {r.get('replica_broker')}"
        if groups:
            text += (
                "; consumed by "
                + ", ".join(groups[:10])
                + (f" and {len(groups) - 10} more" if len(groups) > 10 else "")
            )
        return text
    return ""


def _owner_text(r: dict) -> str:
    """Format the group's state and the partition's last owner under the group name (whom to call)."""
    bits = []
    if r.get("owner_client_id") is not None or r.get("owner_member_id") is not None:
        who = f"{r.get('owner_client_id') or '?'} on {r.get('owner_client_host') or '?'}"
        if r.get("owner_group_instance_id"):
            who += f" (instance {r.get('owner_group_instance_id')})"
        bits.append(f"owner: {who}, member {r.get('owner_member_id')}, generation {r.get('owner_generation')}")
    if r.get("group_state"):
        bits.append(f"group {r.get('group_state')}")
    return "; ".join(bits)


# --------------------------------------------------------------------------- helpers


def _fmt_offset_epoch(offset: Any, epoch: Any) -> str:
    if offset is None:
        return ""
    return f"{offset}@{epoch}" if epoch is not None else str(offset)


def _severity_rank_expr(col_name: str = "severity"):
    from pyspark.sql import functions as F

    expr = None
    for rank, sev in enumerate(SEVERITIES):
        cond = F.col(col_name) == F.lit(sev)
        expr = F.when(cond, F.lit(rank)) if expr is None else expr.when(cond, F.lit(rank))
    return expr.otherwise(F.lit(len(SEVERITIES)))  # type: ignore[union-attr]  # SEVERITIES is not empty


def _read_parquet(spark, tables_dir: str, name: str):
    path = f"{tables_dir}/{name}"
    if not fs.exists(spark, path):
        return None
    return fs.read_parquet(spark, path)


def _count(df):
    """``df``'s row count as a one-row query (``n``)."""
    from pyspark.sql import functions as F

    return df.agg(F.count(F.lit(1)).alias("n"))


def _findings_queries(findings_df, max_findings: int) -> Dict[str, Any]:
    """Query the findings listed (most severe first, at most ``max_findings``) and their total."""
    from pyspark.sql import functions as F

    have = set(findings_df.columns)
    cols = [c for c in _FINDING_COLUMNS if c in have]
    rows = (
        findings_df.select(*cols)
        .withColumn("_rank", _severity_rank_expr())
        .orderBy(
            "_rank",
            F.col("records_at_risk").desc_nulls_last() if "records_at_risk" in cols else F.lit(0),
            "group_id",
            "topic",
            "partition",
            "finding",
        )
        .limit(max_findings)
        .drop("_rank")
    )
    return {"findings": rows, "findings_n": _count(findings_df)}


def _group_count_queries(findings_df, max_groups: int) -> Dict[str, Any]:
    """Query findings per group by severity (most critical first, at most ``max_groups``) and the number of groups."""
    from pyspark.sql import functions as F

    per_group = (
        findings_df.where(F.col("group_id").isNotNull())
        .groupBy("group_id")
        .agg(
            *[F.sum(F.when(F.col("severity") == s, 1).otherwise(0)).alias(s) for s in SEVERITIES],
            F.count(F.lit(1)).alias("_total"),
        )
    )
    rows = per_group.orderBy(F.col(SEVERITIES[0]).desc(), F.col("_total").desc(), "group_id").limit(max_groups)
    return {"group_counts": rows, "group_counts_n": _count(per_group)}


def _plot_partition_queries(findings_df, max_plots: int) -> Dict[str, Any]:
    """Query the (topic, partition) keys to plot, with their divergences, and the number of partitions with findings.

    The keys are ordered most records at risk first (the sum over the partition's findings), then the most
    severe.
    """
    from pyspark.sql import functions as F

    risk = F.col("records_at_risk") if "records_at_risk" in findings_df.columns else F.lit(0)
    per_tp = (
        findings_df.withColumn("_rank", _severity_rank_expr())
        .groupBy("topic", "partition")
        .agg(
            F.min("_rank").alias("_worst"),
            F.count(F.lit(1)).alias("_n"),
            F.coalesce(F.sum(risk), F.lit(0)).alias("records_at_risk"),
            F.slice(
                F.array_sort(
                    F.collect_set(
                        F.when(
                            F.col("finding").isin("LOG_TRUNCATION", "REPLICA_DIVERGENCE"), F.col("divergence_offset")
                        )
                    )
                ),
                1,
                10,
            ).alias("divergences"),
        )
    )
    rows = per_tp.orderBy(F.col("records_at_risk").desc(), "_worst", F.col("_n").desc(), "topic", "partition").limit(
        max_plots
    )
    return {"plots": rows, "plots_n": _count(per_tp)}


def _for_partitions_query(df, keys_df, max_rows: int):
    return df.join(keys_df, on=["topic", "partition"], how="inner").limit(max_rows)


def _commits_for_partitions_query(df, keys_df, max_per_partition: int):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    have = set(df.columns)
    rank = F.when(F.col("verdict") == "OK", F.lit(9)).otherwise(F.lit(0)) if "verdict" in have else F.lit(0)
    w = Window.partitionBy("topic", "partition").orderBy(rank, "group_id")
    cols = [
        c
        for c in (
            "group_id",
            "topic",
            "partition",
            "committed_offset",
            "committed_leader_epoch",
            "verdict",
            "commit_timestamp",
            "owner_client_id",
            "owner_client_host",
        )
        if c in have
    ]
    return (
        df.select(*cols)
        .join(keys_df, on=["topic", "partition"], how="inner")
        .withColumn("_rn", F.row_number().over(w))
        .withColumn("_n", F.count(F.lit(1)).over(Window.partitionBy("topic", "partition")))
        .where(F.col("_rn") <= max_per_partition)
    )


def _verdict_query(committed_df):
    """Query committed offsets per verdict (None without the table or its column)."""
    if committed_df is None or "verdict" not in committed_df.columns:
        return None
    return committed_df.groupBy("verdict").count().orderBy("verdict").limit(100)


# --------------------------------------------------------------------------- plots


def _groups_queries(groups_df, max_rows: int) -> Dict[str, Any]:
    """Query the ``groups`` table's rows, the number of groups, and groups and records at risk per status.

    The rows come worst status first (then most records at risk, most lag), at most ``max_rows``; none without
    the table.
    """
    if groups_df is None:
        return {}
    from pyspark.sql import functions as F

    from ..groups import worst_first

    rows = worst_first(groups_df).limit(max_rows)
    statuses = groups_df.groupBy("status").agg(F.count(F.lit(1)).alias("n"), F.sum("records_at_risk").alias("risk"))
    return {"groups": rows, "groups_n": _count(groups_df), "statuses": statuses}


def _status_counts(rows: List[Dict[str, Any]]) -> Dict[str, Tuple[int, int]]:
    """``{status: (groups, records at risk)}`` from :func:`_groups_queries`' ``statuses`` rows."""
    return {str(r["status"]): (int(r["n"]), int(r["risk"] or 0)) for r in rows}


def _action(detail: Any) -> str:
    """Return the ``Action:`` part of a finding's ``detail`` (what to do), or the whole detail when it has none."""
    text = str(detail or "")
    return text.split(" Action: ", 1)[1] if " Action: " in text else text


def _todo_view(
    statuses: Dict[str, Tuple[int, int]], rows: List[Dict[str, Any]], total: int, max_actions: int = 5
) -> Dict[str, Any]:
    """Build 'What to do', the report's first screen.

    It says how many groups will lose, skip or replay records and on which topics, then the first actions, most
    severe first (each finding's ``Action:``).
    """
    at_risk, risk_records = statuses.get("AT_RISK", (0, 0))
    urgent = [r for r in rows if r.get("severity") in ("critical", "error")]
    topics = sorted({str(r.get("topic")) for r in urgent})
    seen = set()
    actions: List[Dict[str, Any]] = []
    for r in urgent:
        act = _action(r.get("detail"))
        if (r.get("finding"), act) in seen:
            continue
        seen.add((r.get("finding"), act))
        who = r.get("group_id") if r.get("group_id") is not None else f"broker {r.get('replica_broker')}'s replica of"
        actions.append(
            {
                "severity": r.get("severity"),
                "finding": r.get("finding"),
                "who": who,
                "topic": r.get("topic"),
                "partition": r.get("partition"),
                "action": act,
            }
        )
        if len(actions) >= max_actions:
            break
    return {
        "at_risk": at_risk,
        "risk_records": risk_records,
        "look": sum(statuses.get(s, (0, 0))[0] for s in ("WARN", "STALE")),
        "ok": statuses.get("OK", (0, 0))[0],
        "urgent": bool(urgent),
        "topics": ", ".join(topics[:12]),
        "topics_cut": len(topics) > 12,
        "more": total > len(rows),
        "actions": actions,
    }


def _groups_view(rows: List[Dict[str, Any]], total: int, cap: int) -> Dict[str, Any]:
    """Build the per-group table of the ``Per group`` section (from ``groups/``)."""
    out = []
    for r in rows:
        out.append(
            {
                **r,
                "status": str(r.get("status")),
                "kind": " / ".join(str(x) for x in (r.get("group_type"), r.get("group_state")) if x is not None) or "-",
                "counts": "/".join(
                    str(r.get(f"findings_{s}") if r.get(f"findings_{s}") is not None else "-")
                    for s in ("critical", "error", "warning", "info")
                ),
                "max_lag_where": (r.get("max_lag_topic"), r.get("max_lag_partition"))
                if r.get("max_lag_topic") is not None
                else None,
                "worst_where": (r.get("worst_topic"), r.get("worst_partition"))
                if r.get("worst_topic") is not None
                else None,
                "latest_commit": _fmt_ts(r.get("latest_commit_timestamp")),
            }
        )
    return {"rows": out, "total": total, "cap": cap}


def _incident_timeline(
    timeline: Sequence[Dict[str, Any]],
    commits: Sequence[Dict[str, Any]],
    findings: Sequence[Dict[str, Any]],
    max_events: int = 60,
    brokers: Sequence[Dict[str, Any]] = (),
) -> Optional[Dict[str, Any]]:
    """Tell what happened to one partition, in time order.

    Leader epochs from the metadata log (unclean elections marked), the fencing, unfencing and controlled
    shutdowns of the brokers that led it (``broker_timeline/``), the groups' latest commits, then what the audit
    found.

    Returns
    -------
    dict or None
        ``{"events": [{"when", "what", "kind"}], "findings": [{"finding", "whose", "outcome"}], "earlier": events
        left out}``.  None when there is nothing to order (no timeline and no commit time).
    """
    events: List[Tuple[Any, int, str, str]] = []
    leaders = {t.get("leader") for t in timeline}
    for b in brokers:
        if b.get("broker_id") in leaders and b.get("event") != "registered" and b.get("changed_at") is not None:
            events.append((b["changed_at"], 0, f"broker {b['broker_id']} {b['event'].replace('_', ' ')}", "broker"))
    for t in timeline:
        leader = t.get("leader")
        what = (
            f"leader epoch {t.get('epoch')} began, leader broker {leader}"
            if leader is not None and leader >= 0
            else f"leader epoch {t.get('epoch')} began with no leader (no replica in the ISR was online)"
        )
        if t.get("unclean"):
            what += ": UNCLEAN leader election (a replica outside the ISR; records past its log end are lost)"
        events.append((t.get("started_at"), 0, what, "unclean" if t.get("unclean") else "epoch"))
    for c in commits:
        if c.get("commit_timestamp") is None:
            continue
        who = f" by {c['owner_client_id']} on {c.get('owner_client_host')}" if c.get("owner_client_id") else ""
        events.append(
            (
                c["commit_timestamp"],
                1,
                f"group {c.get('group_id')} committed offset {c.get('committed_offset')} "
                f"(leader epoch {c.get('committed_leader_epoch')}){who}: {c.get('verdict') or 'OK'}",
                "commit",
            )
        )
    for f in findings:
        if f.get("finding") == "PARTITION_EXPANSION_ORDER" and f.get("cause_time") is not None:
            events.append(
                (
                    f["cause_time"],
                    0,
                    f"the topic grew (partition {f.get('expansion_partition')} added): "
                    f"this partition's log stood at offset {f.get('offset_at_expansion')}",
                    "expansion",
                )
            )
    events = list(dict.fromkeys(events))  # one expansion event, however many groups it concerns
    if not events:
        return None
    known = sorted((e for e in events if e[0] is not None), key=lambda e: (e[0], e[1]))
    unknown = [e for e in events if e[0] is None]
    ordered = unknown + known
    return {
        "events": [
            {"when": _fmt_ts(when) if when else "from snapshot", "what": what, "kind": kind}
            for when, _k, what, kind in ordered[-max_events:]
        ],
        "findings": [
            {
                "finding": f.get("finding"),
                "whose": f"for group {f.get('group_id')}"
                if f.get("group_id") is not None
                else f"for broker {f.get('replica_broker')}'s replica",
                "outcome": f.get("cause") or f.get("severity"),
            }
            for f in findings
        ],
        "earlier": max(0, len(ordered) - max_events),
    }


def _cache_disagreements(epochs: Iterable[Dict[str, Any]]) -> List[str]:
    starts: Dict[int, Dict[int, int]] = defaultdict(dict)
    for e in epochs:
        if e.get("leader_epoch") is None or e.get("broker_id") is None or e.get("start_offset") is None:
            continue  # a live leader's epoch has no start offset: nothing to compare
        starts[int(e["leader_epoch"])][int(e["broker_id"])] = int(e["start_offset"])
    notes = []
    for ep in sorted(starts):
        values = starts[ep]
        if len(set(values.values())) > 1:
            parts = ", ".join(f"broker {b}: {o}" for b, o in sorted(values.items()))
            notes.append(f"replicas disagree on the start offset of epoch {ep} ({parts})")
    return notes


# --------------------------------------------------------------------------- html


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


def _value_view(value: Any) -> Dict[str, Any]:
    """Shape a summary value for the page.

    A list of records or a mapping of records as a table, a mapping as key/value rows, anything else as text.
    """
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        cols = list(dict.fromkeys(k for v in value for k in v))
        return {"kind": "records", "cols": cols, "rows": [[v.get(c) for c in cols] for v in value[:500]]}
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        cols = list(dict.fromkeys(k for v in value.values() for k in v))
        return {
            "kind": "keyed",
            "cols": cols,
            "rows": [(k, [v.get(c) for c in cols]) for k, v in list(value.items())[:500]],
        }
    if isinstance(value, dict):
        return {"kind": "kv", "pairs": [(str(k), v) for k, v in value.items()]}
    if isinstance(value, list):
        return {"kind": "text", "text": ", ".join(str(v) for v in value)} if value else {"kind": "none"}
    return {"kind": "text", "text": value}


def _counts_items(counts: Any, order: Sequence[str] = ()) -> List[Tuple[str, Any]]:
    """Return a card's (name, count) rows: the names in ``order`` first, then the largest counts."""
    if not (isinstance(counts, dict) and counts):
        return []

    def key(kv):
        if kv[0] in order:
            return (0, order.index(kv[0]), 0, kv[0])
        return (1, 0, -kv[1] if isinstance(kv[1], (int, float)) else 0, kv[0])

    return sorted(((str(k), v) for k, v in counts.items()), key=key)


def _summary_view(
    summary: Optional[Dict[str, Any]],
    verdicts: Dict[str, int],
    expectations: Optional[Dict[str, Any]],
    output_dir: str,
    max_skipped_locations: int,
) -> Dict[str, Any]:
    """Build the run summary at the end of the page.

    summary.json's counts as cards, the expectation suite's outcome, where data was skipped, the other fields,
    and the inputs.
    """
    missing = summary is None
    summary = summary or {}
    inputs = summary.get("inputs") or {}
    elapsed = summary.get("elapsed_seconds")
    read = summary.get("records_read") or {}
    skipped = summary.get("records_skipped") or {}
    found = summary.get("findings") or {}
    cards = [
        ("Records read by type", _counts_items(read.get("by_record_type"))),
        ("Records read by value version", _counts_items(read.get("by_value_version"))),
        ("Records skipped by reason", _counts_items(skipped.get("by_reason"))),
        ("Findings by severity", _counts_items(found.get("by_severity"), SEVERITIES)),
        ("Findings by name", _counts_items(found.get("by_name"))),
        ("Latest commits by verdict", _counts_items(verdicts, ("OK",))),
    ]
    exp = None
    if expectations is not None:
        stats = expectations.get("statistics") or {}
        exp = {
            "ok": bool(expectations.get("success")),
            "successful": stats.get("successful_expectations"),
            "evaluated": stats.get("evaluated_expectations"),
            "failed": (expectations.get("failed_checks") or [])[:50],
            "data_docs": os.path.isfile(os.path.join(output_dir, "data_docs", "index.html")),
        }
    where = skipped.get("where") or []
    shown = where[:max_skipped_locations]
    known = {"inputs", "records_read", "records_skipped", "findings", "elapsed_seconds", "history"}
    extra = {k: v for k, v in summary.items() if k not in known}
    other = None
    if extra:
        other = json.dumps(extra, indent=2, default=str)
        if len(other) > 20000:
            other = other[:20000] + "\n..."
    return {
        "missing": missing,
        "elapsed": f"{float(elapsed):.2f}" if isinstance(elapsed, (int, float)) else None,
        "cards": cards,
        "expectations": exp,
        "skipped": [w for w in shown if isinstance(w, dict)],
        "skipped_left_out": len(where) - len(shown),
        "other": other,
        "inputs": [(k, _value_view(v)) for k, v in inputs.items()] if isinstance(inputs, dict) else [],
    }


def _changes_view(
    info: Optional[Dict[str, Any]], rows: List[Dict[str, Any]], cap: int, group_rows: Sequence[Dict[str, Any]] = ()
) -> Dict[str, Any]:
    """Build 'Since the previous run': the findings' changes, then the groups whose status changed.

    Counts of new / persisted / resolved findings and up to ``cap`` rows of each, then the groups whose status
    changed (``group_rows``: ``group_changes/``, at most ``cap``).
    """
    info = info or {}
    by_status = []
    for status in ("new", "resolved", "persisted"):
        these = [
            dict(
                r,
                committed=r.get("committed_offset") if status != "resolved" else "-",
                previous_severity=r.get("previous_severity") or "",
            )
            for r in rows
            if r.get("status") == status
        ]
        if these:
            by_status.append((status, these))
    return {
        "counts": {k: int(info.get(k) or 0) for k in ("new", "persisted", "resolved")},
        "by_status": by_status,
        "cap": cap,
        "groups": [
            dict(r, worst_verdict=r.get("worst_verdict") or r.get("previous_worst_verdict")) for r in group_rows
        ],
        "n_group_changes": sum(int(info.get(f"groups_{k}") or 0) for k in ("changed", "new", "gone")),
    }


def _findings_view(rows: List[Dict[str, Any]], total: int, cap: int) -> Dict[str, Any]:
    """Build the findings table: one entry per finding with its cells as text.

    The first ``FINDINGS_PAGE_SIZE`` are shown (the page's script pages through the rest).
    """
    head = (
        "severity",
        "finding",
        "group",
        "partition",
        "committed",
        "commit time",
        "divergence",
        "records at risk",
        "log start..end",
        "previous",
        "broker",
    )
    out = []
    for i, r in enumerate(rows):
        out.append(
            {
                "severity": str(r.get("severity") or ""),
                "finding": r.get("finding"),
                "cause": _cause_text(r),
                "replica": _replica_text(r),
                "group_id": r.get("group_id"),
                "owner": _owner_text(r),
                "tp": f"{r.get('topic')}-{r.get('partition')}",
                "committed": _fmt_offset_epoch(r.get("committed_offset"), r.get("committed_leader_epoch")),
                "commit_time": _fmt_ts(r.get("commit_timestamp")),
                "divergence_offset": r.get("divergence_offset"),
                "records_at_risk": r.get("records_at_risk"),
                "bounds": (r.get("log_start_offset"), r.get("log_end_offset"))
                if r.get("log_start_offset") is not None or r.get("log_end_offset") is not None
                else None,
                "previous": _fmt_offset_epoch(r.get("previous_offset"), r.get("previous_leader_epoch")),
                "answered_by_broker": r.get("answered_by_broker"),
                "detail": r.get("detail"),
                "hidden": i >= FINDINGS_PAGE_SIZE,
            }
        )
    return {
        "rows": out,
        "total": total,
        "cap": cap,
        "head": head,
        "pages": max(1, -(-len(rows) // FINDINGS_PAGE_SIZE)),
    }


def write_html_report(
    spark,
    output_dir: str,
    *,
    max_findings: int = 5000,
    max_plots: int = 20,
    max_groups_per_plot: int = 25,
    max_groups_in_chart: int = 40,
    max_epoch_rows: int = 100_000,
    max_skipped_locations: int = 200,
    max_changes: int = 200,
    max_groups_in_table: int = 500,
    title: str = "Kafka consumer offset audit",
    display_dir: str | None = None,
    tables_dir: str | None = None,
    wait_for: Callable[[], Any] | None = None,
    tables: Mapping[str, Any] | None = None,
) -> str:
    """Write ``<output_dir>/report.html``, a self-contained report of an audit run.

    The Spark queries run in two jobs (:func:`audit.spark.collect_together`): the findings, per-group and
    per-partition aggregates, verdict counts and groups; then the plotted partitions' epochs, bounds, commits,
    the changes and broker events.

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
    given = dict(tables or {})

    def table(name: str):
        return given[name] if name in given else _read_parquet(spark, tables_dir, name)

    findings_df = table("findings")
    if findings_df is None:
        raise FileNotFoundError(f"findings/ not found under {tables_dir}")
    committed_df = table("committed_offsets")
    epochs_df = table("epochs")
    bounds_df = table("bounds")
    groups_df = table("groups")

    summary = fs.read_json(spark, f"{tables_dir}/summary.json")
    first = _collect_first_round(
        findings_df, committed_df, groups_df, max_findings, max_groups_in_chart, max_plots, max_groups_in_table
    )
    keys_df = _plot_keys_frame(spark, first["plot_rows"])
    second = _collect_second_round(
        first["plot_rows"],
        keys_df,
        epochs_df,
        bounds_df,
        committed_df,
        table("finding_changes"),
        table("group_changes"),
        table("broker_timeline"),
        max_epoch_rows=max_epoch_rows,
        max_groups_per_plot=max_groups_per_plot,
        max_changes=max_changes,
    )
    plots = _plot_views(first["plot_rows"], first["rows"], second)
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


def _collect_first_round(
    findings_df,
    committed_df,
    groups_df,
    max_findings: int,
    max_groups_in_chart: int,
    max_plots: int,
    max_groups_in_table: int,
) -> Dict[str, Any]:
    """Collect the first round's rows in one Spark job.

    ``rows``/``total`` (findings), ``group_counts``/``n_groups`` (per group by severity), ``plot_rows``/``n_tp``
    (the partitions to plot), ``verdicts`` (verdict -> count), ``group_rows``/``n_group_rows`` and ``statuses``
    (the groups table).
    """
    from ..spark import collect_together

    first = {
        **_findings_queries(findings_df, max_findings),
        **_group_count_queries(findings_df, max_groups_in_chart),
        **_plot_partition_queries(findings_df, max_plots),
        **_groups_queries(groups_df, max_groups_in_table),
    }
    verdict_query = _verdict_query(committed_df)
    if verdict_query is not None:
        first["verdicts"] = verdict_query
    got = collect_together(first)
    return {
        "rows": got["findings"],
        "total": int(got["findings_n"][0]["n"]),
        "group_counts": {r["group_id"]: {s: int(r[s] or 0) for s in SEVERITIES} for r in got["group_counts"]},
        "n_groups": int(got["group_counts_n"][0]["n"]),
        "plot_rows": got["plots"],
        "n_tp": int(got["plots_n"][0]["n"]),
        "verdicts": {str(r["verdict"]): int(r["count"]) for r in got.get("verdicts", [])},
        "group_rows": got.get("groups", []),
        "n_group_rows": int(got["groups_n"][0]["n"]) if "groups_n" in got else 0,
        "statuses": _status_counts(got.get("statuses", [])),
    }


def _plot_keys_frame(spark, plot_rows: List[Dict[str, Any]]):
    """Make the plotted partitions' ``(topic, partition)`` a DataFrame (no job).

    It is broadcast unless the session runs with small settings.
    """
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from ..spark import broadcast_unless_small

    keys = [(r["topic"], int(r["partition"])) for r in plot_rows]
    keys_df = spark.createDataFrame(
        keys, StructType([StructField("topic", StringType()), StructField("partition", IntegerType())])
    )
    return broadcast_unless_small(keys_df)


def _collect_second_round(
    plot_rows: List[Dict[str, Any]],
    keys_df,
    epochs_df,
    bounds_df,
    committed_df,
    changes_df,
    group_changes_df,
    broker_df,
    *,
    max_epoch_rows: int,
    max_groups_per_plot: int,
    max_changes: int,
) -> Dict[str, Any]:
    """Collect the second round's rows in one Spark job.

    ``epoch_rows``, ``bound_rows``, ``commit_rows`` and ``broker_rows`` of the plotted partitions,
    ``change_rows`` (new, resolved, persisted) and ``gchange_rows`` (the groups' changes).
    """
    from pyspark.sql import functions as F

    from ..spark import collect_together

    second: Dict[str, Any] = {}
    if plot_rows:
        for name, df in (("epochs", epochs_df), ("bounds", bounds_df)):
            if df is not None:
                limit = max_epoch_rows if name == "epochs" else len(plot_rows) * 4 + 1
                second[name] = _for_partitions_query(df, keys_df, limit)
        if committed_df is not None:
            second["commits"] = _commits_for_partitions_query(committed_df, keys_df, max_groups_per_plot)
        # the newest broker events only (a long-lived cluster fences and unfences on every restart)
        if broker_df is not None:
            second["brokers"] = (
                broker_df.where("changed_at IS NOT NULL").orderBy(F.col("changed_at").desc()).limit(max_epoch_rows)
            )
    if changes_df is not None:
        for status in ("new", "resolved", "persisted"):
            second[f"changes_{status}"] = (
                changes_df.where(F.col("status") == status)
                .orderBy(_severity_rank_expr(), "group_id", "topic", "partition", "finding")
                .limit(max_changes)
            )
    if group_changes_df is not None:
        order = F.create_map(F.lit("changed"), F.lit(0), F.lit("new"), F.lit(1), F.lit("gone"), F.lit(2))
        second["group_changes"] = group_changes_df.orderBy(order[F.col("change")], "group_id").limit(max_changes)
    got = collect_together(second)
    return {
        "epoch_rows": got.get("epochs", []),
        "bound_rows": got.get("bounds", []),
        "commit_rows": got.get("commits", []),
        "change_rows": [r for status in ("new", "resolved", "persisted") for r in got.get(f"changes_{status}", [])],
        "broker_rows": got.get("brokers", []),
        "gchange_rows": got.get("group_changes", []),
    }


def _plot_views(
    plot_rows: List[Dict[str, Any]], rows: List[Dict[str, Any]], second: Mapping[str, Any]
) -> List[Dict[str, Any]]:
    """Draw one figure per plotted partition (``plot_rows``, in order): the template's ``plots``.

    The figures come from the findings ``rows`` and the second round's rows (:func:`_collect_second_round`).
    """
    epochs_by_tp: Dict[Tuple[str, int], List[Dict[str, Any]]] = defaultdict(list)
    for e in second["epoch_rows"]:
        epochs_by_tp[(e["topic"], int(e["partition"]))].append(e)
    bounds_by_tp = {(b["topic"], int(b["partition"])): b for b in second["bound_rows"]}
    commits_by_tp: Dict[Tuple[str, int], List[Dict[str, Any]]] = defaultdict(list)
    for c in second["commit_rows"]:
        commits_by_tp[(c["topic"], int(c["partition"]))].append(c)
    plots: List[Dict[str, Any]] = []
    for r in plot_rows:
        tp = (r["topic"], int(r["partition"]))
        plots.append(
            _plot_view(
                tp,
                [int(d) for d in (r["divergences"] or []) if d is not None],
                epochs_by_tp.get(tp, []),
                bounds_by_tp.get(tp),
                commits_by_tp.get(tp, []),
                [f for f in rows if (f.get("topic"), f.get("partition")) == tp],
                second["broker_rows"],
            )
        )
    return plots


def _plot_view(
    tp: Tuple[str, int],
    divergences: List[int],
    eps: List[Dict[str, Any]],
    b: Optional[Dict[str, Any]],
    cs: List[Dict[str, Any]],
    tp_findings: List[Dict[str, Any]],
    broker_rows: List[Dict[str, Any]],
) -> Dict[str, Any]:
    """One partition's figure: its plot's ``uri``, ``alt`` text, ``caption`` and incident ``timeline``."""
    timeline = [t.asDict() if hasattr(t, "asDict") else dict(t) for t in ((b or {}).get("epoch_timeline") or [])]
    uri = plot_partition(tp[0], tp[1], eps, b, cs, divergences, timeline, tp_findings)
    story = _incident_timeline(timeline, cs, tp_findings, brokers=broker_rows)
    notes = _cache_disagreements(eps)
    if not eps:
        notes.append("no leader-epoch cache entries for this partition in epochs/")
    omitted = (cs[0].get("_n", len(cs)) - len(cs)) if cs else 0
    if omitted > 0:
        notes.append(f"{omitted} more groups' committed offsets not marked")
    caption_bits = []
    if b:
        caption_bits.append(
            f"log {b.get('log_start_offset')}..{b.get('log_end_offset')}, high watermark "
            f"{b.get('high_watermark')}, leader broker {b.get('leader_id')}"
        )
    if divergences:
        caption_bits.append("divergence at " + ", ".join(str(d) for d in divergences))
    caption_bits += notes
    alt = f"Leader-epoch history of {tp[0]}-{tp[1]} with the committed offsets of {len(cs)} group(s)"
    return {
        "topic": tp[0],
        "partition": tp[1],
        "divergences": ",".join(map(str, divergences)),
        "alt": alt,
        "uri": uri,
        "caption": "; ".join(caption_bits),
        "timeline": story,
    }


def _render_page(
    first: Mapping[str, Any],
    second: Mapping[str, Any],
    plots: List[Dict[str, Any]],
    group_uri: Optional[str],
    summary: Optional[Dict[str, Any]],
    expectations: Optional[Dict[str, Any]],
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

    From the two rounds' rows (:func:`_collect_first_round`, :func:`_collect_second_round`), the drawn plots and
    the expectation result.
    """
    history = (summary or {}).get("history")
    groups = _groups_view(first["group_rows"], first["n_group_rows"], max_groups_in_table)
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
            todo=_todo_view(first["statuses"], first["rows"], first["total"]),
            changes=_changes_view(history, second["change_rows"], max_changes, second["gchange_rows"]),
            findings=_findings_view(first["rows"], first["total"], max_findings),
            severities=SEVERITIES,
            groups=groups,
            plots=plots,
            plots_left_out=max(0, first["n_tp"] - len(first["plot_rows"])),
            max_plots=max_plots,
            summary=_summary_view(summary, first["verdicts"], expectations, output_dir, max_skipped_locations),
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
