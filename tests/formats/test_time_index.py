"""audit.formats.time_index: Kafka's ListOffsets(timestamp) lookup over real segments and index files.

The lab (tests/lab/test_lab_expansion_order.py) compares it with Kafka's own answers; here, the index handling:
on a real broker-written segment the indexed lookup must agree with reading every record, and the segment
choice must follow each segment's time index the way Kafka's does."""

import struct
from pathlib import Path

import numpy as np

from audit.formats.record_batch import extract_records, scan_batches
from audit.formats.time_index import (
    find_offset,
    largest_timestamp,
    offset_entries,
    offset_for_time,
    start_position,
    time_entries,
)
from tests.paths import SCENARIO

PART = Path(SCENARIO) / "brokers" / "broker-1" / "dev.clicks-0"


def _load(seg: Path):
    return lambda: tuple(
        (seg.with_suffix(s).read_bytes() if seg.with_suffix(s).exists() else None)
        for s in (".log", ".timeindex", ".index")
    )


def test_real_segment_lookup_equals_reading_every_record():
    seg = PART / "00000000000000000000.log"
    buf = seg.read_bytes()
    recs = extract_records(buf, scan_batches(buf))
    ts, off = recs.timestamp.astype(np.int64), recs.offset.astype(np.int64)
    assert len(ts) == 50
    for t in sorted({int(x) + d for x in ts for d in (-1, 0, 1)}):
        at = np.nonzero(ts >= t)[0]
        expected = (int(off[at[0]]), int(ts[at[0]])) if len(at) else None
        assert offset_for_time([(0, _load(seg))], t) == expected, t


def _time_index(entries):
    return b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries)


def test_time_index_entries_stop_at_preallocated_zeros():
    raw = _time_index([(1000, 0), (2000, 5), (3000, 9)]) + bytes(12 * 5)
    assert [tuple(map(int, e)) for e in time_entries(raw)] == [(1000, 0), (2000, 5), (3000, 9)]
    assert largest_timestamp(raw) == 3000
    assert len(time_entries(bytes(12 * 8))) == 0 and largest_timestamp(None) == -1
    idx = struct.pack(">ii", 3, 0) + struct.pack(">ii", 9, 4100) + bytes(8 * 4)
    assert [tuple(map(int, e)) for e in offset_entries(idx)] == [(3, 0), (9, 4100)]


def test_start_position_uses_both_indexes():
    tix = _time_index([(1000, 2), (2000, 9)])
    oix = struct.pack(">ii", 3, 0) + struct.pack(">ii", 8, 4100) + struct.pack(">ii", 12, 9000)
    assert start_position(tix, oix, 999) == 0  # before every entry: from the start
    assert start_position(tix, oix, 1500) == 0  # entry (1000, 2): offset 2 precedes the first index entry
    assert start_position(tix, oix, 2500) == 4100  # entry (2000, 9): the index entry at or below offset 9


def test_segment_choice_follows_each_segments_time_index():
    seg = PART / "00000000000000000000.log"
    buf = seg.read_bytes()
    ts = extract_records(buf, scan_batches(buf)).timestamp
    late = int(ts.max()) + 10

    # a first "segment" whose time index says it ends before the target is not searched (its bytes are garbage)
    def earlier():
        return (b"garbage", _time_index([(int(ts.min()) - 100, 0)]), None)

    assert offset_for_time([(0, earlier), (0, _load(seg))], int(ts.min())) == (0, int(ts[0]))
    assert offset_for_time([(0, _load(seg))], late) is None  # nothing that late: ListOffsets answers -1
    assert find_offset(buf, int(ts.min()) - 5)[0] == 0
