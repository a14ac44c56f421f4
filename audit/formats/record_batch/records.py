"""The records of a segment's v2 batches, located with numpy.

:func:`extract_records` decompresses the compressed batches (:mod:`.compression`), frames every record
(:func:`_frame_records`) and reads each record's offset, timestamp, key and value position into a
:class:`~.results.RecordTable`; legacy message sets come from :mod:`.legacy`, merged in log order.

Follows Kafka's ``DefaultRecordBatch`` and ``DefaultRecord`` (clients/src/main/java/org/apache/kafka/common/
record/).  Every per-record field is decoded for all records of a segment at once (records are framed one numpy
pass per record position while many batches are left, then record by record for the few left), so a segment of
millions of records costs a few dozen array operations and one short Python step per record at most.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np

from .compression import DecompressionLimitError, InflationBudget, decompress, max_batch_payload_bytes
from .layout import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    COMPRESSION_NAMES,
    LOG_OVERHEAD,
    MIN_RECORD_SIZE,
    RECORDS_OFFSET,
)
from .legacy import extract_legacy_records
from .primitives import byte_view, overlapping_view, read_int, read_varint
from .results import BatchScan, ReadIssue, RecordTable

__all__ = ["LOCKSTEP_MIN_BATCHES", "control_types", "extract_records", "short_heads"]


def extract_records(buf: bytes | memoryview, scan: BatchScan, batch_mask: np.ndarray | None = None) -> RecordTable:
    """Locate every record of the batches selected by ``batch_mask`` (default: CRC-valid ones).

    Compressed batches are decompressed with :func:`decompress` (at most
    :func:`max_batch_payload_bytes` each, and together within the segment's
    :class:`InflationBudget`; a batch inflating beyond either is dropped and reported as
    ``decompression_limit``) and appended to the buffer.  Records are framed in lock-step (step *k*
    reads the *k*-th record of every batch at once) while many batches are left, then the few left
    record by record (:func:`_frame_records`).  A batch whose record count is negative or larger
    than its (decompressed) payload can hold at :data:`MIN_RECORD_SIZE` bytes a record, or whose
    records overrun it, is dropped whole and reported as ``corrupt_batch`` (Kafka's
    ``DefaultRecordBatch`` throws ``InvalidRecordException`` for these).  A batch of count 0 (emptied
    by compaction) has no records and is no issue.
    Legacy message sets among the selected batches are read by :func:`extract_legacy_records`
    and merged in log order.  Never raises.
    """
    selected = scan.crc_ok.copy() if batch_mask is None else batch_mask & scan.crc_ok
    legacy = selected & (scan.magic < 2)
    budget = InflationBudget.for_batches(scan, selected)
    table = _extract_v2_records(buf, scan, selected & ~legacy, budget)
    if legacy.any():
        table = _merge_in_log_order(table, extract_legacy_records(buf, scan, legacy, budget))
    return table


def _merge_in_log_order(a: RecordTable, b: RecordTable) -> RecordTable:
    """Merge both tables' records into one, ordered by batch (file position) and, within one, as they were."""
    for x, y in ((a, b), (b, a)):
        if not len(y):  # nothing to interleave: keep x's buffer as it is (no copy of the segment)
            return replace(x, issues=a.issues + b.issues)
    shift = len(a.data)
    order = np.argsort(np.concatenate([a.batch, b.batch]), kind="stable")
    cat = lambda x, y: np.concatenate([x, y])[order]  # noqa: E731
    return RecordTable(
        data=np.concatenate([a.data, b.data]),
        batch=cat(a.batch, b.batch),
        offset=cat(a.offset, b.offset),
        timestamp=cat(a.timestamp, b.timestamp),
        key_start=cat(a.key_start, b.key_start + shift),
        key_len=cat(a.key_len, b.key_len),
        value_start=cat(a.value_start, b.value_start + shift),
        value_len=cat(a.value_len, b.value_len),
        issues=a.issues + b.issues,
    )


