"""Airflow 3 DAG ``kafka_offset_audit``: a daily audit of Kafka consumer offsets.

Two tasks (see ``airflow_dags/README.md``)::

    audit_offsets  >>  check_expectations

* ``audit_offsets`` -- a :class:`SparkSubmitOperator` that submits ``jobs/audit_offsets.py`` with
  ``--log-dirs``, ``--output``, ``--mode`` and ``--fail-on`` taken from the DAG params.  The job
  writes the output contract and runs the Great Expectations Checkpoint itself
  (``<output>/expectations/validation_result.json``).  Its exit status: ``0`` clean, ``1`` findings
  at ``fail_on`` or a failed suite -- *not* a task failure here, the next task judges it -- and
  ``2`` bad input, which fails the task at once without retries.  Anything else (a crash, a lost
  cluster) fails it with retries.
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
from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

log = logging.getLogger(__name__)

DAG_ID = "kafka_offset_audit"
SEVERITIES = ("critical", "error", "warning", "info")  # most severe first
FAIL_ON_CHOICES = ("critical", "error", "warning", "never")
EXIT_FINDINGS, EXIT_USAGE = 1, 2
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
    """``jobs/audit_offsets.py`` beside this DAG's checkout, or beside the installed ``audit`` package."""
    configured = os.environ.get("KOA_AIRFLOW_APPLICATION")
    if configured:
        return configured
    candidate = _repo_root() / "jobs" / "audit_offsets.py"
    if candidate.is_file():
        return str(candidate)
    import importlib.util

    spec = importlib.util.find_spec("audit")
    if spec and spec.origin:
        candidate = Path(spec.origin).resolve().parents[1] / "jobs" / "audit_offsets.py"
        if candidate.is_file():
            return str(candidate)
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


class AuditSparkSubmitOperator(SparkSubmitOperator):
    """``SparkSubmitOperator`` for ``jobs/audit_offsets.py`` that understands the job's exit status.

    * list-valued template results in ``application_args`` (``--log-dirs``) are expanded in place;
    * the Spark connection id comes from the run's ``params.spark_conn_id`` when set;
    * exit status 1 (findings at ``--fail-on`` or a failed expectation suite) is *not* a failure of
      this task when the run wrote a fresh ``summary.json``: ``check_expectations`` fails the run
      with the findings' summary instead (and without retrying a deterministic result);
    * exit status 2 (bad usage or unreadable input) raises :class:`AirflowFailException`: retrying
      would fail the same way.

    Returns (XCom) ``{"output", "exit_status", "submitted_at", "application_args"}``.
    """

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
                "or set KOA_AIRFLOW_LOG_DIRS (os.pathsep-separated) where the DAG is parsed")
        submitted_at = dt.datetime.now(dt.timezone.utc)
        self.log.info("submitting %s with %s on connection %r", self.application, self.application_args, self._conn_id)
        exit_status = 0
        try:
            super().execute(context)
        except Exception as exc:
            proc = getattr(self._hook, "_submit_sp", None) if self._hook is not None else None
            exit_status = getattr(proc, "returncode", None)
            if exit_status == EXIT_USAGE:
                raise AirflowFailException(
                    f"jobs/audit_offsets.py exited with status 2: bad usage or unreadable input "
                    f"(its message is in the log above; not retried). args: {self.application_args}"
                ) from exc
            if exit_status != EXIT_FINDINGS or not _summary_is_fresh(output, submitted_at):
                raise
            self.log.warning(
                "jobs/audit_offsets.py exited with status 1 (findings at --fail-on or a failed "
                "expectation suite); check_expectations reports them and fails the run")
        return {"output": output, "exit_status": exit_status, "submitted_at": submitted_at.isoformat(),
                "application_args": self.application_args}


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
            target = kwargs.get("column") or ",".join(
                str(kwargs[k]) for k in ("column_A", "column_B") if kwargs.get(k)) or "table"
            result = r.get("result") or {}
            bits = []
            if "observed_value" in result:
                bits.append(f"observed {result['observed_value']!r}")
            if result.get("unexpected_count") is not None:
                bits.append(f"{result['unexpected_count']} unexpected of {result.get('element_count')}")
            if result.get("partial_unexpected_counts"):
                bits.append("values " + ", ".join(
                    f"{c.get('value')!r}x{c.get('count')}" for c in result["partial_unexpected_counts"][:5]))
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
        update={"fail_on_severities": _failing_severities(fail_on)})
    spark = build_session(os.environ.get("KOA_AIRFLOW_CHECK_MASTER", "local[1]"))
    try:
        run_expectations(spark, output_dir, cfg)
    finally:
        spark.stop()
    with open(os.path.join(output_dir, RESULT_RELPATH), encoding="utf-8") as fh:
        return json.load(fh)


