"""Kafka 4.4.0 and 3.9.2 records read offline: every valid record decodes or is counted by name.

Inputs are real log segments captured from the project's Kafka lab (``tests/data/kafka-4.4.0/``,
``tests/data/kafka-3.9.2/``, provenance in their README.md), with Kafka's own decoding of each
``__cluster_metadata`` record (``MetadataRecordSerde`` of that version) as the reference.
"""

from __future__ import annotations

import collections
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from audit.formats.metadata_log import decode_metadata_value
from audit.formats.offsets import RECORD_TYPE_NAMES, decode_offsets_kv
from audit.formats.record_batch import ATTR_CONTROL, extract_records, scan_batches
from audit.formats.segments import decode_offsets_segment

DATA = Path(__file__).parents[1] / "data"
VERSIONS = ["4.4.0", "3.9.2"]


def _dir(version: str) -> Path:
    return DATA / f"kafka-{version}"


def _metadata_records(version: str):
    """(offset, value bytes) of every non-control record of the controller's metadata log."""
    path = _dir(version) / "controller-100/__cluster_metadata-0/00000000000000000000.log"
    buf = path.read_bytes()
    scan = scan_batches(buf)
    assert not scan.issues
    recs = extract_records(buf, scan)
    ctl = (scan.attributes[recs.batch] & ATTR_CONTROL) != 0
    return [
        (
            int(recs.offset[j]),
            recs.data[int(recs.value_start[j]) : int(recs.value_start[j]) + int(recs.value_len[j])].tobytes(),
        )
        for j in range(len(recs))
        if not ctl[j]
    ]


def _kafka_decoded(version: str) -> dict[int, dict]:
    lines = (_dir(version) / "cluster_metadata-0.kafka-decoded.jsonl").read_text().splitlines()
    return {r["offset"]: r for r in map(json.loads, lines)}


# --------------------------------------------------------------------------- __cluster_metadata


@pytest.mark.parametrize("version", VERSIONS)
def test_every_metadata_record_decodes_with_kafkas_type_and_version(version):
    records = _metadata_records(version)
    ref = _kafka_decoded(version)
    assert [o for o, _ in records] == sorted(ref)
    for off, value in records:
        row = decode_metadata_value(value)  # raises MetadataDecodeError on failure
        assert (row["record_type"], row["record_version"]) == (ref[off]["type"], ref[off]["version"]), off


@pytest.mark.parametrize("version", VERSIONS)
def test_metadata_fields_match_kafkas_decoding(version):
    ref = _kafka_decoded(version)
    checked = collections.Counter()
    for off, value in _metadata_records(version):
        row, k = decode_metadata_value(value), ref[off]
        t = k["type"]
        if t in ("PartitionRecord", "PartitionChangeRecord"):
            assert (row["topic_id"], row["partition"], row["leader"]) == (
                k["topicId"],
                k["partitionId"],
                k["leader"],
            ), off
            assert row["isr"] == k["isr"] and row["replicas"] == k["replicas"], off
            assert row["eligible_leader_replicas"] == k.get("eligibleLeaderReplicas"), off
            assert row["last_known_elr"] == k.get("lastKnownElr"), off
            if t == "PartitionRecord":
                assert (row["leader_epoch"], row["partition_epoch"]) == (k["leaderEpoch"], k["partitionEpoch"]), off
                assert row["leader_recovery_state"] == k["leaderRecoveryState"], off
            else:
                assert row["leader_recovery_state"] == (
                    None if k["leaderRecoveryState"] == -1 else k["leaderRecoveryState"]
                )
        elif t in ("RegisterBrokerRecord", "UnregisterBrokerRecord", "BrokerRegistrationChangeRecord"):
            assert (row["broker_id"], row["broker_epoch"]) == (k["brokerId"], k["brokerEpoch"]), off
            if t == "RegisterBrokerRecord":
                assert row["fenced"] == (1 if k["fenced"] else -1), off
            elif t == "BrokerRegistrationChangeRecord":
                assert row["fenced"] == k.get("fenced", 0), off
                if "inControlledShutdown" in k:  # the recorded reference names it only in newer recordings
                    assert row["in_controlled_shutdown"] == k["inControlledShutdown"], off
        elif t in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
            assert (row["broker_id"], row["broker_epoch"]) == (k["id"], k["epoch"]), off
            assert row["fenced"] == (1 if t == "FenceBrokerRecord" else -1), off
        elif t == "TopicRecord":
            assert (row["topic_name"], row["topic_id"]) == (k["name"], k["topicId"]), off
        elif t == "ClearElrRecord":
            assert row["topic_name"] == k["topicName"], off
        else:
            continue
        checked[t] += 1
    assert checked["PartitionRecord"] >= 10 and checked["PartitionChangeRecord"] >= 20
    assert checked["RegisterBrokerRecord"] == 3 and checked["BrokerRegistrationChangeRecord"] >= 3


