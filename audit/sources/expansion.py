"""KIP-253 input: where each old partition's log stood when its topic's partition count grew, from log dirs.

The expansions come from the KRaft metadata log (``sql/partition_expansions.sql`` over ``leader_timeline``);
the offset at that time from the authoritative replica's segments and indexes, answered as Kafka's
ListOffsets(timestamp) would (:func:`audit.formats.time_index.offset_for_time`), in Spark executors.  Only
the old partitions of expansions that some audited group consumed on a new partition of are read.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..spark import default_parallelism, distribute


__all__ = [
    "OFFSETS_AT_SCHEMA",
    "expansion_offsets",
]

#: one row per (old partition, expansion): where its log stood at ``expanded_at``
OFFSETS_AT_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("expanded_at_ms", pa.int64()),
        ("new_partitions", pa.list_(pa.int32())),
        ("offset_at_expansion", pa.int64()),
        ("offset_from", pa.string()),
        ("issue", pa.string()),
    ]
)


def _offsets_at(batches):
    """Find each expanded topic's offset at its expansion time (mapInArrow) into :data:`OFFSETS_AT_SCHEMA` rows.

    The input rows are (topic, partition, expanded_at_ms, new_partitions array<int>, log_end_offset, bases
    array<long>, uris array<string>).  ``offset_from``: ``time_index`` (the first record at or after the time),
    ``log_end`` (no record that late: the log end offset), or null with ``issue`` when the segments could not be
    read here (not a local file, or unreadable).
    """
    from audit.formats.time_index import offset_for_time
    from audit.io.fs import is_local
    from audit.sources.logdirs import mmap_local

    def opener(uri):
        def load():
            out = []
            for suffix in (".log", ".timeindex", ".index"):
                try:
                    out.append(mmap_local(uri[: -len(".log")] + suffix))
                except OSError:
                    if suffix == ".log":
                        raise
                    out.append(None)
            return tuple(out)

        return load

    for rb in batches:
        cols = {n: rb.column(n).to_pylist() for n in rb.schema.names}
        out = {n: [] for n in OFFSETS_AT_SCHEMA.names}
        for i in range(rb.num_rows):
            uris, bases = cols["uris"][i] or [], cols["bases"][i] or []
            offset, source, issue = None, None, None
            if not uris:
                offset, source = cols["log_end_offset"][i], "log_end"
            elif not all(is_local(u) for u in uris):
                issue = "segments are not local files: the offset at the expansion is not computed"
            else:
                try:
                    hit = offset_for_time(zip(bases, [opener(u) for u in uris]), cols["expanded_at_ms"][i])
                    offset, source = (hit[0], "time_index") if hit else (cols["log_end_offset"][i], "log_end")
                except OSError as exc:
                    issue = f"unreadable segment: {exc}"
            for n in ("topic", "partition", "expanded_at_ms", "new_partitions"):
                out[n].append(cols[n][i])
            out["offset_at_expansion"].append(offset)
            out["offset_from"].append(source)
            out["issue"].append(issue)
        yield pa.RecordBatch.from_pydict(out, schema=OFFSETS_AT_SCHEMA)


def expansion_offsets(
    spark: SparkSession, leader_timeline: DataFrame | None, bounds: DataFrame, replicas, commits: DataFrame
) -> DataFrame | None:
    """Build the ``expansion_offsets`` view of ``sql/finding_partition_expansion_order.sql``.

    ``leader_timeline``: ``sql/leader_timeline.sql`` rows (None without a metadata log: returns None);
    ``bounds``: the audit's bounds (``answered_by_broker``, ``log_end_offset``); ``replicas``: the log dirs'
    :class:`audit.sources.logdirs.Replica` list; ``commits``: live commits (``--mode history``: every one).
    The driver collects one row per (expansion, old partition) of those topics: bounded by their partition count.

    Returns
    -------
    DataFrame or None
        Topic string, partition int (an old partition), expanded_at timestamp, new_partitions array<int>,
        offset_at_expansion bigint (null when it could not be read), offset_from string, issue string; None when
        no audited group committed past offset 0 on a partition added by an expansion.
    """
    if leader_timeline is None:
        return None
    from ..queries import load_sql
    from .logdirs import spark_schema

    leader_timeline.createOrReplaceTempView("leader_timeline")
    exp = spark.sql(load_sql("partition_expansions"))
    consumed_new = commits.where(F.col("committed_offset") > 0).select("topic", "partition").distinct()
    used = (
        exp.join(consumed_new, "topic")
        .where(F.array_contains("new_partitions", F.col("partition")))
        .select("topic", "expanded_at", "new_partitions", "old_partitions")
        .distinct()
    )
    reqs = (
        used.select("topic", "expanded_at", "new_partitions", F.explode("old_partitions").alias("partition"))
        .join(
            bounds.select("topic", "partition", "answered_by_broker", "log_end_offset"), ["topic", "partition"], "left"
        )
        .select(
            "topic",
            "partition",
            "new_partitions",
            "answered_by_broker",
            "log_end_offset",
            F.unix_millis("expanded_at").alias("expanded_at_ms"),
        )
        .collect()
    )
    if not reqs:
        return None
    segs = {(r.broker_id, r.topic, r.partition): r.segments for r in replicas}
    rows = []
    for r in reqs:
        seg = sorted(
            (b, u) for b, u, size in segs.get((r["answered_by_broker"], r["topic"], r["partition"]), []) if size > 0
        )
        rows.append(
            (
                r["topic"],
                r["partition"],
                r["expanded_at_ms"],
                r["new_partitions"],
                r["log_end_offset"],
                [b for b, _ in seg],
                [u for _, u in seg],
            )
        )
    tasks = distribute(
        spark,
        rows,
        "topic string, partition int, expanded_at_ms long, new_partitions array<int>, log_end_offset long, "
        "bases array<long>, uris array<string>",
        max(1, min(len(rows), 2 * default_parallelism(spark))),
    )
    # the metadata log's batch timestamps are whole milliseconds: the round trip is exact
    return (
        tasks.mapInArrow(_offsets_at, spark_schema(OFFSETS_AT_SCHEMA)).select(
            "topic",
            "partition",
            F.timestamp_millis("expanded_at_ms").alias("expanded_at"),
            "new_partitions",
            "offset_at_expansion",
            "offset_from",
            "issue",
        )
    ).localCheckpoint()
