"""``__consumer_offsets`` keys and values, decoded for many records at once.

Schemas follow Kafka's group-coordinator message definitions
(``group-coordinator/src/main/resources/common/message/OffsetCommitKey.json``,
``LegacyOffsetCommitKey.json``, ``OffsetCommitValue.json``, ``GroupMetadataKey.json``,
``GroupMetadataValue.json``, read from the ``kafka-group-coordinator`` jars of Kafka 4.4.0
and 3.9.2) and ``GroupMetadataManager.readMessageKey/readOffsetMessageValue``:

* key ``int16 record_type`` (0 and 1 = offset commit, 2 = classic group metadata);
* OffsetCommitValue v0..v4 (v4 flexible: compact metadata string + tagged fields; tag 0 =
  ``topicId``, written by 4.1+ brokers, decoded into ``topic_id``, other tags skipped);
* record types 3..23 (``CoordinatorRecordType``: KIP-848 consumer groups, KIP-932 share
  groups, KIP-1071 streams groups, see :data:`RECORD_TYPE_NAMES`) are known non-commit
  records: their key starts with ``GroupId`` (classic int16 string) in every schema
  (``*Key.json``, non-flexible), which is read; their value is not.  They are counted by
  name and carry no ``decode_error``.  Any other record type is ``unknown_record_type``.

Offset-commit fields are decoded with numpy over all records of a segment; group
metadata values (rare) are decoded per record in Python.  Nothing raises on bad bytes:
each record gets a ``decode_error`` instead.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from .latest import stand_ins
from .metadata_log import uuid_to_str
from .record_batch import read_int, read_varint


__all__ = [
    "CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE",
    "CONSUMER_GROUP_MEMBER_METADATA_TYPE",
    "CONSUMER_GROUP_METADATA_TYPE",
    "GATHER_CHUNK",
    "GROUP_METADATA_TYPE",
    "MAX_GROUP_METADATA_VERSION",
    "MAX_OFFSET_COMMIT_VERSION",
    "OFFSET_COMMIT_TYPES",
    "OTHER_GROUP_TYPES",
    "RECORD_TYPE_NAMES",
    "SHARE_GROUP_CURRENT_ASSIGNMENT_TYPE",
    "SHARE_GROUP_MEMBER_METADATA_TYPE",
    "STREAMS_GROUP_CURRENT_ASSIGNMENT_TYPE",
    "STREAMS_GROUP_MEMBER_METADATA_TYPE",
    "STREAMS_GROUP_TOPOLOGY_TYPE",
    "AssignmentLimitError",
    "ValueReader",
    "decode_consumer_assignment",
    "decode_consumer_group_assignment_value",
    "decode_consumer_group_member_value",
    "decode_group_metadata_value",
    "decode_member_key",
    "decode_offset_commit_values",
    "decode_offsets_kv",
    "decode_offsets_numeric",
    "decode_offsets_summary",
    "decode_share_group_assignment_value",
    "decode_share_group_member_value",
    "decode_streams_group_assignment_value",
    "decode_streams_group_member_value",
    "decode_streams_group_topology_value",
    "gather_slices",
    "materialise_offsets_kv",
    "utf8_slices",
    "uuid_strings",
]

OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA_TYPE = 2
#: Names of the record types Kafka defines (``CoordinatorRecordType``; the ``apiKey`` of each
#: ``*Key.json``), for counting.  9 (ShareGroupPartitionMetadata, 3.9 and 4.0) and 18
#: (StreamsGroupPartitionMetadata, early 4.x development) are no longer written but may still be in a log.
RECORD_TYPE_NAMES = {
    0: "OffsetCommit(legacy)",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    18: "StreamsGroupPartitionMetadata",
    19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata",
    21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment",
    23: "StreamsGroupTopology",
}
#: Known record types that are neither offset commits nor classic group metadata: counted, not decoded.
OTHER_GROUP_TYPES = np.array(
    sorted(set(RECORD_TYPE_NAMES) - {*OFFSET_COMMIT_TYPES, GROUP_METADATA_TYPE}), dtype=np.int64
)
MAX_OFFSET_COMMIT_VERSION = 4
MAX_GROUP_METADATA_VERSION = 4
#: ``decode_error`` values by code (0: none), for :func:`decode_offsets_numeric`
_ERRORS = np.array(
    [None, "malformed_key", "null_key", "unknown_record_type", "unknown_value_version", "malformed_value"], dtype=object
)
_MALFORMED_KEY, _NULL_KEY, _UNKNOWN_RECORD_TYPE, _UNKNOWN_VALUE_VERSION, _MALFORMED_VALUE = range(1, 6)


def utf8_slices(data: np.ndarray, start: np.ndarray, length: np.ndarray, valid: np.ndarray) -> pa.Array:
    """Arrow utf8 array of ``data[start:start+length]`` per row; null where not ``valid`` or length < 0."""
    n = len(start)
    ok = valid & (length >= 0)
    lens = np.where(ok, length, 0).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    chars = gather_slices(data, np.where(ok, start, 0), lens, offsets) if total else np.zeros(0, dtype=np.uint8)
    validity = pa.array(ok).buffers()[1] if not ok.all() else None
    arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(chars)])
    try:
        return arr.cast(pa.large_string()).cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # Not valid UTF-8 somewhere: decode per value, replacing bad bytes.
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in arr.to_pylist()], pa.string())


_B64URL = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", dtype=np.uint8)


def uuid_strings(data: np.ndarray, start: np.ndarray) -> pa.Array:
    """Return Arrow strings of the 16-byte uuids at ``data[start:start+16]`` in Kafka's ``Uuid.toString()`` form.

    That form is URL-safe base64 without padding, 22 characters; null where ``start`` is -1.  Vectorised: 16 bytes
    padded to 18 make six 3-byte groups, 24 sextets, of which the first 22 carry the uuid.
    """
    n = len(start)
    ok = start >= 0
    if not ok.any():
        return pa.nulls(n, pa.string())
    raw = np.zeros((n, 18), dtype=np.uint8)
    idx = np.where(ok, start, 0)[:, None] + np.arange(16)
    raw[:, :16] = data[np.minimum(idx, len(data) - 1)]
    g = raw.reshape(n, 6, 3).astype(np.uint32)
    word = (g[:, :, 0] << 16) | (g[:, :, 1] << 8) | g[:, :, 2]
    sextets = np.stack([(word >> s) & 63 for s in (18, 12, 6, 0)], axis=2).reshape(n, 24)[:, :22]
    chars = np.ascontiguousarray(_B64URL[sextets]).reshape(-1)
    offsets = np.arange(n + 1, dtype=np.int32) * 22
    validity = None if ok.all() else pa.array(ok).buffers()[1]
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars), validity)


#: :func:`gather_slices` builds its per-byte index for at most this many bytes at a time (8 index bytes per
#: byte gathered); a longer string is copied as one slice.
GATHER_CHUNK = 1 << 18


def gather_slices(data: np.ndarray, start: np.ndarray, lens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Concatenate ``data[start[i]:start[i] + lens[i]]`` of every row.

    ``offsets``: the running sum of ``lens`` with a leading 0.  Memory stays near the output size: the vectorised
    per-byte index is built for at most :data:`GATHER_CHUNK` bytes of rows at a time, and a row longer than that
    (a huge metadata string) is copied as a slice.
    """
    total = int(offsets[-1])
    out = np.empty(total, dtype=np.uint8)
    n = len(lens)
    big = np.nonzero(lens > GATHER_CHUNK)[0]
    for i in big.tolist():
        out[offsets[i] : offsets[i + 1]] = data[start[i] : start[i] + lens[i]]
    small = lens.copy()
    small[big] = 0
    cum = np.cumsum(small)
    lo = 0
    while lo < n:
        # rows lo..hi-1 hold at most GATHER_CHUNK bytes of the strings left (at least one row)
        hi = max(int(np.searchsorted(cum, (cum[lo - 1] if lo else 0) + GATHER_CHUNK, side="right")), lo + 1)
        ln = small[lo:hi]
        m = int(ln.sum())
        if m:
            rows = np.repeat(np.arange(lo, hi, dtype=np.int64), ln)
            t = np.arange(m, dtype=np.int64) - np.repeat(np.cumsum(ln) - ln, ln)
            out[offsets[rows] + t] = data[start[rows] + t]
        lo = hi
    return out


