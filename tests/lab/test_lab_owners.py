"""Partition owners against Kafka's own answer: ``Admin.describeConsumerGroups`` on a running cluster.

Two members stay in each group while the audit runs (``LabClient`` ``hold``): a classic group (one member
static, ``group.instance.id``) and, on 4.x, a KIP-848 consumer group (``group.protocol=consumer``). Once
Kafka describes every group as Stable with all partitions assigned, the audit's ``committed_offsets`` must
name, for every assigned group-partition, the member Kafka names: member id, ``group.instance.id``,
``client.id`` and host. Both from a live audit (KIP-848 topic ids named through Metadata v10+) and from a copy of
the log dirs (named through the KRaft metadata log).
"""

from __future__ import annotations

import time

import pytest

from . import kafka_dist
from .client import LabClient
from .cluster import KafkaCluster
from .scenario import copy_log_dirs

TOPIC, PARTS = "owned", 4


def _settled(described) -> bool:
    return all(
        g["state"].lower() == "stable"
        and len(g["members"]) == 2
        and sum(len(m["partitions"]) for m in g["members"]) == PARTS
        for g in described
    )


@pytest.fixture(scope="module", params=kafka_dist.feature_versions(0), ids=lambda v: f"kafka-{v}")
def held(request, tmp_path_factory):
    version = request.param
    work = tmp_path_factory.mktemp(f"owners-{version}")
    cluster = KafkaCluster(version, work / "cluster", brokers=1).start()
    try:
        with LabClient(version, cluster.bootstrap, log=work / "labclient.log") as lab:
            lab.call("create_topic", topic=TOPIC, partitions=PARTS, rf=1)
            for p in range(PARTS):
                lab.call("produce", topic=TOPIC, partition=p, count=5, acks="all")
            groups = {"classic-g": "classic"}
            if kafka_dist.major(version) >= 4:
                groups["kip848-g"] = "consumer"
            for g, proto in groups.items():
                lab.call(
                    "hold",
                    group=g,
                    topics=[TOPIC],
                    client_id=f"{g}-a",
                    protocol=proto,
                    instance_id=f"{g}-static" if proto == "classic" else None,
                )
                lab.call("hold", group=g, topics=[TOPIC], client_id=f"{g}-b", protocol=proto)
            deadline = time.monotonic() + 90
            while not _settled(described := lab.call("describe_groups", groups=list(groups))):
                assert time.monotonic() < deadline, f"groups never settled: {described}"
                time.sleep(0.5)
            time.sleep(2)  # a commit of every member after the last assignment
            described = lab.call("describe_groups", groups=list(groups))
            assert _settled(described), described
            yield {"version": version, "cluster": cluster, "described": described, "work": work}
            lab.call("release")
    finally:
        cluster.stop()


def _expected(described) -> dict:
    out = {}
    for g in described:
        for m in g["members"]:
            for topic, p in m["partitions"]:
                out[(g["group"], topic, p)] = (m["member_id"], m["instance_id"], m["client_id"], m["host"], "stable")
    return out


def _owners(out_dir, keys) -> dict:
    import pyarrow.parquet as pq

    rows = pq.read_table(str(out_dir / "committed_offsets")).to_pylist()
    got = {
        (r["group_id"], r["topic"], r["partition"]): (
            r["owner_member_id"],
            r["owner_group_instance_id"],
            r["owner_client_id"],
            r["owner_client_host"],
            (r["group_state"] or "").lower(),
        )
        for r in rows
    }
    return {k: got.get(k) for k in keys}


@pytest.mark.parametrize("mode", ["live", "log-dirs"])
def test_owners_match_describe_consumer_groups(held, spark, tmp_path, mode):
    from audit.pipeline import AuditConfig, run

    if mode == "live":
        cfg = AuditConfig(
            bootstrap_servers=held["cluster"].bootstrap,
            output=str(tmp_path / "out"),
            quiet=True,
            reports=False,
            fail_on="never",
        )
    else:
        dirs = copy_log_dirs(held["cluster"], tmp_path / "copy")
        cfg = AuditConfig(
            log_dirs=[str(p) for p in dirs], output=str(tmp_path / "out"), quiet=True, reports=False, fail_on="never"
        )
    run(cfg, spark)
    expected = _expected(held["described"])
    assert len(expected) == PARTS * len(held["described"])
    assert _owners(tmp_path / "out", expected) == expected
