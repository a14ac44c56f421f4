"""The audit DAG: ``audit_offsets >> check_expectations``, built by :func:`build_dag`.

* ``audit_offsets`` -- an :class:`audit.airflow.operators.AuditSparkSubmitOperator` that submits the application
  (``audit/submit.py`` of the installed package) with ``--log-dirs`` (or, with the ``kafka_conn_id`` param, the
  ``--bootstrap-servers`` and ``--client-config`` of that Kafka connection), ``--output``, ``--mode`` and
  ``--fail-on`` taken from the run's params (or, with the ``spark_connect_conn_id`` param, runs ``kafka-offset-audit audit
  --remote`` through a Spark Connect server).  The job writes the output contract and runs the Great Expectations
  Checkpoint itself (``<output>/expectations/validation_result.json``).  Its exit status: ``0`` clean, ``1``
  findings at ``fail_on`` or a failed suite -- *not* a task failure here, the next task judges it -- ``2`` bad
  input, which fails the task at once without retries, ``3`` an internal error (a stage of the audit failed), a
  task failure naming the stage, with retries, never a findings alert.  Anything else (a crash, a lost cluster)
  fails it with retries.
* ``check_expectations`` -- reads ``<output>/summary.json`` and the Checkpoint's ``validation_result.json`` (or
  runs the Checkpoint itself, in a local Spark, when the job did not), logs the findings by severity and name, the
  failed checks and the findings at or above ``fail_on``, and raises ``AirflowFailException`` (no retries) when
  the suite failed or a finding at or above ``fail_on`` exists.

Per-run inputs are the DAG's params (trigger with a conf to override them; their defaults are an
:class:`audit.airflow.settings.AuditParams`); the rest is fixed per DAG.  Importing this module starts no Spark:
``check_expectations`` imports pyspark when it has to run the Checkpoint itself.
"""

from __future__ import annotations

import datetime as dt
import logging

from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

from ..report.evaluation import DAG_ID
from ..tables import FAIL_ON_CHOICES
from .notifier import alert_callbacks
from .operators import AuditSparkSubmitOperator, evaluate_output
from .settings import MODES, Alerts, AuditParams, SparkSettings

__all__ = ["DAG_ID", "DEFAULT_START_DATE", "APPLICATION_ARGS", "build_dag", "check_output", "dag_params"]

log = logging.getLogger(__name__)

#: the DAG's ``start_date`` unless given (``catchup=False``: no run is made up for the days before)
DEFAULT_START_DATE = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)

#: the application's arguments, templated from the run's params (list-valued ones expand in place)
APPLICATION_ARGS = (
    "{{ ['--log-dirs'] + params.log_dirs if params.log_dirs else [] }}",
    "--output",
    "{{ params.output }}",
    "--mode",
    "{{ params.mode }}",
    "--fail-on",
    "{{ params.fail_on }}",
    "{{ ['--expectations-config', params.expectations_config] if params.expectations_config else [] }}",
    "{{ ['--pushgateway', params.pushgateway] if params.pushgateway else [] }}",
    "{{ ['--pushgateway-label'] + params.pushgateway_labels if params.pushgateway and params.pushgateway_labels "
    "else [] }}",
    "{{ ['--history', params.history, '--run-id', run_id] if params.history else [] }}",
)


def dag_params(defaults: AuditParams) -> dict[str, Param]:
    """Return the DAG's params, their defaults ``defaults``, each with its type and description.

    Parameters
    ----------
    defaults : AuditParams
        The default of each param.

    Returns
    -------
    dict
        ``{name: Param}`` in :class:`audit.airflow.settings.AuditParams`'s field order.
    """
    nullable = ["null", "string"]
    return {
        "log_dirs": Param(
            list(defaults.log_dirs),
            type="array",
            items={"type": "string"},
            description="broker log dirs (or folders holding several); local paths or Hadoop URIs; or kafka_conn_id",
        ),
        "kafka_conn_id": Param(
            defaults.kafka_conn_id,
            type=nullable,
            description="Airflow connection (type kafka) of the cluster to audit live instead of log dirs: its extra "
            "holds bootstrap.servers and the client properties, secrets included",
        ),
        "output": Param(
            defaults.output,
            type="string",
            minLength=1,
            description="output directory, replaced atomically by every run; check_expectations must be able to read it",
        ),
        "mode": Param(defaults.mode, enum=list(MODES), description="latest commit per group-partition, or all"),
        "fail_on": Param(
            defaults.fail_on,
            enum=list(FAIL_ON_CHOICES),
            description="fail the run when a finding of this severity or worse exists",
        ),
        "spark_conn_id": Param(
            defaults.spark_conn_id, type="string", minLength=1, description="Airflow connection of the Spark master"
        ),
        "expectations_config": Param(
            defaults.expectations_config, type=nullable, description="JSON/YAML thresholds for the expectation suite"
        ),
        "pushgateway": Param(
            defaults.pushgateway, type=nullable, description="Prometheus Pushgateway URL to push the run's metrics to"
        ),
        "pushgateway_labels": Param(
            list(defaults.pushgateway_labels),
            type="array",
            items={"type": "string"},
            description="grouping labels of the pushed metrics, LABEL=VALUE",
        ),
        "history": Param(
            defaults.history,
            type=nullable,
            description="history directory the run's findings and summary are appended to",
        ),
        "spark_connect_conn_id": Param(
            defaults.spark_connect_conn_id,
            type=nullable,
            description="Airflow connection (type spark_connect) of a Spark Connect server: when set, the audit runs "
            "through it (kafka-offset-audit audit --remote, executor_env as --python-env) instead of spark-submit",
        ),
    }


