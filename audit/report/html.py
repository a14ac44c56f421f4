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

Only bounded data is collected from Spark: at most ``max_findings``
findings, the per-group counts of at most ``max_groups_in_chart`` groups, and
epochs, bounds and committed offsets of the plotted partitions only.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import os
from collections import defaultdict
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ..sources import fs

SEVERITY_ORDER: Tuple[str, ...] = ("critical", "error", "warning", "info")
SEVERITY_COLORS: Dict[str, str] = {
    "critical": "#b3001b",
    "error": "#e8590c",
    "warning": "#f2b705",
    "info": "#4c6ef5",
    "OK": "#2b8a3e",
}
REPORT_FILENAME = "report.html"
#: findings per page of the findings table (the page's script pages and filters them)
FINDINGS_PAGE_SIZE = 100


def _cause_html(r: dict) -> str:
    """A LOG_TRUNCATION's cause under its name: ``unclean election: epoch 2, leader 2, at 07:14:55`` ..."""
    cause = r.get("cause")
    if not cause:
        return ""
    text = cause.replace("_", " ")
    if cause == "unclean_election" and r.get("cause_leader_epoch") is not None:
        text += (
            f": epoch {r.get('cause_leader_epoch')}, leader {r.get('cause_leader')}, at {_fmt_ts(r.get('cause_time'))}"
        )
    return f'<br><small class="cause">{_esc(text)}</small>'


_FINDING_COLUMNS = (
    "group_id",
    "topic",
    "partition",
    "finding",
    "severity",
    "committed_offset",
    "committed_leader_epoch",
    "commit_timestamp",
    "divergence_offset",
    "records_at_risk",
    "epoch_end_offset",
    "log_start_offset",
    "log_end_offset",
    "previous_offset",
    "previous_leader_epoch",
    "answered_by_broker",
    "detail",
    "cause",
    "cause_leader_epoch",
    "cause_leader",
    "cause_time",
    "group_state",
    "group_protocol",
    "owner_member_id",
    "owner_group_instance_id",
    "owner_client_id",
    "owner_client_host",
    "owner_generation",
    "replica_broker",
    "groups_consumed",
    "offset_at_expansion",
    "expansion_partition",
)


def _group_cell(r: dict) -> str:
    """The group (and its owner); a REPLICA_DIVERGENCE has none: the broker holding the lost lineage and the
    groups that consumed into it instead."""
    if r.get("group_id") is None and r.get("replica_broker") is not None:
        groups = list(r.get("groups_consumed") or [])
        text = f"replica on broker {r.get('replica_broker')}"
        if groups:
            text += (
                "; consumed by "
                + ", ".join(groups[:10])
                + (f" and {len(groups) - 10} more" if len(groups) > 10 else "")
            )
        return f'<small class="owner">{_esc(text)}</small>'
    return f"{_esc(r.get('group_id'))}{_owner_html(r)}"


def _owner_html(r: dict) -> str:
    """The group's state and the partition's last owner under the group name (whom to call)."""
    bits = []
    if r.get("owner_client_id") is not None or r.get("owner_member_id") is not None:
        who = f"{r.get('owner_client_id') or '?'} on {r.get('owner_client_host') or '?'}"
        if r.get("owner_group_instance_id"):
            who += f" (instance {r.get('owner_group_instance_id')})"
        bits.append(f"owner: {who}, member {r.get('owner_member_id')}, generation {r.get('owner_generation')}")
    if r.get("group_state"):
        bits.append(f"group {r.get('group_state')}")
    if not bits:
        return ""
    return f'<br><small class="owner">{_esc("; ".join(bits))}</small>'


# --------------------------------------------------------------------------- helpers


def _esc(value: Any) -> str:
    if value is None:
        return ""
    return html.escape(str(value), quote=True)


def _fmt_offset_epoch(offset: Any, epoch: Any) -> str:
    if offset is None:
        return ""
    return f"{offset}@{epoch}" if epoch is not None else str(offset)


