"""Synthetic single-broker log dir for the throughput benchmark.

``generate_log_dir(path, n_commits, ...)`` writes a Kafka log dir the auditor accepts:

* ``meta.properties`` (``node.id=1``);
* ``__consumer_offsets-<p>/`` for ``p < partitions``: ``NNNNNNNNNNNNNNNNNNNN.log`` segments (a new
  segment, named by its base offset, whenever the next batch would push the current one past
  ``segment_bytes``) of magic-2 record batches of ``records_per_batch`` OffsetCommit records each,
  plus a ``leader-epoch-checkpoint``.  Each batch is one group committing its assigned
  topic-partitions, as one OffsetCommit request does; the group's ``__consumer_offsets`` partition
  is Kafka's ``abs(groupId.hashCode()) % partitions``.  Record key: int16 type 1, group string,
  topic string, int32 partition.  Value: OffsetCommitValue v3 (int16 3, int64 offset, int32
  leader epoch, empty metadata string, int64 commit timestamp);
* ``<topic>-<p>/`` for every referenced user topic-partition: a ``leader-epoch-checkpoint`` with
  epochs 0, 1, 2 and a small ``00000000000000000000.log`` whose single batch (written in epoch 2)
  ends at the log end offset;
* root ``replication-offset-checkpoint``, ``log-start-offset-checkpoint`` and
  ``recovery-point-offset-checkpoint``.

Committed offsets grow per group-partition round after round and carry the leader epoch in
which offset - 1 was written, so they are valid; a small deterministic fraction
(``bad_fraction`` of the group-partitions) gets a bad *latest* commit: either leader epoch 1
past the start of epoch 2 (``LOG_TRUNCATION``: past the divergence point) or an offset above
the log end offset (``OFFSET_OUT_OF_RANGE``).

Speed: every batch is built once per distinct key set (one *template* per group) with
kafka-python's ``DefaultRecordBatchBuilder``; all rounds of a group are then copies of that
template whose fixed-position fields (base offset, timestamps, committed offset, epoch, commit
timestamp) are patched with numpy and whose CRC-32C is recomputed.  Records keep the builder's
layout byte for byte, so only values change.  5,000,000 commits take well under a minute.

``ensure_log_dir(n_commits, ...)`` caches generated dirs under ``/tmp/koa-bench`` keyed by
the parameters.  ``python -m bench.generate --n 100000 --check`` generates (or reuses) one and
cross-checks a segment with the auditor's decoder and kafka-python's ``MemoryRecords``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

GENERATOR_VERSION = 2  # 2: .index files next to the segments
#: ``log.index.interval.bytes`` (broker default): bytes of batches between offset-index entries
INDEX_INTERVAL_BYTES = 4096
OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_CACHE = os.environ.get("KOA_BENCH_CACHE", "/tmp/koa-bench")
T0_MS = 1_700_000_000_000  # first commit timestamp (2023-11-14)
TICK_MS = 10  # one commit batch every 10 ms, cluster-wide
BATCH_HEADER = 61
CRC_POS, ATTR_POS = 17, 21
BASE_TS_POS, MAX_TS_POS = 27, 35
#: OffsetCommitValue v3 with an empty metadata string: version, offset, leader_epoch, metadata, timestamp.
VALUE_V3 = struct.Struct(">hqihq")
VALUE_LEN = VALUE_V3.size  # 24
V_OFFSET, V_EPOCH, V_TS = 2, 10, 16  # field positions inside the value


@dataclass(frozen=True)
class Params:
    n_commits: int
    partitions: int = 8
    groups: int = 200
    topics: int = 20
    partitions_per_topic: int = 16
    records_per_batch: int = 100
    segment_bytes: int = 64 << 20
    seed: int = 0
    bad_fraction: float = 0.01

    def key(self) -> str:
        return (
            f"n{self.n_commits}-p{self.partitions}-g{self.groups}-t{self.topics}x{self.partitions_per_topic}"
            f"-rpb{self.records_per_batch}-seg{self.segment_bytes}-s{self.seed}-bad{self.bad_fraction:g}"
            f"-v{GENERATOR_VERSION}"
        )


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()`` (over UTF-16 code units), as a signed int32."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def offsets_partition_for(group: str, partitions: int) -> int:
    """Kafka's ``GroupCoordinator.partitionFor``: ``Utils.abs(groupId.hashCode) % partitions``."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def group_name(g: int) -> str:
    return f"bench-group-{g:05d}"


