"""The records of one partition of a Fetch response -> Arrow rows, as Kafka's consumer would return them.

A Fetch response carries a partition's record batches in the log's own format (the bytes of its segments), so
they are read with the segment decoder (:mod:`audit.formats.record_batch`, :mod:`audit.formats.segments`),
vectorised, instead of record by record.  What Kafka's Java consumer does on top, this module does too
(``org.apache.kafka.clients.consumer.internals.CompletedFetch``, KIP-98 for ``read_committed``):

* control batches (transaction markers) are never returned;
* under ``read_committed`` the response's ``AbortedTransactions`` (producer id, first offset) are applied as the
  consumer applies them: walking the batches in order, every aborted transaction whose first offset is at or
  below a batch's last offset puts its producer id in the aborted set; a transactional batch of a producer in
  that set is skipped; that producer's ABORT marker takes it out again;
* records before the fetch offset (the start of a batch the offset falls inside) and at or past the planned end
  offset are left out;
* the next fetch offset is the offset after the last complete batch (``DefaultRecordBatch.nextOffset``), so a
  batch emptied by compaction is still stepped over.  A partial batch at the end of the bytes is the broker
  cutting the response at ``partition_max_bytes``, not an issue: it is fetched again whole next time.

Pure: bytes in, Arrow out.  :mod:`audit.sources.fetch` sends the requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Iterable, NamedTuple

import numpy as np
import pyarrow as pa

from .byte_reader import gather_slices
from .record_batch import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    BatchScan,
    RecordTable,
    control_types,
    extract_records,
    scan_batches,
)
from .segments import RAW_SCHEMA, RECORDS_PER_STEP, counts_batch, issues_batch, record_rows, kept_records

__all__ = [
    "PreparedChunk",
    "decode_prepared",
    "prepare_fetched",
    "RECORDS_SCHEMA",
    "FetchedChunk",
    "FetchedRecords",
    "committed_batches",
    "decode_fetched",
    "decode_fetched_many",
]

#: the rows of the ``kafka_offsets_topic`` data source (:data:`audit.sources.kafka_datasource.SCHEMA`)
RECORDS_SCHEMA = pa.schema(
    [
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
    ]
)
_CONTROL_ABORT = 0


class FetchedChunk(NamedTuple):
    """One partition's part of a Fetch response.

    Its ``Records`` bytes, the offset the request asked for, the planned end (exclusive) and the response's
    ``(producer_id, first_offset)`` aborted transactions.
    """

    partition: int
    records: bytes | memoryview | None
    fetch_offset: int
    end_offset: int
    aborted_transactions: list[tuple[int, int]] | None = None


@dataclass
class FetchedRecords:
    """What the records of a Fetch response gave.

    ``batches``: Arrow record batches (:data:`RAW_SCHEMA` when decoded, else :data:`RECORDS_SCHEMA`);
    ``next_offsets``: per partition, the offset to fetch next (absent when its bytes held no complete batch);
    ``next_offset``: the same for a single-partition call;
    ``records``: records returned; ``skipped_aborted`` / ``skipped_control``: batches left out as the consumer
    leaves them out; ``issues``: batches that could not be read (CRC mismatch, corrupt framing), reported as
    ``kind='issue'`` rows in the decoded form.
    """

    batches: list[pa.RecordBatch] = field(default_factory=list)
    next_offsets: dict[int, int] = field(default_factory=dict)
    next_offset: int | None = None
    records: int = 0
    skipped_aborted: int = 0
    skipped_control: int = 0
    issues: int = 0


def committed_batches(
    buf: bytes | memoryview, scan, aborted_transactions: Iterable[tuple[int, int]] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Return the (keep, aborted) masks over ``scan``'s batches under ``read_committed``.

    ``keep`` is every CRC-valid data batch that Kafka's consumer returns; ``aborted`` the transactional batches it
    skips as aborted.

    ``aborted_transactions``: the response's ``(producer_id, first_offset)`` pairs (KIP-98).  The walk is
    ``CompletedFetch.nextFetchedRecord``'s; only batches with a producer id take part in it, so the loop runs over
    the transactional and idempotent batches only.
    """
    attrs = scan.attributes.astype(np.int64)
    ok = scan.crc_ok & (scan.magic == 2)
    is_control = (attrs & ATTR_CONTROL) != 0
    keep = ok & ~is_control
    aborted_mask = np.zeros(len(scan), dtype=bool)
    txns = sorted(aborted_transactions or (), key=lambda t: t[1])
    if not txns:
        return keep, aborted_mask
    with_pid = np.nonzero(ok & (scan.producer_id >= 0))[0]
    if not len(with_pid):
        return keep, aborted_mask
    abort_marker = np.zeros(len(scan), dtype=bool)
    ctl = ok & is_control & (scan.producer_id >= 0)
    if ctl.any():
        recs = extract_records(buf, scan, ctl)
        if len(recs):
            types = control_types(recs)
            abort_marker[recs.batch[types == _CONTROL_ABORT]] = True
    last = scan.base_offset + scan.last_offset_delta.astype(np.int64)
    is_txn = (attrs & ATTR_TRANSACTIONAL) != 0
    producers: set[int] = set()
    t = 0
    for i in with_pid.tolist():
        while t < len(txns) and txns[t][1] <= last[i]:
            producers.add(int(txns[t][0]))
            t += 1
        pid = int(scan.producer_id[i])
        if is_control[i]:
            if abort_marker[i]:
                producers.discard(pid)
        elif is_txn[i] and pid in producers:
            aborted_mask[i] = True
    return keep & ~aborted_mask, aborted_mask


