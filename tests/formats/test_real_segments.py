"""Every record of every real sample decodes as Kafka's own decoders did.

References: ``*.decoded.jsonl`` (Kafka 3.6's generated OffsetCommitKey/Value and
GroupMetadataValue classes) next to each scenario segment, and ``kafka-dump-log
--offsets-decoder`` output for the single-broker sample.
"""

import json
import re
from collections import Counter

import pyarrow as pa
import pytest

from audit.formats.segments import decode_offsets_segment

from ..paths import REAL, SCENARIO

JSONL = sorted((SCENARIO / "dumps").glob("*/__consumer_offsets-*/*.log.decoded.jsonl"))


def _decode(path, partition=0):
    batches = decode_offsets_segment(path.read_bytes(), str(path), partition)
    table = pa.Table.from_batches(batches) if batches else None
    return [] if table is None else table.to_pylist()


def _segment_for(jsonl):
    node, part = jsonl.parent.parent.name, jsonl.parent.name
    return SCENARIO / "brokers" / node / part / jsonl.name.replace(".decoded.jsonl", "")


def test_scenario_reference_files_exist():
    assert len(JSONL) >= 24  # 8 __consumer_offsets partitions x 3 brokers


@pytest.mark.parametrize("jsonl", JSONL, ids=[f"{p.parent.parent.name}/{p.parent.name}" for p in JSONL])
def test_scenario_segment_matches_kafka_decoding(jsonl):
    expected = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    rows = _decode(_segment_for(jsonl))
    assert not [r for r in rows if r["kind"] == "issue"]
    assert len(rows) == len(expected)
    for got, exp in zip(rows, expected):
        assert got["offset"] == exp["offset"]
        assert got["timestamp"] == exp["timestamp"]
        assert got["batch_leader_epoch"] == exp["batch_partition_leader_epoch"]
        assert got["is_transactional"] == exp["is_transactional"]
        assert got["producer_id"] == exp["producer_id"]
        if exp["type"] == "control":
            assert got["kind"] == "control"
            assert got["control_type"] == {"ABORT": 0, "COMMIT": 1}[exp["control_type"]]
            continue
        assert got["kind"] == "record" and got["decode_error"] is None
        assert got["record_type"] == exp["key_version"]
        assert got["group_id"] == exp["group"]
        if exp["type"] == "offset_commit":
            assert got["topic"] == exp["topic"] and got["partition"] == exp["partition"]
            assert got["is_tombstone"] == (exp.get("value_version") is None)
            if not got["is_tombstone"]:
                assert got["value_version"] == exp["value_version"]
                assert got["committed_offset"] == exp["committed_offset"]
                assert got["leader_epoch"] == exp["committed_leader_epoch"]
                assert got["metadata"] == exp["metadata"]
                assert got["commit_timestamp"] == exp["commit_timestamp"]
                assert got["expire_timestamp"] == (
                    exp["expire_timestamp"] if exp["expire_timestamp"] is not None else -1
                )
        elif exp["type"] == "group_metadata":
            if exp.get("value_version") is not None:
                assert got["group_generation"] == exp["generation"]
                assert got["group_protocol_type"] == exp["protocol_type"]


DUMP_LINE = re.compile(r"^\| offset: (\d+) .*?key: (\w+)::group=([^,\s]+)(?:,partition=(\S+)-(\d+))? payload: (.*)$")


@pytest.mark.parametrize(
    "dump", sorted((REAL / "kraft-3.6-single-broker/dumps").glob("__consumer_offsets-*.dump.txt")), ids=lambda p: p.name
)
def test_single_broker_sample_matches_dump_log(dump):
    part = dump.name.split(".")[0]
    seg = REAL / "kraft-3.6-single-broker/data" / part / "00000000000000000000.log"
    rows = {r["offset"]: r for r in _decode(seg, int(part.rsplit("-", 1)[1])) if r["kind"] == "record"}
    seen = 0
    for line in dump.read_text().splitlines():
        m = DUMP_LINE.match(line)
        if not m:
            continue
        off, kind, group, topic, tp, payload = m.groups()
        got = rows[int(off)]
        assert got["group_id"] == group
        seen += 1
        if kind == "offset_commit":
            assert (got["topic"], got["partition"]) == (topic, int(tp))
            if payload == "<DELETE>":
                assert got["is_tombstone"]
                continue
            fields = dict(kv.split("=", 1) for kv in payload.split(","))
            assert got["committed_offset"] == int(fields["offset"])
            assert got["metadata"] == fields.get("metadata", "")
        else:
            assert got["record_type"] == 2
            if payload != "<DELETE>":
                assert got["group_generation"] == json.loads(payload)["generationId"]
    assert seen == len(rows)


def _decode_dir(root):
    rows = []
    for seg in sorted(root.glob("**/__consumer_offsets-*/*.log")):
        rows += _decode(seg, int(seg.parent.name.rsplit("-", 1)[1]))
    return rows


def _versions(rows):
    return Counter(
        (r["record_type"], r["value_version"]) for r in rows if r["kind"] == "record" and not r["is_tombstone"]
    )


def test_zk_broker_sample_has_993_v3_commits():
    rows = _decode_dir(REAL / "zk-broker-2.x")
    assert not [r for r in rows if r["kind"] == "issue" or r["decode_error"]]
    commits = [r for r in rows if r["kind"] == "record" and r["record_type"] == 1 and not r["is_tombstone"]]
    assert len(commits) == 993
    assert {r["value_version"] for r in commits} == {3}
    assert {r["leader_epoch"] for r in commits} == {0, -1}
    assert any(r["is_tombstone"] for r in rows)


def test_kraft_4_sample_has_252_v4_flexible_commits():
    rows = _decode_dir(REAL / "kraft-4.x")
    assert not [r for r in rows if r["kind"] == "issue" or r["decode_error"]]
    commits = [r for r in rows if r["record_type"] == 1 and r["value_version"] == 4]
    assert len(commits) == 252
    assert {r["batch_leader_epoch"] for r in commits} == {0, 2}
    assert all(r["group_id"] == "demo-group" and r["topic"] == "demo-topic" for r in commits)


def test_kraft_37_and_31_samples_decode_without_errors():
    rows = _decode_dir(REAL / "kraft-3.7")
    assert not [r for r in rows if r["kind"] == "issue" or r["decode_error"]]
    assert {r["leader_epoch"] for r in rows if r["record_type"] == 1 and not r["is_tombstone"]} == {-1}
    assert _versions(rows)[(1, 3)] > 0 and _versions(rows)[(2, 3)] > 0
    rows = _decode_dir(REAL / "kraft-3.1-groupmeta")
    assert rows and {r["record_type"] for r in rows} == {2}
    assert not [r for r in rows if r["decode_error"]]
