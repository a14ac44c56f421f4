"""One ``__consumer_offsets`` segment file -> one Arrow record batch of decoded rows.

Glue between :mod:`record_batch` (batches, records), :mod:`offsets` (keys/values) and :mod:`group_columns`
(the group records' columns).
Pure: bytes in, Arrow out; :mod:`audit.sources.logdirs` runs it inside Spark.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# MAX_OWNER_ENTRIES is passed from this module's namespace: setting segments.MAX_OWNER_ENTRIES bounds the decode
from .group_columns import MAX_OWNER_ENTRIES, MEMBER_KEY_TYPES, OWNER_ENTRY, OWNERS_TYPE, group_record_columns
from .latest import MAX_KEY_BYTES, group_equal_bytes, summarise_latest
from .offsets import decode_offsets_kv, decode_offsets_numeric, decode_offsets_summary, materialise_offsets_kv
from .record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, RecordTable, extract_records, read_int, scan_batches


__all__ = [
    "MAX_OWNER_ENTRIES",
    "MEMBER_KEY_TYPES",
    "OWNERS_TYPE",
    "OWNER_ENTRY",
    "RAW_SCHEMA",
    "RECORDS_PER_STEP",
    "binary_parts",
    "counts_batch",
    "decode_offsets_rows",
    "decode_offsets_rows_latest",
    "decode_offsets_segment",
    "issues_batch",
    "kept_records",
    "record_rows",
]

#: Rows produced per segment (``source_file`` is set on issue rows and records with a ``decode_error``).
#: ``kind``: ``record`` (a data record of a __consumer_offsets
#: batch), ``control`` (a transaction marker: ``control_type`` 0 ABORT / 1 COMMIT) or
#: ``issue`` (something skipped: ``decode_error`` is the reason, ``position`` the byte
#: position of the batch, ``records_affected`` how many records it held when known) or
#: ``count`` (``record_count`` records of one record_type / value_version / is_tombstone that
#: a latest-mode summary folded away, see :mod:`audit.formats.latest`).
#: ``record_count``: records this row adds to the records-read statistics (1 for a record,
#: 0 for a summarised one); ``live_count``: live commits the row stands for when it is live.
#: Offsets are Kafka offsets of the __consumer_offsets partition; timestamps are epoch ms.
RAW_SCHEMA = pa.schema(
    [
        ("source_file", pa.string()),
        ("source_partition", pa.int32()),
        ("kind", pa.string()),
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("batch_leader_epoch", pa.int32()),
        ("is_transactional", pa.bool_()),
        ("producer_id", pa.int64()),
        ("control_type", pa.int16()),
        ("record_type", pa.int16()),
        ("group_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("is_tombstone", pa.bool_()),
        ("value_version", pa.int16()),
        ("committed_offset", pa.int64()),
        ("leader_epoch", pa.int32()),
        ("metadata", pa.string()),
        ("commit_timestamp", pa.int64()),
        ("expire_timestamp", pa.int64()),
        ("topic_id", pa.string()),
        ("group_generation", pa.int32()),
        ("group_protocol_type", pa.string()),
        ("group_protocol", pa.string()),
        ("group_members", pa.int32()),
        ("group_owners", OWNERS_TYPE),
        ("member_id", pa.string()),
        ("decode_error", pa.string()),
        ("detail", pa.string()),
        ("records_affected", pa.int32()),
        ("record_count", pa.int64()),
        ("live_count", pa.int64()),
    ]
)


def _sparse_batch(n: int, values: dict) -> pa.RecordBatch:
    """``n`` :data:`RAW_SCHEMA` rows: the given columns (python lists), every other column null."""
    cols = {f.name: pa.array(values[f.name], f.type) if f.name in values else pa.nulls(n, f.type) for f in RAW_SCHEMA}
    return pa.RecordBatch.from_arrays([cols[f.name] for f in RAW_SCHEMA], schema=RAW_SCHEMA)


def issues_batch(source_file: str, source_partition: int, issues) -> pa.RecordBatch:
    n = len(issues)
    return _sparse_batch(
        n,
        {
            "source_file": [source_file] * n,
            "source_partition": [source_partition] * n,
            "kind": ["issue"] * n,
            "position": [i.position for i in issues],
            "offset": [i.base_offset for i in issues],
            "decode_error": [i.reason for i in issues],
            "detail": [i.detail for i in issues],
            "records_affected": [i.records for i in issues],
            "record_count": [0] * n,
            "live_count": [0] * n,
        },
    )


def counts_batch(source_partition: int, counts) -> pa.RecordBatch:
    n = len(counts)
    return _sparse_batch(
        n,
        {
            "source_partition": [source_partition] * n,
            "kind": ["count"] * n,
            "record_type": [c[0] for c in counts],
            "value_version": [c[1] for c in counts],
            "is_tombstone": [c[2] for c in counts],
            "record_count": [c[3] for c in counts],
            "live_count": [0] * n,
        },
    )


#: Records decoded per step (keys, values and Arrow columns), so the per-record temporaries of a
#: segment of millions of records never exist all at once; each step is one output batch.
RECORDS_PER_STEP = 1 << 15


def _record_types(recs, idx: np.ndarray, is_control: np.ndarray, values: bool = True) -> dict[str, np.ndarray]:
    """Run :func:`decode_offsets_numeric` on the records ``idx`` of ``recs`` (``values`` as there).

    Control records are marked (record type -1, no decode error).
    """
    num = decode_offsets_numeric(
        recs.data, recs.key_start[idx], recs.key_len[idx], recs.value_start[idx], recs.value_len[idx], values=values
    )
    num["record_type"] = np.where(is_control, -1, num["record_type"]).astype(np.int16)
    if is_control.any():
        num["decode_error"][is_control] = None
        num["decoded"] = num["decoded"] | is_control
    return num


def _summary_columns(recs, is_control: np.ndarray, key_ids: np.ndarray) -> dict[str, np.ndarray]:
    """Return the columns :func:`summarise_latest` reads, of every record (as :func:`_record_types` gives them).

    Each distinct key is parsed once (``key_ids``: :func:`audit.formats.latest.group_equal_bytes` over the whole
    keys), the values :data:`RECORDS_PER_STEP` records at a time.
    """
    num = decode_offsets_summary(
        recs.data, recs.key_start, recs.key_len, recs.value_start, recs.value_len, key_ids, RECORDS_PER_STEP
    )
    num["record_type"] = np.where(is_control, -1, num["record_type"]).astype(np.int16)
    num["decoded"] = num["decoded"] | is_control
    return num


def record_rows(
    recs,
    scan,
    idx: np.ndarray,
    is_control: np.ndarray,
    is_txn: np.ndarray,
    live_count: np.ndarray,
    record_count: np.ndarray,
    source_file: str,
    source_partition: int,
) -> pa.RecordBatch:
    """:data:`RAW_SCHEMA` rows (``record``/``control``) of the records ``idx`` of ``recs``."""
    m = len(idx)
    num = _record_types(recs, idx, is_control)
    dec = materialise_offsets_kv(recs.data, num)
    batch = recs.batch[idx]
    kl, ks = recs.key_len[idx], recs.key_start[idx]
    has_type = kl >= 4  # a control record's key: int16 version, int16 type (ControlRecordType)
    ctl = np.where(has_type, read_int(recs.data, np.where(has_type, ks + 2, 0), 2), -1)
    ctype = np.where(is_control, ctl, -1).astype(np.int16)
    rtype = dec["record_type"]
    err = dec["decode_error"]
    g = group_record_columns(
        recs.data,
        rtype,
        recs.value_start[idx],
        recs.value_len[idx],
        err,
        dec["group_id"],
        ks,
        kl,
        max_entries=MAX_OWNER_ENTRIES,
    )
    err = g["decode_error"]
    cols = {
        # the file name only where something is reported (a per-row path would dominate memory)
        "source_file": pc.if_else(pc.is_valid(err), pa.scalar(source_file, pa.string()), pa.scalar(None, pa.string())),
        "source_partition": pa.array(np.full(m, source_partition, dtype=np.int32)),
        "kind": pc.if_else(pa.array(is_control), pa.scalar("control"), pa.scalar("record")),
        "position": pa.array(scan.position[batch]),
        "offset": pa.array(recs.offset[idx]),
        "timestamp": pa.array(recs.timestamp[idx]),
        "batch_leader_epoch": pa.array(scan.partition_leader_epoch[batch]),
        "is_transactional": pa.array(is_txn),
        "producer_id": pa.array(scan.producer_id[batch]),
        "control_type": pa.array(ctype),
        "record_type": pa.array(rtype),
        "group_id": dec["group_id"],
        "topic": dec["topic"],
        "partition": pa.array(dec["partition"]),
        "is_tombstone": pa.array(dec["is_tombstone"]),
        "value_version": pa.array(dec["value_version"]),
        "committed_offset": pa.array(dec["committed_offset"]),
        "leader_epoch": pa.array(dec["leader_epoch"]),
        "metadata": dec["metadata"],
        "commit_timestamp": pa.array(dec["commit_timestamp"]),
        "expire_timestamp": pa.array(dec["expire_timestamp"]),
        "topic_id": dec["topic_id"],
        **{k: v for k, v in g.items() if k != "decode_error"},
        "decode_error": err,
        "detail": pa.nulls(m, pa.string()),
        "records_affected": pa.array(np.ones(m, dtype=np.int32)),
        "record_count": pa.array(record_count),
        "live_count": pa.array(live_count),
    }
    return pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) for f in RAW_SCHEMA], schema=RAW_SCHEMA)


def kept_records(
    recs, is_control: np.ndarray, is_txn: np.ndarray, reduce_latest: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """Return ``(keep, live_count, record_count, counts)`` of the records of ``recs``.

    ``recs`` is a :class:`audit.formats.record_batch.RecordTable`, in offset order.  Every record is kept, one
    each, or with ``reduce_latest`` what :func:`audit.formats.latest.summarise_latest` keeps and the counts of the
    rest.
    """
    n = len(recs)
    if not reduce_latest:
        return np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int64), np.ones(n, dtype=np.int64), []
    key_ids = group_equal_bytes(recs.data, recs.key_start, recs.key_len, max_bytes=MAX_KEY_BYTES + 2)
    num = _summary_columns(recs, is_control, key_ids)
    s = summarise_latest(recs.data, recs.key_start, recs.key_len, num, is_txn, is_control, full_key_ids=key_ids)
    return s.keep, s.live_count, s.record_count, s.counts


def decode_offsets_segment(
    buf: bytes | memoryview,
    source_file: str,
    source_partition: int,
    verify_crc: bool = True,
    reduce_latest: bool = False,
) -> list[pa.RecordBatch]:
    """Decode every record of one ``__consumer_offsets`` segment into :data:`RAW_SCHEMA` rows.

    ``buf``: the ``.log`` file's bytes; ``source_file``: its path (reported with issues);
    ``source_partition``: the ``__consumer_offsets`` partition number.  Returns batches of
    record/control rows (one per :data:`RECORDS_PER_STEP` records, in log order) and, when anything
    was skipped, one batch of issue rows.
    Record-level problems (unknown record type, unknown value version, malformed bytes)
    are ``kind='record'`` rows with ``decode_error`` set.  Never raises on bad bytes.

    ``reduce_latest`` (``--mode latest``): emit only the records
    :func:`audit.formats.latest.summarise_latest` keeps, plus ``kind='count'`` rows for the
    statistics of the records it folded away.
    """
    scan = scan_batches(buf, verify_crc=verify_crc)
    recs = extract_records(buf, scan)
    out: list[pa.RecordBatch] = []
    n = len(recs)
    if n:
        attrs = scan.attributes[recs.batch]
        is_control = (attrs & ATTR_CONTROL) != 0
        is_txn = (attrs & ATTR_TRANSACTIONAL) != 0
        del attrs
        keep, live_count, record_count, counts = kept_records(recs, is_control, is_txn, reduce_latest)
        for lo in range(0, len(keep), RECORDS_PER_STEP):
            idx = keep[lo : lo + RECORDS_PER_STEP]
            out.append(
                record_rows(
                    recs,
                    scan,
                    idx,
                    is_control[idx],
                    is_txn[idx],
                    live_count[lo : lo + RECORDS_PER_STEP],
                    record_count[lo : lo + RECORDS_PER_STEP],
                    source_file,
                    source_partition,
                )
            )
        if counts:
            out.append(counts_batch(source_partition, counts))
    issues = scan.issues + recs.issues
    if issues:
        out.append(issues_batch(source_file, source_partition, issues))
    return out


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split a binary Arrow array into (data uint8, start int64, length int64 with -1 for null)."""
    arr = arr.cast(pa.large_binary())
    n = len(arr)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + n + 1] if n else np.zeros(1, np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    start = offsets[:-1].astype(np.int64)
    length = np.diff(offsets).astype(np.int64)
    if arr.null_count:
        length = np.where(arr.is_null().to_numpy(zero_copy_only=False), -1, length)
    return data, start, length


def decode_offsets_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Decode records already read by a Kafka client into :data:`RAW_SCHEMA` rows.

    The client reads ``read_committed``, so there are no control records and no aborted transactions.  Input
    columns ``source_partition int, source_offset long, timestamp long (ms), key binary, value binary``; output
    :data:`RAW_SCHEMA` rows (``kind='record'``, ``source_file`` = ``__consumer_offsets-<p>``).
    """
    n = batch.num_rows
    kd, ks, kl = binary_parts(batch.column("key"))
    vd, vs, vl = binary_parts(batch.column("value"))
    data = np.concatenate([kd, vd])
    dec = decode_offsets_kv(data, ks, kl, vs + len(kd), vl)
    sp = batch.column("source_partition").cast(pa.int32())
    g = group_record_columns(
        data,
        dec["record_type"],
        vs + len(kd),
        vl,
        dec["decode_error"],
        dec["group_id"],
        ks,
        kl,
        max_entries=MAX_OWNER_ENTRIES,
    )
    err = g["decode_error"]
    cols = {
        "source_file": pa.array([f"__consumer_offsets-{p}" for p in sp.to_pylist()], pa.string()),
        "source_partition": sp,
        "kind": pa.array(["record"] * n, pa.string()),
        "position": pa.nulls(n, pa.int64()),
        "offset": batch.column("source_offset").cast(pa.int64()),
        "timestamp": batch.column("timestamp").cast(pa.int64()),
        "batch_leader_epoch": pa.nulls(n, pa.int32()),
        "is_transactional": pa.array(np.zeros(n, dtype=bool)),
        "producer_id": pa.nulls(n, pa.int64()),
        "control_type": pa.array(np.full(n, -1, dtype=np.int16)),
        "record_type": pa.array(dec["record_type"]),
        "group_id": dec["group_id"],
        "topic": dec["topic"],
        "partition": pa.array(dec["partition"]),
        "is_tombstone": pa.array(dec["is_tombstone"]),
        "value_version": pa.array(dec["value_version"]),
        "committed_offset": pa.array(dec["committed_offset"]),
        "leader_epoch": pa.array(dec["leader_epoch"]),
        "metadata": dec["metadata"],
        "commit_timestamp": pa.array(dec["commit_timestamp"]),
        "expire_timestamp": pa.array(dec["expire_timestamp"]),
        "topic_id": dec["topic_id"],
        **{k: v for k, v in g.items() if k != "decode_error"},
        "decode_error": err,
        "detail": pa.nulls(n, pa.string()),
        "records_affected": pa.array(np.ones(n, dtype=np.int32)),
        "record_count": pa.array(np.ones(n, dtype=np.int64)),
        "live_count": pa.array(np.ones(n, dtype=np.int64)),
    }
    return pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) for f in RAW_SCHEMA], schema=RAW_SCHEMA)


def decode_offsets_rows_latest(records: pa.Table) -> list[pa.RecordBatch]:
    """Run :func:`decode_offsets_rows` on only the records ``--mode latest`` keeps of ``records``.

    ``records`` are a Kafka client's read_committed rows, each ``__consumer_offsets`` partition's in offset order.
    The result carries the live commits each kept one stands for (``live_count``), plus ``kind='count'`` rows for
    the records folded away: what :func:`decode_offsets_segment` gives for a segment with ``reduce_latest``.
    """
    n = records.num_rows
    if not n:
        return []
    kd, ks, kl = binary_parts(records.column("key").combine_chunks())
    vd, vs, vl = binary_parts(records.column("value").combine_chunks())
    table = RecordTable(
        np.concatenate([kd, vd]),
        np.zeros(n, dtype=np.int64),
        records.column("source_offset").to_numpy(),
        records.column("timestamp").to_numpy(),
        ks,
        kl,
        vs + len(kd),
        vl,
    )
    zeros = np.zeros(n, dtype=bool)
    keep, live_count, record_count, counts = kept_records(table, zeros, zeros, True)
    out = []
    for lo in range(0, len(keep), RECORDS_PER_STEP):
        idx = keep[lo : lo + RECORDS_PER_STEP]
        rows = decode_offsets_rows(records.take(pa.array(idx)).combine_chunks().to_batches()[0])
        for name, values in (
            ("live_count", live_count[lo : lo + RECORDS_PER_STEP]),
            ("record_count", record_count[lo : lo + RECORDS_PER_STEP]),
        ):
            i = RAW_SCHEMA.get_field_index(name)
            rows = rows.set_column(i, RAW_SCHEMA.field(name), pa.array(np.asarray(values, dtype=np.int64)))
        out.append(rows)
    if counts:
        out.append(counts_batch(int(records.column("source_partition")[0].as_py()), counts))
    return out
