"""The audit's arguments, its outcome and errors, its progress lines, and the stages that failed after the tables.

:class:`AuditConfig` holds the arguments of one audit; :class:`RunResult` its outcome; :class:`AuditInternalError`
a failure before the judged tables were written (exit status :data:`EXIT_INTERNAL`), :func:`usage_errors` the
failures the user must fix (exit status 2), :class:`Failures` the stages that failed after the tables (the run goes
on, the tables are kept).  :func:`progress` prints a progress line; the other modules of :mod:`audit.pipeline` call
it through this module (``config.progress``), so that replacing it here (the benchmarks time the lines) replaces
every line.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ..groups import DEFAULT_STALE_AFTER_SECONDS
from ..report.console import CONSOLE_FINDINGS

__all__ = [
    "EXIT_INTERNAL",
    "MAX_TRACEBACK",
    "AuditConfig",
    "AuditInternalError",
    "Failures",
    "RunResult",
    "progress",
    "usage_errors",
]

#: exit status of a run whose stage failed (an internal error; :class:`AuditInternalError`); the CLI's others: 0 clean,
#: 1 findings or a failed suite, 2 usage, input or cluster (:func:`usage_errors`)
EXIT_INTERNAL = 3
#: characters of a failed stage's traceback kept in ``summary.json`` (its last ones)
MAX_TRACEBACK = 4000


class AuditConfig(BaseModel):
    """Arguments of ``kafka-offset-audit audit`` / ``jobs/audit_offsets.py``."""

    log_dirs: list[str] = Field(default_factory=list)
    bootstrap_servers: str | None = None
    client_config: str | None = None
    groups: str | None = None
    topics: str | None = None
    exclude_groups: str | None = None
    exclude_topics: str | None = None
    max_rows: int = CONSOLE_FINDINGS
    format: Literal["table", "json"] = "table"
    output: str
    mode: Literal["latest", "history"] = "latest"
    fail_on: Literal["critical", "error", "warning", "never"] = "error"
    quiet: bool = False
    reports: bool = True
    expectations_config: str | None = None
    table_prefix: str | None = None
    pushgateway: str | None = None
    pushgateway_job: str = "kafka_offset_audit"
    pushgateway_labels: list[str] = Field(default_factory=list)
    metrics_max_group_partitions: int = Field(default=50_000, ge=0)
    stale_after_seconds: int = Field(default=DEFAULT_STALE_AFTER_SECONDS, ge=0)
    history: str | None = None
    run_id: str | None = None
    max_concurrency: int | None = Field(default=None, ge=1, le=64)
    source: Literal["kafka-python", "kafka-connector"] = "kafka-python"

    @model_validator(mode="after")
    def _one_source(self):
        if bool(self.log_dirs) == bool(self.bootstrap_servers):
            raise ValueError(
                "give either --log-dirs DIR [DIR ...] or --bootstrap-servers HOST:PORT, not both or neither"
            )
        if self.source == "kafka-connector" and not self.bootstrap_servers:
            raise ValueError("--source kafka-connector reads a live cluster: give --bootstrap-servers")
        if self.max_rows < 1:
            raise ValueError(f"--max-rows {self.max_rows}: give a number of rows of at least 1")
        for name in ("groups", "topics", "exclude_groups", "exclude_topics"):
            pattern = getattr(self, name)
            if pattern:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    flag = name.replace("_", "-")
                    raise ValueError(f"--{flag} is not a valid regular expression: {exc}") from exc
        from ..report.metrics import MetricsError, parse_grouping

        try:
            parse_grouping(self.pushgateway_labels)
        except MetricsError as exc:
            raise ValueError(str(exc)) from None
        if self.run_id is not None and (not self.run_id.strip() or "/" in self.run_id or len(self.run_id) > 200):
            raise ValueError(f"--run-id {self.run_id!r}: give a non-empty id without '/' (at most 200 characters)")
        if self.history is not None:
            h, o = self.history.rstrip("/"), self.output.rstrip("/")
            if not h.strip() or h == o or h.startswith(o + "/") or o.startswith(h + "/"):
                raise ValueError(
                    f"--history {self.history!r} must be a directory apart from --output (the output "
                    "is replaced on every run; the history accumulates)"
                )
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", self.pushgateway_job):
            raise ValueError(f"--pushgateway-job {self.pushgateway_job!r}: use letters, digits and _")
        return self

    @field_validator("output")
    @classmethod
    def _output_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("--output must name a directory")
        return v


@dataclass
class RunResult:
    """One audit's outcome: its exit status, ``summary.json``'s content, the console text, and the console's rows.

    The console's rows are ``findings``, ``groups`` and ``committed``: dicts, at most ``--max-rows`` each and one
    more to tell that there are more; empty when the console stage failed.
    """

    exit_code: int
    summary: dict
    console: str
    console_rows: dict = field(default_factory=dict)


class AuditInternalError(RuntimeError):
    """The audit failed in ``stage`` through no fault of its input or arguments (exit status 3).

    ``stage``: where it failed (``read``, ``decode``, ``judge``, ``write`` ...); ``cause``: the exception;
    ``output``: what is left of the output (``None``: nothing was written, the previous output is untouched).
    """

    def __init__(self, stage: str, cause: BaseException, output: str | None = None):
        self.stage, self.cause, self.output = stage, cause, output
        super().__init__(f"internal error in stage {stage!r}: {type(cause).__name__}: {cause}")


def usage_errors() -> tuple[type[BaseException], ...]:
    """Return the errors whose message names what the user must fix (exit status 2): not internal errors.

    The CLI maps these to exit status 2.
    """
    from ..report.metrics import MetricsError
    from ..sources.client_config import ClientConfigError
    from ..sources.collector import CollectorError
    from ..io.fs import InputError

    return InputError, CollectorError, ClientConfigError, MetricsError


def _failure(stage: str, exc: BaseException) -> dict:
    """Describe a failed stage as ``summary.json`` records it: stage, error (type and message), traceback's tail."""
    import traceback

    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"stage": stage, "error": f"{type(exc).__name__}: {exc}", "traceback": tb[-MAX_TRACEBACK:]}


def progress(cfg: AuditConfig, msg: str) -> None:
    """Print a progress line: on stdout, or on stderr when stdout carries JSON (``--format json``).

    No line with ``--quiet``.
    """
    if not cfg.quiet:
        out = sys.stderr if cfg.format == "json" else sys.stdout
        print(f"[kafka-offset-audit {time.strftime('%H:%M:%S')}] {msg}", flush=True, file=out)


class Failures:
    """Stages after the judged tables that failed: the run goes on and exits 3, the tables are kept."""

    def __init__(self) -> None:
        self.failed: list[dict] = []

    def guard(self, name: str, fn, default=None):
        """``fn()``; an exception is recorded (summary.json's ``failed_stages``) and ``default`` returned."""
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - recorded, reported, exit status 3
            self.record(name, exc)
            return default

    def record(self, name: str, exc: BaseException) -> None:
        """Stage ``name`` failed with ``exc``: kept for ``failed_stages`` and said on stderr."""
        self.failed.append(_failure(name, exc))
        print(
            f"kafka-offset-audit: stage {name!r} failed: {type(exc).__name__}: {exc} "
            "(the judged tables are still written)",
            file=sys.stderr,
            flush=True,
        )

    def has(self, name: str) -> bool:
        return any(f["stage"] == name for f in self.failed)
