"""Airflow integration: the audit DAG, its operator and its alert notifier (needs Airflow: the ``[airflow]`` extra).

Importable only where Airflow 3 and its Apache Spark provider are installed, in an environment of their own (see
``scripts/airflow_env.sh``).  A DAG file calls :func:`build_dag` with grouped settings::

    from audit.airflow import Alerts, AuditParams, SparkSettings, build_dag

    dag = build_dag(
        "offsets_audit_prod",
        params=AuditParams(log_dirs=["/backups/kafka/broker-1"], output="/audits/prod", spark_conn_id="spark_prod"),
        spark=SparkSettings(spark_conf={"spark.executor.memory": "4g"}),
        alerts=Alerts(email=["kafka-oncall@example.com"]),
    )

Modules:

* :mod:`.settings`: :class:`AuditParams` (the run params' defaults), :class:`SparkSettings`, :class:`Alerts`;
* :mod:`.operators`: :class:`AuditSparkSubmitOperator` (``audit_offsets``) and its exit-status judgement;
* :mod:`.notifier`: :class:`AuditAlertNotifier`, the tasks' ``on_failure_callback``;
* :mod:`.dag`: :func:`build_dag` and ``check_expectations``' judgement (:func:`check_output`).
"""

from __future__ import annotations

from .dag import build_dag, check_output, dag_params
from .notifier import AuditAlertNotifier, alert_callbacks
from .operators import AuditSparkSubmitOperator, evaluate_output
from .settings import DEFAULT_FAIL_ON, Alerts, AuditParams, SparkSettings

__all__ = [
    "DEFAULT_FAIL_ON",
    "Alerts",
    "AuditAlertNotifier",
    "AuditParams",
    "AuditSparkSubmitOperator",
    "SparkSettings",
    "alert_callbacks",
    "build_dag",
    "check_output",
    "dag_params",
    "evaluate_output",
]