def _gated_findings(output_dir: str, failing: Sequence[str]) -> list[str]:
    """Lines for the findings at or above the gate (most severe first), at most MAX_LOGGED_FINDINGS.

    Streams ``findings/`` batch by batch (only the gated severities, only the columns logged) and
    keeps the first lines in order, so memory stays bounded however many findings there are."""
    if not failing:
        return []
    import heapq

    rank = {s: i for i, s in enumerate(SEVERITIES)}
    order = lambda r: (rank[r["severity"]], r["group_id"], r["topic"], r["partition"])  # noqa: E731
    top: list[dict] = []
    total = 0
    try:
        import pyarrow.dataset as ds

        dataset = ds.dataset(os.path.join(output_dir, "findings"), format="parquet")
        columns = ["severity", "finding", "group_id", "topic", "partition", "committed_offset",
                   "committed_leader_epoch", "detail"]
        for batch in dataset.to_batches(columns=columns, filter=ds.field("severity").isin(list(failing))):
            rows = batch.to_pylist()
            total += len(rows)
            top = heapq.nsmallest(MAX_LOGGED_FINDINGS, top + rows, key=order)
    except Exception as exc:  # the summary counts still say enough
        return [f"(could not read findings/: {exc})"]
    lines = [f"{r['severity']} {r['finding']} group={r['group_id']} {r['topic']}[{r['partition']}] "
             f"committed={r['committed_offset']} epoch={r['committed_leader_epoch']}: {r['detail']}"
             for r in top]
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
            "path: give an output directory the workers can read (a local or mounted path)")
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
        "findings by severity: " + " ".join(f"{s}={by_sev[s]}" for s in SEVERITIES)
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
        lines.append("findings at or above " + fail_on + ": "
                     + ", ".join(f"{s}={n}" for s, n in gated.items()))
        lines.extend("  - " + line for line in _gated_findings(output_dir, failing))
    for name, rel in (("report", "report.html"), ("data docs", os.path.join("data_docs", "index.html"))):
        if os.path.isfile(os.path.join(output_dir, rel)):
            lines.append(f"{name}: {os.path.join(output_dir, rel)}")
    return {"passed": passed, "report": "\n".join(lines), "findings_by_severity": by_sev,
            "findings_by_name": by_name, "failed_checks": failed_checks, "suite_success": suite_success,
            "gated_findings": gated, "output": output}


# ----------------------------------------------------------------------------------- the DAG


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
    start_date: dt.datetime = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc),
) -> DAG:
    """The audit DAG: ``audit_offsets >> check_expectations`` (see the module docstring).

    ``log_dirs``, ``output``, ``mode``, ``fail_on``, ``spark_conn_id`` and ``expectations_config``
    are the params' defaults (a run's conf overrides them); the others are fixed per DAG.
    """
    params = {
        "log_dirs": Param(list(log_dirs), type="array", items={"type": "string"},
                          description="broker log dirs (or folders holding several); local paths or Hadoop URIs"),
        "output": Param(output, type="string", minLength=1,
                        description="output directory, replaced atomically by every run; "
                                    "check_expectations must be able to read it"),
        "mode": Param(mode, enum=["latest", "history"], description="latest commit per group-partition, or all"),
        "fail_on": Param(fail_on, enum=list(FAIL_ON_CHOICES),
                         description="fail the run when a finding of this severity or worse exists"),
        "spark_conn_id": Param(spark_conn_id, type="string", minLength=1,
                               description="Airflow connection of the Spark master"),
        "expectations_config": Param(expectations_config, type=["null", "string"],
                                     description="JSON/YAML thresholds for the expectation suite"),
    }
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
            env_vars={"PYSPARK_PYTHON": pyspark_python or _env("KOA_AIRFLOW_PYSPARK_PYTHON", sys.executable)},
            application_args=[
                "--log-dirs", "{{ params.log_dirs }}",
                "--output", "{{ params.output }}",
                "--mode", "{{ params.mode }}",
                "--fail-on", "{{ params.fail_on }}",
                "{{ ['--expectations-config', params.expectations_config] if params.expectations_config else [] }}",
            ],
            execution_timeout=audit_timeout,
        )

        @task(task_id="check_expectations", retries=0, execution_timeout=check_timeout)
        def check_expectations(submit_result: dict, params: dict | None = None) -> dict:
            """Fail the run, with the findings' summary in the log, when the audit does not pass."""
            params = params or {}
            outcome = evaluate_output(submit_result["output"], params.get("fail_on", fail_on),
                                      params.get("expectations_config"))
            if not outcome["passed"]:
                log.error("%s", outcome["report"])
                headline = outcome["report"].splitlines()
                reasons = []
                if outcome["gated_findings"]:
                    reasons.append("findings at or above fail_on: " + ", ".join(
                        f"{s}={n}" for s, n in outcome["gated_findings"].items()))
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
)
