"""Streams groups (KIP-1071, ``group.protocol=streams``) on real Kafka, with Kafka's own Streams client.

``tests/lab/streams_episode.py`` runs an application of two KafkaStreams instances (three members, two processes,
two subtopologies) on a fresh cluster of the newest 4.x version of the lab and records what Kafka says: Admin
``describeStreamsGroups`` (members, processes, active tasks), ``listStreamsGroupOffsets`` and, after a clean stop,
every ``__consumer_offsets`` record as Kafka's ``DumpLogSegments --offsets-decoder`` decodes it. These tests check
that Kafka did what the lab relies on: the group is split over members and processes, every input partition (the
repartition topic's too) is committed, and the log holds the StreamsGroup* records that say the same as the
description (so the description is a sound reference for the audit's owners).

The audit is run on the result twice: live while the application holds the group (``while_up``) and offline on
the copied log dirs; here only that it ran and knows the application id as a streams group.  What an owner test
needs (the audit's ``committed_offsets`` against Kafka) is in the fixture: ``description["owners"]`` maps every
source (topic, partition) to the member Kafka names (member_id, process_id, client_id, client_host), and
``audits["live"]`` (no reports, ``fail_on="never"``) / ``audits["log-dirs"]`` (``soak.audit``: the CLI's defaults)
are the two audits' results (``out``: the output dir, ``exit_code``, ``error``).
"""

from __future__ import annotations

import json
import traceback
from collections import Counter

import pytest

from . import differential, kafka_dist, soak
from .streams_episode import APP_ID, INPUT, INSTANCES, MEMBER_KEYS, PARTS, RECORDS, run_streams_lab

