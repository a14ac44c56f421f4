"""``kafka-offset-audit views``: the analysts' SQL views over an audit output, printed for ``spark-sql`` or queried.

Without ``--query`` it prints ``views/analyst_views.sql`` bound to the output's committed run (on an object store,
the run its ``summary.json`` names), ready for ``spark-sql -f``; with ``--query SQL`` it creates the views in a
Spark session of its own and prints at most ``--max-rows`` rows of the query, as a table or as JSON lines.
"""

from __future__ import annotations

import json
import sys

from .output import EXIT_OK, EXIT_USAGE, one_line

__all__ = ["add_views_arguments", "run_views"]


def add_views_arguments(v) -> None:
    """Add the ``views`` subcommand's flags to the argparse parser ``v``."""
    v.add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="an audit's --output (local, HDFS or an object store, where summary.json names the committed run)",
    )
    v.add_argument(
        "--query",
        metavar="SQL",
        default=None,
        help="run this query over the views (koa_latest_commits, koa_findings_by_group, ...) and print its rows; "
        "without it, print the views' SQL for spark-sql",
    )
    v.add_argument("--max-rows", type=int, default=50, metavar="N", help="rows of --query printed (default: 50)")
    v.add_argument(
        "--format", choices=["table", "json"], default="table", help="--query's rows as a table or JSON lines"
    )
    v.add_argument("--master", default=None, help="Spark master (default: local[*])")
    v.add_argument(
        "--conf",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a Spark setting, e.g. spark.hadoop.fs.s3a.endpoint=http://minio:9000 (repeatable)",
    )


def run_views(args) -> int:
    """Run ``kafka-offset-audit views``; return the exit status (2 for a bad output, query or setting)."""
    from ..report.views import analyst_views_sql, register_views
    from ..spark import ConnectError, build_session
    from .session import hadoop_aws_package, spark_conf

    if args.max_rows < 1:
        print("kafka-offset-audit: error: --max-rows must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        conf = spark_conf(args.conf)
    except ConnectError as exc:
        print(f"kafka-offset-audit: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    packages = [hadoop_aws_package()] if args.output.startswith(("s3a://", "s3n://")) else None
    spark = build_session(args.master, packages=packages, conf=conf)
    try:
        tables_dir = register_views(spark, args.output)
    except FileNotFoundError as exc:
        print(f"kafka-offset-audit: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.query is None:
        print(analyst_views_sql(tables_dir))
        return EXIT_OK
    import logging

    from pyspark.errors import AnalysisException, ParseException

    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)  # the error is told once, below
    try:
        rows = spark.sql(args.query).limit(args.max_rows + 1).collect()
    except (AnalysisException, ParseException) as exc:
        print(f"kafka-offset-audit: error: --query: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    _print_rows([r.asDict(recursive=True) for r in rows], args.max_rows, args.format)
    return EXIT_OK


def _print_rows(rows: list[dict], max_rows: int, fmt: str) -> None:
    """Print ``rows`` (at most ``max_rows``; a note when there were more) as a table or JSON lines."""
    shown, more = rows[:max_rows], len(rows) > max_rows
    if fmt == "json":
        for r in shown:
            print(json.dumps(r, default=str))
        return
    import pandas as pd

    print(pd.DataFrame(shown).to_string(index=False) if shown else "(no rows)")
    if more:
        print(f"(more than {max_rows} rows: --max-rows shows more)")
