"""Console script ``kafka-offset-audit``: ``audit`` and ``demo`` with an embedded local Spark.

Running a subcommand is here: :func:`main` parses the arguments and runs one, :func:`run_audit` runs an audit
(arguments validated, Spark started, the pipeline run, the result printed; its exit status), :func:`entry` is the
console script (``kafka-offset-audit = audit.cli:entry``, and ``python -m audit.cli``), ending the process with
:func:`exit_now`.  The parser is :mod:`audit.cli.arguments`, the Spark session :mod:`audit.cli.session`, what a
run prints :mod:`audit.cli.output`; their public names are importable from here too.
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from typing import NoReturn

from pydantic import ValidationError

from .arguments import add_audit_arguments, add_connect_arguments, build_parser, duration_seconds
from .config_file import ConfigFileError, with_config_file
from .output import (
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    internal_error,
    missing_server_module,
    print_result,
    push_failure,
    result_json,
)
from .plan import run_plan
from .views import run_views
from .session import PREWARM_SWITCH_INTERVAL, connect_target, hadoop_aws_package, spark_conf, start_session


__all__ = [
    "result_json",
    "EXIT_FINDINGS",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "PREWARM_SWITCH_INTERVAL",
    "add_audit_arguments",
    "add_connect_arguments",
    "build_parser",
    "connect_target",
    "demo_log_dirs",
    "duration_seconds",
    "entry",
    "exit_now",
    "hadoop_aws_package",
    "main",
    "missing_server_module",
    "run_audit",
    "spark_app",
    "spark_conf",
]


def spark_app() -> str:
    """Path of the spark-submit application inside the installed package (:mod:`audit.submit`)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "submit.py")


def demo_log_dirs() -> str:
    """Path of the bundled copy of the unclean-election scenario's log dirs."""
    return str(resources.files("audit.demo_data").joinpath("unclean-election-3brokers/brokers"))


def run_audit(args, master: str | None, on_session=None) -> int:
    """Validate arguments, start Spark, run the pipeline, print the table; returns the exit status.

    ``on_session(spark)``: called once the session is built, before the audit (spark-submit ships the package
    there); its errors are internal errors (exit status 3) like Spark's own.
    """
    import time

    from ..pipeline import preflight, run
    from ..pipeline import usage_errors as usage_error_types
    from ..report.metrics import MetricsError
    from ..spark import ConnectError, release_remote_session

    try:
        cfg = _config_from_args(args)
    except ValidationError as exc:
        print(f"kafka-offset-audit: error: {exc.errors()[0]['msg'].removeprefix('Value error, ')}", file=sys.stderr)
        return EXIT_USAGE
    usage_errors = usage_error_types() + (ConnectError,)  # messages name what to fix, redacted
    started = time.time()
    try:
        remote = connect_target(args)
        extra_conf = spark_conf(getattr(args, "conf", None) or [])
        preflight(cfg)  # before Spark starts: an unwritable --output, a bad --client-config, no broker
    except usage_errors as exc:
        print(f"kafka-offset-audit: error: {exc}", file=sys.stderr)
        if not isinstance(exc, MetricsError):  # e.g. no broker answers: Prometheus should hear of it
            push_failure(cfg, started, EXIT_USAGE)
        return EXIT_USAGE
    class_data = None
    spark = None
    try:
        try:
            spark, class_data = start_session(cfg, args, master, remote, extra_conf)
            if on_session is not None:
                on_session(spark)
            result = run(cfg, spark, checked=True)
        except usage_errors as exc:
            print(f"kafka-offset-audit: error: {exc}", file=sys.stderr)
            push_failure(cfg, started, EXIT_USAGE)
            return EXIT_USAGE
        except Exception as exc:  # noqa: BLE001 - an internal error: one line (the traceback with --verbose), exit 3
            missing = missing_server_module(exc) if remote else None
            if missing is None:
                return internal_error(cfg, exc, started, getattr(args, "verbose", False))
            fix = (
                "rebuild the --python-env archive with `kafka-offset-audit package` from this installation"
                if getattr(args, "python_env", None)
                else "pass --python-env FILE, an archive built by `kafka-offset-audit package`, or install this "
                "package's dependencies on the server's workers"
            )
            print(
                f"kafka-offset-audit: error: the Spark Connect server's Python cannot import {missing!r}: {fix}; "
                f"nothing was written (the previous output in {cfg.output}, if any, is untouched)",
                file=sys.stderr,
            )
            push_failure(cfg, started, EXIT_USAGE)
            return EXIT_USAGE
        except BaseException:
            push_failure(cfg, started, None)
            raise
        print_result(cfg, result, class_data)
        return result.exit_code
    finally:
        if remote and spark is not None:
            release_remote_session(spark)  # else the server keeps it, with its data, for an hour


