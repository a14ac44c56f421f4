"""The batch chain of a log segment: the headers of its v2 record batches and legacy message-set entries.

:func:`scan_batches` walks it and reads every batch header (v2 record batches and legacy message-set entries),
:func:`scan_tail` reads only its last batches, from the position :func:`index_start` finds in the segment's
``.index``.

One Python step per *batch*: each v2 header is unpacked with :data:`~.layout.BATCH_HEADER` (the fields of a
:class:`~.layout.BatchHeader`, read by name) and its CRC-32C checked; the headers become the numpy columns of a
:class:`~.results.BatchScan`.
Never raises: what cannot be read becomes an :class:`~.results.ReadIssue`.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
from crc32c import crc32c

from .layout import (
    ATTR_COMPRESSION_MASK,
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    INDEX_ENTRY,
    INT64_MAX,
    LEGACY_ATTR_MASK,
    LEGACY_CRC_ATTRIBUTES,
    LEGACY_CRC_OFFSET,
    LEGACY_MIN_SIZE,
    LEGACY_TIMESTAMP_OFFSET,
    LOG_HEADER,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    batch_header_fields,
)
from .primitives import byte_view
from .results import BatchScan, ReadIssue

__all__ = ["index_start", "scan_batches", "scan_tail"]

_INT64 = struct.Struct(">q")
#: The fields of a v2 header the walk checks: its CRC and what its next offset and its issues need.
_CHECKED_FIELDS = batch_header_fields("crc", "last_offset_delta", "records_count")


def scan_batches(buf: bytes | memoryview, verify_crc: bool = True, start: int = 0) -> BatchScan:
    """Walk the batch chain of a segment file's bytes.

    CRC-32C (Castagnoli) is checked over ``attributes`` .. batch end as ``DefaultRecordBatch.isValid`` does; a
    legacy message's CRC-32 over ``magic`` .. message end as ``LegacyRecord.isValid`` does (:func:`_legacy_entry`).
    A partial tail stops the walk; a CRC mismatch is recorded and the walk continues at the next batch (the length
    field is still trusted, as Kafka's ``FileLogInputStream`` does); an impossible length stops the walk with
    ``corrupt_batch``.  Zero bytes from a batch boundary to the end of the file are a preallocated segment's
    unwritten space (``log.preallocate``), not an issue.  A magic byte other than 0, 1 or 2 (read unsigned,
    whatever the buffer's format) stops the walk with ``unknown_magic``; a batch whose next offset passes 2^63-1
    is ``corrupt_batch`` (kept out of ``end_offset``) and the walk goes on.  One Python step per batch: each v2
    header is unpacked from the buffer with :data:`BATCH_HEADER`; the numpy columns are built once, at the end, by
    :func:`_batch_scan`.

    Parameters
    ----------
    buf : bytes or memoryview
        The whole ``.log`` file content (a memoryview may hold signed bytes, as an Arrow buffer does).
    verify_crc : bool
        Check every batch's CRC (a batch that fails is kept with ``crc_ok`` False).
    start : int
        Byte position to begin at, a batch boundary (a position from the segment's ``.index``).

    Returns
    -------
    BatchScan
        One row per batch (or legacy message) read, in file order; ``bytes_read`` is where the walk stopped.
        Never raises: what cannot be read is an :class:`~.results.ReadIssue`.
    """
    mv = byte_view(buf)
    n = len(mv)
    pos = start
    rows: list[tuple] = []  # BATCH_HEADER tuples (BatchHeader's fields), one per batch
    positions: list[int] = []
    crc_flags: list[bool] = []
    issues: list[ReadIssue] = []
    unpack_log_header = LOG_HEADER.unpack_from
    unpack = BATCH_HEADER.unpack_from
    checked_fields = _CHECKED_FIELDS
    while pos < n:
        if n - pos < LOG_OVERHEAD + 5:
            if not _zero_to_end(mv, pos):
                issues.append(ReadIssue("partial_batch", pos, f"{n - pos} trailing bytes, too few for a batch header"))
            break
        base_offset, batch_length = unpack_log_header(mv, pos)
        if batch_length == 0 and base_offset == 0 and _zero_to_end(mv, pos):
            break  # space the broker preallocated (log.preallocate=true) and has not written yet
        magic = mv[pos + MAGIC_OFFSET]
        if magic in LEGACY_MIN_SIZE:
            end = _legacy_entry(mv, pos, base_offset, batch_length, magic, verify_crc, rows, crc_flags, issues)
            if end < 0:
                break
            positions.append(pos)
            pos = end
            continue
        if magic != 2:
            issues.append(
                ReadIssue("unknown_magic", pos, f"magic byte {magic}; cannot find the next batch", base_offset)
            )
            break
        if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            issues.append(
                ReadIssue("corrupt_batch", pos, f"batch_length {batch_length} below the v2 header size", base_offset)
            )
            break
        end = pos + LOG_OVERHEAD + batch_length
        if end > n:
            issues.append(
                ReadIssue(
                    "partial_batch",
                    pos,
                    f"batch of {LOG_OVERHEAD + batch_length} bytes but only {n - pos} remain",
                    base_offset,
                )
            )
            break
        hdr = unpack(mv, pos)
        stored, last_offset_delta, records_count = checked_fields(hdr)
        ok = -INT64_MAX <= base_offset + last_offset_delta + 1 <= INT64_MAX or _offset_fits(
            issues, pos, base_offset, last_offset_delta, max(records_count, 0)
        )
        if ok and verify_crc:
            computed = crc32c(mv[pos + ATTRIBUTES_OFFSET : end])
            if stored != computed:
                ok = False
                detail = f"stored crc {stored:#010x}, computed {computed:#010x}"
                issues.append(ReadIssue("crc_mismatch", pos, detail, base_offset, max(records_count, 0)))
        rows.append(hdr)
        positions.append(pos)
        crc_flags.append(ok)
        pos = end
    return _batch_scan(rows, positions, crc_flags, issues, pos)


def _legacy_entry(
    mv: memoryview,
    pos: int,
    base_offset: int,
    batch_length: int,
    magic: int,
    verify_crc: bool,
    rows: list[tuple],
    crc_flags: list[bool],
    issues: list[ReadIssue],
) -> int:
    """Read the legacy message (magic 0 or 1) at byte ``pos`` of ``mv``: a step of :func:`scan_batches`.

    ``LegacyRecord``'s layout: offset int64, size int32, crc uint32, magic int8, attributes int8, [timestamp
    int64 (magic 1)], key bytes, value bytes.  Its CRC-32 covers ``magic`` .. message end
    (``LegacyRecord.isValid``).  A compressed message is a wrapper whose value holds a message set: its count
    is 0 here (its messages are counted when decompressed, by :func:`~.legacy.extract_legacy_records`), else 1.

    Parameters
    ----------
    mv : memoryview
        The segment's bytes, unsigned (:func:`~.primitives.byte_view`).
    pos, base_offset, batch_length, magic : int
        The message's byte position, and its offset, size and magic as the walk read them.
    verify_crc : bool
        Check its CRC.
    rows, crc_flags, issues : list
        Appended to: its :class:`BatchHeader` fields (the v2 fields it has no value for are -1, or 0 for the
        last offset delta), whether its CRC and offset hold, and its issues.

    Returns
    -------
    int
        The byte position after the message; -1 (nothing appended to ``rows``, its issue to ``issues``) when
        its size is below the legacy minimum for its magic (``corrupt_batch``) or passes the end of ``mv``
        (``partial_batch``): the walk stops.
    """
    if batch_length < LEGACY_MIN_SIZE[magic] or pos + LOG_OVERHEAD + batch_length > len(mv):
        reason = "partial_batch" if batch_length >= LEGACY_MIN_SIZE[magic] else "corrupt_batch"
        issues.append(ReadIssue(reason, pos, f"legacy message (magic {magic}) of size {batch_length}", base_offset))
        return -1
    end = pos + LOG_OVERHEAD + batch_length
    stored, attrs = LEGACY_CRC_ATTRIBUTES.unpack_from(mv, pos + LEGACY_CRC_OFFSET)
    ts = _INT64.unpack_from(mv, pos + LEGACY_TIMESTAMP_OFFSET)[0] if magic == 1 else -1
    count = 0 if attrs & ATTR_COMPRESSION_MASK else 1
    # _offset_fits's test inline: spares a call per message for the usual offset
    ok = -INT64_MAX <= base_offset + 1 <= INT64_MAX or _offset_fits(issues, pos, base_offset, 0, count)
    if ok and verify_crc:
        computed = zlib.crc32(mv[pos + MAGIC_OFFSET : end])
        if stored != computed:
            ok = False
            detail = f"legacy message (magic {magic}): stored crc {stored:#010x}, computed {computed:#010x}"
            issues.append(ReadIssue("crc_mismatch", pos, detail, base_offset, count))
    # BatchHeader's fields: base_offset, batch_length, partition_leader_epoch, magic, crc, attributes,
    # last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count
    rows.append((base_offset, batch_length, -1, magic, stored, attrs & LEGACY_ATTR_MASK, 0, ts, ts, -1, -1, -1, count))
    crc_flags.append(ok)
    return end


def _batch_scan(
    rows: list[tuple], positions: list[int], crc_flags: list[bool], issues: list[ReadIssue], bytes_read: int
) -> BatchScan:
    """Build the :class:`BatchScan` of the batches :func:`scan_batches` read: its rows as numpy columns.

    Parameters
    ----------
    rows : list of tuple
        :class:`BatchHeader` fields, one tuple per batch (as :data:`BATCH_HEADER` unpacks them).
    positions : list of int
        Each batch's byte position in the segment.
    crc_flags : list of bool
        Each batch's CRC (and next offset) held.
    issues : list of ReadIssue
        The walk's issues.
    bytes_read : int
        The byte position the walk stopped at.

    Returns
    -------
    BatchScan
        Columns in the dtypes of the header fields (``DefaultRecordBatch``): int64 offsets, positions and
        timestamps, int32 lengths, deltas and counts, int16 attributes and producer epochs, int8 magic.
    """
    cols = BatchHeader._make(zip(*rows)) if rows else BatchHeader._make(() for _ in BatchHeader._fields)
    return BatchScan(
        position=np.asarray(positions, dtype=np.int64),
        base_offset=np.asarray(cols.base_offset, dtype=np.int64),
        batch_length=np.asarray(cols.batch_length, dtype=np.int32),
        partition_leader_epoch=np.asarray(cols.partition_leader_epoch, dtype=np.int32),
        attributes=np.asarray(cols.attributes, dtype=np.int16),
        last_offset_delta=np.asarray(cols.last_offset_delta, dtype=np.int32),
        base_timestamp=np.asarray(cols.base_timestamp, dtype=np.int64),
        max_timestamp=np.asarray(cols.max_timestamp, dtype=np.int64),
        producer_id=np.asarray(cols.producer_id, dtype=np.int64),
        producer_epoch=np.asarray(cols.producer_epoch, dtype=np.int16),
        record_count=np.asarray(cols.records_count, dtype=np.int32),
        crc_ok=np.asarray(crc_flags, dtype=bool),
        magic=np.asarray(cols.magic, dtype=np.int8),
        issues=issues,
        bytes_read=bytes_read,
    )


def _offset_fits(issues: list[ReadIssue], pos: int, base_offset: int, last_offset_delta: int, records: int) -> bool:
    """Check that a batch's next offset, ``base_offset + last_offset_delta + 1``, is a valid int64 Kafka offset.

    Returns
    -------
    bool
        True when it is; False (and a ``corrupt_batch`` issue in ``issues``) when it is not (it would wrap past
        2^63-1).
    """
    nxt = base_offset + last_offset_delta + 1  # Python int: no wrap
    if -INT64_MAX <= nxt <= INT64_MAX:
        return True
    issues.append(
        ReadIssue(
            "corrupt_batch",
            pos,
            f"base offset {base_offset} + last offset delta {last_offset_delta} + 1 does not fit in an int64 offset",
            base_offset,
            records,
        )
    )
    return False


def _zero_to_end(mv: memoryview, pos: int) -> bool:
    """Return True when every byte from ``pos`` to the end of ``mv`` is zero."""
    return not np.frombuffer(mv, dtype=np.uint8, offset=pos).any()


def index_start(buf: bytes | memoryview, index: bytes | memoryview | None, segment_base: int) -> int:
    """Find the byte position in a segment to start reading its last batches from, using its ``.index``.

    Kafka's offset index (``OffsetIndex``, one entry per ``log.index.interval.bytes``) maps the
    last offset of a batch (relative to ``segment_base``) to the batch's byte position, in
    increasing order; the active segment's index is preallocated and zero after its entries.
    The newest entry that points inside ``buf`` at a magic-2 batch header holding that offset
    is used (found by binary search, so only a few pages of a memory-mapped index are read);
    an index that is missing, empty, stale or from another segment gives 0 (read from the
    start).  Never raises.
    """
    if not index or len(buf) < BATCH_HEADER_SIZE:
        return 0
    entries = np.frombuffer(index, dtype=INDEX_ENTRY, count=len(index) // INDEX_ENTRY.itemsize)
    # the last entry with a non-zero position: entries are written in order, zeros follow them
    lo, hi = 0, len(entries)
    while lo < hi:
        mid = (lo + hi) // 2
        if int(entries[mid]["position"]) > 0:
            lo = mid + 1
        else:
            hi = mid
    for i in range(lo - 1, max(lo - 4, -1), -1):  # the newest few entries; a stale one is skipped
        p, rel = int(entries[i]["position"]), int(entries[i]["relative_offset"])
        if not 0 < p <= len(buf) - BATCH_HEADER_SIZE:
            continue
        hdr = BatchHeader._make(BATCH_HEADER.unpack_from(buf, p))
        if hdr.magic == 2 and hdr.base_offset <= segment_base + rel <= hdr.base_offset + hdr.last_offset_delta:
            return p
    return 0


def scan_tail(buf: bytes | memoryview, index: bytes | memoryview | None = None, segment_base: int = 0) -> BatchScan:
    """Read the last batches of a segment, for its log end offset, without reading the whole file.

    Follows ``LogSegment.readNextOffset``: start at the position of the newest ``.index`` entry
    (:func:`index_start`) and walk the batches from there to the end, checking their CRC.
    When that region has no valid batch (a corrupt tail, or an index that does not match),
    the whole segment is scanned as :func:`scan_batches` does.  ``end_offset`` of the result is
    the log end offset (after the last complete, CRC-valid batch); ``issues`` are those of the
    batches read.  Batches before the start position are not read (the offset-commit decoder
    reads ``__consumer_offsets`` segments in full).  Never raises.
    """
    start = index_start(buf, index, segment_base)
    if start:
        scan = scan_batches(buf, start=start)
        if scan.crc_ok.any():
            return scan
    return scan_batches(buf)
