"""Judging a finished audit's output for a scheduler: the expectation suite's result, the gate and the alert.

The gate is ``--fail-on`` (:func:`evaluate_output`); the alert is the one for a failed run (:func:`build_alert`).

Reads ``summary.json``, ``expectations/validation_result.json`` and ``findings/`` (streamed with pyarrow, bounded
memory) of an output on a local or mounted path; starts Spark only to run the expectation suite when the audit
skipped it.  No Airflow import: :mod:`audit.airflow` wires these into its tasks and notifier.
"""

from __future__ import annotations

import json
import os
from typing import Sequence

from ..tables import SEVERITIES, failing_severities

__all__ = [
    "DAG_ID",
    "MAX_ALERTED_FINDINGS",
    "MAX_LOGGED_FINDINGS",
    "EvaluationError",
    "build_alert",
    "evaluate_output",
    "gated_finding_lines",
    "local_output_dir",
    "top_findings",
]

#: the DAG's id, named in alerts
DAG_ID = "kafka_offset_audit"
#: findings listed in the task log by :func:`evaluate_output`
MAX_LOGGED_FINDINGS = 20


class EvaluationError(Exception):
    """There is no audit output to judge where this process runs (the message says what to fix)."""


def local_output_dir(uri: str) -> str | None:
    """Return the local path of an audit output; None for other URIs (hdfs://, s3a://, ...).

    ``/a/b`` or ``file:/a/b`` -> ``/a/b`` or ``file:/a/b``.
    """
    from urllib.parse import urlparse

    scheme = urlparse(uri).scheme
    if scheme == "":
        return uri
    if scheme == "file":
        return urlparse(uri).path
    return None


def _failed_expectations(validation: dict) -> list[str]:
    """One line per failed expectation of a ``validation_result.json``."""
    lines = []
    for asset, res in sorted((validation.get("validation_results") or {}).items()):
        for r in res.get("results") or []:
            if r.get("success"):
                continue
            cfg = r.get("expectation_config") or {}
            kwargs = cfg.get("kwargs") or {}
            check = (cfg.get("meta") or {}).get("check") or f"{asset}.{cfg.get('type')}"
            target = (
                kwargs.get("column")
                or ",".join(str(kwargs[k]) for k in ("column_A", "column_B") if kwargs.get(k))
                or "table"
            )
            result = r.get("result") or {}
            bits = []
            if "observed_value" in result:
                bits.append(f"observed {result['observed_value']!r}")
            if result.get("unexpected_count") is not None:
                bits.append(f"{result['unexpected_count']} unexpected of {result.get('element_count')}")
            if result.get("partial_unexpected_counts"):
                bits.append(
                    "values "
                    + ", ".join(f"{c.get('value')!r}x{c.get('count')}" for c in result["partial_unexpected_counts"][:5])
                )
            exc = r.get("exception_info") or {}
            if exc.get("raised_exception"):
                bits.append(f"exception: {exc.get('exception_message')}")
            lines.append(f"{check} ({cfg.get('type')} on {target}): {'; '.join(bits) or 'failed'}")
    return lines


def _run_checkpoint(output_dir: str, fail_on: str, expectations_config: str | None) -> dict:
    """Run the expectation Checkpoint here (the job skipped it); returns the validation_result.json content."""
    from .expectations import RESULT_RELPATH, run_expectations
    from .expectations_config import load_expectations_config
    from ..spark import build_session

    cfg = load_expectations_config(expectations_config).model_copy(
        update={"fail_on_severities": failing_severities(fail_on)}
    )
    spark = build_session(os.environ.get("KOA_AIRFLOW_CHECK_MASTER", "local[1]"))
    try:
        run_expectations(spark, output_dir, cfg)
    finally:
        spark.stop()
    with open(os.path.join(output_dir, RESULT_RELPATH), encoding="utf-8") as fh:
        return json.load(fh)


