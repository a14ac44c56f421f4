"""The baseline: decode ``__consumer_offsets`` segments record by record, as most tools do.

kafka-python's ``MemoryRecords`` walks the batches (CRC checked, as its consumer does with the
default ``check_crcs=True``), iterates every record in Python, and ``struct`` unpacks each key
(record type, group, topic, partition) and OffsetCommitValue (v0-v4) into a tuple.  No Spark,
one process, one core.  ``decode_files(paths)`` returns the number of offset commits decoded.

``python -m bench.naive_decoder --log-dir DIR [--json]`` times it over a log dir's segments.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from pathlib import Path

from kafka.record.memory_records import MemoryRecords

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_V0 = struct.Struct(">hq")  # version, offset
_EPOCH = struct.Struct(">i")


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def decode_value(value: bytes) -> tuple:
    """OffsetCommitValue v0-v4 -> (version, offset, leader_epoch, metadata, commit_ts, expire_ts)."""
    version, offset = _V0.unpack_from(value, 0)
    pos = 10
    epoch = -1
    if version >= 3:
        (epoch,) = _EPOCH.unpack_from(value, pos)
        pos += 4
    if version >= 4:
        n, pos = _read_uvarint(value, pos)
        n -= 1
    else:
        (n,) = _H.unpack_from(value, pos)
        pos += 2
    metadata = value[pos : pos + n].decode("utf-8", "replace") if n > 0 else ""
    pos += max(n, 0)
    (commit_ts,) = _Q.unpack_from(value, pos)
    expire_ts = _Q.unpack_from(value, pos + 8)[0] if version == 1 else -1
    return version, offset, epoch, metadata, commit_ts, expire_ts


def decode_key(key: bytes) -> tuple:
    """Offset commit key -> (record_type, group, topic, partition); other types -> (type, group, None, -1)."""
    (rtype,) = _H.unpack_from(key, 0)
    (glen,) = _H.unpack_from(key, 2)
    group = key[4 : 4 + glen].decode("utf-8")
    if rtype > 1:
        return rtype, group, None, -1
    pos = 4 + glen
    (tlen,) = _H.unpack_from(key, pos)
    topic = key[pos + 2 : pos + 2 + tlen].decode("utf-8")
    (partition,) = _I.unpack_from(key, pos + 2 + tlen)
    return rtype, group, topic, partition


def decode_segment(data: bytes, sink: list | None = None) -> int:
    """Decode one segment's bytes; returns the number of offset commits (type 0/1, non-null value)."""
    records = MemoryRecords(data)
    n = 0
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():
            continue
        if batch.is_control_batch:
            continue
        for rec in batch:
            key = rec.key
            if key is None:
                continue
            k = decode_key(key)
            if k[0] > 1 or rec.value is None:
                continue
            v = decode_value(rec.value)
            n += 1
            if sink is not None:
                sink.append((rec.offset, rec.timestamp) + k + v)
    return n


def decode_files(paths: list[str]) -> int:
    """Read and decode every file in ``paths``; returns the total number of offset commits."""
    total = 0
    for p in paths:
        total += decode_segment(Path(p).read_bytes())
    return total


def time_log_dir(log_dir: str) -> dict:
    """Time :func:`decode_files` over every ``__consumer_offsets`` segment of ``log_dir``."""
    from bench.generate import offsets_segments

    paths = offsets_segments(log_dir)
    t = time.perf_counter()
    n = decode_files(paths)
    secs = time.perf_counter() - t
    return {
        "files": len(paths),
        "commits": n,
        "seconds": round(secs, 3),
        "records_per_second": round(n / secs) if secs > 0 else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Time the naive per-record decoder over a log dir")
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args(argv)
    r = time_log_dir(a.log_dir)
    print(
        json.dumps(r)
        if a.json
        else f"{r['commits']} commits from {r['files']} files in {r['seconds']} s: {r['records_per_second']:,} records/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
