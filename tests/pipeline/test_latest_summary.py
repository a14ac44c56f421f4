"""The latest-mode per-segment summary must give exactly what every record gives.

Random ``__consumer_offsets`` segments (key versions 0 and 1 of one key, offset-commit
tombstones, group tombstones, transactional commits with COMMIT/ABORT markers or none yet,
undecodable values) are decoded twice: every record, and summarised per segment
(:mod:`audit.formats.latest`).  :func:`audit.commits.live_commits` in latest mode must then
return the same rows, and the record statistics must add up to the same counts.
"""

import random
import struct

import crc32c
import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from audit.commits import live_commits, with_transaction_state
from audit.formats.latest import group_equal_bytes
from audit.formats.segments import RAW_SCHEMA, decode_offsets_segment

TS = 1_700_000_000_000


def _commit_key(group: bytes, topic: bytes, partition: int, version: int = 1) -> bytes:
    return (
        struct.pack(">hh", version, len(group))
        + group
        + struct.pack(">h", len(topic))
        + topic
        + struct.pack(">i", partition)
    )


def _commit_value(offset: int, epoch: int) -> bytes:
    return struct.pack(">hqih", 3, offset, epoch, 0) + struct.pack(">q", TS + offset)


def _batch(base: int, records, txn_pid: int = -1, control: bool = False) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=txn_pid >= 0,
        producer_id=txn_pid,
        producer_epoch=0 if txn_pid >= 0 else -1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp=TS, key=k, value=v, headers=[])
    buf = bytearray(b.build())
    buf[0:8] = struct.pack(">q", base)
    if control:
        attrs = struct.unpack(">h", buf[21:23])[0] | 0x20
        buf[21:23] = struct.pack(">h", attrs)
    buf[17:21] = struct.pack(">I", crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def _random_log(seed: int):
    """[(segment bytes), ...] of one __consumer_offsets partition, offsets continuing across segments."""
    rnd = random.Random(seed)
    groups = [b"g1", b"g2", b"g3"]
    keys = [(g, t, p) for g in groups for t in (b"t", b"orders") for p in (0, 1)]
    segments, offset = [], 0
    open_txn: dict[int, bool] = {}
    for _seg in range(3):
        buf = b""
        for _ in range(rnd.randint(15, 40)):
            roll = rnd.random()
            if roll < 0.55:  # a batch of plain commits (some tombstones, some key version 0)
                recs = []
                for _i in range(rnd.randint(1, 6)):
                    g, t, p = rnd.choice(keys)
                    key = _commit_key(g, t, p, version=rnd.choice((0, 1, 1)))
                    r = rnd.random()
                    value = (
                        None
                        if r < 0.1
                        else (b"\x00\x09junk" if r < 0.13 else _commit_value(rnd.randint(0, 500), rnd.randint(-1, 6)))
                    )
                    recs.append((key, value))
                buf += _batch(offset, recs)
                offset += len(recs)
            elif roll < 0.62:  # group deleted
                g = rnd.choice(groups)
                buf += _batch(offset, [(struct.pack(">hh", 2, len(g)) + g, None)])
                offset += 1
            elif roll < 0.85:  # a transactional commit of one producer
                pid = rnd.choice((7, 8))
                g, t, p = rnd.choice(keys)
                buf += _batch(
                    offset, [(_commit_key(g, t, p), _commit_value(rnd.randint(0, 500), rnd.randint(0, 6)))], txn_pid=pid
                )
                open_txn[pid] = True
                offset += 1
            elif open_txn:  # its marker: COMMIT (1) or ABORT (0)
                pid = rnd.choice(sorted(open_txn))
                del open_txn[pid]
                marker = (struct.pack(">hh", 0, rnd.choice((0, 1))), struct.pack(">hi", 0, 0))
                buf += _batch(offset, [marker], txn_pid=pid, control=True)
                offset += 1
        segments.append(buf)
    return segments


def _raw(spark, segments, reduce_latest: bool):
    batches = []
    for i, seg in enumerate(segments):
        batches += decode_offsets_segment(seg, f"seg{i}.log", 0, reduce_latest=reduce_latest)
    table = pa.Table.from_batches(batches, schema=RAW_SCHEMA)
    return spark.createDataFrame(table).withColumn("broker_id", F.lit(1))


def _stats(raw):
    """records by (record_type, value_version, is_tombstone), counting folded records once."""
    rows = (
        raw.where(F.col("kind").isin("record", "count"))
        .groupBy("record_type", "value_version", "is_tombstone")
        .agg(F.sum("record_count").alias("n"))
        .collect()
    )
    return {(r["record_type"], r["value_version"], r["is_tombstone"]): r["n"] for r in rows}


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_summary_gives_the_same_latest_commits(spark, seed):
    segments = _random_log(seed)
    full, reduced = _raw(spark, segments, False), _raw(spark, segments, True)
    folded = reduced.where(F.col("kind") == "count").agg(F.sum("record_count")).first()[0]
    assert folded and reduced.where(F.col("kind") == "record").count() < full.where(F.col("kind") == "record").count()
    want = live_commits(with_transaction_state(full), latest_only=True)
    got = live_commits(with_transaction_state(reduced), latest_only=True)
    assert want.count() > 0
    assertDataFrameEqual(got, want)
    assert _stats(reduced) == _stats(full)


def test_group_equal_bytes_is_exact():
    data = np.frombuffer(b"abcabdabcxyzab" + b"q" * 2000, dtype=np.uint8)
    start = np.array([0, 3, 6, 0, 12, 1, 14, 14], dtype=np.int64)
    length = np.array([3, 3, 3, 2, 2, 0, 1500, -1], dtype=np.int64)
    ids = group_equal_bytes(data, start, length)
    assert ids[0] == ids[2] and ids[0] != ids[1]
    assert ids[3] == ids[4] and ids[3] != ids[0]  # "ab" twice; a prefix is another key
    assert ids[5] >= 0 and ids[5] not in ids[[0, 1, 3]]  # empty bytes are a key of their own
    assert ids[6] == -1 and ids[7] == -1  # too long / null: not summarised


def test_group_equal_bytes_matches_comparing_the_bytes():
    """Keys of many widths, some ending at the very end of the buffer (fewer than 8 bytes left to read
    a word from): two rows share an id exactly when their bytes are equal."""
    rng = np.random.default_rng(3)
    data = rng.integers(0, 3, 400, dtype=np.uint8)  # a small alphabet: many equal keys
    length = rng.integers(0, 20, 5000).astype(np.int64)
    start = rng.integers(0, 400, 5000).astype(np.int64)
    start = np.minimum(start, 400 - length)
    tail = length[:300].copy()
    start[:300] = 400 - tail  # keys that end on the buffer's last byte
    ids = group_equal_bytes(data, start, length)
    assert (ids >= 0).all()
    keys = [bytes(data[s : s + n]) for s, n in zip(start, length)]
    first = {}
    for i, k in enumerate(keys):
        first.setdefault(k, ids[i])
        assert ids[i] == first[k]
    assert len(set(first.values())) == len(first)


@pytest.mark.parametrize("seed", range(4))
def test_summary_by_distinct_whole_keys_keeps_the_same_records(seed):
    """summarise_latest given the whole keys' ids (each distinct key compared once) keeps the same records with
    the same counts as comparing every record's key after its version; a key longer than MAX_KEY_BYTES passes
    through either way."""
    from audit.formats.latest import MAX_KEY_BYTES, summarise_latest
    from audit.formats.record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, extract_records, scan_batches
    from audit.formats.segments import _record_types

    long_key = _commit_key(b"g" * (MAX_KEY_BYTES - 8), b"t", 0)
    segments = _random_log(seed)
    segments[0] += _batch(10_000, [(long_key, _commit_value(1, 1)), (long_key, _commit_value(2, 1))])
    for seg in segments:
        scan = scan_batches(seg)
        recs = extract_records(seg, scan)
        attrs = scan.attributes[recs.batch]
        ctl, txn = (attrs & ATTR_CONTROL) != 0, (attrs & ATTR_TRANSACTIONAL) != 0
        num = _record_types(recs, np.arange(len(recs)), ctl, values=False)
        ids = group_equal_bytes(recs.data, recs.key_start, recs.key_len, max_bytes=MAX_KEY_BYTES + 2)
        a = summarise_latest(recs.data, recs.key_start, recs.key_len, num, txn, ctl)
        b = summarise_latest(recs.data, recs.key_start, recs.key_len, num, txn, ctl, full_key_ids=ids)
        assert np.array_equal(a.keep, b.keep) and np.array_equal(a.live_count, b.live_count)
        assert np.array_equal(a.record_count, b.record_count) and a.counts == b.counts
        assert len(a.keep) < len(recs)
    assert len(long_key) - 2 > MAX_KEY_BYTES
