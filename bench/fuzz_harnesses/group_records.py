"""The ``group_record_value`` harness: KIP-848, share and streams group member, assignment and
topology values through their single-value decoders and ``decode_offsets_rows``, with their seeds (streams
group values built per Kafka's schema files) and mutator.
"""

from __future__ import annotations

import random
import struct

import pyarrow as pa

from audit.formats.offsets import (
    AssignmentLimitError,
    decode_consumer_group_assignment_value,
    decode_consumer_group_member_value,
    decode_share_group_assignment_value,
    decode_share_group_member_value,
    decode_streams_group_assignment_value,
    decode_streams_group_member_value,
    decode_streams_group_topology_value,
)
from audit.formats.segments import MAX_OWNER_ENTRIES, RAW_SCHEMA, decode_offsets_rows

from bench.fuzz_harnesses.common import KV_SCHEMA, HarnessViolation, check, make_harness
from bench.fuzz_harnesses.encoding import uvarint
from bench.fuzz_harnesses.mutators import poke, value_mutator
from bench.fuzz_harnesses.seeds import dedup, real_records


#: The ``__consumer_offsets`` member and topology record types of KIP-848 (5, 8), share (10, 14) and streams
#: groups (19, 22, 23) the ``group_record_value`` harness picks from (its input's first byte, modulo 7).
GROUP_RECORD_TYPES = (5, 8, 10, 14, 19, 22, 23)
_GROUP_KEY_GROUP, _GROUP_KEY_MEMBER = "fuzz-group", "fuzz-member"


def split_group_record(data: bytes) -> tuple[int, bytes]:
    """``group_record_value`` input layout: byte 0 picks the record type (:data:`GROUP_RECORD_TYPES`, modulo 7),
    the rest is the value.  Empty input: a type-5 value of no bytes."""
    if not data:
        return GROUP_RECORD_TYPES[0], b""
    return GROUP_RECORD_TYPES[data[0] % len(GROUP_RECORD_TYPES)], data[1:]


def join_group_record(record_type: int, value: bytes) -> bytes:
    """Inverse of :func:`split_group_record`."""
    return bytes([GROUP_RECORD_TYPES.index(record_type)]) + value


def group_record_key(record_type: int) -> bytes:
    """The key Kafka writes for ``record_type`` (``*MemberMetadataKey``/``*CurrentMemberAssignmentKey``: GroupId,
    MemberId; ``StreamsGroupTopologyKey``: GroupId), int16-length strings after the int16 type."""
    out = struct.pack(">hh", record_type, len(_GROUP_KEY_GROUP)) + _GROUP_KEY_GROUP.encode()
    if record_type != 23:
        out += struct.pack(">h", len(_GROUP_KEY_MEMBER)) + _GROUP_KEY_MEMBER.encode()
    return out


def _group_record_reference(record_type: int, value: bytes) -> tuple[dict | ValueError, list[dict], int]:
    """(what the single-value decoder gave or raised, the owner entries ``group_owners`` must hold, the
    ``group_generation``) for one value of ``record_type``, per ``_group_metadata``'s documented mapping."""
    m = _GROUP_KEY_MEMBER

    def entry(member=None, instance=None, client=None, host=None, topic=None, parts=None, process=None, sub=None):
        return {
            "member_id": member,
            "group_instance_id": instance,
            "client_id": client,
            "client_host": host,
            "topic": topic,
            "partitions": None if parts is None else parts.tolist(),
            "process_id": process,
            "subtopology": sub,
        }

    try:
        if record_type == 5:
            d = decode_consumer_group_member_value(value)
            return d, [entry(m, d["group_instance_id"], d["client_id"], d["client_host"])], -1
        if record_type == 10:
            d = decode_share_group_member_value(value)
            owners = [entry(m, None, d["client_id"], d["client_host"])]
            return d, owners + [entry(m, topic=t) for t in d["subscribed_topics"]], -1
        if record_type == 19:
            d = decode_streams_group_member_value(value)
            owners = [entry(m, d["group_instance_id"], d["client_id"], d["client_host"], process=d["process_id"])]
            return d, owners, -1
        if record_type == 22:
            d = decode_streams_group_assignment_value(value)
            return d, [entry(m, parts=p, sub=sub) for sub, p in d["active"]], d["member_epoch"]
        if record_type == 23:
            d = decode_streams_group_topology_value(value)
            return d, [entry(topic=t, sub=sub) for sub, t in d["sources"]], d["epoch"]
        fn = decode_consumer_group_assignment_value if record_type == 8 else decode_share_group_assignment_value
        d = fn(value)
        return d, [entry(m, topic=t, parts=p) for t, p in d["assigned"]], d["member_epoch"]
    except AssignmentLimitError as exc:
        raise HarnessViolation(f"AssignmentLimitError without a limit: {exc}") from None
    except ValueError as exc:
        return exc, [], -1