def test_kafka_4_4_writes_register_broker_v4_clear_elr_and_elr_fields():
    """The records the pre-4.x decoder rejected or did not know, as a 4.4.0 controller wrote them."""
    rows = [decode_metadata_value(v) for _o, v in _metadata_records("4.4.0")]
    versions = collections.Counter((r["record_type"], r["record_version"]) for r in rows)
    assert versions[("RegisterBrokerRecord", 4)] == 3
    assert versions[("BrokerRegistrationChangeRecord", 3)] >= 1
    assert {r["broker_id"] for r in rows if r["record_type"] == "RegisterBrokerRecord"} == {1, 2, 3}
    assert {r["topic_name"] for r in rows if r["record_type"] == "ClearElrRecord"} == {
        "__transaction_state",
        "__share_group_state",
    }
    # KIP-966 fields are there (tagged, v2) on some partition changes: ELR lists, possibly empty
    assert any(r["eligible_leader_replicas"] is not None for r in rows if r["record_type"] == "PartitionChangeRecord")
    assert not any(r["record_type"].startswith("api_key_") for r in rows)


def test_register_broker_v4_with_cordoned_log_dirs_tag():
    """RegisterBrokerRecord v4 carrying tag 1 (CordonedLogDirs, nullable []uuid), built per the schema."""

    def uv(n):
        return bytes([n])  # every value below is < 128

    # EndPoints: one entry {Name "P", Host "h", Port 9092, SecurityProtocol 0, no tags}
    endpoints = uv(2) + uv(2) + b"P" + uv(2) + b"h" + struct.pack(">Hh", 9092, 0) + uv(0)
    features = uv(1)  # empty array
    body = (
        struct.pack(">i", 7)
        + b"\x00"
        + b"\x11" * 16
        + struct.pack(">q", 42)
        + endpoints
        + features
        + uv(0)  # Rack null
        + b"\x01\x00"
    )  # Fenced, InControlledShutdown
    cordoned = uv(2) + b"\x22" * 16
    logdirs = uv(2) + b"\x33" * 16
    tags = uv(2) + uv(0) + uv(len(logdirs)) + logdirs + uv(1) + uv(len(cordoned)) + cordoned
    row = decode_metadata_value(b"\x01\x00\x04" + body + tags)
    assert (row["record_type"], row["record_version"], row["broker_id"], row["broker_epoch"]) == (
        "RegisterBrokerRecord",
        4,
        7,
        42,
    )


# --------------------------------------------------------------------------- __consumer_offsets


def _offsets_rows(version: str):
    """Decoded record rows (dicts) of every __consumer_offsets segment of broker-1."""
    out = []
    for log in sorted((_dir(version) / "broker-1").glob("__consumer_offsets-*/*.log")):
        part = int(log.parent.name.rsplit("-", 1)[1])
        for b in decode_offsets_segment(log.read_bytes(), str(log), part):
            out += [dict(r, source_partition=part) for r in b.to_pylist()]
    return out


