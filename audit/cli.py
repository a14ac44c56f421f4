"""Console script ``kafka-offset-audit``: ``audit`` and ``demo`` with an embedded local Spark."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from importlib import resources
from typing import NoReturn

from pydantic import ValidationError

from . import __version__
from .tables import FAIL_ON_CHOICES


__all__ = [
    "result_json",
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
    "run_audit",
    "spark_app",
    "spark_conf",
]

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


def build_parser(prog: str = "kafka-offset-audit") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Audit Kafka consumer offsets against the log's leader-epoch history."
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("audit", help="audit committed offsets: broker log dirs, or a live cluster")
    add_audit_arguments(a)
    d = sub.add_parser("demo", help="audit the bundled 3-broker unclean-election scenario")
    d.add_argument("--output", default="kafka-offset-audit-demo", help="output directory (default: %(default)s)")
    d.add_argument("--master", default=None, help="Spark master (default: local[*])")
    add_connect_arguments(d)
    d.add_argument("--mode", choices=["latest", "history"], default="latest")
    d.add_argument(
        "--fail-on",
        choices=list(FAIL_ON_CHOICES),
        default="never",
        help="demo default: never (the scenario has findings on purpose)",
    )
    d.add_argument("--verbose", action="store_true")
    d.add_argument("--skip-reports", action="store_true")
    sub.add_parser(
        "spark-app",
        help="print the path of the spark-submit application of this install",
        description="Print the path of the installed spark-submit application (audit/submit.py), "
        'e.g. spark-submit "$(kafka-offset-audit spark-app)" --log-dirs ... --output ...',
    )
    k = sub.add_parser(
        "package",
        help="pack the Python environment a Spark cluster's executors need",
        description="Build a virtual environment with the dependencies the executors need (pinned to "
        "the versions installed here) and pack it with venv-pack, for spark-submit "
        "--archives FILE#env with PYSPARK_PYTHON=./env/bin/python.",
    )
    k.add_argument("--output", default="kafka-offset-audit-env.tar.gz", help="archive to write (default: %(default)s)")
    return p


def spark_app() -> str:
    """Path of the spark-submit application inside the installed package (:mod:`audit.submit`)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "submit.py")


def add_audit_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument(
        "--log-dirs",
        nargs="+",
        default=[],
        metavar="DIR",
        help="broker log dirs (local paths or Hadoop URIs), or folders holding several",
    )
    a.add_argument(
        "--bootstrap-servers",
        "--bootstrap-server",
        dest="bootstrap_servers",
        metavar="HOST:PORT[,...]",
        default=None,
        help="audit a running cluster instead (read-only; --bootstrap-server, Kafka tools' spelling, too)",
    )
    a.add_argument(
        "--client-config",
        "--command-config",
        dest="client_config",
        metavar="FILE",
        default=None,
        help="Kafka client properties for --bootstrap-servers (security.protocol, sasl.*, ssl.*; "
        "--command-config, Kafka tools' name, too)",
    )
    _add_scope_arguments(a)
    a.add_argument("--output", required=True, metavar="DIR", help="output directory (replaced atomically)")
    a.add_argument(
        "--mode",
        choices=["latest", "history"],
        default="latest",
        help="latest: each group-partition's latest live commit (default); history: every live commit",
    )
    a.add_argument(
        "--fail-on",
        choices=list(FAIL_ON_CHOICES),
        default="error",
        help="exit 1 when a finding of this severity or worse exists (default: error)",
    )
    a.add_argument("--master", default=None, help="Spark master (default: local[*], or what spark-submit set)")
    add_connect_arguments(a)
    a.add_argument("--verbose", action="store_true", help="Spark's own logging at WARN/INFO")
    _add_console_arguments(a)
    _add_report_arguments(a)
    _add_live_arguments(a)
    _add_history_and_metrics_arguments(a)


