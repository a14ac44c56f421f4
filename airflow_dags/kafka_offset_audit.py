"""Airflow 3 DAG ``kafka_offset_audit``: a daily audit of Kafka consumer offsets (``audit_offsets >> check_expectations``).

An example DAG file over :func:`audit.airflow.build_dag` (the installed ``kafka-offset-audit`` package, its
``[airflow]`` extra): the deployment's settings come from the environment where the file is parsed
(``KOA_AIRFLOW_*``, listed in ``docs/airflow.md``); each run's inputs are the DAG params (trigger with a conf
to override them).  Copy it and call ``build_dag`` once per audited cluster, each with its own DAG id.
"""

from __future__ import annotations

import datetime as dt
import os

from audit.airflow import Alerts, AuditParams, SparkSettings, build_dag


def _env(name: str, default: str) -> str:
    """``$name`` stripped, or ``default`` when it is unset or blank."""
    return os.environ.get(name, "").strip() or default


def _opt(name: str) -> str | None:
    """``$name`` stripped, or None when it is unset or blank."""
    return os.environ.get(name, "").strip() or None


def _minutes(name: str, default: str) -> dt.timedelta:
    return dt.timedelta(minutes=float(_env(name, default)))


dag = build_dag(
    "kafka_offset_audit",
    params=AuditParams(
        log_dirs=[d for d in os.environ.get("KOA_AIRFLOW_LOG_DIRS", "").split(os.pathsep) if d.strip()],
        kafka_conn_id=_opt("KOA_AIRFLOW_KAFKA_CONN_ID"),  # a live audit through that Kafka connection instead
        output=_env("KOA_AIRFLOW_OUTPUT", "/tmp/kafka-offset-audit"),
        mode=_env("KOA_AIRFLOW_MODE", "latest"),
        fail_on=_env("KOA_AIRFLOW_FAIL_ON", "error"),  # the CLI's --fail-on default
        spark_conn_id=_env("KOA_AIRFLOW_SPARK_CONN_ID", "spark_default"),
        expectations_config=_opt("KOA_AIRFLOW_EXPECTATIONS_CONFIG"),
        pushgateway=_opt("KOA_AIRFLOW_PUSHGATEWAY"),
        pushgateway_labels=os.environ.get("KOA_AIRFLOW_PUSHGATEWAY_LABELS", "").split(),
        history=_opt("KOA_AIRFLOW_HISTORY"),
        spark_connect_conn_id=_opt("KOA_AIRFLOW_SPARK_CONNECT_CONN_ID"),
    ),
    spark=SparkSettings(
        application=_opt("KOA_AIRFLOW_APPLICATION"),  # default: audit/submit.py of the installed package
        spark_binary=_opt("KOA_AIRFLOW_SPARK_BINARY"),  # default: spark-submit beside this Python, else on PATH
        pyspark_python=_opt("KOA_AIRFLOW_PYSPARK_PYTHON"),  # default: this Python
        executor_env=_opt("KOA_AIRFLOW_EXECUTOR_ENV"),  # the archive `kafka-offset-audit package` wrote
    ),
    alerts=Alerts(
        email=[a.strip() for a in os.environ.get("KOA_AIRFLOW_ALERT_EMAIL", "").split(",") if a.strip()],
        from_email=_opt("KOA_AIRFLOW_ALERT_FROM"),
        smtp_conn_id=_env("KOA_AIRFLOW_SMTP_CONN_ID", "smtp_default"),
        slack_conn_id=_opt("KOA_AIRFLOW_SLACK_CONN_ID"),
        slack_channel=_opt("KOA_AIRFLOW_SLACK_CHANNEL"),
    ),
    schedule=_env("KOA_AIRFLOW_SCHEDULE", "@daily"),
    retries=int(_env("KOA_AIRFLOW_RETRIES", "2")),
    retry_delay=dt.timedelta(seconds=float(_env("KOA_AIRFLOW_RETRY_DELAY_SECONDS", "300"))),
    audit_timeout=_minutes("KOA_AIRFLOW_AUDIT_TIMEOUT_MINUTES", "120"),
    check_timeout=_minutes("KOA_AIRFLOW_CHECK_TIMEOUT_MINUTES", "30"),
)
