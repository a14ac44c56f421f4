"""Every byte vector of ../shared/data/vectors decodes to its expected fields."""

import json

import numpy as np
import pytest

from audit.formats.offsets import decode_offset_commit_values, decode_offsets_kv

from ..paths import SHARED

VECTORS = json.loads((SHARED / "data/vectors/offset_commit_vectors.json").read_text())["vectors"]

# vector field name -> decoded column
KEY_FIELDS = {
    "group": "group_id",
    "topic": "topic",
    "partition": "partition",
    "key_version": "record_type",
    "kv": "record_type",
    "message_version": "record_type",
}
VALUE_FIELDS = {
    "offset": "committed_offset",
    "leader_epoch": "leader_epoch",
    "metadata": "metadata",
    "commit_timestamp": "commit_timestamp",
    "expire_timestamp": "expire_timestamp",
    "value_version": "value_version",
    "schema_version": "value_version",
}


def _value_hex(v):
    for name in ("value_hex", "value_hex_as_kafka_would_write"):
        if name in v:
            return v[name]
    return None


def _decode_value(raw: bytes) -> dict:
    data = np.frombuffer(raw, dtype=np.uint8)
    out = decode_offset_commit_values(data, np.array([0]), np.array([len(raw)]))
    row = {k: a[0].item() for k, a in out.items()}
    if row["metadata_ok"] and row["metadata_len"] >= 0:
        s = row["metadata_start"]
        row["metadata"] = raw[s : s + row["metadata_len"]].decode()
    return row


def _decode_kv(key: bytes, value: bytes | None) -> dict:
    data = np.frombuffer(key + (value or b""), dtype=np.uint8)
    out = decode_offsets_kv(
        data, np.array([0]), np.array([len(key)]), np.array([len(key)]), np.array([-1 if value is None else len(value)])
    )
    return {k: (a[0].as_py() if hasattr(a, "to_pylist") else a[0].item()) for k, a in out.items()}


@pytest.mark.parametrize("vec", VECTORS, ids=[v["name"][:60] for v in VECTORS])
def test_vector_decodes_to_expected_fields(vec):
    exp = vec["expected"]
    checked = 0
    vhex = _value_hex(vec)
    value = None if vhex in (None, "None") else bytes.fromhex(vhex)
    if vec.get("key_hex"):
        row = _decode_kv(bytes.fromhex(vec["key_hex"]), value)
        for name, col in KEY_FIELDS.items():
            if name in exp:
                assert row[col] == exp[name], (name, row)
                checked += 1
        if exp.get("tombstone") or exp.get("is_tombstone"):
            assert row["is_tombstone"] is True
            checked += 1
    if value is not None:
        truncated = "truncated" in vec["name"]
        row = _decode_value(value)
        # a value cut after its offset: the decoder flags it incomplete and still reads the fields before the cut
        assert row["value_ok"] is not truncated, row
        if truncated:
            assert row["offset_ok"] and not row["metadata_ok"], row
        for name, col in VALUE_FIELDS.items():
            if name in exp and exp[name] is not None:
                assert row[col] == exp[name], (name, row)
                checked += 1
    assert checked > 0, "vector had no field we know how to check"


def test_v4_value_without_trailing_tag_buffer_still_decodes():
    """Burrow's v4 vector lacks Kafka's trailing tagged-field byte; we accept it leniently."""
    vec = next(v for v in VECTORS if "lacks" in v["name"] or "NOTE" in v["name"])
    raw = bytes.fromhex(vec.get("value_hex_as_in_test") or _value_hex(vec))
    row = _decode_value(raw)
    assert row["committed_offset"] == 8372 and row["commit_timestamp"] == 1637


def test_unknown_record_type_and_version_are_flagged_not_fatal():
    key = bytes.fromhex("0003") + b"\x00\x02gg"  # KIP-848 ConsumerGroupMetadata key: known, not a commit
    row = _decode_kv(key, b"\x00\x00\x00\x00")
    assert row["decode_error"] is None and row["group_id"] == "gg" and row["topic"] is None
    row = _decode_kv(bytes.fromhex("0063") + b"\x00\x02gg", b"\x00\x00\x00\x00")  # type 99: not in Kafka
    assert row["decode_error"] == "unknown_record_type"
    # type 1, group "g", topic "t", partition 0; value version 9
    row = _decode_kv(bytes.fromhex("00010001670001740000000000"), bytes.fromhex("0009") + b"\x00" * 20)
    assert row["decode_error"] == "unknown_value_version"
    row = _decode_kv(bytes.fromhex("0001000167"), bytes.fromhex("0003"))
    assert row["decode_error"] == "malformed_key"


def test_the_summary_decode_checks_as_much_as_the_full_one():
    """``decode_offsets_numeric(values=False)`` (latest mode's summary) skips reading the offset and timestamps
    but must flag exactly the records the full decode flags: every vector, each cut short at every length."""
    from audit.formats.offsets import decode_offsets_numeric

    keys, values = [], []
    for vec in VECTORS:
        key = bytes.fromhex(vec["key_hex"]) if "key_hex" in vec else None
        value = _value_hex(vec)
        value = bytes.fromhex(value) if value else None
        if key is None:
            continue
        for cut in range(len(value) + 1 if value else 1):
            keys.append(key)
            values.append(value[:cut] if value else None)
        for cut in range(len(key)):
            keys.append(key[:cut])
            values.append(value)
    assert len(keys) > 100
    buf, ks, kl, vs, vl = bytearray(), [], [], [], []
    for k, v in zip(keys, values):
        ks.append(len(buf))
        kl.append(len(k))
        buf += k
        vs.append(len(buf))
        vl.append(-1 if v is None else len(v))
        buf += v or b""
    data = np.frombuffer(bytes(buf), dtype=np.uint8)
    args = (data, np.array(ks), np.array(kl), np.array(vs), np.array(vl))
    full, summary = decode_offsets_numeric(*args), decode_offsets_numeric(*args, values=False)
    assert full["decode_error"].tolist() == summary["decode_error"].tolist()
    assert len({e for e in full["decode_error"].tolist()}) >= 3  # the cuts do reach several errors
    for col in ("decoded", "record_type", "topic_ok", "is_tombstone", "leader_epoch", "value_version"):
        assert np.array_equal(full[col], summary[col]), col
    assert np.array_equal(full["decoded"], np.equal(full["decode_error"], None))
    assert summary["committed_offset"] is None
    # each distinct key parsed once: the same columns, whether keys are grouped, partly grouped or parsed alone
    from audit.formats.latest import group_equal_bytes
    from audit.formats.offsets import decode_offsets_summary

    for max_bytes in (1024, 12, 0):
        ids = group_equal_bytes(data, args[1], args[2], max_bytes=max_bytes)
        once = decode_offsets_summary(*args, key_ids=ids, step=7)
        for col in ("decoded", "record_type", "topic_ok", "is_tombstone", "leader_epoch", "value_version"):
            assert np.array_equal(full[col], once[col]), (max_bytes, col)
    assert (group_equal_bytes(data, args[1], args[2], max_bytes=12) < 0).any()
