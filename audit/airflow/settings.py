"""The grouped settings of :func:`audit.airflow.dag.build_dag`: the params' defaults, the Spark submit and the alerts.

Frozen dataclasses, checked when built: :class:`AuditParams` (the defaults of each run's params; a run's conf
overrides them), :class:`SparkSettings` (how ``audit_offsets`` submits the application) and :class:`Alerts` (who
hears of a failed run).  This module imports no Airflow; the package does (:mod:`audit.airflow`).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..tables import FAIL_ON_CHOICES

__all__ = ["DEFAULT_FAIL_ON", "DEFAULT_OUTPUT", "MODES", "Alerts", "AuditParams", "SparkSettings"]

#: the ``fail_on`` param's default: the CLI's ``--fail-on`` default (``AuditConfig.fail_on``), so a run fails on the
#: findings a command-line audit exits 1 for
DEFAULT_FAIL_ON = "error"
#: the ``output`` param's default
DEFAULT_OUTPUT = "/tmp/kafka-offset-audit"
#: the ``mode`` param's choices (``--mode``)
MODES = ("latest", "history")


@dataclass(frozen=True)
class AuditParams:
    """The defaults of the DAG's params, one per field; a run's conf overrides each.

    Parameters
    ----------
    log_dirs : sequence of str
        Broker log dirs (or folders holding several): local paths or Hadoop URIs (``--log-dirs``), for an offline
        audit.  A run needs these or ``kafka_conn_id``, not both.
    kafka_conn_id : str, optional
        Airflow connection (type ``kafka``, the Apache Kafka provider's) of the cluster to audit live: its extra
        holds ``bootstrap.servers`` and the client properties, secrets included
        (:mod:`audit.sources.connection_properties`).
    output : str
        Output directory, replaced atomically by every run (``--output``); ``check_expectations`` reads it, so a
        local or mounted path.
    mode : str
        ``latest`` or ``history`` (``--mode``).
    fail_on : str
        ``critical``, ``error``, ``warning`` or ``never`` (``--fail-on``; :data:`audit.tables.FAIL_ON_CHOICES`): the
        run fails when a finding of this severity or worse exists.  Default ``error``, the CLI's.
    spark_conn_id : str
        Airflow connection of the Spark master.
    expectations_config : str, optional
        JSON/YAML thresholds for the expectation suite (``--expectations-config``).
    pushgateway : str, optional
        Prometheus Pushgateway URL the job pushes its metrics to (``--pushgateway``).
    pushgateway_labels : sequence of str
        Grouping labels of the pushed metrics, ``LABEL=VALUE`` (``--pushgateway-label``).
    history : str, optional
        History directory each run is appended to (``--history``), keyed by the Airflow run id.
    spark_connect_conn_id : str, optional
        Airflow connection (type ``spark_connect``) of a Spark Connect server: the audit runs through it
        (``kafka-offset-audit audit --remote``) instead of spark-submit.

    Raises
    ------
    ValueError
        ``mode`` or ``fail_on`` is not one of its choices, or ``output`` or ``spark_conn_id`` is empty.
    """

    log_dirs: Sequence[str] = ()
    kafka_conn_id: str | None = None
    output: str = DEFAULT_OUTPUT
    mode: str = "latest"
    fail_on: str = DEFAULT_FAIL_ON
    spark_conn_id: str = "spark_default"
    expectations_config: str | None = None
    pushgateway: str | None = None
    pushgateway_labels: Sequence[str] = ()
    history: str | None = None
    spark_connect_conn_id: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.log_dirs, str) or isinstance(self.pushgateway_labels, str):
            raise ValueError("log_dirs and pushgateway_labels take a sequence of strings, not one string")
        object.__setattr__(self, "log_dirs", tuple(self.log_dirs))
        object.__setattr__(self, "pushgateway_labels", tuple(self.pushgateway_labels))
        if self.mode not in MODES:
            raise ValueError(f"mode takes one of {', '.join(MODES)}, not {self.mode!r}")
        if self.fail_on not in FAIL_ON_CHOICES:
            raise ValueError(f"fail_on takes one of {', '.join(FAIL_ON_CHOICES)}, not {self.fail_on!r}")
        if not self.output or not self.spark_conn_id:
            raise ValueError("output and spark_conn_id must not be empty")


@dataclass(frozen=True)
class SparkSettings:
    """How ``audit_offsets`` submits the audit: the application, spark-submit, its conf and the Pythons.

    Parameters
    ----------
    application : str, optional
        The submitted file; by default ``audit/submit.py`` of the installed ``audit`` package (what
        ``kafka-offset-audit spark-app`` prints).
    spark_binary : str, optional
        The ``spark-submit`` to run; by default the one beside this interpreter (the Airflow venv's pyspark), else
        the one on ``PATH``.
    spark_conf : mapping
        Spark properties given to spark-submit (``--conf``).
    pyspark_python : str, optional
        ``PYSPARK_PYTHON`` of the submit (the driver and, in local mode, the executors) and the Python that runs
        the audit through Spark Connect; by default this interpreter.
    executor_env : str, optional
        The archive ``kafka-offset-audit package`` wrote, for a Spark cluster whose executors have nothing
        installed: shipped with ``--archives <archive>#env``, the executors' Python ``./env/bin/python``, the
        driver's ``pyspark_python`` (client mode); through Spark Connect, the server's ``--python-env``.
    """

    application: str | None = None
    spark_binary: str | None = None
    spark_conf: Mapping[str, Any] = field(default_factory=dict)
    pyspark_python: str | None = None
    executor_env: str | None = None

    def resolved_application(self) -> str:
        """Return the application to submit: :attr:`application`, else the installed ``audit/submit.py``.

        Returns
        -------
        str
            An absolute path when it is the installed application.
        """
        if self.application:
            return self.application
        spec = importlib.util.find_spec("audit.submit")
        if spec is None or not spec.origin:
            raise RuntimeError("the audit package has no submit module: reinstall kafka-offset-audit")
        return str(Path(spec.origin).resolve())

    def resolved_spark_binary(self) -> str:
        """Return :attr:`spark_binary`, else the ``spark-submit`` beside this interpreter, else ``spark-submit``."""
        if self.spark_binary:
            return self.spark_binary
        beside = Path(sys.executable).parent / "spark-submit"
        return str(beside) if beside.is_file() else "spark-submit"

    def resolved_python(self) -> str:
        """Return :attr:`pyspark_python`, else this interpreter."""
        return self.pyspark_python or sys.executable

    def submit_python_settings(self) -> dict[str, Any]:
        """Return the submit's ``env_vars`` (and ``archives``): the Pythons of the driver and the executors.

        One Python for both, or, with :attr:`executor_env`, the archive's Python on the executors and
        :meth:`resolved_python` on the driver (PySpark's packaging guide, client mode).

        Returns
        -------
        dict
            Keyword arguments of ``SparkSubmitOperator``.
        """
        python = self.resolved_python()
        if not self.executor_env:
            return {"env_vars": {"PYSPARK_PYTHON": python}}
        return {
            "archives": f"{self.executor_env}#env",
            "env_vars": {"PYSPARK_PYTHON": "./env/bin/python", "PYSPARK_DRIVER_PYTHON": python},
        }


@dataclass(frozen=True)
class Alerts:
    """Who hears of a failed run: :class:`audit.airflow.notifier.AuditAlertNotifier`'s targets.

    With neither ``email`` nor ``slack_conn_id`` the DAG sends no alert.

    Parameters
    ----------
    email : sequence of str
        Addresses that get the alert email, sent through Airflow's SMTP support (apache-airflow-providers-smtp).
    from_email : str, optional
        Sender of the email; by default the SMTP connection's ``from_email``.
    smtp_conn_id : str
        Airflow SMTP connection the email goes through.
    slack_conn_id : str, optional
        Slack API connection to post the alert with (needs apache-airflow-providers-slack).
    slack_channel : str, optional
        Slack channel; by default ``#general``.
    """

    email: Sequence[str] = ()
    from_email: str | None = None
    smtp_conn_id: str = "smtp_default"
    slack_conn_id: str | None = None
    slack_channel: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.email, str):
            raise ValueError("email takes a sequence of addresses, not one string")
        object.__setattr__(self, "email", tuple(self.email))

    @property
    def enabled(self) -> bool:
        """Tell whether an alert has a target (an address or a Slack connection)."""
        return bool(self.email or self.slack_conn_id)
