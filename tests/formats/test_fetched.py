"""``audit.formats.fetched``: a Fetch response's records as Kafka's consumer returns them (read_committed).

The bytes are real broker-written ``__consumer_offsets`` segments (a Fetch response carries the log's own batches);
the aborted transactions are the segment's ``.txnindex`` entries (what the broker puts in a response's
``AbortedTransactions``); the reference is Kafka's own record classes' decoding of the same segments
(``*.decoded.jsonl``: committed, non-control records kept as a read_committed consumer keeps them).
"""

from __future__ import annotations

import functools
import struct

import pyarrow as pa
import pytest
from crc32c import crc32c

from audit.formats.fetched import RECORDS_SCHEMA, FetchedChunk, committed_batches, decode_fetched, decode_fetched_many
from audit.formats.record_batch import scan_batches
from audit.formats.segments import RAW_SCHEMA, decode_offsets_rows

from ..paths import SCENARIO
from ..sources.test_kafka_datasource import expected_rows

BROKER = SCENARIO / "brokers" / "broker-1"
pytestmark = pytest.mark.skipif(not BROKER.is_dir(), reason=f"scenario data missing: {BROKER}")
END = 2**62


def _segment(p: int) -> tuple[bytes, list[tuple[int, int]]]:
    """(the .log bytes, the .txnindex's aborted transactions as (producer_id, first_offset)) of partition p."""
    d = BROKER / f"__consumer_offsets-{p}"
    txn = (d / "00000000000000000000.txnindex").read_bytes() if (d / "00000000000000000000.txnindex").exists() else b""
    # AbortedTxn: version int16, producer_id int64, first_offset int64, last_offset int64, last_stable_offset int64
    aborted = [struct.unpack_from(">hqqqq", txn, i)[1:3] for i in range(0, len(txn) - 33, 34)]
    return (d / "00000000000000000000.log").read_bytes(), aborted


@functools.cache
def _kafka_read_committed(p: int) -> list[dict]:
    """Kafka's decoding of the segment, as a read_committed consumer returns it: no control records, no record
    of a transaction whose marker is ABORT (the same reference as the data source's tests)."""
    return [rec for _, _, rec in expected_rows().get(p, [])]


def _rows(got) -> list[dict]:
    return pa.Table.from_batches(got.batches, schema=RAW_SCHEMA).to_pylist() if got.batches else []


PARTITIONS = [p for p in range(50) if (BROKER / f"__consumer_offsets-{p}" / "00000000000000000000.log").exists()]


@pytest.mark.parametrize("p", PARTITIONS)
def test_a_fetched_segment_gives_what_kafkas_read_committed_consumer_gets(p):
    buf, aborted = _segment(p)
    got = decode_fetched(buf, p, 0, END, aborted)
    rows = [r for r in _rows(got) if r["kind"] == "record"]
    kafka = _kafka_read_committed(p)
    assert [r["offset"] for r in rows] == [r["offset"] for r in kafka]
    assert [r["timestamp"] for r in rows] == [r["timestamp"] for r in kafka]
    for ours, theirs in zip(rows, kafka):
        if theirs.get("committed_offset") is not None:
            assert (ours["group_id"], ours["topic"], ours["partition"], ours["committed_offset"]) == (
                theirs["group"],
                theirs["topic"],
                theirs["partition"],
                theirs["committed_offset"],
            )
        assert ours["is_transactional"] is False  # the outcome is applied: nothing downstream waits for a marker
        assert ours["source_file"] is None or ours["decode_error"] is not None
    assert got.issues == 0
    scan = scan_batches(buf)
    if len(scan):
        assert got.next_offset == int(scan.base_offset[-1]) + int(scan.last_offset_delta[-1]) + 1
    else:
        assert (got.next_offset, got.batches) == (None, [])