def _add_scope_arguments(a: argparse.ArgumentParser) -> None:
    """Add ``--groups``, ``--topics``, ``--exclude-groups``, ``--exclude-topics``: whole-name Java regexes."""
    a.add_argument(
        "--groups",
        metavar="REGEX",
        default=None,
        help="only groups whose whole id matches this Java regular expression (e.g. 'billing-.*')",
    )
    a.add_argument(
        "--topics",
        metavar="REGEX",
        default=None,
        help="only topics whose whole name matches this Java regular expression (e.g. 'payments|orders\\..*')",
    )
    a.add_argument(
        "--exclude-groups",
        metavar="REGEX",
        default=None,
        help="leave out groups whose whole id matches this Java regular expression (after --groups)",
    )
    a.add_argument(
        "--exclude-topics",
        metavar="REGEX",
        default=None,
        help="leave out topics whose whole name matches this Java regular expression (after --topics)",
    )


def _add_console_arguments(a: argparse.ArgumentParser) -> None:
    """``--quiet``, ``--format``, ``--max-rows``: what the run prints."""
    a.add_argument("--quiet", action="store_true", help="no progress lines or console table")
    a.add_argument(
        "--format",
        choices=["table", "json"],
        default="table",
        help="table: the console's tables (default); json: one JSON document on stdout for scripts (findings by "
        "severity and name, the worst groups and findings, the exit status), progress lines on stderr",
    )
    a.add_argument(
        "--max-rows",
        metavar="N",
        type=int,
        default=None,
        help="rows of each of the console's tables (findings, groups, committed offsets; default: 50)",
    )


def _add_report_arguments(a: argparse.ArgumentParser) -> None:
    """``--skip-reports``, ``--table-prefix``, ``--expectations-config``."""
    a.add_argument(
        "--skip-reports", action="store_true", help="do not run the Great Expectations checkpoint or write report.html"
    )
    a.add_argument(
        "--table-prefix",
        metavar="PREFIX",
        default=None,
        help="also register the outputs as tables PREFIXfindings, ... in the Spark catalog",
    )
    a.add_argument(
        "--expectations-config",
        metavar="FILE",
        default=None,
        help="JSON/YAML thresholds for the expectation suite (see audit/report/expectations_config.py)",
    )


def _add_live_arguments(a: argparse.ArgumentParser) -> None:
    """Add a live cluster's reading options: ``--source``, ``--max-concurrency``."""
    a.add_argument(
        "--source",
        choices=["kafka-python", "kafka-connector"],
        default="kafka-python",
        help="live mode: read __consumer_offsets with kafka-python (default) or Spark's own Kafka connector "
        "(spark-sql-kafka-0-10; the CLI adds it to spark.jars.packages, spark-submit needs --packages)",
    )
    a.add_argument(
        "--max-concurrency",
        metavar="N",
        type=int,
        default=None,
        help="live mode: OffsetsForLeaderEpoch/ListOffsets requests in flight at once (default 4)",
    )


def _add_history_and_metrics_arguments(a: argparse.ArgumentParser) -> None:
    """``--history``, ``--run-id``, the Pushgateway's, ``--stale-after``, ``--metrics-max-group-partitions``."""
    a.add_argument(
        "--history",
        metavar="DIR",
        default=None,
        help="append this run's findings and summary to a history table (Parquet, by run date and run id); "
        "report.html then shows what is new, persisted and resolved since the previous run",
    )
    a.add_argument(
        "--run-id",
        metavar="ID",
        default=None,
        help="this run's id in --history (default: its start time); a rerun with the same id replaces it",
    )
    a.add_argument(
        "--pushgateway",
        metavar="URL",
        default=None,
        help="also push the run's metrics (as in OUTPUT/metrics.prom) to this Prometheus Pushgateway",
    )
    a.add_argument(
        "--pushgateway-job",
        metavar="NAME",
        default="kafka_offset_audit",
        help="the job label of the pushed metrics (default: %(default)s)",
    )
    a.add_argument(
        "--pushgateway-label",
        metavar="LABEL=VALUE",
        action="extend",
        nargs="+",
        default=[],
        help="grouping labels of the pushed metrics, e.g. cluster=prod (one or more; repeatable)",
    )
    a.add_argument(
        "--stale-after",
        metavar="DURATION",
        type=duration_seconds,
        default="24h",
        help="a group whose latest commit is older than this at the audit while its partitions grew "
        "is STALE in groups/ (e.g. 30m, 6h, 2d, or seconds; default: %(default)s)",
    )
    a.add_argument(
        "--metrics-max-group-partitions",
        metavar="N",
        type=int,
        default=50_000,
        help="per-group-partition metrics for at most N group-partitions, worst verdict first "
        "(default: %(default)s; 0: run-level metrics only)",
    )