def _binary(data: np.ndarray, start: np.ndarray, length: np.ndarray) -> pa.Array:
    """Arrow binary array of ``data[start:start+length]`` per row, null where ``length`` is -1."""
    n = len(start)
    valid = length >= 0
    lens = np.where(valid, length, 0).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    chars = gather_slices(data, np.where(valid, start, 0), lens, offsets) if offsets[-1] else np.zeros(0, np.uint8)
    validity = None if valid.all() else pa.array(valid).buffers()[1]
    arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(chars)])
    return arr.cast(pa.binary())


def _records_batch(recs: RecordTable, idx: np.ndarray, partitions: np.ndarray) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array(partitions.astype(np.int32)),
            pa.array(recs.offset[idx]),
            pa.array(recs.timestamp[idx]),
            _binary(recs.data, recs.key_start[idx], recs.key_len[idx]),
            _binary(recs.data, recs.value_start[idx], recs.value_len[idx]),
        ],
        schema=RECORDS_SCHEMA,
    )


def _merge(scans: list[BatchScan], shifts: list[int]) -> BatchScan:
    """One :class:`BatchScan` of buffers laid end to end (``shifts``: where each starts)."""
    arrays = {}
    for f in fields(BatchScan):
        if f.name in ("issues", "bytes_read"):
            continue
        parts = [getattr(sc, f.name) for sc in scans]
        if f.name == "position":
            parts = [p + shift for p, shift in zip(parts, shifts)]
        arrays[f.name] = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return BatchScan(
        **arrays, issues=[i for sc in scans for i in sc.issues], bytes_read=sum(sc.bytes_read for sc in scans)
    )


@dataclass
class PreparedChunk:
    """A :class:`FetchedChunk` after its batch walk (:func:`prepare_fetched`).

    It holds the bytes of its complete batches, their scan, which batches a read_committed consumer returns within
    the range, and the offset to fetch next.
    """

    partition: int
    buf: bytes
    scan: BatchScan
    keep: np.ndarray
    fetch_offset: int
    end_offset: int
    next_offset: int | None
    issues: list
    skipped_aborted: int = 0
    skipped_control: int = 0

    @property
    def size(self) -> int:
        return len(self.buf)


