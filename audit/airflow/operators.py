"""The ``audit_offsets`` task: a ``SparkSubmitOperator`` that understands the audit's exit status.

:class:`AuditSparkSubmitOperator` submits the application (or runs the audit through a Spark Connect server) and
judges its exit status: ``0`` clean; ``1`` findings at ``--fail-on`` or a failed suite, *not* a failure of this task
when the run wrote a fresh ``summary.json`` (``check_expectations`` judges it); ``2`` bad usage or input, a failure
without retries; ``3`` an internal error naming the failed stage(s), a failure with retries; anything else a
failure with retries.  :func:`evaluate_output` is :func:`audit.report.evaluation.evaluate_output` for a task.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile
from typing import Any, Iterable, Sequence

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ..report import evaluation
from ..report.evaluation import EvaluationError, local_output_dir

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_INTERNAL",
    "EXIT_USAGE",
    "FRESHNESS_SLACK_SECONDS",
    "AuditSparkSubmitOperator",
    "evaluate_output",
    "failed_stages",
    "summary_is_fresh",
]

EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 1, 2, 3
#: a summary.json this much older than the submit is not this run's (clock slack between processes)
FRESHNESS_SLACK_SECONDS = 60


def _flatten(values: Iterable[Any]) -> list[str]:
    """Flatten rendered ``application_args`` into strings: list-valued params expand in place, None is dropped."""
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


def _read_summary(output: str | None) -> dict | None:
    path = local_output_dir(output) if output else None
    if not path:
        return None
    try:
        with open(os.path.join(path, "summary.json"), encoding="utf-8") as fh:
            summary = json.load(fh)
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def summary_is_fresh(output: str | None, submitted_at: dt.datetime) -> bool:
    """Tell whether ``<output>/summary.json`` was written by the run submitted at ``submitted_at``.

    Parameters
    ----------
    output : str, optional
        The run's output directory (a local path or ``file:`` URI; other URIs are never fresh).
    submitted_at : datetime
        When the run was submitted (timezone-aware); the summary's ``started_at`` may be up to
        :data:`FRESHNESS_SLACK_SECONDS` older.

    Returns
    -------
    bool
        False when the summary is missing, unreadable or older.
    """
    summary = _read_summary(output)
    try:
        started = dt.datetime.fromisoformat(summary["started_at"]) if summary else None
    except (KeyError, TypeError, ValueError):
        return False
    if started is None:
        return False
    if started.tzinfo is None:
        started = started.replace(tzinfo=dt.timezone.utc)
    return started >= submitted_at - dt.timedelta(seconds=FRESHNESS_SLACK_SECONDS)


def failed_stages(output: str | None, submitted_at: dt.datetime) -> list[str]:
    """Return ``"stage: error"`` for each failed stage of a fresh ``<output>/summary.json`` (exit status 3).

    Returns
    -------
    list of str
        Empty when the summary is missing, stale or names no failed stage.
    """
    if not summary_is_fresh(output, submitted_at):
        return []
    stages = (_read_summary(output) or {}).get("failed_stages") or []
    try:
        return [f"{f.get('stage')}: {f.get('error')}" for f in stages]
    except (AttributeError, TypeError):
        return []


def evaluate_output(output: str, fail_on: str, expectations_config: str | None = None) -> dict:
    """Judge an audit output as :func:`audit.report.evaluation.evaluate_output` does, for a task.

    Raises
    ------
    AirflowFailException
        There is no output to judge on this worker (:class:`audit.report.evaluation.EvaluationError`): retrying
        would find the same.
    """
    try:
        return evaluation.evaluate_output(output, fail_on, expectations_config)
    except EvaluationError as exc:
        raise AirflowFailException(str(exc)) from exc


class AuditSparkSubmitOperator(SparkSubmitOperator):
    """Submit the audit with ``SparkSubmitOperator`` and judge the application's exit status.

    * list-valued template results in ``application_args`` (``--log-dirs``) are expanded in place;
    * the Spark connection id comes from the run's ``params.spark_conn_id`` when set;
    * with the run's ``params.spark_connect_conn_id`` the audit runs through that Spark Connect server instead
      (``kafka-offset-audit audit --remote`` in ``connect_python``, ``connect_env`` as ``--python-env``);
    * exit status 1 (findings at ``--fail-on`` or a failed expectation suite) is *not* a failure of
      this task when the run wrote a fresh ``summary.json``: ``check_expectations`` fails the run
      with the findings' summary instead (and without retrying a deterministic result);
    * exit status 2 (bad usage or unreadable input) raises ``AirflowFailException``: retrying
      would fail the same way;
    * exit status 3 (an internal error) raises ``AirflowException`` naming the failed stage(s) from a fresh
      ``summary.json`` (a task failure with retries, not a findings alert: ``check_expectations`` does not run).

    Returns (XCom) ``{"output", "exit_status", "submitted_at", "application_args"}``.

    Parameters
    ----------
    connect_python : str, optional
        The Python that runs the audit through Spark Connect (the project installed, no JVM needed); by default
        this interpreter.
    connect_env : str, optional
        The packed environment given as ``--python-env`` through Spark Connect.
    **kwargs
        ``SparkSubmitOperator``'s.
    """

    def __init__(self, *, connect_python: str | None = None, connect_env: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.connect_python = connect_python or sys.executable
        self.connect_env = connect_env

    def execute(self, context):
        params = context.get("params") or {}
        conn_id = params.get("spark_conn_id")
        if conn_id:
            self._conn_id = conn_id
        self.application_args = _flatten(self.application_args or [])
        output = _arg_value(self.application_args, "--output")
        kafka_conn_id = params.get("kafka_conn_id")
        offline = "--log-dirs" in self.application_args
        if offline == bool(kafka_conn_id):
            raise AirflowFailException(
                "give params.kafka_conn_id (a live audit through that Kafka connection) or params.log_dirs (broker "
                "log-dir copies), not both"
                if offline
                else "params.log_dirs is empty and params.kafka_conn_id unset: name the broker log dirs, or the "
                "Airflow connection (type kafka) of the cluster to audit live, in the run's conf or the DAG's params"
            )
        with tempfile.TemporaryDirectory(prefix="koa-kafka-") as private:
            if kafka_conn_id:
                self.application_args = [*self._live_args(kafka_conn_id, private), *self.application_args]
            return self._execute(context, params, output)

    def _live_args(self, kafka_conn_id: str, private: str) -> list[str]:
        """``--bootstrap-servers`` and ``--client-config`` of the Airflow connection ``kafka_conn_id``.

        The client properties (secrets included) go to a file in ``private`` that only this user reads, removed
        when the task ends (:mod:`audit.sources.connection_properties`); the connection's extra uses the Kafka
        provider's librdkafka names or Java's.
        """
        from airflow.sdk import BaseHook

        from ..sources.connection_properties import connection_properties, write_client_properties

        conn = BaseHook.get_connection(kafka_conn_id)
        try:
            bootstrap, props = connection_properties(conn.extra_dejson, conn.host, conn.port, conn.login, conn.password)
        except ValueError as exc:
            raise AirflowFailException(f"connection {kafka_conn_id!r}: {exc}") from None
        args = ["--bootstrap-servers", bootstrap]
        if props:
            args += ["--client-config", write_client_properties(props, os.path.join(private, "client.properties"))]
        self.log.info(
            "live audit of %s through connection %r (%d client properties)", bootstrap, kafka_conn_id, len(props)
        )
        return args

    def _execute(self, context, params: dict, output: str | None) -> dict:
        submitted_at = dt.datetime.now(dt.timezone.utc)
        connect_conn_id = params.get("spark_connect_conn_id")
        exit_status: int | None = 0
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
        """Run the audit through the Spark Connect server of Airflow connection ``connect_conn_id``.

        The connection is of type ``spark_connect`` (``SparkConnectHook``'s URL): ``kafka-offset-audit audit
        --remote URL`` runs in ``connect_python`` (no JVM there), with ``--python-env`` the packed environment when
        the DAG has one.  Its output goes to the task log; returns its exit status.
        """
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
        assert proc.stdout is not None
        for line in proc.stdout:
            self.log.info("%s", line.rstrip())
        return proc.wait()

    def _judge_exit(
        self, exit_status: int | None, output: str | None, submitted_at: dt.datetime, exc: BaseException
    ) -> None:
        """Raise for an exit status that fails this task.

        Return for 1 with a fresh ``summary.json`` (findings: ``check_expectations`` judges them).
        """
        if exit_status == EXIT_USAGE:
            raise AirflowFailException(
                f"the audit exited with status 2: bad usage or unreadable input "
                f"(its message is in the log above; not retried). args: {self.application_args}"
            ) from exc
        if exit_status == EXIT_INTERNAL:
            stages = failed_stages(output, submitted_at)
            raise AirflowException(
                "the audit exited with status 3, an internal error (not findings): "
                + (
                    f"failed stage(s) {stages}; the judged tables and summary.json are in {output}"
                    if stages
                    else "it failed before writing its output (its message is in the log above)"
                )
            ) from exc
        if exit_status != EXIT_FINDINGS or not summary_is_fresh(output, submitted_at):
            raise exc
        self.log.warning(
            "the audit exited with status 1 (findings at --fail-on or a failed "
            "expectation suite); check_expectations reports them and fails the run"
        )
