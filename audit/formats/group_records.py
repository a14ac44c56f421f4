"""KIP-848 consumer group, KIP-932 share group and KIP-1071 streams group records of ``__consumer_offsets``.

The values (record types 5, 8, 10, 14, 19, 22 and 23, :mod:`audit.formats.record_types`) that name a group's
members and what they are assigned, and the member keys' ``MemberId``.  Decoded per record with
:class:`audit.formats.byte_reader.ValueReader`, per Kafka's schema files (all version 0, flexible):
``ConsumerGroupMemberMetadataValue.json``, ``ConsumerGroupCurrentMemberAssignmentValue.json``,
``ShareGroupMemberMetadataValue.json``, ``ShareGroupCurrentMemberAssignmentValue.json``,
``StreamsGroupMemberMetadataValue.json``, ``StreamsGroupCurrentMemberAssignmentValue.json``,
``StreamsGroupTopologyValue.json`` and the matching ``*Key.json``, as ``GroupCoordinatorRecordSerde`` reads
them (Kafka 3.9-4.4).
"""

from __future__ import annotations

import struct

import numpy as np

from .byte_reader import ValueReader
from .group_metadata import AssignmentLimitError
from .metadata_log import uuid_to_str


__all__ = [
    "decode_consumer_group_assignment_value",
    "decode_consumer_group_member_value",
    "decode_member_key",
    "decode_share_group_assignment_value",
    "decode_share_group_member_value",
    "decode_streams_group_assignment_value",
    "decode_streams_group_member_value",
    "decode_streams_group_topology_value",
]


# --------------------------------------------------------------------------- KIP-848 consumer groups


def decode_member_key(key: bytes) -> str | None:
    """Return the ``MemberId`` of a ``ConsumerGroupMemberMetadataKey`` / ``ConsumerGroupCurrentMemberAssignmentKey``.

    The keys are not flexible: int16 type, GroupId int16-length string, MemberId int16-length string.  None when
    the key is cut short.
    """
    try:
        r = ValueReader(key, 2)
        r.string(False)
        return r.string(False)
    except ValueError:
        return None


def decode_consumer_group_member_value(value: bytes) -> dict:
    """Decode a ``ConsumerGroupMemberMetadataValue`` (record type 5, KIP-848; version 0, flexible).

    Fields per ``ConsumerGroupMemberMetadataValue.json`` of Kafka 3.9-4.x (InstanceId, RackId, ClientId,
    ClientHost, SubscribedTopicNames, SubscribedTopicRegex, RebalanceTimeoutMs, ServerAssignor, tagged
    ClassicMemberMetadata); the fields after ClientHost are not needed and not read.

    Returns
    -------
    dict
        ``group_instance_id``, ``rack_id``, ``client_id``, ``client_host``.

    Raises
    ------
    ValueError
        A version other than 0 or truncated bytes.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown ConsumerGroupMemberMetadataValue version")
    out = {"group_instance_id": r.string(True), "rack_id": r.string(True)}
    out["client_id"], out["client_host"] = r.string(True), r.string(True)
    if out["client_id"] is None or out["client_host"] is None:
        raise ValueError("null ClientId or ClientHost")
    return out


def decode_consumer_group_assignment_value(value: bytes, max_entries: int | None = None) -> dict:
    """Decode a ``ConsumerGroupCurrentMemberAssignmentValue`` (record type 8, KIP-848; version 0, flexible).

    Fields per ``ConsumerGroupCurrentMemberAssignmentValue.json`` of Kafka 3.9-4.x.

    Returns
    -------
    dict
        ``member_epoch``, ``previous_member_epoch``, ``state`` (int8, ``MemberState``), ``assigned`` and
        ``pending_revocation``: ``[(topic id as Uuid.toString(), partitions int32 ndarray)]`` (topics without
        partitions left out).

    Raises
    ------
    ValueError
        Another version, truncated bytes or bytes left over (3.7's early-access layout had other fields under the
        same version).
    AssignmentLimitError
        Past ``max_entries`` topics.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown ConsumerGroupCurrentMemberAssignmentValue version")
    out: dict = {"member_epoch": r.i32(), "previous_member_epoch": r.i32(), "state": struct.unpack(">b", r.take(1))[0]}
    out["assigned"] = _assigned_topics(r, value, "assigned", max_entries)
    left = None if max_entries is None else max_entries - len(out["assigned"])
    out["pending_revocation"] = _assigned_topics(r, value, "pending_revocation", left)
    r.tags()
    if r.p != len(value):
        raise ValueError("bytes after the value")
    return out


