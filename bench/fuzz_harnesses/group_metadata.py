"""The ``group_metadata_value`` harness: one classic GroupMetadataValue through the group-metadata,
consumer-assignment and KIP-848 member decoders.
"""

from __future__ import annotations

import random
import struct

import pyarrow as pa

from audit.formats.offsets import (
    decode_consumer_assignment,
    decode_consumer_group_assignment_value,
    decode_consumer_group_member_value,
    decode_group_metadata_value,
    decode_member_key,
)
from audit.formats.segments import OWNERS_TYPE

from bench.fuzz_harnesses.common import HarnessViolation, check, make_harness
from bench.fuzz_harnesses.mutators import poke, value_mutator
from bench.fuzz_harnesses.seeds import dedup, real_records


def group_metadata_value(data: bytes) -> None:
    """One GroupMetadataValue through ``decode_group_metadata_value`` (members and their consumer protocol
    assignments, which must fit the ``group_owners`` Arrow column), and the same bytes through
    ``decode_consumer_assignment`` and the KIP-848 member decoders (``decode_member_key``,
    ``decode_consumer_group_member_value``, ``decode_consumer_group_assignment_value``).  Documented exception:
    ``ValueError`` (truncated bytes, unknown version)."""
    for fn in (decode_consumer_assignment, decode_consumer_group_member_value, decode_consumer_group_assignment_value):
        try:
            fn(data)
        except ValueError:
            pass
    member = decode_member_key(data)
    check(member is None or isinstance(member, str), "a member id that is not a string")
    try:
        g = decode_group_metadata_value(data)
    except ValueError:
        return
    check(-(1 << 31) <= g["generation"] < 1 << 31, "generation outside int32")
    check(g["members"] >= 0, "negative member count")
    check(g["members"] == len(g["member_list"]), "member count differs from the members decoded")
    owners = [
        {
            "member_id": m["member_id"],
            "group_instance_id": m["group_instance_id"],
            "client_id": m["client_id"],
            "client_host": m["client_host"],
            "topic": t,
            "partitions": p.tolist(),
        }
        for m in g["member_list"]
        for t, p in (m["assignment"] or ())
    ]
    check(all(len(o["partitions"]) > 0 for o in owners), "an owner entry without partitions")
    try:
        pa.array([owners], OWNERS_TYPE)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        raise HarnessViolation(f"owners do not fit group_owners: {exc}") from exc


def _group_value_edit(rng: random.Random, value: bytes) -> bytes:
    """GroupMetadataValue: version, string lengths (int16 or compact), generation, member count."""
    if len(value) < 2:
        return poke(rng, value)
    op = rng.randrange(4)
    if op == 0:
        return struct.pack(">h", rng.choice((0, 1, 2, 3, 4, 5, -1, 0x7FFF))) + value[2:]
    return poke(rng, value, 2)


def _group_values() -> list[tuple[str, bytes]]:
    vals = [v for k, v, _a in real_records("offsets", 400) if k and k[:2] == b"\x00\x02" and v]
    return dedup([(f"group-{i}", v) for i, v in enumerate(vals)])


GROUP_METADATA_VALUE = make_harness(
    "group_metadata_value", group_metadata_value, _group_values, value_mutator(_group_value_edit)
)
