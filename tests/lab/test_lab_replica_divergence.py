"""REPLICA_DIVERGENCE on a real cluster: the old leader's lost lineage, found before it rejoins.

Built by construction, on 3 brokers (topic on L=1 and F=2, broker 3 keeps ``__consumer_offsets`` available):

1. ``KEPT`` records per partition with acks=all (both replicas have them);
2. F stops; L takes ``LOST`` more records of partition 0 with acks=1; a group consumes all of it and commits
   (offset ``KEPT + LOST``, L's epoch), another commits exactly at F's end;
3. L is killed; F starts and is elected uncleanly (Admin ``electLeaders(UNCLEAN)``), takes a new lineage and a
   third group commits on it;
4. every node's log dir is copied while L is down (the input of the audit: L's dir holds the lost lineage);
5. L starts again: Kafka's follower truncates its log, and the broker says where (``Truncating partition ...
   with TruncationState(offset=N, completed=true)``). That offset is the judge of ``divergence_offset``; the
   records it discards are ``LOST`` by construction (each was acknowledged by L).

Partition 1 lost nothing (L had only what F had): no finding may name it, nor any other partition.
"""

from __future__ import annotations

import re
import time

import pytest

from . import kafka_dist
from .client import LabClient
from .cluster import KafkaCluster
from .scenario import copy_log_dirs

TOPIC, L, F = "orders", 1, 2
KEPT, LOST, NEW = {0: 30, 1: 20}, 25, {0: 10, 1: 5}
TRUNCATING = re.compile(r"Truncating partition (\S+) with TruncationState\(offset=(\d+), completed=true\)")


