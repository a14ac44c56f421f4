"""Airflow 3 DAG ``kafka_offset_audit``: a daily audit of Kafka consumer offsets.

Two tasks (see ``airflow_dags/README.md``)::

    audit_offsets  >>  check_expectations

* ``audit_offsets`` -- a :class:`SparkSubmitOperator` that submits ``jobs/audit_offsets.py`` with
  ``--log-dirs``, ``--output``, ``--mode`` and ``--fail-on`` taken from the DAG params (or, with the
  ``spark_connect_conn_id`` param, runs ``kafka-offset-audit audit --remote`` through a Spark Connect server).  The job
  writes the output contract and runs the Great Expectations Checkpoint itself
  (``<output>/expectations/validation_result.json``).  Its exit status: ``0`` clean, ``1`` findings
  at ``fail_on`` or a failed suite -- *not* a task failure here, the next task judges it -- and
  ``2`` bad input, which fails the task at once without retries; ``3`` an internal error (a stage of the
  audit failed: the judged tables and ``summary.json`` may be there, its ``failed_stages`` says which), a task
  failure naming the stage, with retries, never a findings alert.  Anything else (a crash, a lost cluster)
  fails it with retries.
* ``check_expectations`` -- reads ``<output>/summary.json`` and the Checkpoint's
  ``validation_result.json`` (or runs the Checkpoint itself, in a local Spark, when the job did not),
  logs the findings by severity and name, the failed checks and the findings at or above
  ``fail_on``, and raises :class:`AirflowFailException` (no retries) when the suite failed or a
  finding at or above ``fail_on`` exists.

Deployment settings are read from the environment when the file is parsed (``KOA_AIRFLOW_*``, listed in
the README); per-run inputs are the DAG params (trigger with a conf to override them).  Call
:func:`build_dag` from your own DAG file for more than one audited cluster.

This module imports neither pyspark nor the ``audit`` package at parse time; ``check_expectations``
imports them when it runs, so the Airflow workers need the environment ``scripts/airflow_env.sh`` builds.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, BaseNotifier, Param, task
from airflow.sdk.exceptions import AirflowFailException

log = logging.getLogger(__name__)

DAG_ID = "kafka_offset_audit"
SEVERITIES = ("critical", "error", "warning", "info")  # most severe first
FAIL_ON_CHOICES = ("critical", "error", "warning", "never")
EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 1, 2, 3
#: a summary.json this much older than the submit is not this run's (clock slack between processes)
FRESHNESS_SLACK_SECONDS = 60
MAX_LOGGED_FINDINGS = 20


# ----------------------------------------------------------------------------------- settings


def _env(name: str, default: str) -> str:
    value = os.environ.get(name, "").strip()
    return value or default


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[1]


def default_application() -> str:
    """The spark-submit application: ``KOA_AIRFLOW_APPLICATION`` when set; else the one inside the ``audit``
    package this environment has installed (``audit/submit.py``, what ``kafka-offset-audit spark-app`` prints:
    a wheel install has no ``jobs/``); else ``jobs/audit_offsets.py`` beside this DAG's checkout."""
    configured = os.environ.get("KOA_AIRFLOW_APPLICATION")
    if configured:
        return configured
    import importlib.util

    try:
        spec = importlib.util.find_spec("audit.submit")
    except ImportError:
        spec = None
    if spec and spec.origin and Path(spec.origin).is_file():
        return str(Path(spec.origin).resolve())
    return str(_repo_root() / "jobs" / "audit_offsets.py")


def default_spark_binary() -> str:
    """The ``spark-submit`` of this interpreter's pyspark (the Airflow venv), else the one on PATH."""
    configured = os.environ.get("KOA_AIRFLOW_SPARK_BINARY")
    if configured:
        return configured
    beside = Path(sys.executable).parent / "spark-submit"
    return str(beside) if beside.is_file() else "spark-submit"


def _default_log_dirs() -> list[str]:
    raw = os.environ.get("KOA_AIRFLOW_LOG_DIRS", "")
    return [d for d in raw.split(os.pathsep) if d.strip()]


# ----------------------------------------------------------------------------------- spark-submit


def _flatten(values: Iterable[Any]) -> list[str]:
    """Rendered ``application_args`` -> flat list of strings (list-valued params expand in place)."""
    out: list[str] = []
    for v in values:
        if v is None:
            continue
        if isinstance(v, (list, tuple)):
            out.extend(_flatten(v))
        else:
            out.append(str(v))
    return out


