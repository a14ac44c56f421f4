"""Tests for audit.formats.metadata_log against real KRaft metadata logs.

The reference decoding is Kafka's own ``kafka-dump-log --cluster-metadata-decoder``
output, stored next to the logs in /work/shared/data (read-only).
"""

from __future__ import annotations

import base64
import collections
import json
import re
import struct
from pathlib import Path

import pyarrow as pa
import pytest
from kafka.record import MemoryRecords

from audit.formats.metadata_log import (
    METADATA_ROW_FIELDS,
    MetadataDecodeError,
    decode_metadata_value,
)

DATA = Path("/work/shared/data")
SCENARIO = DATA / "scenarios" / "unclean-election-3brokers"
SCENARIO_LOG = SCENARIO / "brokers/controller-100/__cluster_metadata-0/00000000000000000000.log"
SCENARIO_DUMPS = sorted((SCENARIO / "dumps/controller-100/__cluster_metadata-0").glob("*.txt"))
KRAFT36_LOG = DATA / "real/kraft-3.6-single-broker/data/__cluster_metadata-0/00000000000000000000.log"
KRAFT36_DUMPS = [DATA / "real/kraft-3.6-single-broker/dumps/__cluster_metadata-0.dump.txt"]
KRAFT37_LOG = DATA / "real/kraft-3.7/__cluster_metadata-0/00000000000000000000.log"
KRAFT4_LOG = DATA / "real/kraft-4.x/kafka-logs/__cluster_metadata-0/00000000000000000000.log"

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="shared test data not available")

# MetadataRecordType enum names (as kafka-dump-log prints them) -> api key.
DUMP_TYPE_API_KEY = {
    "REGISTER_BROKER_RECORD": 0,
    "UNREGISTER_BROKER_RECORD": 1,
    "TOPIC_RECORD": 2,
    "PARTITION_RECORD": 3,
    "CONFIG_RECORD": 4,
    "PARTITION_CHANGE_RECORD": 5,
    "FENCE_BROKER_RECORD": 7,
    "UNFENCE_BROKER_RECORD": 8,
    "REMOVE_TOPIC_RECORD": 9,
    "FEATURE_LEVEL_RECORD": 12,
    "PRODUCER_IDS_RECORD": 15,
    "BROKER_REGISTRATION_CHANGE_RECORD": 17,
    "NO_OP_RECORD": 20,
    "ZK_MIGRATION_STATE_RECORD": 21,
    "BEGIN_TRANSACTION_RECORD": 23,
    "END_TRANSACTION_RECORD": 24,
}


def dump_type_name(dump_type: str) -> str:
    """MetadataRecordType enum name -> record type name (``TOPIC_RECORD`` -> ``TopicRecord``)."""
    return "".join(w.capitalize() for w in dump_type.split("_"))


_DUMP_LINE = re.compile(r"^\| offset: (\d+) .* payload: (\{.*\})\s*$")


# --- helpers -----------------------------------------------------------------


def iter_metadata_records(path: Path):
    """Yield (offset, value) for every record of every non-control batch."""
    records = MemoryRecords(path.read_bytes())
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        if batch.is_control_batch:
            continue
        for rec in batch:
            yield rec.offset, rec.value


def decode_log(path: Path):
    """offset -> decoded dict, for a whole metadata log."""
    return {off: decode_metadata_value(val) for off, val in iter_metadata_records(path)}


def parse_dumps(paths):
    """offset -> (type, version, data) from kafka-dump-log --cluster-metadata-decoder."""
    out = {}
    for p in paths:
        for line in p.read_text().splitlines():
            m = _DUMP_LINE.match(line)
            if m:
                payload = json.loads(m.group(2))
                out[int(m.group(1))] = (payload["type"], payload["version"], payload["data"])
    assert out, f"no payload lines parsed from {paths}"
    return out


_cache = {}


def cached(key, fn, *args):
    if key not in _cache:
        _cache[key] = fn(*args)
    return _cache[key]


DUMP_CASES = {
    "scenario-controller-100": (SCENARIO_LOG, SCENARIO_DUMPS),
    "kraft-3.6-single-broker": (KRAFT36_LOG, KRAFT36_DUMPS),
}


@pytest.fixture(params=sorted(DUMP_CASES), scope="module")
def decoded_and_dump(request):
    log, dumps = DUMP_CASES[request.param]
    decoded = cached(("log", log), decode_log, log)
    dump = cached(("dump", tuple(dumps)), parse_dumps, dumps)
    return decoded, dump


