"""Give the ``mapInArrow`` readers file access.

Provided: the path rows a reader takes (:func:`binary_files`: Python workers open local files themselves,
other URIs go through Spark's ``binaryFile``), the bytes of each on the executor (:func:`file_contents`), and
the Arrow -> Spark schema of their output.
"""

from __future__ import annotations

import os

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...io.fs import is_local
from ...spark import default_parallelism, distribute, small_settings

UNREADABLE, UNREADABLE_DETAIL = "unreadable_file", "the file could not be opened on the executor"


def file_contents(rb):
    """(path, bytes-like or None) per row of a ``path[, content]`` Arrow batch.

    With a ``content`` column (Spark's ``binaryFile``, for Hadoop URIs) its buffer is used, as an
    unsigned byte view (Arrow exports signed bytes, which would read a byte >= 0x80 negative);
    otherwise the local file is memory-mapped, so segment bytes never pass through the JVM.
    None: the file could not be opened on the executor (callers report it as ``unreadable_file``).
    """
    from audit.formats.record_batch import byte_view

    paths = rb.column("path").to_pylist()
    if "content" in rb.schema.names:
        contents = rb.column("content")
        for i, path in enumerate(paths):
            buf = contents[i].as_buffer()
            yield path, (byte_view(buf) if buf is not None else b"")
        return
    for path in paths:
        try:
            data = mmap_local(path)
        except OSError:
            data = None
        yield path, data


def mmap_local(path: str):
    """Return a local file's bytes, memory-mapped (only the pages read are loaded); ``b""`` when empty.

    Raises
    ------
    OSError
        When the file cannot be opened.
    """
    import mmap

    from audit.io.fs import local_path

    with open(local_path(path), "rb") as fh:
        if not os.fstat(fh.fileno()).st_size:
            return b""
        return memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))


def spark_schema(schema: pa.Schema) -> T.StructType:
    """Arrow schema -> Spark StructType (for ``mapInArrow``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _python_reads(uris: list[str]) -> bool:
    return os.environ.get("KOA_READER", "auto") != "spark" and all(is_local(u) for u in uris)


def balanced_slices(sizes: list[int], slices: int) -> list[list[int]]:
    """Deal the indexes of ``sizes`` (bytes, >= 0) into at most ``slices`` non-empty groups of about equal total size.

    The groups come heaviest first.

    Largest first, each to the group with the fewest bytes so far (Graham's LPT rule: the heaviest group is
    within 4/3 of the best possible); within a group the indexes keep their order.  Spark starts a stage's
    tasks in partition order, so the heaviest slices start first and the last ones to start are the
    lightest.  ``__consumer_offsets`` partitions are uneven by nature (a group's commits all go to one
    partition), and slices of equal file counts were not: 50 segments of 15-37 MB in 8 slices of 6-8
    files took 1.1-1.6 s each.
    """
    import heapq

    slices = max(1, min(slices, len(sizes)))
    heap = [(0, g) for g in range(slices)]
    groups: list[list[int]] = [[] for _ in range(slices)]
    totals = [0] * slices
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        total, g = heapq.heappop(heap)
        groups[g].append(i)
        totals[g] = total + sizes[i]
        heapq.heappush(heap, (totals[g], g))
    order = sorted((g for g in range(slices) if groups[g]), key=lambda g: (-totals[g], g))
    return [sorted(groups[g]) for g in order]


def binary_files(spark: SparkSession, uris: list[str], sizes: list[int] | None = None) -> DataFrame:
    """``path`` (+ ``content`` for Hadoop URIs) rows, one per file, for the ``mapInArrow`` readers.

    Local files are read by the Python workers themselves (:func:`file_contents`): handing file
    bytes from the JVM to Python through Arrow costs more than decoding them.  Other URIs
    use Spark's ``binaryFile`` source, so any Hadoop filesystem the cluster has works
    (``KOA_READER=spark`` forces it for local files too).
    ``sizes`` (bytes, one per URI): local files are sliced by :func:`balanced_slices`, each slice one
    partition, heaviest first; without it, in their order, slices of about equal counts.
    """
    if _python_reads(uris):
        # one slice per core for a small input (its files take milliseconds each), else four (uneven costs)
        slices = max(1, min(len(uris), (1 if small_settings(spark) else 4) * default_parallelism(spark)))
        if sizes is None:
            return distribute(spark, [(u,) for u in uris], "path string", slices)
        # one list of paths per slice: parallelize() batches a list's elements by len // slices, so the last
        # slice of 50 paths in 8 took 8 of them; exploded on the JVM side, partitions unchanged
        groups = [([uris[i] for i in g],) for g in balanced_slices(sizes, slices)]
        return distribute(spark, groups, "paths array<string>", len(groups)).select(F.explode("paths").alias("path"))
    return spark.read.format("binaryFile").load(uris).select("path", "content")
