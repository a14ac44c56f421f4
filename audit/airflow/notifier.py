"""The alert of a failed audit run: :class:`AuditAlertNotifier`, the tasks' ``on_failure_callback``.

What it sends is :func:`audit.report.evaluation.build_alert`'s message; who gets it is an
:class:`audit.airflow.settings.Alerts`.
"""

from __future__ import annotations

import logging
from typing import Sequence

from airflow.sdk import BaseNotifier

from ..report.evaluation import DAG_ID, build_alert
from .settings import DEFAULT_FAIL_ON, Alerts

__all__ = ["AuditAlertNotifier", "alert_callbacks"]

log = logging.getLogger(__name__)


class AuditAlertNotifier(BaseNotifier):
    """Send :func:`audit.report.evaluation.build_alert`'s message for a failed task (an Airflow notifier).

    By email through Airflow's SMTP support (``SmtpNotifier`` of apache-airflow-providers-smtp, connection
    ``smtp_conn_id``) when ``email_to`` is set, and to Slack (``SlackNotifier`` of
    apache-airflow-providers-slack, connection ``slack_conn_id``) when that provider is installed and
    ``slack_conn_id`` is set.  The run's ``output`` and ``fail_on`` come from its params.

    Parameters
    ----------
    email_to : sequence of str
        Addresses of the email.
    from_email : str, optional
        Sender of the email; by default the SMTP connection's.
    smtp_conn_id : str
        Airflow SMTP connection.
    slack_conn_id : str, optional
        Slack API connection.
    slack_channel : str, optional
        Slack channel; by default ``#general``.
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

    @classmethod
    def from_alerts(cls, alerts: Alerts) -> AuditAlertNotifier:
        """Build the notifier of an :class:`audit.airflow.settings.Alerts`."""
        return cls(
            email_to=alerts.email,
            from_email=alerts.from_email,
            smtp_conn_id=alerts.smtp_conn_id,
            slack_conn_id=alerts.slack_conn_id,
            slack_channel=alerts.slack_channel,
        )

    def notify(self, context):
        params = context.get("params") or {}
        ti = context.get("ti") or context.get("task_instance")
        dag = context.get("dag")
        exc = context.get("exception")
        alert = build_alert(
            params.get("output"),
            params.get("fail_on", DEFAULT_FAIL_ON),
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
                files=alert.get("files") or None,
                smtp_conn_id=self.smtp_conn_id,
            ).notify(context)
            sent.append(f"email to {', '.join(self.email_to)}")
        if self.slack_conn_id:
            try:
                from airflow.providers.slack.notifications.slack import SlackNotifier
            except ImportError:
                log.warning(
                    "slack_conn_id %r is set but apache-airflow-providers-slack is not installed", self.slack_conn_id
                )
            else:
                SlackNotifier(
                    slack_conn_id=self.slack_conn_id,
                    text=alert["text"][:3000],
                    channel=self.slack_channel or "#general",
                ).notify(context)
                sent.append(f"Slack {self.slack_channel or '#general'}")
        log.info("kafka-offset-audit alert %r sent: %s", alert["subject"], "; ".join(sent) or "no target configured")


def alert_callbacks(alerts: Alerts) -> list[AuditAlertNotifier]:
    """Return the tasks' ``on_failure_callback`` list: one notifier, or none when ``alerts`` has no target."""
    return [AuditAlertNotifier.from_alerts(alerts)] if alerts.enabled else []