def _of_type(decoded, dump, dump_type):
    pairs = [(off, decoded[off], dump[off][2]) for off in sorted(dump) if dump[off][0] == dump_type]
    return pairs


# --- comparison with kafka-dump-log ------------------------------------------


def test_every_record_matches_dump_type_and_version(decoded_and_dump):
    decoded, dump = decoded_and_dump
    assert set(decoded) == set(dump)
    for off, (dtype, dversion, _data) in dump.items():
        row = decoded[off]
        assert row["api_key"] == DUMP_TYPE_API_KEY[dtype], (off, dtype, row)
        assert row["record_version"] == dversion, (off, row)
        expected_type = dump_type_name(dtype)
        assert row["record_type"] == expected_type, (off, row)


def test_record_type_counts_match_dump(decoded_and_dump):
    decoded, dump = decoded_and_dump
    ours = collections.Counter(r["record_type"] for r in decoded.values())
    theirs = collections.Counter(dump_type_name(t) for t, _v, _d in dump.values())
    assert ours == theirs
    assert ours["PartitionChangeRecord"] > 100 and ours["PartitionRecord"] >= 25


def test_topic_records_match_dump(decoded_and_dump):
    decoded, dump = decoded_and_dump
    pairs = _of_type(decoded, dump, "TOPIC_RECORD")
    assert pairs
    for off, row, data in pairs:
        assert row["topic_name"] == data["name"], off
        assert row["topic_id"] == data["topicId"], off
        assert len(row["topic_id"]) == 22
        assert row["partition"] is None and row["leader"] is None


def test_partition_records_match_dump(decoded_and_dump):
    decoded, dump = decoded_and_dump
    pairs = _of_type(decoded, dump, "PARTITION_RECORD")
    assert pairs
    for off, row, data in pairs:
        got = {
            k: row[k]
            for k in (
                "topic_id",
                "partition",
                "replicas",
                "isr",
                "leader",
                "leader_epoch",
                "partition_epoch",
                "leader_recovery_state",
            )
        }
        want = {
            "topic_id": data["topicId"],
            "partition": data["partitionId"],
            "replicas": data["replicas"],
            "isr": data["isr"],
            "leader": data["leader"],
            "leader_epoch": data["leaderEpoch"],
            "partition_epoch": data["partitionEpoch"],
            # tagged field, omitted by Kafka's JSON converter when at its default 0
            "leader_recovery_state": data.get("leaderRecoveryState", 0),
        }
        assert got == want, off


def test_partition_change_records_match_dump(decoded_and_dump):
    decoded, dump = decoded_and_dump
    pairs = _of_type(decoded, dump, "PARTITION_CHANGE_RECORD")
    assert pairs
    for off, row, data in pairs:
        assert row["topic_id"] == data["topicId"], off
        assert row["partition"] == data["partitionId"], off
        assert row["leader"] == data.get("leader", -2), off
        assert row["isr"] == data.get("isr"), off
        assert row["replicas"] == data.get("replicas"), off
        assert row["leader_recovery_state"] == data.get("leaderRecoveryState"), off
        assert row["leader_epoch"] is None and row["partition_epoch"] is None


def test_register_broker_records_match_dump(decoded_and_dump):
    decoded, dump = decoded_and_dump
    pairs = _of_type(decoded, dump, "REGISTER_BROKER_RECORD")
    assert pairs
    for off, row, data in pairs:
        assert row["broker_id"] == data["brokerId"], off
        assert row["broker_epoch"] == data["brokerEpoch"], off
        assert row["fenced"] == (1 if data["fenced"] else -1), off
        assert row["in_controlled_shutdown"] == int(data.get("inControlledShutdown", False)), off


def test_broker_registration_changes_match_dump(decoded_and_dump):
    """Fenced (tag 0: 1 fence, -1 unfence) and InControlledShutdown (tag 1) as Kafka printed them."""
    decoded, dump = decoded_and_dump
    pairs = _of_type(decoded, dump, "BROKER_REGISTRATION_CHANGE_RECORD")
    assert pairs and {d.get("fenced", 0) for _o, _r, d in pairs} >= {1, -1}
    for off, row, data in pairs:
        assert (row["broker_id"], row["broker_epoch"]) == (data["brokerId"], data["brokerEpoch"]), off
        assert row["fenced"] == data.get("fenced", 0), off
        assert row["in_controlled_shutdown"] == data.get("inControlledShutdown", 0), off