@pytest.mark.parametrize(
    "version, types",
    [
        ("4.4.0", {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16}),
        ("3.9.2", {1, 2, 3, 4, 5, 6, 7, 8, 10, 11}),
    ],
)
def test_consumer_offsets_new_group_records_are_known_not_errors(version, types):
    rows = _offsets_rows(version)
    assert not [r for r in rows if r["kind"] == "issue"]
    records = [r for r in rows if r["kind"] == "record"]
    assert [r for r in records if r["decode_error"] is not None] == []
    assert {r["record_type"] for r in records} == types
    other = [r for r in records if r["record_type"] >= 3]
    # every KIP-848 / share record carries its group id, none is mistaken for a commit
    assert all(r["group_id"] and r["topic"] is None and r["committed_offset"] == -1 for r in other)
    groups = {RECORD_TYPE_NAMES[r["record_type"]]: set() for r in other}
    for r in other:
        groups[RECORD_TYPE_NAMES[r["record_type"]]].add(r["group_id"])
    assert "g848" in groups["ConsumerGroupMetadata"] and "gshare" in groups["ShareGroupMetadata"]
    if version == "4.4.0":
        assert groups["ConsumerGroupRegularExpression"] == {"gregex"}
    commits = [r for r in records if r["record_type"] == 1 and not r["is_tombstone"]]
    assert commits and all(r["value_version"] == (4 if version == "4.4.0" else 3) for r in commits)


def test_classic_to_consumer_group_conversion_sequence_is_decoded():
    """Kafka 4.4.0, group ``gmig``: classic commit, then a consumer-protocol member joins the empty
    classic group: the coordinator writes a GroupMetadata tombstone but no offset tombstone (the
    commit stays valid; the new member resumed from it), then the KIP-848 records."""
    rows = [r for r in _offsets_rows("4.4.0") if r["kind"] == "record" and r["group_id"] == "gmig"]
    seq = [(RECORD_TYPE_NAMES[r["record_type"]], r["is_tombstone"], r["committed_offset"]) for r in rows]
    first_commit = seq.index(("OffsetCommit", False, 20))
    group_tomb = seq.index(("GroupMetadata", True, -1))
    assert (
        first_commit
        < group_tomb
        < seq.index(("ConsumerGroupMetadata", False, -1))
        < seq.index(("OffsetCommit", False, 25))
    )
    assert ("OffsetCommit", True, -1) not in seq


def _kv(key: bytes, value: bytes | None) -> dict:
    data = np.frombuffer(key + (value or b""), dtype=np.uint8)
    out = decode_offsets_kv(
        data, np.array([0]), np.array([len(key)]), np.array([len(key)]), np.array([-1 if value is None else len(value)])
    )
    return {k: (a[0].as_py() if hasattr(a, "to_pylist") else a[0].item()) for k, a in out.items()}


@pytest.mark.parametrize(
    "rtype, name",
    [
        (9, "ShareGroupPartitionMetadata"),
        (17, "StreamsGroupMetadata"),
        (18, "StreamsGroupPartitionMetadata"),
        (19, "StreamsGroupMemberMetadata"),
        (20, "StreamsGroupTargetAssignmentMetadata"),
        (21, "StreamsGroupTargetAssignmentMember"),
        (22, "StreamsGroupCurrentMemberAssignment"),
        (23, "StreamsGroupTopology"),
    ],
)
def test_streams_and_older_share_record_keys_are_known(rtype, name):
    """Keys per ``StreamsGroup*Key.json`` (4.4.0) / ``ShareGroupPartitionMetadataKey.json`` (3.9.2):
    GroupId (+ MemberId) as classic strings; the record types the lab cannot produce here."""
    key = struct.pack(">hh", rtype, 2) + b"sg" + (struct.pack(">h", 1) + b"m" if rtype in (19, 21, 22) else b"")
    for value in (b"\x00\x00\x00", None):
        row = _kv(key, value)
        assert row["decode_error"] is None and row["group_id"] == "sg" and row["record_type"] == rtype
        assert row["topic"] is None and row["committed_offset"] == -1
    assert RECORD_TYPE_NAMES[rtype] == name
    assert _kv(struct.pack(">hh", 24, 2) + b"sg", b"\x00\x00")["decode_error"] == "unknown_record_type"
    assert _kv(struct.pack(">hh", 17, 9) + b"sg", b"\x00\x00")["decode_error"] == "malformed_key"


