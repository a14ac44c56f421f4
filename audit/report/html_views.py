"""The HTML report's views: the collected rows shaped for the page's templates, and the partitions' plots drawn.

Pure Python over the rows :mod:`audit.report.html_queries` collects; no Spark.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..tables import SEVERITIES
from .plots import fmt_ts as _fmt_ts
from .plots import plot_partition

__all__ = [
    "FINDINGS_PAGE_SIZE",
    "changes_view",
    "findings_view",
    "groups_view",
    "plot_views",
    "summary_view",
    "todo_view",
]


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


def _fmt_offset_epoch(offset: Any, epoch: Any) -> str:
    if offset is None:
        return ""
    return f"{offset}@{epoch}" if epoch is not None else str(offset)


def _action(detail: Any) -> str:
    """Return the ``Action:`` part of a finding's ``detail`` (what to do), or the whole detail when it has none."""
    text = str(detail or "")
    return text.split(" Action: ", 1)[1] if " Action: " in text else text


def todo_view(
    statuses: Dict[str, Tuple[int, int]],
    rows: List[Dict[str, Any]],
    total: int,
    max_actions: int = 5,
    plan: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """Build 'What to do', the report's first screen.

    It says how many groups will lose, skip or replay records and on which topics, then the first actions, most
    severe first (each finding's ``Action:``), each linked to its group's reset plan when ``plan`` (the output's
    ``reset_plan/plan.json``) has one.
    """
    plans = {g.get("group_id"): f"reset_plan/{g.get('file')}" for g in (plan or {}).get("groups") or []}
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
                "plan": plans.get(r.get("group_id")),
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
        "plan_groups": len(plans),
        "no_plan": len((plan or {}).get("no_plan") or []),
    }


def groups_view(rows: List[Dict[str, Any]], total: int, cap: int) -> Dict[str, Any]:
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


def summary_view(
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


def changes_view(
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


def findings_view(rows: List[Dict[str, Any]], total: int, cap: int) -> Dict[str, Any]:
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


def plot_views(
    plot_rows: List[Dict[str, Any]], rows: List[Dict[str, Any]], second: Mapping[str, Any]
) -> List[Dict[str, Any]]:
    """Draw one figure per plotted partition (``plot_rows``, in order): the template's ``plots``.

    The figures come from the findings ``rows`` and the second round's rows (:func:`audit.report.html_queries.report_rows`).
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