# --- the unclean election in the scenario ------------------------------------


def _topic_ids(decoded):
    return {r["topic_name"]: r["topic_id"] for r in decoded.values() if r["record_type"] == "TopicRecord"}


def test_unclean_election_on_dev_payments():
    decoded = cached(("log", SCENARIO_LOG), decode_log, SCENARIO_LOG)
    payments = _topic_ids(decoded)["dev.payments"]
    assert payments == "r8osKXj9RBKsWOThz_iKKg"
    unclean = {}
    for off, r in sorted(decoded.items()):
        if (
            r["record_type"] == "PartitionChangeRecord"
            and r["topic_id"] == payments
            and r["leader_recovery_state"] == 1
        ):
            unclean.setdefault(r["partition"], []).append((off, r["leader"], r["isr"]))
    assert unclean == {0: [(267, 2, [2])], 1: [(270, 2, [2])]}
    # Only dev.payments was elected uncleanly.
    recovering = [r for r in decoded.values() if r["leader_recovery_state"] == 1]
    assert {r["topic_id"] for r in recovering} == {payments}
    # Broker 1 rejoining the ISR clears RECOVERING (T11 in STORY.md).
    cleared = [
        (off, r["partition"], r["isr"])
        for off, r in sorted(decoded.items())
        if r["topic_id"] == payments and r["leader_recovery_state"] == 0 and r["record_type"] == "PartitionChangeRecord"
    ]
    assert cleared == [(309, 0, [2, 1]), (310, 1, [2, 1])]


def _replay_leader_epochs(decoded):
    """(topic_id, partition) -> {leader_epoch: leader}, replaying as
    PartitionRegistration.merge does: a Leader tag (anything but -2) bumps the epoch."""
    state, timeline = {}, {}
    for _off, r in sorted(decoded.items()):
        key = (r["topic_id"], r["partition"])
        if r["record_type"] == "PartitionRecord":
            state[key] = (r["leader"], r["leader_epoch"])
            timeline[key] = {r["leader_epoch"]: r["leader"]}
        elif r["record_type"] == "PartitionChangeRecord" and r["leader"] != -2:
            _leader, epoch = state[key]
            state[key] = (r["leader"], epoch + 1)
            timeline[key][epoch + 1] = r["leader"]
    return timeline


def test_replayed_epochs_cover_every_broker_leader_epoch_checkpoint():
    decoded = cached(("log", SCENARIO_LOG), decode_log, SCENARIO_LOG)
    ids = _topic_ids(decoded)
    timeline = _replay_leader_epochs(decoded)
    pay0 = timeline[(ids["dev.payments"], 0)]
    assert [pay0[e] for e in range(4)] == [1, -1, 2, 1]  # STORY.md T7, T8, T12
    checked = 0
    for ckpt in sorted((SCENARIO / "brokers").glob("broker-*/*-*/leader-epoch-checkpoint")):
        topic, _, part = ckpt.parent.name.rpartition("-")
        if topic == "__cluster_metadata":
            continue  # raft epochs, not partition leader epochs
        lines = ckpt.read_text().split("\n")
        if len(lines) < 2:
            continue  # empty checkpoint file: nothing was ever appended
        n = int(lines[1])
        for line in lines[2 : 2 + n]:
            epoch = int(line.split()[0])
            # Records were appended in this epoch, so it existed with a real leader.
            assert timeline[(ids[topic], int(part))].get(epoch, -1) >= 0, (ckpt, epoch)
            checked += 1
    assert checked > 30


# --- other real logs: decode everything --------------------------------------


