"""The KRaft ``__cluster_metadata`` harnesses: ``metadata_value`` (one metadata record value) and
``metadata_segment`` (a segment as Spark feeds it), with the metadata value mutator.
"""

from __future__ import annotations

import random

import pyarrow as pa

from audit.formats.metadata_log import METADATA_ROW_FIELDS, MetadataDecodeError, decode_metadata_value

from bench.fuzz_harnesses.common import METADATA_PATH, HarnessViolation, check, make_harness
from bench.fuzz_harnesses.encoding import read_uvarint, uvarint
from bench.fuzz_harnesses.mutators import extreme_varint, mutate_offsets_key, poke, segment_mutator, value_mutator
from bench.fuzz_harnesses.seeds import metadata_segments, real_records


_META_SCHEMA = pa.schema(METADATA_ROW_FIELDS)


def metadata_value(data: bytes) -> None:
    """One KRaft metadata record value through ``decode_metadata_value``; a decoded row must fit the
    Arrow columns the audit puts it in (``METADATA_ROW_FIELDS``).  Documented exception:
    ``MetadataDecodeError``."""
    try:
        row = decode_metadata_value(data)
    except MetadataDecodeError:
        return
    check(set(row) == set(_META_SCHEMA.names), "a metadata row with other keys than METADATA_ROW_FIELDS")
    try:
        pa.RecordBatch.from_pylist([row], schema=_META_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise HarnessViolation(f"decoded metadata row does not fit its Arrow columns: {exc}") from None


def metadata_segment(data: bytes) -> None:
    """A ``__cluster_metadata`` segment through ``audit.sources.logdirs.decode_metadata_files`` as
    Spark feeds it (``binaryFile`` content): batches, records and every metadata record value.
    Documented exceptions: none."""
    from audit.sources.logdirs import decode_metadata_files, metadata_schema

    rb = pa.RecordBatch.from_pydict(
        {"path": [METADATA_PATH], "content": [data]},
        schema=pa.schema([("path", pa.string()), ("content", pa.binary())]),
    )
    table = pa.Table.from_batches(list(decode_metadata_files(iter([rb]))), schema=metadata_schema())
    for row in (
        table.filter(pa.compute.is_valid(table.column("issue_reason")))
        .select(["source_file", "issue_position"])
        .to_pylist()
    ):
        check(row["source_file"] == METADATA_PATH, "a metadata issue row without its file")
        check(
            row["issue_position"] is not None and 0 <= row["issue_position"] <= len(data),
            "a metadata issue row without a byte position inside the file",
        )


_META_KEYS = (0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 17, 20, 21, 27, 28, 29, 30, 6, 13, 16, 0x7FFF, 0x8000, 1 << 28)


def mutate_metadata_value(rng: random.Random, value: bytes | None) -> bytes | None:
    """A KRaft metadata record value with one structural edit: frame version, api key or version at an
    extreme, a tagged-field count/size or array length pushed to an extreme varint."""
    if value is None:
        return bytes([1, 2, 0]) + b"\x02t" + bytes(16) + b"\x00"
    fr = read_uvarint(value, 0, 5)
    ak = read_uvarint(value, fr[1], 5) if fr else None
    ve = read_uvarint(value, ak[1], 5) if ak else None
    op = rng.randrange(6)
    if ve is not None and op == 0:
        return uvarint(rng.choice((1, 1, 1, 0, 2, 127, 128))) + value[fr[1] :]
    if ve is not None and op == 1:
        return value[: fr[1]] + uvarint(rng.choice(_META_KEYS)) + value[ak[1] :]
    if ve is not None and op == 2:
        return value[: ak[1]] + uvarint(rng.choice((0, 1, 2, 3, 4, 5, 0x7FFF, 0x8000))) + value[ve[1] :]
    if op == 3:
        start = ve[1] if ve else 0
        pos = rng.randrange(start, len(value) + 1)
        r = read_uvarint(value, pos, 5)
        end = r[1] if r else pos
        return value[:pos] + extreme_varint(rng) + value[end:]
    if op == 4:
        return value[: rng.randrange(len(value) + 1)]
    return poke(rng, value, ve[1] if ve else 0)


def metadata_kv_mutator(rng, key, value):
    """(key, value) of a ``__cluster_metadata`` record, its value (mostly) edited structurally."""
    if rng.random() < 0.05:
        return mutate_offsets_key(rng, key), value
    return key, mutate_metadata_value(rng, value)


def _metadata_values() -> list[tuple[str, bytes]]:
    out, seen = [], set()
    for _k, v, attrs in real_records("metadata", 5000):
        if v is None or attrs & 0x20:
            continue
        sig = v[:3]
        if sig in seen:
            continue
        seen.add(sig)
        out.append((f"api{v[1]}-v{v[2]}-{len(out)}", v))
    return out


METADATA_VALUE = make_harness("metadata_value", metadata_value, _metadata_values, value_mutator(mutate_metadata_value))
METADATA_SEGMENT = make_harness(
    "metadata_segment", metadata_segment, lambda: metadata_segments(48 << 10), segment_mutator(metadata_kv_mutator)
)
