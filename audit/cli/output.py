"""What a CLI run prints and pushes when it ends: the result, the JSON document, internal errors.

:func:`print_result` prints a finished run (the console tables, or with ``--format json`` the document of
:func:`result_json`); :func:`internal_error` reports an internal error in one line (:func:`one_line`);
:func:`missing_server_module` recognises a Spark Connect server whose Python lacks the audit's dependencies (a
usage error, with its fix); :func:`push_failure` records a failed run on the ``--pushgateway``.  The ``EXIT_*`` constants are the CLI's exit
statuses.
"""

from __future__ import annotations

import json
import re
import sys


__all__ = [
    "EXIT_FINDINGS",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "internal_error",
    "missing_server_module",
    "one_line",
    "print_result",
    "push_failure",
    "result_json",
]

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


_NO_MODULE = re.compile(r"No module named '([\w.]+)'")


def missing_server_module(exc: BaseException) -> str | None:
    """Name the module a Spark Connect server's Python worker could not import, when that is what ``exc`` says.

    The server reports a worker's ``ModuleNotFoundError`` as one of its own errors (``PythonException``, a gRPC
    error) whose text names the module.  A ``ModuleNotFoundError`` raised in this process is not that: the client
    itself lacks the module.

    Returns
    -------
    str or None
        The top-level module (``pyarrow``), or None.
    """
    from ..pipeline import AuditInternalError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, AuditInternalError):
            current = current.cause
            continue
        if not isinstance(current, ModuleNotFoundError):
            found = _NO_MODULE.search(str(current))
            if found:
                return found.group(1).split(".")[0]
        current = current.__cause__ or current.__context__
    return None


def internal_error(cfg, exc: Exception, started: float, verbose: bool) -> int:
    """Report an internal error, push the failure, and return :data:`EXIT_INTERNAL`.

    The report is its stage, one line; the traceback with ``--verbose``.
    """
    from ..pipeline import AuditInternalError

    stage = exc.stage if isinstance(exc, AuditInternalError) else "spark"
    cause = exc.cause if isinstance(exc, AuditInternalError) else exc
    if verbose:
        import traceback

        traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)
    print(
        f"kafka-offset-audit: internal error in stage {stage!r}: {one_line(cause)}; nothing was written "
        f"(the previous output in {cfg.output}, if any, is untouched)"
        + ("" if verbose else "; --verbose shows the traceback"),
        file=sys.stderr,
    )
    push_failure(cfg, started, EXIT_INTERNAL, stage)
    return EXIT_INTERNAL


def print_result(cfg, result, class_data) -> None:
    """Print the failed stages of a run that wrote its tables (stderr), then the result.

    With ``--format json`` one JSON document (:func:`result_json`) on stdout; else, unless ``--quiet``, the
    console table and the findings by severity; and a first run's class-data archive note (stderr with JSON).
    """
    if result.exit_code == EXIT_INTERNAL:
        stages = ", ".join(f"{f['stage']} ({f['error']})" for f in result.summary.get("failed_stages") or [])
        print(
            f"kafka-offset-audit: internal error in stage(s) {one_line(stages)}; the judged tables and "
            f"summary.json are in {cfg.output} (its failed_stages has each traceback)",
            file=sys.stderr,
        )
    as_json = cfg.format == "json"
    if as_json:
        print(json.dumps(result_json(cfg, result), default=str))
    elif not cfg.quiet:
        print()
        print(result.console)
        s = result.summary
        print()
        print(
            f"findings: {json.dumps(s['findings']['by_severity'])}; records skipped: "
            f"{sum(s['records_skipped']['by_reason'].values())}; output: {cfg.output}; exit status {result.exit_code}"
        )
    if class_data is not None and class_data.dump_path is not None and not cfg.quiet:
        print(
            f"(first run here: the Spark JVM now writes a class-data archive for faster starts, {class_data.directory};"
            " KOA_CDS=off turns it off)",
            file=sys.stderr if as_json else sys.stdout,
        )


def result_json(cfg, result) -> dict:
    """Build ``--format json``'s document.

    It holds ``output``, ``exit_status``, ``findings`` (``summary.json``'s: total, by name, by severity, by both),
    ``records_skipped`` (a count), ``failed_stages`` (stage and error), ``reset_plan`` (``summary.json``'s: the
    groups and group-partitions planned in ``reset_plan/``), and the console's rows, worst first:
    ``groups`` (the ``groups`` table's columns the console shows), ``top_findings`` and ``committed_offsets``,
    each at most ``--max-rows`` with a ``*_truncated`` flag when there are more.  Values are JSON's (timestamps as
    ISO 8601 strings, structs as objects).
    """
    s = result.summary
    doc: dict = {
        "output": cfg.output,
        "exit_status": result.exit_code,
        "findings": s.get("findings"),
        "records_skipped": sum((s.get("records_skipped") or {}).get("by_reason", {}).values()),
        "failed_stages": [{"stage": f.get("stage"), "error": f.get("error")} for f in s.get("failed_stages") or []],
        "reset_plan": s.get("reset_plan"),
    }
    for key, name in (("groups", "groups"), ("findings", "top_findings"), ("committed", "committed_offsets")):
        rows = result.console_rows.get(key)
        if rows is None:
            continue
        doc[name] = [_json_row(r) for r in rows[: cfg.max_rows]]
        doc[f"{name}_truncated"] = len(rows) > cfg.max_rows
    return doc


def _json_row(value):
    """Convert a collected value to JSON's.

    A Spark ``Row`` or dict becomes an object, a list an array, a timestamp ISO 8601; other values stay as they
    are.
    """
    import datetime

    if hasattr(value, "asDict"):
        value = value.asDict()
    if isinstance(value, dict):
        return {k: _json_row(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_row(v) for v in value]
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return value


def one_line(value, limit: int = 500) -> str:
    """Put an error's text on one line, at most ``limit`` characters (a JVM's message can be pages long).

    A message holding a Python worker's traceback (PySpark's ``PythonException``) keeps its first line and the
    worker's own error, its last ``...Error: ...`` line (``ModuleNotFoundError: No module named 'numpy'``).
    """
    raw = str(value).strip()
    lines = [line.strip() for line in raw.splitlines() if line.strip()]
    if len(lines) > 2:
        errors = [line for line in lines[1:] if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b.*:", line)]
        if errors:
            raw = f"{lines[0]} ... {errors[-1]}"
    text = " ".join(raw.split())
    if isinstance(value, BaseException):
        text = f"{type(value).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def push_failure(cfg, started: float, exit_status: int | None, stage: str | None = None) -> None:
    """Record a failed run on the ``--pushgateway``, keeping the last good run's metrics.

    The failure is ``run_success 0``, and ``failed_stage{stage}`` for an internal error.
    """
    if not cfg.pushgateway:
        return
    import time

    from ..report.metrics import MetricsError, failure_registry, parse_grouping, push

    try:
        push(
            cfg.pushgateway,
            failure_registry(time.time() - started, exit_status, stage),
            job=cfg.pushgateway_job,
            grouping=parse_grouping(cfg.pushgateway_labels),
            replace=False,
            timeout=10,
        )
    except MetricsError as exc:
        print(f"kafka-offset-audit: could not record the failure: {exc}", file=sys.stderr)
