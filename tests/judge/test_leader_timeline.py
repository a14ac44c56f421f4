"""leader_timeline/ (sql/leader_timeline.sql) against Kafka's own decoding of the same metadata log.

The reference replays what Kafka's decoders printed (``kafka-dump-log --cluster-metadata-decoder`` for the shared
3.6 scenario; Kafka 4.4.0's record classes for ``tests/data/kafka-4.4.0``) the way
``PartitionRegistration.merge`` applies records: a PartitionRecord sets the state; a PartitionChangeRecord bumps
the partition epoch, and the leader epoch when it names a leader (not -2), and changes only the fields it carries.
"""

import json
import re
from pathlib import Path

import pytest

from pyspark.sql import SparkSession

from ..paths import SCENARIO

K4 = Path(__file__).parents[1] / "data" / "kafka-4.4.0"


def _dump_records(path: Path):
    """(offset, type, data) from kafka-dump-log --cluster-metadata-decoder output."""
    for line in path.read_text().splitlines():
        m = re.search(r"offset: (\d+) .*payload: (\{.*\})\s*$", line)
        if m:
            p = json.loads(m.group(2))
            yield (
                int(m.group(1)),
                {"PARTITION_RECORD": "PartitionRecord", "PARTITION_CHANGE_RECORD": "PartitionChangeRecord"}.get(
                    p["type"]
                ),
                p["data"],
            )


def _jsonl_records(path: Path):
    for line in path.read_text().splitlines():
        r = json.loads(line)
        yield r["offset"], r["type"], r


def reference(records) -> dict:
    """metadata offset -> (topic_id, partition, leader, leader_epoch, partition_epoch, isr, elr, recovery state)."""
    state, out = {}, {}
    for offset, kind, d in records:
        if kind not in ("PartitionRecord", "PartitionChangeRecord"):
            continue
        key = (d["topicId"], d["partitionId"])
        if kind == "PartitionRecord":
            s = {
                "leader": d["leader"],
                "epoch": d["leaderEpoch"],
                "pepoch": d["partitionEpoch"],
                "isr": d["isr"],
                "elr": d.get("eligibleLeaderReplicas"),
                "lrs": d.get("leaderRecoveryState", 0),
            }
        else:
            s = dict(state[key])
            s["pepoch"] += 1
            if d.get("leader", -2) != -2:
                s["leader"], s["epoch"] = d["leader"], s["epoch"] + 1
            if d.get("isr") is not None:
                s["isr"] = d["isr"]
            if d.get("eligibleLeaderReplicas") is not None:
                s["elr"] = d["eligibleLeaderReplicas"]
            if d.get("leaderRecoveryState", -1) != -1:
                s["lrs"] = d["leaderRecoveryState"]
        state[key] = s
        out[offset] = (key[0], key[1], s["leader"], s["epoch"], s["pepoch"], s["isr"], s["elr"], s["lrs"])
    return out


def _ours(out: Path) -> dict:
    spark = SparkSession.getActiveSession()
    return {
        r["metadata_offset"]: (
            r["topic_id"],
            r["partition"],
            r["leader"],
            r["leader_epoch"],
            r["partition_epoch"],
            r["isr"],
            r["eligible_leader_replicas"],
            r["leader_recovery_state"],
        )
        for r in spark.read.parquet(str(out / "leader_timeline")).collect()
    }


def test_shared_scenario_timeline_equals_kafkas_decoding(scenario_latest):
    _result, out = scenario_latest
    ref = reference(
        _dump_records(
            SCENARIO / "dumps/controller-100/__cluster_metadata-0/00000000000000000000.log.cluster_metadata.txt"
        )
    )
    assert len(ref) > 100
    assert _ours(out) == ref