def decode_offsets_kv(
    data: np.ndarray, key_start: np.ndarray, key_len: np.ndarray, value_start: np.ndarray, value_len: np.ndarray
) -> dict[str, pa.Array | np.ndarray]:
    """Decode ``__consumer_offsets`` keys and values located in the uint8 buffer ``data``.

    Inputs are per-record arrays of byte positions and lengths (-1 = null key/value).
    Returns columns (numpy unless noted):

    - ``record_type`` int16 (-1 when the key is null or shorter than 2 bytes)
    - ``group_id`` (pyarrow string; every known record type), ``topic`` (pyarrow string; null
      unless offset commit), ``partition`` int32
    - ``is_tombstone`` bool (value null)
    - ``value_version`` int16 (-1 for tombstones)
    - ``committed_offset`` int64, ``leader_epoch`` int32 (-1 for v0-v2), ``metadata`` (pyarrow string),
      ``commit_timestamp`` int64 ms, ``expire_timestamp`` int64 ms (-1 unless v1), ``topic_id`` (pyarrow
      string, Kafka's ``Uuid.toString()`` form; null unless a v4 value carries the tagged ``topicId``)
    - ``decode_error`` (pyarrow string, null when the record decoded): ``null_key``,
      ``unknown_record_type``, ``unknown_value_version``, ``malformed_key``, ``malformed_value``.

    Offset-commit fields are only filled for record types 0/1 with a decodable value.
    Record types 3..23 (:data:`OTHER_GROUP_TYPES`) get their ``group_id`` and no error.
    """
    return materialise_offsets_kv(data, decode_offsets_numeric(data, key_start, key_len, value_start, value_len))


def materialise_offsets_kv(
    data: np.ndarray, num: dict[str, np.ndarray], rows: np.ndarray | None = None
) -> dict[str, pa.Array | np.ndarray]:
    """Build the columns of :func:`decode_offsets_kv` from :func:`decode_offsets_numeric` output.

    Only the records ``rows`` are built (indices into it; default all).  Strings are built here, so a caller that
    keeps few records pays for few strings.
    """
    if rows is not None:
        num = {k: v[rows] for k, v in num.items()}
    fill = num["fill"]
    return {
        "record_type": num["record_type"],
        "group_id": utf8_slices(data, num["group_start"], num["group_len"], num["group_ok"]),
        "topic": utf8_slices(data, num["topic_start"], num["topic_len"], num["topic_ok"]),
        "partition": num["partition"],
        "is_tombstone": num["is_tombstone"],
        "value_version": num["value_version"],
        "committed_offset": num["committed_offset"],
        "leader_epoch": num["leader_epoch"],
        "metadata": utf8_slices(data, num["metadata_start"], num["metadata_len"], fill),
        "commit_timestamp": num["commit_timestamp"],
        "expire_timestamp": num["expire_timestamp"],
        "topic_id": uuid_strings(data, num["topic_id_start"]),
        "decode_error": pa.array(num["decode_error"], pa.string()),
    }