def top_findings(output_dir: str, failing: Sequence[str], limit: int = MAX_LOGGED_FINDINGS) -> tuple[list[dict], int]:
    """Return the findings at or above the gate, most severe first, at most ``limit`` (rows, total).

    Streams ``findings/`` batch by batch (only the gated severities, only the columns used) and keeps
    the first rows in order, so memory stays bounded however many findings there are.  Raises
    ``OSError``/``pyarrow`` errors when ``findings/`` cannot be read.
    """
    import heapq

    import pyarrow.dataset as ds

    rank = {s: i for i, s in enumerate(SEVERITIES)}
    # REPLICA_DIVERGENCE rows have no group
    order = lambda r: (rank[r["severity"]], r["group_id"] or "", r["topic"], r["partition"])  # noqa: E731
    top: list[dict] = []
    total = 0
    dataset = ds.dataset(os.path.join(output_dir, "findings"), format="parquet")
    wanted = [
        "severity",
        "finding",
        "group_id",
        "topic",
        "partition",
        "committed_offset",
        "committed_leader_epoch",
        "divergence_offset",
        "records_at_risk",
        "detail",
    ]
    columns = [c for c in wanted if c in dataset.schema.names]  # older outputs lack some
    for batch in dataset.to_batches(columns=columns, filter=ds.field("severity").isin(list(failing))):
        rows = batch.to_pylist()
        total += len(rows)
        top = heapq.nsmallest(limit, top + rows, key=order)
    return top, total


def gated_finding_lines(output_dir: str, failing: Sequence[str]) -> list[str]:
    """Format lines for the findings at or above the gate (most severe first), at most MAX_LOGGED_FINDINGS.

    See :func:`top_findings`.
    """
    if not failing:
        return []
    try:
        top, total = top_findings(output_dir, failing)
    except Exception as exc:  # the summary counts still say enough
        return [f"(could not read findings/: {exc})"]
    lines = [
        f"{r['severity']} {r['finding']} group={r['group_id'] or '-'} {r['topic']}[{r['partition']}] "
        f"committed={r['committed_offset']} epoch={r['committed_leader_epoch']}: {r['detail']}"
        for r in top
    ]
    if total > MAX_LOGGED_FINDINGS:
        lines.append(f"... and {total - MAX_LOGGED_FINDINGS} more in {output_dir}/findings/")
    return lines


def evaluate_output(output: str, fail_on: str = "error", expectations_config: str | None = None) -> dict:
    """Judge an audit output directory: the expectation suite's result plus the ``fail_on`` gate.

    Returns ``{"passed", "report", "findings_by_severity", "failed_checks", "suite_success", ...}`` where
    ``report`` is the multi-line summary ``check_expectations`` logs.  Reads ``summary.json`` and
    ``expectations/validation_result.json``; runs the Checkpoint (local Spark) when the latter is missing.
    """
    output_dir = local_output_dir(output)
    if output_dir is None:
        raise EvaluationError(
            f"check_expectations reads the audit output from this worker, but {output!r} is not a local "
            "path: give an output directory the workers can read (a local or mounted path)"
        )
    summary_path = os.path.join(output_dir, "summary.json")
    if not os.path.isfile(summary_path):
        raise EvaluationError(f"no audit output: {summary_path} does not exist (see the audit_offsets log)")
    with open(summary_path, encoding="utf-8") as fh:
        summary = json.load(fh)
    result_path = os.path.join(output_dir, "expectations", "validation_result.json")
    if os.path.isfile(result_path):
        with open(result_path, encoding="utf-8") as fh:
            validation = json.load(fh)
        suite_source = result_path
    else:
        validation = _run_checkpoint(output_dir, fail_on, expectations_config)
        suite_source = f"{result_path} (Checkpoint run by check_expectations)"

    findings = summary.get("findings") or {}
    by_sev = {s: int((findings.get("by_severity") or {}).get(s, 0)) for s in SEVERITIES}
    by_name = findings.get("by_name") or {}
    failing = failing_severities(fail_on)
    gated = {s: by_sev[s] for s in failing if by_sev[s]}
    stats = validation.get("statistics") or {}
    suite_success = bool(validation.get("success"))
    failed_checks = list(validation.get("failed_checks") or [])
    passed = suite_success and not gated

    records = summary.get("records_read") or {}
    skipped = sum((summary.get("records_skipped") or {}).get("by_reason", {}).values())
    commits = summary.get("offset_commits") or {}
    lines = [
        f"kafka-offset-audit {'PASSED' if passed else 'FAILED'}: {output} (fail_on={fail_on})",
        "findings by severity: "
        + " ".join(f"{s}={by_sev[s]}" for s in SEVERITIES)
        + f" (total {findings.get('total', sum(by_sev.values()))})",
        "findings by name: " + (", ".join(f"{k}={v}" for k, v in sorted(by_name.items())) or "none"),
        f"records read: {records.get('total')}; records skipped: {skipped}; "
        f"group-partitions audited: {commits.get('group_partitions')}",
        f"expectation suite: {'passed' if suite_success else 'FAILED'} "
        f"({stats.get('successful_expectations')}/{stats.get('evaluated_expectations')} expectations) "
        f"from {suite_source}",
    ]
    if failed_checks:
        lines.append("failed checks: " + ", ".join(failed_checks))
        lines.extend("  - " + line for line in _failed_expectations(validation))
    if gated:
        lines.append("findings at or above " + fail_on + ": " + ", ".join(f"{s}={n}" for s, n in gated.items()))
        lines.extend("  - " + line for line in gated_finding_lines(output_dir, failing))
    for name, rel in (("report", "report.html"), ("data docs", os.path.join("data_docs", "index.html"))):
        if os.path.isfile(os.path.join(output_dir, rel)):
            lines.append(f"{name}: {os.path.join(output_dir, rel)}")
    return {
        "passed": passed,
        "report": "\n".join(lines),
        "findings_by_severity": by_sev,
        "findings_by_name": by_name,
        "failed_checks": failed_checks,
        "suite_success": suite_success,
        "gated_findings": gated,
        "output": output,
    }