def topic_name(t: int) -> str:
    return f"bench.topic{t:03d}"


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", 1) + _string(group) + _string(topic) + struct.pack(">i", partition)


def _builder() -> DefaultRecordBatchBuilder:
    return DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )


def build_template(keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """One batch of OffsetCommit records (offset deltas 0.., timestamp deltas 0) built by kafka-python.

    Returns ``(batch bytes as uint8, value start position of each record)``.
    """
    b = _builder()
    value = VALUE_V3.pack(3, 0, 0, 0, 0)
    for i, k in enumerate(keys):
        if b.append(i, timestamp=T0_MS, key=k, value=value, headers=[]) is None:
            raise RuntimeError("batch builder refused a record")
    buf = bytes(b.build())
    pos, starts = BATCH_HEADER, []
    for i, k in enumerate(keys):
        pos += DefaultRecordBatchBuilder.size_in_bytes(i, 0, k, value, [])
        starts.append(pos - 1 - VALUE_LEN)  # value, then the 1-byte header count (0)
    if pos != len(buf):
        raise RuntimeError(f"record layout mismatch: computed {pos} bytes, builder wrote {len(buf)}")
    arr = np.frombuffer(buf, dtype=np.uint8).copy()
    st = np.asarray(starts, dtype=np.int64)
    if any(buf[s : s + VALUE_LEN] != value for s in starts):
        raise RuntimeError("value positions do not match the builder's layout")
    return arr, st


def _put(arr: np.ndarray, cols: np.ndarray, values: np.ndarray, dtype: str) -> None:
    """Write big-endian ``values`` (shape rows x len(cols)) at byte columns ``cols`` of every row of ``arr``."""
    width = np.dtype(dtype).itemsize
    v = np.ascontiguousarray(values.astype(dtype))
    b = v.view(np.uint8).reshape(arr.shape[0], len(cols), width)
    arr[:, cols[:, None] + np.arange(width)[None, :]] = b


def _tail_batch(base_offset: int, n: int, leader_epoch: int, ts: int) -> bytes:
    """A small user-topic batch of ``n`` records ending at ``base_offset + n`` (kafka-python builder)."""
    b = _builder()
    for i in range(n):
        b.append(i, timestamp=ts, key=None, value=b"bench-record-%d" % i, headers=[])
    buf = bytearray(b.build())
    # base_offset and partition_leader_epoch precede the CRC'd range: set them as a broker does
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, leader_epoch)
    return bytes(buf)


def _checkpoint(entries: list[str]) -> str:
    return "0\n%d\n%s" % (len(entries), "".join(e + "\n" for e in entries))