def _decode_keys(data: np.ndarray, key_start: np.ndarray, key_len: np.ndarray) -> dict[str, np.ndarray]:
    """Decode the keys: the key part of :func:`decode_offsets_numeric`.

    That is record type, group and topic positions, partition and the key's own error code (``code``: index into
    ``_ERRORS``; value errors are set later, over it).  A function of the key's bytes alone (every read is bounded
    by the key's end), so equal keys give equal results but for the positions, which are relative to
    ``key_start``.
    """
    dlen = len(data)
    key_start = key_start.astype(np.int64)
    key_end = key_start + np.maximum(key_len, 0)

    def safe(pos, need, end):
        """Positions where ``need`` bytes fit before ``end``; else 0 (masked later)."""
        ok = (pos >= 0) & (pos + need <= end) & (pos + need <= dlen)
        return np.where(ok, pos, 0), ok

    p, has_type = safe(key_start, 2, key_end)
    has_type &= key_len >= 2
    record_type = np.where(has_type, read_int(data, p, 2), -1)
    is_commit = has_type & np.isin(record_type, OFFSET_COMMIT_TYPES)
    is_group = has_type & (record_type == GROUP_METADATA_TYPE)
    is_other = has_type & np.isin(record_type, OTHER_GROUP_TYPES)
    p, ok_g = safe(key_start + 2, 2, key_end)
    glen = np.where(ok_g, read_int(data, p, 2), -2)
    g_start = key_start + 4
    ok_g &= (glen >= -1) & (g_start + np.maximum(glen, 0) <= key_end)
    t_pos = g_start + np.maximum(glen, 0)
    p, ok_t = safe(t_pos, 2, key_end)
    tlen = np.where(ok_t, read_int(data, p, 2), -2)
    t_start = t_pos + 2
    ok_t &= (tlen >= -1) & (t_start + np.maximum(tlen, 0) <= key_end)
    part_pos = t_start + np.maximum(tlen, 0)
    p, ok_p = safe(part_pos, 4, key_end)
    partition = np.where(ok_p, read_int(data, p, 4), -1)
    key_ok_commit = is_commit & ok_g & ok_t & ok_p
    key_ok_group = is_group & ok_g
    key_ok_other = is_other & ok_g

    # error codes (index into _ERRORS), later rules overriding earlier ones
    code = np.zeros(len(key_start), dtype=np.int8)
    code[~has_type] = _MALFORMED_KEY
    code[key_len < 0] = _NULL_KEY
    unknown_type = has_type & ~is_commit & ~is_group & ~is_other
    code[unknown_type] = _UNKNOWN_RECORD_TYPE
    code[(is_commit & ~key_ok_commit) | ((is_group | is_other) & ~ok_g)] = _MALFORMED_KEY
    return {
        "record_type": record_type,
        "g_start": g_start,
        "glen": glen,
        "t_start": t_start,
        "tlen": tlen,
        "partition": partition,
        "key_ok_commit": key_ok_commit,
        "group_ok": key_ok_commit | key_ok_group | key_ok_other,
        "code": code,
    }


def _value_codes(code: np.ndarray, key_ok_commit: np.ndarray, tomb: np.ndarray, v: dict) -> np.ndarray:
    """Add the value errors of offset commits whose key is whole to ``code`` and return it.

    ``code`` holds the keys' error codes, updated in place; ``v`` is :func:`decode_offset_commit_values` output.
    """
    known_version, value_ok, ok_v = v["known_version"], v["value_ok"], v["readable_version"]
    commit_val_bad = key_ok_commit & ~tomb
    code[commit_val_bad & ok_v & ~known_version] = _UNKNOWN_VALUE_VERSION
    code[commit_val_bad & known_version & ~value_ok] = _MALFORMED_VALUE
    code[commit_val_bad & ~ok_v] = _MALFORMED_VALUE
    return code


def decode_offsets_numeric(
    data: np.ndarray,
    key_start: np.ndarray,
    key_len: np.ndarray,
    value_start: np.ndarray,
    value_len: np.ndarray,
    values: bool = True,
) -> dict[str, np.ndarray]:
    """Numeric part of :func:`decode_offsets_kv`: every column as numpy, strings as positions.

    Besides the numeric columns of :func:`decode_offsets_kv` (already masked and typed) it
    returns ``group_start``/``group_len``/``group_ok``, ``topic_start``/``topic_len``/``topic_ok``,
    ``metadata_start``/``metadata_len``, ``fill`` (offset-commit fields are valid),
    ``decode_error`` as an object array (None or the reason) and ``decoded`` (bool: no ``decode_error``).
    ``values`` False (what a latest-mode summary reads): the same checks and errors, without
    ``committed_offset``, ``commit_timestamp`` and ``expire_timestamp``.
    """
    k = _decode_keys(data, key_start, key_len)
    key_ok_commit = k["key_ok_commit"]
    tomb = value_len < 0
    v = decode_offset_commit_values(data, value_start, value_len, values=values)
    code = _value_codes(k["code"], key_ok_commit, tomb, v)
    err = _ERRORS[code]
    good_commit = key_ok_commit & (tomb | v["value_ok"])
    fill = good_commit & ~tomb

    def filled(col, dtype):
        return None if col is None else np.where(fill, col, -1).astype(dtype)

    return {
        "record_type": k["record_type"].astype(np.int16),
        "group_start": k["g_start"],
        "group_len": k["glen"],
        "group_ok": k["group_ok"],
        "topic_start": k["t_start"],
        "topic_len": k["tlen"],
        "topic_ok": key_ok_commit,
        "partition": np.where(key_ok_commit, k["partition"], -1).astype(np.int32),
        "is_tombstone": tomb,
        "value_version": v["value_version"].astype(np.int16),
        "committed_offset": filled(v["committed_offset"], np.int64),
        "leader_epoch": filled(v["leader_epoch"], np.int32),
        "metadata_start": v["metadata_start"],
        "metadata_len": v["metadata_len"],
        "fill": fill,
        "commit_timestamp": filled(v["commit_timestamp"], np.int64),
        "expire_timestamp": filled(v["expire_timestamp"], np.int64),
        "topic_id_start": np.where(fill, v["topic_id_start"], -1),
        "decode_error": err,
        "decoded": code == 0,
    }