def _extract_v2_records(
    buf: bytes | memoryview, scan: BatchScan, batch_mask: np.ndarray, budget: InflationBudget
) -> RecordTable:
    """Locate the records of the magic-2 batches selected by ``batch_mask``, compressed ones within ``budget``.

    :func:`extract_records` for those batches.

    The phases, each a few array operations over all the selected batches (``DefaultRecordBatch`` and
    ``DefaultRecord``): :func:`_impossible_counts` drops the batches whose record count their bytes cannot hold,
    :func:`_inflate_batches` decompresses the compressed ones after the segment's bytes, :func:`_frame_records`
    finds every record's body, :func:`_read_record_bodies` reads its fields, :func:`_report_overruns` drops the
    batches whose records overrun them and :func:`_record_table` assembles what is left.

    Parameters
    ----------
    buf : bytes or memoryview
        The whole ``.log`` file content (a memoryview may hold signed bytes).
    scan : BatchScan
        The batch headers of ``buf`` (:func:`~.batches.scan_batches`).
    batch_mask : numpy.ndarray
        bool, one per batch of ``scan``: the magic-2 batches to read (left unchanged).
    budget : InflationBudget
        What the segment's compressed batches may still inflate to; spent by :func:`_inflate_batches`.

    Returns
    -------
    RecordTable
        The records of the batches read, in log order, with an :class:`~.results.ReadIssue` per batch dropped.
    """
    issues: list[ReadIssue] = []
    # records (or their compressed block) of batch i: sec_start[i]:sec_end[i], int64 byte positions in buf
    sec_start = scan.position + RECORDS_OFFSET
    sec_end = scan.position + LOG_OVERHEAD + scan.batch_length.astype(np.int64)
    batch_mask = batch_mask & ~_impossible_counts(scan, batch_mask, sec_end - sec_start, issues)
    data = _inflate_batches(buf, scan, batch_mask, sec_start, sec_end, budget, issues)
    sel = np.nonzero(batch_mask & (scan.record_count > 0))[0]
    rb, rs, re_, bad = _frame_records(data, sec_start[sel], sec_end[sel], scan.record_count[sel].astype(np.int64))
    bodies = _read_record_bodies(data, rs, re_)
    _report_overruns(scan, sel, rb, bodies.ok, bad, issues)
    return _record_table(data, scan, sel, rb, bad, bodies, issues)


def _impossible_counts(
    scan: BatchScan, batch_mask: np.ndarray, stored: np.ndarray, issues: list[ReadIssue]
) -> np.ndarray:
    """Find the selected batches whose record count their bytes cannot hold, each reported as ``corrupt_batch``.

    ``DefaultRecordBatch`` throws ``InvalidRecordException`` for a negative count, and a record takes at least
    :data:`MIN_RECORD_SIZE` bytes: an uncompressed batch holds at most its records payload over that, a
    compressed one at most :func:`max_batch_payload_bytes` over that.  Found before any decompression or
    framing, so a forged count costs nothing.

    Parameters
    ----------
    scan : BatchScan
        The batch headers.
    batch_mask : numpy.ndarray
        bool, one per batch: those to check.
    stored : numpy.ndarray
        int64, one per batch: the bytes of its records payload as stored.
    issues : list of ReadIssue
        Appended to, one ``corrupt_batch`` a batch found, in log order.

    Returns
    -------
    numpy.ndarray
        bool, one per batch: True for those found (within ``batch_mask``).
    """
    codecs = scan.attributes & ATTR_COMPRESSION_MASK
    counts = scan.record_count.astype(np.int64)
    cap = max_batch_payload_bytes()
    room = np.where(codecs == 0, stored, cap)
    impossible = batch_mask & ((counts < 0) | (counts * MIN_RECORD_SIZE > room))
    for i in np.nonzero(impossible)[0]:
        c = int(counts[i])
        what = (
            f"negative record count {c}"
            if c < 0
            else f"record count {c} needs at least {c * MIN_RECORD_SIZE} bytes, the records payload "
            + (f"has {int(room[i])}" if codecs[i] == 0 else f"may inflate to at most {cap}")
        )
        issues.append(ReadIssue("corrupt_batch", int(scan.position[i]), what, int(scan.base_offset[i]), max(c, 0)))
    return impossible