def _fmt_ts(value: Any) -> str:
    if isinstance(value, _dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return "" if value is None else str(value)


def _severity_rank_expr(col_name: str = "severity"):
    from pyspark.sql import functions as F

    expr = None
    for rank, sev in enumerate(SEVERITY_ORDER):
        cond = F.col(col_name) == F.lit(sev)
        expr = F.when(cond, F.lit(rank)) if expr is None else expr.when(cond, F.lit(rank))
    return expr.otherwise(F.lit(len(SEVERITY_ORDER)))  # type: ignore[union-attr]  # SEVERITY_ORDER is not empty


def _read_parquet(spark, tables_dir: str, name: str):
    path = f"{tables_dir}/{name}"
    if not fs.exists(spark, path):
        return None
    return spark.read.parquet(path)


def _figure_to_data_uri(fig) -> str:
    """``fig`` as an SVG ``data:`` URI.  Text stays text (``svg.fonttype: none``, with matplotlib's font
    fallbacks down to ``sans-serif``): no glyph is rasterised or turned into a path and nothing is PNG-encoded
    (a partition's plot: about 0.065 s of the GIL instead of 0.098 s as a PNG, and half the bytes), and the plot
    stays sharp at any zoom.  ``svg.hashsalt`` makes the element ids the same on every run."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    FigureCanvasSVG(fig)
    buf = io.BytesIO()
    # the layout comes with the figure (see _new_figure); bbox_inches="tight" would draw it twice
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "kafka-offset-audit"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _new_figure(width: float, height: float, margins: dict | None = None):
    """A pyplot-free Figure; ``margins`` (subplots_adjust arguments) fix the layout, which draws
    once instead of twice (constrained layout otherwise, for the label-width-dependent chart)."""
    from matplotlib.figure import Figure  # no pyplot: no global backend or state

    if margins:
        fig = Figure(figsize=(width, height))
        fig.subplots_adjust(**margins)
        return fig
    return Figure(figsize=(width, height), layout="constrained")


# --------------------------------------------------------------------------- collecting


def _collect_findings(findings_df, max_findings: int) -> Tuple[List[Dict[str, Any]], int]:
    from pyspark.sql import functions as F

    total = findings_df.count()
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
        .collect()
    )
    return [r.asDict() for r in rows], total


def _collect_group_counts(findings_df, max_groups: int) -> Tuple[Dict[str, Dict[str, int]], int]:
    from pyspark.sql import functions as F

    per_group = (
        findings_df.where(F.col("group_id").isNotNull())
        .groupBy("group_id")
        .agg(
            *[F.sum(F.when(F.col("severity") == s, 1).otherwise(0)).alias(s) for s in SEVERITY_ORDER],
            F.count(F.lit(1)).alias("_total"),
        )
    )
    n_groups = per_group.count()
    rows = (
        per_group.orderBy(F.col(SEVERITY_ORDER[0]).desc(), F.col("_total").desc(), "group_id")
        .limit(max_groups)
        .collect()
    )
    return {r["group_id"]: {s: int(r[s] or 0) for s in SEVERITY_ORDER} for r in rows}, n_groups


def _collect_plot_partitions(findings_df, max_plots: int):
    """The (topic, partition) keys to plot: most records at risk first (the sum over the partition's
    findings), then the most severe; with their divergences.  Returns (rows, partitions with findings)."""
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
    n_tp = per_tp.count()
    rows = (
        per_tp.orderBy(F.col("records_at_risk").desc(), "_worst", F.col("_n").desc(), "topic", "partition")
        .limit(max_plots)
        .collect()
    )
    return rows, n_tp


def _collect_for_partitions(spark, df, keys_df, max_rows: int) -> List[Dict[str, Any]]:
    from pyspark.sql import functions as F

    if df is None:
        return []
    joined = df.join(F.broadcast(keys_df), on=["topic", "partition"], how="inner")
    return [r.asDict() for r in joined.limit(max_rows).collect()]


def _collect_commits_for_partitions(df, keys_df, max_per_partition: int) -> List[Dict[str, Any]]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if df is None:
        return []
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
    joined = (
        df.select(*cols)
        .join(F.broadcast(keys_df), on=["topic", "partition"], how="inner")
        .withColumn("_rn", F.row_number().over(w))
        .withColumn("_n", F.count(F.lit(1)).over(Window.partitionBy("topic", "partition")))
        .where(F.col("_rn") <= max_per_partition)
    )
    return [r.asDict() for r in joined.collect()]


def _verdict_counts(committed_df) -> Dict[str, int]:
    if committed_df is None or "verdict" not in committed_df.columns:
        return {}
    rows = committed_df.groupBy("verdict").count().orderBy("verdict").limit(100).collect()
    return {str(r["verdict"]): int(r["count"]) for r in rows}


# --------------------------------------------------------------------------- plots


GROUP_STATUS_ORDER = ("AT_RISK", "STALE", "WARN", "OK")


def _collect_groups(groups_df, max_rows: int) -> Tuple[List[Dict[str, Any]], int]:
    """The ``groups`` table's rows, worst status first (then most records at risk, most lag), at most
    ``max_rows`` (a bounded ``take``), and the number of groups."""
    if groups_df is None:
        return [], 0
    from pyspark.sql import functions as F

    order = F.create_map(*[x for i, st in enumerate(GROUP_STATUS_ORDER) for x in (F.lit(st), F.lit(i))])
    rows = [
        r.asDict()
        for r in groups_df.orderBy(
            F.coalesce(order[F.col("status")], F.lit(9)),
            F.col("records_at_risk").desc_nulls_last(),
            F.col("total_lag").desc_nulls_last(),
            "group_id",
        ).take(max_rows)
    ]
    return rows, (groups_df.count() if len(rows) >= max_rows else len(rows))


def _status_counts(groups_df, group_rows: List[Dict[str, Any]], n_groups: int) -> Dict[str, Tuple[int, int]]:
    """``{status: (groups, records at risk)}`` over the whole ``groups`` table: from the rows already taken when
    they are all of it, else one aggregate (at most one row per status)."""
    if groups_df is None:
        return {}
    if len(group_rows) >= n_groups:
        out: Dict[str, Tuple[int, int]] = {}
        for r in group_rows:
            n, risk = out.get(str(r.get("status")), (0, 0))
            out[str(r.get("status"))] = (n + 1, risk + int(r.get("records_at_risk") or 0))
        return out
    from pyspark.sql import functions as F

    return {
        str(r["status"]): (int(r["n"]), int(r["risk"] or 0))
        for r in groups_df.groupBy("status")
        .agg(F.count(F.lit(1)).alias("n"), F.sum("records_at_risk").alias("risk"))
        .collect()
    }


def _action(detail: Any) -> str:
    """The ``Action:`` part of a finding's ``detail`` (what to do), or the whole detail when it has none."""
    text = str(detail or "")
    return text.split(" Action: ", 1)[1] if " Action: " in text else text


def _todo_section(
    statuses: Dict[str, Tuple[int, int]], rows: List[Dict[str, Any]], total: int, max_actions: int = 5
) -> str:
    """'What to do', the report's first screen: how many groups will lose, skip or replay records and on which
    topics, then the first actions, most severe first (each finding's ``Action:``)."""
    parts = ['<section id="todo"><h2>What to do</h2>']
    at_risk, risk_records = statuses.get("AT_RISK", (0, 0))
    look = sum(statuses.get(s, (0, 0))[0] for s in ("WARN", "STALE"))
    ok = statuses.get("OK", (0, 0))[0]
    urgent = [r for r in rows if r.get("severity") in ("critical", "error")]
    if not urgent and not at_risk:
        parts.append(
            '<p class="verdict ok">No consumer group is at risk: every committed offset checked resumes '
            "where its group expects."
            + (f" {look} group(s) need a look (warnings or stale commits)." if look else "")
            + "</p>"
        )
    else:
        topics = sorted({str(r.get("topic")) for r in urgent})
        more = " (among others)" if total > len(rows) else ""
        parts.append(
            f'<p class="verdict bad"><b>{at_risk} consumer group(s)</b> will lose, skip or replay records when they '
            f"resume ({risk_records} records at risk)"
            + (f", on {_esc(', '.join(topics[:12]))}" + (" ..." if len(topics) > 12 else "") + more if topics else "")
            + f". {look} more need a look (warnings or stale commits); {ok} are OK.</p>"
        )
        seen = set()
        items = []
        for r in urgent:
            who = (
                r.get("group_id") if r.get("group_id") is not None else f"broker {r.get('replica_broker')}'s replica of"
            )
            where = f"{_esc(who)} {_esc(r.get('topic'))}-{_esc(r.get('partition'))}"
            act = _action(r.get("detail"))
            if (r.get("finding"), act) in seen:
                continue
            seen.add((r.get("finding"), act))
            items.append(
                f"<li><b>{_esc(r.get('severity'))}</b> <code>{_esc(r.get('finding'))}</code> {where}: {_esc(act)}</li>"
            )
            if len(items) >= max_actions:
                break
        parts.append("<h3>First actions</h3><ol>" + "".join(items) + "</ol>")
        parts.append(
            '<p class="muted">Every finding, with what it risks and its action, is under '
            '<a href="#findings">Findings</a>; each group\'s status under <a href="#groups">Per consumer '
            "group</a>.</p>"
        )
    parts.append("</section>")
    return "".join(parts)


def _groups_table(rows: List[Dict[str, Any]], total: int, cap: int) -> str:
    """The per-group table of the ``Per group`` section (from ``groups/``)."""
    if not rows:
        return '<p class="muted">No group has a committed offset.</p>'
    head = (
        "<tr><th>group</th><th>status</th><th>type / state</th><th>partitions</th><th>total lag</th>"
        "<th>max lag</th><th>worst verdict</th><th>findings c/e/w/i</th><th>at risk</th>"
        "<th>latest commit</th><th>age (s)</th></tr>"
    )
    body = []
    for r in rows:
        status = str(r.get("status"))
        where_lag = (
            f' <span class="muted">{_esc(r.get("max_lag_topic"))}-{_esc(r.get("max_lag_partition"))}</span>'
            if r.get("max_lag_topic") is not None
            else ""
        )
        where_worst = (
            f' <span class="muted">{_esc(r.get("worst_topic"))}-{_esc(r.get("worst_partition"))}</span>'
            if r.get("worst_topic") is not None
            else ""
        )
        kind = " / ".join(str(x) for x in (r.get("group_type"), r.get("group_state")) if x is not None) or "-"
        counts = "/".join(
            str(r.get(f"findings_{s}") if r.get(f"findings_{s}") is not None else "-")
            for s in ("critical", "error", "warning", "info")
        )
        body.append(
            f'<tr class="group-row" data-status="{_esc(status)}"><td>{_esc(r.get("group_id"))}</td>'
            f'<td class="status-{_esc(status.lower())}">{_esc(status)}</td><td>{_esc(kind)}</td>'
            f'<td class="num">{_esc(r.get("partitions_committed"))}</td><td class="num">{_esc(r.get("total_lag"))}</td>'
            f'<td class="num">{_esc(r.get("max_lag"))}{where_lag}</td><td>{_esc(r.get("worst_verdict"))}{where_worst}</td>'
            f'<td class="num">{_esc(counts)}</td><td class="num">{_esc(r.get("records_at_risk"))}</td>'
            f"<td>{_esc(_fmt_ts(r.get('latest_commit_timestamp')))}</td>"
            f'<td class="num">{_esc(r.get("latest_commit_age_seconds"))}</td></tr>'
        )
    note = (
        f'<p class="note" id="groups-left-out">{total - len(rows)} more groups are in groups/ '
        f"(the {cap} worst are listed).</p>"
        if total > len(rows)
        else ""
    )
    return (
        '<p class="muted">Lag: log end offset minus committed offset, summed over the group\'s partitions '
        "and not clamped (negative past the log end). Status: AT_RISK (an error or critical finding), STALE "
        "(no commit for longer than --stale-after while records waited), WARN (a warning), OK.</p>"
        f'<table class="groups"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>{note}'
    )


def _plot_group_chart(group_counts: Dict[str, Dict[str, int]]) -> Optional[str]:
    if not group_counts:
        return None
    groups = list(group_counts.keys())[::-1]  # most severe at the top
    fig = _new_figure(9.5, max(1.6, 0.38 * len(groups) + 1.0))
    ax = fig.add_subplot(111)
    left = [0] * len(groups)
    for sev in SEVERITY_ORDER:
        vals = [group_counts[g][sev] for g in groups]
        if any(vals):
            ax.barh(groups, vals, left=left, color=SEVERITY_COLORS[sev], label=sev)
            left = [a + b for a, b in zip(left, vals)]
    ax.set_xlabel("findings")
    ax.set_title("Findings per consumer group")
    ax.legend(loc="lower right", fontsize=8)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(axis="x", alpha=0.3)
    return _figure_to_data_uri(fig)


def _plot_partition(
    topic: str,
    partition: int,
    epochs: Sequence[Dict[str, Any]],
    bounds: Optional[Dict[str, Any]],
    commits: Sequence[Dict[str, Any]],
    divergences: Sequence[int],
    timeline: Sequence[Dict[str, Any]] = (),
    findings: Sequence[Dict[str, Any]] = (),
) -> str:
    """Leader-epoch history of one partition with the groups' committed offsets; ``timeline`` (the bounds'
    ``epoch_timeline`` from the KRaft metadata log) marks each unclean election where its epoch begins;
    ``findings`` (this partition's) mark where its log stood when the topic grew (PARTITION_EXPANSION_ORDER)
    and the offsets a diverged replica will lose (REPLICA_DIVERGENCE)."""
    expansions = sorted(
        {
            (int(f["offset_at_expansion"]), f.get("cause_time"))
            for f in findings
            if f.get("finding") == "PARTITION_EXPANSION_ORDER" and f.get("offset_at_expansion") is not None
        },
        key=lambda x: x[0],
    )
    lost = [f for f in findings if f.get("finding") == "REPLICA_DIVERGENCE" and f.get("divergence_offset") is not None]
    by_broker: Dict[Any, List[Tuple[int, int]]] = defaultdict(list)
    leaders = set()
    # a live cluster's leader epoch comes without its start offset (null): marked as a level, not a step
    unknown_start: List[Tuple[Any, int]] = []
    for e in epochs:
        if e.get("leader_epoch") is None:
            continue
        if e.get("start_offset") is None:
            unknown_start.append((e.get("broker_id"), int(e["leader_epoch"])))
            continue
        by_broker[e.get("broker_id")].append((int(e["leader_epoch"]), int(e["start_offset"])))
        if e.get("is_leader"):
            leaders.add(e.get("broker_id"))
    log_start = bounds.get("log_start_offset") if bounds else None
    log_end = bounds.get("log_end_offset") if bounds else None
    xs_all = [o for entries in by_broker.values() for _, o in entries]
    xs_all += [c["committed_offset"] for c in commits if c.get("committed_offset") is not None]
    xs_all += [d for d in divergences if d is not None]
    xs_all += [o for o, _ in expansions]
    xs_all += [int(f["divergence_offset"]) + int(f.get("records_at_risk") or 0) for f in lost]
    xs_all += [v for v in (log_start, log_end) if v is not None]
    x_max = max(xs_all) if xs_all else 1
    x_end = max(x_max, log_end or 0)
    # Replica caches say nothing past the log end: stop the steps there.
    step_end = log_end if log_end is not None else x_max
    pad = max(1.0, 0.04 * (x_end - min(xs_all or [0])))

    fig = _new_figure(10, 3.8, margins={"left": 0.08, "right": 0.76, "top": 0.91, "bottom": 0.13})
    ax = fig.add_subplot(111)
    if log_start is not None and log_end is not None:
        ax.axvspan(log_start, log_end, color="#e7f5ff", zorder=0, label="live log")
    if log_start is not None:
        ax.axvline(log_start, color="#1c7ed6", lw=1.2, label=f"log start {log_start}")
    if log_end is not None:
        ax.axvline(log_end, color="#1864ab", lw=1.2, ls="-.", label=f"log end {log_end}")

    y_values: List[int] = []
    for i, (broker, ep) in enumerate(sorted(set(unknown_start), key=lambda x: (x[1], str(x[0])))):
        y_values.append(ep)
        ax.axhline(
            ep,
            color="#495057",
            lw=1.2,
            ls=(0, (1, 2)),
            zorder=1,
            label="leader epoch, start offset unknown" if i == 0 else None,
        )
        ax.annotate(
            f"e{ep}" + (f" (broker {broker})" if broker is not None else ""),
            (0.01, ep),
            xycoords=("axes fraction", "data"),
            xytext=(0, 3),
            textcoords="offset points",
            fontsize=7,
            color="#495057",
        )
    for idx, broker in enumerate(sorted(by_broker, key=_broker_order(leaders))):
        entries = sorted(by_broker[broker])
        xs = [o for _, o in entries] + [max(step_end, entries[-1][1])]
        ys = [ep for ep, _ in entries] + [entries[-1][0]]
        y_values += ys
        leader = broker in leaders
        ax.step(
            xs,
            ys,
            where="post",
            lw=3.0 if leader else 1.4,
            ls="-" if leader else "--",
            alpha=0.75 if leader else 0.95,
            label=f"broker {broker} epochs" + (" (leader)" if leader else ""),
            zorder=2 + idx,
        )
        for ep, off in entries:
            ax.plot([off], [ep], marker="o", ms=4, color="#343a40", zorder=5)
            if leader:
                ax.annotate(
                    f"e{ep}@{off}", (off, ep), textcoords="offset points", xytext=(3, 5), fontsize=7, color="#343a40"
                )

    starts: Dict[int, int] = {}
    for broker in sorted(by_broker, key=_broker_order(leaders)):
        for ep, off in by_broker[broker]:
            starts.setdefault(ep, off)
    for i, t in enumerate(t for t in timeline if t.get("unclean") and t.get("epoch") is not None):
        ep = int(t["epoch"])
        label = "unclean election" if i == 0 else None
        text = f"unclean election e{ep}: broker {t.get('leader')}"
        y_values.append(ep)
        if ep in starts:
            ax.plot([starts[ep]], [ep], marker="*", ms=15, color="#e8590c", mec="black", mew=0.6, zorder=9, label=label)
            ax.annotate(text, (starts[ep], ep), textcoords="offset points", xytext=(6, 8), fontsize=7, color="#e8590c")
        else:  # no replica's cache has the epoch: mark its level
            ax.axhline(ep, color="#e8590c", lw=1.2, ls=(0, (4, 2)), label=label, zorder=1)
            ax.annotate(
                text,
                (0.01, ep),
                xycoords=("axes fraction", "data"),
                xytext=(0, 3),
                textcoords="offset points",
                fontsize=7,
                color="#e8590c",
            )

    for i, d in enumerate(divergences):
        ax.axvline(d, color="#b3001b", lw=1.8, ls=":", label="divergence" if i == 0 else None, zorder=6)
        ax.annotate(
            f"diverges at {d}",
            (d, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -12),
            textcoords="offset points",
            fontsize=8,
            color="#b3001b",
        )

    for i, (off, when) in enumerate(expansions):
        ax.axvline(
            off, color="#6741d9", lw=1.4, ls="--", label="log end when the topic grew" if i == 0 else None, zorder=6
        )
        ax.annotate(
            f"topic grew at {_fmt_ts(when)}",
            (off, 0.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, 4),
            textcoords="offset points",
            fontsize=7,
            color="#6741d9",
        )
    for i, f in enumerate(lost):
        d, n = int(f["divergence_offset"]), int(f.get("records_at_risk") or 0)
        ax.axvspan(
            d,
            d + n,
            color="#b3001b",
            alpha=0.10,
            zorder=0,
            label="lost lineage (a replica's records past the divergence)" if i == 0 else None,
        )
        ax.annotate(
            f"broker {f.get('replica_broker')}: {d}..{d + n - 1} lost",
            (d + n, 0.0),
            xycoords=("data", "axes fraction"),
            xytext=(-3, 16),
            textcoords="offset points",
            fontsize=7,
            color="#b3001b",
            ha="right",
        )

    used_verdicts: Dict[str, str] = {}
    seen_points: Dict[Tuple[int, int], int] = {}
    x_lo = min(xs_all or [0])
    x_span = x_end - x_lo
    for c in commits:
        raw_off = c.get("committed_offset")
        if raw_off is None:
            continue
        off = int(raw_off)
        raw_ep = c.get("committed_leader_epoch")
        ep = -1 if raw_ep is None else int(raw_ep)
        y_values.append(ep)
        verdict = str(c.get("verdict") or "OK")
        color = _verdict_color(verdict)
        used_verdicts.setdefault(verdict, color)
        ax.plot([off], [ep], marker="v", ms=9, color=color, mec="black", mew=0.6, zorder=8)
        # Labels of the right quarter go left of the marker (away from the legend);
        # several groups at the same point are stacked.
        right = x_span > 0 and (off - x_lo) > 0.75 * x_span
        n_here = seen_points.get((off, ep), 0)
        seen_points[(off, ep)] = n_here + 1
        ax.annotate(
            f"{c['group_id']} {off}@{ep}",
            (off, ep),
            textcoords="offset points",
            xytext=(-4 if right else 4, -12 - 9 * n_here),
            fontsize=7,
            color=color,
            ha="right" if right else "left",
        )
    for verdict, color in sorted(used_verdicts.items(), key=lambda kv: _verdict_rank(kv[0])):
        ax.plot([], [], marker="v", ls="", color=color, mec="black", label=f"committed: {verdict}")

    y_lo = min(y_values + [0]) - 0.6
    y_hi = max(y_values + [0]) + 0.8
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlim(min(xs_all or [0]) - pad, x_end + pad)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("offset")
    ax.set_ylabel("leader epoch (-1: none)")
    ax.set_title(f"{topic}-{partition}: leader-epoch history and committed offsets")
    ax.grid(alpha=0.25)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)
    return _figure_to_data_uri(fig)


