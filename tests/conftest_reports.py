"""Session-scoped SparkSession for the report tests (imported by them, not a conftest).

``tests/conftest.py`` belongs to the project's lead; the report tests import
``report_spark`` from here instead.  The session is built with the project's
own ``audit.spark.build_session`` (master ``local[2]``, UI off, UTC), so
whichever fixture of the run creates the SparkSession first, every test gets
the same configuration; ``getOrCreate`` makes them share one session.
"""

from __future__ import annotations

import os
import sys

import pytest

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO_ROOT not in sys.path:  # ``import audit`` also under plain ``pytest``
    sys.path.insert(0, _REPO_ROOT)


def _build_session():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    try:
        from audit.spark import build_session
    except ImportError:  # pragma: no cover - the project module is missing
        build_session = None
    if build_session is not None:
        return build_session("local[2]")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafka-offset-audit-report-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@pytest.fixture(scope="session")
def report_spark():
    """A local[2] SparkSession with the UI off (PYSPARK_PYTHON set to this interpreter)."""
    spark = _build_session()
    yield spark
    spark.stop()