def check_output(submit_result: dict, params: dict, default_fail_on: str) -> dict:
    """Judge the audit's output for ``check_expectations``: log the summary, raise when the run does not pass.

    Parameters
    ----------
    submit_result : dict
        ``audit_offsets``' XCom (its ``output``).
    params : dict
        The run's params (``fail_on``, ``expectations_config``).
    default_fail_on : str
        The gate when the params have no ``fail_on``.

    Returns
    -------
    dict
        :func:`audit.report.evaluation.evaluate_output`'s outcome without its ``report``.

    Raises
    ------
    AirflowFailException
        The suite failed or a finding at or above ``fail_on`` exists (no retries), or there is no output here.
    """
    outcome = evaluate_output(
        submit_result["output"], params.get("fail_on") or default_fail_on, params.get("expectations_config")
    )
    if not outcome["passed"]:
        log.error("%s", outcome["report"])
        headline = outcome["report"].splitlines()
        reasons = []
        if outcome["gated_findings"]:
            reasons.append(
                "findings at or above fail_on: " + ", ".join(f"{s}={n}" for s, n in outcome["gated_findings"].items())
            )
        if not outcome["suite_success"]:
            reasons.append("failed checks: " + (", ".join(outcome["failed_checks"]) or "see the log"))
        raise AirflowFailException(f"{headline[0]}; {'; '.join(reasons)} (the summary is logged above)")
    log.info("%s", outcome["report"])
    return {k: v for k, v in outcome.items() if k != "report"}


def build_dag(
    dag_id: str = DAG_ID,
    *,
    params: AuditParams = AuditParams(),
    spark: SparkSettings = SparkSettings(),
    alerts: Alerts = Alerts(),
    schedule: str | None = "@daily",
    start_date: dt.datetime = DEFAULT_START_DATE,
    retries: int = 2,
    retry_delay: dt.timedelta = dt.timedelta(minutes=5),
    audit_timeout: dt.timedelta = dt.timedelta(hours=2),
    check_timeout: dt.timedelta = dt.timedelta(minutes=30),
) -> DAG:
    """Build the audit DAG ``audit_offsets >> check_expectations`` (see the module docstring).

    Call it once per audited cluster, from a DAG file, each with its own ``dag_id``; every run replaces its
    output directory, so one run at a time (``max_active_runs=1``, ``catchup=False``).

    Parameters
    ----------
    dag_id : str
        The DAG's id.
    params : AuditParams
        The defaults of the run's params (a run's conf overrides them).  With ``history`` the run's Airflow
        ``run_id`` is its id there (a cleared and rerun DAG run replaces its entry).
    spark : SparkSettings
        How ``audit_offsets`` submits the application: spark-submit, its conf, the Pythons, the packed
        executors' environment.
    alerts : Alerts
        Who gets the alert: with an address or a Slack connection, :class:`audit.airflow.notifier.AuditAlertNotifier`
        is the ``on_failure_callback`` of both tasks (findings at ``fail_on``, a failed suite, or an audit that
        cannot run).
    schedule : str, optional
        The DAG's schedule (None: triggered runs only).
    start_date : datetime
        The DAG's ``start_date``.
    retries, retry_delay : int, timedelta
        Retries of ``audit_offsets``; ``check_expectations`` never retries (its verdict is deterministic).
    audit_timeout, check_timeout : timedelta
        ``execution_timeout`` of ``audit_offsets`` and of ``check_expectations``.

    Returns
    -------
    DAG
        The DAG, its tasks ``audit_offsets`` and ``check_expectations``.
    """
    callbacks = alert_callbacks(alerts) or None
    default_fail_on = params.fail_on  # the gate of a run whose params have none
    with DAG(
        dag_id=dag_id,
        description="Audit Kafka consumer offsets against the log's leader-epoch history",
        schedule=schedule,
        start_date=start_date,
        catchup=False,
        max_active_runs=1,  # every run replaces the same output directory
        params=dag_params(params),
        render_template_as_native_obj=True,  # params.log_dirs renders to a list (expanded by the operator)
        default_args={"owner": "kafka-offset-audit", "retries": retries, "retry_delay": retry_delay},
        tags=["kafka", "audit", "spark"],
        doc_md=__doc__,
    ) as dag:
        submitted = AuditSparkSubmitOperator(
            task_id="audit_offsets",
            application=spark.resolved_application(),
            name="kafka-offset-audit",
            conn_id=params.spark_conn_id,
            spark_binary=spark.resolved_spark_binary(),
            conf=dict(spark.spark_conf),
            **spark.submit_python_settings(),
            connect_python=spark.resolved_python(),
            connect_env=spark.executor_env,
            application_args=list(APPLICATION_ARGS),
            execution_timeout=audit_timeout,
            on_failure_callback=callbacks,
        )

        @task(task_id="check_expectations", retries=0, execution_timeout=check_timeout, on_failure_callback=callbacks)
        def check_expectations(submit_result: dict, params: dict | None = None) -> dict:
            """Fail the run, with the findings' summary in the log, when the audit does not pass."""
            return check_output(submit_result, params or {}, default_fail_on)

        check_expectations(submitted.output)
    return dag
