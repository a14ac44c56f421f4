"""One ``__consumer_offsets`` segment file -> one Arrow record batch of decoded rows.

Glue between :mod:`record_batch` (batches, records) and :mod:`offsets` (keys/values).
Pure: bytes in, Arrow out; :mod:`audit.sources.logdirs` runs it inside Spark.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .latest import MAX_KEY_BYTES, group_equal_bytes, summarise_latest
from .offsets import (
    CONSUMER_GROUP_CURRENT_ASSIGNMENT_TYPE,
    CONSUMER_GROUP_MEMBER_METADATA_TYPE,
    GROUP_METADATA_TYPE,
    SHARE_GROUP_CURRENT_ASSIGNMENT_TYPE,
    SHARE_GROUP_MEMBER_METADATA_TYPE,
    STREAMS_GROUP_CURRENT_ASSIGNMENT_TYPE,
    STREAMS_GROUP_MEMBER_METADATA_TYPE,
    STREAMS_GROUP_TOPOLOGY_TYPE,
    AssignmentLimitError,
    decode_consumer_group_assignment_value,
    decode_consumer_group_member_value,
    decode_group_metadata_value,
    decode_member_key,
    decode_offsets_kv,
    decode_offsets_numeric,
    decode_offsets_summary,
    decode_share_group_assignment_value,
    decode_share_group_member_value,
    decode_streams_group_assignment_value,
    decode_streams_group_member_value,
    decode_streams_group_topology_value,
    materialise_offsets_kv,
)
from .record_batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, RecordTable, extract_records, read_int, scan_batches


__all__ = [
    "MAX_OWNER_ENTRIES",
    "MEMBER_KEY_TYPES",
    "OWNERS_TYPE",
    "OWNER_ENTRY",
    "RAW_SCHEMA",
    "RECORDS_PER_STEP",
    "binary_parts",
    "counts_batch",
    "decode_offsets_rows",
    "decode_offsets_rows_latest",
    "decode_offsets_segment",
    "issues_batch",
    "kept_records",
    "record_rows",
]

#: Rows produced per segment (``source_file`` is set on issue rows and records with a ``decode_error``).
#: ``kind``: ``record`` (a data record of a __consumer_offsets
#: batch), ``control`` (a transaction marker: ``control_type`` 0 ABORT / 1 COMMIT) or
#: ``issue`` (something skipped: ``decode_error`` is the reason, ``position`` the byte
#: position of the batch, ``records_affected`` how many records it held when known) or
#: ``count`` (``record_count`` records of one record_type / value_version / is_tombstone that
#: a latest-mode summary folded away, see :mod:`audit.formats.latest`).
#: ``record_count``: records this row adds to the records-read statistics (1 for a record,
#: 0 for a summarised one); ``live_count``: live commits the row stands for when it is live.
#: Offsets are Kafka offsets of the __consumer_offsets partition; timestamps are epoch ms.
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

RAW_SCHEMA = pa.schema(
    [
        ("source_file", pa.string()),
        ("source_partition", pa.int32()),
        ("kind", pa.string()),
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("batch_leader_epoch", pa.int32()),
        ("is_transactional", pa.bool_()),
        ("producer_id", pa.int64()),
        ("control_type", pa.int16()),
        ("record_type", pa.int16()),
        ("group_id", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("is_tombstone", pa.bool_()),
        ("value_version", pa.int16()),
        ("committed_offset", pa.int64()),
        ("leader_epoch", pa.int32()),
        ("metadata", pa.string()),
        ("commit_timestamp", pa.int64()),
        ("expire_timestamp", pa.int64()),
        ("topic_id", pa.string()),
        ("group_generation", pa.int32()),
        ("group_protocol_type", pa.string()),
        ("group_protocol", pa.string()),
        ("group_members", pa.int32()),
        ("group_owners", OWNERS_TYPE),
        ("member_id", pa.string()),
        ("decode_error", pa.string()),
        ("detail", pa.string()),
        ("records_affected", pa.int32()),
        ("record_count", pa.int64()),
        ("live_count", pa.int64()),
    ]
)


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


def _group_metadata(
    data, record_type, value_start, value_len, err: pa.Array, group_id: pa.Array, key_start=None, key_len=None
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
    owners = _OwnerEntries()
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

    ``row``: the record each belongs to; ``left``: how many more :data:`MAX_OWNER_ENTRIES` allows.
    """

    def __init__(self) -> None:
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
        self.left = MAX_OWNER_ENTRIES

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


def _sparse_batch(n: int, values: dict) -> pa.RecordBatch:
    """``n`` :data:`RAW_SCHEMA` rows: the given columns (python lists), every other column null."""
    cols = {f.name: pa.array(values[f.name], f.type) if f.name in values else pa.nulls(n, f.type) for f in RAW_SCHEMA}
    return pa.RecordBatch.from_arrays([cols[f.name] for f in RAW_SCHEMA], schema=RAW_SCHEMA)


