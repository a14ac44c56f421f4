"""Run one audit: sources -> commits -> judge -> outputs, as named stages.  No rules of its own.

:func:`run` checks the arguments (:func:`preflight`: no Spark job), then runs these stages in order; a failure
before the judged tables are written names its stage (:class:`AuditInternalError`, exit status 3), one after them
is recorded in ``summary.json``'s ``failed_stages`` and the tables are kept:

* read: the source (:mod:`audit.sources`), log dirs or a live cluster into tables;
* decode: the live commits in scope (:class:`Decoded`), checkpointed once;
* partition state: the source's epochs, bounds, replicas and timelines;
* judge: the rules (:mod:`audit.judge`); ``findings/``, ``committed_offsets/`` and ``groups/`` written once each
  (:class:`Judged`), the other tables meanwhile;
* write: ``summary.json``'s aggregates in one Spark job;
* reports: report.html, the expectation suite, the metrics' and the console's rows;
* commit: ``summary.json``, ``metrics.prom``, the output's commit; then the Pushgateway push and the catalog tables.

Modules:

* :mod:`.config`: the arguments (:class:`AuditConfig`), the outcome (:class:`RunResult`), the errors, the progress
  lines and the stages that failed after the tables;
* :mod:`.judging`: stages decode and judge, and the scope (:func:`in_scope`);
* :mod:`.summary`: ``summary.json``'s content;
* :mod:`.reports`: the stages after the tables (reports, metrics, console);
* :mod:`.stages`: the checks (:func:`preflight`), the stages in order (:func:`run`), the commit and what follows it.
"""

from __future__ import annotations

from .config import EXIT_INTERNAL, MAX_TRACEBACK, AuditConfig, AuditInternalError, RunResult, usage_errors
from .judging import RECORD_COLUMNS, Decoded, Judged, in_scope
from .reports import CONSOLE_FAILED
from .stages import preflight, run
from .summary import MAX_COUNTED_VERSION, MAX_WHERE, OTHER_KIND

__all__ = [
    "in_scope",
    "CONSOLE_FAILED",
    "EXIT_INTERNAL",
    "MAX_COUNTED_VERSION",
    "MAX_TRACEBACK",
    "MAX_WHERE",
    "OTHER_KIND",
    "RECORD_COLUMNS",
    "AuditConfig",
    "AuditInternalError",
    "Decoded",
    "Judged",
    "RunResult",
    "preflight",
    "run",
    "usage_errors",
]