def _wait(lab, what, cond, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        state = {r["partition"]: r for r in lab.call("describe", topics=[TOPIC])}
        if all(cond(s) for s in state.values()):
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached in {timeout}s: {state}")
        time.sleep(0.3)


@pytest.fixture(scope="module", params=kafka_dist.feature_versions(1), ids=lambda v: f"kafka-{v}")
def diverged(request, tmp_path_factory):
    version = request.param
    work = tmp_path_factory.mktemp(f"divergence-{version}")
    cluster = KafkaCluster(version, work / "cluster", brokers=3).start()
    try:
        with LabClient(version, cluster.bootstrap, log=work / "labclient.log") as lab:
            lab.call(
                "create_topic",
                topic=TOPIC,
                assignments={"0": [L, F], "1": [L, F]},
                configs={"min.insync.replicas": "1"},
            )
            for p, n in KEPT.items():
                lab.call("produce", topic=TOPIC, partition=p, count=n, acks="all")
            cluster.stop_node(F)
            _wait(lab, "F out of the ISR", lambda s: s["isr"] == [L])
            lab.call("produce", topic=TOPIC, partition=0, count=LOST, acks="1")
            lab.call("consume_commit", group="read-past", topics=[TOPIC])
            epoch_l = lab.call("offsets", partitions=[[TOPIC, 0]])[0]["leader_epoch"]
            lab.call(
                "commit",
                group="at-divergence",
                offsets=[{"topic": TOPIC, "partition": 0, "offset": KEPT[0], "epoch": epoch_l}],
            )
            cluster.kill(L)
            _wait(lab, "partitions offline", lambda s: s["leader"] == -1)
            cluster.start_node(F)
            deadline = time.monotonic() + 60
            while not all(
                r["error"] is None or "ElectionNotNeeded" in r["error"]
                for r in lab.call("elect", type="unclean", partitions=[[TOPIC, 0], [TOPIC, 1]])
            ):
                assert time.monotonic() < deadline, "unclean election failed"
                time.sleep(0.5)
            _wait(lab, "F leads", lambda s: s["leader"] == F)
            for p, n in NEW.items():
                lab.call("produce", topic=TOPIC, partition=p, count=n, acks="1")
            epoch_f = lab.call("offsets", partitions=[[TOPIC, 0]])[0]["leader_epoch"]
            lab.call("consume_commit", group="new-lineage", topics=[TOPIC])
            copies = copy_log_dirs(cluster, work / "while-L-down")
            # the judge: L's own follower truncation when it rejoins
            log_mark = cluster.nodes[L].log_file.stat().st_size if cluster.nodes[L].log_file.exists() else 0
            cluster.start_node(L)
            _wait(lab, "L back in the ISR", lambda s: L in s["isr"], timeout=90)
        text = cluster.nodes[L].log_file.read_bytes()[log_mark:].decode("utf-8", "replace")
        truncated = {}
        for tp, off in TRUNCATING.findall(text):
            truncated[tp] = min(int(off), truncated.get(tp, int(off)))
        yield {
            "version": version,
            "work": work,
            "copies": copies,
            "truncated": truncated,
            "epoch_l": epoch_l,
            "epoch_f": epoch_f,
            "cluster": cluster,
        }
    finally:
        cluster.stop()


def test_lost_lineage_matches_kafkas_truncation(diverged, spark, tmp_path):
    import pyarrow.parquet as pq

    from audit.pipeline import AuditConfig, run

    d = diverged
    assert d["truncated"].get(f"{TOPIC}-0") == KEPT[0], f"broker {L}'s truncations: {d['truncated']}"
    cfg = AuditConfig(
        log_dirs=[str(p) for p in d["copies"]], output=str(tmp_path / "out"), quiet=True, reports=True, fail_on="never"
    )
    result = run(cfg, spark)
    # the expectation suite accepts a finding without a group; the report and console name the replica
    assert result.summary["reports"]["expectations"]["success"], result.summary["reports"]["expectations"]
    assert f"replica on broker {L}; consumed by read-past" in (tmp_path / "out" / "report.html").read_text()
    assert f"replica on broker {L}" in result.console
    assert "--mode history" in result.summary["rules_not_run"]["PARTITION_EXPANSION_ORDER"]
    metrics = (tmp_path / "out" / "metrics.prom").read_text()
    assert (
        f'kafka_offset_audit_lost_lineage_records{{broker="{L}",partition="0",severity="error",topic="{TOPIC}"}} '
        f"{float(LOST)}"
    ) in metrics
    rows = pq.read_table(str(tmp_path / "out" / "findings")).to_pylist()
    div = [r for r in rows if r["finding"] == "REPLICA_DIVERGENCE"]
    assert [(r["topic"], r["partition"], r["replica_broker"]) for r in div] == [(TOPIC, 0, L)], div
    r = div[0]
    # where Kafka's follower cut L's log, and what it cut: the records L acknowledged with acks=1
    assert r["divergence_offset"] == d["truncated"][f"{TOPIC}-0"]
    assert r["records_at_risk"] == LOST
    assert r["group_id"] is None and r["answered_by_broker"] == F
    assert r["previous_leader_epoch"] == d["epoch_l"]
    assert (r["cause"], r["cause_leader"], r["cause_leader_epoch"]) == ("unclean_election", F, d["epoch_f"])
    # the group that read L's lost records; not the one at the divergence point, not the new lineage's
    assert r["groups_consumed"] == ["read-past"]
    assert r["severity"] == "error"
    # the same group's own view, unchanged: Kafka's consumer would rewind it to the divergence point
    trunc = [(x["group_id"], x["partition"], x["divergence_offset"]) for x in rows if x["finding"] == "LOG_TRUNCATION"]
    assert ("read-past", 0, KEPT[0]) in trunc


def test_no_divergence_once_the_old_leader_rejoined(diverged, spark, tmp_path):
    """After L truncated and rejoined, no replica holds another lineage: no finding (a copy of the running
    cluster, as a hot backup takes it)."""
    import pyarrow.parquet as pq

    from audit.pipeline import AuditConfig, run

    dirs = copy_log_dirs(diverged["cluster"], tmp_path / "rejoined")
    cfg = AuditConfig(
        log_dirs=[str(p) for p in dirs], output=str(tmp_path / "out"), quiet=True, reports=False, fail_on="never"
    )
    run(cfg, spark)
    rows = pq.read_table(str(tmp_path / "out" / "findings")).to_pylist()
    assert [r for r in rows if r["finding"] == "REPLICA_DIVERGENCE"] == []