def decode_offsets_summary(
    data: np.ndarray,
    key_start: np.ndarray,
    key_len: np.ndarray,
    value_start: np.ndarray,
    value_len: np.ndarray,
    key_ids: np.ndarray,
    step: int = 1 << 15,
) -> dict[str, np.ndarray]:
    """Decode what a latest-mode summary reads, parsing each distinct key once.

    The result is :func:`decode_offsets_numeric` ``(values=False)``'s ``record_type``, ``is_tombstone``,
    ``decoded``, ``topic_ok``, ``leader_epoch`` and ``value_version`` (the same values).

    ``key_ids`` (int64 per record): equal ids for byte-equal keys (:func:`audit.formats.latest.group_equal_bytes`
    over the whole keys), -1 for a key parsed on its own.  A segment holds a few thousand distinct keys for
    hundreds of thousands of commits; the values are decoded record by record, ``step`` records at a time.
    """
    n = len(key_start)
    ids = np.asarray(key_ids, dtype=np.int64)
    alone = np.nonzero(ids < 0)[0]
    rep = stand_ins(ids)  # one record stands for each key
    nk = len(rep)
    sel = np.concatenate([rep, alone])
    k = _decode_keys(data, key_start[sel], key_len[sel])
    where = ids.copy()
    where[alone] = nk + np.arange(len(alone), dtype=np.int64)
    record_type = k["record_type"].astype(np.int16)[where]
    key_ok_commit = k["key_ok_commit"][where]
    key_code = k["code"][where]
    tomb = value_len < 0
    epoch = np.empty(n, dtype=np.int32)
    version = np.empty(n, dtype=np.int16)
    code = np.empty(n, dtype=np.int8)
    for lo in range(0, n, step):
        sl = slice(lo, min(lo + step, n))
        v = decode_offset_commit_values(data, value_start[sl], value_len[sl], values=False)
        code[sl] = _value_codes(key_code[sl].copy(), key_ok_commit[sl], tomb[sl], v)
        fill = key_ok_commit[sl] & v["value_ok"] & ~tomb[sl]
        epoch[sl] = np.where(fill, v["leader_epoch"], -1)
        version[sl] = v["value_version"]
    return {
        "record_type": record_type,
        "is_tombstone": tomb,
        "decoded": code == 0,
        "topic_ok": key_ok_commit,
        "leader_epoch": epoch,
        "value_version": version,
    }


