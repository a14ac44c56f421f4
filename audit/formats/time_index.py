"""Offset of a point in time in a partition's log, as Kafka's ListOffsets(timestamp) answers it.

Follows ``UnifiedLog.fetchOffsetByTimestamp`` and ``LogSegment.findOffsetByTimestamp`` (storage module):

1. the target segment is the first, in base-offset order, whose largest timestamp is at or after ``T``. A
   segment Kafka loads from disk knows its largest timestamp from its ``.timeindex``'s last entry (the entry
   ``LogSegment`` appends when the segment is rolled or closed); the newest segment of a log copied while
   its broker ran may hold newer records than that entry says, so it is searched when no earlier one is;
2. inside it, the time index gives the largest entry at or before ``T`` (``TimeIndex.lookup``), the offset
   index the byte position of that offset (``OffsetIndex.lookup``), and from there the first batch whose
   max timestamp is at or after ``T`` holds the answer: its first record with timestamp >= ``T``.

No record at or after ``T``: ``None`` (ListOffsets answers -1; the log end offset is where the log stood).

File formats (``TimeIndex``, ``OffsetIndex``): big-endian entries of (timestamp int64 ms, relative offset
int32) and (relative offset int32, byte position int32); an active segment's files are preallocated and
zero after their entries.
"""

from __future__ import annotations

import numpy as np

from .record_batch import INDEX_ENTRY, extract_records, scan_batches


__all__ = [
    "TIME_ENTRY",
    "find_offset",
    "largest_timestamp",
    "offset_entries",
    "offset_for_time",
    "start_position",
    "time_entries",
]

TIME_ENTRY = np.dtype([("timestamp", ">i8"), ("relative_offset", ">i4")])


def time_entries(buf) -> np.ndarray:
    """Return the entries of a ``.timeindex``.

    Its preallocated zero tail and any entry whose timestamp goes back are dropped: Kafka only appends a
    timestamp larger than the last one.  Never raises.
    """
    if not buf:
        return np.zeros(0, TIME_ENTRY)
    e = np.frombuffer(buf, dtype=TIME_ENTRY, count=len(buf) // TIME_ENTRY.itemsize)
    ts = e["timestamp"].astype(np.int64)
    # entries are strictly increasing in time and offset; the first that is not ends them
    bad = np.nonzero((np.diff(ts) <= 0) | (np.diff(e["relative_offset"].astype(np.int64)) < 0))[0]
    n = int(bad[0]) + 1 if len(bad) else len(e)
    if n == 1 and len(e) > 1 and ts[0] == 0 and e["relative_offset"][0] == 0:
        n = 0  # a preallocated, never written index
    return e[:n]


def offset_entries(buf) -> np.ndarray:
    """Return the entries of a ``.index`` (up to the preallocated zeros).  Never raises."""
    if not buf:
        return np.zeros(0, INDEX_ENTRY)
    e = np.frombuffer(buf, dtype=INDEX_ENTRY, count=len(buf) // INDEX_ENTRY.itemsize)
    pos = e["position"].astype(np.int64)
    # position 0 is only valid for the first entry; later zeros are the preallocated tail
    zero = np.nonzero(pos[1:] == 0)[0]
    return e[: int(zero[0]) + 1] if len(zero) else e


def largest_timestamp(time_index) -> int:
    """Return a segment's largest timestamp as Kafka knows it after loading it.

    That is its time index's last entry (-1 when empty).
    """
    e = time_entries(time_index)
    return int(e["timestamp"][-1]) if len(e) else -1


def start_position(time_index, offset_index, target_ms: int) -> int:
    """Return the byte position to search a segment from for ``target_ms``; 0 when the indexes give none.

    The position comes from TimeIndex.lookup, then OffsetIndex.lookup.
    """
    te = time_entries(time_index)
    i = int(np.searchsorted(te["timestamp"].astype(np.int64), target_ms, side="right")) - 1
    if i < 0:
        return 0
    rel = int(te["relative_offset"][i])
    oe = offset_entries(offset_index)
    j = int(np.searchsorted(oe["relative_offset"].astype(np.int64), rel, side="right")) - 1
    return int(oe["position"][j]) if j >= 0 else 0


def find_offset(log, target_ms: int, start: int = 0) -> tuple[int, int] | None:
    """Find (offset, timestamp) of the first record at or after ``target_ms`` in a segment's bytes.

    The batches are read from byte ``start`` (``LogSegment.findOffsetByTimestamp``); None when there is none.
    Batches that fail their CRC are skipped, as a reader of a damaged copy must.
    """
    scan = scan_batches(log, start=start)
    hits = np.nonzero(scan.crc_ok & (scan.max_timestamp >= target_ms))[0]
    for b in hits[:4]:  # the first batch qualifies unless its records disagree with its header
        mask = np.zeros(len(scan), dtype=bool)
        mask[b] = True
        recs = extract_records(log, scan, mask)
        at = np.nonzero(recs.timestamp >= target_ms)[0]
        if len(at):
            return int(recs.offset[at[0]]), int(recs.timestamp[at[0]])
        if scan.magic[b] < 2:  # a legacy compressed wrapper: its header timestamp is all there is
            return int(scan.base_offset[b]), int(scan.max_timestamp[b])
    return None


def offset_for_time(segments, target_ms: int):
    """Kafka's ListOffsets(``target_ms``) over one replica's segments.

    ``segments``: (base offset, loader) in base-offset order, where ``loader()`` returns (log bytes, time
    index bytes or None, offset index bytes or None) and is called in order until the target segment.
    Returns (offset, timestamp) or None (no record at or after ``target_ms``).
    """
    segments = list(segments)
    for i, (_base, load) in enumerate(segments):
        log, tix, oix = load()
        last = i == len(segments) - 1
        if largest_timestamp(tix) >= target_ms or last:
            hit = find_offset(log, target_ms, start_position(tix, oix, target_ms))
            if hit is not None or last:
                return hit
    return None