def duration_seconds(text: str) -> int:
    """Parse ``--stale-after``'s value into seconds.

    The value is a whole number with an optional unit ``s``, ``m``, ``h`` or ``d`` (``90``, ``30m``, ``24h``,
    ``2d``).

    Raises
    ------
    argparse.ArgumentTypeError
        Naming the accepted forms.
    """
    m = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text or "")
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of seconds, or with a unit: 30m, 6h, 2d")
    return int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def add_connect_arguments(a: argparse.ArgumentParser) -> None:
    a.add_argument(
        "--conf",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a Spark setting for this run, e.g. spark.hadoop.fs.s3a.endpoint=http://minio:9000 "
        "(repeatable; over --remote only the session's runtime settings)",
    )
    a.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        default=None,
        help="run through this Spark Connect server instead of a local Spark (default: $SPARK_REMOTE, "
        "as pyspark takes it); no JVM starts here",
    )
    a.add_argument(
        "--python-env",
        metavar="ARCHIVE",
        default=None,
        help="with --remote: a packed environment (kafka-offset-audit package) for the server's Python "
        "workers, shipped as a Spark Connect artifact; without it their Python must have the "
        "audit's dependencies",
    )


def connect_target(args) -> str | None:
    """Return the Spark Connect URL to use: ``--remote``, else ``$SPARK_REMOTE`` (not under spark-submit).

    None for a classic session.

    Raises
    ------
    audit.spark.ConnectError
        Arguments that contradict each other.
    """
    from .spark import ConnectError

    remote = getattr(args, "remote", None)
    env = os.environ.get("SPARK_REMOTE") if "PYSPARK_GATEWAY_PORT" not in os.environ else None
    master = getattr(args, "master", None)
    if remote and master:
        raise ConnectError("--remote and --master exclude each other: a Spark Connect server has its own master")
    if master and env:
        raise ConnectError(
            f"--master {master} is given while SPARK_REMOTE={env} is set: unset SPARK_REMOTE for a "
            "classic session, or drop --master to use that Spark Connect server"
        )
    remote = remote or env or None
    if remote and not remote.startswith("sc://"):
        raise ConnectError(f"--remote {remote!r}: a Spark Connect URL starts with sc:// (sc://HOST:PORT)")
    python_env = getattr(args, "python_env", None)
    if python_env:
        if not remote:
            raise ConnectError(
                "--python-env is for a Spark Connect server (--remote); spark-submit ships an "
                "environment with --archives FILE#env"
            )
        if not os.path.isfile(python_env):
            raise ConnectError(f"--python-env {python_env!r} is not a file: build it with kafka-offset-audit package")
    return remote


def spark_conf(items: list[str]) -> dict[str, str]:
    """Parse the ``--conf KEY=VALUE`` items into a dict.

    Raises
    ------
    audit.spark.ConnectError
        (exit 2) An item without ``=`` or a key that is not a Spark setting.
    """
    from .spark import ConnectError

    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip().startswith("spark."):
            raise ConnectError(f"--conf {item!r}: give KEY=VALUE with a Spark setting as KEY (spark.…)")
        out[key.strip()] = value
    return out