def prepare_fetched(chunk: FetchedChunk, verify_crc: bool = True) -> PreparedChunk:
    """Walk one partition's ``Records`` bytes (CRC-32C checked when ``verify_crc``).

    The walk gives the complete batches, the batches to read (:func:`committed_batches` within
    ``[fetch_offset, end_offset)``), the next fetch offset and the unreadable batches (a partial batch at the end
    is the response's size limit, not an issue).
    """
    buf = bytes(chunk.records or b"")
    scan = scan_batches(buf, verify_crc=verify_crc)
    issues = []
    for i in scan.issues:
        if i.reason != "partial_batch":  # the broker cut the response at partition_max_bytes: fetched again
            where = f"batch at offset {i.base_offset}" if i.base_offset >= 0 else "batch"
            i.detail = f"{where} (fetched from offset {chunk.fetch_offset}): {i.detail}".rstrip(": ")
            issues.append(i)
    scan.issues = []
    if not len(scan):
        return PreparedChunk(
            chunk.partition, b"", scan, np.zeros(0, bool), chunk.fetch_offset, chunk.end_offset, None, issues
        )
    keep, aborted = committed_batches(buf, scan, chunk.aborted_transactions)
    last = scan.base_offset + scan.last_offset_delta.astype(np.int64)
    in_range = (last >= chunk.fetch_offset) & (scan.base_offset < chunk.end_offset)
    return PreparedChunk(
        chunk.partition,
        buf[: scan.bytes_read],
        scan,
        keep & in_range,
        chunk.fetch_offset,
        chunk.end_offset,
        int(scan.base_offset[-1]) + int(scan.last_offset_delta[-1]) + 1,
        issues,
        int((aborted & in_range).sum()),
        int(((scan.attributes.astype(np.int64) & ATTR_CONTROL) != 0).sum()),
    )


def decode_prepared(
    prepared: list[PreparedChunk],
    *,
    decoded: bool = True,
    topic: str = "__consumer_offsets",
    reduce_latest: bool = False,
    consume: bool = False,
) -> FetchedRecords:
    """Decode the records of ``prepared`` chunks together (several partitions may be mixed, each in offset order).

    Their complete batches are laid end to end and framed at once, so a response of few, large batches (a commit of
    thousands of partitions is one batch) still frames in lock-step
    (:func:`audit.formats.record_batch.extract_records`) rather than record by record.

    Never raises on bad bytes: a batch with a CRC mismatch or broken framing is an issue (decoded form) and is
    stepped over.

    Parameters
    ----------
    prepared : list of PreparedChunk
        :func:`prepare_fetched` results.
    decoded : bool, default True
        True: :data:`RAW_SCHEMA` rows (``kind='record'``, keys and values decoded as
        :func:`audit.formats.segments.decode_offsets_rows` gives them, ``is_transactional`` false because the
        transaction outcome is already applied, ``batch_leader_epoch`` of the batch, ``position`` null); unreadable
        batches as ``kind='issue'`` rows.  False: :data:`RECORDS_SCHEMA` rows (raw key and value).
    topic : str, default "__consumer_offsets"
        Named in ``source_file`` (``<topic>-<partition>``) of issues and undecodable records.
    reduce_latest : bool, default False
        (decoded only) ``--mode latest``: only the records :func:`audit.formats.latest.summarise_latest` keeps, plus
        ``kind='count'`` rows for those it folded away, as the log-dir source does per segment; a key's records are
        all in one ``__consumer_offsets`` partition, so the more of a partition one call holds, the fewer rows leave
        it.
    consume : bool, default False
        The chunks' bytes are let go of (``buf`` emptied) once laid end to end, so a caller handing over what it held
        does not hold it twice while it is decoded.
    """
    out = FetchedRecords()
    issues = [(c.partition, i) for c in prepared for i in c.issues]
    for c in prepared:
        out.skipped_aborted += c.skipped_aborted
        out.skipped_control += c.skipped_control
        if c.next_offset is not None:
            out.next_offsets[c.partition] = max(c.next_offset, out.next_offsets.get(c.partition, c.next_offset))
    use = [c for c in prepared if len(c.scan)]
    if use:
        buf, scan, keep, bpart, blo, bhi = _joined(use, consume)
        recs = extract_records(buf, scan, keep) if keep.any() else None
        if recs is not None:
            for i in recs.issues:
                p = int(bpart[np.searchsorted(scan.position, i.position, side="right") - 1])
                i.detail = f"batch at offset {i.base_offset}: {i.detail}"
                issues.append((p, i))
        if recs is not None and len(recs):
            sel = np.nonzero((recs.offset >= blo[recs.batch]) & (recs.offset < bhi[recs.batch]))[0]
            sub = RecordTable(
                recs.data,
                recs.batch[sel],
                recs.offset[sel],
                recs.timestamp[sel],
                recs.key_start[sel],
                recs.key_len[sel],
                recs.value_start[sel],
                recs.value_len[sel],
            )
            out.records = len(sel)
            out.batches += _rows_batches(sub, scan, bpart, decoded=decoded, topic=topic, reduce_latest=reduce_latest)
    if issues:
        out.issues = len(issues)
        if decoded:
            out.batches += _issue_batches(issues, topic)
    return out