def _incident_timeline(
    timeline: Sequence[Dict[str, Any]],
    commits: Sequence[Dict[str, Any]],
    findings: Sequence[Dict[str, Any]],
    max_events: int = 60,
    brokers: Sequence[Dict[str, Any]] = (),
) -> str:
    """What happened to one partition, in time order: leader epochs from the metadata log (unclean
    elections marked), the fencing, unfencing and controlled shutdowns of the brokers that led it
    (``broker_timeline/``), the groups' latest commits, then what the audit found.  Empty when there is
    nothing to order (no timeline and no commit time)."""
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
        return ""
    known = sorted((e for e in events if e[0] is not None), key=lambda e: (e[0], e[1]))
    unknown = [e for e in events if e[0] is None]
    ordered = unknown + known
    items = []
    for when, _k, what, kind in ordered[-max_events:]:
        items.append(
            f'<li class="ev-{kind}"><span class="when">{_esc(_fmt_ts(when) if when else "from snapshot")}'
            f"</span> {_esc(what)}</li>"
        )
    for f in findings:
        whose = (
            f"for group {f.get('group_id')}"
            if f.get("group_id") is not None
            else f"for broker {f.get('replica_broker')}'s replica"
        )
        items.append(
            f'<li class="ev-finding"><span class="when">audit</span> {_esc(f.get("finding"))} '
            f"{_esc(whose)}: {_esc(f.get('cause') or f.get('severity'))}</li>"
        )
    more = (
        f'<p class="note">{len(ordered) - max_events} earlier events not shown.</p>'
        if len(ordered) > max_events
        else ""
    )
    return f'<details class="incident" open><summary>Timeline</summary>{more}<ol>{"".join(items)}</ol></details>'