def test_shared_scenario_unclean_elections_in_the_timeline(scenario_latest):
    """STORY.md T8: broker 2 elected uncleanly for both dev.payments partitions, epoch 2, ISR [2]."""
    _result, out = scenario_latest
    spark = SparkSession.getActiveSession()
    rows = spark.read.parquet(str(out / "leader_timeline")).where("unclean_election").collect()
    assert sorted((r["topic"], r["partition"], r["leader"], r["leader_epoch"], list(r["isr"])) for r in rows) == [
        ("dev.payments", 0, 2, 2, [2]),
        ("dev.payments", 1, 2, 2, [2]),
    ]


@pytest.mark.slow
def test_kafka_4_timeline_with_eligible_leader_replicas_equals_kafkas_decoding(audit_dirs):
    _result, out = audit_dirs("k4-timeline", [K4 / "controller-100"])
    ref = reference(_jsonl_records(K4 / "cluster_metadata-0.kafka-decoded.jsonl"))
    ours = _ours(out)
    assert len(ref) > 50 and ours == ref
    assert any(v[6] for v in ref.values()), "the 4.4.0 recording should hold eligible leader replicas"


@pytest.mark.slow
def test_recreated_topic_has_two_topic_ids_the_first_removed(audit_dirs):
    """Lab scenario 4.4.0 seed 102, episode e3: the topic was deleted and created again under the same name."""
    rec = Path(__file__).parents[1] / "data" / "lab-scenarios" / "kafka-4.4.0-seed102"
    _result, out = audit_dirs("recreate-timeline", [rec / "brokers"])
    spark = SparkSession.getActiveSession()
    rows = spark.read.parquet(str(out / "leader_timeline")).where("topic = 's102.e3.recreate.t'").collect()
    ids = {}
    for r in rows:
        ids.setdefault(r["topic_id"], set()).add(r["topic_removed_at"])
    assert len(ids) == 2, ids
    assert sorted(len([t for t in v if t is not None]) for v in ids.values()) == [0, 1]
    assert all(len(v) == 1 for v in ids.values())


def _broker_events(records) -> list:
    """(metadata offset, broker, event) as the controller replays broker records (ClusterControlManager)."""
    out = []
    for offset, kind, d in records:
        if kind == "REGISTER_BROKER_RECORD":
            out.append((offset, d["brokerId"], "registered"))
        elif kind in ("BROKER_REGISTRATION_CHANGE_RECORD", "FENCE_BROKER_RECORD", "UNFENCE_BROKER_RECORD"):
            fenced = {"FENCE_BROKER_RECORD": 1, "UNFENCE_BROKER_RECORD": -1}.get(kind, d.get("fenced", 0))
            broker = d.get("brokerId", d.get("id"))
            if fenced:
                out.append((offset, broker, "fenced" if fenced == 1 else "unfenced"))
            if d.get("inControlledShutdown", 0) == 1:
                out.append((offset, broker, "controlled_shutdown"))
        elif kind == "UNREGISTER_BROKER_RECORD":
            out.append((offset, d["brokerId"], "unregistered"))
    return sorted(out)


def test_shared_scenario_broker_timeline_equals_kafkas_decoding(scenario_latest):
    """broker_timeline/ (sql/broker_timeline.sql): every registration, fencing, unfencing and controlled shutdown
    kafka-dump-log --cluster-metadata-decoder printed for the controller's log, in log order."""
    _result, out = scenario_latest
    raw = []
    path = SCENARIO / "dumps/controller-100/__cluster_metadata-0/00000000000000000000.log.cluster_metadata.txt"
    for line in path.read_text().splitlines():
        m = re.search(r"offset: (\d+) .*payload: (\{.*\})\s*$", line)
        if m:
            p = json.loads(m.group(2))
            raw.append((int(m.group(1)), p["type"], p["data"]))
    ref = _broker_events(raw)
    spark = SparkSession.getActiveSession()
    ours = sorted(
        (r["metadata_offset"], r["broker_id"], r["event"])
        for r in spark.read.parquet(str(out / "broker_timeline")).collect()
    )
    assert ours == ref
    events = {e for _o, _b, e in ref}
    assert {"registered", "fenced", "unfenced"} <= events, events