def decode_offset_commit_values(
    data: np.ndarray, value_start: np.ndarray, value_len: np.ndarray, values: bool = True
) -> dict[str, np.ndarray]:
    """Decode OffsetCommitValue v0-v4 (``OffsetCommitValue.json``) at the given positions.

    ``value_len`` -1 = tombstone.  Returns numpy columns ``value_version`` (-1 when absent),
    ``committed_offset``, ``leader_epoch`` (-1 before v3), ``metadata_start``/``metadata_len``,
    ``commit_timestamp`` and ``expire_timestamp`` (ms, -1 when absent), ``topic_id_start`` (position of the
    16 bytes of v4's tagged ``topicId``, tag 0; -1 when the value has none), and the flags
    ``known_version``, ``offset_ok`` (the offset field itself was readable) and ``value_ok``
    (every field of the version was readable).  Fields are filled as far as the bytes go,
    so a truncated value still yields its offset.  ``values`` False: every flag and ``leader_epoch``,
    ``value_version`` and the metadata positions, but not the offset and timestamps themselves (``None``).
    """
    dlen = len(data)
    value_start = value_start.astype(np.int64)
    value_end = value_start + np.maximum(value_len, 0)

    def safe(pos, need, end):
        ok = (pos >= 0) & (pos + need <= end) & (pos + need <= dlen)
        return np.where(ok, pos, 0), ok

    tomb = value_len < 0
    p, ok_v = safe(value_start, 2, value_end)
    version = np.where(ok_v & ~tomb, read_int(data, p, 2, in_range=True), -1)
    known_version = (version >= 0) & (version <= MAX_OFFSET_COMMIT_VERSION)
    p, ok_off = safe(value_start + 2, 8, value_end)
    committed_offset = np.where(ok_off, read_int(data, p, 8, in_range=True), -1) if values else None
    has_epoch = version >= 3
    p, ok_ep = safe(value_start + 10, 4, value_end)
    leader_epoch = np.where(has_epoch & ok_ep, read_int(data, p, 4, in_range=True), -1)
    meta_pos = value_start + np.where(has_epoch, 14, 10)
    flexible = version >= 4
    # classic string: int16 length; compact string (v4): unsigned varint length+1
    p, ok_m16 = safe(meta_pos, 2, value_end)
    mlen16 = np.where(ok_m16, read_int(data, p, 2, in_range=True), -2)
    pm = np.where((meta_pos < dlen) & (meta_pos >= 0), meta_pos, 0)
    uv, uv_size, ok_uv = read_varint(data, pm, 5, zigzag=False)
    ok_uv &= meta_pos < value_end
    mlen = np.where(flexible, uv - 1, mlen16)
    mhdr = np.where(flexible, uv_size, 2)
    ok_meta = np.where(flexible, ok_uv, ok_m16) & (mlen >= -1)
    m_start = meta_pos + mhdr
    ok_meta &= m_start + np.maximum(mlen, 0) <= value_end
    ts_pos = m_start + np.maximum(mlen, 0)
    p, ok_ts = safe(ts_pos, 8, value_end)
    commit_ts = np.where(ok_ts, read_int(data, p, 8, in_range=True), -1) if values else None
    p, ok_exp = safe(ts_pos + 8, 8, value_end)
    has_exp = version == 1
    expire_ts = np.where(has_exp & ok_exp, read_int(data, p, 8, in_range=True), -1) if values else None
    value_ok = (
        known_version & ok_off & np.where(has_epoch, ok_ep, True) & ok_meta & ok_ts & np.where(has_exp, ok_exp, True)
    )
    tag_pos = ts_pos + 8
    topic_id_start = _topic_id_starts(data, tag_pos, flexible & known_version & ok_ts & ok_meta, value_end)
    return {
        "value_version": version,
        "committed_offset": committed_offset,
        "leader_epoch": leader_epoch,
        "metadata_start": m_start,
        "metadata_len": mlen,
        "metadata_ok": ok_meta,
        "commit_timestamp": commit_ts,
        "expire_timestamp": expire_ts,
        "known_version": known_version,
        "offset_ok": ok_off & known_version,
        "value_ok": value_ok,
        "readable_version": ok_v & ~tomb,
        "topic_id_start": topic_id_start,
    }


def _topic_id_starts(
    data: np.ndarray, tag_pos: np.ndarray, flexible_ok: np.ndarray, value_end: np.ndarray
) -> np.ndarray:
    """Where v4's tagged ``topicId`` (tag 0, 16 bytes) starts in each value, -1 where it has none.

    The tagged fields at ``tag_pos``: an unsigned varint count, then (uvarint tag, uvarint size, bytes) in
    ascending tag order, so the topic id can only be the first.  ``flexible_ok``: the values of a flexible
    version whose fields before the tags were read.
    """
    dlen = len(data)
    topic_id_start = np.full(len(tag_pos), -1, dtype=np.int64)
    flex_ok = flexible_ok & (tag_pos < value_end)
    if not flex_ok.any():
        return topic_id_start

    def uv(pos, ok):
        v_, size_, good = read_varint(data, np.where(ok & (pos < dlen), pos, 0), 5, zigzag=False)
        return v_, size_, good & ok & (pos + size_ <= value_end)

    n_tags, s1, g1 = uv(tag_pos, flex_ok)
    tag, s2, g2 = uv(tag_pos + s1, g1 & (n_tags >= 1))
    size, s3, g3 = uv(tag_pos + s1 + s2, g2 & (tag == 0))
    start = tag_pos + s1 + s2 + s3
    has_id = g3 & (size == 16) & (start + 16 <= value_end) & (start + 16 <= dlen)
    return np.where(has_id, start, -1)


# --------------------------------------------------------------------------- group metadata