#: Worst severity each finding can have; colours a commit marker by its verdict.
_VERDICT_SEVERITY = {
    "LOG_TRUNCATION": "critical",
    "UNKNOWN_LEADER_EPOCH": "error",
    "BEHIND_METADATA_EPOCH": "error",
    "OFFSET_OUT_OF_RANGE": "error",
    "OFFSET_REWIND": "warning",
    "EPOCH_UNVERIFIABLE": "info",
    "REPLICA_DIVERGENCE": "error",
    "PARTITION_EXPANSION_ORDER": "warning",
}


def _verdict_color(verdict: str) -> str:
    if verdict == "OK":
        return SEVERITY_COLORS["OK"]
    return SEVERITY_COLORS[_VERDICT_SEVERITY.get(verdict, "error")]


def _verdict_rank(verdict: str) -> int:
    if verdict == "OK":
        return len(SEVERITY_ORDER)
    return SEVERITY_ORDER.index(_VERDICT_SEVERITY.get(verdict, "error"))


def _broker_order(leaders):
    """Sort key of broker ids: leaders first, then by id (a null id last)."""
    return lambda b: (b not in leaders, b is None, b if b is not None else 0)


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


_CSS = """
details.incident { margin: .4rem 0 0; font-size: .85rem; }
details.incident ol { margin: .3rem 0; padding-left: 1.4rem; }
details.incident .when { color: var(--muted); font-variant-numeric: tabular-nums; margin-right: .4rem; }
details.incident li.ev-unclean { color: #c92a2a; font-weight: 600; }
details.incident li.ev-expansion { color: #6741d9; font-weight: 600; }
details.incident li.ev-finding { color: #862e9c; }
details.incident li.ev-broker { color: #5c3c00; }
:root { --fg:#212529; --muted:#6c757d; --line:#dee2e6; --bg:#fff; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif;
       color: var(--fg); background: var(--bg); margin: 0 auto; padding: 1rem 2rem; max-width: 1600px; }
h1 { font-size: 1.6rem; margin: .2rem 0 .4rem; }
h2 { font-size: 1.25rem; border-bottom: 2px solid var(--line); padding-bottom: .2rem; margin-top: 2rem; }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .3rem; }
.muted { color: var(--muted); }
.note { background: #fff3bf; border-left: 4px solid #f08c00; padding: .4rem .8rem; margin: .6rem 0; }
.ok { color: #2b8a3e; font-weight: 600; } .bad { color: #b3001b; font-weight: 600; }
p.verdict { font-size: 1.15em; border-left: 4px solid currentColor; padding: 0.4em 0.8em; }
#inputs table table { font-size: 0.9em; }
.cards { display: flex; flex-wrap: wrap; gap: .8rem; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .5rem .9rem; min-width: 12rem; }
.card h4 { margin: 0 0 .3rem; font-size: .9rem; color: var(--muted); font-weight: 600; }
table { border-collapse: collapse; width: 100%; font-size: .85rem; }
th, td { border: 1px solid var(--line); padding: .25rem .45rem; vertical-align: top; text-align: left; }
th { background: #f1f3f5; position: sticky; top: 0; }
td.status-at_risk { color: #b00020; font-weight: bold; } td.status-stale { color: #a05a00; font-weight: bold; }
td.status-warn { color: #8a6d00; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.kv td:first-child { color: var(--muted); white-space: nowrap; }
.sev { display: inline-block; padding: 0 .45rem; border-radius: 4px; color: #fff; font-weight: 600; font-size: .78rem; }
.sev-critical { background: #b3001b; } .sev-error { background: #e8590c; }
.sev-warning { background: #f2b705; color: #212529; } .sev-info { background: #4c6ef5; }
td.num { white-space: nowrap; }
td.detail { color: #343a40; background: #f8f9fa; padding-left: 1.2rem; border-left-width: 5px; }
tbody.sev-row-critical td.detail { border-left-color: #b3001b; }
tbody.sev-row-error td.detail { border-left-color: #e8590c; }
tbody.sev-row-warning td.detail { border-left-color: #f2b705; }
tbody.sev-row-info td.detail { border-left-color: #4c6ef5; }
.table-wrap { overflow-x: auto; }
.filters { margin: .5rem 0; display: flex; gap: 1rem; align-items: center; }
figure { margin: .8rem 0 1.6rem; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { font-size: .85rem; color: var(--muted); }
nav a { margin-right: 1rem; }
"""