MAX_ALERTED_FINDINGS = 50


def _split_detail(detail: str | None) -> tuple[str, str]:
    """Split a finding's ``detail`` into (what is wrong and the risk, the action); see AUDIT_RULES.md."""
    text = detail or ""
    head, sep, action = text.partition(" Action: ")
    return (head.strip(), action.strip()) if sep else (text.strip(), "")


def _plan_note(summary: dict, files: list, out_dir: str) -> str:
    """Return the alert's line about the attached reset plan."""
    plan = (summary.get("reset_plan") or {}).get("groups", len(files) - 1)
    return (
        f"Reset plan: {plan} group(s), attached (README.md says what each reset does; apply each group's file "
        f"with the command it gives (kafka-consumer-groups, or kafka-share-groups for a share group: "
        f"--reset-offsets --from-file), its consumers stopped): {out_dir}/reset_plan/"
    )


def build_alert(
    output: str | None,
    fail_on: str,
    *,
    dag_id: str = DAG_ID,
    run_id: str | None = None,
    task_id: str | None = None,
    error: str | None = None,
) -> dict:
    """Build the alert for a failed audit run: ``{"subject", "text", "html", "findings", "files"}``.

    When ``output`` holds this run's results, it lists the findings at or above ``fail_on`` (most
    severe first, at most :data:`MAX_ALERTED_FINDINGS`), each with what is wrong and its action, the
    counts by severity, failed expectation checks, and where the report is.  Otherwise (the audit
    itself failed) it names the failed task and its error.  ``findings`` is the number listed; ``files`` the reset
    plan's files to attach (``reset_plan/README.md`` and the groups' CSV files; none without a plan).
    """
    import html as _html

    failing = failing_severities(fail_on)
    out_dir = local_output_dir(output) if output else None
    summary = None
    if out_dir and os.path.isfile(os.path.join(out_dir, "summary.json")):
        try:
            with open(os.path.join(out_dir, "summary.json"), encoding="utf-8") as fh:
                summary = json.load(fh)
        except (OSError, ValueError):
            summary = None
    where = f"{dag_id} run {run_id}" if run_id else dag_id
    if out_dir is None or summary is None or task_id == "audit_offsets":
        subject = f"kafka-offset-audit FAILED to run: {where}"
        text = (
            f"The audit task {task_id or '?'} of {where} failed before judging the offsets, so nothing "
            f"is known about them from this run.\nError: {error or 'see the task log'}\nOutput: {output}"
        )
        return {
            "subject": subject,
            "text": text,
            "html": f"<pre>{_html.escape(text)}</pre>",
            "findings": 0,
            "files": [],
        }
    by_sev = {k: int(v) for k, v in ((summary.get("findings") or {}).get("by_severity") or {}).items()}
    try:
        rows, total = top_findings(out_dir, failing, MAX_ALERTED_FINDINGS) if failing else ([], 0)
    except Exception as exc:  # noqa: BLE001 - the counts still go out
        rows, total = [], sum(by_sev.get(s, 0) for s in failing)
        error = f"{error or ''} (could not read findings/: {exc})".strip()
    counts = ", ".join(f"{s}={by_sev.get(s, 0)}" for s in SEVERITIES)
    worst = next((s for s in SEVERITIES if by_sev.get(s)), None)
    if total:
        subject = f"kafka-offset-audit: {total} finding(s) at or above {fail_on} ({worst} first) in {where}"
    else:
        subject = f"kafka-offset-audit FAILED: {where}"
    lines = [f"Audit output: {output}", f"Findings by severity: {counts}"]
    if error:
        lines.append(f"Why the run failed: {error}")
    failed = ((summary.get("reports") or {}).get("expectations") or {}).get("failed") or []
    if failed:
        lines.append("Failed expectation checks: " + ", ".join(failed))
    items = []
    for r in rows:
        what, action = _split_detail(r.get("detail"))
        items.append((r, what, action))
        lines += [
            "",
            f"[{r['severity']}] {r['finding']}: group {r['group_id'] or '-'}, {r['topic']}-{r['partition']}, "
            f"committed offset {r['committed_offset']} (epoch {r['committed_leader_epoch']})",
            f"  {what}",
            f"  Action: {action or 'see the report'}",
        ]
    if total > len(rows):
        lines += ["", f"... and {total - len(rows)} more in {output}/findings/"]
    report = os.path.join(out_dir, "report.html")
    if os.path.isfile(report):
        lines += ["", f"Report: {report}"]
    files = _plan_files(out_dir)
    head = lines[: 3 + bool(error) + bool(failed)]
    if files:
        note = _plan_note(summary, files, out_dir)
        lines += ["", note]
        head = head + [note]
    html = _alert_html(subject, head, items, total - len(rows), output, report)
    return {"subject": subject, "text": "\n".join(lines), "html": html, "findings": len(rows), "files": files}


