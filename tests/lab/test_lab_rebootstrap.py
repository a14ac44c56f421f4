"""KIP-1102 rebootstrap on a real cluster: every broker moves to a new address in the middle of a collection.

The audit's ``bootstrap.servers`` is a stable address (a TCP forwarder standing in for the DNS name or load
balancer of a real deployment); the brokers it learned from Metadata are the ones that go away. The collector
has fetched metadata (it is connected to the brokers) when every broker stops and comes back on a new port;
then the collection goes on:

* ``metadata.recovery.strategy=rebootstrap`` with a short ``metadata.recovery.rebootstrap.trigger.ms``: the
  collector goes back to ``bootstrap.servers``, learns the new addresses, and the audit's findings are the same
  as before the move;
* ``metadata.recovery.strategy=none``: it keeps asking the brokers it knew and fails within
  ``default.api.timeout.ms`` with an error naming them.
"""

from __future__ import annotations

import time

import pytest

from . import kafka_dist
from .client import LabClient, out_of_range_commits
from .cluster import KafkaCluster
from .forwarder import Forwarder

TOPIC, DEADLINE_MS = "events", 25_000


@pytest.fixture(scope="module", params=kafka_dist.feature_versions(1), ids=lambda v: f"kafka-{v}")
def moving(request, tmp_path_factory):
    version = request.param
    work = tmp_path_factory.mktemp(f"rebootstrap-{version}")
    cluster = KafkaCluster(version, work / "cluster", brokers=3).start()
    fwd = Forwarder(cluster.nodes[1].port)
    try:
        with LabClient(version, cluster.bootstrap, log=work / "labclient.log") as lab:
            out_of_range_commits(lab, TOPIC)
        yield {"cluster": cluster, "fwd": fwd, "work": work, "version": version}
    finally:
        fwd.close()
        cluster.stop()


def _props(work, strategy: str):
    p = work / f"client-{strategy}.properties"
    p.write_text(
        f"metadata.recovery.strategy={strategy}\nmetadata.recovery.rebootstrap.trigger.ms=2000\n"
        f"default.api.timeout.ms={DEADLINE_MS}\nrequest.timeout.ms=3000\nretry.backoff.ms=200\n"
        "retry.backoff.max.ms=1000\nreconnect.backoff.max.ms=1000\n"
    )
    return p


def _findings(out):
    import pyarrow.parquet as pq

    return sorted(
        (r["group_id"], r["topic"], r["partition"], r["finding"], r["committed_offset"])
        for r in pq.read_table(str(out / "findings")).to_pylist()
    )


def _move_every_broker(m) -> list[str]:
    """Every broker to a new port; the forwarder follows broker 1. Returns the old addresses."""
    cluster, old = m["cluster"], []
    for n in cluster.broker_nodes():
        old.append(f"127.0.0.1:{n.port}")
        new = cluster.move(n.node_id)
        if n.node_id == 1:
            m["fwd"].retarget(new)
    return old


def _audit(m, spark, out, strategy, moved: dict | None):
    """Audit through the forwarder; with ``moved``, every broker moves after the collector's first Metadata."""
    from audit.pipeline import AuditConfig, run
    from audit.sources.collector import open_collector

    props = _props(m["work"], strategy)
    bootstrap = m["fwd"].address

    def collect(reqs, parts):
        with open_collector(str(props), bootstrap_servers=bootstrap) as c:
            c.fetch_metadata({t for t, _, _ in reqs} | {t for t, _ in parts})
            moved["connected"] = sorted(f"{b.host}:{b.port}" for b in c.brokers.values())
            moved["old"] = _move_every_broker(m)
            moved["started"] = time.monotonic()
            try:
                return c.collect(reqs, bounds_partitions=parts)
            finally:
                moved["elapsed"] = time.monotonic() - moved["started"]
                moved["rebootstraps"] = c.stats.get("rebootstraps", 0)
                moved["reasons"] = list(c.rebootstrap_reasons)

    cfg = AuditConfig(
        bootstrap_servers=bootstrap,
        client_config=str(props),
        output=str(out),
        quiet=True,
        reports=False,
        fail_on="never",
    )
    return run(cfg, spark, collect=collect if moved is not None else None)


def test_rebootstrap_finishes_with_the_same_findings(moving, spark, tmp_path):
    _audit(moving, spark, tmp_path / "before", "rebootstrap", None)
    before = _findings(tmp_path / "before")
    assert {f[3] for f in before} >= {"OFFSET_OUT_OF_RANGE"}, before
    moved: dict = {}
    _audit(moving, spark, tmp_path / "after", "rebootstrap", moved)
    assert sorted(moved["connected"]) == sorted(moved["old"]), (
        moved
    )  # the collector knew exactly the brokers that moved
    assert moved["rebootstraps"] >= 1, moved
    assert any("rebootstrap.trigger.ms" in r for r in moved["reasons"]), moved["reasons"]
    assert _findings(tmp_path / "after") == before
    print(
        f"Kafka {moving['version']}: rebootstrapped {moved['rebootstraps']}x in {moved['elapsed']:.1f} s; "
        f"{len(before)} findings as before the move"
    )


def test_without_rebootstrap_it_fails_in_time_naming_the_brokers(moving, spark, tmp_path):
    from audit.sources.collector import CollectorError

    moved: dict = {}
    with pytest.raises(CollectorError) as err:
        _audit(moving, spark, tmp_path / "out", "none", moved)
    text = str(err.value)
    print(f"Kafka {moving['version']}, strategy=none, after {moved['elapsed']:.1f} s: {text}")
    assert moved["rebootstraps"] == 0
    # it stopped at its own deadline (default.api.timeout.ms), not at some other limit: no wall-clock bound here
    assert f"{DEADLINE_MS} ms deadline" in text and "metadata.recovery.strategy=none" in text, text
    assert any(addr in text for addr in moved["old"]), (text, moved["old"])
    assert not (tmp_path / "out").exists()