_SCRIPT = """
(function () {
  var errors = [];
  window.__reportErrors = errors;
  window.addEventListener('error', function (e) {
    var t = e.target;
    errors.push(t && t !== window && t.tagName ? ('failed to load ' + t.tagName) : String(e.message));
  }, true);
  var origError = console.error;
  console.error = function () { errors.push(Array.prototype.join.call(arguments, ' ')); origError.apply(console, arguments); };
  var PAGE = 100, page = 0;
  function applyFilters(keepPage) {
    var sev = document.getElementById('sev-filter');
    var q = document.getElementById('text-filter');
    if (!sev || !q) { return; }
    if (!keepPage) { page = 0; }
    var want = sev.value, text = q.value.toLowerCase(), matching = [];
    var rows = document.querySelectorAll('#findings-table tbody.finding');
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      if ((!want || r.getAttribute('data-severity') === want) &&
          (!text || r.textContent.toLowerCase().indexOf(text) >= 0)) { matching.push(r); }
      r.style.display = 'none';
    }
    var pages = Math.max(1, Math.ceil(matching.length / PAGE));
    page = Math.min(page, pages - 1);
    for (var j = page * PAGE; j < Math.min(matching.length, (page + 1) * PAGE); j++) { matching[j].style.display = ''; }
    var c = document.getElementById('shown-count');
    if (c) { c.textContent = String(matching.length); }
    var info = document.getElementById('page-info');
    if (info) { info.textContent = 'page ' + (page + 1) + ' of ' + pages; }
    var prev = document.getElementById('page-prev'), next = document.getElementById('page-next');
    if (prev) { prev.disabled = page === 0; }
    if (next) { next.disabled = page >= pages - 1; }
  }
  window.addEventListener('DOMContentLoaded', function () {
    var sev = document.getElementById('sev-filter');
    var q = document.getElementById('text-filter');
    if (sev) { sev.addEventListener('change', function () { applyFilters(false); }); }
    if (q) { q.addEventListener('input', function () { applyFilters(false); }); }
    var prev = document.getElementById('page-prev'), next = document.getElementById('page-next');
    if (prev) { prev.addEventListener('click', function () { page = Math.max(0, page - 1); applyFilters(true); }); }
    if (next) { next.addEventListener('click', function () { page++; applyFilters(true); }); }
    applyFilters(true);
  });
  window.addEventListener('load', function () {
    var imgs = document.querySelectorAll('img.plot');
    var okCount = 0, bad = 0;
    for (var i = 0; i < imgs.length; i++) {
      if (imgs[i].complete && imgs[i].naturalWidth > 0) { okCount++; } else { bad++; }
    }
    var b = document.body;
    b.setAttribute('data-plots-rendered', String(okCount));
    b.setAttribute('data-plots-broken', String(bad));
    b.setAttribute('data-table-rows', String(document.querySelectorAll('#findings-table tbody.finding').length));
    b.setAttribute('data-errors', String(errors.length));
    b.setAttribute('data-error-text', errors.join(' | '));
    b.setAttribute('data-report-ready', '1');
  });
})();
"""


