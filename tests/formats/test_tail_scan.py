"""Log end offsets from a segment's last batches, found through its .index (LogSegment.readNextOffset)."""

import struct

import crc32c
import numpy as np
import pyarrow as pa
import pytest

from audit.formats.record_batch import INDEX_ENTRY, index_start, scan_batches, scan_tail
from audit.sources.logdirs import TAIL, read_small_files

from ..paths import SHARED

BASE = 1000  # segment base offset of the synthetic segment


def _batch(base: int, n: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(n):
        b.append(i, timestamp=1_700_000_000_000, key=b"k%d" % i, value=b"v" * 40, headers=[])
    buf = bytearray(b.build())
    buf[0:8] = struct.pack(">q", base)
    buf[17:21] = struct.pack(">I", crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def _segment(batches: int = 300, per_batch: int = 5) -> bytes:
    return b"".join(_batch(BASE + i * per_batch, per_batch) for i in range(batches))


def _index(seg: bytes, interval: int = 4096, base: int = BASE) -> bytes:
    """An offset index as the broker writes it: an entry (last offset - base, position) after every
    ``interval`` bytes of batches."""
    scan = scan_batches(seg)
    entries, since = [], interval
    for pos, bo, delta, length in zip(scan.position, scan.base_offset, scan.last_offset_delta, scan.batch_length):
        if since >= interval:
            entries.append((int(bo + delta - base), int(pos)))
            since = 0
        since += int(length) + 12
    return np.array(entries[1:], dtype=INDEX_ENTRY).tobytes()  # the broker skips the first batch


def _flip_crc_of(seg: bytes, pos: int) -> bytes:
    buf = bytearray(seg)
    buf[pos + 70] ^= 0xFF
    return bytes(buf)


def test_index_start_is_the_newest_entry_and_the_tail_matches_a_full_scan():
    seg = _segment()
    idx = _index(seg)
    full = scan_batches(seg)
    newest = int(np.frombuffer(idx, dtype=INDEX_ENTRY)["position"][-1])
    assert index_start(seg, idx, BASE) == newest > 0
    tail = scan_tail(seg, idx, BASE)
    assert tail.end_offset == full.end_offset == BASE + 300 * 5
    assert 0 < len(tail) < len(full) // 10 and tail.position[0] == newest and not tail.issues


def test_preallocated_index_is_searched_past_its_zero_padding():
    seg = _segment()
    idx = _index(seg)
    padded = idx + bytes(1 << 20)
    assert index_start(seg, padded, BASE) == index_start(seg, idx, BASE) > 0


@pytest.mark.parametrize("case", ["missing", "empty", "other_segment", "beyond_file"])
def test_an_index_that_does_not_fit_the_segment_means_a_full_scan(case):
    seg = _segment()
    idx = {
        "missing": None,
        "empty": b"",
        "other_segment": _index(seg, base=BASE - 500),  # offsets that are not where it points
        "beyond_file": _index(_segment(600)),
    }[case]  # a longer segment's index: newest entries past the end
    start = index_start(seg, idx, BASE)
    if case == "beyond_file":
        # every entry past the end is skipped; an older entry that still fits may be used
        assert start < len(seg)
    else:
        assert start == 0
    assert scan_tail(seg, idx, BASE).end_offset == BASE + 300 * 5


def test_corrupt_last_batch_steps_back_and_is_reported():
    seg = _segment()
    idx = _index(seg)
    last = int(scan_batches(seg).position[-1])
    bad = _flip_crc_of(seg, last)
    tail = scan_tail(bad, idx, BASE)
    assert tail.end_offset == BASE + 299 * 5
    assert [(i.reason, i.position) for i in tail.issues] == [("crc_mismatch", last)]


def test_no_valid_batch_after_the_index_falls_back_to_the_whole_segment():
    seg = _segment()
    idx = _index(seg)
    start = index_start(seg, idx, BASE)
    positions = scan_batches(seg).position
    bad = seg
    for p in positions[positions >= start]:
        bad = _flip_crc_of(bad, int(p))
    tail = scan_tail(bad, idx, BASE)
    first_bad = int(np.nonzero(positions >= start)[0][0])
    assert tail.end_offset == BASE + first_bad * 5
    assert tail.position[0] == 0  # read from the start


def _real_segments_with_index():
    for log in sorted((SHARED / "data").rglob("*.log")):
        idx = log.with_suffix(".index")
        if idx.exists() and idx.stat().st_size >= 8 and log.stat().st_size > 0:
            yield log, idx


def test_real_segments_tail_end_offset_equals_full_scan():
    found = list(_real_segments_with_index())
    assert len(found) >= 5
    used_index = 0
    for log, idx in found:
        buf, index = log.read_bytes(), idx.read_bytes()
        base = int(log.stem)
        tail = scan_tail(buf, index, base)
        assert tail.end_offset == scan_batches(buf).end_offset, log
        used_index += index_start(buf, index, base) > 0
    assert used_index == len(found)  # every real index pointed at a real batch


def test_small_file_reader_uses_the_index_next_to_a_local_segment(tmp_path):
    seg = _segment()
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    log = pdir / f"{BASE:020d}.log"
    log.write_bytes(_flip_crc_of(seg, int(scan_batches(seg).position[5])))  # a corrupt batch early on
    batch = pa.RecordBatch.from_pydict({"path": ["file://" + str(log)]})
    rows = pa.Table.from_batches(list(read_small_files([batch]))).to_pylist()
    # without an index the whole file is read and the early corrupt batch is reported
    assert [r["issue_reason"] for r in rows] == ["crc_mismatch"] and rows[0]["value"] == BASE + 1500
    (pdir / f"{BASE:020d}.index").write_bytes(_index(seg) + bytes(4096))
    rows = pa.Table.from_batches(list(read_small_files([batch]))).to_pylist()
    # with it only the last batches are read: same log end offset, the early batch is not read
    assert [(r["file_kind"], r["value"], r["issue_reason"]) for r in rows] == [(TAIL, BASE + 1500, None)]


def test_preallocated_zero_space_after_the_last_batch_is_not_an_issue():
    """log.preallocate=true: the active segment is created at its full size and zero after the
    last batch.  That is unwritten space, not a corrupt batch; zeros followed by bytes are."""
    seg = _segment(batches=20)
    full = scan_batches(seg)
    padded = scan_batches(seg + b"\0" * 100_000)
    assert not padded.issues and padded.end_offset == full.end_offset and len(padded) == len(full)
    assert not scan_batches(seg + b"\0" * 5).issues  # fewer zeros than a batch header
    damaged = scan_batches(seg + b"\0" * 64 + b"\x01")
    assert [i.reason for i in damaged.issues] == ["corrupt_batch"] and damaged.end_offset == full.end_offset
    assert not scan_batches(b"\0" * 4096).issues and scan_batches(b"\0" * 4096).end_offset == -1