# --------------------------------------------------------------------------- offline audit


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_offline_audit_skips_nothing(audit_dirs, version):
    d = _dir(version)
    result, out = audit_dirs(f"kafka-{version}", [d / "broker-1", d / "controller-100"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records_skipped"]["by_reason"] == {}
    by_type = summary["records_read"]["by_record_type"]
    assert not [k for k in by_type if k.startswith("type_")]
    assert by_type.get("ConsumerGroupMetadata v0", 0) > 0 and by_type.get("ShareGroupMetadata v0", 0) > 0
    assert summary["inputs"]["metadata_log"].startswith("broker 100 ")
    assert summary["offset_commits"]["live"] > 0


def test_commits_carry_the_topic_id_kafka_wrote_in_v4():
    """Kafka 4.4.0 writes OffsetCommitValue v4 with the tagged ``topicId`` (tag 0): it is the id the topic's replica
    dirs hold in ``partition.metadata``; Kafka 3.9.2's v3 values have none."""
    ids = {}
    for pm in _dir("4.4.0").glob("broker-*/*-*/partition.metadata"):
        topic = pm.parent.name.rsplit("-", 1)[0]
        ids.setdefault(topic, set()).add(pm.read_text().split("topic_id:")[1].strip())
    commits = [
        r for r in _offsets_rows("4.4.0") if r["kind"] == "record" and r["record_type"] == 1 and not r["is_tombstone"]
    ]
    assert {r["topic"] for r in commits} == {"t1", "t2"}
    for r in commits:
        assert ids[r["topic"]] == {r["topic_id"]}, (r["topic"], r["topic_id"], ids.get(r["topic"]))
    old = [r for r in _offsets_rows("3.9.2") if r["kind"] == "record" and r["record_type"] == 1]
    assert old and {r["topic_id"] for r in old} == {None}


@pytest.mark.parametrize(
    "tags, expected",
    [
        (b"\x01\x00\x10" + bytes(range(16)), "AAECAwQFBgcICQoLDA0ODw"),  # tag 0 alone
        (b"\x02\x00\x10" + bytes(range(16)) + b"\x07\x01\x05", "AAECAwQFBgcICQoLDA0ODw"),  # and a later unknown tag
        (b"\x00", None),  # no tagged field
        (b"\x01\x03\x02\xff\xff", None),  # only an unknown tag
        (b"\x01\x00\x08" + bytes(8), None),  # tag 0 of the wrong size
        (b"\x01\x00\x10" + bytes(10), None),  # truncated uuid
    ],
)
def test_v4_tagged_topic_id(tags, expected):
    key = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
    value = struct.pack(">hqi", 4, 42, 3) + b"\x01" + struct.pack(">q", 1000) + tags
    row = _kv(key, value)
    assert (row["committed_offset"], row["leader_epoch"], row["topic_id"]) == (42, 3, expected)
    assert row["decode_error"] is None


@pytest.mark.parametrize("version", VERSIONS)
def test_partition_metadata_files_kafka_wrote_parse(version):
    from audit.formats.checkpoints import parse_partition_metadata

    files = list(_dir(version).glob("broker-*/*-*/partition.metadata"))
    assert files
    for pm in files:
        tid, problem = parse_partition_metadata(pm.read_text())
        assert problem is None and len(tid) == 22, (pm, problem)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("version: 1\ntopic_id: AAECAwQFBgcICQoLDA0ODw\n", "version '1' is not 0"),
        ("version: 0\n", "no topic_id line"),
        ("version: 0\ntopic_id: AAECAwQF\n", "is not a 16-byte uuid"),
        ("version: 0\ntopic_id: !!!!\n", "is not a 16-byte uuid"),
        ("", "version None is not 0"),
        ("version 0\n", "is not 'key: value'"),
    ],
)
def test_bad_partition_metadata_says_what(text, problem):
    from audit.formats.checkpoints import parse_partition_metadata

    tid, got = parse_partition_metadata(text)
    assert tid is None and problem in got
