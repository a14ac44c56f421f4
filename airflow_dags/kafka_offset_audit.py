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

# what the tasks judge and send, and the output contract: neither starts Spark or imports Airflow when imported
from audit.report.evaluation import DAG_ID, EvaluationError, build_alert, local_output_dir
from audit.report.evaluation import evaluate_output as _evaluate_output
from audit.tables import FAIL_ON_CHOICES

log = logging.getLogger(__name__)

EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 1, 2, 3
#: a summary.json this much older than the submit is not this run's (clock slack between processes)
FRESHNESS_SLACK_SECONDS = 60


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


def _summary_is_fresh(output: str | None, submitted_at: dt.datetime) -> bool:
    """True when ``<output>/summary.json`` was written by the run submitted at ``submitted_at``."""
    path = local_output_dir(output) if output else None
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
    path = local_output_dir(output) if output else None
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


def evaluate_output(output: str, fail_on: str = "critical", expectations_config: str | None = None) -> dict:
    """:func:`audit.report.evaluation.evaluate_output`, its :class:`EvaluationError` (no output to judge on this
    worker) raised as :class:`AirflowFailException`: retrying would find the same."""
    try:
        return _evaluate_output(output, fail_on, expectations_config)
    except EvaluationError as exc:
        raise AirflowFailException(str(exc)) from exc


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