@pytest.mark.parametrize(
    "path, expected",
    [
        (
            KRAFT37_LOG,
            {
                ("RegisterBrokerRecord", 3): 2,
                ("TopicRecord", 0): 5,
                ("PartitionRecord", 1): 54,
                ("PartitionChangeRecord", 1): 54,
            },
        ),
        (
            KRAFT4_LOG,
            {
                ("RegisterBrokerRecord", 3): 1,
                ("TopicRecord", 0): 2,
                ("PartitionRecord", 2): 53,
                ("PartitionChangeRecord", 2): 159,
            },
        ),
    ],
    ids=["kraft-3.7", "kraft-4.x"],
)
def test_newer_logs_decode_consistently(path, expected):
    decoded = decode_log(path)
    counts = collections.Counter(
        (r["record_type"], r["record_version"])
        for r in decoded.values()
        if r["record_type"] in {"RegisterBrokerRecord", "TopicRecord", "PartitionRecord", "PartitionChangeRecord"}
    )
    assert dict(counts) == expected
    topics = {r["topic_id"] for r in decoded.values() if r["record_type"] == "TopicRecord"}
    assert "__consumer_offsets" in {r["topic_name"] for r in decoded.values()}
    replicas = {}
    for _off, r in sorted(decoded.items()):
        if r["record_type"] == "PartitionRecord":
            assert r["topic_id"] in topics
            assert r["replicas"] and set(r["isr"]) <= set(r["replicas"])
            assert r["leader"] in r["replicas"] and r["leader_epoch"] == 0
            assert r["leader_recovery_state"] == 0
            replicas[(r["topic_id"], r["partition"])] = r["replicas"]
        elif r["record_type"] == "PartitionChangeRecord":
            reps = replicas[(r["topic_id"], r["partition"])]
            assert r["leader"] == -2 or r["leader"] == -1 or r["leader"] in reps
            assert r["isr"] is None or set(r["isr"]) <= set(reps)
            assert r["leader_recovery_state"] is None
        elif r["record_type"] == "RegisterBrokerRecord":
            assert r["broker_id"] >= 0 and r["broker_epoch"] >= 0
    assert len(replicas) == sum(n for (t, _v), n in expected.items() if t == "PartitionRecord")


# --- hand-made bytes ---------------------------------------------------------


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def header(api_key: int, version: int, frame: int = 1) -> bytes:
    return uvarint(frame) + uvarint(api_key) + uvarint(version)


def cstr(s):
    return uvarint(0) if s is None else uvarint(len(s.encode()) + 1) + s.encode()


def carr(xs):
    return uvarint(0) if xs is None else uvarint(len(xs) + 1) + b"".join(struct.pack(">i", x) for x in xs)


def tagged(*fields):
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(v)) + v for t, v in fields)


UUID_BYTES = bytes(range(16))
UUID_STR = base64.urlsafe_b64encode(UUID_BYTES).decode().rstrip("=")


def partition_change(version=2):
    return (
        header(5, version)
        + struct.pack(">i", 7)
        + UUID_BYTES
        + tagged(
            (0, carr([3, 1])),
            (1, struct.pack(">i", 3)),
            (2, carr([1, 2, 3])),
            (5, struct.pack(">b", 1)),
            (6, carr([1])),  # EligibleLeaderReplicas, skipped
            (7, carr([2])),  # LastKnownElr, skipped
            (8, uvarint(2) + UUID_BYTES),  # Directories, skipped
            (99, b"\x00\x01\x02"),  # unknown tag, skipped
        )
    )


def test_hand_made_partition_change_record():
    row = decode_metadata_value(partition_change())
    assert row["record_type"] == "PartitionChangeRecord" and row["record_version"] == 2
    assert row["topic_id"] == UUID_STR == "AAECAwQFBgcICQoLDA0ODw"
    assert (row["partition"], row["leader"], row["isr"], row["replicas"], row["leader_recovery_state"]) == (
        7,
        3,
        [3, 1],
        [1, 2, 3],
        1,
    )


def test_partition_change_without_tags_means_no_change():
    row = decode_metadata_value(header(5, 0) + struct.pack(">i", 0) + UUID_BYTES + uvarint(0))
    assert row["leader"] == -2
    assert row["isr"] is None and row["replicas"] is None and row["leader_recovery_state"] is None


def test_partition_record_v2_with_directories_and_elr():
    body = (
        struct.pack(">i", 4)
        + UUID_BYTES
        + carr([5, 6])
        + carr([6])
        + carr([])
        + carr([])
        + struct.pack(">iii", 6, 9, 12)
        + uvarint(3)
        + UUID_BYTES * 2
        + tagged((0, b"\x01"), (1, carr([5])), (2, carr(None)))
    )
    row = decode_metadata_value(header(3, 2) + body)
    assert (
        row["partition"],
        row["replicas"],
        row["isr"],
        row["leader"],
        row["leader_epoch"],
        row["partition_epoch"],
        row["leader_recovery_state"],
    ) == (4, [5, 6], [6], 6, 9, 12, 1)
    # Directories exist only from v1: read as v0, the same bytes must not decode.
    with pytest.raises(MetadataDecodeError):
        decode_metadata_value(header(3, 0) + body)