STREAMS_TYPES = {
    17: "StreamsGroupMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}


def _newest_4x() -> str | None:
    four = [v for v in kafka_dist.versions() if kafka_dist.major(v) >= 4]
    return max(four, key=lambda v: tuple(int(x) for x in v.split(".")), default=None)


def _live_audit(spark, out, bootstrap) -> dict:
    """The audit of the running cluster, as ``tests/lab/test_lab_owners.py`` runs it (no reports: the group is held for
    as long as it takes); the keys of :func:`soak.audit` that the tests read."""
    from audit.pipeline import AuditConfig, run

    cfg = AuditConfig(bootstrap_servers=bootstrap, output=str(out), quiet=True, reports=False, fail_on="never")
    res = {"out": out, "exit_code": None, "error": None}
    try:
        res["exit_code"] = run(cfg, spark).exit_code
    except Exception:  # noqa: BLE001 - reported by the test
        res["error"] = traceback.format_exc()
    return res


@pytest.fixture(scope="module")
def streams_lab(spark, tmp_path_factory):
    """:func:`run_streams_lab` once, with a live audit while the group is held, plus an audit of the log dirs."""
    version = _newest_4x()
    if version is None:
        pytest.skip("no Kafka 4.x version among the lab's versions (KOA_LAB_VERSIONS)")
    work = tmp_path_factory.mktemp(f"streams-{version}")
    res = run_streams_lab(
        version, work / "lab", while_up=lambda cluster: _live_audit(spark, work / "live", cluster.bootstrap)
    )
    res["audits"] = {"live": res["while_up"], "log-dirs": soak.audit(spark, work / "offline", log_dirs=res["log_dirs"])}
    return res


def _tasks(member) -> list:
    return sorted((t["subtopology_id"], p) for t in member["active_tasks"] for p in t["partitions"])


def _latest(records, rtype) -> dict:
    """member id (or None for group-level records) -> the latest value (None: tombstone) of ``rtype``."""
    out = {}
    for r in records:
        if r["type"] == rtype and r["group"] == APP_ID:
            out[r["key"].get("memberId")] = r["value"] and r["value"]["data"]
    return out


def test_group_has_members_of_two_processes(streams_lab):
    d = streams_lab["description"]
    assert d["group"] == APP_ID and d["state"].lower() == "stable"
    assert len(d["members"]) == sum(t for _, t in INSTANCES) >= 2
    assert len({m["member_id"] for m in d["members"]}) == len(d["members"])
    by_process = Counter(m["process_id"] for m in d["members"])
    assert sorted(by_process.values()) == sorted(t for _, t in INSTANCES), by_process
    for m in d["members"]:
        assert m["client_id"].startswith(f"{APP_ID}-") and m["client_host"], m
        assert not m["is_classic"] and m["member_epoch"] == d["group_epoch"]
    assert streams_lab["unchanged"], (d, streams_lab["description_again"])


def test_tasks_split_across_members(streams_lab):
    d = streams_lab["description"]
    subs = {s["subtopology_id"]: s for s in d["subtopologies"]}
    assert len(subs) == 2, subs
    sources = {sid: s["source_topics"] + sorted(s["repartition_source_topics"]) for sid, s in subs.items()}
    assert sorted(sources.values()) == sorted([[INPUT], [f"{APP_ID}-rekeyed-repartition"]]), sources
    held = [t for m in d["members"] for t in _tasks(m)]
    assert sorted(held) == sorted((sid, p) for sid in subs for p in range(PARTS)), held  # each task once
    assert all(_tasks(m) for m in d["members"]), d["members"]
    processes = {m["process_id"] for m in d["members"]}
    assert len(processes) == len(INSTANCES) >= 2


def test_owners_cover_every_source_partition(streams_lab):
    d, topics = streams_lab["description"], streams_lab["topics"]
    owners = d["owners"]
    assert set(owners) == {(t, p) for t in topics["sources"] for p in range(topics["partitions"][t])}
    members = {tuple(m[k] for k in MEMBER_KEYS) for m in d["members"]}
    assert {tuple(o[k] for k in MEMBER_KEYS) for o in owners.values()} == members  # every member owns some


def test_offsets_committed_for_every_input_partition(streams_lab):
    committed = {(c["topic"], c["partition"]): c["offset"] for c in streams_lab["committed"]}
    assert all(c["group"] == APP_ID for c in streams_lab["committed"])
    assert {p: committed.get((INPUT, p)) for p in range(PARTS)} == {p: RECORDS for p in range(PARTS)}
    ends = streams_lab["end_offsets"]
    assert {tp: committed.get(tp) for tp, end in ends.items() if end > 0} == {
        tp: end for tp, end in ends.items() if end > 0
    }
    repartition = f"{APP_ID}-rekeyed-repartition"
    assert sum(o for (t, _), o in committed.items() if t == repartition) == PARTS * RECORDS
    assert set(committed) <= set(streams_lab["description"]["owners"])


def test_consumer_offsets_hold_the_streams_group_records(streams_lab):
    """Kafka's own decoding of the log: StreamsGroup* records, and the latest of them say what the description says."""
    records = streams_lab["records"]
    types = Counter(r["type"] for r in records if r["group"] == APP_ID)
    assert set(STREAMS_TYPES) <= set(types), {STREAMS_TYPES.get(t, t): n for t, n in types.items()}
    assert types[1] >= len(streams_lab["committed"])  # OffsetCommit
    d = streams_lab["description"]
    members = {m["member_id"]: m for m in d["members"]}
    meta = _latest(records, 19)
    assert {k: (v["clientId"], v["clientHost"], v["processId"]) for k, v in meta.items() if v} == {
        k: (m["client_id"], m["client_host"], m["process_id"]) for k, m in members.items()
    }
    current = _latest(records, 22)
    assert {
        k: sorted((t["subtopologyId"], p) for t in v["activeTasks"] for p in t["partitions"])
        for k, v in current.items()
        if v
    } == {k: _tasks(m) for k, m in members.items()}
    (topology,) = _latest(records, 23).values()
    assert {
        s["subtopologyId"]: sorted(s["sourceTopics"] + [t["name"] for t in s["repartitionSourceTopics"]])
        for s in topology["subtopologies"]
    } == {
        s["subtopology_id"]: sorted(s["source_topics"] + list(s["repartition_source_topics"]))
        for s in d["subtopologies"]
    }


@pytest.mark.parametrize("mode", ["live", "log-dirs"])
def test_audit_knows_the_streams_group(streams_lab, mode):
    import pyarrow.parquet as pq

    a = streams_lab["audits"][mode]
    assert a["error"] is None and a["exit_code"] in (0, 1), a
    groups = {r["group_id"]: r for r in pq.read_table(str(a["out"] / "groups")).to_pylist()}
    assert APP_ID in groups, sorted(groups)
    assert groups[APP_ID]["group_type"] == "streams", json.dumps(groups[APP_ID], default=str)


@pytest.mark.parametrize("mode", ["live", "log-dirs"])
def test_the_audit_names_the_member_process_and_client_kafka_describes_for_every_committed_partition(streams_lab, mode):
    """Every partition the streams group committed (its input topic and its repartition topic) has, in
    ``committed_offsets/``, the owner Kafka's ``describeStreamsGroups`` gives: the member whose active task reads
    it, its Streams process id, client id and host; and ``group_type = streams``."""
    import pyarrow.parquet as pq

    a = streams_lab["audits"][mode]
    rows = [r for r in pq.read_table(str(a["out"] / "committed_offsets")).to_pylist() if r["group_id"] == APP_ID]
    owners = streams_lab["description"]["owners"]
    assert len(rows) == len(streams_lab["committed"]) == len(owners), (len(rows), len(owners))
    for r in rows:
        want = owners[(r["topic"], r["partition"])]
        got = {
            "member_id": r["owner_member_id"],
            "process_id": r["owner_process_id"],
            "client_id": r["owner_client_id"],
            "client_host": r["owner_client_host"],
        }
        assert got == {k: want[k] for k in got}, (r["topic"], r["partition"], got, want)
        assert r["group_type"] == "streams" and r["verdict"] == "OK"


# --------------------------------------------------------------------------- the soak's streams episode


@pytest.fixture(scope="module")
def streams_soak(spark, tmp_path_factory):
    """A soak scenario of one clean episode and the streams-group episode (``StreamsUnclean``: a Kafka Streams
    application whose commits sit past the divergence point of an unclean election, or at it), judged by Kafka's
    consumer and audited live and from the log dirs (``soak.check_seed``)."""
    version = _newest_4x()
    if version is None:
        pytest.skip("no Kafka 4.x version among the lab's versions (KOA_LAB_VERSIONS)")
    work = tmp_path_factory.mktemp(f"streams-soak-{version}")
    return soak.check_seed(1, version, work, spark, sources=("live", "offline"), streams=True, kinds=["clean"])


@pytest.mark.parametrize("source", ["live", "offline"])
def test_soak_streams_commits_agree_with_kafkas_consumer(streams_soak, source):
    rows = streams_soak["streams_rows"][source]
    assert rows, "the streams episode judged no group-partition"
    assert {r["oracle"] for r in rows} <= {"OK", "LogTruncationException"}, rows
    assert all(r["group_type"] == "streams" for r in rows), rows
    assert all(r["agree"] for r in rows), differential.describe_disagreements(
        rows, streams_soak["seed"], streams_soak["version"], source
    )
    # the clean episode's consumer groups of the same scenario agree too
    assert all(r["agree"] for r in streams_soak["rows"][source])
