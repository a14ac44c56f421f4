"""What every harness shares: where the seeds and saved inputs live, the paths the harnesses report their
input under, :class:`HarnessViolation` and the contract checks several decoders' harnesses make (batch scans,
``RAW_SCHEMA`` issue rows, ``read_small_files`` rows), and :class:`Harness`, one registry entry.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from audit.formats.record_batch import INT64_MAX, BatchScan
from audit.formats.segments import RAW_SCHEMA


REPO = Path(__file__).resolve().parents[2]
#: The read-only sample Kafka bytes (``KOA_SHARED_DIR`` overrides the ``../shared`` beside the checkout).
SHARED_DATA = Path(os.environ.get("KOA_SHARED_DIR", REPO.parent / "shared")) / "data"
#: Committed seeds (small) and regression inputs, one directory per harness.
SEED_DIR = REPO / "tests/data/fuzz-seeds"
REGRESSION_DIR = REPO / "tests/data/fuzz-regressions"

#: The path the offsets harnesses report their input under (issue rows must carry it).
SEGMENT_PATH = "/fuzz/broker-1/__consumer_offsets-0/00000000000000000000.log"
METADATA_PATH = "/fuzz/broker-1/__cluster_metadata-0/00000000000000000000.log"
#: The real segment (and its ``.index``) the ``index_file`` harness reads with a fuzzed index.
INDEX_SEGMENT = "real/kraft-4.x/kafka-logs/__consumer_offsets-15/00000000000000000000"


class HarnessViolation(AssertionError):
    """A decoder returned normally but broke its documented contract (the message says how)."""


def check(cond: bool, what: str) -> None:
    if not cond:
        raise HarnessViolation(what)


def check_scan(scan: BatchScan, data: bytes, start: int = 0) -> None:
    n = len(data)
    k = len(scan.position)
    for name in (
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "record_count",
        "crc_ok",
        "magic",
    ):
        check(len(getattr(scan, name)) == k, f"BatchScan.{name} has {len(getattr(scan, name))} rows, not {k}")
    pos = scan.position.tolist()
    check(all(start <= p < n for p in pos), "a batch position outside the bytes read")
    check(all(a < b for a, b in zip(pos, pos[1:])), "batch positions not increasing")
    check(0 <= scan.bytes_read <= n, f"bytes_read {scan.bytes_read} outside 0..{n}")
    for iss in scan.issues:
        check(isinstance(iss.reason, str) and iss.reason, "an issue without a reason")
        check(0 <= iss.position <= n, f"issue {iss.reason} at byte {iss.position}, outside 0..{n}")
    e = scan.end_offset
    check(-INT64_MAX - 1 <= e <= INT64_MAX, f"end offset {e} does not fit an int64")


def small_files(path: str, data: bytes) -> pa.Table:
    """``audit.sources.logdirs.read_small_files`` on one file, fed as Spark's ``binaryFile`` feeds it."""
    from audit.sources.logdirs import SMALL_SCHEMA, read_small_files

    rb = pa.RecordBatch.from_pydict(
        {"path": [path], "content": [data]}, schema=pa.schema([("path", pa.string()), ("content", pa.binary())])
    )
    out = list(read_small_files(iter([rb])))
    table = pa.Table.from_batches(out, schema=SMALL_SCHEMA)
    issues = table.filter(pa.compute.is_valid(table.column("issue_reason"))).to_pylist()
    for row in issues:
        check(row["path"] == path, "a small-file issue row without its file")
    return table


def check_raw(batches: list, data: bytes, path: str) -> pa.Table:
    for b in batches:
        check(b.schema.equals(RAW_SCHEMA), "a decoded batch not in RAW_SCHEMA")
    table = pa.Table.from_batches(batches, schema=RAW_SCHEMA)
    issues = table.filter(pa.compute.equal(table.column("kind"), "issue"))
    for row in issues.select(["source_file", "position", "decode_error"]).to_pylist():
        check(row["source_file"] == path, "an issue row without its file")
        check(
            row["position"] is not None and 0 <= row["position"] <= len(data),
            f"issue {row['decode_error']} without a byte position inside the file: {row['position']}",
        )
        check(bool(row["decode_error"]), "an issue row without a reason")
    return table


KV_SCHEMA = pa.schema(
    [
        ("source_partition", pa.int32()),
        ("source_offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
    ]
)


def require(table: pa.Table, mask, what: str) -> None:
    """``mask`` (one boolean per row of ``table``; null counts as false) must hold on every row: else raise for
    the first row where it does not."""
    m = pc.fill_null(mask, False)
    if len(m) and not pc.all(m).as_py():
        i = int(np.flatnonzero(~np.asarray(m.to_numpy(zero_copy_only=False)))[0])
        raise HarnessViolation(f"{what}: row {i} {table.slice(i, 1).to_pylist()[0]}")


@dataclass
class Harness:
    """One fuzz target: ``fn(data)``, a mutator, and where its seeds come from."""

    name: str
    fn: Callable[[bytes], None]
    seeds: Callable[[], list[tuple[str, bytes]]]
    mutate: Callable | None = None
    #: the first sentence of ``fn``'s docstring (``python -m bench.fuzz --list``)
    doc: str = field(default="")


def make_harness(name, fn, seeds, mutate) -> Harness:
    first = re.split(r"\.(?:\s|$)", " ".join((fn.__doc__ or "").split()), maxsplit=1)[0]
    return Harness(name, fn, seeds, mutate, first)