def _inflate_batches(
    buf: bytes | memoryview,
    scan: BatchScan,
    batch_mask: np.ndarray,
    sec_start: np.ndarray,
    sec_end: np.ndarray,
    budget: InflationBudget,
    issues: list[ReadIssue],
) -> np.ndarray:
    """Return the segment's bytes followed by the decompressed records of its selected compressed batches.

    Each selected batch with a compression codec in its attributes and records is decompressed by
    :func:`_inflate_batch`; one that cannot be is unselected (its issue appended), one that can has its records
    range pointed at its block, past the end of ``buf``.

    Parameters
    ----------
    buf : bytes or memoryview
        The whole ``.log`` file content.
    scan : BatchScan
        The batch headers.
    batch_mask : numpy.ndarray
        bool, one per batch: those to read; set False, in place, for a batch that cannot be decompressed.
    sec_start, sec_end : numpy.ndarray
        int64, one per batch: the byte range of its records in ``buf``; set, in place, to the range of its
        decompressed records in the returned array.
    budget : InflationBudget
        What the segment's compressed batches may still inflate to; spent.
    issues : list of ReadIssue
        Appended to, one per batch unselected.

    Returns
    -------
    numpy.ndarray
        uint8: ``buf`` itself (no copy) when no batch was decompressed, else its bytes then every block.
    """
    base = np.frombuffer(buf, dtype=np.uint8)
    codecs = scan.attributes & ATTR_COMPRESSION_MASK
    extra: list[bytes | bytearray] = []
    extra_len = len(base)
    mv = byte_view(buf)
    for i in np.nonzero(batch_mask & (codecs != 0) & (scan.record_count > 0))[0]:
        block = _inflate_batch(mv, scan, i, int(codecs[i]), int(sec_start[i]), int(sec_end[i]), budget, issues)
        if block is None:
            batch_mask[i] = False
            continue
        sec_start[i] = extra_len
        sec_end[i] = extra_len + len(block)
        extra.append(block)
        extra_len += len(block)
    return np.concatenate([base] + [np.frombuffer(b, dtype=np.uint8) for b in extra]) if extra else base


def _inflate_batch(
    mv: memoryview,
    scan: BatchScan,
    i: int | np.integer,
    codec: int,
    start: int,
    end: int,
    budget: InflationBudget,
    issues: list[ReadIssue],
) -> bytes | bytearray | None:
    """Decompress the records of batch ``i``; None (and its issue appended) when they cannot be had.

    Kafka's ``CompressionType`` ids name the codec (:data:`COMPRESSION_NAMES`); the block ``mv[start:end]`` is
    decompressed by :func:`decompress` within what is left of ``budget`` (records and bytes), which is then
    spent.  Reported: ``unsupported_compression`` for an unknown codec id, ``decompression_limit`` beyond the
    budget or the batch cap, ``decompression_failed`` for a codec error, and ``corrupt_batch`` for a record
    count the decompressed bytes cannot hold at :data:`MIN_RECORD_SIZE` bytes a record.
    """
    count = int(scan.record_count[i])
    try:
        if codec not in COMPRESSION_NAMES:
            raise ValueError(f"compression id {codec}")
        budget.check_records(count)
        block = decompress(codec, bytes(mv[start:end]), budget.cap())
        budget.spend(len(block), count)
    except Exception as exc:  # codec errors have many types
        reason = (
            "unsupported_compression"
            if codec not in COMPRESSION_NAMES
            else "decompression_limit"
            if isinstance(exc, DecompressionLimitError)
            else "decompression_failed"
        )
        detail = f"{COMPRESSION_NAMES.get(codec, codec)}: {exc}"
        issues.append(ReadIssue(reason, int(scan.position[i]), detail, int(scan.base_offset[i]), count))
        return None
    if count * MIN_RECORD_SIZE > len(block):
        detail = (
            f"record count {count} needs at least {count * MIN_RECORD_SIZE} bytes, the decompressed records "
            f"payload has {len(block)}"
        )
        issues.append(ReadIssue("corrupt_batch", int(scan.position[i]), detail, int(scan.base_offset[i]), count))
        return None
    return block


class _RecordBodies(NamedTuple):
    """The fields of every framed record's body (``DefaultRecord``), one int64 (``ok``: bool) entry a record."""

    timestamp_delta: np.ndarray
    offset_delta: np.ndarray
    key_start: np.ndarray
    key_len: np.ndarray
    value_start: np.ndarray
    value_len: np.ndarray
    ok: np.ndarray  # every field read and inside the record's body


