"""KIP-526 on a real cluster of 1,000 topics: an audit scoped to 10 of them asks metadata only for those.

The broker logs every request it completes (``kafka.request.logger`` at DEBUG, request bodies included).
While the audit of ``--topics 'scope-.*'`` runs -- the ``__consumer_offsets`` data source's planning and
reading, then the collector -- every Metadata request the broker receives must name its topics (never the
"all topics" form, ``topics: null``), name only in-scope topics or ``__consumer_offsets``, and carry at most
``metadata_batch_size`` (100) topics.
"""

from __future__ import annotations

import json

import pytest

from . import kafka_dist
from .client import LabClient
from .cluster import KafkaCluster

SCOPE = [f"scope-{i:02d}" for i in range(10)]
OTHERS = [f"other-{i:04d}" for i in range(990)]


def _requests(text: str) -> list[dict]:
    """Every completed request the broker logged, as its JSON (requestHeader, request, ...)."""
    out, dec = [], json.JSONDecoder()
    for line in text.splitlines():
        i = line.find("Completed request:")
        if i < 0:
            continue
        j = line.find("{", i)
        try:
            obj, _ = dec.raw_decode(line[j:])
        except ValueError:
            continue
        out.append(obj)
    return out


@pytest.fixture(scope="module", params=kafka_dist.feature_versions(0), ids=lambda v: f"kafka-{v}")
def wide(request, tmp_path_factory):
    version = request.param
    work = tmp_path_factory.mktemp(f"kip526-{version}")
    cluster = KafkaCluster(
        version, work / "cluster", brokers=1, heap="512m", loggers={"kafka.request.logger": "DEBUG"}
    ).start()
    try:
        with LabClient(version, cluster.bootstrap, log=work / "labclient.log") as lab:
            names = SCOPE + OTHERS
            for k in range(0, len(names), 250):
                lab.call("create_topics", names=names[k : k + 250], partitions=1, rf=1)
            for t in SCOPE + OTHERS[:10]:
                lab.call("produce", topic=t, partition=0, count=5, acks="all")
            lab.call("consume_commit", group="wide", topics=SCOPE + OTHERS[:10])
        yield {"cluster": cluster, "work": work, "version": version}
    finally:
        cluster.stop()


def test_scoped_audit_sends_only_scoped_metadata_requests(wide, spark, tmp_path):
    from audit.pipeline import AuditConfig, run

    cluster = wide["cluster"]
    log = cluster.nodes[1].log_file
    start = log.stat().st_size
    props = tmp_path / "client.properties"
    props.write_text("client.id=koa-audit-kip526\n")
    result = run(
        AuditConfig(
            bootstrap_servers=cluster.bootstrap,
            client_config=str(props),
            topics="scope-.*",
            output=str(tmp_path / "out"),
            quiet=True,
            reports=False,
            fail_on="never",
        ),
        spark,
    )
    with open(log, "rb") as fh:
        fh.seek(start)
        reqs = _requests(fh.read().decode(errors="replace"))
    assert result.summary["offset_commits"]["group_partitions"] == len(SCOPE)

    metadata = [r for r in reqs if r["requestHeader"]["requestApiKey"] == 3]
    assert metadata, "no Metadata request logged: is kafka.request.logger at DEBUG?"
    clients = {r["requestHeader"].get("clientId") for r in metadata}
    all_topics = [r for r in metadata if r["request"].get("topics") is None]
    assert all_topics == [], f"'all topics' Metadata requests from {[r['requestHeader'] for r in all_topics]}"
    named = [[t["name"] for t in r["request"]["topics"]] for r in metadata]
    # the audit's own inputs besides the scope: __consumer_offsets and (share groups, KIP-932) __share_group_state
    out_of_scope = sorted({t for ts in named for t in ts} - set(SCOPE) - {"__consumer_offsets", "__share_group_state"})
    assert out_of_scope == [], out_of_scope
    assert max(len(ts) for ts in named) <= 100
    assert set(SCOPE) <= {t for ts in named for t in ts}  # the collector asked about every topic in scope
    assert ["__consumer_offsets"] in named  # the data source's planning, scoped to its one topic
    # the share groups' state is asked for alone, never in a request naming other topics
    assert all(ts == ["__share_group_state"] for ts in named if "__share_group_state" in ts), named
    print(
        f"Kafka {wide['version']}: {len(metadata)} Metadata requests from {sorted(map(str, clients))}, "
        f"{len(reqs)} requests in all; largest {max(len(ts) for ts in named)} topics; none for all topics"
    )