@pytest.mark.parametrize("api_key, name", [(7, "FenceBrokerRecord"), (8, "UnfenceBrokerRecord")])
def test_fence_and_unfence(api_key, name):
    row = decode_metadata_value(header(api_key, 0) + struct.pack(">iq", 3, 2**40) + uvarint(0))
    assert (row["record_type"], row["broker_id"], row["broker_epoch"]) == (name, 3, 2**40)


def test_topic_and_remove_topic():
    row = decode_metadata_value(header(2, 0) + cstr("dev.päyments") + UUID_BYTES + uvarint(0))
    assert (row["record_type"], row["topic_name"], row["topic_id"]) == ("TopicRecord", "dev.päyments", UUID_STR)
    row = decode_metadata_value(header(9, 0) + UUID_BYTES + uvarint(0))
    assert (row["record_type"], row["topic_id"], row["topic_name"]) == ("RemoveTopicRecord", UUID_STR, None)


def test_unknown_api_key_returns_type_only():
    row = decode_metadata_value(header(300, 4) + b"\xff\xfe anything")
    assert row["api_key"] == 300 and row["record_version"] == 4
    assert row["record_type"] == "api_key_300"
    assert all(
        row[name] is None for name, _ in METADATA_ROW_FIELDS if name not in ("api_key", "record_version", "record_type")
    )


def test_every_truncation_raises():
    full = partition_change()
    decode_metadata_value(full)
    for cut in range(len(full)):
        with pytest.raises(MetadataDecodeError):
            decode_metadata_value(full[:cut])


def test_truncated_real_partition_record_raises():
    _off, value = next(
        (o, v)
        for o, v in iter_metadata_records(SCENARIO_LOG)
        if decode_metadata_value(v)["record_type"] == "PartitionRecord"
    )
    with pytest.raises(MetadataDecodeError, match="truncated"):
        decode_metadata_value(value[:-3])


@pytest.mark.parametrize(
    "value, message",
    [
        (header(2, 0, frame=0) + cstr("t") + UUID_BYTES + uvarint(0), "frame version"),
        (header(2, 1) + cstr("t") + UUID_BYTES + uvarint(0), "unsupported version"),
        (header(2, 0) + cstr("t") + UUID_BYTES + uvarint(0) + b"\x00", "unexpected byte"),
        (header(2, 0) + cstr(None) + UUID_BYTES + uvarint(0), "null"),
        (header(5, 0) + struct.pack(">i", 0) + UUID_BYTES + tagged((1, b"\x00\x00")), "truncated"),
        (b"\xff\xff\xff\xff\xff\xff", "varint"),
        (b"", "truncated"),
    ],
)
def test_malformed_values_raise(value, message):
    with pytest.raises(MetadataDecodeError, match=message):
        decode_metadata_value(value)
    assert issubclass(MetadataDecodeError, ValueError)


def test_row_fields_build_an_arrow_table():
    names = [n for n, _ in METADATA_ROW_FIELDS]
    assert names[:3] == ["api_key", "record_version", "record_type"]
    schema = pa.schema(METADATA_ROW_FIELDS)
    decoded = cached(("log", SCENARIO_LOG), decode_log, SCENARIO_LOG)
    rows = list(decoded.values())
    assert all(list(r) == names for r in rows)
    table = pa.Table.from_pylist(rows, schema=schema)
    assert table.num_rows == len(rows)


def test_config_record_topic_and_deleted_value():
    # ConfigRecord.json: ResourceType int8, ResourceName, Name, Value (nullable compact string)
    body = struct.pack(">b", 2) + cstr("tiered.orders") + cstr("remote.storage.enable") + cstr("true") + uvarint(0)
    row = decode_metadata_value(header(4, 0) + body)
    assert (row["record_type"], row["config_resource_type"], row["config_resource_name"]) == (
        "ConfigRecord",
        2,
        "tiered.orders",
    )
    assert (row["config_name"], row["config_value"]) == ("remote.storage.enable", "true")
    assert row["topic_name"] is None and row["partition"] is None
    deleted = struct.pack(">b", 2) + cstr("tiered.orders") + cstr("remote.storage.enable") + uvarint(0) + uvarint(0)
    assert decode_metadata_value(header(4, 0) + deleted)["config_value"] is None
    with pytest.raises(MetadataDecodeError):
        decode_metadata_value(header(4, 0) + body[:-3])
