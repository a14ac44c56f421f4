"""``__consumer_offsets`` keys and offset-commit values, decoded for many records at once.

Schemas follow Kafka's group-coordinator message definitions
(``group-coordinator/src/main/resources/common/message/OffsetCommitKey.json``,
``LegacyOffsetCommitKey.json``, ``OffsetCommitValue.json``, ``GroupMetadataKey.json``,
read from the ``kafka-group-coordinator`` jars of Kafka 4.4.0 and 3.9.2) and
``GroupCoordinatorRecordSerde`` / ``GroupMetadataManager.readMessageKey/readOffsetMessageValue``:

* key ``int16 record_type`` (0 and 1 = offset commit, 2 = classic group metadata;
  :mod:`audit.formats.record_types`);
* OffsetCommitValue v0..v4 (v4 flexible: compact metadata string + tagged fields; tag 0 =
  ``topicId``, written by 4.1+ brokers, decoded into ``topic_id``, other tags skipped);
* record types 3..23 (``CoordinatorRecordType``: KIP-848 consumer groups, KIP-932 share
  groups, KIP-1071 streams groups, see :data:`RECORD_TYPE_NAMES`) are known non-commit
  records: their key starts with ``GroupId`` (classic int16 string) in every schema
  (``*Key.json``, non-flexible), which is read; their value is not.  They are counted by
  name and carry no ``decode_error``.  Any other record type is ``unknown_record_type``.

Offset-commit fields are decoded with numpy over all records of a segment.  Nothing raises on bad bytes:
each record gets a ``decode_error`` instead.  The group records' values (rare) are decoded per record in
Python by :mod:`audit.formats.group_metadata` (classic groups) and :mod:`audit.formats.group_records`
(KIP-848, share and streams groups); the byte readers they share are :mod:`audit.formats.byte_reader`.
Their public names are importable from here too.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .byte_reader import GATHER_CHUNK, ValueReader, gather_slices, utf8_slices, uuid_strings
from .group_metadata import (
    MAX_GROUP_METADATA_VERSION,
    AssignmentLimitError,
    decode_consumer_assignment,
    decode_group_metadata_value,
)
from .group_records import (
    decode_consumer_group_assignment_value,
    decode_consumer_group_member_value,
    decode_member_key,
    decode_share_group_assignment_value,
    decode_share_group_member_value,
    decode_streams_group_assignment_value,
    decode_streams_group_member_value,
    decode_streams_group_topology_value,
)
from .latest import stand_ins
from .record_batch import read_int, read_varint
from .record_types import (
    CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE,
    CONSUMER_GROUP_MEMBER_METADATA_TYPE,
    CONSUMER_GROUP_METADATA_TYPE,
    GROUP_METADATA_TYPE,
    OFFSET_COMMIT_TYPES,
    OTHER_GROUP_TYPES,
    RECORD_TYPE_NAMES,
    SHARE_GROUP_CURRENT_ASSIGNMENT_TYPE,
    SHARE_GROUP_MEMBER_METADATA_TYPE,
    STREAMS_GROUP_CURRENT_ASSIGNMENT_TYPE,
    STREAMS_GROUP_MEMBER_METADATA_TYPE,
    STREAMS_GROUP_TOPOLOGY_TYPE,
)


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

MAX_OFFSET_COMMIT_VERSION = 4
#: ``decode_error`` values by code (0: none), for :func:`decode_offsets_numeric`
_ERRORS = np.array(
    [None, "malformed_key", "null_key", "unknown_record_type", "unknown_value_version", "malformed_value"], dtype=object
)
_MALFORMED_KEY, _NULL_KEY, _UNKNOWN_RECORD_TYPE, _UNKNOWN_VALUE_VERSION, _MALFORMED_VALUE = range(1, 6)


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
