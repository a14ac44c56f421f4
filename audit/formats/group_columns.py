"""The group columns of ``__consumer_offsets`` rows: state and partition owners of the group records.

Fills the :data:`audit.formats.segments.RAW_SCHEMA` columns ``group_generation``, ``group_protocol_type``,
``group_protocol``, ``group_members``, ``group_owners`` (:data:`OWNERS_TYPE`) and ``member_id`` of the (rare)
group records, decoded one by one: classic ``GroupMetadataValue.json`` records and their members'
``ConsumerProtocolAssignment.json`` (:mod:`audit.formats.group_metadata`), and the KIP-848, KIP-932 and
KIP-1071 member records per ``ConsumerGroupMemberMetadataValue.json``,
``ConsumerGroupCurrentMemberAssignmentValue.json``, ``ShareGroupMemberMetadataValue.json``,
``ShareGroupCurrentMemberAssignmentValue.json``, ``StreamsGroupMemberMetadataValue.json``,
``StreamsGroupCurrentMemberAssignmentValue.json`` and ``StreamsGroupTopologyValue.json``
(:mod:`audit.formats.group_records`), with their keys' ``MemberId`` (``ConsumerGroupMemberMetadataKey.json`` and
the like), as Kafka's ``GroupCoordinatorRecordSerde`` reads them.  Memory stays bounded: at most
:data:`MAX_OWNER_ENTRIES` owner entries a call.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .group_metadata import AssignmentLimitError, decode_group_metadata_value
from .group_records import (
    decode_consumer_group_assignment_value,
    decode_consumer_group_member_value,
    decode_member_key,
    decode_share_group_assignment_value,
    decode_share_group_member_value,
    decode_streams_group_assignment_value,
    decode_streams_group_member_value,
    decode_streams_group_topology_value,
)
from .record_types import (
    CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE,
    CONSUMER_GROUP_MEMBER_METADATA_TYPE,
    GROUP_METADATA_TYPE,
    SHARE_GROUP_CURRENT_ASSIGNMENT_TYPE,
    SHARE_GROUP_MEMBER_METADATA_TYPE,
    STREAMS_GROUP_CURRENT_ASSIGNMENT_TYPE,
    STREAMS_GROUP_MEMBER_METADATA_TYPE,
    STREAMS_GROUP_TOPOLOGY_TYPE,
)


__all__ = [
    "MAX_OWNER_ENTRIES",
    "MEMBER_KEY_TYPES",
    "OWNERS_TYPE",
    "OWNER_ENTRY",
    "group_record_columns",
]

#: one entry per (member, topic) of a GroupMetadataValue's assignments (``decode_group_metadata_value``)
OWNER_ENTRY = pa.struct(
    [
        ("member_id", pa.string()),
        ("group_instance_id", pa.string()),
        ("client_id", pa.string()),
        ("client_host", pa.string()),
        ("topic", pa.string()),
        ("partitions", pa.list_(pa.int32())),
        ("process_id", pa.string()),
        ("subtopology", pa.string()),
    ]
)
OWNERS_TYPE = pa.list_(OWNER_ENTRY)
#: (member, topic) owner entries one decode call builds at most (memory stays bounded: about 150 bytes each);
#: a group past what is left gets ``owners_over_limit`` and no owners
MAX_OWNER_ENTRIES = 65_536

#: record types whose key is (GroupId, MemberId): KIP-848 member metadata (5) and current assignment (8), share
#: group member metadata (10) and current assignment (14) (``ShareGroup*Key.json``), streams group member metadata
#: (19) and current assignment (22) (``StreamsGroup*Key.json``)
MEMBER_KEY_TYPES = (
    CONSUMER_GROUP_MEMBER_METADATA_TYPE,
    CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE,
    SHARE_GROUP_MEMBER_METADATA_TYPE,
    SHARE_GROUP_CURRENT_ASSIGNMENT_TYPE,
    STREAMS_GROUP_MEMBER_METADATA_TYPE,
    STREAMS_GROUP_CURRENT_ASSIGNMENT_TYPE,
)
#: member records whose value gives owners: client fields (5, 10, 19) or assigned partitions / tasks (8, 14, 22);
#: and the streams topology (23), which maps tasks to partitions
_MEMBER_INFO_TYPES = (
    CONSUMER_GROUP_MEMBER_METADATA_TYPE,
    SHARE_GROUP_MEMBER_METADATA_TYPE,
    STREAMS_GROUP_MEMBER_METADATA_TYPE,
)
_MEMBER_ASSIGNMENT_TYPES = (
    CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE,
    SHARE_GROUP_CURRENT_ASSIGNMENT_TYPE,
    STREAMS_GROUP_CURRENT_ASSIGNMENT_TYPE,
)


def group_record_columns(
    data,
    record_type,
    value_start,
    value_len,
    err: pa.Array,
    group_id: pa.Array,
    key_start=None,
    key_len=None,
    max_entries: int | None = None,
) -> dict:
    """Decode the (rare) group records one by one.

    They are the classic GroupMetadataValue (type 2), the KIP-848 consumer group's member metadata (type 5) and
    current assignment (type 8), the share group's (10, 14) and the streams group's member metadata (19), current
    assignment (22) and topology (23).

    Returns the RAW_SCHEMA columns (Arrow arrays) ``group_generation`` (-1 elsewhere; the member epoch
    on type 8), ``group_protocol_type``, ``group_protocol``, ``group_members`` (member count, -1
    elsewhere), ``group_owners``, ``member_id`` (types 5, 8, 10 and 19, from the key) and ``decode_error`` with
    failures marked (``malformed_value``, ``unknown_value_version``; a member assignment that does not
    decode: ``malformed_assignment``, the other members kept; ``owners_over_limit``, see
    :data:`MAX_OWNER_ENTRIES`).

    ``group_owners`` (one entry per member and topic, ``partitions`` a list) is filled on each classic
    group's newest record with members among these rows (``sql/partition_owners.sql`` reads no other, and
    older generations' assignments would cost memory for nothing), on types 8 and 14 (``topic`` is the topic id,
    Kafka's ``Uuid.toString()``, client fields null), on type 5 (one entry: client fields, no topic) and on type 10
    (that entry first, then one per subscribed topic: ``topic`` its name, no partitions); type 19: one entry with
    the client fields and ``process_id``; type 22: one per subtopology with active tasks (``subtopology``,
    ``partitions`` = the task partitions, no topic); type 23: one per (subtopology, source or repartition source
    topic) (``subtopology``, ``topic`` its name; ``group_generation`` = the topology epoch).

    ``max_entries``: the owner entries this call builds at most (default :data:`MAX_OWNER_ENTRIES`).
    """
    n = len(record_type)
    generation = np.full(n, -1, dtype=np.int32)
    members = np.full(n, -1, dtype=np.int32)
    proto, protocol, member_ids = [None] * n, [None] * n, [None] * n
    rows = np.nonzero((record_type == GROUP_METADATA_TYPE) & (value_len >= 0))[0]
    cg_rows = (
        np.nonzero(np.isin(record_type, (*MEMBER_KEY_TYPES, STREAMS_GROUP_TOPOLOGY_TYPE)))[0]
        if key_start is not None
        else np.zeros(0, dtype=np.int64)
    )
    errs = err.to_pylist() if len(rows) or len(cg_rows) else None
    newest = _classic_groups(data, rows, value_start, value_len, group_id, errs, generation, proto, protocol, members)
    owner_rows = np.zeros(n, dtype=bool)
    owners = _OwnerEntries(MAX_OWNER_ENTRIES if max_entries is None else max_entries)
    _classic_owners(data, newest, value_start, value_len, errs, owner_rows, owners)
    for i in cg_rows:
        i = int(i)
        rt = record_type[i]
        ks, kl = int(key_start[i]), int(key_len[i])
        if rt != STREAMS_GROUP_TOPOLOGY_TYPE:
            member_ids[i] = decode_member_key(data[ks : ks + kl].tobytes())
        if value_len[i] < 0:
            continue
        s, ln = int(value_start[i]), int(value_len[i])
        try:
            epoch = _member_owners(rt, data[s : s + ln].tobytes(), i, member_ids[i], owners)
            if epoch is not None:
                generation[i] = epoch
            owner_rows[i] = True
        except AssignmentLimitError:
            errs[i] = "owners_over_limit"
        except ValueError as exc:
            errs[i] = "unknown_value_version" if "version" in str(exc) else "malformed_value"
    cols = owners.cols
    if cols["row"]:
        order = np.argsort(np.asarray(cols["row"], dtype=np.int64), kind="stable")
        cols = {k: [v[j] for j in order] for k, v in cols.items()}
    return {
        "group_generation": pa.array(generation),
        "group_protocol_type": pa.array(proto, pa.string()),
        "group_protocol": pa.array(protocol, pa.string()),
        "group_members": pa.array(members),
        "group_owners": _owners_array(n, owner_rows, cols),
        "member_id": pa.array(member_ids, pa.string()),
        "decode_error": pa.array(errs, pa.string()) if errs is not None else err,
    }


class _OwnerEntries:
    """The owner entries (:data:`OWNER_ENTRY`) one decode call builds, column by column.

    ``row``: the record each belongs to; ``left``: how many more the decode call allows (at first its
    ``max_entries``, :data:`MAX_OWNER_ENTRIES` by default).
    """

    def __init__(self, left: int) -> None:
        self.cols: dict[str, list] = {
            k: []
            for k in (
                "row",
                "member_id",
                "group_instance_id",
                "client_id",
                "client_host",
                "topic",
                "partitions",
                "process_id",
                "subtopology",
            )
        }
        self.left = left

    def add(self, i, member_id, instance, client, host, topic, parts, process=None, subtopology=None) -> None:
        """Nothing: one entry of record ``i`` appended (``left`` is the caller's to count down)."""
        cols = self.cols
        cols["row"].append(i)
        cols["member_id"].append(member_id)
        cols["group_instance_id"].append(instance)
        cols["client_id"].append(client)
        cols["client_host"].append(host)
        cols["topic"].append(topic)
        cols["partitions"].append(parts)
        cols["process_id"].append(process)
        cols["subtopology"].append(subtopology)


def _classic_groups(data, rows, value_start, value_len, group_id, errs, generation, proto, protocol, members) -> dict:
    """Return ``{group_id: row}``: each classic consumer group's newest GroupMetadataValue with members among ``rows``.

    Every one of ``rows`` is decoded without assignments into ``generation``, ``proto``, ``protocol`` and
    ``members`` (failures into ``errs``).
    """
    newest: dict = {}
    for i in rows:
        s, ln = int(value_start[i]), int(value_len[i])
        try:
            g = decode_group_metadata_value(data[s : s + ln].tobytes(), assignments=False)
        except ValueError as exc:
            errs[i] = "unknown_value_version" if "version" in str(exc) else "malformed_value"
            continue
        generation[i], proto[i], protocol[i], members[i] = (
            g["generation"],
            g["protocol_type"],
            g["protocol"],
            g["members"],
        )
        if g["members"] > 0 and g["protocol_type"] == "consumer":
            newest[group_id[int(i)].as_py()] = int(i)
    return newest


def _classic_owners(data, newest: dict, value_start, value_len, errs, owner_rows, owners: _OwnerEntries) -> None:
    """Add the (member, topic) assignments of the ``newest`` classic group records to ``owners``; return nothing.

    Those rows are marked in ``owner_rows``; ``malformed_assignment`` or ``owners_over_limit`` go into ``errs``.
    """
    for i in sorted(newest.values()):
        s, ln = int(value_start[i]), int(value_len[i])
        try:
            g = decode_group_metadata_value(data[s : s + ln].tobytes(), max_entries=owners.left)
        except AssignmentLimitError:
            errs[i] = "owners_over_limit"
            continue
        if g["bad_assignments"]:
            errs[i] = "malformed_assignment"
        owner_rows[i] = True
        for m in g["member_list"]:
            for topic, parts in m["assignment"] or ():
                owners.add(i, m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"], topic, parts)
                owners.left -= 1


def _member_owners(rt, value: bytes, i: int, member_id, owners: _OwnerEntries) -> int | None:
    """Return the member or topology epoch of record ``i``'s ``value`` of record type ``rt``, adding its owners.

    The member epoch for types 8, 14, 22, the topology epoch for 23, None for the member metadata types 5, 10, 19;
    its owner entries are added to ``owners``.

    Raises
    ------
    ValueError
        The value does not decode.
    AssignmentLimitError
        The assignments hold more (member, topic) entries than allowed (``owners_over_limit``).
    """
    if rt == CONSUMER_GROUP_MEMBER_METADATA_TYPE:
        m = decode_consumer_group_member_value(value)
        owners.add(i, member_id, m["group_instance_id"], m["client_id"], m["client_host"], None, None)
        return None
    if rt == SHARE_GROUP_MEMBER_METADATA_TYPE:
        m = decode_share_group_member_value(value)
        owners.add(i, member_id, None, m["client_id"], m["client_host"], None, None)
        for name in m["subscribed_topics"][: owners.left]:  # named topics: a live audit resolves their ids
            owners.add(i, member_id, None, None, None, name, None)
            owners.left -= 1
        return None
    if rt == STREAMS_GROUP_MEMBER_METADATA_TYPE:
        m = decode_streams_group_member_value(value)
        owners.add(i, member_id, m["group_instance_id"], m["client_id"], m["client_host"], None, None, m["process_id"])
        return None
    if rt == STREAMS_GROUP_CURRENT_ASSIGNMENT_TYPE:
        a = decode_streams_group_assignment_value(value, max_entries=owners.left)
        for sub, parts in a["active"]:
            owners.add(i, member_id, None, None, None, None, parts, None, sub)
            owners.left -= 1
        return a["member_epoch"]
    if rt == STREAMS_GROUP_TOPOLOGY_TYPE:
        t = decode_streams_group_topology_value(value, max_entries=owners.left)
        for sub, name in t["sources"]:
            owners.add(i, None, None, None, None, name, None, None, sub)
            owners.left -= 1
        return t["epoch"]
    a = (
        decode_consumer_group_assignment_value(value, max_entries=owners.left)
        if rt == CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE
        else decode_share_group_assignment_value(value, max_entries=owners.left)
    )
    for topic_id, parts in a["assigned"]:
        owners.add(i, member_id, None, None, None, topic_id, parts)
        owners.left -= 1
    return a["member_epoch"]


def _owners_array(n: int, owner_rows: np.ndarray, cols: dict) -> pa.Array:
    """``n`` rows of :data:`OWNERS_TYPE`: the entries of ``cols`` (in row order) on ``owner_rows``, null elsewhere."""
    parts = cols["partitions"]
    lens = np.fromiter((0 if p is None else len(p) for p in parts), dtype=np.int64, count=len(parts))
    flat = np.concatenate([p for p in parts if p is not None] or [np.zeros(0, dtype=np.int32)])
    part_lists = pa.ListArray.from_arrays(
        pa.array(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)),
        pa.array(flat, pa.int32()),
        mask=pa.array([p is None for p in parts], pa.bool_()),
    )
    entries = pa.StructArray.from_arrays(
        [
            pa.array(cols[k], pa.string())
            for k in ("member_id", "group_instance_id", "client_id", "client_host", "topic")
        ]
        + [part_lists]
        + [pa.array(cols[k], pa.string()) for k in ("process_id", "subtopology")],
        fields=list(OWNER_ENTRY),
    )
    per_row = (
        np.bincount(np.asarray(cols["row"], dtype=np.int64), minlength=n) if cols["row"] else np.zeros(n, np.int64)
    )
    offsets = np.concatenate([[0], np.cumsum(per_row)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), entries, type=OWNERS_TYPE, mask=pa.array(~owner_rows))