def _joined(use: list[PreparedChunk], consume: bool) -> tuple:
    """Lay the chunks ``use`` end to end: ``(buf, scan, keep, partition, fetch_offset, end_offset)``.

    That is their bytes, one :class:`BatchScan`, the batches to read, and each batch's partition and range (their
    ``buf`` emptied when ``consume``).
    """
    shifts = np.cumsum([0] + [c.size for c in use[:-1]]).tolist()
    scan = _merge([c.scan for c in use], shifts)
    buf = b"".join(c.buf for c in use)
    if consume:
        for c in use:
            c.buf = b""
    keep = np.concatenate([c.keep for c in use])
    bpart = np.concatenate([np.full(len(c.scan), c.partition, dtype=np.int32) for c in use])
    blo = np.concatenate([np.full(len(c.scan), c.fetch_offset, dtype=np.int64) for c in use])
    bhi = np.concatenate([np.full(len(c.scan), c.end_offset, dtype=np.int64) for c in use])
    return buf, scan, keep, bpart, blo, bhi


def _rows_batches(
    sub: RecordTable, scan: BatchScan, bpart: np.ndarray, *, decoded: bool, topic: str, reduce_latest: bool
) -> list[pa.RecordBatch]:
    """Return the row batches of the records ``sub``, at most :data:`RECORDS_PER_STEP` rows each.

    ``sub`` indexes the records of the batches of ``scan``, ``bpart`` their partitions; the batches are as
    :func:`decode_prepared` returns them; with ``reduce_latest``, those
    :func:`audit.formats.latest.summarise_latest` keeps and a ``kind='count'`` batch.
    """
    batches = []
    zeros = np.zeros(len(sub), dtype=bool)
    # the transaction outcome is applied already: nothing here is a control or pending record
    keep_rows, live_count, record_count, counts = kept_records(sub, zeros, zeros, decoded and reduce_latest)
    for lo in range(0, len(keep_rows), RECORDS_PER_STEP):
        idx = keep_rows[lo : lo + RECORDS_PER_STEP]
        rows_part = bpart[sub.batch[idx]]
        if not decoded:
            batches.append(_records_batch(sub, idx, rows_part))
            continue
        batches.append(
            _located(
                record_rows(
                    sub,
                    scan,
                    idx,
                    zeros[idx],
                    zeros[idx],
                    live_count[lo : lo + RECORDS_PER_STEP],
                    record_count[lo : lo + RECORDS_PER_STEP],
                    "",
                    0,
                ),
                rows_part,
                topic,
            )
        )
    if counts:
        batches.append(counts_batch(int(bpart[0]), counts))
    return batches