def test_the_scenario_has_aborted_transactional_commits_to_leave_out():
    aborted = [(p, a) for p in PARTITIONS for a in _segment(p)[1]]
    assert aborted, "no .txnindex entry: the test above would not see an aborted transaction"
    p = aborted[0][0]
    buf, txns = _segment(p)
    keep, dropped = committed_batches(buf, scan_batches(buf), txns)
    assert dropped.any() and not (keep & dropped).any()
    # without the response's AbortedTransactions the aborted commits come back (Kafka's consumer needs them too)
    with_list = {r["offset"] for r in _rows(decode_fetched(buf, p, 0, END, txns))}
    without = {r["offset"] for r in _rows(decode_fetched(buf, p, 0, END, []))}
    assert with_list < without


def test_offsets_before_the_fetch_offset_and_from_the_planned_end_are_left_out():
    p = max(PARTITIONS, key=lambda q: len(_kafka_read_committed(q)))
    buf, aborted = _segment(p)
    offsets = [r["offset"] for r in _kafka_read_committed(p)]
    lo, hi = offsets[len(offsets) // 4], offsets[3 * len(offsets) // 4]
    got = decode_fetched(buf, p, lo, hi, aborted)
    assert [r["offset"] for r in _rows(got) if r["kind"] == "record"] == [o for o in offsets if lo <= o < hi]


def test_a_partial_batch_at_the_end_is_the_response_limit_not_an_issue():
    p = max(PARTITIONS, key=lambda q: len(_segment(q)[0]))
    buf, aborted = _segment(p)
    scan = scan_batches(buf)
    assert len(scan) >= 3
    cut = int(scan.position[-2]) + 30  # inside the second last batch
    got = decode_fetched(buf[:cut], p, 0, END, aborted)
    assert got.issues == 0 and not any(r["kind"] == "issue" for r in _rows(got))
    # the next fetch starts at the cut batch, which comes whole the next time
    assert got.next_offset == int(scan.base_offset[-3]) + int(scan.last_offset_delta[-3]) + 1
    rest = decode_fetched(buf, p, got.next_offset, END, aborted)
    both = [r["offset"] for r in _rows(got) + _rows(rest) if r["kind"] == "record"]
    assert both == [r["offset"] for r in _kafka_read_committed(p)]


def test_a_corrupt_batch_is_an_issue_named_by_offset_and_stepped_over():
    p = max(PARTITIONS, key=lambda q: len(_segment(q)[0]))
    buf, aborted = _segment(p)
    scan = scan_batches(buf)
    bad = bytearray(buf)
    pos = int(scan.position[1])
    bad[pos + 70] ^= 0xFF  # a byte of the second batch's records: its CRC no longer holds
    got = decode_fetched(bytes(bad), p, 0, END, aborted)
    issues = [r for r in _rows(got) if r["kind"] == "issue"]
    assert [(i["decode_error"], i["offset"], i["position"]) for i in issues] == [
        ("crc_mismatch", int(scan.base_offset[1]), None)
    ]
    assert issues[0]["source_file"] == f"__consumer_offsets-{p}" and issues[0]["detail"].startswith(
        f"batch at offset {int(scan.base_offset[1])} (fetched from offset 0): stored crc"
    )
    first, last = int(scan.base_offset[1]), int(scan.base_offset[1]) + int(scan.last_offset_delta[1])
    expected = [r["offset"] for r in _kafka_read_committed(p) if not first <= r["offset"] <= last]
    assert [r["offset"] for r in _rows(got) if r["kind"] == "record"] == expected
    assert got.next_offset == int(scan.base_offset[-1]) + int(scan.last_offset_delta[-1]) + 1


def test_an_abort_marker_ends_the_producers_aborted_range():
    """A later transaction of the same producer, after its ABORT marker, is committed: kept."""
    key, value = b"\x00\x01k", b"v"

    def record(delta: int, k: bytes = key, v: bytes = value) -> bytes:
        # length, attributes, timestamp delta, offset delta, key, value, no headers (DefaultRecord)
        body = bytes([0]) + _varint(0) + _varint(delta) + _varint(len(k)) + k + _varint(len(v)) + v + _varint(0)
        return _varint(len(body)) + body

    def batch(base: int, n: int, attrs: int, pid: int, payload: bytes | None = None) -> bytes:
        recs = payload if payload is not None else b"".join(record(i) for i in range(n))
        body = struct.pack(">hiqqqhii", attrs, n - 1, 1000, 1000, pid, 0, 0, n) + recs
        return struct.pack(">qiib", base, len(body) + 9, 0, 2) + struct.pack(">I", crc32c(body)) + body

    def marker(base: int, ctype: int, pid: int) -> bytes:
        # a control batch's one record: key (version, ControlRecordType 0 ABORT / 1 COMMIT), value EndTxnMarker
        return batch(base, 1, 0x30, pid, record(0, struct.pack(">hh", 0, ctype), struct.pack(">hi", 0, 0)))

    txn = 0x10
    buf = (
        batch(0, 2, txn, 7)  # aborted
        + marker(2, 0, 7)  # ABORT
        + batch(3, 2, txn, 7)  # the producer's next transaction: committed
        + marker(5, 1, 7)  # COMMIT
        + batch(6, 1, 0, -1)  # not transactional
    )
    got = decode_fetched(buf, 0, 0, END, [(7, 0)], decoded=False)
    table = pa.Table.from_batches(got.batches, schema=RECORDS_SCHEMA)
    assert table.column("source_offset").to_pylist() == [3, 4, 6]
    assert (got.skipped_aborted, got.skipped_control, got.next_offset) == (1, 2, 7)


def test_raw_rows_decode_to_the_same_rows():
    p = max(PARTITIONS, key=lambda q: len(_kafka_read_committed(q)))
    buf, aborted = _segment(p)
    raw = decode_fetched(buf, p, 0, END, aborted, decoded=False)
    again = decode_offsets_rows(
        pa.Table.from_batches(raw.batches, schema=RECORDS_SCHEMA).combine_chunks().to_batches()[0]
    )
    cols = ["offset", "timestamp", "group_id", "topic", "partition", "committed_offset", "leader_epoch", "metadata"]
    ours = pa.Table.from_batches(decode_fetched(buf, p, 0, END, aborted).batches).select(cols).to_pylist()
    assert pa.Table.from_batches([again]).select(cols).to_pylist() == ours


def _varint(v: int) -> bytes:
    v = (v << 1) ^ (v >> 63)  # zigzag
    out = bytearray()
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def test_latest_mode_keeps_what_the_log_dir_source_keeps_of_a_segment():
    """``reduce_latest`` folds a partition's records as ``--mode latest`` folds a segment: the same records kept
    (with the live commits each stands for) and the same counts of the rest."""
    from audit.formats.segments import decode_offsets_segment

    plain = [
        p
        for p in PARTITIONS
        if not any(r["is_transactional"] for r in _kafka_read_committed(p)) and len(_kafka_read_committed(p)) > 3
    ]
    assert plain
    cols = ["kind", "offset", "group_id", "topic", "partition", "committed_offset", "live_count", "record_count"]
    for p in plain:
        buf, aborted = _segment(p)
        ours = pa.Table.from_batches(
            decode_fetched_many([FetchedChunk(p, buf, 0, END, aborted)], reduce_latest=True).batches
        )
        offline = pa.Table.from_batches(decode_offsets_segment(buf, "x", p, reduce_latest=True))
        key = lambda r: (r["kind"], r["offset"] or -1, r["record_type"] or -1, r["value_version"] or -1)  # noqa: E731
        a = sorted(offline.select(cols + ["record_type", "value_version"]).to_pylist(), key=key)
        b = sorted(ours.select(cols + ["record_type", "value_version"]).to_pylist(), key=key)
        assert a == b, p
    # something was folded away, else the comparison proves little
    assert any(r["kind"] == "count" for p in plain for r in _latest_rows(p))


def _latest_rows(p: int) -> list[dict]:
    buf, aborted = _segment(p)
    got = decode_fetched_many([FetchedChunk(p, buf, 0, END, aborted)], reduce_latest=True)
    return pa.Table.from_batches(got.batches).to_pylist()


def test_latest_mode_over_a_clients_records_keeps_what_the_log_dir_source_keeps():
    """Spark's connector hands the audit records a client read (key, value, offset): ``--mode latest`` folds them
    as the log-dir source folds the segment they came from."""
    from audit.formats.segments import decode_offsets_rows_latest, decode_offsets_segment

    cols = ["kind", "offset", "group_id", "topic", "partition", "committed_offset", "live_count", "record_count"]
    folded = False
    for p in PARTITIONS:
        if any(r["is_transactional"] for r in _kafka_read_committed(p)) or not _kafka_read_committed(p):
            continue
        buf, aborted = _segment(p)
        raw = pa.Table.from_batches(
            decode_fetched(buf, p, 0, END, aborted, decoded=False).batches, schema=RECORDS_SCHEMA
        )
        ours = pa.Table.from_batches(decode_offsets_rows_latest(raw))
        offline = pa.Table.from_batches(decode_offsets_segment(buf, "x", p, reduce_latest=True))
        key = lambda r: (r["kind"], r["offset"] or -1, r["record_type"] or -1, r["value_version"] or -1)  # noqa: E731
        cols_all = cols + ["record_type", "value_version", "is_tombstone"]
        assert sorted(ours.select(cols_all).to_pylist(), key=key) == sorted(
            offline.select(cols_all).to_pylist(), key=key
        ), p
        folded |= "count" in ours.column("kind").to_pylist()
    assert folded


# ------------------------------------------------------- read_ranges, --mode latest: a few partitions at a time


class _SegmentLeaders:
    """A stand-in for the collector of :func:`audit.sources.fetch.read_ranges`: three leaders serving the real
    segments of :data:`PARTITIONS` as a broker serves a Fetch (the batches from the one holding the fetch offset,
    whole, up to ``partition_max_bytes`` but at least one; the ``.txnindex`` entries as aborted transactions).
    It records the partitions asked for in each round."""

    def __init__(self):
        from types import SimpleNamespace as NS

        self.ns = NS
        self.rounds: list[list[int]] = []  # the partitions asked for in each round (all leaders)
        self.logs = {p: _segment(p) for p in PARTITIONS}
        self.scans = {p: scan_batches(buf) for p, (buf, _) in self.logs.items()}

    def fetch_metadata(self, topics):
        return {}

    def leader(self, topic, p):
        return self.ns(node_id=p % 3)

    def partition_metadata(self, topic, p):
        return self.ns(leader_epoch=0)

    def send_all(self, jobs):
        self.rounds.append(sorted(fp.partition for _, req in jobs for t in req.topics for fp in t.partitions))
        return [self._fetch(req) for _, req in jobs]

    def _fetch(self, req):
        ns, parts = self.ns, []
        for t in req.topics:
            for fp in t.partitions:
                buf, aborted = self.logs[fp.partition]
                sc = self.scans[fp.partition]
                last = sc.base_offset + sc.last_offset_delta
                first = int((last < fp.fetch_offset).sum())
                lo, n = int(sc.position[first]) if first < len(sc) else len(buf), first
                while n < len(sc) and (
                    n == first or sc.position[n] + sc.batch_length[n] + 12 - lo <= fp.partition_max_bytes
                ):
                    n += 1
                hi = int(sc.position[n - 1] + sc.batch_length[n - 1] + 12) if n > first else lo
                end = int(last[-1]) + 1 if len(sc) else 0
                parts.append(
                    ns(
                        partition_index=fp.partition,
                        error_code=0,
                        records=buf[lo:hi],
                        aborted_transactions=[ns(producer_id=a, first_offset=b) for a, b in aborted],
                        last_stable_offset=end,
                        high_watermark=end,
                    )
                )
        return ns(throttle_time_ms=0, error_code=0, responses=[ns(partitions=parts)])

    def log_bounds(self, **kw):
        return []

    def close(self):
        pass


def test_latest_mode_reads_a_few_partitions_at_a_time_and_folds_to_what_kafka_committed(monkeypatch):
    """With holds far smaller than the partitions, ``--mode latest`` asks for at most ``HOLD_BYTES //
    PARTITION_HOLD_BYTES`` partitions at once, decodes at most about ``HOLD_BYTES`` at a time, and what it keeps
    still says what Kafka's read_committed consumer read: every record counted once, each group-partition's last
    commit (offset and committed offset) kept.  Every leader is asked each round."""
    from audit.sources import fetch
    from audit.sources.client_config import ClientConfig

    leaders = _SegmentLeaders()
    monkeypatch.setattr("audit.sources.collector.open_collector", lambda *a, **k: leaders)
    hold, partition_hold, partition_max = 1024, 256, 120  # 4 partitions at a time
    monkeypatch.setattr(fetch, "HOLD_BYTES", hold)
    monkeypatch.setattr(fetch, "PARTITION_HOLD_BYTES", partition_hold)
    decoded_sizes: list[int] = []
    real = fetch.decode_prepared

    def spy(chunks, **kw):
        decoded_sizes.append(sum(c.size for c in chunks))
        return real(chunks, **kw)

    monkeypatch.setattr(fetch, "decode_prepared", spy)
    ranges = [(p, 0, END) for p in PARTITIONS]
    cfg = ClientConfig(settings={"bootstrap_servers": ["x:9092"], "max_partition_fetch_bytes": partition_max})

    def fail(stage, parts, exc):
        return AssertionError(f"{stage} {parts}: {exc}")

    rows = pa.Table.from_batches(
        list(
            fetch.read_ranges(
                cfg, "__consumer_offsets", ranges, poll_timeout_ms=5000, decoded=True, fail=fail, reduce_latest=True
            )
        ),
        schema=RAW_SCHEMA,
    ).to_pylist()

    asked = [p for r in leaders.rounds for p in r]
    assert len(asked) > len(PARTITIONS) * 2  # the larger partitions took several rounds each
    assert sorted(set(asked)) == sorted(PARTITIONS)
    window = hold // partition_hold
    assert max(len(r) for r in leaders.rounds) == window  # every leader asked each round, for its share only
    assert [p for p in PARTITIONS if len(leaders.logs[p][0]) > hold], "a partition larger than the hold"
    biggest_batch = max(int(sc.batch_length.max()) + 12 for sc in leaders.scans.values() if len(sc))
    assert max(decoded_sizes) <= hold + window * max(partition_max, biggest_batch)
    assert len(decoded_sizes) > len([p for p in PARTITIONS if leaders.logs[p][0]])  # partitions folded in parts

    kafka = {p: _kafka_read_committed(p) for p in PARTITIONS}
    counted = sum(r["record_count"] for r in rows if r["kind"] in ("record", "count"))
    assert counted == sum(map(len, kafka.values()))
    last: dict = {}
    for p, recs in kafka.items():
        for r in recs:
            if r["type"] == "offset_commit":
                last[(r["group"], r["topic"], r["partition"])] = (p, r["offset"], r["committed_offset"])
    ours: dict = {}
    for r in rows:
        if r["kind"] == "record" and r["record_type"] in (0, 1) and not r["is_tombstone"]:
            k = (r["group_id"], r["topic"], r["partition"])
            if k not in ours or r["offset"] > ours[k][1]:
                ours[k] = (r["source_partition"], r["offset"], r["committed_offset"])
    assert ours == last
