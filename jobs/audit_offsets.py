"""spark-submit entry point: ``spark-submit jobs/audit_offsets.py --log-dirs ... --output ...``.

Same arguments as ``kafka-offset-audit audit``.  Parses arguments, starts Spark, ships the
``audit`` package to executors when it is not installed there, and calls ``audit.pipeline.run``.
"""
from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from audit.cli import add_audit_arguments, run_audit  # noqa: E402


def _ship_package(spark) -> None:
    """Add a zip of the ``audit`` package to the executors' Python path (a no-op cost locally)."""
    import audit
    pkg_dir = os.path.dirname(audit.__file__)
    tmp = tempfile.mkdtemp(prefix="koa-pyfiles-")
    # the driver serves the zip to executors until the application ends: remove it at exit
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    base = os.path.join(tmp, "audit_pkg")
    stage = os.path.join(tmp, "stage")
    shutil.copytree(pkg_dir, os.path.join(stage, "audit"), ignore=shutil.ignore_patterns("demo_data", "__pycache__"))
    sql_src = os.path.join(os.path.dirname(pkg_dir), "sql")
    if os.path.isdir(sql_src) and not os.path.isdir(os.path.join(stage, "audit", "sql")):
        shutil.copytree(sql_src, os.path.join(stage, "audit", "sql"))
    archive = shutil.make_archive(base, "zip", stage)
    shutil.rmtree(stage)
    spark.sparkContext.addPyFile(archive)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="audit_offsets.py")
    add_audit_arguments(parser)
    args = parser.parse_args(argv)
    from audit.spark import build_session
    spark = build_session(args.master, verbose=args.verbose)
    _ship_package(spark)
    return run_audit(args, args.master)


if __name__ == "__main__":
    sys.exit(main())
