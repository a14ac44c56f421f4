"""Differential tests against real Kafka: the audit must agree with Kafka's own consumer.

For each Kafka version (``KOA_LAB_VERSIONS``, default the newest 4.x and 3.9.x, resolved from Maven Central
by ``tests/lab/pom.xml``) and each CI seed (``KOA_LAB_SEEDS``, default ``1,2``), a fresh KRaft cluster (one
controller, three brokers) runs the seed's fault schedule (``tests/lab/scenario.py``); Kafka's Java consumer
judges every group-partition with the cluster up; the live audit reads the running cluster, the offline
audit reads the log dirs after a clean shutdown and a hot copy taken while the cluster ran. A disagreement
prints the seed that reproduces it (``python -m tests.lab.soak --versions V --seeds S``). Broker logs and log
dirs stay in pytest's temporary directory (printed on failure).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.lab import differential, kafka_dist, soak

SEEDS = [int(s) for s in os.environ.get("KOA_LAB_SEEDS", "1,2").split(",") if s.strip()]
CASES = [(v, s) for v in kafka_dist.versions() for s in SEEDS]


def _lab_jvms(workdir: Path) -> list[int]:
    """PIDs of processes whose command line names this workdir (a JVM left running)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if str(workdir) in (d / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


@pytest.fixture(scope="module", params=CASES, ids=[f"kafka-{v}-seed{s}" for v, s in CASES])
def lab(request, spark, tmp_path_factory):
    version, seed = request.param
    workdir = tmp_path_factory.mktemp(f"lab-{version}-seed{seed}")
    res = soak.check_seed(seed, version, workdir, spark)
    res["workdir"] = workdir
    return res


@pytest.mark.parametrize("source", soak.SOURCES)
def test_audit_agrees_with_kafkas_consumer(lab, source):
    rows = lab["rows"][source]
    assert rows, "the scenario judged no group-partition"
    bad = [r for r in rows if not r["agree"]]
    assert not bad, (differential.describe_disagreements(rows, lab["seed"], lab["version"], source)
                     + f"\nlog dirs and broker logs: {lab['workdir']}")


def test_scenario_covers_the_verdicts_that_matter(lab):
    kinds = {r["oracle"] for r in lab["rows"]["offline"]}
    # every seed has unclean elections with groups past the divergence point, and groups that resume fine
    assert {"LogTruncationException", "OK"} <= kinds, (kinds, lab["workdir"])
    truncated = [r for r in lab["rows"]["offline"] if r["oracle"] == "LogTruncationException"]
    assert all(r["divergent_offset"] is not None for r in truncated)


@pytest.mark.parametrize("source", ["offline", "hot"])
def test_truncation_causes_match_the_faults_the_scenario_made(lab, source):
    """Offline (with the KRaft metadata log): every truncation in an unclean episode is `unclean_election` with the
    broker the scenario elected uncleanly as `cause_leader`; in a stale-epoch episode `stale_client_epoch`."""
    causes = lab["causes"][source]  # [group, topic, partition, cause, cause_leader_epoch, cause_leader]
    unclean = [c for c in causes if ".unclean." in c[0]]
    assert unclean, lab["workdir"]
    wrong = [c for c in unclean if c[3] != "unclean_election" or c[5] != lab["unclean_leader"]]
    assert wrong == [], (wrong, lab["unclean_leader"], lab["workdir"])
    stale = [c for c in causes if ".stale_epoch." in c[0]]
    assert all(c[3] == "stale_client_epoch" for c in stale), stale


def test_live_and_offline_audits_agree(lab):
    assert lab["live_vs_offline"] == [], f"seed {lab['seed']} Kafka {lab['version']}: {lab['live_vs_offline']}"


def test_no_jvm_left_running(lab):
    assert _lab_jvms(lab["workdir"]) == []


def test_kafka_resolves_from_maven_central():
    for v in kafka_dist.versions():
        jars = {p.name for p in kafka_dist.classpath(v).glob("*.jar")}
        assert f"kafka_2.13-{v}.jar" in jars and f"kafka-clients-{v}.jar" in jars
