"""Read and parse the small files of each replica in one ``mapInArrow`` pass, and build the per-replica tables.

The small files: the last non-empty segment's tail (its log end offset), the leader-epoch cache
(``leader-epoch-checkpoint``), ``partition.metadata`` (the topic id) and the root offset checkpoints (log
start offsets, high watermarks); and the per-replica tables built from them.

Layouts: ``LeaderEpochCheckpointFile``, ``OffsetCheckpointFile``, ``PartitionMetadataFile``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ...formats.checkpoints import SEGMENT_FILE, checkpoint_header_problem, parse_partition_metadata
from ...spark import broadcast_unless_small, compact
from .files import UNREADABLE, UNREADABLE_DETAIL, binary_files, file_contents, mmap_local, spark_schema
from .inventory import EPOCH_CHECKPOINT, PARTITION_METADATA, Inventory

#: One row per fact read from a small partition-state file (see :func:`read_small_files`).
SMALL_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("file_kind", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("leader_epoch", pa.int32()),
        ("value", pa.int64()),
        ("issue_reason", pa.string()),
        ("issue_position", pa.int64()),
        ("issue_detail", pa.string()),
        ("topic_id", pa.string()),
    ]
)
TAIL = "tail"


def _segment_base(name: str) -> int:
    """Return the base offset of a segment from its file name (``00000000000000000042.log`` -> 42); 0 if not one."""
    m = SEGMENT_FILE.match(name)
    return int(m.group("base")) if m else 0


def _sibling_index(path: str):
    """Return the ``.index`` next to a local ``.log`` segment, memory-mapped.

    An active segment's index is preallocated, often 10 MiB, and only a few of its pages are read.

    Returns
    -------
    mmap or None
        None when it is missing, empty or unreadable.
    """
    try:
        return mmap_local(path[: -len(".log")] + ".index") or None
    except OSError:
        return None


def _checkpoint_entries(text: str):
    """Entry lines of a Kafka checkpoint file (after the version and count lines), split on blanks."""
    for line in text.split("\n")[2:]:
        if line.strip():
            yield line, line.split()


def _as_int(s: str | None, bits: int):
    try:
        v = int(s) if s is not None else None
    except ValueError:
        return None
    return v if v is not None and -(1 << (bits - 1)) <= v < (1 << (bits - 1)) else None


def read_small_files(batches):
    """mapInArrow: the small files of every partition replica -> :data:`SMALL_SCHEMA` rows.

    By file name: a segment (``*.log``, the replica's last non-empty one) gives one ``tail``
    row (``value`` = log end offset after its last complete, CRC-valid batch) plus one per
    issue of the batches read: only the batches after the segment's newest ``.index`` entry
    are read when the index is there (``LogSegment.readNextOffset``,
    :func:`audit.formats.record_batch.scan_tail`), so the cost does not grow with segment
    size; ``leader-epoch-checkpoint`` one row per entry (``leader_epoch``, ``value`` = start
    offset; a line that does not parse is an issue ``bad_checkpoint_line``); root offset
    checkpoints one row per entry (``topic``, ``partition``, ``value``).
    Layouts: ``LeaderEpochCheckpointFile``, ``OffsetCheckpointFile``.
    """
    names = SMALL_SCHEMA.names
    for rb in batches:
        rows = {n: [] for n in names}
        hadoop = "content" in rb.schema.names

        def add(**kw):
            for n in names:
                rows[n].append(kw.get(n))

        for path, data in file_contents(rb):
            name = path.rsplit("/", 1)[-1]
            if name.endswith(".log"):
                _add_tail(add, path, name, data, hadoop)
            elif data is None:
                add(path=path, file_kind=name, issue_reason=UNREADABLE, issue_detail=UNREADABLE_DETAIL)
            elif name == PARTITION_METADATA:
                _add_partition_metadata(add, path, name, bytes(data).decode("utf-8", "replace"))
            else:
                _add_checkpoint(add, path, name, bytes(data).decode("utf-8", "replace"))
        yield pa.RecordBatch.from_pydict(rows, schema=SMALL_SCHEMA)


def _add_tail(add: Callable[..., None], path: str, name: str, data, hadoop: bool) -> None:
    """Add the ``tail`` rows of a replica's last non-empty segment (``data`` None: unreadable).

    The rows give its log end offset and newest leader epoch, on one row per issue of the batches read (one row
    when there is none).
    """
    from audit.formats.record_batch import ReadIssue, scan_tail

    index = None if data is None or hadoop else _sibling_index(path)
    scan = scan_tail(data if data is not None else b"", index, _segment_base(name))
    if data is None:
        scan.issues.append(ReadIssue(UNREADABLE, 0, UNREADABLE_DETAIL))
    # the newest leader epoch its batches carry (-1: legacy message sets, which have none)
    ok = scan.crc_ok
    epoch = int(scan.partition_leader_epoch[ok].max()) if ok.any() else None
    fact = dict(path=path, file_kind=TAIL, value=scan.end_offset, leader_epoch=epoch)
    issues: list[ReadIssue | None] = list(scan.issues) or [None]
    for iss in issues:
        add(
            **fact,
            **({"issue_reason": iss.reason, "issue_position": iss.position, "issue_detail": iss.detail} if iss else {}),
        )


def _add_partition_metadata(add: Callable[..., None], path: str, name: str, text: str) -> None:
    """Add the row of a ``partition.metadata`` file: its topic id, or a ``bad_partition_metadata`` issue."""
    topic_id, problem = parse_partition_metadata(text)
    add(
        path=path,
        file_kind=name,
        topic_id=topic_id,
        **({"issue_reason": "bad_partition_metadata", "issue_position": 0, "issue_detail": problem} if problem else {}),
    )


def _add_checkpoint(add: Callable[..., None], path: str, name: str, text: str) -> None:
    """Add the rows of a checkpoint file.

    A ``bad_checkpoint_header`` issue when its header is wrong, then one row per entry
    (``leader-epoch-checkpoint``: leader epoch and start offset; a root offset checkpoint: topic, partition and
    offset), a line that does not parse a ``bad_checkpoint_line`` issue.
    """
    problem = checkpoint_header_problem(text)
    if problem:
        add(
            path=path,
            file_kind=name,
            issue_reason="bad_checkpoint_header",
            issue_position=0,
            issue_detail=f"{problem}; the broker could not read this file",
        )
    for line, parts in _checkpoint_entries(text):
        if name == EPOCH_CHECKPOINT:
            epoch = _as_int(parts[0] if parts else None, 32)
            start = _as_int(parts[1] if len(parts) > 1 else None, 64)
            ok = epoch is not None and start is not None and len(parts) == 2
            if ok:
                add(path=path, file_kind=name, leader_epoch=epoch, value=start)
            else:
                add(path=path, file_kind=name, issue_reason="bad_checkpoint_line", issue_detail=line[:200])
        else:
            partition = _as_int(parts[1] if len(parts) > 1 else None, 32)
            value = _as_int(parts[2] if len(parts) > 2 else None, 64)
            if partition is None or value is None or len(parts) != 3:
                add(path=path, file_kind=name, issue_reason="bad_checkpoint_line", issue_detail=line[:200])
            else:
                add(path=path, file_kind=name, topic=parts[0], partition=partition, value=value)


class RootCheckpoint(NamedTuple):
    """A root offset checkpoint of a log dir that the replicas table reads."""

    broker_id: int
    kind: str
    path: str


@dataclass
class SmallFileTables:
    """The small files' rows (:data:`SMALL_SCHEMA`, materialised) and the per-replica tables derived from them."""

    #: every small file's rows
    small: DataFrame
    #: path (a replica's tail segment), tail_end, tail_epoch
    tails: DataFrame
    #: the ``leader-epoch-checkpoint`` rows, and those of them that are issues
    epoch_rows: DataFrame
    bad_cache_lines: DataFrame
    #: broker_id, topic, partition, path, leader_epoch, start_offset: every replica's leader-epoch cache
    rep_cache: DataFrame
    #: broker_id, topic, partition, ckpt_log_start, high_watermark (the root checkpoints)
    checkpoints: DataFrame
    #: broker_id, topic, partition, max_epoch
    max_epoch: DataFrame
    #: epoch_checkpoint, cache_issue (the first issue reason of a leader-epoch cache)
    cache_issues: DataFrame
    #: partition_metadata, topic_id
    topic_ids: DataFrame


def _root_checkpoints(inv: Inventory) -> list[RootCheckpoint]:
    return [
        RootCheckpoint(ld.broker_id, name, uri)
        for ld in inv.log_dirs
        for name, uri in ld.root_checkpoints.items()
        if name in ("replication-offset-checkpoint", "log-start-offset-checkpoint")
    ]


def _read_small(spark: SparkSession, inv: Inventory, tail_paths: list[str | None], root_rows: list[RootCheckpoint]):
    """Read every small partition-state file in one pass, materialised.

    The files: replicas' last segments (``tail_paths``: log end offsets), leader-epoch caches and
    ``partition.metadata``, and the root checkpoints (log start offsets, high watermarks).
    """
    tails_uris = sorted({path for path in tail_paths if path})
    ckpt_uris = sorted(
        {r.epoch_checkpoint for r in inv.replicas if r.epoch_checkpoint}
        | {r.partition_metadata for r in inv.replicas if r.partition_metadata}
    )
    small_uris = tails_uris + ckpt_uris + sorted({r.path for r in root_rows})
    small = (
        binary_files(spark, small_uris).mapInArrow(read_small_files, spark_schema(SMALL_SCHEMA))
        if small_uris
        else spark.createDataFrame([], spark_schema(SMALL_SCHEMA))
    ).localCheckpoint()  # eager: compact() then reads it in one task, which must not also read the files
    return compact(small)


def _checkpoint_table(spark: SparkSession, small: DataFrame, root_rows: list[RootCheckpoint]) -> DataFrame:
    """broker_id, topic, partition, ckpt_log_start, high_watermark from the root checkpoints' entries."""
    if not root_rows:
        return spark.createDataFrame(
            [], "broker_id int, topic string, partition int, ckpt_log_start long, high_watermark long"
        )
    roots_df = spark.createDataFrame(root_rows, "broker_id int, kind string, path string")
    return (
        small.where(F.col("issue_reason").isNull())
        .join(broadcast_unless_small(roots_df), "path")
        .groupBy("broker_id", "topic", "partition")
        .agg(
            F.max(F.when(F.col("kind") == "log-start-offset-checkpoint", F.col("value"))).alias("ckpt_log_start"),
            F.max(F.when(F.col("kind") == "replication-offset-checkpoint", F.col("value"))).alias("high_watermark"),
        )
    )


def read_small_file_tables(
    spark: SparkSession, inv: Inventory, replicas0: DataFrame, tail_paths: list[str | None]
) -> SmallFileTables:
    """Read the small files of ``inv`` (one Spark job) and derive the per-replica tables from them.

    ``replicas0``: one row per replica (broker_id, topic, partition, epoch_checkpoint ...); ``tail_paths``: each
    replica's last non-empty segment (None: it holds none).
    """
    root_rows = _root_checkpoints(inv)
    small = _read_small(spark, inv, tail_paths, root_rows)
    tail_df = small.where(F.col("file_kind") == TAIL)
    tails = tail_df.groupBy("path").agg(F.max("value").alias("tail_end"), F.max("leader_epoch").alias("tail_epoch"))

    epoch_rows = small.where(F.col("file_kind") == EPOCH_CHECKPOINT)
    bad_cache_lines = epoch_rows.where(F.col("issue_reason").isNotNull())
    cache = epoch_rows.where(F.col("issue_reason").isNull()).select(
        "path", "leader_epoch", F.col("value").alias("start_offset")
    )
    rep_cache = replicas0.select("broker_id", "topic", "partition", F.col("epoch_checkpoint").alias("path")).join(
        cache, "path"
    )
    ck = _checkpoint_table(spark, small, root_rows)
    max_epoch = rep_cache.groupBy("broker_id", "topic", "partition").agg(F.max("leader_epoch").alias("max_epoch"))
    cache_issues = (
        epoch_rows.where(F.col("issue_reason").isNotNull())
        .groupBy("path")
        .agg(F.min("issue_reason").alias("cache_issue"))
        .withColumnRenamed("path", "epoch_checkpoint")
    )
    topic_ids = small.where((F.col("file_kind") == PARTITION_METADATA) & F.col("topic_id").isNotNull()).select(
        F.col("path").alias("partition_metadata"), "topic_id"
    )
    return SmallFileTables(small, tails, epoch_rows, bad_cache_lines, rep_cache, ck, max_epoch, cache_issues, topic_ids)


def log_end_offsets(small: DataFrame, tail_of: dict[int, tuple[str | None, int | None]]) -> dict[int, int | None]:
    """Return broker id -> log end offset (offsets) of the replicas of one partition.

    The replicas are given as broker id -> (its last non-empty segment, its last segment's base offset; the
    replicas table's ``tail_path`` and ``last_segment_base``).  The log end offset is the end of that segment's
    last batch, read by :func:`read_small_files` into ``small``, or the base offset when higher (an empty active
    segment), as ``read_log_dirs``'s ``log_end_offset`` column gives it; None when neither is known.  One small
    job over the materialised ``small`` (a row per replica: bounded by the brokers, not the data).
    """
    paths = sorted({t for t, _b in tail_of.values() if t})
    ends = (
        {
            row["path"]: row["tail_end"]
            for row in small.where((F.col("file_kind") == TAIL) & F.col("path").isin(paths))
            .groupBy("path")
            .agg(F.max("value").alias("tail_end"))
            .collect()
        }
        if paths
        else {}
    )
    out = {}
    for broker, (tail, base) in tail_of.items():
        known = [v for v in (ends.get(tail), base) if v is not None]
        out[broker] = max(known) if known else None
    return out