def _arg_value(args: Sequence[str], flag: str) -> str | None:
    for i, a in enumerate(args[:-1]):
        if a == flag:
            return args[i + 1]
    return None


def _local_path(uri: str) -> str | None:
    """A local path for ``/a/b`` or ``file:/a/b``; None for other URIs (hdfs://, s3a://, ...)."""
    from urllib.parse import urlparse

    scheme = urlparse(uri).scheme
    if scheme == "":
        return uri
    if scheme == "file":
        return urlparse(uri).path
    return None


def _summary_is_fresh(output: str | None, submitted_at: dt.datetime) -> bool:
    """True when ``<output>/summary.json`` was written by the run submitted at ``submitted_at``."""
    path = _local_path(output) if output else None
    if not path:
        return False
    try:
        with open(os.path.join(path, "summary.json"), encoding="utf-8") as fh:
            started = dt.datetime.fromisoformat(json.load(fh)["started_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if started.tzinfo is None:
        started = started.replace(tzinfo=dt.timezone.utc)
    return started >= submitted_at - dt.timedelta(seconds=FRESHNESS_SLACK_SECONDS)


def _failed_stages(output: str | None, submitted_at: dt.datetime) -> list[str]:
    """``"stage: error"`` of each failed stage in a fresh ``<output>/summary.json`` (exit status 3), else []."""
    path = _local_path(output) if output else None
    if not path or not _summary_is_fresh(output, submitted_at):
        return []
    try:
        with open(os.path.join(path, "summary.json"), encoding="utf-8") as fh:
            return [f"{f.get('stage')}: {f.get('error')}" for f in json.load(fh).get("failed_stages") or []]
    except (OSError, ValueError, AttributeError):
        return []


class AuditSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` for ``jobs/audit_offsets.py`` that understands the job's exit status.

    * list-valued template results in ``application_args`` (``--log-dirs``) are expanded in place;
    * the Spark connection id comes from the run's ``params.spark_conn_id`` when set;
    * exit status 1 (findings at ``--fail-on`` or a failed expectation suite) is *not* a failure of
      this task when the run wrote a fresh ``summary.json``: ``check_expectations`` fails the run
      with the findings' summary instead (and without retrying a deterministic result);
    * exit status 2 (bad usage or unreadable input) raises :class:`AirflowFailException`: retrying
      would fail the same way;
    * exit status 3 (an internal error) raises :class:`AirflowException` naming the failed stage(s) from a fresh
      ``summary.json`` (a task failure with retries, not a findings alert: ``check_expectations`` does not run).

    Returns (XCom) ``{"output", "exit_status", "submitted_at", "application_args"}``.
    """

    def __init__(self, *, connect_python: str | None = None, connect_env: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.connect_python = connect_python or sys.executable
        self.connect_env = connect_env

    def execute(self, context):  # noqa: D102 - documented on the class
        params = context.get("params") or {}
        conn_id = params.get("spark_conn_id")
        if conn_id:
            self._conn_id = conn_id
        self.application_args = _flatten(self.application_args or [])
        output = _arg_value(self.application_args, "--output")
        if _arg_value(self.application_args, "--log-dirs") in (None, "--output"):
            raise AirflowFailException(
                "params.log_dirs is empty: trigger the DAG with a conf naming the broker log dirs, "
                "or set KOA_AIRFLOW_LOG_DIRS (os.pathsep-separated) where the DAG is parsed"
            )
        submitted_at = dt.datetime.now(dt.timezone.utc)
        connect_conn_id = params.get("spark_connect_conn_id")
        exit_status = 0
        if connect_conn_id:
            exit_status = self._run_connect(connect_conn_id)
            if exit_status:
                self._judge_exit(
                    exit_status,
                    output,
                    submitted_at,
                    RuntimeError(f"kafka-offset-audit audit --remote exited with status {exit_status}"),
                )
        else:
            self.log.info(
                "submitting %s with %s on connection %r", self.application, self.application_args, self._conn_id
            )
            try:
                super().execute(context)
            except Exception as exc:
                proc = getattr(self._hook, "_submit_sp", None) if self._hook is not None else None
                exit_status = getattr(proc, "returncode", None)
                self._judge_exit(exit_status, output, submitted_at, exc)
        return {
            "output": output,
            "exit_status": exit_status,
            "submitted_at": submitted_at.isoformat(),
            "application_args": self.application_args,
        }

    def _run_connect(self, connect_conn_id: str) -> int:
        """Run the audit through the Spark Connect server of Airflow connection ``connect_conn_id`` (type
        ``spark_connect``: ``SparkConnectHook``'s URL): ``kafka-offset-audit audit --remote URL`` in
        ``connect_python`` (no JVM there), with ``--python-env`` the packed environment when the DAG has one.
        Its output goes to the task log; returns its exit status."""
        import subprocess

        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        url = SparkConnectHook(connect_conn_id).get_connection_url()
        cmd = [self.connect_python, "-m", "audit.cli", "audit", "--remote", url]
        if self.connect_env:
            cmd += ["--python-env", self.connect_env]
        cmd += list(self.application_args)
        self.log.info(
            "running the audit through Spark Connect (connection %r): %s",
            connect_conn_id,
            [c if not c.startswith("sc://") else url.split(";", 1)[0] for c in cmd],
        )
        env = {k: v for k, v in os.environ.items() if k != "SPARK_REMOTE"}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for line in proc.stdout:
            self.log.info("%s", line.rstrip())
        return proc.wait()

    def _judge_exit(
        self, exit_status: int | None, output: str | None, submitted_at: dt.datetime, exc: BaseException
    ) -> None:
        """Raise for an exit status that fails this task; return for 1 with a fresh summary.json (findings:
        ``check_expectations`` judges them)."""
        if exit_status == EXIT_USAGE:
            raise AirflowFailException(
                f"the audit exited with status 2: bad usage or unreadable input "
                f"(its message is in the log above; not retried). args: {self.application_args}"
            ) from exc
        if exit_status == EXIT_INTERNAL:
            from airflow.sdk.exceptions import AirflowException

            stages = _failed_stages(output, submitted_at)
            raise AirflowException(
                "the audit exited with status 3, an internal error (not findings): "
                + (
                    f"failed stage(s) {stages}; the judged tables and summary.json are in {output}"
                    if stages
                    else "it failed before writing its output (its message is in the log above)"
                )
            ) from exc
        if exit_status != EXIT_FINDINGS or not _summary_is_fresh(output, submitted_at):
            raise exc
        self.log.warning(
            "the audit exited with status 1 (findings at --fail-on or a failed "
            "expectation suite); check_expectations reports them and fails the run"
        )


# ----------------------------------------------------------------------------------- checks


def _failing_severities(fail_on: str) -> list[str]:
    if fail_on == "never":
        return []
    return list(SEVERITIES[: SEVERITIES.index(fail_on) + 1])


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
    from audit.report.expectations import RESULT_RELPATH, run_expectations
    from audit.report.expectations_config import load_expectations_config
    from audit.spark import build_session

    cfg = load_expectations_config(expectations_config).model_copy(
        update={"fail_on_severities": _failing_severities(fail_on)}
    )
    spark = build_session(os.environ.get("KOA_AIRFLOW_CHECK_MASTER", "local[1]"))
    try:
        run_expectations(spark, output_dir, cfg)
    finally:
        spark.stop()
    with open(os.path.join(output_dir, RESULT_RELPATH), encoding="utf-8") as fh:
        return json.load(fh)


def _top_findings(output_dir: str, failing: Sequence[str], limit: int = MAX_LOGGED_FINDINGS) -> tuple[list[dict], int]:
    """The findings at or above the gate, most severe first, at most ``limit`` (rows, total).

    Streams ``findings/`` batch by batch (only the gated severities, only the columns used) and keeps
    the first rows in order, so memory stays bounded however many findings there are.  Raises
    ``OSError``/``pyarrow`` errors when ``findings/`` cannot be read."""
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


def _gated_findings(output_dir: str, failing: Sequence[str]) -> list[str]:
    """Lines for the findings at or above the gate (most severe first), at most MAX_LOGGED_FINDINGS
    (see :func:`_top_findings`)."""
    if not failing:
        return []
    try:
        top, total = _top_findings(output_dir, failing)
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


def evaluate_output(output: str, fail_on: str = "critical", expectations_config: str | None = None) -> dict:
    """Judge an audit output directory: the expectation suite's result plus the ``fail_on`` gate.

    Returns ``{"passed", "report", "findings_by_severity", "failed_checks", "suite_success", ...}`` where
    ``report`` is the multi-line summary ``check_expectations`` logs.  Reads ``summary.json`` and
    ``expectations/validation_result.json``; runs the Checkpoint (local Spark) when the latter is missing.
    """
    output_dir = _local_path(output)
    if output_dir is None:
        raise AirflowFailException(
            f"check_expectations reads the audit output from this worker, but {output!r} is not a local "
            "path: give an output directory the workers can read (a local or mounted path)"
        )
    summary_path = os.path.join(output_dir, "summary.json")
    if not os.path.isfile(summary_path):
        raise AirflowFailException(f"no audit output: {summary_path} does not exist (see the audit_offsets log)")
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
    failing = _failing_severities(fail_on)
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
        lines.extend("  - " + line for line in _gated_findings(output_dir, failing))
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


# ----------------------------------------------------------------------------------- alerts

MAX_ALERTED_FINDINGS = 50


def _split_detail(detail: str | None) -> tuple[str, str]:
    """A finding's ``detail`` -> (what is wrong and the risk, the action); see AUDIT_RULES.md."""
    text = detail or ""
    head, sep, action = text.partition(" Action: ")
    return (head.strip(), action.strip()) if sep else (text.strip(), "")


def build_alert(
    output: str | None,
    fail_on: str,
    *,
    dag_id: str = DAG_ID,
    run_id: str | None = None,
    task_id: str | None = None,
    error: str | None = None,
) -> dict:
    """The alert for a failed audit run: ``{"subject", "text", "html", "findings"}``.

    When ``output`` holds this run's results, it lists the findings at or above ``fail_on`` (most
    severe first, at most :data:`MAX_ALERTED_FINDINGS`), each with what is wrong and its action, the
    counts by severity, failed expectation checks, and where the report is.  Otherwise (the audit
    itself failed) it names the failed task and its error.  ``findings`` is the number listed.
    """
    import html as _html

    failing = _failing_severities(fail_on)
    out_dir = _local_path(output) if output else None
    summary = None
    if out_dir and os.path.isfile(os.path.join(out_dir, "summary.json")):
        try:
            with open(os.path.join(out_dir, "summary.json"), encoding="utf-8") as fh:
                summary = json.load(fh)
        except (OSError, ValueError):
            summary = None
    where = f"{dag_id} run {run_id}" if run_id else dag_id
    if summary is None or task_id == "audit_offsets":
        subject = f"kafka-offset-audit FAILED to run: {where}"
        text = (
            f"The audit task {task_id or '?'} of {where} failed before judging the offsets, so nothing "
            f"is known about them from this run.\nError: {error or 'see the task log'}\nOutput: {output}"
        )
        return {"subject": subject, "text": text, "html": f"<pre>{_html.escape(text)}</pre>", "findings": 0}
    by_sev = {k: int(v) for k, v in ((summary.get("findings") or {}).get("by_severity") or {}).items()}
    try:
        rows, total = _top_findings(out_dir, failing, MAX_ALERTED_FINDINGS) if failing else ([], 0)
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
    e = _html.escape
    html_rows = "".join(
        f"<tr><td><b>{e(r['severity'])}</b></td><td>{e(r['finding'])}</td><td>{e(str(r['group_id'] or '-'))}</td>"
        f"<td>{e(str(r['topic']))}-{r['partition']}</td><td>{r['committed_offset']} (epoch {r['committed_leader_epoch']})</td>"
        f"<td>{e(what)}</td><td>{e(action)}</td></tr>"
        for r, what, action in items
    )
    html = (
        f"<h3>{e(subject)}</h3><p>{'<br>'.join(e(x) for x in lines[: 3 + bool(error) + bool(failed)])}</p>"
        + (
            '<table border="1" cellpadding="4"><tr><th>severity</th><th>finding</th><th>group</th>'
            "<th>partition</th><th>committed</th><th>what is wrong</th><th>action</th></tr>" + html_rows + "</table>"
            if items
            else ""
        )
        + (f"<p>... and {total - len(rows)} more in {e(str(output))}/findings/</p>" if total > len(rows) else "")
        + (f"<p>Report: {e(report)}</p>" if os.path.isfile(report) else "")
    )
    return {"subject": subject, "text": "\n".join(lines), "html": html, "findings": len(rows)}


class AuditAlertNotifier(BaseNotifier):
    """Airflow notifier (``on_failure_callback``) that sends :func:`build_alert`'s message.

    By email through Airflow's SMTP support (``SmtpNotifier`` of apache-airflow-providers-smtp, connection
    ``smtp_conn_id``) when ``email_to`` is set, and to Slack (``SlackNotifier`` of
    apache-airflow-providers-slack, connection ``slack_conn_id``) when that provider is installed and
    ``slack_conn_id`` is set.  The run's ``output`` and ``fail_on`` come from its params.
    """

    template_fields = ()

    def __init__(
        self,
        *,
        email_to: Sequence[str] = (),
        from_email: str | None = None,
        smtp_conn_id: str = "smtp_default",
        slack_conn_id: str | None = None,
        slack_channel: str | None = None,
    ):
        super().__init__()
        self.email_to = list(email_to)
        self.from_email = from_email
        self.smtp_conn_id = smtp_conn_id
        self.slack_conn_id = slack_conn_id
        self.slack_channel = slack_channel

    def notify(self, context):  # noqa: D102 - documented on the class
        params = context.get("params") or {}
        ti = context.get("ti") or context.get("task_instance")
        dag = context.get("dag")
        exc = context.get("exception")
        alert = build_alert(
            params.get("output"),
            params.get("fail_on", "critical"),
            dag_id=getattr(dag, "dag_id", DAG_ID),
            run_id=context.get("run_id"),
            task_id=getattr(ti, "task_id", None),
            error=str(exc) if exc else None,
        )
        sent = []
        if self.email_to:
            from airflow.providers.smtp.notifications.smtp import SmtpNotifier

            SmtpNotifier(
                to=self.email_to,
                from_email=self.from_email,
                subject=alert["subject"],
                html_content=alert["html"],
                smtp_conn_id=self.smtp_conn_id,
            ).notify(context)
            sent.append(f"email to {', '.join(self.email_to)}")
        if self.slack_conn_id:
            try:
                from airflow.providers.slack.notifications.slack import SlackNotifier
            except ImportError:
                log.warning("KOA_AIRFLOW_SLACK_CONN_ID is set but apache-airflow-providers-slack is not installed")
            else:
                SlackNotifier(
                    slack_conn_id=self.slack_conn_id,
                    text=alert["text"][:3000],
                    channel=self.slack_channel or "#general",
                ).notify(context)
                sent.append(f"Slack {self.slack_channel or '#general'}")
        log.info("kafka-offset-audit alert %r sent: %s", alert["subject"], "; ".join(sent) or "no target configured")


def _alert_callbacks(
    email_to: Sequence[str],
    from_email: str | None,
    smtp_conn_id: str,
    slack_conn_id: str | None,
    slack_channel: str | None,
) -> list:
    if not email_to and not slack_conn_id:
        return []
    return [
        AuditAlertNotifier(
            email_to=email_to,
            from_email=from_email,
            smtp_conn_id=smtp_conn_id,
            slack_conn_id=slack_conn_id,
            slack_channel=slack_channel,
        )
    ]


# ----------------------------------------------------------------------------------- the DAG


def _python_settings(driver_python: str, executor_env: str | None) -> dict:
    """``env_vars`` (and ``archives``) of the submit: one Python for driver and executors, or, with
    ``executor_env`` (a packed environment), the archive's Python on the executors and ``driver_python`` on the
    driver (PySpark's packaging guide, client mode)."""
    if not executor_env:
        return {"env_vars": {"PYSPARK_PYTHON": driver_python}}
    return {
        "archives": f"{executor_env}#env",
        "env_vars": {"PYSPARK_PYTHON": "./env/bin/python", "PYSPARK_DRIVER_PYTHON": driver_python},
    }


def build_dag(
    dag_id: str = DAG_ID,
    *,
    schedule: str | None = "@daily",
    log_dirs: Sequence[str] = (),
    output: str = "/tmp/kafka-offset-audit",
    mode: str = "latest",
    fail_on: str = "critical",
    spark_conn_id: str = "spark_default",
    expectations_config: str | None = None,
    retries: int = 2,
    retry_delay: dt.timedelta = dt.timedelta(minutes=5),
    audit_timeout: dt.timedelta = dt.timedelta(hours=2),
    check_timeout: dt.timedelta = dt.timedelta(minutes=30),
    application: str | None = None,
    spark_binary: str | None = None,
    spark_conf: dict[str, Any] | None = None,
    pyspark_python: str | None = None,
    executor_env: str | None = None,
    start_date: dt.datetime = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc),
    pushgateway: str | None = None,
    pushgateway_labels: Sequence[str] = (),
    history: str | None = None,
    alert_email: Sequence[str] = (),
    alert_from: str | None = None,
    smtp_conn_id: str = "smtp_default",
    slack_conn_id: str | None = None,
    slack_channel: str | None = None,
    spark_connect_conn_id: str | None = None,
) -> DAG:
    """The audit DAG: ``audit_offsets >> check_expectations`` (see the module docstring).

    ``log_dirs``, ``output``, ``mode``, ``fail_on``, ``spark_conn_id``, ``expectations_config``,
    ``pushgateway``, ``pushgateway_labels`` and ``history`` are the params' defaults (a run's conf
    overrides them); the others are fixed per DAG.  With ``history`` the run's Airflow ``run_id`` is its
    id there (a cleared and rerun DAG run replaces its entry).  ``alert_email`` (via ``smtp_conn_id``)
    and ``slack_conn_id`` make :class:`AuditAlertNotifier` the ``on_failure_callback`` of both tasks:
    a message goes out when findings reach ``fail_on``, the suite fails, or the audit cannot run.
    ``executor_env``: the archive ``kafka-offset-audit package`` wrote, for a Spark cluster whose executors have
    nothing installed: shipped with ``--archives <archive>#env``, the executors' Python ``./env/bin/python``, the
    driver's ``pyspark_python`` (client mode).  ``spark_connect_conn_id`` (a param): run through a Spark Connect
    server instead, from ``pyspark_python`` with the project installed (no JVM), ``executor_env`` shipped as the
    server's Python workers' environment (``--python-env``).
    """
    params = {
        "log_dirs": Param(
            list(log_dirs),
            type="array",
            items={"type": "string"},
            description="broker log dirs (or folders holding several); local paths or Hadoop URIs",
        ),
        "output": Param(
            output,
            type="string",
            minLength=1,
            description="output directory, replaced atomically by every run; "
            "check_expectations must be able to read it",
        ),
        "mode": Param(mode, enum=["latest", "history"], description="latest commit per group-partition, or all"),
        "fail_on": Param(
            fail_on,
            enum=list(FAIL_ON_CHOICES),
            description="fail the run when a finding of this severity or worse exists",
        ),
        "spark_conn_id": Param(
            spark_conn_id, type="string", minLength=1, description="Airflow connection of the Spark master"
        ),
        "expectations_config": Param(
            expectations_config, type=["null", "string"], description="JSON/YAML thresholds for the expectation suite"
        ),
        "pushgateway": Param(
            pushgateway, type=["null", "string"], description="Prometheus Pushgateway URL to push the run's metrics to"
        ),
        "pushgateway_labels": Param(
            list(pushgateway_labels),
            type="array",
            items={"type": "string"},
            description="grouping labels of the pushed metrics, LABEL=VALUE",
        ),
        "history": Param(
            history,
            type=["null", "string"],
            description="history directory the run's findings and summary are appended to",
        ),
        "spark_connect_conn_id": Param(
            spark_connect_conn_id,
            type=["null", "string"],
            description="Airflow connection (type spark_connect) of a Spark Connect "
            "server: when set, the audit runs through it (kafka-offset-audit "
            "audit --remote, executor_env as --python-env) instead of "
            "spark-submit",
        ),
    }
    callbacks = _alert_callbacks(alert_email, alert_from, smtp_conn_id, slack_conn_id, slack_channel)
    with DAG(
        dag_id=dag_id,
        description="Audit Kafka consumer offsets against the log's leader-epoch history",
        schedule=schedule,
        start_date=start_date,
        catchup=False,
        max_active_runs=1,  # every run replaces the same output directory
        params=params,
        render_template_as_native_obj=True,  # params.log_dirs renders to a list (expanded by the operator)
        default_args={"owner": "kafka-offset-audit", "retries": retries, "retry_delay": retry_delay},
        tags=["kafka", "audit", "spark"],
        doc_md=__doc__,
    ) as dag:
        submitted = AuditSparkSubmitOperator(
            task_id="audit_offsets",
            application=application or default_application(),
            name="kafka-offset-audit",
            conn_id=spark_conn_id,
            spark_binary=spark_binary or default_spark_binary(),
            conf=dict(spark_conf or {}),
            **_python_settings(pyspark_python or _env("KOA_AIRFLOW_PYSPARK_PYTHON", sys.executable), executor_env),
            connect_python=pyspark_python or _env("KOA_AIRFLOW_PYSPARK_PYTHON", sys.executable),
            connect_env=executor_env,
            application_args=[
                "--log-dirs",
                "{{ params.log_dirs }}",
                "--output",
                "{{ params.output }}",
                "--mode",
                "{{ params.mode }}",
                "--fail-on",
                "{{ params.fail_on }}",
                "{{ ['--expectations-config', params.expectations_config] if params.expectations_config else [] }}",
                "{{ ['--pushgateway', params.pushgateway] if params.pushgateway else [] }}",
                "{{ ['--pushgateway-label'] + params.pushgateway_labels if params.pushgateway and params.pushgateway_labels else [] }}",
                "{{ ['--history', params.history, '--run-id', run_id] if params.history else [] }}",
            ],
            execution_timeout=audit_timeout,
            on_failure_callback=callbacks or None,
        )

        @task(
            task_id="check_expectations",
            retries=0,
            execution_timeout=check_timeout,
            on_failure_callback=callbacks or None,
        )
        def check_expectations(submit_result: dict, params: dict | None = None) -> dict:
            """Fail the run, with the findings' summary in the log, when the audit does not pass."""
            params = params or {}
            outcome = evaluate_output(
                submit_result["output"], params.get("fail_on", fail_on), params.get("expectations_config")
            )
            if not outcome["passed"]:
                log.error("%s", outcome["report"])
                headline = outcome["report"].splitlines()
                reasons = []
                if outcome["gated_findings"]:
                    reasons.append(
                        "findings at or above fail_on: "
                        + ", ".join(f"{s}={n}" for s, n in outcome["gated_findings"].items())
                    )
                if not outcome["suite_success"]:
                    reasons.append("failed checks: " + (", ".join(outcome["failed_checks"]) or "see the log"))
                raise AirflowFailException(f"{headline[0]}; {'; '.join(reasons)} (the summary is logged above)")
            log.info("%s", outcome["report"])
            return {k: v for k, v in outcome.items() if k != "report"}

        check_expectations(submitted.output)
    return dag


dag = build_dag(
    log_dirs=_default_log_dirs(),
    output=_env("KOA_AIRFLOW_OUTPUT", "/tmp/kafka-offset-audit"),
    mode=_env("KOA_AIRFLOW_MODE", "latest"),
    fail_on=_env("KOA_AIRFLOW_FAIL_ON", "critical"),
    spark_conn_id=_env("KOA_AIRFLOW_SPARK_CONN_ID", "spark_default"),
    expectations_config=os.environ.get("KOA_AIRFLOW_EXPECTATIONS_CONFIG") or None,
    schedule=_env("KOA_AIRFLOW_SCHEDULE", "@daily"),
    retries=int(_env("KOA_AIRFLOW_RETRIES", "2")),
    retry_delay=dt.timedelta(seconds=float(_env("KOA_AIRFLOW_RETRY_DELAY_SECONDS", "300"))),
    audit_timeout=dt.timedelta(minutes=float(_env("KOA_AIRFLOW_AUDIT_TIMEOUT_MINUTES", "120"))),
    check_timeout=dt.timedelta(minutes=float(_env("KOA_AIRFLOW_CHECK_TIMEOUT_MINUTES", "30"))),
    pushgateway=os.environ.get("KOA_AIRFLOW_PUSHGATEWAY") or None,
    pushgateway_labels=os.environ.get("KOA_AIRFLOW_PUSHGATEWAY_LABELS", "").split(),
    history=os.environ.get("KOA_AIRFLOW_HISTORY") or None,
    executor_env=os.environ.get("KOA_AIRFLOW_EXECUTOR_ENV") or None,
    spark_connect_conn_id=os.environ.get("KOA_AIRFLOW_SPARK_CONNECT_CONN_ID") or None,
    alert_email=[a.strip() for a in os.environ.get("KOA_AIRFLOW_ALERT_EMAIL", "").split(",") if a.strip()],
    alert_from=os.environ.get("KOA_AIRFLOW_ALERT_FROM") or None,
    smtp_conn_id=_env("KOA_AIRFLOW_SMTP_CONN_ID", "smtp_default"),
    slack_conn_id=os.environ.get("KOA_AIRFLOW_SLACK_CONN_ID") or None,
    slack_channel=os.environ.get("KOA_AIRFLOW_SLACK_CHANNEL") or None,
)
