"""Shared fixtures: one local SparkSession for the whole run, and audits of the shared scenario."""

import os
import sys

import pytest

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ.setdefault("KOA_SHUFFLE_PARTITIONS", "2")
# the class-data archive (audit.spark.ClassDataArchive) is written by a JVM after its run ended; tests' CLI runs
# go without it, except tests/spark/test_class_data_archive.py, which turns it on in a directory of its own
os.environ.setdefault("KOA_CDS", "off")

from .cluster_fixtures import connect_server, lab_live, packed_env, standalone  # noqa: E402,F401 - session fixtures
from .paths import SCENARIO  # noqa: E402

# Scheduling under pytest-xdist (the README's `-n 2 --dist loadfile`).  Each worker is its own pytest session,
# so a session fixture is built by every worker whose files use it.  The files sharing a costly session fixture
# form one unit, run by one worker that builds it once: the Spark clusters (a standalone cluster, a Spark Connect
# server, the packed environment) and the lab_live Kafka cluster (which the Spark cluster files' live audits also
# use, so it is started on both workers).  Units start longest first (a rough order of their durations), so that
# the two workers finish together rather than one waiting on a long file at the end; xdist's own reordering (by
# number of tests, which puts the few long lab tests last) is turned off.
SHARED_UNITS = {
    "tests/[spark clusters]": (
        "test_airflow_dag.py",
        "test_readme_commands.py",
        "test_spark_standalone.py",
        "test_spark_connect.py",
    ),
    "tests/[lab_live]": ("test_lab_lag.py", "test_cluster_integration.py"),
}
_UNIT_OF = {f: unit for unit, files in SHARED_UNITS.items() for f in files}
LONGEST_FIRST = (
    "tests/[spark clusters]",
    "test_object_store.py",
    "test_lab_differential.py",
    "test_lab_tiered.py",  # a tiered cluster per version (~3 min each with its three audits)
    "tests/[lab_live]",
    "test_commit_kills.py",
    "test_fault_injection.py",
    "test_lab_connector.py",
    "test_lab_rebootstrap.py",
    "test_lab_reset_plan.py",  # a cluster per version (~70 s each)
    "test_lab_share_groups.py",
    "test_lab_streams_groups.py",
    "test_class_data_archive.py",
    "test_bad_input.py",
    "test_lab_replica_divergence.py",
    "test_hostile_defects.py",
    "test_null_shapes.py",
    "test_browser_offline.py",
    "test_lab_secured.py",
    "test_lab_owners.py",
)


#: Test tiers, by file (markers added at collection): ``lab`` starts Kafka clusters (Maven Central), ``cluster``
#: Spark clusters, a Spark Connect server, the Airflow environment or an S3 server, ``slow`` runs many audits or
#: processes.  In the other files, a test that runs whole audits of a scenario or a process of its own carries
#: ``@pytest.mark.slow`` itself.  Contributors' fast tier (the tests on small inline DataFrames and the shared
#: scenario's audits): ``python -m pytest -q -n 2 -m "not lab and not cluster and not slow"``.
TIERS = {
    "lab": ("test_lab_*.py", "test_cluster_integration.py", "test_partition_owners.py"),
    "cluster": (
        "test_airflow_dag.py",
        "test_readme_commands.py",
        "test_spark_standalone.py",
        "test_spark_connect.py",
        "test_object_store.py",
    ),
    "slow": (
        "test_commit_kills.py",
        "test_fault_injection.py",
        "test_class_data_archive.py",
        "test_bad_input.py",
        "test_hostile_defects.py",
        "test_null_shapes.py",
        "test_browser_offline.py",
        "test_fuzz_regressions.py",
        "test_bench_*.py",
        "test_job_budget.py",
        "test_stage_failures.py",
        "test_hadoop_uris.py",
        "test_docs.py",
    ),
}


def _tiers(path: str) -> list[str]:
    from fnmatch import fnmatch

    name = os.path.basename(path)
    return [tier for tier, patterns in TIERS.items() if any(fnmatch(name, p) for p in patterns)]


def _unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return _UNIT_OF.get(os.path.basename(path), path)


def pytest_collection_modifyitems(config, items):
    """Longest units first (a stable sort: within a unit, and among the others, collection order holds)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    for item in items:
        for tier in _tiers(item.nodeid.split("::", 1)[0]):
            item.add_marker(getattr(pytest.mark, tier))

    def key(item):
        unit = _unit(item.nodeid)
        return rank.get(unit, rank.get(os.path.basename(unit), len(rank)))

    items.sort(key=key)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the shared-fixture units above, in collection order."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False

    class SharedFixtureScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return SharedFixtureScheduling(config, log)


#: seconds of setup, call and teardown by test file (on the controller under xdist), for the end-of-run table
_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """On the controller (under xdist): each test file's time, summed for the end-of-run table; and a failure
    named the moment it happens, with its duration, so that a run stopped by a time limit before pytest's summary
    still says which tests failed."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration
    if report.failed:
        print(f"\nFAILED {report.nodeid} ({report.when}, {report.duration:.0f} s)", file=sys.stderr, flush=True)


def pytest_terminal_summary(terminalreporter):
    """The test files that took longest (setup, call and teardown summed; wall seconds on their worker), beside
    ``--durations``' slowest tests: where CI's time goes, file by file, and by tier."""
    if not _FILE_SECONDS:
        return
    total = sum(_FILE_SECONDS.values())
    by_tier: dict[str, float] = {}
    for path, seconds in _FILE_SECONDS.items():
        tier = "+".join(_tiers(path)) or "fast"
        by_tier[tier] = by_tier.get(tier, 0.0) + seconds
    terminalreporter.write_sep(
        "=",
        f"time by test file: the {min(25, len(_FILE_SECONDS))} longest of {len(_FILE_SECONDS)}, {total:.0f} s in all",
    )
    for path, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:25]:
        terminalreporter.write_line(f"{seconds:8.1f}s {100 * seconds / total:5.1f}%  {path}")
    terminalreporter.write_line(
        "by tier: " + ", ".join(f"{t} {s:.0f} s" for t, s in sorted(by_tier.items(), key=lambda kv: -kv[1]))
    )


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