def issues_batch(source_file: str, source_partition: int, issues) -> pa.RecordBatch:
    n = len(issues)
    return _sparse_batch(
        n,
        {
            "source_file": [source_file] * n,
            "source_partition": [source_partition] * n,
            "kind": ["issue"] * n,
            "position": [i.position for i in issues],
            "offset": [i.base_offset for i in issues],
            "decode_error": [i.reason for i in issues],
            "detail": [i.detail for i in issues],
            "records_affected": [i.records for i in issues],
            "record_count": [0] * n,
            "live_count": [0] * n,
        },
    )


def counts_batch(source_partition: int, counts) -> pa.RecordBatch:
    n = len(counts)
    return _sparse_batch(
        n,
        {
            "source_partition": [source_partition] * n,
            "kind": ["count"] * n,
            "record_type": [c[0] for c in counts],
            "value_version": [c[1] for c in counts],
            "is_tombstone": [c[2] for c in counts],
            "record_count": [c[3] for c in counts],
            "live_count": [0] * n,
        },
    )


#: Records decoded per step (keys, values and Arrow columns), so the per-record temporaries of a
#: segment of millions of records never exist all at once; each step is one output batch.
RECORDS_PER_STEP = 1 << 15


def _record_types(recs, idx: np.ndarray, is_control: np.ndarray, values: bool = True) -> dict[str, np.ndarray]:
    """Run :func:`decode_offsets_numeric` on the records ``idx`` of ``recs`` (``values`` as there).

    Control records are marked (record type -1, no decode error).
    """
    num = decode_offsets_numeric(
        recs.data, recs.key_start[idx], recs.key_len[idx], recs.value_start[idx], recs.value_len[idx], values=values
    )
    num["record_type"] = np.where(is_control, -1, num["record_type"]).astype(np.int16)
    if is_control.any():
        num["decode_error"][is_control] = None
        num["decoded"] = num["decoded"] | is_control
    return num


def _summary_columns(recs, is_control: np.ndarray, key_ids: np.ndarray) -> dict[str, np.ndarray]:
    """Return the columns :func:`summarise_latest` reads, of every record (as :func:`_record_types` gives them).

    Each distinct key is parsed once (``key_ids``: :func:`audit.formats.latest.group_equal_bytes` over the whole
    keys), the values :data:`RECORDS_PER_STEP` records at a time.
    """
    num = decode_offsets_summary(
        recs.data, recs.key_start, recs.key_len, recs.value_start, recs.value_len, key_ids, RECORDS_PER_STEP
    )
    num["record_type"] = np.where(is_control, -1, num["record_type"]).astype(np.int16)
    num["decoded"] = num["decoded"] | is_control
    return num


def record_rows(
    recs,
    scan,
    idx: np.ndarray,
    is_control: np.ndarray,
    is_txn: np.ndarray,
    live_count: np.ndarray,
    record_count: np.ndarray,
    source_file: str,
    source_partition: int,
) -> pa.RecordBatch:
    """:data:`RAW_SCHEMA` rows (``record``/``control``) of the records ``idx`` of ``recs``."""
    m = len(idx)
    num = _record_types(recs, idx, is_control)
    dec = materialise_offsets_kv(recs.data, num)
    batch = recs.batch[idx]
    kl, ks = recs.key_len[idx], recs.key_start[idx]
    has_type = kl >= 4  # a control record's key: int16 version, int16 type (ControlRecordType)
    ctl = np.where(has_type, read_int(recs.data, np.where(has_type, ks + 2, 0), 2), -1)
    ctype = np.where(is_control, ctl, -1).astype(np.int16)
    rtype = dec["record_type"]
    err = dec["decode_error"]
    g = _group_metadata(recs.data, rtype, recs.value_start[idx], recs.value_len[idx], err, dec["group_id"], ks, kl)
    err = g["decode_error"]
    cols = {
        # the file name only where something is reported (a per-row path would dominate memory)
        "source_file": pc.if_else(pc.is_valid(err), pa.scalar(source_file, pa.string()), pa.scalar(None, pa.string())),
        "source_partition": pa.array(np.full(m, source_partition, dtype=np.int32)),
        "kind": pc.if_else(pa.array(is_control), pa.scalar("control"), pa.scalar("record")),
        "position": pa.array(scan.position[batch]),
        "offset": pa.array(recs.offset[idx]),
        "timestamp": pa.array(recs.timestamp[idx]),
        "batch_leader_epoch": pa.array(scan.partition_leader_epoch[batch]),
        "is_transactional": pa.array(is_txn),
        "producer_id": pa.array(scan.producer_id[batch]),
        "control_type": pa.array(ctype),
        "record_type": pa.array(rtype),
        "group_id": dec["group_id"],
        "topic": dec["topic"],
        "partition": pa.array(dec["partition"]),
        "is_tombstone": pa.array(dec["is_tombstone"]),
        "value_version": pa.array(dec["value_version"]),
        "committed_offset": pa.array(dec["committed_offset"]),
        "leader_epoch": pa.array(dec["leader_epoch"]),
        "metadata": dec["metadata"],
        "commit_timestamp": pa.array(dec["commit_timestamp"]),
        "expire_timestamp": pa.array(dec["expire_timestamp"]),
        "topic_id": dec["topic_id"],
        **{k: v for k, v in g.items() if k != "decode_error"},
        "decode_error": err,
        "detail": pa.nulls(m, pa.string()),
        "records_affected": pa.array(np.ones(m, dtype=np.int32)),
        "record_count": pa.array(record_count),
        "live_count": pa.array(live_count),
    }
    return pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) for f in RAW_SCHEMA], schema=RAW_SCHEMA)


