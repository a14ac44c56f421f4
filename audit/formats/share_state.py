"""``__share_group_state`` records (KIP-932 share groups), decoded for many records at once.

The share coordinator keeps each share-partition's durable state in ``__share_group_state``.  Schemas follow
Kafka's ``share-coordinator/src/main/resources/common/message/ShareSnapshotKey.json``, ``ShareUpdateKey.json``,
``ShareSnapshotValue.json`` and ``ShareUpdateValue.json`` (4.1-4.4) and ``CoordinatorRecordSerde``:

* key ``int16 record_type`` (0 = ShareSnapshot, 1 = ShareUpdate), then (version 0, not flexible) ``GroupId``
  (int16-length string), ``TopicId`` (16-byte uuid), ``Partition`` (int32);
* value ``int16 value_version`` (0), then a flexible struct (compact arrays, a tagged-field section after
  every struct, nested ones included):

  - ShareSnapshotValue: ``SnapshotEpoch`` int32, ``StateEpoch`` int32, ``LeaderEpoch`` int32, ``StartOffset``
    int64, ``CreateTimestamp`` int64, ``WriteTimestamp`` int64, ``StateBatches``, tagged
    ``DeliveryCompleteCount`` int32 (tag 0, 4.2+, default -1);
  - ShareUpdateValue: ``SnapshotEpoch`` int32, ``LeaderEpoch`` int32 (-1: unchanged), ``StartOffset`` int64
    (-1: unchanged), ``StateBatches``, tagged ``DeliveryCompleteCount``;
  - StateBatch: ``FirstOffset`` int64, ``LastOffset`` int64 (both inclusive), ``DeliveryState`` int8
    (``RecordState``: 0 AVAILABLE, 2 ACKNOWLEDGED, 4 ARCHIVED), ``DeliveryCount`` int16.

  Kafka 4.0 (early access) wrote the same value version with another layout: ``SnapshotEpoch`` uint16 and no
  timestamps.  A value that does not fit the 4.1+ layout exactly but fits the 4.0 one is read as 4.0
  (``layout`` = ``"4.0"``).
* a null value is a tombstone (the coordinator deletes a share-partition's state with key type 0).

The common shape (no tagged fields but ``DeliveryCompleteCount``, any number of batches) is decoded with numpy
over all records; anything else goes through :func:`decode_share_state_value`, record by record.  Nothing
raises on bad bytes: each record gets a ``decode_error`` (``malformed_key``, ``null_key``,
``unknown_record_type``, ``unknown_value_version``, ``malformed_value``).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from .byte_reader import ValueReader, utf8_slices, uuid_strings
from .record_batch import read_int, read_varint


__all__ = [
    "DELIVERY_STATE_NAMES",
    "KV_FIELDS",
    "RECORD_TYPE_NAMES",
    "SHARE_RAW_SCHEMA",
    "SHARE_STATE_TOPIC",
    "STATE_BATCH",
    "STATE_BATCHES",
    "decode_share_state_key",
    "decode_share_state_kv",
    "decode_share_state_rows",
    "decode_share_state_segment",
    "decode_share_state_value",
]

SHARE_STATE_TOPIC = "__share_group_state"
SHARE_SNAPSHOT, SHARE_UPDATE = 0, 1
RECORD_TYPE_NAMES = {SHARE_SNAPSHOT: "ShareSnapshot", SHARE_UPDATE: "ShareUpdate"}
#: ``RecordState`` ids as persisted (ACQUIRED (1) is never written)
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4
DELIVERY_STATE_NAMES = {AVAILABLE: "AVAILABLE", 1: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED", ARCHIVED: "ARCHIVED"}

STATE_BATCH = pa.struct(
    [
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("delivery_state", pa.int8()),
        ("delivery_count", pa.int16()),
    ]
)
STATE_BATCHES = pa.list_(STATE_BATCH)
#: what :func:`decode_share_state_kv` returns, one Arrow array or numpy array per column
KV_FIELDS = {
    "record_type": pa.int16(),
    "group_id": pa.string(),
    "topic_id": pa.string(),
    "partition": pa.int32(),
    "is_tombstone": pa.bool_(),
    "value_version": pa.int16(),
    "snapshot_epoch": pa.int32(),
    "state_epoch": pa.int32(),
    "leader_epoch": pa.int32(),
    "start_offset": pa.int64(),
    "delivery_complete_count": pa.int32(),
    "create_timestamp": pa.int64(),
    "write_timestamp": pa.int64(),
    "state_batches": STATE_BATCHES,
    "decode_error": pa.string(),
}
_MIN_KEY = 2 + 2 + 16 + 4
_BATCH_BYTES = 8 + 8 + 1 + 2 + 1  # with an empty tagged-field section


class _Cursor(ValueReader):
    """:class:`audit.formats.offsets.ValueReader` with struct-format reads and the tagged fields kept."""

    def num(self, fmt: str) -> int:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def tag_map(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out


#: One StateBatch with an empty tagged-field section (FirstOffset, LastOffset, DeliveryState, DeliveryCount, 0)
_BATCH_DTYPE = np.dtype([("first", ">i8"), ("last", ">i8"), ("state", "i1"), ("count", ">i2"), ("tags", "u1")])


_ENTRY = struct.Struct(">qqbh")


def _entry(c: _Cursor) -> tuple[int, int, int, int]:
    """One StateBatch (its tagged fields skipped)."""
    if c.p + _ENTRY.size > len(c.b):
        raise ValueError(f"need {_ENTRY.size} bytes at {c.p}, value has {len(c.b)}")
    out = _ENTRY.unpack_from(c.b, c.p)
    c.p += _ENTRY.size
    c.tags()
    return out


def _batches(c: _Cursor, limit: int) -> tuple[np.ndarray, ...]:
    """Read the StateBatches array at the cursor as four numpy arrays.

    The arrays are first offset, last offset, delivery state, delivery count.  Entries without tagged fields are
    read with numpy, all at once, then (after an entry with tags, read alone) in windows that double while they
    hold none; so a value of hundreds of thousands of batches costs milliseconds, and one whose entries all carry
    tags no more than reading them one by one.
    """
    n = c.uvarint() - 1
    if n < 0:
        raise ValueError("null StateBatches")
    if n * _BATCH_BYTES > limit:
        raise ValueError(f"bad StateBatches count {n}")
    if n <= 8:  # numpy costs more than it saves on a few entries
        cols: list[list[int]] = [[], [], [], []]
        for _ in range(n):
            for col, v in zip(cols, _entry(c)):
                col.append(v)
        return tuple(np.array(col, dtype=t) for col, t in zip(cols, (np.int64, np.int64, np.int8, np.int16)))
    chunks: list[np.ndarray] = []
    left, window = n, n
    while left:
        k = min(left, window, (len(c.b) - c.p) // _BATCH_BYTES)
        if k:
            arr = np.frombuffer(c.b, _BATCH_DTYPE, count=k, offset=c.p)
            tagged = np.flatnonzero(arr["tags"])
            m = int(tagged[0]) if len(tagged) else k
            chunks.append(arr[:m])
            c.p += m * _BATCH_BYTES
            left -= m
            window = window * 2 if m == k else 16
            if m == k:
                continue
        one = np.zeros(1, _BATCH_DTYPE)
        one["first"], one["last"], one["state"], one["count"] = _entry(c)
        chunks.append(one)
        left -= 1
    out = np.concatenate(chunks) if chunks else np.zeros(0, _BATCH_DTYPE)
    return out["first"], out["last"], out["state"], out["count"]


def _value_layout(value: bytes, record_type: int, layout: str) -> dict:
    c = _Cursor(value, 2)
    snap = record_type == SHARE_SNAPSHOT
    out: dict[str, Any] = {"snapshot_epoch": c.num(">H" if layout == "4.0" else ">i")}
    out["state_epoch"] = c.num(">i") if snap else None
    out["leader_epoch"] = c.num(">i")
    out["start_offset"] = c.num(">q")
    if snap and layout != "4.0":
        out["create_timestamp"], out["write_timestamp"] = c.num(">q"), c.num(">q")
    else:
        out["create_timestamp"] = out["write_timestamp"] = None
    batches = _batches(c, len(value))
    tags = c.tag_map()
    dcc = tags.get(0)
    if dcc is not None and len(dcc) != 4:
        raise ValueError("bad DeliveryCompleteCount")
    out["delivery_complete_count"] = struct.unpack(">i", dcc)[0] if dcc is not None else -1
    if c.p != len(value):
        raise ValueError("bytes after the value")
    out["state_batches"] = list(zip(*(a.tolist() for a in batches)))
    out["layout"] = layout
    return out


def decode_share_state_value(value: bytes, record_type: int) -> dict:
    """One ShareSnapshotValue (``record_type`` 0) or ShareUpdateValue (1).

    Returns ``snapshot_epoch``, ``state_epoch`` (None for an update: it carries none), ``leader_epoch``,
    ``start_offset`` (offsets of the share-partition's topic; -1: not initialised / unchanged),
    ``create_timestamp``, ``write_timestamp`` (ms; None for updates and 4.0 snapshots),
    ``delivery_complete_count`` (-1 when absent), ``state_batches`` (``[(first_offset, last_offset,
    delivery_state, delivery_count)]``) and ``layout`` (``"4.1+"`` or ``"4.0"``).  Unknown tagged fields are
    skipped.  Raises ``ValueError`` for a value version other than 0 ("version" in the message), truncated
    bytes or bytes left over under both layouts.
    """
    if len(value) < 2:
        raise ValueError("value shorter than its version")
    version = struct.unpack(">h", value[:2])[0]
    if version != 0:
        raise ValueError(f"unknown share state value version {version}")
    try:
        return _value_layout(value, record_type, "4.1+")
    except (ValueError, struct.error, IndexError) as first:
        try:
            return _value_layout(value, record_type, "4.0")
        except (ValueError, struct.error, IndexError):
            raise ValueError(str(first)) from None


def decode_share_state_key(key: bytes) -> tuple[int, str, str, int]:
    """Decode a ShareSnapshotKey/ShareUpdateKey into ``(record_type, group_id, topic_id, partition)``.

    ``topic_id`` is given as ``Uuid.toString()``.

    Raises
    ------
    ValueError
        Truncated bytes, bytes left over or a record type other than 0 and 1.
    """
    from .metadata_log import uuid_to_str

    c = _Cursor(key)
    rtype = c.num(">h")
    if rtype not in RECORD_TYPE_NAMES:
        raise ValueError(f"unknown record type {rtype}")
    n = c.num(">h")
    if n < 0:
        raise ValueError("null GroupId")
    group = c.take(n).decode("utf-8", "replace")
    topic_id = uuid_to_str(c.take(16))
    partition = c.num(">i")
    if c.p != len(key):
        raise ValueError("bytes after the key")
    return rtype, group, topic_id, partition


def decode_share_state_kv(
    data: np.ndarray, key_start: np.ndarray, key_len: np.ndarray, value_start: np.ndarray, value_len: np.ndarray
) -> dict:
    """Decode the keys and values of many ``__share_group_state`` records at once.

    ``data``: a uint8 buffer; ``key_start``/``key_len``/``value_start``/``value_len``: int64 arrays, a length of
    -1 for null.  Returns one array per :data:`KV_FIELDS` entry (numpy for the numeric columns, Arrow for the
    strings and ``state_batches``).  Per the key and value schemas in the module docstring; state epoch,
    timestamps and batches are null on tombstones, the state epoch and timestamps on updates.  Never raises.
    """
    n = len(key_start)
    data = np.asarray(data, dtype=np.uint8)
    ks, kl, vs, vl = (np.asarray(a, dtype=np.int64) for a in (key_start, key_len, value_start, value_len))
    err = np.zeros(n, dtype=np.int8)  # 0 ok, then the codes of _ERRORS
    rtype, glen, good_key, tid_start, partition = _share_keys(data, ks, kl, err)

    tomb = good_key & (vl < 0)
    has_value = good_key & (vl >= 2)
    version = np.where(has_value, read_int(data, np.where(has_value, vs, 0), 2), -1).astype(np.int16)
    err[good_key & (vl >= 0) & (vl < 2)] = _MALFORMED_VALUE
    err[has_value & (version != 0)] = _UNKNOWN_VALUE_VERSION
    todo = has_value & (version == 0)

    snap = rtype == SHARE_SNAPSHOT
    fixed = np.where(snap, 2 + 12 + 24, 2 + 16)
    fits = todo & (vl >= fixed + 2)  # the batch count and the tagged-field count at least
    v = _fixed_fields(data, vs, snap, fits)
    fast, nb, flat_rec, within, bpos, dcc = _fast_batches(data, vs, vl, fixed, fits)
    v["delivery_complete_count"] = dcc

    # the rest, record by record (many batches, other tagged fields, the 4.0 layout, malformed bytes)
    slow = np.nonzero(todo & ~fast)[0]
    batches_lists = _slow_values(data, slow, vs, vl, rtype, err, v)
    decoded = todo & (err == 0)
    state_batches = _state_batches(data, fast, nb, flat_rec, within, bpos, slow, batches_lists, decoded)

    def col(a, m, dtype):
        return pa.array(np.asarray(a, dtype=dtype), mask=~m)

    group_id = utf8_slices(data, np.where(good_key, ks + 4, 0), np.where(good_key, glen, -1), good_key)
    create_ts, write_ts = v["create_timestamp"], v["write_timestamp"]
    return {
        "record_type": col(rtype, kl >= 2, np.int16),
        "group_id": group_id,
        "topic_id": uuid_strings(data, tid_start),
        "partition": col(partition, good_key, np.int32),
        "is_tombstone": col(tomb, good_key, bool),
        "value_version": col(version, has_value, np.int16),
        "snapshot_epoch": col(v["snapshot_epoch"], decoded, np.int32),
        "state_epoch": col(v["state_epoch"], decoded & snap, np.int32),
        "leader_epoch": col(v["leader_epoch"], decoded, np.int32),
        "start_offset": col(v["start_offset"], decoded, np.int64),
        "delivery_complete_count": col(dcc, decoded, np.int32),
        "create_timestamp": col(create_ts, decoded & snap & (create_ts != -1), np.int64),
        "write_timestamp": col(write_ts, decoded & snap & (write_ts != -1), np.int64),
        "state_batches": state_batches,
        "decode_error": pa.array(_ERRORS[err], pa.string()),
    }


def _share_keys(data: np.ndarray, ks: np.ndarray, kl: np.ndarray, err: np.ndarray) -> tuple[np.ndarray, ...]:
    """Return ``(record_type, group_id length, good_key, topic id start, partition)`` of every key.

    They are -1 where they do not decode; the keys' errors are set in ``err``.
    """
    key_ok = kl >= _MIN_KEY
    rtype = np.where(kl >= 2, read_int(data, np.where(kl >= 2, ks, 0), 2), -1)
    glen = np.where(key_ok, read_int(data, np.where(key_ok, ks + 2, 0), 2), -1)
    key_ok &= (glen >= 0) & (kl == _MIN_KEY + glen)
    known = np.isin(rtype, (SHARE_SNAPSHOT, SHARE_UPDATE))
    err[kl < 0] = _NULL_KEY
    err[(kl >= 0) & (kl >= 2) & ~known] = _UNKNOWN_RECORD_TYPE
    err[(err == 0) & ~key_ok] = _MALFORMED_KEY
    good_key = err == 0
    tid_start = np.where(good_key, ks + 4 + glen, -1)
    partition = np.where(good_key, read_int(data, np.where(good_key, ks + 20 + glen, 0), 4), -1).astype(np.int32)
    return rtype, glen, good_key, tid_start, partition


def _fixed_fields(data: np.ndarray, vs: np.ndarray, snap: np.ndarray, fits: np.ndarray) -> dict[str, np.ndarray]:
    """Read the fixed-position fields of the values that ``fits`` (snapshots where ``snap``, else updates).

    The fields are ``snapshot_epoch``, ``state_epoch``, ``leader_epoch``, ``start_offset``,
    ``create_timestamp`` and ``write_timestamp`` (-1 elsewhere).
    """
    i32 = lambda off, m: np.where(m, read_int(data, np.where(m, vs + off, 0), 4), -1)  # noqa: E731
    i64 = lambda off, m: np.where(m, read_int(data, np.where(m, vs + off, 0), 8), -1)  # noqa: E731
    s, u = fits & snap, fits & ~snap
    return {
        "snapshot_epoch": np.where(fits, i32(2, fits), -1),
        "state_epoch": np.where(s, i32(6, s), -1),
        "leader_epoch": np.where(s, i32(10, s), np.where(u, i32(6, u), -1)),
        "start_offset": np.where(s, i64(14, s), np.where(u, i64(10, u), -1)),
        "create_timestamp": np.where(s, i64(22, s), -1),
        "write_timestamp": np.where(s, i64(30, s), -1),
    }


def _fast_batches(
    data: np.ndarray, vs: np.ndarray, vl: np.ndarray, fixed: np.ndarray, fits: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Find the values of the common shape and where their batches are.

    Returns ``(fast, batch count, record of each batch, batch index within it, batch position, delivery complete
    count)``: the values of the common shape (the batches without tagged fields, no tagged field but
    ``DeliveryCompleteCount`` after them; ``fast``) and where their batches are (-1: no count).
    """
    n = len(vs)
    size = len(data)
    arr = vs + fixed
    # the batch count: an unsigned varint (count + 1), then the batches from ``first``
    count, count_size, count_ok = read_varint(data, np.where(fits, arr, 0), 5, zigzag=False)
    nb = np.where(fits & count_ok, count, 0).astype(np.int64) - 1
    fast = fits & count_ok & (nb >= 0)
    first = arr + count_size
    end = first + _BATCH_BYTES * np.maximum(nb, 0)
    fast &= end < vs + vl  # the tagged-field count byte is inside the value
    # every batch's tagged-field count is 0
    bidx = np.nonzero(fast)[0]
    reps = nb[bidx]
    flat_rec = np.repeat(bidx, reps)
    within = np.arange(len(flat_rec)) - np.repeat(np.cumsum(reps) - reps, reps)
    bpos = first[flat_rec] + _BATCH_BYTES * within
    if len(bpos):
        bad = data[bpos + _BATCH_BYTES - 1] != 0
        if bad.any():
            fast[np.unique(flat_rec[bad])] = False
    tag_count = np.where(fast, data[np.clip(np.where(fast, end, 0), 0, max(size - 1, 0))] if size else 0, 0xFF)
    dcc = np.full(n, -1, dtype=np.int64)
    no_tags = fast & (tag_count == 0) & (end + 1 == vs + vl)
    one_tag = fast & (tag_count == 1) & (end + 7 == vs + vl)
    if one_tag.any():
        t = np.nonzero(one_tag)[0]
        ok = (data[end[t] + 1] == 0) & (data[end[t] + 2] == 4)
        dcc[t[ok]] = read_int(data, end[t[ok]] + 3, 4)
        one_tag[t[~ok]] = False
    fast = no_tags | one_tag
    return fast, nb, flat_rec, within, bpos, dcc


def _slow_values(
    data: np.ndarray,
    slow: np.ndarray,
    vs: np.ndarray,
    vl: np.ndarray,
    rtype: np.ndarray,
    err: np.ndarray,
    v: dict[str, np.ndarray],
) -> list:
    """Decode each record's ``state_batches`` list for the ``slow`` rows (:func:`decode_share_state_value`).

    None elsewhere and where it fails; their fields are set in ``v``, their failures in ``err``.
    """
    batches_lists: list = [None] * len(vs)
    buf = None
    for i in slow:
        if buf is None:
            buf = data.tobytes()
        try:
            d = decode_share_state_value(buf[vs[i] : vs[i] + vl[i]], int(rtype[i]))
        except ValueError as exc:
            err[i] = _UNKNOWN_VALUE_VERSION if "version" in str(exc) else _MALFORMED_VALUE
            continue
        for name in ("snapshot_epoch", "leader_epoch", "start_offset", "delivery_complete_count"):
            v[name][i] = d[name]
        for name in ("state_epoch", "create_timestamp", "write_timestamp"):
            v[name][i] = -1 if d[name] is None else d[name]
        batches_lists[i] = d["state_batches"]
    return batches_lists


def _state_batches(
    data: np.ndarray,
    fast: np.ndarray,
    nb: np.ndarray,
    flat_rec: np.ndarray,
    within: np.ndarray,
    bpos: np.ndarray,
    slow: np.ndarray,
    batches_lists: list,
    decoded: np.ndarray,
) -> pa.ListArray:
    """Build the ``state_batches`` column (null where not ``decoded``).

    The ``fast`` rows' batches come straight from the buffer (at ``bpos``), the ``slow`` rows' from their
    ``batches_lists``.
    """
    n = len(fast)
    fast_idx = np.nonzero(fast)[0]
    counts = np.zeros(n, dtype=np.int64)
    counts[fast_idx] = nb[fast_idx]
    for i in slow:
        if batches_lists[i] is not None:
            counts[i] = len(batches_lists[i])
    total = int(counts.sum())
    first = np.empty(total, dtype=np.int64)
    last = np.empty(total, dtype=np.int64)
    state = np.empty(total, dtype=np.int8)
    dcount = np.empty(total, dtype=np.int16)
    starts = np.concatenate([[0], np.cumsum(counts)])
    fast_b = np.isin(flat_rec, fast_idx)
    if fast_b.any():
        rec, pos = flat_rec[fast_b], bpos[fast_b]
        w = within[fast_b]
        dst = starts[rec] + w
        first[dst] = read_int(data, pos, 8)
        last[dst] = read_int(data, pos + 8, 8)
        state[dst] = data[pos + 16].astype(np.int8)
        dcount[dst] = read_int(data, pos + 17, 2).astype(np.int16)
    for i in slow:
        b = batches_lists[i]
        if b:
            lo = starts[i]
            a = np.asarray(b, dtype=np.int64)
            first[lo : lo + len(b)], last[lo : lo + len(b)] = a[:, 0], a[:, 1]
            state[lo : lo + len(b)], dcount[lo : lo + len(b)] = a[:, 2], a[:, 3]
    values = pa.StructArray.from_arrays(
        [pa.array(first), pa.array(last), pa.array(state), pa.array(dcount)], fields=list(STATE_BATCH)
    )
    return pa.ListArray.from_arrays(
        pa.array(starts.astype(np.int32)), values, type=STATE_BATCHES, mask=pa.array(~decoded)
    )


_ERRORS = np.array(
    [None, "malformed_key", "null_key", "unknown_record_type", "unknown_value_version", "malformed_value"], dtype=object
)
_MALFORMED_KEY, _NULL_KEY, _UNKNOWN_RECORD_TYPE, _UNKNOWN_VALUE_VERSION, _MALFORMED_VALUE = range(1, 6)


# --------------------------------------------------------------------------- segments and fetched records

#: Rows of one ``__share_group_state`` segment (or of records a Kafka client fetched).  ``kind``: ``record`` (a
#: data record; ``decode_error`` set when it did not decode) or ``issue`` (something skipped: ``decode_error`` is
#: the reason, ``position`` the batch's byte position, ``records_affected`` how many records it held when known).
#: ``source_partition``/``offset``: where the record is in ``__share_group_state``; ``timestamp``: ms.
#: ``source_file`` is set on issue rows and records with a ``decode_error``.  The decoded columns are
#: :data:`KV_FIELDS`.  Control records (transaction markers) are not rows: the share coordinator writes no
#: transactions.
SHARE_RAW_SCHEMA = pa.schema(
    [
        ("source_file", pa.string()),
        ("source_partition", pa.int32()),
        ("kind", pa.string()),
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("batch_leader_epoch", pa.int32()),
        *[(k, v) for k, v in KV_FIELDS.items() if k != "decode_error"],
        ("decode_error", pa.string()),
        ("detail", pa.string()),
        ("records_affected", pa.int32()),
    ]
)


def _rows(kv: dict, n: int, base: dict) -> pa.RecordBatch:
    cols = {**base, **kv}
    cols["kind"] = pa.array(["record"] * n, pa.string())
    err = kv["decode_error"]
    src = base["source_file"]
    cols["source_file"] = pa.array([s if e is not None else None for s, e in zip(src, err.to_pylist())], pa.string())
    cols["detail"] = pa.nulls(n, pa.string())
    cols["records_affected"] = pa.array(np.ones(n, dtype=np.int32))
    return pa.RecordBatch.from_arrays(
        [
            cols[f.name] if isinstance(cols[f.name], pa.Array) else pa.array(cols[f.name], f.type)
            for f in SHARE_RAW_SCHEMA
        ],
        schema=SHARE_RAW_SCHEMA,
    )


def decode_share_state_segment(
    buf: bytes | memoryview, source_file: str, source_partition: int, verify_crc: bool = True
) -> list[pa.RecordBatch]:
    """Decode every record of one ``__share_group_state`` segment (``.log`` bytes) into :data:`SHARE_RAW_SCHEMA` rows.

    The result is one batch of records in log order (control records left out) and, when anything was skipped (a
    CRC mismatch, a partial or corrupt batch), one batch of issue rows.  Batches and records are read by
    :mod:`audit.formats.record_batch` as for ``__consumer_offsets``.  Never raises on bad bytes.
    """
    from .record_batch import ATTR_CONTROL, extract_records, issue_batch, scan_batches

    scan = scan_batches(buf, verify_crc=verify_crc)
    recs = extract_records(buf, scan)
    out = []
    if len(recs):
        keep = np.nonzero((scan.attributes[recs.batch] & ATTR_CONTROL) == 0)[0]
        if len(keep):
            kv = decode_share_state_kv(
                recs.data, recs.key_start[keep], recs.key_len[keep], recs.value_start[keep], recs.value_len[keep]
            )
            m = len(keep)
            batch = recs.batch[keep]
            out.append(
                _rows(
                    kv,
                    m,
                    {
                        "source_file": [source_file] * m,
                        "source_partition": pa.array(np.full(m, source_partition, dtype=np.int32)),
                        "position": pa.array(scan.position[batch]),
                        "offset": pa.array(recs.offset[keep]),
                        "timestamp": pa.array(recs.timestamp[keep]),
                        "batch_leader_epoch": pa.array(scan.partition_leader_epoch[batch].astype(np.int32)),
                    },
                )
            )
    issues = scan.issues + recs.issues
    if issues:
        out.append(issue_batch(SHARE_RAW_SCHEMA, source_file, source_partition, issues))
    return out


def decode_share_state_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Decode records a Kafka client read from ``__share_group_state`` into :data:`SHARE_RAW_SCHEMA` rows.

    Input columns ``source_partition int, source_offset long, timestamp long (ms), key binary, value binary``;
    output rows have ``source_file`` = ``__share_group_state-<p>`` on records that did not decode.  Never raises on
    bad bytes.
    """
    from .segments import binary_parts

    n = batch.num_rows
    kd, ks, kl = binary_parts(batch.column("key"))
    vd, vs, vl = binary_parts(batch.column("value"))
    kv = decode_share_state_kv(np.concatenate([kd, vd]), ks, kl, vs + len(kd), vl)
    sp = batch.column("source_partition").cast(pa.int32())
    return _rows(
        kv,
        n,
        {
            "source_file": [f"{SHARE_STATE_TOPIC}-{p}" for p in sp.to_pylist()],
            "source_partition": sp,
            "position": pa.nulls(n, pa.int64()),
            "offset": batch.column("source_offset").cast(pa.int64()),
            "timestamp": batch.column("timestamp").cast(pa.int64()),
            "batch_leader_epoch": pa.nulls(n, pa.int32()),
        },
    )
