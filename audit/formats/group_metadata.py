"""Classic consumer groups' ``GroupMetadataValue`` records (record type 2) of ``__consumer_offsets``.

Decoded per record (they are rare) with :class:`audit.formats.byte_reader.ValueReader`, per Kafka's
``GroupMetadataValue.json`` (v0..v4; v4 flexible) of the ``kafka-group-coordinator`` jars of Kafka 4.4.0 and
3.9.2 and ``GroupCoordinatorRecordSerde`` / ``GroupMetadataManager.readGroupMessageValue``; a member's
assignment bytes per ``ConsumerProtocolAssignment.json`` as ``ConsumerProtocol.deserializeAssignment`` reads
them (for groups of protocol type ``consumer``).
"""

from __future__ import annotations

import struct

import numpy as np

from .byte_reader import ValueReader


__all__ = [
    "MAX_GROUP_METADATA_VERSION",
    "AssignmentLimitError",
    "decode_consumer_assignment",
    "decode_group_metadata_value",
]

MAX_GROUP_METADATA_VERSION = 4


class AssignmentLimitError(ValueError):
    """A GroupMetadataValue's assignments hold more (member, topic) entries than the caller allows."""


def decode_consumer_assignment(assignment: bytes, max_entries: int | None = None) -> list[tuple[str, np.ndarray]]:
    """Decode the assigned partitions of one member of a ``consumer`` protocol group, per topic.

    ``assignment`` is the ``Assignment`` bytes of a GroupMetadataValue member: an int16 version,
    then ``ConsumerProtocolAssignment.json`` (not flexible): ``AssignedPartitions`` (int32 count
    of {``Topic`` int16-length string, ``Partitions`` int32 array}), ``UserData`` (nullable
    int32-length bytes).  Versions above 3 are read as version 3 and bytes after the known fields
    are ignored, as Kafka's ``ConsumerProtocol.deserializeAssignment`` does (forward
    compatibility).

    Returns
    -------
    list of (str, numpy.ndarray)
        ``[(topic, partitions int32 ndarray)]``, topics with no partition left out.

    Raises
    ------
    ValueError
        A negative version, a negative or oversized count, or truncated bytes.
    AssignmentLimitError
        (Before building it) the result would have more than ``max_entries`` topics.
    """
    r = ValueReader(assignment)
    if r.i16() < 0:
        raise ValueError("negative ConsumerProtocolAssignment version")
    out = []
    n_topics = r.i32()
    if n_topics < 0 or n_topics > len(assignment):
        raise ValueError(f"bad assigned topic count {n_topics}")
    for _ in range(n_topics):
        topic = r.string(False)
        n_parts = r.i32()
        if topic is None or n_parts < 0 or 4 * n_parts > len(assignment) - r.p:
            raise ValueError("bad assigned partitions")
        if n_parts:
            if max_entries is not None and len(out) >= max_entries:
                raise AssignmentLimitError(f"more than {max_entries} assigned topics")
            out.append((topic, np.frombuffer(assignment, ">i4", n_parts, r.p).astype(np.int32)))
        r.p += 4 * n_parts
    r.bytes_(False)  # UserData
    return out


def decode_group_metadata_value(value: bytes, assignments: bool = True, max_entries: int | None = None) -> dict:
    """Decode a GroupMetadataValue (v0-v4; v4 flexible) per ``GroupMetadataValue.json``.

    Returns ``{"value_version", "protocol_type", "generation", "protocol", "leader",
    "current_state_timestamp" (ms, -1 before v2), "members", "member_list"}`` where ``members``
    is the member count and ``member_list`` one dict per member: ``member_id``,
    ``group_instance_id`` (None before v3 or for a dynamic member), ``client_id``,
    ``client_host`` (as the coordinator saw it, e.g. ``/10.0.0.7``), ``session_timeout`` and
    ``rebalance_timeout`` (ms; -1 before v1), and ``assignment``: the member's
    ``[(topic, partitions int32 ndarray)]`` from :func:`decode_consumer_assignment` when the
    group's protocol type is ``consumer`` (and ``assignments`` is true), else None (Connect and
    other protocols have their own assignment format); an assignment that does not decode is
    None too and counted in ``bad_assignments``.  Raises ``ValueError`` for truncated bytes or a
    version above 4, :class:`AssignmentLimitError` when the members' assignments hold more than
    ``max_entries`` (member, topic) entries in all (checked before they are built: bounded memory).
    """
    r = ValueReader(value)
    version = r.i16()
    if version < 0 or version > MAX_GROUP_METADATA_VERSION:
        raise ValueError(f"unknown GroupMetadataValue version {version}")
    flex = version >= 4
    out = {
        "value_version": version,
        "protocol_type": r.string(flex),
        "generation": r.i32(),
        "protocol": r.string(flex),
        "leader": r.string(flex),
    }
    out["current_state_timestamp"] = r.i64() if version >= 2 else -1
    count = (r.uvarint() - 1) if flex else r.i32()
    consumer = assignments and out["protocol_type"] == "consumer"
    members, bad, entries = [], 0, 0
    for _ in range(max(count, 0)):
        m = {"member_id": r.string(flex)}
        m["group_instance_id"] = r.string(flex) if version >= 3 else None
        m["client_id"] = r.string(flex)
        m["client_host"] = r.string(flex)
        m["rebalance_timeout"] = r.i32() if version >= 1 else -1
        m["session_timeout"] = r.i32()
        r.bytes_(flex)  # subscription
        assignment = r.bytes_(flex)
        m["assignment"] = None
        if consumer and assignment is not None:
            try:
                left = None if max_entries is None else max_entries - entries
                m["assignment"] = decode_consumer_assignment(assignment, left)
                entries += len(m["assignment"])
            except AssignmentLimitError:
                raise
            except (ValueError, struct.error):
                bad += 1
        if flex:
            r.tags()
        members.append(m)
    if flex:
        r.tags()
    out["members"] = max(count, 0)
    out["member_list"] = members
    out["bad_assignments"] = bad
    return out