def _read_record_bodies(data: np.ndarray, rs: np.ndarray, re_: np.ndarray) -> _RecordBodies:
    """Read the fields of the record bodies at ``data[rs:re_]``, all records at once.

    A ``DefaultRecord`` body: attributes int8, timestampDelta varlong, offsetDelta varint, key (varint length,
    -1 for null, then its bytes), value (likewise), headers.  The three first varints come from
    :func:`short_heads` when every record's are short, else from :func:`read_varint` one field at a time.

    Parameters
    ----------
    data : numpy.ndarray
        uint8: the segment's bytes and its decompressed blocks.
    rs, re_ : numpy.ndarray
        int64, one per record: the byte range of its body (after its length varint) in ``data``.

    Returns
    -------
    _RecordBodies
        Positions are into ``data``, lengths in bytes; ``ok`` is False for a record whose varints do not end
        within their bounds, whose key or value length is below -1, or whose value ends past ``re_``.
    """
    p = rs + 1
    heads = short_heads(data, p)
    if heads is not None:
        ts_delta, off_delta, key_len, key_start = heads
        ok1 = ok2 = ok3 = True
    else:
        ts_delta, s1, ok1 = read_varint(data, p, 10)
        p = p + s1
        off_delta, s2, ok2 = read_varint(data, p, 5)
        p = p + s2
        key_len, s3, ok3 = read_varint(data, p, 5)
        key_start = p + s3
    p = key_start + np.maximum(key_len, 0)
    value_len, s4, ok4 = read_varint(data, np.minimum(p, max(len(data) - 1, 0)), 5)
    value_start = p + s4
    p = value_start + np.maximum(value_len, 0)
    rec_ok = ok1 & ok2 & ok3 & ok4 & (key_len >= -1) & (value_len >= -1) & (p <= re_)
    return _RecordBodies(ts_delta, off_delta, key_start, key_len, value_start, value_len, rec_ok)


def _report_overruns(
    scan: BatchScan, sel: np.ndarray, rb: np.ndarray, rec_ok: np.ndarray, bad: np.ndarray, issues: list[ReadIssue]
) -> None:
    """Mark, in ``bad``, the batches of a record that is not ``rec_ok``, and report every batch ``bad`` marks.

    Each is a ``corrupt_batch`` (``DefaultRecordBatch`` throws ``InvalidRecordException``); its records are
    dropped by :func:`_record_table`.

    Parameters
    ----------
    scan : BatchScan
        The batch headers.
    sel : numpy.ndarray
        int64: the batches framed, as indices into ``scan``.
    rb : numpy.ndarray
        int64, one per record: its batch, as an index into ``sel``.
    rec_ok : numpy.ndarray
        bool, one per record: its body reads within its bounds (:func:`_read_record_bodies`).
    bad : numpy.ndarray
        bool, one per batch of ``sel``: its framing failed (:func:`_frame_records`); updated in place.
    issues : list of ReadIssue
        Appended to, one per bad batch, in log order.
    """
    bad_batches = np.unique(rb[~rec_ok]) if len(rb) else rb
    bad[bad_batches] = True
    for j in np.nonzero(bad)[0]:
        i = sel[j]
        issues.append(
            ReadIssue(
                "corrupt_batch",
                int(scan.position[i]),
                "record framing overruns the batch",
                int(scan.base_offset[i]),
                int(scan.record_count[i]),
            )
        )