def _value_html(value: Any) -> str:
    """A summary value as HTML: a list of records or a mapping of records as a table, a mapping as key/value
    rows, anything else as text."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        cols = list(dict.fromkeys(k for v in value for k in v))
        head = "".join(f"<th>{_esc(c)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{_esc(v.get(c))}</td>" for c in cols) + "</tr>" for v in value[:500])
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        cols = list(dict.fromkeys(k for v in value.values() for k in v))
        head = "<th></th>" + "".join(f"<th>{_esc(c)}</th>" for c in cols)
        body = "".join(
            f"<tr><td>{_esc(k)}</td>" + "".join(f"<td>{_esc(v.get(c))}</td>" for c in cols) + "</tr>"
            for k, v in list(value.items())[:500]
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(value, dict):
        return _kv_table((str(k), v) for k, v in value.items())
    if isinstance(value, list):
        return _esc(", ".join(str(v) for v in value)) if value else '<span class="muted">none</span>'
    return _esc(value)


def _kv_table(items: Iterable[Tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><td>{_esc(k)}</td><td>{_esc(v)}</td></tr>" for k, v in items)
    return f'<table class="kv">{rows}</table>' if rows else '<p class="muted">none</p>'


def _counts_card(title: str, counts: Any, order: Sequence[str] = ()) -> str:
    if isinstance(counts, dict) and counts:

        def key(kv):
            if kv[0] in order:
                return (0, order.index(kv[0]), 0, kv[0])
            return (1, 0, -kv[1] if isinstance(kv[1], (int, float)) else 0, kv[0])

        body = _kv_table(sorted(((str(k), v) for k, v in counts.items()), key=key))
    else:
        body = '<p class="muted">none</p>'
    return f'<div class="card"><h4>{_esc(title)}</h4>{body}</div>'


def _summary_section(
    summary: Optional[Dict[str, Any]],
    verdicts: Dict[str, int],
    expectations: Optional[Dict[str, Any]],
    output_dir: str,
    max_skipped_locations: int,
) -> str:
    parts = ['<section id="summary"><h2>Run summary</h2>']
    if summary is None:
        parts.append('<p class="note">summary.json is missing from the output directory.</p>')
        summary = {}
    inputs = summary.get("inputs") or {}
    elapsed = summary.get("elapsed_seconds")
    if isinstance(elapsed, (int, float)):
        parts.append(f'<p class="muted">The audit took {float(elapsed):.2f} s.</p>')
    parts.append('<div class="cards">')
    read = summary.get("records_read") or {}
    skipped = summary.get("records_skipped") or {}
    found = summary.get("findings") or {}
    parts.append(_counts_card("Records read by type", read.get("by_record_type")))
    parts.append(_counts_card("Records read by value version", read.get("by_value_version")))
    parts.append(_counts_card("Records skipped by reason", skipped.get("by_reason")))
    parts.append(_counts_card("Findings by severity", found.get("by_severity"), SEVERITY_ORDER))
    parts.append(_counts_card("Findings by name", found.get("by_name")))
    parts.append(_counts_card("Latest commits by verdict", verdicts, ("OK",)))
    if expectations is not None:
        ok = bool(expectations.get("success"))
        stats = expectations.get("statistics") or {}
        failed = expectations.get("failed_checks") or []
        docs = os.path.join(output_dir, "data_docs", "index.html")
        link = '<p><a href="data_docs/index.html">Data Docs</a></p>' if os.path.isfile(docs) else ""
        parts.append(
            '<div class="card"><h4>Data expectations</h4>'
            f'<p class="{"ok" if ok else "bad"}">{"passed" if ok else "FAILED"}</p>'
            f"<p>{_esc(stats.get('successful_expectations'))} of "
            f"{_esc(stats.get('evaluated_expectations'))} expectations met</p>"
            + ("<ul>" + "".join(f"<li>{_esc(f)}</li>" for f in failed[:50]) + "</ul>" if failed else "")
            + link
            + "</div>"
        )
    parts.append("</div>")
    where = skipped.get("where") or []
    if where:
        shown = where[:max_skipped_locations]
        rows = "".join(
            f'<tr><td>{_esc(w.get("file"))}</td><td class="num">{_esc(w.get("position"))}</td>'
            f"<td>{_esc(w.get('reason'))}</td></tr>"
            for w in shown
            if isinstance(w, dict)
        )
        parts.append(
            "<h3>Skipped data (corrupt or partial batches)</h3>"
            "<table><thead><tr><th>file</th><th>byte position</th><th>reason</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
        if len(where) > len(shown):
            parts.append(
                f'<p class="note">{len(where) - len(shown)} more skipped locations are listed in summary.json.</p>'
            )
    known = {"inputs", "records_read", "records_skipped", "findings", "elapsed_seconds", "history"}
    extra = {k: v for k, v in summary.items() if k not in known}
    if extra:
        text = json.dumps(extra, indent=2, default=str)
        if len(text) > 20000:
            text = text[:20000] + "\n..."
        parts.append(f"<details><summary>Other summary fields</summary><pre>{_esc(text)}</pre></details>")
    if isinstance(inputs, dict) and inputs:
        parts.append(
            '<details id="inputs"><summary>What the audit read (inputs)</summary><table class="kv">'
            + "".join(f"<tr><td>{_esc(k)}</td><td>{_value_html(v)}</td></tr>" for k, v in inputs.items())
            + "</table></details>"
        )
    parts.append("</section>")
    return "".join(parts)


def _changes_section(
    info: Optional[Dict[str, Any]], rows: List[Dict[str, Any]], cap: int, group_rows: Sequence[Dict[str, Any]] = ()
) -> str:
    """'Since the previous run': counts of new / persisted / resolved findings and up to ``cap`` rows of each,
    then the groups whose status changed (``group_rows``: ``group_changes/``, at most ``cap``)."""
    if not info:
        return ""
    parts = ['<section id="changes"><h2>Since the previous run</h2>']
    prev = info.get("previous_run_id")
    if not prev:
        parts.append(
            f'<p class="muted">First run in the history <code>{_esc(info.get("dir"))}</code> '
            f"(run id <code>{_esc(info.get('run_id'))}</code>): every finding is new.</p>"
        )
    else:
        parts.append(
            f"<p>Run <code>{_esc(info.get('run_id'))}</code> against the previous run "
            f"<code>{_esc(prev)}</code> ({_esc(info.get('previous_run_time'))}) in "
            f"<code>{_esc(info.get('dir'))}</code>, by group, topic-partition and finding.</p>"
        )
    parts.append(
        '<div class="cards">'
        + "".join(
            f'<div class="card change-{k}"><h4>{k}</h4><p class="big" id="changes-{k}">{int(info.get(k) or 0)}</p></div>'
            for k in ("new", "persisted", "resolved")
        )
        + "</div>"
    )
    for status in ("new", "resolved", "persisted"):
        these = [r for r in rows if r.get("status") == status]
        if not these:
            continue
        parts.append(f"<h3>{status.capitalize()} ({int(info.get(status) or 0)})</h3>")
        parts.append(
            '<div class="table-wrap"><table class="changes" data-status="' + status + '"><thead><tr>'
            "<th>severity</th><th>finding</th><th>group</th><th>partition</th><th>committed</th>"
            "<th>previously</th><th>records at risk</th></tr></thead><tbody>"
        )
        for r in these:
            sev = str(r.get("severity") or "")
            parts.append(
                f'<tr><td><span class="sev sev-{_esc(sev)}">{_esc(sev)}</span></td><td>{_esc(r.get("finding"))}</td>'
                f'<td>{_esc(r.get("group_id"))}</td><td class="num">{_esc(r.get("topic"))}-{_esc(r.get("partition"))}</td>'
                f'<td class="num">{_esc(r.get("committed_offset") if status != "resolved" else "-")}</td>'
                f'<td class="num">{_esc(r.get("previous_committed_offset"))} {_esc(r.get("previous_severity") or "")}</td>'
                f'<td class="num">{_esc(r.get("records_at_risk"))}</td></tr>'
            )
        parts.append("</tbody></table></div>")
        if int(info.get(status) or 0) > len(these):
            parts.append(
                f'<p class="note">{int(info[status]) - len(these)} more {status} findings are in '
                f"finding_changes/ (cap {cap}).</p>"
            )
    n_group_changes = sum(int(info.get(f"groups_{k}") or 0) for k in ("changed", "new", "gone"))
    if group_rows:
        parts.append(f"<h3>Groups whose status changed ({n_group_changes})</h3>")
        parts.append(
            '<div class="table-wrap"><table class="group-changes"><thead><tr><th>change</th><th>group</th>'
            "<th>status</th><th>previously</th><th>worst verdict</th><th>total lag</th></tr></thead><tbody>"
        )
        for r in group_rows:
            parts.append(
                f'<tr class="group-change" data-change="{_esc(r.get("change"))}"><td>{_esc(r.get("change"))}</td>'
                f"<td>{_esc(r.get('group_id'))}</td><td>{_esc(r.get('status') or '-')}</td>"
                f"<td>{_esc(r.get('previous_status') or '-')}</td>"
                f"<td>{_esc(r.get('worst_verdict') or r.get('previous_worst_verdict'))}</td>"
                f'<td class="num">{_esc(r.get("previous_total_lag"))} &rarr; {_esc(r.get("total_lag"))}</td></tr>'
            )
        parts.append("</tbody></table></div>")
        if n_group_changes > len(group_rows):
            parts.append(f'<p class="note">{n_group_changes - len(group_rows)} more in group_changes/ (cap {cap}).</p>')
    elif prev:
        parts.append('<p class="muted">No group changed status.</p>')
    parts.append("</section>")
    return "".join(parts)


def _findings_section(rows: List[Dict[str, Any]], total: int, cap: int) -> str:
    parts = ['<section id="findings"><h2>Findings</h2>']
    if total == 0:
        parts.append('<p class="ok">No findings: every committed offset checked out.</p></section>')
        return "".join(parts)
    parts.append(f'<p>{total} finding(s), most severe first; showing <span id="shown-count">{len(rows)}</span>.</p>')
    if total > len(rows):
        parts.append(
            f'<p class="note">Only the first {len(rows)} of {total} findings are shown '
            f"(cap {cap}); the full list is in findings/ (Parquet).</p>"
        )
    options = "".join(f'<option value="{s}">{s}</option>' for s in SEVERITY_ORDER)
    parts.append(
        '<div class="filters"><label>severity <select id="sev-filter"><option value="">all</option>'
        f"{options}</select></label>"
        '<label>filter <input id="text-filter" type="search" placeholder="group, topic, text">'
        "</label>"
        + (
            '<span class="pager"><button type="button" id="page-prev">&larr; previous</button> '
            f'<span id="page-info">page 1 of {max(1, -(-len(rows) // FINDINGS_PAGE_SIZE))}</span> '
            '<button type="button" id="page-next">next &rarr;</button></span>'
            if len(rows) > FINDINGS_PAGE_SIZE
            else ""
        )
        + "</div>"
    )
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
    parts.append(
        '<div class="table-wrap"><table id="findings-table"><thead><tr>'
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr></thead>"
    )
    # One <tbody> per finding: its figures, then its what/risk/action text across the table.
    for i, r in enumerate(rows):
        sev = str(r.get("severity") or "")
        tp = f"{r.get('topic')}-{r.get('partition')}"
        hidden = ' style="display:none"' if i >= FINDINGS_PAGE_SIZE else ""  # pages after the first (script)
        bounds = ""
        if r.get("log_start_offset") is not None or r.get("log_end_offset") is not None:
            bounds = f"{_esc(r.get('log_start_offset'))}..{_esc(r.get('log_end_offset'))}"
        parts.append(
            f'<tbody class="finding sev-row-{_esc(sev)}" data-severity="{_esc(sev)}" '
            f'data-finding="{_esc(r.get("finding"))}"{hidden}><tr>'
            f'<td><span class="sev sev-{_esc(sev)}">{_esc(sev)}</span></td>'
            f"<td>{_esc(r.get('finding'))}{_cause_html(r)}</td>"
            f"<td>{_group_cell(r)}</td>"
            f'<td class="num"><a href="#plot-{_esc(tp)}">{_esc(tp)}</a></td>'
            f'<td class="num">{_esc(_fmt_offset_epoch(r.get("committed_offset"), r.get("committed_leader_epoch")))}</td>'
            f'<td class="num">{_esc(_fmt_ts(r.get("commit_timestamp")))}</td>'
            f'<td class="num">{_esc(r.get("divergence_offset"))}</td>'
            f'<td class="num">{_esc(r.get("records_at_risk"))}</td>'
            f'<td class="num">{bounds}</td>'
            f'<td class="num">{_esc(_fmt_offset_epoch(r.get("previous_offset"), r.get("previous_leader_epoch")))}</td>'
            f'<td class="num">{_esc(r.get("answered_by_broker"))}</td></tr>'
            f'<tr class="detail-row"><td class="detail" colspan="{len(head)}">'
            f"{_esc(r.get('detail'))}</td></tr></tbody>"
        )
    parts.append("</table></div></section>")
    return "".join(parts)


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

    Args:
        spark: an active ``pyspark.sql.SparkSession``.
        output_dir: the audit's output directory.  Reads ``findings/``
            (required; columns ``group_id, topic, partition, finding,
            severity, committed_offset, committed_leader_epoch,
            commit_timestamp, divergence_offset, records_at_risk,
            epoch_end_offset, log_start_offset, log_end_offset,
            previous_offset, previous_leader_epoch, answered_by_broker,
            detail``), and when present ``committed_offsets/`` (``group_id,
            topic, partition, committed_offset, committed_leader_epoch,
            verdict``), ``epochs/`` (``topic, partition, broker_id,
            leader_epoch, start_offset, is_leader``), ``bounds/`` (``topic,
            partition, log_start_offset, log_end_offset, high_watermark,
            leader_id``), ``summary.json`` and
            ``expectations/validation_result.json``; the ``Per group``
            section lists ``groups/`` (group_id, status, group_type,
            group_state, partitions_committed, total_lag, max_lag,
            worst_verdict, findings_*, records_at_risk,
            latest_commit_timestamp, latest_commit_age_seconds).
        max_findings: most findings listed in the table (most severe first);
            a note says how many were left out.
        max_plots: most topic-partitions plotted (those with the most severe
            findings first); a note says how many were left out.
        max_groups_per_plot: most groups' committed offsets marked per plot
            (groups with a finding first).
        max_groups_in_chart: most groups in the findings-per-group chart.
        max_groups_in_table: most rows of ``groups/`` listed (worst status
            first); a note says how many were left out.
        max_epoch_rows: most epoch-cache rows collected for all plots together.
        max_skipped_locations: most ``records_skipped.where`` entries listed.
        max_changes: most rows listed per status (new, resolved, persisted) of
            ``finding_changes/`` (written with ``--history``).
        title: the page title.
        display_dir: the output directory named on the page (default
            ``output_dir``).
        tables_dir: where the tables and ``summary.json`` are, when not in
            ``output_dir``: any Hadoop-compatible URI; ``output_dir`` is then
            a local directory holding ``expectations/`` and receiving
            ``report.html``.
        wait_for: called once the tables are collected and the plots drawn,
            before ``expectations/validation_result.json`` is read and the page
            put together: a caller running the expectation suite at the same
            time passes its wait (its errors propagate).
        tables: the output's tables the caller holds in memory, name ->
            Spark DataFrame with the rows written under that name (the audit
            passes its materialised tables); those are not read back.  A
            table absent from it is read from ``tables_dir``.

    The independent Spark queries run side by side
    (:func:`audit.spark.in_parallel`), two rounds: the findings, per-group
    and per-partition aggregates and verdict counts; then the plotted
    partitions' epochs, bounds, commits, the changes and broker events.

    Returns:
        The path of the written ``report.html``.

    Raises:
        FileNotFoundError: ``output_dir`` or its ``findings/`` table is missing.
    """
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

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
    from pyspark.sql import functions as F

    from ..spark import in_parallel

    findings_df = findings_df.cache()
    try:
        (rows, total), (group_counts, n_groups), (plot_rows, n_tp), verdicts, (group_rows, n_group_rows) = in_parallel(
            lambda: _collect_findings(findings_df, max_findings),
            lambda: _collect_group_counts(findings_df, max_groups_in_chart),
            lambda: _collect_plot_partitions(findings_df, max_plots),
            lambda: _verdict_counts(committed_df),
            lambda: _collect_groups(groups_df, max_groups_in_table),
        )
    finally:
        findings_df.unpersist()

    statuses = _status_counts(groups_df, group_rows, n_group_rows)
    keys = [(r["topic"], int(r["partition"])) for r in plot_rows]
    keys_df = spark.createDataFrame(
        keys, StructType([StructField("topic", StringType()), StructField("partition", IntegerType())])
    )
    changes_df = table("finding_changes")
    group_changes_df = table("group_changes")
    broker_df = table("broker_timeline")

    def changes() -> List[Dict[str, Any]]:
        out: List[Dict[str, Any]] = []
        if changes_df is not None:
            for status in ("new", "resolved", "persisted"):
                out += [
                    r.asDict()
                    for r in changes_df.where(F.col("status") == status)
                    .orderBy(_severity_rank_expr(), "group_id", "topic", "partition", "finding")
                    .limit(max_changes)
                    .collect()
                ]
        return out

    def group_change_rows() -> List[Dict[str, Any]]:
        if group_changes_df is None:
            return []
        order = F.create_map(F.lit("changed"), F.lit(0), F.lit("new"), F.lit(1), F.lit("gone"), F.lit(2))
        return [
            r.asDict()
            for r in group_changes_df.orderBy(order[F.col("change")], "group_id").limit(max_changes).collect()
        ]

    epoch_rows, bound_rows, commit_rows, change_rows, broker_rows, gchange_rows = in_parallel(
        lambda: _collect_for_partitions(spark, epochs_df, keys_df, max_epoch_rows) if keys else [],
        lambda: _collect_for_partitions(spark, bounds_df, keys_df, len(keys) * 4 + 1) if keys else [],
        lambda: _collect_commits_for_partitions(committed_df, keys_df, max_groups_per_plot) if keys else [],
        changes,
        # the newest broker events only (a long-lived cluster fences and unfences on every restart)
        lambda: (
            [
                r.asDict()
                for r in broker_df.where("changed_at IS NOT NULL")
                .orderBy(F.col("changed_at").desc())
                .limit(max_epoch_rows)
                .collect()
            ]
            if broker_df is not None and keys
            else []
        ),
        group_change_rows,
    )

    epochs_by_tp: Dict[Tuple[str, int], List[Dict[str, Any]]] = defaultdict(list)
    for e in epoch_rows:
        epochs_by_tp[(e["topic"], int(e["partition"]))].append(e)
    bounds_by_tp = {(b["topic"], int(b["partition"])): b for b in bound_rows}
    commits_by_tp: Dict[Tuple[str, int], List[Dict[str, Any]]] = defaultdict(list)
    for c in commit_rows:
        commits_by_tp[(c["topic"], int(c["partition"]))].append(c)

    # ---- plots
    plot_html: List[str] = []
    for r in plot_rows:
        tp = (r["topic"], int(r["partition"]))
        divergences = [int(d) for d in (r["divergences"] or []) if d is not None]
        eps = epochs_by_tp.get(tp, [])
        b = bounds_by_tp.get(tp)
        cs = commits_by_tp.get(tp, [])
        timeline = [t.asDict() if hasattr(t, "asDict") else dict(t) for t in ((b or {}).get("epoch_timeline") or [])]
        tp_findings = [f for f in rows if (f.get("topic"), f.get("partition")) == tp]
        uri = _plot_partition(tp[0], tp[1], eps, b, cs, divergences, timeline, tp_findings)
        story = _incident_timeline(timeline, cs, tp_findings, brokers=broker_rows)
        anchor = f"plot-{tp[0]}-{tp[1]}"
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
        plot_html.append(
            f'<figure class="partition-plot" id="{_esc(anchor)}" data-topic="{_esc(tp[0])}" '
            f'data-partition="{tp[1]}" data-divergence="{_esc(",".join(map(str, divergences)))}">'
            f"<h3>{_esc(tp[0])}-{tp[1]}</h3>"
            f'<img class="plot" alt="{_esc(alt)}" src="{uri}">'
            f"<figcaption>{_esc('; '.join(caption_bits))}</figcaption>{story}</figure>"
        )
    group_uri = _plot_group_chart(group_counts)

    # the plots are drawn: now the expectation suite's result, when a caller runs it at the same time
    if wait_for is not None:
        wait_for()
    expectations = None
    exp_path = os.path.join(output_dir, "expectations", "validation_result.json")
    if os.path.isfile(exp_path):
        with open(exp_path, "r", encoding="utf-8") as fh:
            expectations = json.load(fh)

    # ---- page
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    body: List[str] = [
        f"<h1>{_esc(title)}</h1>",
        f'<p class="muted">Output directory <code>{_esc(display_dir or output_dir)}</code>; report generated {generated}.</p>',
        '<nav><a href="#todo">What to do</a>'
        + ('<a href="#changes">Since the previous run</a>' if (summary or {}).get("history") else "")
        + '<a href="#findings">Findings</a>'
        '<a href="#groups">Per group</a><a href="#partitions">Partitions</a><a href="#summary">Run summary</a></nav>',
        _todo_section(statuses, rows, total),
        _changes_section((summary or {}).get("history"), change_rows, max_changes, gchange_rows),
        _findings_section(rows, total, max_findings),
        '<section id="groups"><h2>Per consumer group</h2>',
        _groups_table(group_rows, n_group_rows, max_groups_in_table),
        "<h3>Findings per consumer group</h3>",
    ]
    if group_uri:
        body.append(
            f'<figure class="group-chart"><img class="plot" id="group-chart" '
            f'alt="Findings per consumer group, stacked by severity" src="{group_uri}">'
            "</figure>"
        )
        if n_groups > len(group_counts):
            body.append(
                f'<p class="note">{n_groups - len(group_counts)} more groups with findings '
                f"are not in the chart (cap {max_groups_in_chart}).</p>"
            )
    else:
        body.append('<p class="muted">No group has a finding.</p>')
    body.append("</section>")
    body.append('<section id="partitions"><h2>Topic-partitions with findings</h2>')
    if plot_html:
        body.append(
            '<p class="muted">x: offset; y: leader epoch. Steps: each replica\'s leader-epoch '
            "cache (the thick line is the current leader's, the authoritative one). "
            "Shaded: the live log (log start to log end). Dotted red: the divergence point of a "
            "LOG_TRUNCATION. Triangles: each group's latest committed offset at its committed "
            "epoch (-1: committed without an epoch).</p>"
        )
        body.extend(plot_html)
        if n_tp > len(plot_rows):
            body.append(
                f'<p class="note" id="plots-left-out">{n_tp - len(plot_rows)} more topic-partitions have '
                f"findings but are not plotted (the {max_plots} with the most records at risk are).</p>"
            )
    else:
        body.append('<p class="muted">No partition has a finding.</p>')
    body.append("</section>")
    body.append(_summary_section(summary, verdicts, expectations, output_dir, max_skipped_locations))

    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{_CSS}</style><script>{_SCRIPT}</script></head>"
        "<body>" + "\n".join(body) + "</body></html>\n"
    )
    path = os.path.join(output_dir, REPORT_FILENAME)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.replace(tmp, path)
    return path