def _assigned_topics(
    r: ValueReader, value: bytes, field: str, max_entries: int | None, key=lambda r: uuid_to_str(r.take(16))
) -> list[tuple[str, np.ndarray]]:
    """Read a compact array of {``key``, Partitions compact int32 array, tagged fields}.

    ``key`` is a topic id, or a streams subtopology id: these are the ``TopicPartitions``/``TaskIds`` of the
    KIP-848, share and streams assignment values.

    Returns
    -------
    list of (str, numpy.ndarray)
        ``[(key, partitions int32 ndarray)]``, entries without partitions left out.

    Raises
    ------
    ValueError
        Bad counts or truncated bytes.
    AssignmentLimitError
        Past ``max_entries``.
    """
    n = r.uvarint() - 1
    if n < 0 or n > len(value):
        raise ValueError(f"bad {field} count")
    out = []
    for _ in range(n):
        k_id = key(r)
        k = r.uvarint() - 1
        if k_id is None or k < 0 or 4 * k > len(value) - r.p:
            raise ValueError(f"bad {field} partitions")
        if k:
            if max_entries is not None and len(out) >= max_entries:
                raise AssignmentLimitError(f"more than {max_entries} assigned topics")
            out.append((k_id, np.frombuffer(value, ">i4", k, r.p).astype(np.int32)))
        r.p += 4 * k
        r.tags()  # AssignmentEpochs (tag 0, KIP-1251) and any later tag
    return out


# --------------------------------------------------------------------------- KIP-932 share groups


def decode_share_group_member_value(value: bytes) -> dict:
    """Decode a ``ShareGroupMemberMetadataValue`` (record type 10, KIP-932; version 0, flexible).

    Fields per ``ShareGroupMemberMetadataValue.json`` of Kafka 4.0-4.4: RackId, ClientId, ClientHost,
    SubscribedTopicNames.

    Returns
    -------
    dict
        ``rack_id``, ``client_id``, ``client_host`` (a share member has no ``group.instance.id``) and
        ``subscribed_topics`` (topic names).

    Raises
    ------
    ValueError
        A version other than 0, truncated bytes or a null ClientId/ClientHost/topic name.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown ShareGroupMemberMetadataValue version")
    out = {"rack_id": r.string(True)}
    out["client_id"], out["client_host"] = r.string(True), r.string(True)
    if out["client_id"] is None or out["client_host"] is None:
        raise ValueError("null ClientId or ClientHost")
    n = r.uvarint() - 1
    if n > len(value):
        raise ValueError("bad SubscribedTopicNames count")
    topics = []
    for _ in range(max(n, 0)):
        name = r.string(True)
        if name is None:
            raise ValueError("null subscribed topic name")
        topics.append(name)
    out["subscribed_topics"] = topics
    return out


def decode_share_group_assignment_value(value: bytes, max_entries: int | None = None) -> dict:
    """Decode a ``ShareGroupCurrentMemberAssignmentValue`` (record type 14, KIP-932; version 0, flexible).

    Fields per ``ShareGroupCurrentMemberAssignmentValue.json`` of Kafka 4.0-4.4.

    Returns
    -------
    dict
        ``member_epoch``, ``previous_member_epoch``, ``state`` (int8, ``MemberState``) and ``assigned``:
        ``[(topic id as Uuid.toString(), partitions int32 ndarray)]`` (topics without partitions left out).

    Raises
    ------
    ValueError
        Another version, truncated bytes or bytes left over.
    AssignmentLimitError
        Past ``max_entries`` topics.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown ShareGroupCurrentMemberAssignmentValue version")
    out: dict = {"member_epoch": r.i32(), "previous_member_epoch": r.i32(), "state": struct.unpack(">b", r.take(1))[0]}
    out["assigned"] = _assigned_topics(r, value, "AssignedPartitions", max_entries)
    r.tags()
    if r.p != len(value):
        raise ValueError("bytes after the value")
    return out


# --------------------------------------------------------------------------- KIP-1071 streams groups


def _compact_array(r: ValueReader, what: str, limit: int) -> int:
    n = r.uvarint() - 1
    if n > limit:
        raise ValueError(f"bad {what} count {n}")
    return max(n, 0)


def _compact_strings(r: ValueReader, what: str, limit: int) -> list[str]:
    out = []
    for _ in range(_compact_array(r, what, limit)):
        v = r.string(True)
        if v is None:
            raise ValueError(f"null {what}")
        out.append(v)
    return out