def _record_table(
    data: np.ndarray,
    scan: BatchScan,
    sel: np.ndarray,
    rb: np.ndarray,
    bad: np.ndarray,
    bodies: _RecordBodies,
    issues: list[ReadIssue],
) -> RecordTable:
    """Build the :class:`RecordTable` of the framed records whose batch is not ``bad``.

    A record's offset is its batch's base offset plus its offset delta; its timestamp its batch's base timestamp
    plus its delta, or the batch's max timestamp when the batch's timestamp type is LogAppendTime
    (``DefaultRecordBatch``: the broker's time for every record).  The columns are the arrays of ``bodies``
    themselves when no batch is bad (no copies).

    Parameters
    ----------
    data : numpy.ndarray
        uint8: the segment's bytes and its decompressed blocks, the table's buffer.
    scan : BatchScan
        The batch headers.
    sel : numpy.ndarray
        int64: the batches framed, as indices into ``scan``.
    rb : numpy.ndarray
        int64, one per record: its batch, as an index into ``sel``.
    bad : numpy.ndarray
        bool, one per batch of ``sel``: its records are dropped.
    bodies : _RecordBodies
        The fields of every record (:func:`_read_record_bodies`).
    issues : list of ReadIssue
        The table's issues.
    """
    keep = ~bad[rb] if len(rb) else np.zeros(0, dtype=bool)
    if keep.all():  # the usual case: no copies
        keep = slice(None)
    bi = sel[rb[keep]]
    attrs = scan.attributes[bi]
    log_append = (attrs & ATTR_TIMESTAMP_TYPE) != 0
    ts = np.where(log_append, scan.max_timestamp[bi], scan.base_timestamp[bi] + bodies.timestamp_delta[keep])
    return RecordTable(
        data=data,
        batch=bi.astype(np.int64, copy=False),
        offset=scan.base_offset[bi] + bodies.offset_delta[keep],
        timestamp=ts.astype(np.int64, copy=False),
        key_start=bodies.key_start[keep],
        key_len=bodies.key_len[keep],
        value_start=bodies.value_start[keep],
        value_len=bodies.value_len[keep],
        issues=issues,
    )


def short_heads(data: np.ndarray, p: np.ndarray):
    """Read the first three varints of the record bodies at ``p`` at once, when every one is short.

    The bodies are those whose ``timestampDelta`` starts at each of ``p``; short is a one-byte timestamp delta, an
    offset delta and a key length of one or two bytes each (records of one produce request, keys under 8192 bytes:
    nearly every record a broker writes).  One gather of eight bytes from each position (the five the heads may
    span) instead of up to six gathers.

    Returns
    -------
    tuple of numpy.ndarray or None
        ``(timestamp_delta, offset_delta, key_length, key_start)`` as :func:`read_varint` reads them, or None
        when some record's are longer (or too near the end of ``data``): the caller reads them one varint at a
        time.
    """
    if len(p) == 0 or len(data) < 8:
        return None
    words = overlapping_view(data, "<u8")  # eight bytes from each position, in the buffer's order
    if int(p.max()) >= len(words):
        return None
    b = words[p].view(np.uint8).reshape(-1, 8)
    b0, b1, b2, b3, b4 = (b[:, i] for i in range(5))
    off1 = b1 < 0x80
    kb0 = np.where(off1, b2, b3)
    kb1 = np.where(off1, b3, b4)
    key1 = kb0 < 0x80
    if not ((b0 < 0x80) & (off1 | (b2 < 0x80)) & (key1 | (kb1 < 0x80))).all():
        return None

    def zigzag(lo: np.ndarray, hi: np.ndarray, one: np.ndarray) -> np.ndarray:
        raw = np.where(one, lo, (lo & 0x7F) | (hi.astype(np.int64) << 7)).astype(np.int64, copy=False)
        return (raw >> 1) ^ -(raw & 1)

    ts = b0.astype(np.int64)
    key_start = p + 3 + ~off1 + ~key1  # each two-byte varint one byte more
    return (ts >> 1) ^ -(ts & 1), zigzag(b1, b2, off1), zigzag(kb0, kb1, key1), key_start


#: Records are framed in lock-step (step *k* reads the *k*-th record of every batch at once) while at
#: least this many batches still have records; one numpy step costs about as much as walking this many
#: records one by one in Python, so the few batches left (say one batch of 100,000 records) are walked
#: record by record instead: framing costs O(records), never O(records of the largest batch) numpy steps.
LOCKSTEP_MIN_BATCHES = 48


