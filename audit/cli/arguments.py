"""The ``kafka-offset-audit`` argument parser: its subcommands, argument groups and value types.

:func:`build_parser` builds the console script's parser (``audit``, ``demo``, ``spark-app``, ``package``);
:func:`add_audit_arguments` adds ``audit``'s arguments to a parser (the spark-submit application,
:mod:`audit.submit`, parses the same), grouped by concern: the input and its scope, the console, the reports,
a live cluster's reading, history and metrics; :func:`add_connect_arguments` the Spark settings and Spark
Connect's.  :func:`duration_seconds` parses ``--stale-after``.
"""

from __future__ import annotations

import argparse
import re

from .. import __version__
from ..tables import FAIL_ON_CHOICES
from .plan import add_plan_arguments
from .views import add_views_arguments


__all__ = [
    "add_audit_arguments",
    "add_connect_arguments",
    "build_parser",
    "duration_seconds",
]


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
    v = sub.add_parser(
        "views",
        help="the analysts' SQL views over an audit output: print them for spark-sql, or run a query",
        description="Print sql/views/analyst_views.sql bound to an audit output's committed run (for spark-sql "
        "-f), or, with --query, create the views and print the query's rows.",
    )
    add_views_arguments(v)
    r = sub.add_parser(
        "plan",
        help="a finished audit's reset plan (kafka-consumer-groups/kafka-share-groups --from-file files), made again "
        "without Spark",
        description="Write the reset plan of a finished audit's output into --to: per group, the CSV file "
        "kafka-consumer-groups (kafka-share-groups for a share group) --reset-offsets --from-file takes, the "
        "commands and what they do. Never applies it.",
    )
    add_plan_arguments(r)
    k = sub.add_parser(
        "package",
        help="pack the Python environment a Spark cluster's executors need",
        description="Build a virtual environment with the dependencies the executors need (pinned to "
        "the versions installed here) and pack it with venv-pack, for spark-submit "
        "--archives FILE#env with PYSPARK_PYTHON=./env/bin/python.",
    )
    k.add_argument("--output", default="kafka-offset-audit-env.tar.gz", help="archive to write (default: %(default)s)")
    return p


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
        "--config",
        metavar="FILE",
        default=None,
        help="a TOML file whose keys are these flags without '--' (fail-on = \"critical\"); the command line wins",
    )
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