def hadoop_aws_package() -> str:
    """``hadoop-aws`` coordinates in the version of pyspark's own Hadoop client (``hadoop-client-api-*.jar``)."""
    import glob

    from pyspark.find_spark_home import _find_spark_home

    jars = glob.glob(os.path.join(_find_spark_home(), "jars", "hadoop-client-api-*.jar"))
    found = re.search(r"hadoop-client-api-(.+)\.jar$", jars[0]) if jars else None
    version = found.group(1) if found else "3.5.0"
    return f"org.apache.hadoop:hadoop-aws:{version}"


def demo_log_dirs() -> str:
    """Path of the bundled copy of the unclean-election scenario's log dirs."""
    return str(resources.files("audit.demo_data").joinpath("unclean-election-3brokers/brokers"))


def run_audit(args, master: str | None, on_session=None) -> int:
    """Validate arguments, start Spark, run the pipeline, print the table; returns the exit status.

    ``on_session(spark)``: called once the session is built, before the audit (spark-submit ships the package
    there); its errors are internal errors (exit status 3) like Spark's own.
    """
    import time

    from .pipeline import preflight, run
    from .pipeline import usage_errors as usage_error_types
    from .report.metrics import MetricsError
    from .spark import ConnectError

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
            _push_failure(cfg, started, EXIT_USAGE)
        return EXIT_USAGE
    class_data = None
    try:
        spark, class_data = _start_session(cfg, args, master, remote, extra_conf)
        if on_session is not None:
            on_session(spark)
        result = run(cfg, spark, checked=True)
    except usage_errors as exc:
        print(f"kafka-offset-audit: error: {exc}", file=sys.stderr)
        _push_failure(cfg, started, EXIT_USAGE)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - an internal error: one line (the traceback with --verbose), exit 3
        return _internal_error(cfg, exc, started, getattr(args, "verbose", False))
    except BaseException:
        _push_failure(cfg, started, None)
        raise
    _print_result(cfg, result, class_data)
    return result.exit_code


def _config_from_args(args):
    """Build the :class:`audit.pipeline.AuditConfig` of parsed arguments (a subcommand may lack some: defaults then).

    Raises
    ------
    pydantic.ValidationError
        Naming the first bad value.
    """
    from .pipeline import AuditConfig

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


def _start_session(cfg, args, master: str | None, remote: str | None, extra_conf: dict):
    """Start the session and return ``(spark, class_data)``.

    A Spark Connect session on ``remote`` (prepared for the audit), else a session with a driver JVM here (with
    the JVM packages the input needs, and its class-data archive).
    """
    from .spark import ClassDataArchive, build_remote_session, build_session

    wanted: list[str] = []
    if cfg.source == "kafka-connector":
        from .sources.cluster import connector_package

        wanted.append(connector_package())
    if any(str(p).startswith(("s3a://", "s3n://")) for p in [*cfg.log_dirs, cfg.output, cfg.history or ""]):
        wanted.append(hadoop_aws_package())  # Hadoop's S3A filesystem, matched to pyspark's Hadoop client
    packages = wanted or None
    prewarm = _prewarm(cfg.reports)
    class_data = None
    try:
        if remote:
            spark = build_remote_session(remote, conf=extra_conf)
        else:
            class_data = ClassDataArchive.for_this_install(packages)
            spark = build_session(
                master,
                verbose=getattr(args, "verbose", False),
                quick_start=cfg.mode == "latest",
                packages=packages,
                class_data=class_data,
                conf=extra_conf,
            )
    finally:
        prewarm.join()
    if remote:
        from .connect import prepare

        prepare(spark, cfg, python_env=getattr(args, "python_env", None))
    return spark, class_data


def _internal_error(cfg, exc: Exception, started: float, verbose: bool) -> int:
    """Report an internal error, push the failure, and return :data:`EXIT_INTERNAL`.

    The report is its stage, one line; the traceback with ``--verbose``.
    """
    from .pipeline import AuditInternalError

    stage = exc.stage if isinstance(exc, AuditInternalError) else "spark"
    cause = exc.cause if isinstance(exc, AuditInternalError) else exc
    if verbose:
        import traceback

        traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)
    print(
        f"kafka-offset-audit: internal error in stage {stage!r}: {_one_line(cause)}; nothing was written "
        f"(the previous output in {cfg.output}, if any, is untouched)"
        + ("" if verbose else "; --verbose shows the traceback"),
        file=sys.stderr,
    )
    _push_failure(cfg, started, EXIT_INTERNAL, stage)
    return EXIT_INTERNAL