#: the most files of a reset plan attached to an alert (its README.md and the groups' CSV files)
MAX_ATTACHED_PLAN_FILES = 20


def _plan_files(out_dir: str) -> list[str]:
    """Return the reset plan's files to attach.

    ``README.md``, then the groups' CSV files (at most :data:`MAX_ATTACHED_PLAN_FILES` in all); none without a plan.
    """
    plan_dir = os.path.join(out_dir, "reset_plan")
    readme = os.path.join(plan_dir, "README.md")
    if not os.path.isfile(readme):
        return []
    csvs = sorted(os.path.join(plan_dir, n) for n in os.listdir(plan_dir) if n.endswith(".csv"))
    return [readme, *csvs][:MAX_ATTACHED_PLAN_FILES] if csvs else []


def _alert_html(subject: str, head: list[str], items: list, more: int, output, report: str) -> str:
    """Render the alert's HTML.

    It holds ``subject``, the ``head`` lines, a table of ``items`` ((finding row, what is wrong, action)
    triples), how many ``more`` findings were left out, and where the report is (when it exists).
    """
    import html as _html

    e = _html.escape
    html_rows = "".join(
        f"<tr><td><b>{e(r['severity'])}</b></td><td>{e(r['finding'])}</td><td>{e(str(r['group_id'] or '-'))}</td>"
        f"<td>{e(str(r['topic']))}-{r['partition']}</td><td>{r['committed_offset']} (epoch {r['committed_leader_epoch']})</td>"
        f"<td>{e(what)}</td><td>{e(action)}</td></tr>"
        for r, what, action in items
    )
    return (
        f"<h3>{e(subject)}</h3><p>{'<br>'.join(e(x) for x in head)}</p>"
        + (
            '<table border="1" cellpadding="4"><tr><th>severity</th><th>finding</th><th>group</th>'
            "<th>partition</th><th>committed</th><th>what is wrong</th><th>action</th></tr>" + html_rows + "</table>"
            if items
            else ""
        )
        + (f"<p>... and {more} more in {e(str(output))}/findings/</p>" if more > 0 else "")
        + (f"<p>Report: {e(report)}</p>" if os.path.isfile(report) else "")
    )
