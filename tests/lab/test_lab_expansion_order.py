"""PARTITION_EXPANSION_ORDER (KIP-253) on a real cluster, with Kafka's ListOffsets(timestamp) as the judge of
where each old partition's log stood when the topic grew.

By construction (one broker, topic ``keyed`` with 2 partitions, grown to 3):

* ``lagging`` committed 10 and 5 on the old partitions before the expansion, then commits on new partition 2
  alone: both old partitions are behind where they stood at the expansion (``BEFORE`` records each);
* ``drained`` had consumed everything before the expansion: no finding;
* ``together`` was behind too, but commits the old partitions' full positions in the same OffsetCommit request
  as its first commit on partition 2: not behind at that commit, no finding;
* ``never-new`` is behind and never commits on partition 2: no finding.

Records keep arriving on every partition after the expansion, so the offset at the expansion is not simply
the log end offset. The audit's ``offset_at_expansion`` must equal what Kafka's ListOffsets answers for the
expansion time the audit read from the metadata log; and the audit's lookup is compared with Kafka's for a
sweep of timestamps across the whole log (before the first record, inside batches, after the last).
"""

from __future__ import annotations

import time

import pytest

from . import kafka_dist
from .client import LabClient
from .cluster import KafkaCluster
from .scenario import copy_log_dirs

TOPIC = "keyed"
BEFORE = {0: 40, 1: 28}  # produced in 4 chunks each


@pytest.fixture(scope="module", params=kafka_dist.feature_versions(1), ids=lambda v: f"kafka-{v}")
def grown(request, tmp_path_factory):
    version = request.param
    work = tmp_path_factory.mktemp(f"expansion-{version}")
    cluster = KafkaCluster(version, work / "cluster", brokers=1).start()
    try:
        with LabClient(version, cluster.bootstrap, log=work / "labclient.log") as lab:
            lab.call("create_topic", topic=TOPIC, partitions=2, rf=1)
            for p, n in BEFORE.items():
                for _chunk in range(4):  # several batches, some large enough for index entries
                    lab.call("produce", topic=TOPIC, partition=p, count=n // 4, acks="all", value_size=1500)
                    time.sleep(0.02)

            def commit(group, offsets):
                lab.call(
                    "commit",
                    group=group,
                    offsets=[{"topic": TOPIC, "partition": p, "offset": o, "epoch": 0} for p, o in offsets.items()],
                )

            for g in ("lagging", "together", "never-new"):
                commit(g, {0: 10, 1: 5})
            commit("drained", BEFORE)
            time.sleep(0.05)
            lab.call("create_partitions", topic=TOPIC, total=3)
            time.sleep(0.05)
            for p, n in {0: 15, 1: 12, 2: 9}.items():
                for _chunk in range(3):
                    lab.call("produce", topic=TOPIC, partition=p, count=n // 3, acks="all", value_size=300)
                    time.sleep(0.02)
            commit("lagging", {2: 4})
            commit("drained", {2: 4})
            commit("together", {**BEFORE, 2: 4})
            copies = copy_log_dirs(cluster, work / "copy")
            yield {"version": version, "copies": copies, "lab": lab, "cluster": cluster}
    finally:
        cluster.stop()


def _kafka_offset(lab, partition: int, ts_ms: int) -> int:
    """Kafka's ListOffsets(ts): -1 (no record that late) stands for the log end offset."""
    res = lab.call("offsets_for_times", partitions=[[TOPIC, partition]], timestamp=ts_ms)[0]["offset"]
    if res < 0:
        res = lab.call("offsets", partitions=[[TOPIC, partition]])[0]["high_watermark"]
    return res


def test_expansion_order_matches_kafka(grown, spark, tmp_path):
    import pyarrow.parquet as pq

    from audit.pipeline import AuditConfig, run

    cfg = AuditConfig(
        log_dirs=[str(p) for p in grown["copies"]],
        output=str(tmp_path / "out"),
        quiet=True,
        reports=True,
        fail_on="never",
        mode="history",
    )
    result = run(cfg, spark)
    assert result.summary["reports"]["expectations"]["success"], result.summary["reports"]["expectations"]
    assert not any(k.startswith("PARTITION_EXPANSION_ORDER") for k in result.summary["rules_not_run"])
    html = (tmp_path / "out" / "report.html").read_text()
    assert "the topic grew (partition 2 added): this partition&#x27;s log stood at offset 40" in html
    rows = [
        r
        for r in pq.read_table(str(tmp_path / "out" / "findings")).to_pylist()
        if r["finding"] == "PARTITION_EXPANSION_ORDER"
    ]
    assert sorted((r["group_id"], r["partition"]) for r in rows) == [("lagging", 0), ("lagging", 1)], rows
    for r in rows:
        expanded_ms = int(r["cause_time"].timestamp() * 1000)
        assert r["offset_at_expansion"] == _kafka_offset(grown["lab"], r["partition"], expanded_ms)
        assert r["offset_at_expansion"] == BEFORE[r["partition"]]  # every record before it, none after
        assert r["committed_offset"] == {0: 10, 1: 5}[r["partition"]]
        assert r["records_at_risk"] == BEFORE[r["partition"]] - r["committed_offset"]
        assert (r["expansion_partition"], r["severity"], r["cause"]) == (2, "warning", "partition_expansion")


def test_offset_for_time_sweep_matches_kafka(grown):
    """audit.formats.time_index against Kafka's ListOffsets over every record timestamp of the log, +-1 ms."""
    from audit.formats.record_batch import extract_records, scan_batches
    from audit.formats.time_index import offset_for_time
    from audit.sources.logdirs import mmap_local

    (part_dir,) = [d for c in grown["copies"] for d in c.rglob(f"{TOPIC}-0") if d.is_dir()]
    segs = sorted(part_dir.glob("*.log"))

    def loader(path):
        def load():
            out = []
            for suffix in (".log", ".timeindex", ".index"):
                f = path.with_suffix(suffix)
                out.append(mmap_local(str(f)) if f.exists() else None)
            return tuple(out)

        return load

    stamps = set()
    for s in segs:
        buf = mmap_local(str(s))
        stamps.update(int(t) for t in extract_records(buf, scan_batches(buf)).timestamp)
    probes = sorted({t + d for t in stamps for d in (-1, 0, 1)})
    assert len(probes) >= 10
    lab = grown["lab"]
    log_end = lab.call("offsets", partitions=[[TOPIC, 0]])[0]["high_watermark"]
    mismatched = []
    for ts in probes:
        hit = offset_for_time([(int(s.stem), loader(s)) for s in segs], ts)
        ours = hit[0] if hit else log_end
        if ours != _kafka_offset(lab, 0, ts):
            mismatched.append((ts, ours))
    assert mismatched == []