def _issue_batches(issues: list, topic: str) -> list[pa.RecordBatch]:
    """Build one :data:`RAW_SCHEMA` batch of ``kind='issue'`` rows per partition of the ``issues``.

    ``issues`` are ``(partition, issue)`` pairs; ``position`` is null.
    """
    batches = []
    for p in sorted({p for p, _ in issues}):
        batch = issues_batch(f"{topic}-{p}", p, [i for q, i in issues if q == p])
        i = RAW_SCHEMA.get_field_index("position")  # a byte position in a response means nothing to a reader
        batches.append(batch.set_column(i, RAW_SCHEMA.field("position"), pa.nulls(batch.num_rows, pa.int64())))
    return batches


def _located(rows: pa.RecordBatch, partitions: np.ndarray, topic: str) -> pa.RecordBatch:
    """``rows`` with each row's ``source_partition``, ``source_file`` on undecodable records only, no ``position``."""
    m = rows.num_rows
    err = rows.column("decode_error")
    files = pa.nulls(m, pa.string())
    if err.null_count < m:  # undecodable records are reported with their partition
        bad = err.is_valid().to_numpy(zero_copy_only=False)
        files = pa.array([f"{topic}-{q}" if b else None for q, b in zip(partitions.tolist(), bad)], pa.string())
    for name, col in (
        ("source_partition", pa.array(partitions.astype(np.int32))),
        ("source_file", files),
        ("position", pa.nulls(m, pa.int64())),
    ):
        rows = rows.set_column(RAW_SCHEMA.get_field_index(name), RAW_SCHEMA.field(name), col)
    return rows


def decode_fetched_many(
    chunks: list[FetchedChunk],
    *,
    decoded: bool = True,
    topic: str = "__consumer_offsets",
    verify_crc: bool = True,
    reduce_latest: bool = False,
) -> FetchedRecords:
    """Run :func:`decode_prepared` of :func:`prepare_fetched` on each of ``chunks``, as ``read_committed`` reads.

    ``chunks`` are the partitions of one Fetch response, or one partition's responses in order.  The result holds
    the records with ``fetch_offset <= offset < end_offset`` as a ``read_committed`` consumer gets them.
    ``next_offsets`` holds each partition's next fetch offset.
    """
    out = decode_prepared(
        [prepare_fetched(c, verify_crc) for c in chunks], decoded=decoded, topic=topic, reduce_latest=reduce_latest
    )
    if len(chunks) == 1:
        out.next_offset = out.next_offsets.get(chunks[0].partition)
    return out


def decode_fetched(
    buf: bytes | memoryview | None,
    source_partition: int,
    fetch_offset: int,
    end_offset: int,
    aborted_transactions: Iterable[tuple[int, int]] | None = None,
    *,
    decoded: bool = True,
    topic: str = "__consumer_offsets",
    verify_crc: bool = True,
) -> FetchedRecords:
    """Run :func:`decode_fetched_many` on one partition's ``Records`` bytes ``buf`` (``next_offset`` set).

    Parameters
    ----------
    buf : bytes, memoryview or None
        The partition's ``Records`` bytes (None or empty: nothing fetched).
    source_partition : int
        The partition of ``topic`` (``__consumer_offsets``) they belong to.
    fetch_offset : int
        The offset the request asked for.
    end_offset : int
        The planned end (exclusive): the last stable offset captured when the read was planned.
    aborted_transactions : iterable of (int, int), optional
        The response's ``(producer_id, first_offset)`` pairs.
    decoded, topic, verify_crc
        As :func:`decode_fetched_many`.
    """
    chunk = FetchedChunk(
        source_partition, buf, fetch_offset, end_offset, list(aborted_transactions) if aborted_transactions else None
    )
    return decode_fetched_many([chunk], decoded=decoded, topic=topic, verify_crc=verify_crc)