def group_record_value(data: bytes) -> None:
    """One KIP-848, share or streams group member metadata, current assignment or topology value (input laid out
    as :func:`split_group_record` says) through its single-value decoder (``decode_consumer_group_member_value``,
    ``decode_consumer_group_assignment_value``, ``decode_share_group_member_value``,
    ``decode_share_group_assignment_value``, ``decode_streams_group_member_value``,
    ``decode_streams_group_assignment_value``, ``decode_streams_group_topology_value``; documented exception:
    ``ValueError``), then as a record with Kafka's key through ``decode_offsets_rows``: one ``RAW_SCHEMA`` row whose
    ``group_owners``, ``member_id``, ``group_generation`` and ``decode_error`` are what the single-value decode says
    (``malformed_value``/``unknown_value_version`` exactly when it raises, ``owners_over_limit`` past
    ``MAX_OWNER_ENTRIES``).  Documented exceptions: ``ValueError`` (from the single-value decoder only)."""
    record_type, value = split_group_record(data)
    single, owners, generation = _group_record_reference(record_type, value)
    if isinstance(single, dict):
        for name in ("member_epoch", "previous_member_epoch", "epoch", "topology_epoch"):
            if name in single:
                check(-(1 << 31) <= single[name] < 1 << 31, f"{name} outside int32")
        if "state" in single:
            check(-128 <= single["state"] < 128, "state outside int8")
        for o in owners:
            check(
                all(o[k] is None or isinstance(o[k], str) for k in o if k != "partitions"),
                "an owner field not a string",
            )
    rb = pa.RecordBatch.from_pydict(
        {
            "source_partition": [3],
            "source_offset": [7],
            "timestamp": [1_700_000_000_000],
            "key": [group_record_key(record_type)],
            "value": [value],
        },
        schema=KV_SCHEMA,
    )
    out = decode_offsets_rows(rb)
    check(out.schema.equals(RAW_SCHEMA) and out.num_rows == 1, "decode_offsets_rows lost the record")
    row = out.to_pylist()[0]
    check(row["record_type"] == record_type, f"record type {row['record_type']} for {record_type}")
    check(row["group_id"] == _GROUP_KEY_GROUP, f"group id {row['group_id']!r}")
    check(row["member_id"] == (None if record_type == 23 else _GROUP_KEY_MEMBER), f"member id {row['member_id']!r}")
    if isinstance(single, ValueError):
        want = "unknown_value_version" if "version" in str(single) else "malformed_value"
        check(row["decode_error"] == want, f"decode_error {row['decode_error']!r}, the decoder raised {single!r}")
        check(row["group_owners"] is None, "owners on a value that does not decode")
    elif len(owners) > MAX_OWNER_ENTRIES:
        check(row["decode_error"] == "owners_over_limit", f"decode_error {row['decode_error']!r} past the limit")
        check(row["group_owners"] is None, "owners past the limit")
    else:
        check(row["decode_error"] is None, f"decode_error {row['decode_error']!r} on a value that decodes")
        check(row["group_owners"] == owners, "group_owners differ from the single-value decode")
        check(row["group_generation"] == generation, f"group_generation {row['group_generation']} not {generation}")


def _cstr(x: str | None) -> bytes:
    """A compact (nullable) string of the flexible versions."""
    return b"\x00" if x is None else uvarint(len(x.encode()) + 1) + x.encode()