def _config_from_args(args):
    """Build the :class:`audit.pipeline.AuditConfig` of parsed arguments (a subcommand may lack some: defaults then).

    Raises
    ------
    pydantic.ValidationError
        Naming the first bad value.
    """
    from ..pipeline import AuditConfig

    return AuditConfig(
        log_dirs=args.log_dirs,
        bootstrap_servers=getattr(args, "bootstrap_servers", None),
        client_config=getattr(args, "client_config", None),
        groups=getattr(args, "groups", None),
        topics=getattr(args, "topics", None),
        exclude_groups=getattr(args, "exclude_groups", None),
        exclude_topics=getattr(args, "exclude_topics", None),
        **({"max_rows": args.max_rows} if getattr(args, "max_rows", None) is not None else {}),
        format=getattr(args, "format", "table"),
        output=args.output,
        mode=args.mode,
        fail_on=args.fail_on,
        quiet=getattr(args, "quiet", False),
        reports=not getattr(args, "skip_reports", False),
        expectations_config=getattr(args, "expectations_config", None),
        table_prefix=getattr(args, "table_prefix", None),
        pushgateway=getattr(args, "pushgateway", None),
        pushgateway_job=getattr(args, "pushgateway_job", "kafka_offset_audit"),
        pushgateway_labels=getattr(args, "pushgateway_label", None) or [],
        metrics_max_group_partitions=getattr(args, "metrics_max_group_partitions", 50_000),
        **({"stale_after_seconds": args.stale_after} if getattr(args, "stale_after", None) is not None else {}),
        history=getattr(args, "history", None),
        run_id=getattr(args, "run_id", None),
        max_concurrency=getattr(args, "max_concurrency", None),
        source=getattr(args, "source", "kafka-python"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["audit"]:
        try:
            argv = with_config_file(argv, _audit_parser(), start=1)
        except ConfigFileError as exc:
            print(f"kafka-offset-audit: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    args = parser.parse_args(argv)
    if args.command == "spark-app":
        print(spark_app())
        return EXIT_OK
    if args.command == "package":
        from ..package import PackageError, build_executor_env

        try:
            path = build_executor_env(args.output)
        except PackageError as exc:
            print(f"kafka-offset-audit: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(path)
        return EXIT_OK
    if args.command == "views":
        return run_views(args)
    if args.command == "plan":
        return run_plan(args)
    if args.command == "demo":
        args.log_dirs = [demo_log_dirs()]
        args.quiet = False
    return run_audit(args, args.master)


def _audit_parser():
    """Build a parser of the ``audit`` subcommand's flags alone (what ``--config`` keys name)."""
    import argparse

    parser = argparse.ArgumentParser(add_help=False)
    add_audit_arguments(parser)
    return parser


def exit_now(code: int) -> NoReturn:
    """End the process with exit status ``code`` as the interpreter would, without its teardown.

    Runs the threading module's exit hooks and joins the threads that are not daemons (``threading._shutdown``, as
    the interpreter does), runs the ``atexit`` handlers (temporary files, logging) and flushes
    stdout and stderr, then ends the process (``os._exit``) instead of letting the interpreter tear down, module by
    module, everything an audit imported: Great Expectations, pandas, matplotlib and pyspark took about 0.4 s of
    a small audit's wall time after its outputs were written.  The Spark JVM ends as it does after a normal
    exit, when the connection to this process closes: it runs its shutdown hooks (SparkContext.stop, temporary
    directories, the class-data archive of a first run).  Without ``atexit._run_exitfuncs`` (not CPython):
    ``sys.exit(code)``.
    """
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        # what the interpreter does first on exit: the threading atexit hooks (they tell idle
        # ThreadPoolExecutor workers, e.g. the Spark Connect client's, to end), then join the non-daemon threads
        shutdown()
    else:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None:
        sys.exit(code)
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(code)


def entry() -> NoReturn:
    """Run the ``kafka-offset-audit`` console script and ``python -m audit.cli``.

    It runs :func:`main`, then :func:`exit_now` with its exit status.  An exception or ``SystemExit`` from
    :func:`main` (a usage error) leaves the normal way.
    """
    exit_now(main())
