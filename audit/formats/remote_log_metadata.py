"""Decoder for tiered storage's ``__remote_log_metadata`` records (KIP-405; pure Python, no Spark).

Kafka's topic-based RemoteLogMetadataManager (``TopicBasedRemoteLogMetadataManager``) writes every remote log
segment's lifecycle to ``__remote_log_metadata``: records with a null key whose value is framed by
``org.apache.kafka.server.common.serialization.AbstractApiMessageSerde`` (through ``BytesApiMessageSerde`` in
``org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde``), exactly as a KRaft
metadata record (:mod:`audit.formats.metadata_log`)::

    frame_version  unsigned varint   (must be 1)
    api_key        unsigned varint   (``MetadataRecordType`` of storage/src/main/resources/message/)
    version        unsigned varint   (record schema version; 0 is the only one)
    body           the message in Kafka's flexible ("compact") encoding, read with metadata_log's reader

Schemas followed (``storage/src/main/resources/message/`` of apache/kafka, as shipped in the ``kafka-storage``
jar of Kafka 4.4.0; 3.9 has the same without ``TxnIndexEmpty``), all ``validVersions: 0``,
``flexibleVersions: 0+`` (so every struct, nested ones included, ends with tagged fields; unknown tags are
skipped, as Kafka keeps them as unknown tagged fields):

* ``RemoteLogSegmentMetadataRecord.json`` (api key 0): RemoteLogSegmentId {TopicIdPartition {Name string,
  Id uuid, Partition int32}, Id uuid}, StartOffset int64, EndOffset int64, BrokerId int32, MaxTimestampMs int64,
  EventTimestampMs int64, SegmentLeaderEpochs [] {LeaderEpoch int32, Offset int64}, SegmentSizeInBytes int32,
  CustomMetadata nullable bytes (default null), RemoteLogSegmentState int8; tagged: TxnIndexEmpty bool (tag 0,
  Kafka 4.0+, KIP-1058; default false).  Written with COPY_SEGMENT_STARTED when a segment's copy begins.
* ``RemoteLogSegmentMetadataUpdateRecord.json`` (api key 1): RemoteLogSegmentId (as above), BrokerId int32,
  EventTimestampMs int64, CustomMetadata nullable bytes, RemoteLogSegmentState int8.  Every later state of a
  segment (COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED).
* ``RemotePartitionDeleteMetadataRecord.json`` (api key 2): TopicIdPartition {Name, Id, Partition}, BrokerId
  int32, EventTimestampMs int64, RemotePartitionDeleteState int8.
* ``RemoteLogSegmentMetadataSnapshotRecord.json`` (api key 3): SegmentId uuid, StartOffset int64, EndOffset int64,
  BrokerId int32, MaxTimestampMs int64, EventTimestampMs int64, SegmentLeaderEpochs [] {LeaderEpoch, Offset},
  SegmentSizeInBytes int32, CustomMetadata nullable bytes, RemoteLogSegmentState int8; tagged TxnIndexEmpty
  (tag 0).  It names no topic-partition: Kafka 3.1-3.7 wrote it to a broker's local snapshot file of the consumed
  metadata (``RemoteLogMetadataSnapshotFile``, in the partition's directory; gone in 3.8), not to the topic, and
  the serde still reads it.

State ids (``storage/api/.../remote/storage/RemoteLogSegmentState.java`` and ``RemotePartitionDeleteState.java``,
checked in the 4.4.0 ``kafka-storage-api`` jar): segment COPY_SEGMENT_STARTED 0, COPY_SEGMENT_FINISHED 1,
DELETE_SEGMENT_STARTED 2, DELETE_SEGMENT_FINISHED 3; partition DELETE_PARTITION_MARKED 0, DELETE_PARTITION_STARTED
1, DELETE_PARTITION_FINISHED 2.  An id Kafka does not define (``forId`` gives null) keeps its number in ``state``
and has no ``state_name``.

Columns (:data:`REMOTE_RAW_SCHEMA`, one row per record or issue; "-" = null for that record type):

============================  ============================================================================
source_file                   the segment file; set on issue rows and on records with a ``decode_error``
source_partition              the ``__remote_log_metadata`` partition the segment belongs to
kind                          ``record`` (a data record, control records left out) or ``issue``
position                      byte position of the record's batch (of the damaged batch for an issue)
offset                        the record's offset (an issue: the batch's base offset, -1 when unknown)
timestamp                     the record's timestamp (ms; LogAppendTime batches: the batch max timestamp)
record_type                   schema name: ``RemoteLogSegmentMetadataRecord`` (0), ``...UpdateRecord`` (1),
                              ``RemotePartitionDeleteMetadataRecord`` (2), ``...SnapshotRecord`` (3)
api_key                       0-3 as above
topic, topic_id, partition    TopicIdPartition Name, Id (``Uuid.toString()``), Partition; types 0, 1, 2
                              (snapshot: -)
segment_id                    RemoteLogSegmentId.Id (types 0, 1) or SegmentId (3), ``Uuid.toString()``; type 2: -
start_offset, end_offset      the segment's first and last offset, both inclusive; types 0, 3
broker_id                     BrokerId: the broker (leader, or the controller for DELETE_PARTITION_MARKED)
event_timestamp               EventTimestampMs: when the event was generated (ms)
max_timestamp                 MaxTimestampMs: the segment's largest record timestamp (ms); types 0, 3
segment_leader_epochs         SegmentLeaderEpochs as written: [{leader_epoch, start_offset}]; types 0, 3
segment_size_bytes            SegmentSizeInBytes; types 0, 3
state                         RemoteLogSegmentState (types 0, 1, 3) or RemotePartitionDeleteState (type 2)
state_name                    that state's Kafka enum name (null for an id Kafka does not define)
decode_error                  records: null, or why the value did not decode (see below); issues: the
                              :class:`audit.formats.record_batch.ReadIssue` reason (``crc_mismatch``, ...)
detail                        the decoder's message for a record that did not decode, an issue's detail
records_affected              1 for a record; for an issue the records the damaged batch held, when known
============================  ============================================================================

``decode_error`` of a record: ``remote_log_metadata_undecodable`` (truncated or malformed bytes, bytes left over),
``remote_log_metadata_unsupported`` (frame version other than 1, api key above 3 or version above 0: written by a
Kafka newer than these schemas: Kafka's trunk after 4.4 gives all four types a version 1 with more tagged fields), or
``remote_log_metadata_null_value`` (a null value: Kafka 4.4 writes none).  A key, when there is one, is not read.

Like ``AbstractApiMessageSerde.read`` and Kafka's generated readers this rejects a frame version other than 1, an
unknown api key or version, a null non-nullable string or array, a string longer than 32767 bytes, more than 10000
tagged fields in a struct, and bytes left over after the body; a topic name that is not UTF-8 is read with
replacement characters, as Java's ``new String(bytes, UTF_8)`` reads it.  A TxnIndexEmpty tagged field of other
than 1 byte is rejected (Kafka would read one byte and lose its place).  Only the bytes are checked: what Kafka's
``RemoteLogSegmentMetadata`` constructor refuses after the serde read them (a negative start offset, an end
offset below the start, no leader epochs, a state id it does not define) is decoded as written, for the audit
to judge.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .metadata_log import MetadataDecodeError, ByteReader

__all__ = [
    "REMOTE_LOG_METADATA_TOPIC",
    "REMOTE_LOG_SEGMENT_METADATA_RECORD",
    "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD",
    "REMOTE_PARTITION_DELETE_METADATA_RECORD",
    "REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD",
    "RECORD_TYPES",
    "COPY_SEGMENT_STARTED",
    "COPY_SEGMENT_FINISHED",
    "DELETE_SEGMENT_STARTED",
    "DELETE_SEGMENT_FINISHED",
    "DELETE_PARTITION_MARKED",
    "DELETE_PARTITION_STARTED",
    "DELETE_PARTITION_FINISHED",
    "SEGMENT_STATE_NAMES",
    "PARTITION_DELETE_STATE_NAMES",
    "SEGMENT_LEADER_EPOCH",
    "REMOTE_VALUE_FIELDS",
    "REMOTE_RAW_SCHEMA",
    "RemoteLogMetadataDecodeError",
    "UNDECODABLE",
    "UNSUPPORTED",
    "NULL_VALUE",
    "decode_remote_log_metadata_value",
    "decode_remote_log_metadata_segment",
]

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"

# MetadataRecordType ids of storage/src/main/resources/message/
REMOTE_LOG_SEGMENT_METADATA_RECORD = 0
REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD = 1
REMOTE_PARTITION_DELETE_METADATA_RECORD = 2
REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD = 3
#: api key -> schema name (``record_type``)
RECORD_TYPES = {
    REMOTE_LOG_SEGMENT_METADATA_RECORD: "RemoteLogSegmentMetadataRecord",
    REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD: "RemoteLogSegmentMetadataUpdateRecord",
    REMOTE_PARTITION_DELETE_METADATA_RECORD: "RemotePartitionDeleteMetadataRecord",
    REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD: "RemoteLogSegmentMetadataSnapshotRecord",
}
#: The only frame version AbstractApiMessageSerde reads or writes, and the highest record version (Kafka 4.4.0).
SUPPORTED_FRAME_VERSION = 1
MAX_RECORD_VERSION = 0

#: ``RemoteLogSegmentState`` ids
COPY_SEGMENT_STARTED, COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED = 0, 1, 2, 3
SEGMENT_STATE_NAMES = {
    COPY_SEGMENT_STARTED: "COPY_SEGMENT_STARTED",
    COPY_SEGMENT_FINISHED: "COPY_SEGMENT_FINISHED",
    DELETE_SEGMENT_STARTED: "DELETE_SEGMENT_STARTED",
    DELETE_SEGMENT_FINISHED: "DELETE_SEGMENT_FINISHED",
}
#: ``RemotePartitionDeleteState`` ids
DELETE_PARTITION_MARKED, DELETE_PARTITION_STARTED, DELETE_PARTITION_FINISHED = 0, 1, 2
PARTITION_DELETE_STATE_NAMES = {
    DELETE_PARTITION_MARKED: "DELETE_PARTITION_MARKED",
    DELETE_PARTITION_STARTED: "DELETE_PARTITION_STARTED",
    DELETE_PARTITION_FINISHED: "DELETE_PARTITION_FINISHED",
}

#: ``decode_error`` of records whose value did not decode (see the module docstring)
UNDECODABLE = "remote_log_metadata_undecodable"
UNSUPPORTED = "remote_log_metadata_unsupported"
NULL_VALUE = "remote_log_metadata_null_value"

#: One SegmentLeaderEpochEntry: the leader epoch and the first offset written in it.
SEGMENT_LEADER_EPOCH = pa.struct([("leader_epoch", pa.int32()), ("start_offset", pa.int64())])

#: The columns :func:`decode_remote_log_metadata_value` decodes, in :data:`REMOTE_RAW_SCHEMA` order.
REMOTE_VALUE_FIELDS = [
    ("record_type", pa.string()),
    ("api_key", pa.int16()),
    ("topic", pa.string()),
    ("topic_id", pa.string()),
    ("partition", pa.int32()),
    ("segment_id", pa.string()),
    ("start_offset", pa.int64()),
    ("end_offset", pa.int64()),
    ("broker_id", pa.int32()),
    ("event_timestamp", pa.int64()),
    ("max_timestamp", pa.int64()),
    ("segment_leader_epochs", pa.list_(SEGMENT_LEADER_EPOCH)),
    ("segment_size_bytes", pa.int32()),
    ("state", pa.int8()),
    ("state_name", pa.string()),
]

#: Rows of one ``__remote_log_metadata`` segment; the columns are described in the module docstring.
REMOTE_RAW_SCHEMA = pa.schema(
    [
        ("source_file", pa.string()),
        ("source_partition", pa.int32()),
        ("kind", pa.string()),
        ("position", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        *REMOTE_VALUE_FIELDS,
        ("decode_error", pa.string()),
        ("detail", pa.string()),
        ("records_affected", pa.int32()),
    ]
)

_VALUE_NAMES = tuple(name for name, _ in REMOTE_VALUE_FIELDS)
#: Keys of a decoded value that are not columns of REMOTE_RAW_SCHEMA.
_EXTRA_NAMES = ("custom_metadata", "txn_index_empty")
#: Bytes of one SegmentLeaderEpochEntry at the least (LeaderEpoch, Offset, an empty tagged-field section).
_EPOCH_ENTRY_MIN = 4 + 8 + 1
#: Kafka's generated readers: the longest string and the most tagged fields in one struct.
_MAX_STRING = 0x7FFF
_MAX_TAGGED_FIELDS = 10000
#: TxnIndexEmpty's tag in RemoteLogSegmentMetadataRecord and RemoteLogSegmentMetadataSnapshotRecord.
_TXN_INDEX_EMPTY_TAG = 0


class RemoteLogMetadataDecodeError(ValueError):
    """Raised for a ``__remote_log_metadata`` value that does not decode.

    ``reason`` is the record's ``decode_error``: :data:`UNDECODABLE` (truncated or malformed bytes, bytes left
    over), :data:`UNSUPPORTED` (frame version, api key or version these schemas do not define) or
    :data:`NULL_VALUE`.
    """

    def __init__(self, message: str, reason: str = UNDECODABLE):
        super().__init__(message)
        self.reason = reason


class _RemoteReader(ByteReader):
    """A :class:`audit.formats.metadata_log.ByteReader` with nullable compact bytes and Kafka's reader limits.

    The limits are those of Kafka's generated readers (string length, tagged-field count).
    """

    __slots__ = ()

    def compact_bytes(self, field: str):
        n = self.uvarint(field) - 1
        if n < 0:
            return None
        p = self._need(n, field)
        return bytes(self.buf[p : p + n])

    def name(self, field: str) -> str:
        """Read a non-nullable compact string as Kafka's generated readers take it.

        At most 32767 bytes; bytes that are not UTF-8 are replaced (``new String(bytes, UTF_8)``) rather than
        refused.
        """
        n = self.uvarint(field) - 1
        if n < 0:
            raise MetadataDecodeError(f"{self.what}: non-nullable string {field} is null")
        if n > _MAX_STRING:
            raise MetadataDecodeError(f"{self.what}: string field {field} had invalid length {n}")
        p = self._need(n, field)
        return bytes(self.buf[p : p + n]).decode("utf-8", "replace")

    def tagged_fields(self, field: str = "tagged fields"):
        p = self.pos
        count = self.uvarint(field + " count")
        if count > _MAX_TAGGED_FIELDS:
            raise MetadataDecodeError(f"{self.what}: {count} {field}, more than Kafka's {_MAX_TAGGED_FIELDS}")
        self.pos = p
        return super().tagged_fields(field)

    def leader_epochs(self, field: str = "SegmentLeaderEpochs") -> list[dict]:
        n = self._array_len(field, False, _EPOCH_ENTRY_MIN)
        out = []
        for _ in range(n):
            epoch = self.int32(field + ".LeaderEpoch")
            offset = self.int64(field + ".Offset")
            self.skip_tagged_fields(field + " tagged fields")
            out.append({"leader_epoch": epoch, "start_offset": offset})
        return out


def _topic_id_partition(r: _RemoteReader, row: dict) -> None:
    # TopicIdPartitionEntry {Name string, Id uuid, Partition int32}
    row["topic"] = r.name("TopicIdPartition.Name")
    row["topic_id"] = r.uuid("TopicIdPartition.Id")
    row["partition"] = r.int32("TopicIdPartition.Partition")
    r.skip_tagged_fields("TopicIdPartition tagged fields")


def _segment_id(r: _RemoteReader, row: dict) -> None:
    # RemoteLogSegmentIdEntry {TopicIdPartition, Id uuid}
    _topic_id_partition(r, row)
    row["segment_id"] = r.uuid("RemoteLogSegmentId.Id")
    r.skip_tagged_fields("RemoteLogSegmentId tagged fields")


def _segment_body(r: _RemoteReader, row: dict) -> None:
    """Read StartOffset .. RemoteLogSegmentState and the tagged fields (TxnIndexEmpty).

    This is the part RemoteLogSegmentMetadataRecord and RemoteLogSegmentMetadataSnapshotRecord share.
    """
    row["start_offset"] = r.int64("StartOffset")
    row["end_offset"] = r.int64("EndOffset")
    row["broker_id"] = r.int32("BrokerId")
    row["max_timestamp"] = r.int64("MaxTimestampMs")
    row["event_timestamp"] = r.int64("EventTimestampMs")
    row["segment_leader_epochs"] = r.leader_epochs()
    row["segment_size_bytes"] = r.int32("SegmentSizeInBytes")
    row["custom_metadata"] = r.compact_bytes("CustomMetadata")
    row["state"] = r.int8("RemoteLogSegmentState")
    row["txn_index_empty"] = False
    for tag, sub in r.tagged_fields():
        if tag == _TXN_INDEX_EMPTY_TAG:
            row["txn_index_empty"] = sub.boolean("TxnIndexEmpty")
            sub.done("TxnIndexEmpty")
        # other tags: skipped whole by their size


def _read_segment(r: _RemoteReader, row: dict) -> None:
    # RemoteLogSegmentMetadataRecord.json
    _segment_id(r, row)
    _segment_body(r, row)


def _read_update(r: _RemoteReader, row: dict) -> None:
    # RemoteLogSegmentMetadataUpdateRecord.json
    _segment_id(r, row)
    row["broker_id"] = r.int32("BrokerId")
    row["event_timestamp"] = r.int64("EventTimestampMs")
    row["custom_metadata"] = r.compact_bytes("CustomMetadata")
    row["state"] = r.int8("RemoteLogSegmentState")
    r.skip_tagged_fields()


def _read_partition_delete(r: _RemoteReader, row: dict) -> None:
    # RemotePartitionDeleteMetadataRecord.json
    _topic_id_partition(r, row)
    row["broker_id"] = r.int32("BrokerId")
    row["event_timestamp"] = r.int64("EventTimestampMs")
    row["state"] = r.int8("RemotePartitionDeleteState")
    r.skip_tagged_fields()


def _read_snapshot(r: _RemoteReader, row: dict) -> None:
    # RemoteLogSegmentMetadataSnapshotRecord.json
    row["segment_id"] = r.uuid("SegmentId")
    _segment_body(r, row)


_BODY_READERS = {
    REMOTE_LOG_SEGMENT_METADATA_RECORD: _read_segment,
    REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD: _read_update,
    REMOTE_PARTITION_DELETE_METADATA_RECORD: _read_partition_delete,
    REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD: _read_snapshot,
}


def decode_remote_log_metadata_value(value: bytes | None) -> dict:
    """Decode one ``__remote_log_metadata`` record value into a flat dict.

    Parameters
    ----------
    value : bytes or None
        The record's value bytes (any bytes-like object), framed by ``AbstractApiMessageSerde``; ``None`` (a null
        value) raises with reason :data:`NULL_VALUE`.

    Returns
    -------
    dict
        Every key of :data:`REMOTE_VALUE_FIELDS` (``None`` where the record type has no such field, see the
        module docstring), plus ``custom_metadata`` (the CustomMetadata bytes, ``None`` when null or for a
        RemotePartitionDeleteMetadataRecord) and ``txn_index_empty`` (TxnIndexEmpty, ``False`` when the tag is
        absent; ``None`` for record types 1 and 2), which are not columns of :data:`REMOTE_RAW_SCHEMA`.
        ``segment_leader_epochs`` is a list of ``{"leader_epoch", "start_offset"}`` dicts in record order.

    Raises
    ------
    RemoteLogMetadataDecodeError
        For a null value, truncated or malformed bytes, bytes left over after the body, a frame version other
        than 1, an api key other than 0-3 or a record version other than 0 (its ``reason`` tells which).
    """
    if value is None:
        raise RemoteLogMetadataDecodeError("remote log metadata value is null", NULL_VALUE)
    r = _RemoteReader(value, 0, len(value), "remote log metadata record")
    try:  # in AbstractApiMessageSerde.read's order: the frame version is checked before the api key is read
        frame_version = r.uvarint("frame version")
        if frame_version != SUPPORTED_FRAME_VERSION:
            raise RemoteLogMetadataDecodeError(
                f"remote log metadata record: unsupported frame version {frame_version} "
                f"(only {SUPPORTED_FRAME_VERSION} exists)",
                UNSUPPORTED,
            )
        api_key = r.uvarint("api key")
        version = r.uvarint("record version")
    except MetadataDecodeError as exc:
        raise RemoteLogMetadataDecodeError(str(exc)) from None
    record_type = RECORD_TYPES.get(api_key)
    if record_type is None:
        raise RemoteLogMetadataDecodeError(
            f"remote log metadata record: unknown api key {api_key} (Kafka 4.4 defines 0-3)", UNSUPPORTED
        )
    if version > MAX_RECORD_VERSION:
        raise RemoteLogMetadataDecodeError(
            f"{record_type}: unsupported version {version} (highest known {MAX_RECORD_VERSION})", UNSUPPORTED
        )
    row: dict[str, Any] = dict.fromkeys(_VALUE_NAMES + _EXTRA_NAMES)
    row["record_type"] = record_type
    row["api_key"] = api_key
    r.what = f"{record_type} v{version}"
    try:
        _BODY_READERS[api_key](r, row)
        r.done("record body")
    except MetadataDecodeError as exc:
        raise RemoteLogMetadataDecodeError(str(exc)) from None
    names = PARTITION_DELETE_STATE_NAMES if api_key == REMOTE_PARTITION_DELETE_METADATA_RECORD else SEGMENT_STATE_NAMES
    row["state_name"] = names.get(row["state"])
    return row


# --------------------------------------------------------------------------- segments


def _record_rows(
    data: np.ndarray, value_start: np.ndarray, value_len: np.ndarray
) -> tuple[dict[str, list], list, list]:
    """Decode each value into the columns :data:`REMOTE_VALUE_FIELDS`, with its ``decode_error`` and ``detail``.

    ``decode_error`` and ``detail`` are ``None`` when the value decoded.
    """
    cols: dict[str, list] = {name: [] for name in _VALUE_NAMES}
    errors: list = []
    details: list = []
    buf = data.tobytes() if len(value_start) else b""
    empty = dict.fromkeys(_VALUE_NAMES)
    for vs, vl in zip(value_start.tolist(), value_len.tolist()):
        try:
            row = decode_remote_log_metadata_value(None if vl < 0 else buf[vs : vs + vl])
            errors.append(None)
            details.append(None)
        except RemoteLogMetadataDecodeError as exc:
            row = empty
            errors.append(exc.reason)
            details.append(str(exc))
        for name in _VALUE_NAMES:
            cols[name].append(row[name])
    return cols, errors, details


def decode_remote_log_metadata_segment(
    buf: bytes | memoryview, source_file: str, source_partition: int, verify_crc: bool = True
) -> list[pa.RecordBatch]:
    """Decode every record of one ``__remote_log_metadata`` segment into :data:`REMOTE_RAW_SCHEMA` rows.

    Batches and records are read by :mod:`audit.formats.record_batch` (CRC-32C checked, compressed batches
    inflated within the segment's budget) as for ``__consumer_offsets``; each value by
    :func:`decode_remote_log_metadata_value`.

    Parameters
    ----------
    buf : bytes or memoryview
        The whole ``.log`` file's bytes.
    source_file : str
        The file's path, put on issue rows and on records whose value did not decode.
    source_partition : int
        The ``__remote_log_metadata`` partition of the segment.
    verify_crc : bool, default True
        Check each batch's CRC; a batch that fails is an issue row and its records are not read.

    Returns
    -------
    list of pyarrow.RecordBatch
        At most two batches in :data:`REMOTE_RAW_SCHEMA`: the records in log order (control records left out;
        a value that did not decode is a row with its ``decode_error`` and ``detail`` and null decoded
        columns), then, when anything was skipped (a CRC mismatch, a partial or corrupt batch, ...), one issue
        row per skipped batch.  Empty for a segment of no records and no issues.  Never raises on bad bytes.
    """
    from .record_batch import ATTR_CONTROL, extract_records, issue_batch, scan_batches

    scan = scan_batches(buf, verify_crc=verify_crc)
    recs = extract_records(buf, scan)
    out = []
    keep = np.flatnonzero((scan.attributes[recs.batch] & ATTR_CONTROL) == 0) if len(recs) else np.zeros(0, np.int64)
    if len(keep):
        m = len(keep)
        cols, errors, details = _record_rows(recs.data, recs.value_start[keep], recs.value_len[keep])
        batch = recs.batch[keep]
        arrays = {
            "source_file": pa.array([source_file if e is not None else None for e in errors], pa.string()),
            "source_partition": pa.array(np.full(m, source_partition, dtype=np.int32)),
            "kind": pa.array(["record"] * m, pa.string()),
            "position": pa.array(scan.position[batch].astype(np.int64)),
            "offset": pa.array(recs.offset[keep].astype(np.int64)),
            "timestamp": pa.array(recs.timestamp[keep].astype(np.int64)),
            "decode_error": pa.array(errors, pa.string()),
            "detail": pa.array(details, pa.string()),
            "records_affected": pa.array(np.ones(m, dtype=np.int32)),
        }
        for name, typ in REMOTE_VALUE_FIELDS:
            arrays[name] = pa.array(cols[name], typ)
        out.append(pa.RecordBatch.from_arrays([arrays[f.name] for f in REMOTE_RAW_SCHEMA], schema=REMOTE_RAW_SCHEMA))
    issues = scan.issues + recs.issues
    if issues:
        out.append(issue_batch(REMOTE_RAW_SCHEMA, source_file, source_partition, issues))
    return out