class ValueReader:
    """Cursor over one value for the (rare) per-record group metadata decode."""

    def __init__(self, b: bytes, pos: int = 0):
        self.b, self.p = b, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.p + n > len(self.b):
            raise ValueError(f"need {n} bytes at {self.p}, value has {len(self.b)}")
        v = self.b[self.p : self.p + n]
        self.p += n
        return v

    def i16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def i64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        shift = val = 0
        while True:
            byte = self.take(1)[0]
            val |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return val
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def string(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.i16()
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def bytes_(self, flexible: bool) -> bytes | None:
        n = self.uvarint() - 1 if flexible else self.i32()
        return None if n < 0 else self.take(n)

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


class AssignmentLimitError(ValueError):
    """A GroupMetadataValue's assignments hold more (member, topic) entries than the caller allows."""


def decode_consumer_assignment(assignment: bytes, max_entries: int | None = None) -> list[tuple[str, np.ndarray]]:
    """Decode the assigned partitions of one member of a ``consumer`` protocol group, per topic.

    ``assignment`` is the ``Assignment`` bytes of a GroupMetadataValue member: an int16 version,
    then ``ConsumerProtocolAssignment.json`` (not flexible): ``AssignedPartitions`` (int32 count
    of {``Topic`` int16-length string, ``Partitions`` int32 array}), ``UserData`` (nullable
    int32-length bytes).  Versions above 3 are read as version 3 and bytes after the known fields
    are ignored, as Kafka's ``ConsumerProtocol.deserializeAssignment`` does (forward
    compatibility).

    Returns
    -------
    list of (str, numpy.ndarray)
        ``[(topic, partitions int32 ndarray)]``, topics with no partition left out.

    Raises
    ------
    ValueError
        A negative version, a negative or oversized count, or truncated bytes.
    AssignmentLimitError
        (Before building it) the result would have more than ``max_entries`` topics.
    """
    r = ValueReader(assignment)
    if r.i16() < 0:
        raise ValueError("negative ConsumerProtocolAssignment version")
    out = []
    n_topics = r.i32()
    if n_topics < 0 or n_topics > len(assignment):
        raise ValueError(f"bad assigned topic count {n_topics}")
    for _ in range(n_topics):
        topic = r.string(False)
        n_parts = r.i32()
        if topic is None or n_parts < 0 or 4 * n_parts > len(assignment) - r.p:
            raise ValueError("bad assigned partitions")
        if n_parts:
            if max_entries is not None and len(out) >= max_entries:
                raise AssignmentLimitError(f"more than {max_entries} assigned topics")
            out.append((topic, np.frombuffer(assignment, ">i4", n_parts, r.p).astype(np.int32)))
        r.p += 4 * n_parts
    r.bytes_(False)  # UserData
    return out


def decode_group_metadata_value(value: bytes, assignments: bool = True, max_entries: int | None = None) -> dict:
    """Decode a GroupMetadataValue (v0-v4; v4 flexible) per ``GroupMetadataValue.json``.

    Returns ``{"value_version", "protocol_type", "generation", "protocol", "leader",
    "current_state_timestamp" (ms, -1 before v2), "members", "member_list"}`` where ``members``
    is the member count and ``member_list`` one dict per member: ``member_id``,
    ``group_instance_id`` (None before v3 or for a dynamic member), ``client_id``,
    ``client_host`` (as the coordinator saw it, e.g. ``/10.0.0.7``), ``session_timeout`` and
    ``rebalance_timeout`` (ms; -1 before v1), and ``assignment``: the member's
    ``[(topic, partitions int32 ndarray)]`` from :func:`decode_consumer_assignment` when the
    group's protocol type is ``consumer`` (and ``assignments`` is true), else None (Connect and
    other protocols have their own assignment format); an assignment that does not decode is
    None too and counted in ``bad_assignments``.  Raises ``ValueError`` for truncated bytes or a
    version above 4, :class:`AssignmentLimitError` when the members' assignments hold more than
    ``max_entries`` (member, topic) entries in all (checked before they are built: bounded memory).
    """
    r = ValueReader(value)
    version = r.i16()
    if version < 0 or version > MAX_GROUP_METADATA_VERSION:
        raise ValueError(f"unknown GroupMetadataValue version {version}")
    flex = version >= 4
    out = {
        "value_version": version,
        "protocol_type": r.string(flex),
        "generation": r.i32(),
        "protocol": r.string(flex),
        "leader": r.string(flex),
    }
    out["current_state_timestamp"] = r.i64() if version >= 2 else -1
    count = (r.uvarint() - 1) if flex else r.i32()
    consumer = assignments and out["protocol_type"] == "consumer"
    members, bad, entries = [], 0, 0
    for _ in range(max(count, 0)):
        m = {"member_id": r.string(flex)}
        m["group_instance_id"] = r.string(flex) if version >= 3 else None
        m["client_id"] = r.string(flex)
        m["client_host"] = r.string(flex)
        m["rebalance_timeout"] = r.i32() if version >= 1 else -1
        m["session_timeout"] = r.i32()
        r.bytes_(flex)  # subscription
        assignment = r.bytes_(flex)
        m["assignment"] = None
        if consumer and assignment is not None:
            try:
                left = None if max_entries is None else max_entries - entries
                m["assignment"] = decode_consumer_assignment(assignment, left)
                entries += len(m["assignment"])
            except AssignmentLimitError:
                raise
            except (ValueError, struct.error):
                bad += 1
        if flex:
            r.tags()
        members.append(m)
    if flex:
        r.tags()
    out["members"] = max(count, 0)
    out["member_list"] = members
    out["bad_assignments"] = bad
    return out


# --------------------------------------------------------------------------- KIP-848 consumer groups

CONSUMER_GROUP_METADATA_TYPE = 3
CONSUMER_GROUP_MEMBER_METADATA_TYPE = 5
CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE = 8


def decode_member_key(key: bytes) -> str | None:
    """Return the ``MemberId`` of a ``ConsumerGroupMemberMetadataKey`` / ``ConsumerGroupCurrentMemberAssignmentKey``.

    The keys are not flexible: int16 type, GroupId int16-length string, MemberId int16-length string.  None when
    the key is cut short.
    """
    try:
        r = ValueReader(key, 2)
        r.string(False)
        return r.string(False)
    except ValueError:
        return None


def decode_consumer_group_member_value(value: bytes) -> dict:
    """Decode a ``ConsumerGroupMemberMetadataValue`` (record type 5, KIP-848; version 0, flexible).

    Fields per ``ConsumerGroupMemberMetadataValue.json`` of Kafka 3.9-4.x (InstanceId, RackId, ClientId,
    ClientHost, SubscribedTopicNames, SubscribedTopicRegex, RebalanceTimeoutMs, ServerAssignor, tagged
    ClassicMemberMetadata); the fields after ClientHost are not needed and not read.

    Returns
    -------
    dict
        ``group_instance_id``, ``rack_id``, ``client_id``, ``client_host``.

    Raises
    ------
    ValueError
        A version other than 0 or truncated bytes.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown ConsumerGroupMemberMetadataValue version")
    out = {"group_instance_id": r.string(True), "rack_id": r.string(True)}
    out["client_id"], out["client_host"] = r.string(True), r.string(True)
    if out["client_id"] is None or out["client_host"] is None:
        raise ValueError("null ClientId or ClientHost")
    return out


def decode_consumer_group_assignment_value(value: bytes, max_entries: int | None = None) -> dict:
    """Decode a ``ConsumerGroupCurrentMemberAssignmentValue`` (record type 8, KIP-848; version 0, flexible).

    Fields per ``ConsumerGroupCurrentMemberAssignmentValue.json`` of Kafka 3.9-4.x.

    Returns
    -------
    dict
        ``member_epoch``, ``previous_member_epoch``, ``state`` (int8, ``MemberState``), ``assigned`` and
        ``pending_revocation``: ``[(topic id as Uuid.toString(), partitions int32 ndarray)]`` (topics without
        partitions left out).

    Raises
    ------
    ValueError
        Another version, truncated bytes or bytes left over (3.7's early-access layout had other fields under the
        same version).
    AssignmentLimitError
        Past ``max_entries`` topics.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown ConsumerGroupCurrentMemberAssignmentValue version")
    out: dict = {"member_epoch": r.i32(), "previous_member_epoch": r.i32(), "state": struct.unpack(">b", r.take(1))[0]}
    out["assigned"] = _assigned_topics(r, value, "assigned", max_entries)
    left = None if max_entries is None else max_entries - len(out["assigned"])
    out["pending_revocation"] = _assigned_topics(r, value, "pending_revocation", left)
    r.tags()
    if r.p != len(value):
        raise ValueError("bytes after the value")
    return out


def _assigned_topics(
    r: ValueReader, value: bytes, field: str, max_entries: int | None, key=lambda r: uuid_to_str(r.take(16))
) -> list[tuple[str, np.ndarray]]:
    """Read a compact array of {``key``, Partitions compact int32 array, tagged fields}.

    ``key`` is a topic id, or a streams subtopology id: these are the ``TopicPartitions``/``TaskIds`` of the
    KIP-848, share and streams assignment values.

    Returns
    -------
    list of (str, numpy.ndarray)
        ``[(key, partitions int32 ndarray)]``, entries without partitions left out.

    Raises
    ------
    ValueError
        Bad counts or truncated bytes.
    AssignmentLimitError
        Past ``max_entries``.
    """
    n = r.uvarint() - 1
    if n < 0 or n > len(value):
        raise ValueError(f"bad {field} count")
    out = []
    for _ in range(n):
        k_id = key(r)
        k = r.uvarint() - 1
        if k_id is None or k < 0 or 4 * k > len(value) - r.p:
            raise ValueError(f"bad {field} partitions")
        if k:
            if max_entries is not None and len(out) >= max_entries:
                raise AssignmentLimitError(f"more than {max_entries} assigned topics")
            out.append((k_id, np.frombuffer(value, ">i4", k, r.p).astype(np.int32)))
        r.p += 4 * k
        r.tags()  # AssignmentEpochs (tag 0, KIP-1251) and any later tag
    return out


# --------------------------------------------------------------------------- KIP-932 share groups

SHARE_GROUP_MEMBER_METADATA_TYPE = 10
SHARE_GROUP_CURRENT_ASSIGNMENT_TYPE = 14


def decode_share_group_member_value(value: bytes) -> dict:
    """Decode a ``ShareGroupMemberMetadataValue`` (record type 10, KIP-932; version 0, flexible).

    Fields per ``ShareGroupMemberMetadataValue.json`` of Kafka 4.0-4.4: RackId, ClientId, ClientHost,
    SubscribedTopicNames.

    Returns
    -------
    dict
        ``rack_id``, ``client_id``, ``client_host`` (a share member has no ``group.instance.id``) and
        ``subscribed_topics`` (topic names).

    Raises
    ------
    ValueError
        A version other than 0, truncated bytes or a null ClientId/ClientHost/topic name.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown ShareGroupMemberMetadataValue version")
    out = {"rack_id": r.string(True)}
    out["client_id"], out["client_host"] = r.string(True), r.string(True)
    if out["client_id"] is None or out["client_host"] is None:
        raise ValueError("null ClientId or ClientHost")
    n = r.uvarint() - 1
    if n > len(value):
        raise ValueError("bad SubscribedTopicNames count")
    topics = []
    for _ in range(max(n, 0)):
        name = r.string(True)
        if name is None:
            raise ValueError("null subscribed topic name")
        topics.append(name)
    out["subscribed_topics"] = topics
    return out


def decode_share_group_assignment_value(value: bytes, max_entries: int | None = None) -> dict:
    """Decode a ``ShareGroupCurrentMemberAssignmentValue`` (record type 14, KIP-932; version 0, flexible).

    Fields per ``ShareGroupCurrentMemberAssignmentValue.json`` of Kafka 4.0-4.4.

    Returns
    -------
    dict
        ``member_epoch``, ``previous_member_epoch``, ``state`` (int8, ``MemberState``) and ``assigned``:
        ``[(topic id as Uuid.toString(), partitions int32 ndarray)]`` (topics without partitions left out).

    Raises
    ------
    ValueError
        Another version, truncated bytes or bytes left over.
    AssignmentLimitError
        Past ``max_entries`` topics.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown ShareGroupCurrentMemberAssignmentValue version")
    out: dict = {"member_epoch": r.i32(), "previous_member_epoch": r.i32(), "state": struct.unpack(">b", r.take(1))[0]}
    out["assigned"] = _assigned_topics(r, value, "AssignedPartitions", max_entries)
    r.tags()
    if r.p != len(value):
        raise ValueError("bytes after the value")
    return out


# --------------------------------------------------------------------------- KIP-1071 streams groups

STREAMS_GROUP_MEMBER_METADATA_TYPE = 19
STREAMS_GROUP_CURRENT_ASSIGNMENT_TYPE = 22
STREAMS_GROUP_TOPOLOGY_TYPE = 23


def _compact_array(r: ValueReader, what: str, limit: int) -> int:
    n = r.uvarint() - 1
    if n > limit:
        raise ValueError(f"bad {what} count {n}")
    return max(n, 0)


def _compact_strings(r: ValueReader, what: str, limit: int) -> list[str]:
    out = []
    for _ in range(_compact_array(r, what, limit)):
        v = r.string(True)
        if v is None:
            raise ValueError(f"null {what}")
        out.append(v)
    return out


def decode_streams_group_member_value(value: bytes) -> dict:
    """Decode a ``StreamsGroupMemberMetadataValue`` (record type 19, KIP-1071; version 0, flexible).

    Fields per ``StreamsGroupMemberMetadataValue.json`` of Kafka 4.1-4.4: InstanceId, RackId, ClientId, ClientHost,
    RebalanceTimeoutMs, TopologyEpoch, ProcessId, UserEndpoint, ClientTags.  The fields after ProcessId are not
    read.

    Returns
    -------
    dict
        ``group_instance_id``, ``rack_id``, ``client_id``, ``client_host``, ``topology_epoch`` and ``process_id``
        (one Streams instance; it can run several members).

    Raises
    ------
    ValueError
        A version other than 0, truncated bytes or a null ClientId/ClientHost/ProcessId.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown StreamsGroupMemberMetadataValue version")
    out = {"group_instance_id": r.string(True), "rack_id": r.string(True)}
    out["client_id"], out["client_host"] = r.string(True), r.string(True)
    r.i32()  # RebalanceTimeoutMs
    out["topology_epoch"] = r.i32()
    out["process_id"] = r.string(True)
    if out["client_id"] is None or out["client_host"] is None or out["process_id"] is None:
        raise ValueError("null ClientId, ClientHost or ProcessId")
    return out


def decode_streams_group_assignment_value(value: bytes, max_entries: int | None = None) -> dict:
    """Decode a ``StreamsGroupCurrentMemberAssignmentValue`` (record type 22, KIP-1071; version 0, flexible).

    Fields per ``StreamsGroupCurrentMemberAssignmentValue.json`` of Kafka 4.1-4.4.  Standby and warm-up tasks
    (which process no input) and the tasks pending revocation are not read.

    Returns
    -------
    dict
        ``member_epoch``, ``previous_member_epoch``, ``state`` (int8, ``streams.MemberState``: 1 STABLE,
        2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS) and ``active``: the member's active tasks as ``[(subtopology id,
        task partitions int32 ndarray)]`` (TaskIds; the tagged AssignmentEpochs skipped).

    Raises
    ------
    ValueError
        Another version or truncated bytes.
    AssignmentLimitError
        Past ``max_entries`` subtopologies.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown StreamsGroupCurrentMemberAssignmentValue version")
    out: dict = {"member_epoch": r.i32(), "previous_member_epoch": r.i32(), "state": struct.unpack(">b", r.take(1))[0]}
    out["active"] = _assigned_topics(r, value, "ActiveTasks", max_entries, key=lambda r: r.string(True))
    return out