def _print_result(cfg, result, class_data) -> None:
    """Print the failed stages of a run that wrote its tables (stderr), then the result.

    With ``--format json`` one JSON document (:func:`result_json`) on stdout; else, unless ``--quiet``, the
    console table and the findings by severity; and a first run's class-data archive note (stderr with JSON).
    """
    if result.exit_code == EXIT_INTERNAL:
        stages = ", ".join(f"{f['stage']} ({f['error']})" for f in result.summary.get("failed_stages") or [])
        print(
            f"kafka-offset-audit: internal error in stage(s) {_one_line(stages)}; the judged tables and "
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
    ``records_skipped`` (a count), ``failed_stages`` (stage and error), and the console's rows, worst first:
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


#: the interpreter's thread switch interval (seconds) while :func:`_prewarm` imports: the main thread starts the
#: Spark JVM meanwhile through a few hundred py4j calls, each of which, with the default 5 ms, could wait that
#: long for the importing thread to let go of the GIL (shared scenario: the session took 3.3 s to build beside
#: the imports, 3.0 s with this, 2.0 s without imports)
PREWARM_SWITCH_INTERVAL = 0.0005


class _Prewarm:
    """The thread of :func:`_prewarm`; :meth:`join` waits for it and puts the switch interval back."""

    def __init__(self, thread, interval: float):
        self.thread, self.interval = thread, interval

    def join(self) -> None:
        self.thread.join()
        sys.setswitchinterval(self.interval)


def _prewarm(reports: bool) -> _Prewarm:
    """Import, in a thread while the Spark JVM starts, what the audit imports later on its main thread.

    This process only waits for the JVM meanwhile.  The imports are ``pyspark.testing.utils`` with pandas
    (pyspark's py4j converter for numpy arrays imports them at the first value passed to the JVM: about 0.4 s)
    and, with ``reports``, the report libraries (Great Expectations takes about 2 s, matplotlib).  The caller
    joins the thread before the audit begins, so no import runs alongside it; until then the switch interval is
    :data:`PREWARM_SWITCH_INTERVAL`.  An import error is left for the code that imports the module to raise
    and report.
    """
    import threading

    def work():
        try:
            import pyspark.testing.utils  # noqa: F401

            if reports:
                from .report.expectations import import_gx

                import_gx()
                import matplotlib.backends.backend_svg  # noqa: F401
                import matplotlib.figure  # noqa: F401
        except Exception:  # noqa: BLE001 - reported where the audit imports them
            pass

    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, PREWARM_SWITCH_INTERVAL))
    thread = threading.Thread(target=work, name="koa-prewarm-reports", daemon=True)
    thread.start()
    return _Prewarm(thread, interval)


def _one_line(value, limit: int = 500) -> str:
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


def _push_failure(cfg, started: float, exit_status: int | None, stage: str | None = None) -> None:
    """Record a failed run on the ``--pushgateway``, keeping the last good run's metrics.

    The failure is ``run_success 0``, and ``failed_stage{stage}`` for an internal error.
    """
    if not cfg.pushgateway:
        return
    import time

    from .report.metrics import MetricsError, failure_registry, parse_grouping, push

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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "spark-app":
        print(spark_app())
        return EXIT_OK
    if args.command == "package":
        from .package import PackageError, build_executor_env

        try:
            path = build_executor_env(args.output)
        except PackageError as exc:
            print(f"kafka-offset-audit: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(path)
        return EXIT_OK
    if args.command == "demo":
        args.log_dirs = [demo_log_dirs()]
        args.quiet = False
    return run_audit(args, args.master)


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


if __name__ == "__main__":
    entry()