def kept_records(
    recs, is_control: np.ndarray, is_txn: np.ndarray, reduce_latest: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """Return ``(keep, live_count, record_count, counts)`` of the records of ``recs``.

    ``recs`` is a :class:`audit.formats.record_batch.RecordTable`, in offset order.  Every record is kept, one
    each, or with ``reduce_latest`` what :func:`audit.formats.latest.summarise_latest` keeps and the counts of the
    rest.
    """
    n = len(recs)
    if not reduce_latest:
        return np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int64), np.ones(n, dtype=np.int64), []
    key_ids = group_equal_bytes(recs.data, recs.key_start, recs.key_len, max_bytes=MAX_KEY_BYTES + 2)
    num = _summary_columns(recs, is_control, key_ids)
    s = summarise_latest(recs.data, recs.key_start, recs.key_len, num, is_txn, is_control, full_key_ids=key_ids)
    return s.keep, s.live_count, s.record_count, s.counts


def decode_offsets_segment(
    buf: bytes | memoryview,
    source_file: str,
    source_partition: int,
    verify_crc: bool = True,
    reduce_latest: bool = False,
) -> list[pa.RecordBatch]:
    """Decode every record of one ``__consumer_offsets`` segment into :data:`RAW_SCHEMA` rows.

    ``buf``: the ``.log`` file's bytes; ``source_file``: its path (reported with issues);
    ``source_partition``: the ``__consumer_offsets`` partition number.  Returns batches of
    record/control rows (one per :data:`RECORDS_PER_STEP` records, in log order) and, when anything
    was skipped, one batch of issue rows.
    Record-level problems (unknown record type, unknown value version, malformed bytes)
    are ``kind='record'`` rows with ``decode_error`` set.  Never raises on bad bytes.

    ``reduce_latest`` (``--mode latest``): emit only the records
    :func:`audit.formats.latest.summarise_latest` keeps, plus ``kind='count'`` rows for the
    statistics of the records it folded away.
    """
    scan = scan_batches(buf, verify_crc=verify_crc)
    recs = extract_records(buf, scan)
    out: list[pa.RecordBatch] = []
    n = len(recs)
    if n:
        attrs = scan.attributes[recs.batch]
        is_control = (attrs & ATTR_CONTROL) != 0
        is_txn = (attrs & ATTR_TRANSACTIONAL) != 0
        del attrs
        keep, live_count, record_count, counts = kept_records(recs, is_control, is_txn, reduce_latest)
        for lo in range(0, len(keep), RECORDS_PER_STEP):
            idx = keep[lo : lo + RECORDS_PER_STEP]
            out.append(
                record_rows(
                    recs,
                    scan,
                    idx,
                    is_control[idx],
                    is_txn[idx],
                    live_count[lo : lo + RECORDS_PER_STEP],
                    record_count[lo : lo + RECORDS_PER_STEP],
                    source_file,
                    source_partition,
                )
            )
        if counts:
            out.append(counts_batch(source_partition, counts))
    issues = scan.issues + recs.issues
    if issues:
        out.append(issues_batch(source_file, source_partition, issues))
    return out


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split a binary Arrow array into (data uint8, start int64, length int64 with -1 for null)."""
    arr = arr.cast(pa.large_binary())
    n = len(arr)
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + n + 1] if n else np.zeros(1, np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    start = offsets[:-1].astype(np.int64)
    length = np.diff(offsets).astype(np.int64)
    if arr.null_count:
        length = np.where(arr.is_null().to_numpy(zero_copy_only=False), -1, length)
    return data, start, length


def decode_offsets_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Decode records already read by a Kafka client into :data:`RAW_SCHEMA` rows.

    The client reads ``read_committed``, so there are no control records and no aborted transactions.  Input
    columns ``source_partition int, source_offset long, timestamp long (ms), key binary, value binary``; output
    :data:`RAW_SCHEMA` rows (``kind='record'``, ``source_file`` = ``__consumer_offsets-<p>``).
    """
    n = batch.num_rows
    kd, ks, kl = binary_parts(batch.column("key"))
    vd, vs, vl = binary_parts(batch.column("value"))
    data = np.concatenate([kd, vd])
    dec = decode_offsets_kv(data, ks, kl, vs + len(kd), vl)
    sp = batch.column("source_partition").cast(pa.int32())
    g = _group_metadata(data, dec["record_type"], vs + len(kd), vl, dec["decode_error"], dec["group_id"], ks, kl)
    err = g["decode_error"]
    cols = {
        "source_file": pa.array([f"__consumer_offsets-{p}" for p in sp.to_pylist()], pa.string()),
        "source_partition": sp,
        "kind": pa.array(["record"] * n, pa.string()),
        "position": pa.nulls(n, pa.int64()),
        "offset": batch.column("source_offset").cast(pa.int64()),
        "timestamp": batch.column("timestamp").cast(pa.int64()),
        "batch_leader_epoch": pa.nulls(n, pa.int32()),
        "is_transactional": pa.array(np.zeros(n, dtype=bool)),
        "producer_id": pa.nulls(n, pa.int64()),
        "control_type": pa.array(np.full(n, -1, dtype=np.int16)),
        "record_type": pa.array(dec["record_type"]),
        "group_id": dec["group_id"],
        "topic": dec["topic"],
        "partition": pa.array(dec["partition"]),
        "is_tombstone": pa.array(dec["is_tombstone"]),
        "value_version": pa.array(dec["value_version"]),
        "committed_offset": pa.array(dec["committed_offset"]),
        "leader_epoch": pa.array(dec["leader_epoch"]),
        "metadata": dec["metadata"],
        "commit_timestamp": pa.array(dec["commit_timestamp"]),
        "expire_timestamp": pa.array(dec["expire_timestamp"]),
        "topic_id": dec["topic_id"],
        **{k: v for k, v in g.items() if k != "decode_error"},
        "decode_error": err,
        "detail": pa.nulls(n, pa.string()),
        "records_affected": pa.array(np.ones(n, dtype=np.int32)),
        "record_count": pa.array(np.ones(n, dtype=np.int64)),
        "live_count": pa.array(np.ones(n, dtype=np.int64)),
    }
    return pa.RecordBatch.from_arrays([cols[f.name].cast(f.type) for f in RAW_SCHEMA], schema=RAW_SCHEMA)