def _carray(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def _task_ids(tasks: list[tuple[str, list[int]]]) -> bytes:
    """``[]TaskIds`` of ``StreamsGroupCurrentMemberAssignmentValue.json``: SubtopologyId, Partitions, tags."""
    return _carray([_cstr(sub) + _carray([struct.pack(">i", x) for x in ps]) + b"\x00" for sub, ps in tasks])


def _topic_infos(names: list[str]) -> bytes:
    """``[]TopicInfo`` of ``StreamsGroupTopologyValue.json``: Name, Partitions, ReplicationFactor, TopicConfigs."""
    configs = _carray([_cstr("cleanup.policy") + _cstr("compact") + b"\x00"])
    return _carray([_cstr(n) + struct.pack(">ih", 0, -1) + configs + b"\x00" for n in names])


#: One ``CopartitionGroup``: SourceTopics [0], SourceTopicRegex [], RepartitionSourceTopics [1] (int16 indexes), tags.
_COPARTITION = _carray([struct.pack(">h", 0)]) + _carray([]) + _carray([struct.pack(">h", 1)]) + b"\x00"


def _streams_values() -> list[tuple[str, bytes]]:
    """Streams group values (types 19, 22, 23) laid out per their schema files of Kafka 4.1-4.4."""
    out = []
    for i, (instance, process) in enumerate([(None, "0b2c6a52-2d0e-4a51-9d2b-5f7c3d1e8a90"), ("inst-1", "p")]):
        member = (
            struct.pack(">h", 0) + _cstr(instance) + _cstr("rack-a" if i else None) + _cstr(f"app-{i}-StreamThread-1")
        )
        member += _cstr("/127.0.0.1") + struct.pack(">ii", 300000, 1 + i) + _cstr(process)
        member += (b"\x01" + _cstr("localhost") + struct.pack(">H", 8080) + b"\x00") if i else b"\xff"
        member += _carray([_cstr("az") + _cstr("1") + b"\x00"] if i else []) + b"\x00"
        out.append((f"streams-member-{i}", join_group_record(19, member)))
    for i, active in enumerate([[("0", [0, 2]), ("1", [1])], [], [("0", list(range(64)))]]):
        a = struct.pack(">hiib", 0, 7 + i, 6 + i, 1 + i % 3) + _task_ids(active) + _task_ids([("1", [0])])
        a += _task_ids([]) * 4 + b"\x00"
        out.append((f"streams-assignment-{i}", join_group_record(22, a)))
    sub0 = _cstr("0") + _carray([_cstr("in")]) + _carray([]) + _topic_infos(["app-store-changelog"])
    sub0 += _carray([_cstr("app-rep")]) + _topic_infos([]) + _carray([_COPARTITION]) + b"\x00"
    sub1 = _cstr("1") + _carray([]) + _carray([_cstr("re.*")]) + _topic_infos([]) + _carray([])
    sub1 += _topic_infos(["app-rep"]) + _carray([]) + b"\x00"
    out.append(("streams-topology", join_group_record(23, struct.pack(">hi", 0, 3) + _carray([sub0, sub1]) + b"\x00")))
    out.append(("streams-topology-empty", join_group_record(23, struct.pack(">hi", 0, 0) + _carray([]) + b"\x00")))
    return out


def _group_record_values() -> list[tuple[str, bytes]]:
    """``group_record_value`` seeds: the real KIP-848 and share group member and assignment values Kafka 4.4.0
    wrote (``tests/data/kafka-4.4.0``), streams group values per their schema files, and a share member subscribed
    to many topics."""
    out: list[tuple[str, bytes]] = []
    for k, v, _a in real_records("offsets", 2000, per_kind=8):
        if k is not None and v is not None and len(k) >= 2 and struct.unpack_from(">h", k)[0] in GROUP_RECORD_TYPES:
            rtype = struct.unpack_from(">h", k)[0]
            out.append((f"real-type-{rtype}-{len(out)}", join_group_record(rtype, v)))
    share = struct.pack(">h", 0) + _cstr(None) + _cstr("c-1") + _cstr("/10.0.0.7")
    share += _carray([_cstr(f"topic-{i}") for i in range(40)]) + b"\x00"
    out.append(("share-member-40-topics", join_group_record(10, share)))
    return dedup(out + _streams_values())


def _group_record_edit(rng: random.Random, data: bytes) -> bytes:
    """``group_record_value`` input (:func:`split_group_record`): another record type for the same value, the
    version, a cut, or an extreme integer in the value."""
    record_type, value = split_group_record(data)
    op = rng.randrange(8)
    if op == 0:
        return join_group_record(rng.choice(GROUP_RECORD_TYPES), value)
    if op == 1 and len(value) >= 2:
        return join_group_record(record_type, struct.pack(">h", rng.choice((0, 1, -1, 0x7FFF))) + value[2:])
    if op == 2 and value:
        return join_group_record(record_type, value[: rng.randrange(len(value))])
    return join_group_record(record_type, poke(rng, value, 2))


GROUP_RECORD_VALUE = make_harness(
    "group_record_value", group_record_value, _group_record_values, value_mutator(_group_record_edit)
)