def _frame_records(data: np.ndarray, cur: np.ndarray, ends: np.ndarray, counts: np.ndarray):
    """Find the record boundaries of batches whose records start at ``cur`` and end at ``ends``.

    ``cur`` and ``ends`` are positions in the uint8 array ``data``; ``counts`` records each.  Each record is a
    zigzag varint length (at most 5 bytes, ``ByteUtils.readVarint``) then that many bytes, at least
    ``MIN_RECORD_SIZE - 1``, inside its batch.

    Returns
    -------
    tuple of numpy.ndarray
        ``(batch, start, stop, bad)``: per record (in log order) the index of its batch and its body's byte
        range, and per batch whether its framing failed (its records are then unusable).
    """
    n = len(cur)
    bad = np.zeros(n, dtype=bool)
    cur = cur.copy()
    # record k of batch j goes to first[j] + k: log order (batch, then record) without a sort
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    total = int(first[-1])
    out_s = np.empty(total, dtype=np.int64)
    out_e = np.empty(total, dtype=np.int64)
    framed = np.zeros(total, dtype=bool)
    max_count = int(counts.max()) if n else 0
    # the batches still framing, packed: (index, position, end, first slot, count), narrowed only when a
    # batch runs out of records or fails, not at every step
    ids, c, e, f, cn = np.arange(n), cur[:n], ends.astype(np.int64, copy=False), first[:-1], counts
    low = 0  # no batch of (ids) has fewer records than this
    k = 0
    while k < max_count:
        if k >= low:
            more = cn > k
            if not more.all():
                ids, c, e, f, cn = ids[more], c[more], e[more], f[more], cn[more]
            low = int(cn.min()) if len(cn) else 0
        if len(ids) < LOCKSTEP_MIN_BATCHES:
            break
        length, size, ok = read_varint(data, c, 5)
        start = c + size
        stop = start + length
        # a record body has at least MIN_RECORD_SIZE - 1 bytes (attributes and five varints)
        ok &= (length >= MIN_RECORD_SIZE - 1) & (stop <= e)
        dest = f + k
        out_s[dest] = start
        out_e[dest] = stop
        framed[dest] = True
        c = stop
        k += 1
        if not ok.all():
            bad[ids[~ok]] = True
            ids, c, e, f, cn = ids[ok], c[ok], e[ok], f[ok], cn[ok]
    cur[ids] = c  # where each batch still framing goes on
    active = ids[cn > k]
    if len(active):
        mv = np.ascontiguousarray(data).data
        for j in active.tolist():
            starts, stops, ok = _walk_records(mv, int(cur[j]), int(ends[j]), int(counts[j]) - k)
            bad[j] |= not ok
            m = len(starts)
            if m:
                slots = slice(int(first[j]) + k, int(first[j]) + k + m)
                out_s[slots] = np.frombuffer(starts, dtype=np.int64)
                out_e[slots] = np.frombuffer(stops, dtype=np.int64)
                framed[slots] = True
    rb = np.repeat(np.arange(n, dtype=np.int64), counts)
    if not framed.all():  # records after a batch's framing failed (the batch is dropped whole later)
        return rb[framed], out_s[framed], out_e[framed], bad
    return rb, out_s, out_e, bad


def _walk_records(mv: memoryview, pos: int, end: int, n: int):
    """Frame ``n`` records from byte ``pos`` of ``mv`` (unsigned bytes) one at a time.

    As one step of :func:`_frame_records` does for many batches.

    Returns
    -------
    tuple
        ``(starts, stops, ok)``, ``ok`` False at the first record whose length varint is unterminated within 5
        bytes, too small, or overruns ``end``.
    """
    from array import array

    starts, stops = array("q"), array("q")
    size = len(mv)
    min_body = MIN_RECORD_SIZE - 1
    for _ in range(n):
        if pos >= size:
            return starts, stops, False
        b = mv[pos]
        if b < 0x80:
            raw, pos = b, pos + 1
        else:
            raw, shift, i = b & 0x7F, 7, pos + 1
            while True:
                if i >= size or i >= pos + 5:
                    return starts, stops, False
                b = mv[i]
                raw |= (b & 0x7F) << shift
                i += 1
                if b < 0x80:
                    break
                shift += 7
            pos = i
        length = (raw >> 1) ^ -(raw & 1)
        stop = pos + length
        if length < min_body or stop > end:
            return starts, stops, False
        starts.append(pos)
        stops.append(stop)
        pos = stop
    return starts, stops, True


def control_types(records: RecordTable) -> np.ndarray:
    """Read the control record type per record (0 ABORT, 1 COMMIT, other values as written; -1 if unreadable).

    The key of a control record is ``int16 version, int16 type`` (``ControlRecordType``).
    """
    ok = records.key_len >= 4
    pos = np.where(ok, records.key_start + 2, 0)
    t = read_int(records.data, pos, 2) if len(pos) else np.zeros(0, dtype=np.int64)
    return np.where(ok, t, -1)