def decode_streams_group_topology_value(value: bytes, max_entries: int | None = None) -> dict:
    """Decode a ``StreamsGroupTopologyValue`` (record type 23, KIP-1071; version 0, flexible).

    Fields per ``StreamsGroupTopologyValue.json`` of Kafka 4.1-4.4.

    Returns
    -------
    dict
        ``epoch`` and ``sources``: ``[(subtopology id, topic name)]`` for every SourceTopics and
        RepartitionSourceTopics entry of each subtopology (task *p* of a subtopology reads partition *p* of each of
        them; SourceTopicRegex subscriptions are resolved by the broker and not named here).

    Raises
    ------
    ValueError
        Another version or truncated bytes.
    AssignmentLimitError
        Past ``max_entries`` sources.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown StreamsGroupTopologyValue version")
    out: dict = {"epoch": r.i32()}
    limit = len(value)
    sources = []

    def topic_infos() -> list[str]:
        names = []
        for _ in range(_compact_array(r, "TopicInfo", limit)):
            name = r.string(True)
            if name is None:
                raise ValueError("null TopicInfo name")
            r.i32()  # Partitions
            r.i16()  # ReplicationFactor
            for _ in range(_compact_array(r, "TopicConfigs", limit)):
                r.string(True)
                r.string(True)
                r.tags()
            r.tags()
            names.append(name)
        return names

    for _ in range(_compact_array(r, "Subtopologies", limit)):
        sub = r.string(True)
        if sub is None:
            raise ValueError("null SubtopologyId")
        names = _compact_strings(r, "SourceTopics", limit)
        _compact_strings(r, "SourceTopicRegex", limit)
        topic_infos()  # StateChangelogTopics
        _compact_strings(r, "RepartitionSinkTopics", limit)
        names += topic_infos()  # RepartitionSourceTopics
        for _ in range(_compact_array(r, "CopartitionGroups", limit)):
            for what in ("SourceTopics", "SourceTopicRegex", "RepartitionSourceTopics"):
                r.take(2 * _compact_array(r, what, limit))
            r.tags()
        r.tags()
        for name in names:
            if max_entries is not None and len(sources) >= max_entries:
                raise AssignmentLimitError(f"more than {max_entries} source topics")
            sources.append((sub, name))
    r.tags()
    if r.p != len(value):
        raise ValueError("bytes after the value")
    out["sources"] = sources
    return out