def generate_log_dir(
    path: str | os.PathLike,
    n_commits: int,
    *,
    partitions: int = 8,
    groups: int = 200,
    topics: int = 20,
    partitions_per_topic: int = 16,
    records_per_batch: int = 100,
    segment_bytes: int = 64 << 20,
    seed: int = 0,
    bad_fraction: float = 0.01,
) -> dict:
    """Write a synthetic single-broker log dir (``node.id=1``) at ``path``; returns a manifest dict.

    ``n_commits`` OffsetCommit records in total, in batches of ``records_per_batch`` (the last
    one may be smaller); batch ``b`` belongs to group ``b % groups`` (round ``b // groups``).
    Group ``g`` commits ``records_per_batch`` consecutive topic-partitions (cyclically) of the
    ``topics * partitions_per_topic`` user partitions.  The manifest holds the parameters, file
    counts and sizes and how many group-partitions got a bad latest commit of each kind.
    """
    p = Params(
        n_commits,
        partitions,
        groups,
        topics,
        partitions_per_topic,
        records_per_batch,
        segment_bytes,
        seed,
        bad_fraction,
    )
    if n_commits < 1 or records_per_batch < 1 or groups < 1 or partitions < 1:
        raise ValueError("n_commits, records_per_batch, groups and partitions must be >= 1")
    U = topics * partitions_per_topic
    K = records_per_batch
    if K > U:
        raise ValueError(f"records_per_batch {K} exceeds topics*partitions_per_topic {U}: a batch would repeat a key")
    started = time.time()
    root = Path(path)
    root.mkdir(parents=True, exist_ok=False)
    rng = np.random.default_rng(seed)
    G = groups
    B = -(-n_commits // K)  # batches
    last_size = n_commits - (B - 1) * K
    g_last, r_last = (B - 1) % G, (B - 1) // G
    rounds = np.array([(B - g + G - 1) // G if g < B else 0 for g in range(G)], dtype=np.int64)
    r_max = int(rounds.max())

    # user topic-partitions: per-partition commit step, log end offset, epoch starts
    step = rng.integers(5, 50, U).astype(np.int64)
    leo = (r_max + 1) * step + 10
    s1, s2 = leo // 3, 2 * leo // 3
    start = (np.arange(G) * 37) % U  # spread groups over the partitions
    tp_of = (start[:, None] + np.arange(K)[None, :]) % U  # (G, K) user tp index
    lag = (rng.random((G, K)) * step[tp_of]).astype(np.int64)  # 0 <= lag < step
    bad = rng.random((G, K)) < bad_fraction
    bad_kind = rng.integers(0, 2, (G, K))  # 0 truncation, 1 out of range

    names = [group_name(g) for g in range(G)]
    part_of = np.array([offsets_partition_for(n, partitions) for n in names], dtype=np.int64)
    keys_of = [
        [
            offset_commit_key(names[g], topic_name(int(t) // partitions_per_topic), int(t) % partitions_per_topic)
            for t in tp_of[g]
        ]
        for g in range(G)
    ]

    (root / "meta.properties").write_text(
        "#\n#Generated by bench/generate.py\nnode.id=1\nversion=1\ncluster.id=koaBenchCluster0000001\n"
        "directory.id=koaBenchDirectory00001\n"
    )

    counts = {"log_truncation_keys": 0, "out_of_range_keys": 0}
    files = 0
    total_bytes = 0
    offsets_leo: dict[int, int] = {}
    batch_group = np.arange(B, dtype=np.int64) % G
    batch_size = np.full(B, K, dtype=np.int64)
    batch_size[-1] = last_size
    for part in range(partitions):
        pdir = root / f"{OFFSETS_TOPIC}-{part}"
        pdir.mkdir()
        (pdir / "leader-epoch-checkpoint").write_text(_checkpoint(["0 0"]))
        bs = np.nonzero(part_of[batch_group] == part)[0]
        if len(bs) == 0:
            (pdir / f"{0:020d}.log").write_bytes(b"")
            offsets_leo[part] = 0
            files += 1
            continue
        base_of = np.zeros(B, dtype=np.int64)
        sizes = batch_size[bs]
        base_of[bs] = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        offsets_leo[part] = int(sizes.sum())
        rows: dict[int, list[np.ndarray]] = {}
        for g in np.unique(batch_group[bs]).tolist():
            R = int(rounds[g])
            tpl, vstart = build_template(keys_of[g])
            arr = np.tile(tpl, (R, 1))
            r = np.arange(R, dtype=np.int64)
            b_ids = r * G + g
            tp = tp_of[g]
            off = (r[:, None] + 1) * step[tp][None, :] - lag[g][None, :]
            ep = ((off - 1) >= s1[tp][None, :]).astype(np.int64) + ((off - 1) >= s2[tp][None, :])
            # the key's latest commit: its group's last round (one round earlier past a partial last batch)
            last = np.full(K, R - 1, dtype=np.int64)
            if g == g_last and last_size < K:
                last[last_size:] = R - 2
            for i in np.nonzero(bad[g])[0].tolist():
                lr = int(last[i])
                if lr < 0:
                    continue
                t = int(tp[i])
                if bad_kind[g, i] == 0:  # leader epoch 1 although epoch 2 began before the offset
                    off[lr, i] = max(int(off[lr, i]), int(s2[t]) + 1)
                    ep[lr, i] = 1
                    counts["log_truncation_keys"] += 1
                else:  # above the log end offset
                    off[lr, i] = int(leo[t]) + 1 + (g + i) % 50
                    ep[lr, i] = 2
                    counts["out_of_range_keys"] += 1
            ts = T0_MS + b_ids * TICK_MS
            _put(arr, np.array([0]), base_of[b_ids][:, None], ">i8")
            _put(arr, np.array([BASE_TS_POS, MAX_TS_POS]), np.stack([ts, ts], axis=1), ">i8")
            _put(arr, vstart + V_OFFSET, off, ">i8")
            _put(arr, vstart + V_EPOCH, ep, ">i4")
            _put(arr, vstart + V_TS, np.repeat(ts[:, None], K, axis=1), ">i8")
            if g == g_last and last_size < K:
                # the partial last batch: its own template (first last_size keys), same patches
                ptpl, pvs = build_template(keys_of[g][:last_size])
                prow = ptpl[None, :].copy()
                _put(prow, np.array([0]), base_of[[B - 1]][:, None], ">i8")
                _put(prow, np.array([BASE_TS_POS, MAX_TS_POS]), np.array([[ts[r_last], ts[r_last]]]), ">i8")
                _put(prow, pvs + V_OFFSET, off[r_last : r_last + 1, :last_size], ">i8")
                _put(prow, pvs + V_EPOCH, ep[r_last : r_last + 1, :last_size], ">i4")
                _put(prow, pvs + V_TS, np.full((1, last_size), ts[r_last]), ">i8")
                rows[g] = [arr[i] for i in range(R - 1)] + [prow[0]]
            else:
                rows[g] = [arr[i] for i in range(R)]
        seg = None
        seg_size = 0
        seg_base = 0
        index: list[tuple[int, int]] = []
        since_entry = 0

        def close_segment():
            seg.close()
            # the offset index as LogSegment.append writes it: (last offset - base, position) of the
            # first batch after more than log.index.interval.bytes since the previous entry
            (pdir / f"{seg_base:020d}.index").write_bytes(
                struct.pack(f">{2 * len(index)}i", *[x for e in index for x in e])
            )

        try:
            for b in bs.tolist():
                row = rows[b % G][b // G]
                struct.pack_into(">I", row, CRC_POS, crc32c(row[ATTR_POS:]))
                if seg is None or (seg_size > 0 and seg_size + len(row) > segment_bytes):
                    if seg is not None:
                        close_segment()
                    seg_base = int(base_of[b])
                    seg = open(pdir / f"{seg_base:020d}.log", "wb")
                    files += 1
                    seg_size, index, since_entry = 0, [], 0
                if since_entry > INDEX_INTERVAL_BYTES:
                    last_offset = int(base_of[b]) + struct.unpack_from(">i", row, 23)[0]
                    index.append((last_offset - seg_base, seg_size))
                    since_entry = 0
                seg.write(memoryview(row))
                seg_size += len(row)
                since_entry += len(row)
                total_bytes += len(row)
        finally:
            if seg is not None:
                close_segment()

    # user topic-partitions
    used = np.unique(tp_of[rounds > 0])
    epoch_ts = T0_MS + B * TICK_MS
    for t in used.tolist():
        topic, tpart = topic_name(t // partitions_per_topic), t % partitions_per_topic
        d = root / f"{topic}-{tpart}"
        d.mkdir()
        (d / "leader-epoch-checkpoint").write_text(_checkpoint(["0 0", f"1 {int(s1[t])}", f"2 {int(s2[t])}"]))
        n_tail = int(min(10, leo[t] - s2[t]))
        (d / f"{0:020d}.log").write_bytes(_tail_batch(int(leo[t]) - n_tail, n_tail, 2, epoch_ts))
        files += 1
    hw = [f"{OFFSETS_TOPIC} {q} {offsets_leo[q]}" for q in range(partitions)]
    hw += [f"{topic_name(t // partitions_per_topic)} {t % partitions_per_topic} {int(leo[t])}" for t in used.tolist()]
    ls = [e.rsplit(" ", 1)[0] + " 0" for e in hw]
    (root / "replication-offset-checkpoint").write_text(_checkpoint(hw))
    (root / "recovery-point-offset-checkpoint").write_text(_checkpoint(hw))
    (root / "log-start-offset-checkpoint").write_text(_checkpoint(ls))

    live_keys = int(sum(min(int(rounds[g]), 1) * K for g in range(G)))
    if rounds[g_last] == 1 and last_size < K:
        live_keys -= K - last_size
    return {
        "params": asdict(p),
        "generator_version": GENERATOR_VERSION,
        "log_dir": str(root),
        "batches": int(B),
        "group_partitions": live_keys,
        "user_partitions": int(len(used)),
        "offsets_partition_records": {str(k): v for k, v in offsets_leo.items()},
        "segment_files": files,
        "segment_bytes_total": int(total_bytes),
        "bad_latest_commits": counts,
        "generation_seconds": round(time.time() - started, 3),
    }


def ensure_log_dir(n_commits: int, cache_root: str = DEFAULT_CACHE, **kwargs) -> tuple[str, dict, bool]:
    """Generate (or reuse from ``cache_root``) the log dir for these parameters.

    Returns ``(log dir path, manifest, was_cached)``.  Written under a temporary name and
    renamed, so an interrupted generation is never reused.
    """
    p = Params(n_commits, **kwargs)
    base = Path(cache_root) / p.key()
    manifest_path = base / "manifest.json"
    if manifest_path.exists():
        return str(base / "broker-1"), json.loads(manifest_path.read_text()), True
    tmp = Path(cache_root) / f".{p.key()}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        manifest = generate_log_dir(tmp / "broker-1", n_commits, **kwargs)
        if base.exists():
            shutil.rmtree(base)
        os.rename(tmp, base)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    manifest["log_dir"] = str(base / "broker-1")
    manifest_path.write_text(json.dumps(manifest, indent=2))
    return str(base / "broker-1"), manifest, False


def offsets_segments(log_dir: str) -> list[str]:
    """Every non-empty ``__consumer_offsets`` segment file of ``log_dir``, sorted."""
    out = []
    for d in sorted(Path(log_dir).glob(f"{OFFSETS_TOPIC}-*")):
        out += [str(f) for f in sorted(d.glob("*.log")) if f.stat().st_size > 0]
    return out


def self_check(log_dir: str, max_batches: int = 500) -> dict:
    """Cross-check the first ``__consumer_offsets`` segment with both decoders.

    The auditor's ``decode_offsets_segment`` must decode every record of the segment without
    an issue or decode error; kafka-python's ``MemoryRecords`` (CRC validated) must yield the
    same key fields, offsets, epochs and timestamps for the first ``max_batches`` batches.
    User partitions' tails must end at the ``replication-offset-checkpoint`` value, and every
    ``__consumer_offsets`` segment's ``.index`` must lead to the same log end offset as a full scan.
    Raises AssertionError on any difference.
    """
    from kafka.record.memory_records import MemoryRecords

    from audit.formats.record_batch import index_start, scan_batches, scan_tail
    from audit.formats.segments import decode_offsets_segment

    seg = offsets_segments(log_dir)[0]
    data = Path(seg).read_bytes()
    import pyarrow as pa

    from audit.formats.segments import RAW_SCHEMA

    # the decoder returns one Arrow batch per step of records (and issue rows in their own)
    rows = pa.Table.from_batches(
        decode_offsets_segment(data, seg, int(Path(seg).parent.name.rsplit("-", 1)[1])), schema=RAW_SCHEMA
    )
    issues = rows.filter(pa.compute.equal(rows.column("kind"), "issue"))
    assert issues.num_rows == 0, f"{seg}: decoder reported issues: {issues.to_pylist()[:3]}"
    assert rows.column("decode_error").null_count == rows.num_rows, "decode errors in generated segment"
    assert all(k == "record" for k in rows.column("kind").unique().to_pylist())
    cols = {
        c: rows.column(c).to_pylist()
        for c in (
            "offset",
            "group_id",
            "topic",
            "partition",
            "committed_offset",
            "leader_epoch",
            "commit_timestamp",
            "value_version",
        )
    }
    recs = MemoryRecords(data)
    i = nb = 0
    while recs.has_next() and nb < max_batches:
        batch = recs.next_batch()
        assert batch.validate_crc(), f"CRC mismatch at batch {nb}"
        for rec in batch:
            key, value = rec.key, rec.value
            (rtype, glen) = struct.unpack_from(">hh", key, 0)
            group = key[4 : 4 + glen].decode()
            (tlen,) = struct.unpack_from(">h", key, 4 + glen)
            topic = key[6 + glen : 6 + glen + tlen].decode()
            (tpart,) = struct.unpack_from(">i", key, 6 + glen + tlen)
            ver, off, ep, mlen = struct.unpack_from(">hqih", value, 0)
            (ts,) = struct.unpack_from(">q", value, 16 + mlen)
            expect = (rec.offset, group, topic, tpart, off, ep, ts, ver)
            got = tuple(
                cols[c][i]
                for c in (
                    "offset",
                    "group_id",
                    "topic",
                    "partition",
                    "committed_offset",
                    "leader_epoch",
                    "commit_timestamp",
                    "value_version",
                )
            )
            assert rtype == 1 and expect == got, f"record {i}: kafka-python {expect} != audit {got}"
            i += 1
        nb += 1
    hw = {}
    for line in (Path(log_dir) / "replication-offset-checkpoint").read_text().splitlines()[2:]:
        t, q, v = line.split()
        hw[f"{t}-{q}"] = int(v)
    tails = 0
    for d in sorted(Path(log_dir).iterdir()):
        if d.is_dir() and not d.name.startswith(OFFSETS_TOPIC):
            scan = scan_batches((d / f"{0:020d}.log").read_bytes())
            assert not scan.issues and scan.end_offset == hw[d.name], f"{d.name}: tail ends at {scan.end_offset}"
            tails += 1
    indexed = 0
    for seg_path in offsets_segments(log_dir):
        buf = Path(seg_path).read_bytes()
        index = Path(seg_path).with_suffix(".index").read_bytes()
        base = int(Path(seg_path).stem)
        # a segment of one batch has no index entry (the broker indexes a batch only after 4096 bytes of others)
        assert index_start(buf, index, base) > 0 or len(buf) <= INDEX_INTERVAL_BYTES or not index.strip(b"\0"), (
            f"{seg_path}: index not used"
        )
        assert scan_tail(buf, index, base).end_offset == scan_batches(buf).end_offset, f"{seg_path}: tail via index"
        indexed += 1
    return {
        "segment": seg,
        "records_decoded": rows.num_rows,
        "records_cross_checked": i,
        "batches_cross_checked": nb,
        "user_partition_tails_checked": tails,
        "indexed_segments_checked": indexed,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, required=True, help="offset commit records")
    ap.add_argument("--records-per-batch", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--check", action="store_true", help="cross-check with both decoders")
    a = ap.parse_args(argv)
    path, manifest, cached = ensure_log_dir(
        a.n, a.cache, records_per_batch=a.records_per_batch, partitions=a.partitions, groups=a.groups, seed=a.seed
    )
    print(
        json.dumps(
            {
                "log_dir": path,
                "cached": cached,
                **{
                    k: manifest[k]
                    for k in (
                        "batches",
                        "group_partitions",
                        "segment_files",
                        "segment_bytes_total",
                        "bad_latest_commits",
                        "generation_seconds",
                    )
                },
            },
            indent=2,
        )
    )
    if a.check:
        print(json.dumps(self_check(path), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
