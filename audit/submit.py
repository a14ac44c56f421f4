"""The ``spark-submit`` application: ``spark-submit "$(kafka-offset-audit spark-app)" --log-dirs ... --output ...``.

Same arguments as ``kafka-offset-audit audit``.  Parses them, starts Spark (the master and settings are
spark-submit's), ships the ``audit`` package to the executors (:func:`ship_package`: a zip added with
``addPyFile``; its dependencies must be on the executors' Python, e.g. a packed environment) and runs
:func:`audit.cli.run_audit`.  Its exit status is the CLI's: 0 clean, 1 findings at ``--fail-on`` or a failed
expectation suite, 2 bad usage or input, 3 an internal error.

This file is inside the installed package, so a wheel install has it (``kafka-offset-audit spark-app`` prints
its path); ``jobs/audit_offsets.py`` of a checkout runs the same :func:`main` with the checkout's package.
Run as a script, it imports only absolute ``audit.*`` names.
"""

from __future__ import annotations

import argparse
import os
import sys


__all__ = [
    "main",
    "ship_package",
]


def ship_package(spark) -> str:
    """Add a zip of the ``audit`` package (:func:`audit.package.package_zip`) to the executors' Python path.

    The zip lives in a temporary directory removed when this process exits (the driver serves it to executors until
    the application ends).

    Returns
    -------
    str
        The zip's path.
    """
    from audit.package import package_zip

    archive = package_zip()
    spark.sparkContext.addPyFile(archive)
    return archive


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` (``kafka-offset-audit audit``'s arguments), start Spark, ship the package, audit."""
    from audit.cli import add_audit_arguments, run_audit
    from audit.cli.config_file import ConfigFileError, with_config_file

    parser = argparse.ArgumentParser(prog="spark-submit <kafka-offset-audit spark-app>")
    add_audit_arguments(parser)
    try:
        argv = with_config_file(list(sys.argv[1:] if argv is None else argv), parser)
    except ConfigFileError as exc:
        parser.error(str(exc))
    args = parser.parse_args(argv)
    if args.remote or args.python_env:
        parser.error(
            "--remote and --python-env are for kafka-offset-audit audit (a Spark Connect client); under "
            "spark-submit the cluster runs the application: ship the environment with --archives"
        )
    return run_audit(args, args.master, on_session=ship_package)


if __name__ == "__main__":
    # run as a file, Python put this package's own directory first on sys.path, where its modules would shadow
    # top-level names (spark, tables, report ...): drop it
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        sys.path.pop(0)
    sys.exit(main())
