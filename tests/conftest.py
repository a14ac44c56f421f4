"""Shared fixtures: one local SparkSession for the whole run, and audits of the shared scenario."""
import os
import sys

import pytest

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("KOA_SHUFFLE_PARTITIONS", "2")
# the class-data archive (audit.spark.ClassDataArchive) is written by a JVM after its run ended; tests' CLI runs
# go without it, except tests/test_class_data_archive.py, which turns it on in a directory of its own
os.environ.setdefault("KOA_CDS", "off")

from .cluster_fixtures import connect_server, lab_live, packed_env, standalone  # noqa: E402,F401 - session fixtures
from .paths import SCENARIO  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    from audit.spark import build_session
    session = build_session(os.environ.get("KOA_TEST_MASTER", "local[2]"))
    yield session
    session.stop()


def _audit(spark, tmp_path_factory, name, log_dirs, **kw):
    from audit.pipeline import AuditConfig, run
    out = tmp_path_factory.mktemp(name) / "out"
    kw.setdefault("reports", False)
    cfg = AuditConfig(log_dirs=[str(d) for d in log_dirs], output=str(out), quiet=True, **kw)
    result = run(cfg, spark)
    return result, out


@pytest.fixture(scope="session")
def scenario_latest(spark, tmp_path_factory):
    """The shared unclean-election scenario audited in latest mode: (RunResult, output dir)."""
    return _audit(spark, tmp_path_factory, "scenario-latest", [SCENARIO / "brokers"])


@pytest.fixture(scope="session")
def scenario_history(spark, tmp_path_factory):
    """The same scenario audited in history mode."""
    return _audit(spark, tmp_path_factory, "scenario-history", [SCENARIO / "brokers"], mode="history")


@pytest.fixture(scope="session")
def audit_dirs(spark, tmp_path_factory):
    """Call ``audit_dirs(name, [dirs], **config)`` to audit other inputs."""
    return lambda name, dirs, **kw: _audit(spark, tmp_path_factory, name, dirs, **kw)