def decode_offsets_rows_latest(records: pa.Table) -> list[pa.RecordBatch]:
    """Run :func:`decode_offsets_rows` on only the records ``--mode latest`` keeps of ``records``.

    ``records`` are a Kafka client's read_committed rows, each ``__consumer_offsets`` partition's in offset order.
    The result carries the live commits each kept one stands for (``live_count``), plus ``kind='count'`` rows for
    the records folded away: what :func:`decode_offsets_segment` gives for a segment with ``reduce_latest``.
    """
    n = records.num_rows
    if not n:
        return []
    kd, ks, kl = binary_parts(records.column("key").combine_chunks())
    vd, vs, vl = binary_parts(records.column("value").combine_chunks())
    table = RecordTable(
        np.concatenate([kd, vd]),
        np.zeros(n, dtype=np.int64),
        records.column("source_offset").to_numpy(),
        records.column("timestamp").to_numpy(),
        ks,
        kl,
        vs + len(kd),
        vl,
    )
    zeros = np.zeros(n, dtype=bool)
    keep, live_count, record_count, counts = kept_records(table, zeros, zeros, True)
    out = []
    for lo in range(0, len(keep), RECORDS_PER_STEP):
        idx = keep[lo : lo + RECORDS_PER_STEP]
        rows = decode_offsets_rows(records.take(pa.array(idx)).combine_chunks().to_batches()[0])
        for name, values in (
            ("live_count", live_count[lo : lo + RECORDS_PER_STEP]),
            ("record_count", record_count[lo : lo + RECORDS_PER_STEP]),
        ):
            i = RAW_SCHEMA.get_field_index(name)
            rows = rows.set_column(i, RAW_SCHEMA.field(name), pa.array(np.asarray(values, dtype=np.int64)))
        out.append(rows)
    if counts:
        out.append(counts_batch(int(records.column("source_partition")[0].as_py()), counts))
    return out