def decode_streams_group_member_value(value: bytes) -> dict:
    """Decode a ``StreamsGroupMemberMetadataValue`` (record type 19, KIP-1071; version 0, flexible).

    Fields per ``StreamsGroupMemberMetadataValue.json`` of Kafka 4.1-4.4: InstanceId, RackId, ClientId, ClientHost,
    RebalanceTimeoutMs, TopologyEpoch, ProcessId, UserEndpoint, ClientTags.  The fields after ProcessId are not
    read.

    Returns
    -------
    dict
        ``group_instance_id``, ``rack_id``, ``client_id``, ``client_host``, ``topology_epoch`` and ``process_id``
        (one Streams instance; it can run several members).

    Raises
    ------
    ValueError
        A version other than 0, truncated bytes or a null ClientId/ClientHost/ProcessId.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown StreamsGroupMemberMetadataValue version")
    out = {"group_instance_id": r.string(True), "rack_id": r.string(True)}
    out["client_id"], out["client_host"] = r.string(True), r.string(True)
    r.i32()  # RebalanceTimeoutMs
    out["topology_epoch"] = r.i32()
    out["process_id"] = r.string(True)
    if out["client_id"] is None or out["client_host"] is None or out["process_id"] is None:
        raise ValueError("null ClientId, ClientHost or ProcessId")
    return out


def decode_streams_group_assignment_value(value: bytes, max_entries: int | None = None) -> dict:
    """Decode a ``StreamsGroupCurrentMemberAssignmentValue`` (record type 22, KIP-1071; version 0, flexible).

    Fields per ``StreamsGroupCurrentMemberAssignmentValue.json`` of Kafka 4.1-4.4.  Standby and warm-up tasks
    (which process no input) and the tasks pending revocation are not read.

    Returns
    -------
    dict
        ``member_epoch``, ``previous_member_epoch``, ``state`` (int8, ``streams.MemberState``: 1 STABLE,
        2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS) and ``active``: the member's active tasks as ``[(subtopology id,
        task partitions int32 ndarray)]`` (TaskIds; the tagged AssignmentEpochs skipped).

    Raises
    ------
    ValueError
        Another version or truncated bytes.
    AssignmentLimitError
        Past ``max_entries`` subtopologies.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown StreamsGroupCurrentMemberAssignmentValue version")
    out: dict = {"member_epoch": r.i32(), "previous_member_epoch": r.i32(), "state": struct.unpack(">b", r.take(1))[0]}
    out["active"] = _assigned_topics(r, value, "ActiveTasks", max_entries, key=lambda r: r.string(True))
    return out


def decode_streams_group_topology_value(value: bytes, max_entries: int | None = None) -> dict:
    """Decode a ``StreamsGroupTopologyValue`` (record type 23, KIP-1071; version 0, flexible).

    Fields per ``StreamsGroupTopologyValue.json`` of Kafka 4.1-4.4.

    Returns
    -------
    dict
        ``epoch`` and ``sources``: ``[(subtopology id, topic name)]`` for every SourceTopics and
        RepartitionSourceTopics entry of each subtopology (task *p* of a subtopology reads partition *p* of each of
        them; SourceTopicRegex subscriptions are resolved by the broker and not named here).

    Raises
    ------
    ValueError
        Another version or truncated bytes.
    AssignmentLimitError
        Past ``max_entries`` sources.
    """
    r = ValueReader(value)
    if r.i16() != 0:
        raise ValueError("unknown StreamsGroupTopologyValue version")
    out: dict = {"epoch": r.i32()}
    limit = len(value)
    sources = []

    def topic_infos() -> list[str]:
        names = []
        for _ in range(_compact_array(r, "TopicInfo", limit)):
            name = r.string(True)
            if name is None:
                raise ValueError("null TopicInfo name")
            r.i32()  # Partitions
            r.i16()  # ReplicationFactor
            for _ in range(_compact_array(r, "TopicConfigs", limit)):
                r.string(True)
                r.string(True)
                r.tags()
            r.tags()
            names.append(name)
        return names

    for _ in range(_compact_array(r, "Subtopologies", limit)):
        sub = r.string(True)
        if sub is None:
            raise ValueError("null SubtopologyId")
        names = _compact_strings(r, "SourceTopics", limit)
        _compact_strings(r, "SourceTopicRegex", limit)
        topic_infos()  # StateChangelogTopics
        _compact_strings(r, "RepartitionSinkTopics", limit)
        names += topic_infos()  # RepartitionSourceTopics
        for _ in range(_compact_array(r, "CopartitionGroups", limit)):
            for what in ("SourceTopics", "SourceTopicRegex", "RepartitionSourceTopics"):
                r.take(2 * _compact_array(r, what, limit))
            r.tags()
        r.tags()
        for name in names:
            if max_entries is not None and len(sources) >= max_entries:
                raise AssignmentLimitError(f"more than {max_entries} source topics")
            sources.append((sub, name))
    r.tags()
    if r.p != len(value):
        raise ValueError("bytes after the value")
    out["sources"] = sources
    return out
