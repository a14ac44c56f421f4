"""Partition owners and group state (issue 12, "whose consumer is it").

The reference is Kafka's own decoding: ``kafka-dump-log --offsets-decoder`` prints every GroupMetadataValue's
assignment as ``{member=[topic-partition, ...]}`` (``GroupMetadataManager.formatRecordKeyAndValue``).  The
shared samples carry dumps Kafka wrote; for the recorded lab scenarios the test runs Kafka 4.4.0's
``kafka.tools.DumpLogSegments`` itself.  The SQL (``sql/group_state.sql``, ``sql/partition_owners.sql``) is
tested on small inline tables.
"""

import json
import re
import struct
import subprocess
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import Row

from audit.formats.offsets import AssignmentLimitError, decode_consumer_assignment, decode_group_metadata_value
from audit.formats.segments import RAW_SCHEMA, decode_offsets_segment
from audit.owners import OWNER_COLUMNS, group_tables, with_owners

from ..paths import REAL, SCENARIO

LAB_RECORDED = Path(__file__).parents[1] / "data" / "lab-scenarios"
GROUP_LINE = re.compile(r"^\| offset: (\d+) .*?key: group_metadata::group=(\S+) payload: (.*)$")


def _dump_records(pattern: re.Pattern, dump_text: str):
    """(offset, key, payload) of the dump-log lines ``pattern`` matches."""
    for line in dump_text.splitlines():
        m = pattern.match(line)
        if m:
            off, key, payload = m.groups()
            yield int(off), key, payload.strip()


