"""Differential tests against real Kafka: the audit must agree with Kafka's own consumer.

For each Kafka version (``KOA_LAB_VERSIONS``, default the newest 4.x and 3.9.x, resolved from Maven Central
by ``tests/lab/pom.xml``) with its own seed (``scenario.covering_seeds``: together the versions' seeds run every
episode kind; ``KOA_LAB_SEEDS`` runs the seeds it names on every version), a fresh KRaft cluster (one
controller, three brokers) runs the seed's fault schedule (``tests/lab/scenario.py``); Kafka's Java consumer
judges every group-partition with the cluster up, after the scenario's closing rolling restart (no write after
it); the live audit reads the running cluster, the offline audit reads the log dirs after a clean shutdown and a
hot copy taken while the cluster ran, each with the CLI's defaults (reports on, ``--fail-on error``). A
disagreement prints the seed that reproduces it (``python -m tests.lab.soak --versions V --seeds S``). Broker
logs and log dirs stay in pytest's temporary directory (printed on failure).
"""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

from . import differential, kafka_dist, scenario, soak
from .cluster import lab_jvms

SEEDS = [int(s) for s in os.environ.get("KOA_LAB_SEEDS", "").split(",") if s.strip()]
# KOA_LAB_SEEDS given: every seed on every version; by default each version one seed, chosen so that every episode
# kind runs on at least one version (the soak, outside CI, crosses many seeds with both versions)
CASES = (
    [(v, s) for v in kafka_dist.versions() for s in SEEDS]
    if SEEDS
    else list(zip(kafka_dist.versions(), scenario.covering_seeds(kafka_dist.versions()), strict=True))
)


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
    assert not bad, (
        differential.describe_disagreements(rows, lab["seed"], lab["version"], source)
        + f"\nlog dirs and broker logs: {lab['workdir']}"
    )


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


def test_live_read_of_the_offsets_topic_is_kafkas_consumers(lab):
    """The records the live source reads from __consumer_offsets (Fetch requests, decoded vectorised) are exactly
    those Kafka's Java consumer returns under read_committed: none missing, none extra (aborted transactional
    commits and transaction markers left out alike), none twice."""
    r = lab["reader"]
    assert r is not None and r["kafka_records"] > 0, r
    assert (r["missing"], r["extra"], r["duplicates"]) == ([], [], 0), r
    assert r["ours"] == r["kafka_records"], r


def test_live_and_offline_audits_agree(lab):
    assert lab["live_vs_offline"] == [], f"seed {lab['seed']} Kafka {lab['version']}: {lab['live_vs_offline']}"


WRITES = {
    "produce",
    "produce during crash",
    "consume_commit",
    "commit",
    "kafka_python_commit",
    "alter_offsets",
    "txn_commit",
    "delete_records",
    "delete_group",
    "create_topic",
    "delete_topic",
    "create_partitions",
}


def test_scenario_ends_on_a_rolling_restart_and_writes_nothing_after_it(lab):
    """Every broker restarted cleanly, one at a time, after the last write; the oracle judged after it."""
    names = [st["step"] for st in lab["steps"]]
    assert "rolling restart" in names, names
    end = names.index("rolling restart")
    restarts = [st for st in lab["steps"][:end] if st["step"] == "restart"]
    assert sorted(st["broker"] for st in restarts) == [1, 2, 3], restarts
    first = names.index("restart")
    assert not WRITES & set(names[first:]), names[first:]
    assert "verdicts" in names[end:], names[end:]
    assert lab["steps"][end]["leader_changes"] > 0, lab["steps"][end]


@pytest.mark.parametrize("source", soak.SOURCES)
def test_audit_with_reports(lab, source):
    """The audit as the CLI runs it by default (reports on, --fail-on error) ends with exit 0 or 1, never an
    exception, and writes report.html, the expectation suite's result and summary.json's ``reports``."""
    a = lab["audits"][source]
    assert a["error"] is None, (
        f"the {source} audit with reports raised (Kafka {lab['version']} seed "
        f"{lab['seed']}, {lab['workdir']}):\n{a['error']}"
    )
    assert a["exit_code"] in (0, 1), a
    out = lab["outs"][source]
    assert (out / "report.html").is_file() and a["report_html"], a
    assert (out / "expectations" / "validation_result.json").is_file() and a["validation_result"], a
    summary = json.loads((out / "summary.json").read_text())
    assert "reports" in summary and summary["reports"]["html_report"] == "report.html", summary.get("reports")
    assert summary["exit_status"] == a["exit_code"]


def test_live_epochs_after_the_rolling_restart(lab):
    """The shape that crashed a user's report: after the rolling restart the live source writes each judged
    partition's current leader epoch to epochs/ with ``start_offset`` null, and (the restart moved every leader,
    nothing was written after it) each of those epochs began with no records: in the offline audit's epochs
    (the leader's leader-epoch cache after the clean shutdown) it starts at the partition's log end offset."""
    live = pq.read_table(lab["outs"]["live"] / "epochs").to_pylist()
    assert live and any(r["start_offset"] is None for r in live), live
    cached = {
        (r["topic"], r["partition"], r["leader_epoch"], r["broker_id"]): r["start_offset"]
        for r in pq.read_table(lab["outs"]["offline"] / "epochs").to_pylist()
    }
    ends = {
        (r["topic"], r["partition"]): r["log_end_offset"]
        for r in pq.read_table(
            lab["outs"]["offline"] / "bounds", columns=["topic", "partition", "log_end_offset"]
        ).to_pylist()
    }
    began_with_records = []
    for r in live:
        start = cached.get((r["topic"], r["partition"], r["leader_epoch"], r["broker_id"]))
        if r["start_offset"] is None and start != ends.get((r["topic"], r["partition"])):
            began_with_records.append((r, start, ends.get((r["topic"], r["partition"]))))
    assert began_with_records == [], (began_with_records, lab["workdir"])


def test_no_jvm_left_running(lab):
    assert lab_jvms(lab["workdir"]) == []


def test_kafka_resolves_from_maven_central():
    for v in kafka_dist.versions():
        jars = {p.name for p in kafka_dist.classpath(v).glob("*.jar")}
        assert f"kafka_2.13-{v}.jar" in jars and f"kafka-clients-{v}.jar" in jars
