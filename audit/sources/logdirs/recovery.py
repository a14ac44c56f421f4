"""Recover from replicas the records a ``__consumer_offsets`` partition's chosen replica could not give.

Those records (a skipped batch, an undecodable record) are taken from another replica of that partition,
which holds the same records at the same offsets (followers copy the leader's batches).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .decoders import decode_offsets_files, decode_offsets_latest
from ...spark import broadcast_unless_small, checkpoint_on_first_use
from .files import binary_files, spark_schema
from .inventory import OFFSETS_TOPIC, Inventory

if TYPE_CHECKING:
    from .reader import LogDirTables


def bad_row() -> Column:
    """Select a skipped batch (``kind = 'issue'``) or an undecodable record.

    These are what :func:`recover_from_replicas` fills.
    """
    return (F.col("kind") == "issue") | ((F.col("kind") == "record") & F.col("decode_error").isNotNull())


def _good_row() -> Column:
    """Select a decoded record or control record with its offset."""
    return F.col("kind").isin("record", "control") & F.col("decode_error").isNull() & F.col("offset").isNotNull()


def recover_from_replicas(
    spark: SparkSession, raw: DataFrame, src: LogDirTables, reduce_latest: bool = False
) -> tuple[DataFrame, list[dict]]:
    """Fill what the chosen replica of a ``__consumer_offsets`` partition could not give from another replica.

    ``raw``: the materialised :data:`audit.formats.segments.RAW_SCHEMA` rows (plus ``broker_id``) of the chosen
    replicas.  For every partition with a skipped batch (``kind = 'issue'``) or an undecodable record
    (``decode_error``), another replica of that partition (the one with the highest log end offset, intact ones
    first) is decoded, and its records and control records whose offsets fall in the gap are added: for a skipped
    batch the offsets strictly between the chosen replica's last decoded offset before it and first after it, for
    an undecodable record its own offset; offsets the chosen replica decoded are never replaced.  Replicas of a
    partition hold the same records at the same offsets (followers copy the leader's batches); the issues stay
    reported.  Returns ``(raw with the recovered rows added, [{"partition", "broker_id", "records"}])``; the
    input unchanged and ``[]`` when nothing needs recovering (no job when ``src.bad_rows`` is 0, else one small
    aggregate job).
    """
    if src.bad_rows == 0:  # counted while ``raw`` was materialised: nothing to recover, no job
        return raw, []
    bad = [
        r["source_partition"]
        for r in raw.where(bad_row() & F.col("source_partition").isNotNull())
        .select("source_partition")
        .distinct()
        .collect()
    ]
    if not bad:
        return raw, []
    chosen = {p: v["answered_by_broker"] for p, v in src.offsets_replicas.items()}
    alt, uris = _other_replicas(src, bad, chosen)
    if not uris:
        return raw, []
    gaps = _gaps(spark, raw, _segment_ranges(src.inventory, alt, chosen), alt)
    fill = _fill(spark, raw, gaps, alt, uris, reduce_latest)
    counts = {
        r["source_partition"]: int(r["n"])
        for r in fill.where(F.col("kind") == "record")
        .groupBy("source_partition")
        .agg(F.count("*").alias("n"))
        .collect()
    }
    recovered = [{"partition": int(p), "broker_id": int(alt[p]), "records": counts.get(p, 0)} for p in sorted(alt)]
    return raw.unionByName(fill), recovered


def _other_replicas(src: LogDirTables, bad: list[int], chosen: dict[int, int]) -> tuple[dict[int, int], list[str]]:
    """Find, for each partition of ``bad``, another replica holding records.

    For each partition of ``bad`` with another replica holding records: that replica's broker id (intact ones
    first, then the highest log end offset, then the lowest broker id), and the URIs of those replicas'
    non-empty segments.
    """
    ends = {
        (r["broker_id"], r["partition"]): (r["damage"] is None, r["log_end_offset"] or -1)
        for r in src.replicas.where((F.col("topic") == OFFSETS_TOPIC) & F.col("partition").isin(bad)).collect()
    }
    alt, uris = {}, []
    for p in bad:
        others = [
            r
            for r in src.inventory.replicas
            if r.topic == OFFSETS_TOPIC
            and r.partition == p
            and r.broker_id != chosen.get(p)
            and any(size for _b, _u, size in r.segments)
        ]
        if not others:
            continue
        best = max(others, key=lambda r: (ends.get((r.broker_id, p), (False, -1)), -r.broker_id))
        alt[p] = best.broker_id
        uris += [u for _b, u, size in best.segments if size > 0]
    return alt, uris


def _segment_ranges(inv: Inventory, alt: dict[int, int], chosen: dict[int, int]) -> list[tuple[int, str, int, int]]:
    """Return (partition, segment uri, base offset, next segment's base offset) of the chosen replicas' segments.

    Every segment of the chosen replica of each partition of ``alt`` (the last one's next base: the largest
    long).
    """
    MAX = (1 << 63) - 1
    segs = []
    for r in inv.replicas:
        if r.topic == OFFSETS_TOPIC and r.partition in alt and r.broker_id == chosen.get(r.partition):
            bases = [b for b, _u, _s in r.segments]
            segs += [
                (r.partition, u, b, bases[i + 1] if i + 1 < len(bases) else MAX)
                for i, (b, u, _s) in enumerate(r.segments)
            ]
    return segs


def _gaps(spark: SparkSession, raw: DataFrame, segs: list[tuple[int, str, int, int]], alt: dict[int, int]):
    """source_partition, lo, hi: the open offset ranges the chosen replicas could not give.

    An undecodable record's own offset; for a skipped batch, the offsets between its decoded neighbours in the
    same segment (records carry no file name: a segment holds the offsets from its base to the next segment's
    base, ``segs``: :func:`_segment_ranges`), else the segment's bounds.
    """
    from pyspark.sql.window import Window

    segdf = broadcast_unless_small(spark.createDataFrame(segs, "sp int, seg_file string, base long, next_base long"))
    mine = raw.where(F.col("source_partition").isin(list(alt)))
    by_offset = mine.where(F.col("kind").isin("record", "control") & F.col("offset").isNotNull()).join(
        segdf,
        (F.col("source_partition") == F.col("sp"))
        & (F.col("offset") >= F.col("base"))
        & (F.col("offset") < F.col("next_base")),
    )
    by_file = mine.where(F.col("kind") == "issue").join(segdf, F.col("source_file") == F.col("seg_file"))
    cols: list = [
        "source_partition",
        "seg_file",
        "base",
        "next_base",
        "position",
        "offset",
        "kind",
        _good_row().alias("good"),
        bad_row().alias("bad"),
    ]
    keyed = by_offset.select(*cols).unionByName(by_file.select(*cols))
    order = Window.partitionBy("source_partition", "seg_file").orderBy("position", F.col("offset").asc_nulls_first())
    good_offset = F.when(F.col("good"), F.col("offset"))
    return (
        keyed.withColumn("lo", F.max(good_offset).over(order.rowsBetween(Window.unboundedPreceding, -1)))
        .withColumn("hi", F.min(good_offset).over(order.rowsBetween(1, Window.unboundedFollowing)))
        .where("bad")
        .select(
            "source_partition",
            F.when(F.col("kind") == "record", F.col("offset") - 1)
            .otherwise(F.coalesce("lo", F.col("base") - 1))
            .alias("lo"),
            F.when(F.col("kind") == "record", F.col("offset") + 1)
            .otherwise(F.coalesce("hi", F.col("next_base")))
            .alias("hi"),
        )
    )


def _fill(
    spark: SparkSession, raw: DataFrame, gaps: DataFrame, alt: dict[int, int], uris: list[str], reduce_latest: bool
) -> DataFrame:
    """Take from the other replicas (``uris``, decoded) the records in ``gaps`` that ``raw`` did not decode.

    The records and control records whose offsets fall in ``gaps``, with ``raw``'s columns; materialised.
    """
    from ...formats.segments import RAW_SCHEMA

    decoder = decode_offsets_latest if reduce_latest else decode_offsets_files
    other = (
        binary_files(spark, uris)
        .mapInArrow(decoder, spark_schema(RAW_SCHEMA))
        .where(F.col("kind").isin("record", "control") & F.col("decode_error").isNull())
        .join(
            broadcast_unless_small(
                spark.createDataFrame([(int(p), int(b)) for p, b in alt.items()], "source_partition int, broker_id int")
            ),
            "source_partition",
        )
    )
    taken = raw.where(_good_row()).select("source_partition", "offset")
    return checkpoint_on_first_use(
        other.join(
            gaps,
            (other["source_partition"] == gaps["source_partition"])
            & (other["offset"] > gaps["lo"])
            & (other["offset"] < gaps["hi"]),
            "left_semi",
        )
        .join(taken, ["source_partition", "offset"], "left_anti")
        .dropDuplicates(["source_partition", "offset", "kind"])
        .select(*raw.columns)
    )