def _kafka_dump(segments: list[Path]) -> dict:
    """path -> Kafka's ``DumpLogSegments --offsets-decoder`` output for it (3.9.2's ``kafka.tools`` class; 4.x
    moved it to ``kafka-tools``, which the lab classpath does not carry)."""
    from ..lab.kafka_dist import java, java_classpath

    proc = subprocess.run(
        [
            java(),
            "-cp",
            java_classpath("3.9.2"),
            "kafka.tools.DumpLogSegments",
            "--offsets-decoder",
            "--print-data-log",
            "--files",
            ",".join(map(str, segments)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    chunks = re.split(r"^Dumping (\S+)$", proc.stdout, flags=re.M)
    return dict(zip(chunks[1::2], chunks[2::2]))


def _kafka_assignments(dump_text: str) -> dict:
    """offset -> {member_id: sorted ["topic-partition"]} (None for a tombstone) from dump-log output."""
    out = {}
    for off, _group, payload in _dump_records(GROUP_LINE, dump_text):
        if payload == "<DELETE>":
            out[off] = None
            continue
        text = json.loads(payload)["assignment"]
        members = {}
        for mm in re.finditer(r"([^{}=,\s][^=]*?)=\[([^\]]*)\]", text):
            members[mm.group(1)] = sorted(p.strip() for p in mm.group(2).split(",") if p.strip())
        out[off] = members
    return out


def _group_values(segment: Path) -> dict:
    """offset -> GroupMetadataValue bytes (None for a tombstone) of every group metadata record of a segment."""
    from audit.formats.record_batch import extract_records, scan_batches

    buf = segment.read_bytes()
    recs = extract_records(buf, scan_batches(buf))
    out = {}
    for i in range(len(recs.offset)):
        ks, kl = int(recs.key_start[i]), int(recs.key_len[i])
        if kl < 2 or struct.unpack(">h", recs.data[ks : ks + 2].tobytes())[0] != 2:
            continue
        vs, vl = int(recs.value_start[i]), int(recs.value_len[i])
        out[int(recs.offset[i])] = None if vl < 0 else recs.data[vs : vs + vl].tobytes()
    return out


def _our_assignments(segment: Path) -> dict:
    out = {}
    for off, value in _group_values(segment).items():
        if value is None:
            out[off] = None
            continue
        members = {}
        for m in decode_group_metadata_value(value)["member_list"]:
            for t, parts in m["assignment"] or ():
                members.setdefault(m["member_id"], []).extend(f"{t}-{p}" for p in parts)
        out[off] = {k: sorted(v) for k, v in members.items()}
    return out


def _owner_rows(segment: Path, partition: int = 0) -> dict:
    """offset -> sorted (member, instance, client, host, topic, partition) of the rows the segment decoder filled
    ``group_owners`` on."""
    t = pa.Table.from_batches(decode_offsets_segment(segment.read_bytes(), str(segment), partition), schema=RAW_SCHEMA)
    out = {}
    for r in t.to_pylist():
        if r["kind"] == "record" and r["record_type"] == 2:
            assert r["decode_error"] is None, r
            if r["group_owners"] is not None:
                out[r["offset"]] = (
                    r["group_id"],
                    sorted(
                        (o["member_id"], o["group_instance_id"], o["client_id"], o["client_host"], o["topic"], p)
                        for o in r["group_owners"]
                        for p in o["partitions"]
                    ),
                )
    return out


def _same(kafka: dict, ours: dict):
    # dump-log prints members with an empty assignment as member=[]; the owners list has no row for them
    kafka = {off: None if m is None else {k: v for k, v in m.items() if v} for off, m in kafka.items()}
    assert ours == kafka


SHARED_DUMPS = sorted((SCENARIO / "dumps").glob("*/__consumer_offsets-*/*.consumer_offsets.txt")) + sorted(
    (REAL / "kraft-3.6-single-broker/dumps").glob("__consumer_offsets-*.dump.txt")
)


def _segment_of(dump: Path) -> tuple[Path, int]:
    if dump.name.endswith(".dump.txt"):
        part = dump.name.split(".")[0]
        return REAL / "kraft-3.6-single-broker/data" / part / "00000000000000000000.log", int(part.rsplit("-", 1)[1])
    node, part = dump.parent.parent.name, dump.parent.name
    return SCENARIO / "brokers" / node / part / (dump.name.split(".log")[0] + ".log"), int(part.rsplit("-", 1)[1])


@pytest.mark.parametrize("dump", SHARED_DUMPS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name[:24]}")
def test_assignments_equal_kafkas_dump_log(dump):
    seg, _part = _segment_of(dump)
    _same(_kafka_assignments(dump.read_text()), _our_assignments(seg))


def test_the_shared_dumps_hold_assignments():
    members = [m for d in SHARED_DUMPS for m in _kafka_assignments(d.read_text()).values() if m]
    assert len(members) >= 4 and any(len(v) >= 3 for m in members for v in m.values())


JSON_LINE = re.compile(r'^\| offset: (\d+) .*?key: (\{"type":"2".*?\}) payload: (.*)$')


def _kafka_owner_rows(dump_text: str) -> tuple[dict, dict]:
    """(offset -> sorted (member_id, group_instance_id, client_id, client_host, topic, partition), None for a
    tombstone; offset -> group) from Kafka 3.9's JSON ``--offsets-decoder`` output."""
    out, groups = {}, {}
    for off, key, payload in _dump_records(JSON_LINE, dump_text):
        groups[off] = json.loads(key)["data"]["group"]
        if payload in ("<DELETE>", "null"):
            out[off] = None
            continue
        data = json.loads(payload)["data"]
        out[off] = sorted(
            (mem["memberId"], mem["groupInstanceId"], mem["clientId"], mem["clientHost"], a["topic"], p)
            for mem in data["members"]
            for a in (mem["assignment"] or {}).get("assignedPartitions", [])
            for p in a["partitions"]
        )
    return out, groups


def _newest_with_members(kafka: dict, groups: dict) -> dict:
    """The rows the segment decoder fills owners on: each group's newest record with members."""
    newest = {}
    for off in sorted(kafka):
        if kafka[off]:
            newest[groups[off]] = off
    return {off: (g, kafka[off]) for g, off in newest.items()}


def test_lab_recorded_owners_equal_kafkas_dump_log():
    """Kafka's DumpLogSegments (:func:`_kafka_dump`) over the recorded 4.4.0 lab scenarios' __consumer_offsets
    segments: member id,
    group.instance.id, client.id, client host and partitions of every member of every GroupMetadataValue."""
    segs = [p for p in sorted(LAB_RECORDED.glob("*/brokers/*/__consumer_offsets-*/*.log")) if _owner_rows(p)]
    assert len(segs) >= 2
    dumped = _kafka_dump(segs)
    owned = 0
    for seg in segs:
        kafka, groups = _kafka_owner_rows(dumped[str(seg)])
        # every record through decode_group_metadata_value
        ours = {}
        for off, value in _group_values(seg).items():
            ours[off] = (
                None
                if value is None
                else sorted(
                    (m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"], t, p)
                    for m in decode_group_metadata_value(value)["member_list"]
                    for t, parts in m["assignment"] or ()
                    for p in parts.tolist()
                )
            )
        assert ours == kafka, seg
        # and the segment decoder's group_owners column: the newest record with members of each group
        assert _owner_rows(seg) == _newest_with_members(kafka, groups), seg
        owned += sum(len(v) for v in kafka.values() if v)
    assert owned >= 10


# ------------------------------------------------------------------ the decoders on hand-built values


def _s(x: str) -> bytes:
    b = x.encode()
    return struct.pack(">h", len(b)) + b


def _assignment(version: int, parts: dict, user_data: bytes | None = None) -> bytes:
    out = struct.pack(">hi", version, len(parts))
    for t, ps in parts.items():
        out += _s(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return out + (struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data)


def _group_value_v3(protocol_type: str, members: list[tuple[str, str | None, bytes]]) -> bytes:
    out = struct.pack(">h", 3) + _s(protocol_type) + struct.pack(">i", 7) + _s("range") + _s("m1")
    out += struct.pack(">q", 1_700_000_000_000) + struct.pack(">i", len(members))
    for mid, instance, assignment in members:
        out += _s(mid) + (struct.pack(">h", -1) if instance is None else _s(instance)) + _s("client-" + mid)
        out += _s("/10.0.0.1") + struct.pack(">ii", 60000, 45000) + struct.pack(">i", 0)
        out += struct.pack(">i", len(assignment)) + assignment
    return out


def test_consumer_assignment_versions_and_forward_compatibility():
    def flat(a):
        return [(t, p) for t, ps in a for p in ps.tolist()]

    assert flat(decode_consumer_assignment(_assignment(0, {"a": [0, 2], "b": [1], "c": []}))) == [
        ("a", 0),
        ("a", 2),
        ("b", 1),
    ]
    # a version above 3 is read as 3 (ConsumerProtocol.checkVersionCompatibility); trailing bytes ignored
    assert flat(decode_consumer_assignment(_assignment(7, {"a": [5]}, b"ud") + b"future")) == [("a", 5)]
    with pytest.raises(AssignmentLimitError):
        decode_consumer_assignment(_assignment(0, {"a": [0], "b": [1]}), max_entries=1)
    for bad in (
        struct.pack(">h", -1) + _assignment(0, {})[2:],
        _assignment(1, {"a": [0]})[:-6],
        struct.pack(">hi", 0, 2_000_000_000),
    ):
        with pytest.raises(ValueError):
            decode_consumer_assignment(bad)


def test_group_metadata_members_static_membership_and_other_protocols():
    v = decode_group_metadata_value(
        _group_value_v3(
            "consumer", [("m1", "pod-0", _assignment(1, {"t": [0, 1]})), ("m2", None, _assignment(1, {"t": [2]}))]
        )
    )
    assert [
        (
            m["member_id"],
            m["group_instance_id"],
            m["client_id"],
            m["client_host"],
            [(t, ps.tolist()) for t, ps in m["assignment"]],
        )
        for m in v["member_list"]
    ] == [
        ("m1", "pod-0", "client-m1", "/10.0.0.1", [("t", [0, 1])]),
        ("m2", None, "client-m2", "/10.0.0.1", [("t", [2])]),
    ]
    assert v["bad_assignments"] == 0 and v["members"] == 2
    # Connect's assignment is not ConsumerProtocolAssignment: members kept, no partitions claimed
    c = decode_group_metadata_value(_group_value_v3("connect", [("w1", None, b"\x00\x01junk")]))
    assert c["member_list"][0]["assignment"] is None and c["bad_assignments"] == 0


def test_a_malformed_assignment_is_reported_and_the_other_members_kept():
    value = _group_value_v3(
        "consumer", [("m1", None, b"\x00\x00\x00\x00\x00\x09"), ("m2", None, _assignment(0, {"t": [4]}))]
    )
    d = decode_group_metadata_value(value)
    assert d["bad_assignments"] == 1 and [(t, p.tolist()) for t, p in d["member_list"][1]["assignment"]] == [("t", [4])]


# ------------------------------------------------------------------ the SQL on inline tables

_OWNER = (
    "struct<member_id:string, group_instance_id:string, client_id:string, client_host:string, topic:string, "
    "partitions:array<int>, process_id:string, subtopology:string>"
)
_SCHEMA = (
    "record_type short, txn_state string, decode_error string, group_id string, member_id string, "
    "source_partition int, "
    f"offset long, timestamp long, is_tombstone boolean, group_generation int, group_protocol_type string, "
    f"group_protocol string, group_members int, group_owners array<{_OWNER}>"
)


def _o(topic, partition, member):
    return Row(
        member_id=member,
        group_instance_id=None,
        client_id="c-" + member,
        client_host="/10.1.1.1",
        topic=topic,
        partitions=[partition],
        process_id=None,
        subtopology=None,
    )


def _g(group, offset, generation, owners, *, members=None, tomb=False, txn="none", err=None, rtype=2):
    return (
        rtype,
        txn,
        err,
        group,
        None,
        3,
        offset,
        1_000 * offset,
        tomb,
        -1 if tomb else generation,
        None if tomb else "consumer",
        None if tomb or not owners else "range",
        -1 if tomb else (len({o.member_id for o in owners}) if members is None else members),
        None if tomb else owners,
    )


def _tables(spark, rows):
    gs, ow = group_tables(spark, spark.createDataFrame(rows, _SCHEMA))
    return (
        {r["group_id"]: r.asDict() for r in gs.collect()},
        {(r["group_id"], r["topic"], r["partition"]): r.asDict() for r in ow.collect()},
    )


def test_owner_is_the_newest_assignment_and_survives_the_group_going_empty(spark):
    gs, ow = _tables(
        spark,
        [
            _g("g", 10, 1, [_o("t", 0, "a"), _o("t", 1, "a")]),
            _g("g", 20, 2, [_o("t", 0, "b"), _o("t", 1, "a")]),
            _g("g", 30, 3, [], members=0),  # every member left: Empty
        ],
    )
    assert gs["g"]["group_state"] == "Empty" and gs["g"]["group_generation"] == 3
    assert gs["g"]["group_state_since"] == datetime.fromtimestamp(30)
    assert {k: (v["owner_member_id"], v["owner_generation"], v["owner_client_id"]) for k, v in ow.items()} == {
        ("g", "t", 0): ("b", 2, "c-b"),
        ("g", "t", 1): ("a", 2, "c-a"),
    }
    assert ow[("g", "t", 0)]["owner_assigned_at"] == datetime.fromtimestamp(20)


def test_a_deleted_group_keeps_no_owner_and_a_recreated_one_only_its_new_members(spark):
    gs, ow = _tables(
        spark,
        [
            _g("gone", 10, 1, [_o("t", 0, "a")]),
            _g("gone", 11, 0, [], tomb=True),
            _g("again", 10, 1, [_o("t", 0, "old"), _o("t", 1, "old")]),
            _g("again", 11, 0, [], tomb=True),
            _g("again", 12, 1, [_o("t", 1, "new")]),
        ],
    )
    assert gs["gone"]["group_state"] == "Dead" and gs["gone"]["group_generation"] is None
    assert gs["again"]["group_state"] == "Stable"
    assert set(ow) == {("again", "t", 1)} and ow[("again", "t", 1)]["owner_member_id"] == "new"


def test_aborted_undecoded_and_commit_records_are_not_group_records(spark):
    gs, ow = _tables(
        spark,
        [
            _g("g", 10, 1, [_o("t", 0, "a")]),
            _g("g", 11, 2, [_o("t", 0, "aborted")], txn="aborted"),
            _g("g", 12, 3, [_o("t", 0, "pending")], txn="pending"),
            _g("g", 13, 4, [_o("t", 0, "broken")], err="malformed_value"),
            _g("g", 14, 5, [_o("t", 0, "commit")], rtype=1),
        ],
    )
    assert gs["g"]["group_generation"] == 1
    assert {k: v["owner_member_id"] for k, v in ow.items()} == {("g", "t", 0): "a"}


def test_owners_come_from_the_newest_generation_with_members_only(spark):
    gs, ow = _tables(
        spark,
        [
            # a member whose assignment did not decode: the record still counts, with the others' partitions
            _g("h", 10, 1, [_o("t", 0, "x")]),
            _g("h", 11, 2, [_o("t", 1, "half")], err="malformed_assignment"),
            # too many entries to hold: the state counts, no owner (never the older generation's)
            _g("k", 10, 1, [_o("t", 0, "y")]),
            (2, "none", "owners_over_limit", "k", None, 3, 11, 11_000, False, 2, "consumer", "range", 3, None),
        ],
    )
    assert (gs["h"]["group_generation"], gs["k"]["group_generation"], gs["k"]["group_state"]) == (2, 2, "Stable")
    assert {k: v["owner_member_id"] for k, v in ow.items()} == {("h", "t", 1): "half"}


def test_with_owners_appends_the_columns_and_leaves_ownerless_rows_null(spark):
    gs, ow = group_tables(spark, spark.createDataFrame([_g("g", 10, 1, [_o("t", 0, "a")])], _SCHEMA))
    df = spark.createDataFrame(
        [("g", "t", 0, "LOG_TRUNCATION"), ("g", "t", 9, "OK"), ("solo", "t", 0, "OK")],
        "group_id string, topic string, partition int, verdict string",
    )
    rows = {(r["group_id"], r["partition"]): r.asDict() for r in with_owners(df, gs, ow).collect()}
    assert list(with_owners(df, gs, ow).columns) == df.columns + OWNER_COLUMNS
    assert rows[("g", 0)]["owner_member_id"] == "a" and rows[("g", 0)]["verdict"] == "LOG_TRUNCATION"
    assert rows[("g", 9)]["group_state"] == "Stable" and rows[("g", 9)]["owner_member_id"] is None
    assert all(rows[("solo", 0)][c] is None for c in OWNER_COLUMNS)


# ------------------------------------------------------------------ end to end on the shared scenario


def test_scenario_owner_is_the_member_kafka_recorded_last(scenario_latest):
    """dev-clickstream: generation 3 gave dev.clicks-0..3 to ktool-cd215709-...; generation 4 is Empty."""
    from pyspark.sql import SparkSession

    _result, out = scenario_latest
    spark = SparkSession.getActiveSession()
    rows = spark.read.parquet(str(out / "committed_offsets")).where("group_id = 'dev-clickstream'").collect()
    assert sorted(r["partition"] for r in rows) == [0, 1, 2, 3]
    kafka = {}
    for dump in sorted((SCENARIO / "dumps").glob("*/__consumer_offsets-*/*.consumer_offsets.txt")):
        if "group=dev-clickstream" in dump.read_text():
            kafka = _kafka_assignments(dump.read_text())
    last = kafka[max(off for off, m in kafka.items() if m and any(m.values()))]
    for r in rows:
        assert r["group_state"] == "Empty" and r["group_protocol_type"] == "consumer"
        assert f"dev.clicks-{r['partition']}" in last[r["owner_member_id"]]
        assert (r["owner_client_id"], r["owner_client_host"], r["owner_generation"]) == ("ktool", "/127.0.0.1", 3)
    findings = spark.read.parquet(str(out / "findings"))
    assert set(OWNER_COLUMNS) <= set(findings.columns)
    # standalone groups (assign() + commitSync) have no GroupMetadataValue: null, never a guess
    assert findings.where("owner_member_id IS NOT NULL AND group_id != 'dev-clickstream'").count() == 0


def test_owner_entries_are_bounded_and_the_overflow_reported(monkeypatch):
    """A group record with more (member, topic) entries than a decode call may hold keeps its state and gets
    owners_over_limit; the live path (decode_offsets_rows) shares the decoder."""
    from audit.formats import segments
    from audit.formats.segments import decode_offsets_rows

    monkeypatch.setattr(segments, "MAX_OWNER_ENTRIES", 2)
    key = struct.pack(">h", 2) + _s("big")
    small = _group_value_v3("consumer", [("m1", None, _assignment(0, {"a": [0, 1]}))])
    big = _group_value_v3("consumer", [("m1", None, _assignment(0, {"a": [0], "b": [0], "c": [0]}))])
    batch = pa.RecordBatch.from_pydict(
        {
            "source_partition": pa.array([0, 0, 0], pa.int32()),
            "source_offset": pa.array([5, 6, 7], pa.int64()),
            "timestamp": pa.array([1, 2, 3], pa.int64()),
            "key": pa.array([key, struct.pack(">h", 2) + _s("ok"), key]),
            "value": pa.array([small, small, big]),
        }
    )
    rows = decode_offsets_rows(batch).to_pylist()
    assert [r["decode_error"] for r in rows] == [None, None, "owners_over_limit"]
    assert rows[0]["group_owners"] is None  # superseded by the same group's newer record
    assert [(o["topic"], o["partitions"]) for o in rows[1]["group_owners"]] == [("a", [0, 1])]
    assert rows[2]["group_owners"] is None and rows[2]["group_members"] == 1 and rows[2]["group_generation"] == 7


# ------------------------------------------------------------------ KIP-848 consumer groups (4.x lab recordings)

KIP848_LINE = re.compile(r'^\| offset: (\d+) .*?key: (\{"type":"(?:5|8)".*?\}) payload: (.*)$')


def _kafka_kip848(dump_text: str) -> dict:
    """offset -> (type, group, member, fields) of the type 5 / 8 records in Kafka 3.9's JSON dump output."""
    out = {}
    for off, key, payload in _dump_records(KIP848_LINE, dump_text):
        k = json.loads(key)
        t, group, member = int(k["type"]), k["data"]["groupId"], k["data"]["memberId"]
        if payload == "<DELETE>":
            out[off] = (t, group, member, None)
        elif t == 5:
            d = json.loads(payload)["data"]
            out[off] = (t, group, member, [(member, d["instanceId"], d["clientId"], d["clientHost"], None, None)])
        else:
            d = json.loads(payload)["data"]
            out[off] = (
                t,
                group,
                member,
                [
                    (member, None, None, None, a["topicId"], a["partitions"])
                    for a in d["assignedPartitions"]
                    if a["partitions"]
                ],
            )
    return out


def _our_kip848(segment: Path) -> dict:
    t = pa.Table.from_batches(decode_offsets_segment(segment.read_bytes(), str(segment), 0), schema=RAW_SCHEMA)
    out = {}
    for r in t.to_pylist():
        if r["kind"] == "record" and r["record_type"] in (5, 8):
            assert r["decode_error"] is None, r
            owners = (
                None
                if r["group_owners"] is None
                else [
                    (
                        o["member_id"],
                        o["group_instance_id"],
                        o["client_id"],
                        o["client_host"],
                        o["topic"],
                        o["partitions"],
                    )
                    for o in r["group_owners"]
                ]
            )
            out[r["offset"]] = (r["record_type"], r["group_id"], r["member_id"], owners)
    return out


def test_lab_recorded_kip848_member_records_equal_kafkas_dump_log():
    segs = [p for p in sorted(LAB_RECORDED.glob("*/brokers/*/__consumer_offsets-*/*.log")) if _our_kip848(p)]
    assert len(segs) >= 2
    dumped = _kafka_dump(segs)
    assignments = 0
    for seg in segs:
        kafka = _kafka_kip848(dumped[str(seg)])
        assert _our_kip848(seg) == kafka, seg
        assignments += sum(1 for v in kafka.values() if v[0] == 8 and v[3])
    assert assignments >= 4


def test_kip848_owner_and_state_end_to_end(audit_dirs):
    """Recorded 4.4.0 lab scenario, seed 101: group s101.e0.unclean.kip848-past (group.protocol=consumer) had one
    member; it left (its records tombstoned) and the group is Empty; its partitions' owner is that member, the
    topic named through the metadata log's topic id."""
    from pyspark.sql import SparkSession

    rec = LAB_RECORDED / "kafka-4.4.0-seed101" / "brokers"
    _result, out = audit_dirs("kip848-owners", [rec])
    spark = SparkSession.getActiveSession()
    seg = rec / "broker-1" / "__consumer_offsets-0" / "00000000000000000000.log"
    kafka = [v for v in _our_kip848(seg).values() if v[1] == "s101.e0.unclean.kip848-past"]
    info = next(v[3][0] for v in kafka if v[0] == 5 and v[3])
    epoch_of = {v[2]: v for v in kafka if v[0] == 8 and v[3]}
    rows = (
        spark.read.parquet(str(out / "committed_offsets")).where("group_id = 's101.e0.unclean.kip848-past'").collect()
    )
    assert rows
    topic_ids = {r["topic_id"]: r["topic"] for r in spark.read.parquet(str(out / "leader_timeline")).collect()}
    for r in rows:
        assert r["group_state"] == "Empty" and r["group_protocol_type"] == "consumer"
        assert (r["owner_member_id"], r["owner_client_id"], r["owner_client_host"]) == (info[0], info[2], info[3])
        entry = epoch_of[r["owner_member_id"]][3]
        assert any(topic_ids[e[4]] == r["topic"] and r["partition"] in e[5] for e in entry)


def test_kip848_assignments_need_topic_names_and_the_newest_member_record(spark):
    def rec(rtype, offset, member, owners, tomb=False, epoch=-1):
        return (
            rtype,
            "none",
            None,
            "cg",
            member,
            3,
            offset,
            1_000 * offset,
            tomb,
            epoch,
            None,
            None,
            -1,
            None if tomb else owners,
        )

    info = lambda m, c: [  # noqa: E731
        Row(
            member_id=m,
            group_instance_id=None,
            client_id=c,
            client_host="/h",
            topic=None,
            partitions=None,
            process_id=None,
            subtopology=None,
        )
    ]
    assign = lambda m, tid, ps: [  # noqa: E731
        Row(
            member_id=m,
            group_instance_id=None,
            client_id=None,
            client_host=None,
            topic=tid,
            partitions=ps,
            process_id=None,
            subtopology=None,
        )
    ]
    rows = [
        rec(3, 1, None, None),
        rec(5, 2, "a", info("a", "app-a")),
        rec(8, 3, "a", assign("a", "TID", [0, 1]), epoch=2),
        rec(5, 4, "b", info("b", "app-b")),
        rec(8, 5, "b", assign("b", "TID", [1]), epoch=3),
        rec(8, 6, "a", assign("a", "TID", [0]), epoch=3),  # a gave partition 1 up
        rec(8, 7, "b", None, tomb=True),
        rec(5, 8, "b", None, tomb=True),
        rec(3, 9, None, None),
    ]
    df = spark.createDataFrame(rows, _SCHEMA)
    names = spark.createDataFrame([("TID", "orders")], "topic_id string, topic string")
    gs, ow = group_tables(spark, df, names)
    gs = {r["group_id"]: r for r in gs.collect()}
    ow = {
        (r["topic"], r["partition"]): (r["owner_member_id"], r["owner_client_id"], r["owner_generation"])
        for r in ow.collect()
    }
    assert gs["cg"]["group_state"] == "Stable"  # a is still a member
    # b left (tombstones) but still holds partition 1 in its newest assignment: the consumer that read it last
    assert ow == {("orders", 0): ("a", "app-a", 3), ("orders", 1): ("b", "app-b", 3)}
    _gs, ow2 = group_tables(spark, df)  # no metadata log: topic ids cannot be named
    assert ow2.count() == 0
    dead = spark.createDataFrame(rows + [rec(3, 10, None, None, tomb=True)], _SCHEMA)
    gs3, ow3 = group_tables(spark, dead, names)
    assert gs3.collect()[0]["group_state"] == "Dead" and ow3.count() == 0


def test_share_and_streams_groups_have_their_group_type_state_and_share_owners(spark):
    """Share groups (KIP-932: ShareGroupMetadata 11, ShareGroupMemberMetadata 10 with the subscribed topics after
    the client entry, ShareGroupCurrentMemberAssignment 14) and streams groups (KIP-1071: StreamsGroupMetadata 17,
    StreamsGroupMemberMetadata 19 with the process id, StreamsGroupCurrentMemberAssignment 22 with the active tasks,
    StreamsGroupTopology 23 with each subtopology's source topics) as the decoder gives them."""

    def rec(group, rtype, offset, member, owners, tomb=False, epoch=-1):
        return (rtype, "none", None, group, member, 3, offset, 1_000 * offset, tomb, epoch, None, None, -1, owners)

    def entry(m, client=None, topic=None, parts=None, process=None, sub=None):
        return Row(
            member_id=m,
            group_instance_id=None,
            client_id=client,
            client_host="/h" if client else None,
            topic=topic,
            partitions=parts,
            process_id=process,
            subtopology=sub,
        )

    rows = [
        rec("sg", 11, 1, None, None),
        rec("sg", 10, 2, "s1", [entry("s1", "share-app"), entry("s1", topic="orders")]),
        rec("sg", 14, 3, "s1", [entry("s1", topic="TID", parts=[0, 2])], epoch=4),
        rec("sg-left", 11, 4, None, None),
        rec("sg-left", 10, 5, "x", [entry("x", "gone")]),
        rec("sg-left", 10, 6, "x", None, tomb=True),
        rec("app", 17, 7, None, None),
        rec("app", 19, 8, "p1", [entry("p1", "app-1", process="proc-A")]),
        rec("app", 19, 9, "p2", [entry("p2", "app-2", process="proc-B")]),
        # topology epoch 1: subtopology 0 reads "in", 1 reads the repartition topic; then epoch 2 drops "old"
        rec("app", 23, 10, None, [entry(None, topic="old", sub="0"), entry(None, topic="in", sub="0")], epoch=1),
        rec("app", 23, 11, None, [entry(None, topic="in", sub="0"), entry(None, topic="app-rep", sub="1")], epoch=2),
        rec("app", 22, 12, "p1", [entry("p1", parts=[0, 2], sub="0"), entry("p1", parts=[1], sub="1")], epoch=5),
        rec("app", 22, 13, "p2", [entry("p2", parts=[1, 3], sub="0"), entry("p2", parts=[0], sub="1")], epoch=5),
    ]
    df = spark.createDataFrame(rows, _SCHEMA)
    names = spark.createDataFrame([("TID", "orders")], "topic_id string, topic string")
    gs, ow = group_tables(spark, df, names)
    gs = {r["group_id"]: (r["group_type"], r["group_state"], r["group_members"]) for r in gs.collect()}
    assert gs == {"sg": ("share", "Stable", 1), "sg-left": ("share", "Empty", 0), "app": ("streams", "Stable", 2)}
    ow = {
        (r["group_id"], r["topic"], r["partition"]): (r["owner_member_id"], r["owner_client_id"], r["owner_process_id"])
        for r in ow.collect()
    }
    assert ow == {
        ("sg", "orders", 0): ("s1", "share-app", None),
        ("sg", "orders", 2): ("s1", "share-app", None),
        # task p of a subtopology reads partition p of its source topics (the newest topology: not "old")
        ("app", "in", 0): ("p1", "app-1", "proc-A"),
        ("app", "in", 2): ("p1", "app-1", "proc-A"),
        ("app", "in", 1): ("p2", "app-2", "proc-B"),
        ("app", "in", 3): ("p2", "app-2", "proc-B"),
        ("app", "app-rep", 1): ("p1", "app-1", "proc-A"),
        ("app", "app-rep", 0): ("p2", "app-2", "proc-B"),
    }
