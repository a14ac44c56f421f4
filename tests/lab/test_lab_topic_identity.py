"""Topic identity on a real cluster (Kafka 4.4.0): a topic deleted and re-created while a replica's broker is down.

Built by construction, on 3 brokers:

1. topic ``T`` on brokers 1 and 2 takes ``OLD`` records; group ``old-reader`` consumes them and commits;
2. broker 2 stops; ``T`` is deleted and created again on brokers 1 and 3 (a new topic id); it takes ``NEW``
   records and group ``new-reader`` consumes and commits them (an OffsetCommitValue v4 carrying the new id);
3. every node's log dir is copied while broker 2 is down: its ``T-0`` still holds the first incarnation's
   ``OLD`` records and its ``partition.metadata`` the old topic id.

The judges: Kafka's consumer (``auto.offset.reset=none``) resuming each group, and broker 2 itself, which on its
restart does not take the old dir as a replica of the new topic (it renames it ``-stray`` or deletes it).
"""

from __future__ import annotations

import time

import pytest

from .client import LabClient
from .cluster import KafkaCluster
from .scenario import copy_log_dirs

VERSION, TOPIC, OLD, NEW = "4.4.0", "orders", 40, 10


def _topic_id(log_dir, partition=0):
    text = (log_dir / f"{TOPIC}-{partition}" / "partition.metadata").read_text()
    return dict(line.split(": ", 1) for line in text.splitlines() if line)["topic_id"]


def _wait_gone(lab, timeout=60):
    deadline = time.monotonic() + timeout
    while TOPIC in lab.call("list_topics"):
        assert time.monotonic() < deadline, f"{TOPIC} still listed after its deletion"
        time.sleep(0.3)


@pytest.fixture(scope="module")
def recreated(tmp_path_factory):
    work = tmp_path_factory.mktemp("topic-identity")
    cluster = KafkaCluster(VERSION, work / "cluster", brokers=3).start()
    try:
        with LabClient(VERSION, cluster.bootstrap, log=work / "labclient.log") as lab:
            lab.call("create_topic", topic=TOPIC, assignments={"0": [1, 2]})
            lab.call("produce", topic=TOPIC, partition=0, count=OLD, acks="all")
            lab.call("consume_commit", group="old-reader", topics=[TOPIC])
            old_id = _topic_id(cluster.nodes[2].log_dir)
            cluster.stop_node(2)
            lab.call("delete_topic", topic=TOPIC)
            _wait_gone(lab)
            lab.call("create_topic", topic=TOPIC, assignments={"0": [1, 3]})
            lab.call("produce", topic=TOPIC, partition=0, count=NEW, acks="all")
            lab.call("consume_commit", group="new-reader", topics=[TOPIC])
            verdicts = {
                v["group"]: v
                for v in lab.call("verdicts", group_partitions=[["old-reader", TOPIC, 0], ["new-reader", TOPIC, 0]])
            }
            copies = copy_log_dirs(cluster, work / "while-broker-2-down")
            new_id = _topic_id(cluster.nodes[1].log_dir)
            cluster.start_node(2)
            deadline = time.monotonic() + 60
            while (cluster.nodes[2].log_dir / f"{TOPIC}-0").exists():
                assert time.monotonic() < deadline, "broker 2 kept the old incarnation's dir as a replica"
                time.sleep(0.5)
        yield {"cluster": cluster, "copies": copies, "old_id": old_id, "new_id": new_id, "verdicts": verdicts}
    finally:
        cluster.stop()


def test_stale_replica_left_out_and_commits_carry_topic_ids(recreated, spark, tmp_path):
    import pyarrow.parquet as pq

    from audit.pipeline import AuditConfig, run

    d = recreated
    assert d["old_id"] != d["new_id"]
    # Kafka's consumer: the old incarnation's commit is gone (the coordinator tombstones a deleted topic's
    # offsets), the new one resumes
    assert d["verdicts"]["old-reader"]["verdict"] == "NoOffsetForPartitionException", d["verdicts"]
    assert (d["verdicts"]["new-reader"]["verdict"], d["verdicts"]["new-reader"]["committed_offset"]) == ("OK", NEW)

    out = tmp_path / "offline"
    result = run(
        AuditConfig(
            log_dirs=[str(p) for p in d["copies"]], output=str(out), quiet=True, fail_on="never", mode="history"
        ),
        spark,
    )
    mism = result.summary["inputs"]["topic_id_mismatches"]
    assert [
        (
            m["broker_id"],
            m["topic"],
            m["partition"],
            m["topic_id"],
            m["current_topic_id"],
            m["stale"],
            m["reason"],
            m["log_end_offset"],
        )
        for m in mism
    ] == [(2, TOPIC, 0, d["old_id"], d["new_id"], True, "stale_incarnation", OLD)]
    epochs = pq.read_table(str(out / "epochs")).to_pylist()
    assert sorted({r["broker_id"] for r in epochs if r["topic"] == TOPIC}) == [1, 3]
    bounds = [r for r in pq.read_table(str(out / "bounds")).to_pylist() if r["topic"] == TOPIC]
    assert [(r["replica_count"], r["log_end_offset"]) for r in bounds] == [(2, NEW)]
    findings = [r for r in pq.read_table(str(out / "findings")).to_pylist() if r["topic"] == TOPIC]
    assert findings == [], findings

    live_out = tmp_path / "live"
    run(AuditConfig(bootstrap_servers=d["cluster"].bootstrap, output=str(live_out), quiet=True, fail_on="never"), spark)
    for where in (out, live_out):
        committed = [r for r in pq.read_table(str(where / "committed_offsets")).to_pylist() if r["topic"] == TOPIC]
        # the audit agrees: no live commit for old-reader; new-reader OK at NEW, its commit naming the new id
        assert [(r["group_id"], r["committed_offset"], r["verdict"], r["topic_id"]) for r in committed] == [
            ("new-reader", NEW, "OK", d["new_id"])
        ], (where, committed)
    # every commit of the new incarnation names it (commits/, --mode history)
    commits = pq.read_table(str(out / "commits")).to_pylist()
    assert {r["topic_id"] for r in commits if r["group_id"] == "new-reader"} == {d["new_id"]}
