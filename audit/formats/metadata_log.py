"""Decoder for KRaft ``__cluster_metadata`` record values (pure Python, no Spark).

A metadata record value (the value bytes of one record inside a magic-2 record
batch of ``__cluster_metadata-0``) is framed as written by Kafka's
``org.apache.kafka.server.common.serialization.AbstractApiMessageSerde``
(used through ``org.apache.kafka.metadata.MetadataRecordSerde``)::

    frame_version  unsigned varint   (must be 1; 0 was the unsupported KRaft 2.8 preview)
    api_key        unsigned varint   (``MetadataRecordType`` id)
    version        unsigned varint   (record schema version)
    body           the message in Kafka's flexible ("compact") encoding

Flexible encoding as generated from the message JSON schemas (see
``org.apache.kafka.common.protocol.types`` / ``ByteBufferAccessor``):

* int8/16/32/64: big-endian, signed; ``bool``: one byte; ``uint16``: big-endian.
* ``uuid``: 16 bytes (most- then least-significant long), shown here like
  ``org.apache.kafka.common.Uuid.toString()``: URL-safe base64, no padding (22 chars).
* compact string / compact array: unsigned varint ``length + 1`` (0 = null) then
  the UTF-8 bytes / elements.
* every struct ends with its tagged fields: unsigned varint count, then per field
  unsigned varint tag, unsigned varint size, ``size`` bytes of value. Unknown tags
  are skipped, exactly as Kafka keeps them as unknown tagged fields.

Schemas followed (``metadata/src/main/resources/common/metadata/`` in apache/kafka, read
from the ``kafka-metadata`` jars of Kafka 4.4.0 and 3.9.2), all with ``flexibleVersions: 0+``:

* ``RegisterBrokerRecord.json`` (api key 0, versions 0-4; 3.9.2 has 0-3): BrokerId int32,
  IsMigratingZkBroker bool (v2+), IncarnationId uuid, BrokerEpoch int64,
  EndPoints []{Name string, Host string, Port uint16, SecurityProtocol int16},
  Features []{Name string, MinSupportedVersion int16, MaxSupportedVersion int16},
  Rack nullable string, Fenced bool, InControlledShutdown bool (v1+);
  tagged: LogDirs []uuid (tag 0, v3+), CordonedLogDirs nullable []uuid (tag 1, v4+).
* ``UnregisterBrokerRecord.json`` (api key 1, version 0): BrokerId int32, BrokerEpoch int64.
* ``TopicRecord.json`` (api key 2, version 0): Name string, TopicId uuid.
* ``PartitionRecord.json`` (api key 3, versions 0-2): PartitionId int32,
  TopicId uuid, Replicas []int32, Isr []int32, RemovingReplicas []int32,
  AddingReplicas []int32, Leader int32, LeaderEpoch int32, PartitionEpoch int32,
  Directories []uuid (v1+); tagged: LeaderRecoveryState int8 (tag 0, default 0),
  EligibleLeaderReplicas nullable []int32 (tag 1, v2+, KIP-966), LastKnownElr nullable
  []int32 (tag 2, v2+).
* ``PartitionChangeRecord.json`` (api key 5, versions 0-2): PartitionId int32,
  TopicId uuid; all else tagged: Isr (tag 0, default null), Leader int32 (tag 1,
  default -2 = leader did not change), Replicas (tag 2), RemovingReplicas (tag 3),
  AddingReplicas (tag 4), LeaderRecoveryState int8 (tag 5, default -1 = did not
  change), EligibleLeaderReplicas (tag 6, v2+), LastKnownElr (tag 7, v2+),
  Directories []uuid (tag 8, v1+).
* ``FenceBrokerRecord.json`` (api key 7, version 0) and ``UnfenceBrokerRecord.json``
  (api key 8, version 0): Id int32, Epoch int64.
* ``RemoveTopicRecord.json`` (api key 9, version 0): TopicId uuid.
* ``BrokerRegistrationChangeRecord.json`` (api key 17, versions 0-3; 3.9.2 has 0-2):
  BrokerId int32, BrokerEpoch int64; tagged: Fenced int8 (tag 0), InControlledShutdown
  int8 (tag 1, v1+), LogDirs []uuid (tag 2, v2+), CordonedLogDirs (tag 3, v3+).
* ``ClearElrRecord.json`` (api key 28, version 0, 4.x): TopicName string (empty = all
  topics).
* ``ConfigRecord.json`` (api key 4, version 0): ResourceType int8 (2 = topic, 4 = broker,
  ``ConfigResource.Type``), ResourceName string, Name string, Value nullable string (null: the
  config was deleted, back to its default). The audit reads topics' ``remote.storage.enable``
  (tiered storage, KIP-405) from it.

Every other record type of those directories (FeatureLevelRecord,
ProducerIdsRecord, NoOpRecord, RegisterControllerRecord, BeginTransactionRecord, ...,
see :data:`RECORD_TYPES`) is named but its body is not read: nothing the audit uses is in
it, so it can never fail to decode.

Like ``AbstractApiMessageSerde.read`` this rejects a frame version other than 1,
bytes left over after the body, and (for the decoded record types above) versions
newer than the schemas listed, because their layout is unknown. An api key Kafka 4.4.0
does not define is reported as ``record_type = f"api_key_{n}"`` with no fields decoded.
"""

from __future__ import annotations

import base64
import struct

import pyarrow as pa

__all__ = [
    "MetadataDecodeError",
    "METADATA_ROW_FIELDS",
    "RECORD_TYPES",
    "decode_metadata_value",
    "uuid_to_str",
]


class MetadataDecodeError(ValueError):
    """Raised for truncated or malformed metadata record values."""


# Kafka's MetadataRecordType ids for the records this module decodes.
REGISTER_BROKER_RECORD = 0
UNREGISTER_BROKER_RECORD = 1
TOPIC_RECORD = 2
PARTITION_RECORD = 3
PARTITION_CHANGE_RECORD = 5
FENCE_BROKER_RECORD = 7
UNFENCE_BROKER_RECORD = 8
REMOVE_TOPIC_RECORD = 9
BROKER_REGISTRATION_CHANGE_RECORD = 17
CLEAR_ELR_RECORD = 28
CONFIG_RECORD = 4
#: ConfigRecord.ResourceType of a topic (``org.apache.kafka.common.config.ConfigResource.Type.TOPIC``).
CONFIG_RESOURCE_TOPIC = 2

#: api key -> (record_type name, highest schema version in Kafka 4.4.0), for every record
#: type of ``metadata/src/main/resources/common/metadata/`` (api keys 6, 13 and 16 are
#: unused).  Only the types in ``_BODY_READERS`` are decoded (and their version checked).
RECORD_TYPES = {
    REGISTER_BROKER_RECORD: ("RegisterBrokerRecord", 4),
    UNREGISTER_BROKER_RECORD: ("UnregisterBrokerRecord", 0),
    TOPIC_RECORD: ("TopicRecord", 0),
    PARTITION_RECORD: ("PartitionRecord", 2),
    CONFIG_RECORD: ("ConfigRecord", 0),
    PARTITION_CHANGE_RECORD: ("PartitionChangeRecord", 2),
    FENCE_BROKER_RECORD: ("FenceBrokerRecord", 0),
    UNFENCE_BROKER_RECORD: ("UnfenceBrokerRecord", 0),
    REMOVE_TOPIC_RECORD: ("RemoveTopicRecord", 0),
    10: ("DelegationTokenRecord", 0),
    11: ("UserScramCredentialRecord", 0),
    12: ("FeatureLevelRecord", 0),
    14: ("ClientQuotaRecord", 0),
    15: ("ProducerIdsRecord", 0),
    BROKER_REGISTRATION_CHANGE_RECORD: ("BrokerRegistrationChangeRecord", 3),
    18: ("AccessControlEntryRecord", 0),
    19: ("RemoveAccessControlEntryRecord", 0),
    20: ("NoOpRecord", 0),
    21: ("ZkMigrationStateRecord", 0),
    22: ("RemoveUserScramCredentialRecord", 0),
    23: ("BeginTransactionRecord", 0),
    24: ("EndTransactionRecord", 0),
    25: ("AbortTransactionRecord", 0),
    26: ("RemoveDelegationTokenRecord", 0),
    27: ("RegisterControllerRecord", 0),
    CLEAR_ELR_RECORD: ("ClearElrRecord", 0),
    29: ("UnregisterControllerRecord", 0),
}

#: The only frame version Kafka's AbstractApiMessageSerde reads or writes.
SUPPORTED_FRAME_VERSION = 1

#: PartitionChangeRecord.Leader default: the leader did not change.
NO_LEADER_CHANGE = -2
#: Leader value meaning "no leader".
NO_LEADER = -1
#: LeaderRecoveryState values (org.apache.kafka.metadata.LeaderRecoveryState).
RECOVERED = 0
RECOVERING = 1

#: Flattened row produced by decode_metadata_value, in column order.
METADATA_ROW_FIELDS = [
    ("api_key", pa.int16()),
    ("record_version", pa.int16()),
    ("record_type", pa.string()),
    ("topic_name", pa.string()),
    ("topic_id", pa.string()),
    ("partition", pa.int32()),
    ("leader", pa.int32()),
    ("leader_epoch", pa.int32()),
    ("partition_epoch", pa.int32()),
    ("leader_recovery_state", pa.int8()),
    ("replicas", pa.list_(pa.int32())),
    ("isr", pa.list_(pa.int32())),
    ("broker_id", pa.int32()),
    ("broker_epoch", pa.int64()),
    # broker records: fencing 1 fenced, -1 unfenced, 0 unchanged (BrokerRegistrationFencingChange; a
    # RegisterBrokerRecord's state is 1 or -1, Fence/UnfenceBrokerRecord 1 / -1); in_controlled_shutdown 1 when
    # the broker entered controlled shutdown (RegisterBrokerRecord v1+, BrokerRegistrationChangeRecord tag 1)
    ("fenced", pa.int8()),
    ("in_controlled_shutdown", pa.int8()),
    # KIP-966 (PartitionRecord / PartitionChangeRecord v2+): null = absent (unchanged)
    ("eligible_leader_replicas", pa.list_(pa.int32())),
    ("last_known_elr", pa.list_(pa.int32())),
    # ConfigRecord: the resource (type 2 topic, 4 broker, ...; its name) and one config key = value (null: deleted)
    ("config_resource_type", pa.int8()),
    ("config_resource_name", pa.string()),
    ("config_name", pa.string()),
    ("config_value", pa.string()),
]

_FIELD_NAMES = tuple(name for name, _ in METADATA_ROW_FIELDS)

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_UINT16 = struct.Struct(">H")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


def uuid_to_str(raw: bytes) -> str:
    """16 uuid bytes -> Kafka ``Uuid.toString()`` (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


class ByteReader:
    """Cursor over a bytes-like object; every read checks for truncation."""

    __slots__ = ("buf", "pos", "end", "what")

    def __init__(self, buf, pos: int, end: int, what: str):
        self.buf = buf
        self.pos = pos
        self.end = end
        self.what = what

    def _need(self, n: int, field: str) -> int:
        p = self.pos
        if p + n > self.end:
            raise MetadataDecodeError(
                f"{self.what}: truncated reading {field} at byte {p} (need {n}, have {self.end - p})"
            )
        self.pos = p + n
        return p

    def uvarint(self, field: str) -> int:
        result = 0
        shift = 0
        buf = self.buf
        while True:
            if self.pos >= self.end:
                raise MetadataDecodeError(f"{self.what}: truncated unsigned varint for {field} at byte {self.pos}")
            b = buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:  # Kafka's readUnsignedVarint accepts at most 5 bytes
                raise MetadataDecodeError(f"{self.what}: unsigned varint for {field} is longer than 5 bytes")

    def int8(self, field: str) -> int:
        return _INT8.unpack_from(self.buf, self._need(1, field))[0]

    def boolean(self, field: str) -> bool:
        return self.buf[self._need(1, field)] != 0

    def int16(self, field: str) -> int:
        return _INT16.unpack_from(self.buf, self._need(2, field))[0]

    def uint16(self, field: str) -> int:
        return _UINT16.unpack_from(self.buf, self._need(2, field))[0]

    def int32(self, field: str) -> int:
        return _INT32.unpack_from(self.buf, self._need(4, field))[0]

    def int64(self, field: str) -> int:
        return _INT64.unpack_from(self.buf, self._need(8, field))[0]

    def uuid(self, field: str) -> str:
        p = self._need(16, field)
        return uuid_to_str(bytes(self.buf[p : p + 16]))

    def compact_string(self, field: str, nullable: bool = False):
        n = self.uvarint(field) - 1
        if n < 0:
            if nullable:
                return None
            raise MetadataDecodeError(f"{self.what}: non-nullable string {field} is null")
        p = self._need(n, field)
        try:
            return bytes(self.buf[p : p + n]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MetadataDecodeError(f"{self.what}: {field} is not valid UTF-8: {exc}") from None

    def _array_len(self, field: str, nullable: bool, elem_size: int):
        n = self.uvarint(field) - 1
        if n < 0:
            if nullable:
                return None
            raise MetadataDecodeError(f"{self.what}: non-nullable array {field} is null")
        if elem_size and self.pos + n * elem_size > self.end:
            raise MetadataDecodeError(
                f"{self.what}: truncated array {field}: {n} elements of {elem_size} bytes "
                f"at byte {self.pos}, only {self.end - self.pos} bytes left"
            )
        return n

    def int32_array(self, field: str, nullable: bool = False):
        n = self._array_len(field, nullable, 4)
        if n is None:
            return None
        p = self._need(4 * n, field)
        return list(struct.unpack_from(f">{n}i", self.buf, p))

    def uuid_array(self, field: str, nullable: bool = False):
        n = self._array_len(field, nullable, 16)
        if n is None:
            return None
        return [self.uuid(field) for _ in range(n)]

    def struct_array(self, field: str, read_one):
        n = self._array_len(field, False, 0)
        for _ in range(n):
            read_one(self)

    def tagged_fields(self, field: str = "tagged fields"):
        """Yield (tag, sub-reader over exactly that field's bytes)."""
        count = self.uvarint(field + " count")
        for _ in range(count):
            tag = self.uvarint(field + " tag")
            size = self.uvarint(f"{field} size (tag {tag})")
            p = self._need(size, f"{field} value (tag {tag})")
            yield tag, ByteReader(self.buf, p, p + size, f"{self.what} tag {tag}")

    def skip_tagged_fields(self, field: str = "tagged fields"):
        for _tag, _sub in self.tagged_fields(field):
            pass

    def done(self, field: str):
        if self.pos != self.end:
            raise MetadataDecodeError(f"{self.what}: {self.end - self.pos} unexpected byte(s) after {field}")


def _empty_row(api_key: int, version: int, record_type: str) -> dict:
    row = dict.fromkeys(_FIELD_NAMES)
    row["api_key"] = api_key
    row["record_version"] = version
    row["record_type"] = record_type
    return row


# --- per-record bodies -------------------------------------------------------


def _read_topic(r: ByteReader, version: int, row: dict):
    # TopicRecord.json
    row["topic_name"] = r.compact_string("Name")
    row["topic_id"] = r.uuid("TopicId")
    r.skip_tagged_fields()


def _read_partition(r: ByteReader, version: int, row: dict):
    # PartitionRecord.json. Removing/AddingReplicas were nullable in the first
    # schema revision, so a null (length 0) is accepted there.
    row["partition"] = r.int32("PartitionId")
    row["topic_id"] = r.uuid("TopicId")
    row["replicas"] = r.int32_array("Replicas")
    row["isr"] = r.int32_array("Isr")
    r.int32_array("RemovingReplicas", nullable=True)
    r.int32_array("AddingReplicas", nullable=True)
    row["leader"] = r.int32("Leader")
    row["leader_epoch"] = r.int32("LeaderEpoch")
    row["partition_epoch"] = r.int32("PartitionEpoch")
    if version >= 1:
        r.uuid_array("Directories")
    recovery = RECOVERED  # schema default of the tagged field (omitted when 0)
    for tag, sub in r.tagged_fields():
        if tag == 0:
            recovery = sub.int8("LeaderRecoveryState")
            sub.done("LeaderRecoveryState")
        elif tag == 1 and version >= 2:
            row["eligible_leader_replicas"] = sub.int32_array("EligibleLeaderReplicas", nullable=True)
            sub.done("EligibleLeaderReplicas")
        elif tag == 2 and version >= 2:
            row["last_known_elr"] = sub.int32_array("LastKnownElr", nullable=True)
            sub.done("LastKnownElr")
        # any other tag is skipped whole by the size prefix.
    row["leader_recovery_state"] = recovery


def _read_partition_change(r: ByteReader, version: int, row: dict):
    # PartitionChangeRecord.json: only PartitionId and TopicId are fixed.
    row["partition"] = r.int32("PartitionId")
    row["topic_id"] = r.uuid("TopicId")
    leader = NO_LEADER_CHANGE
    for tag, sub in r.tagged_fields():
        if tag == 0:
            row["isr"] = sub.int32_array("Isr", nullable=True)
            sub.done("Isr")
        elif tag == 1:
            leader = sub.int32("Leader")
            sub.done("Leader")
        elif tag == 2:
            row["replicas"] = sub.int32_array("Replicas", nullable=True)
            sub.done("Replicas")
        elif tag == 5:
            state = sub.int8("LeaderRecoveryState")
            sub.done("LeaderRecoveryState")
            # -1 is the schema default, "did not change": same as absent.
            row["leader_recovery_state"] = None if state == -1 else state
        elif tag == 6 and version >= 2:
            row["eligible_leader_replicas"] = sub.int32_array("EligibleLeaderReplicas", nullable=True)
            sub.done("EligibleLeaderReplicas")
        elif tag == 7 and version >= 2:
            row["last_known_elr"] = sub.int32_array("LastKnownElr", nullable=True)
            sub.done("LastKnownElr")
        # tags 3/4 (Removing/AddingReplicas), 8 (Directories, v1+) and unknown
        # tags are skipped by size.
    row["leader"] = leader


def _read_endpoint(r: ByteReader):
    r.compact_string("EndPoints.Name")
    r.compact_string("EndPoints.Host")
    r.uint16("EndPoints.Port")
    r.int16("EndPoints.SecurityProtocol")
    r.skip_tagged_fields("EndPoints tagged fields")


def _read_feature(r: ByteReader):
    r.compact_string("Features.Name")
    r.int16("Features.MinSupportedVersion")
    r.int16("Features.MaxSupportedVersion")
    r.skip_tagged_fields("Features tagged fields")


def _read_register_broker(r: ByteReader, version: int, row: dict):
    # RegisterBrokerRecord.json
    row["broker_id"] = r.int32("BrokerId")
    if version >= 2:
        r.boolean("IsMigratingZkBroker")
    r.uuid("IncarnationId")
    row["broker_epoch"] = r.int64("BrokerEpoch")
    r.struct_array("EndPoints", _read_endpoint)
    r.struct_array("Features", _read_feature)
    r.compact_string("Rack", nullable=True)
    row["fenced"] = 1 if r.boolean("Fenced") else -1
    row["in_controlled_shutdown"] = int(r.boolean("InControlledShutdown")) if version >= 1 else 0
    r.skip_tagged_fields()  # tags 0 LogDirs (v3+) and 1 CordonedLogDirs (v4+) are not needed


def _broker_and_epoch(id_field: str, epoch_field: str, fenced: int | None = None):
    """Read records that start with a broker id (int32) and epoch (int64), then only tagged fields.

    These are FenceBrokerRecord.json / UnfenceBrokerRecord.json (Id, Epoch; ``fenced`` 1 / -1) and
    UnregisterBrokerRecord.json (BrokerId, BrokerEpoch).
    """

    def read(r: ByteReader, version: int, row: dict):
        row["broker_id"] = r.int32(id_field)
        row["broker_epoch"] = r.int64(epoch_field)
        if fenced is not None:
            row["fenced"] = fenced
        r.skip_tagged_fields()

    return read


def _read_broker_registration_change(r: ByteReader, version: int, row: dict):
    # BrokerRegistrationChangeRecord.json v0-3: BrokerId, BrokerEpoch; tagged Fenced int8 (tag 0,
    # BrokerRegistrationFencingChange: 1 FENCE, 0 NONE, -1 UNFENCE), InControlledShutdown int8 (tag 1, v1+:
    # 1 IN_CONTROLLED_SHUTDOWN), LogDirs (tag 2, v2+) and CordonedLogDirs (v3+), not needed
    row["broker_id"] = r.int32("BrokerId")
    row["broker_epoch"] = r.int64("BrokerEpoch")
    row["fenced"] = row["in_controlled_shutdown"] = 0
    for tag, sub in r.tagged_fields():
        if tag == 0:
            row["fenced"] = sub.int8("Fenced")
            sub.done("Fenced")
        elif tag == 1:
            row["in_controlled_shutdown"] = sub.int8("InControlledShutdown")
            sub.done("InControlledShutdown")


_read_broker_epoch = _broker_and_epoch("BrokerId", "BrokerEpoch")


def _read_clear_elr(r: ByteReader, version: int, row: dict):
    # ClearElrRecord.json: TopicName ("" = every topic)
    row["topic_name"] = r.compact_string("TopicName")
    r.skip_tagged_fields()


def _read_config(r: ByteReader, version: int, row: dict):
    # ConfigRecord.json
    row["config_resource_type"] = r.int8("ResourceType")
    row["config_resource_name"] = r.compact_string("ResourceName")
    row["config_name"] = r.compact_string("Name")
    row["config_value"] = r.compact_string("Value", nullable=True)
    r.skip_tagged_fields()


def _read_remove_topic(r: ByteReader, version: int, row: dict):
    # RemoveTopicRecord.json
    row["topic_id"] = r.uuid("TopicId")
    r.skip_tagged_fields()


_BODY_READERS = {
    REGISTER_BROKER_RECORD: _read_register_broker,
    TOPIC_RECORD: _read_topic,
    PARTITION_RECORD: _read_partition,
    PARTITION_CHANGE_RECORD: _read_partition_change,
    FENCE_BROKER_RECORD: _broker_and_epoch("Id", "Epoch", fenced=1),
    UNFENCE_BROKER_RECORD: _broker_and_epoch("Id", "Epoch", fenced=-1),
    REMOVE_TOPIC_RECORD: _read_remove_topic,
    UNREGISTER_BROKER_RECORD: _read_broker_epoch,
    BROKER_REGISTRATION_CHANGE_RECORD: _read_broker_registration_change,
    CLEAR_ELR_RECORD: _read_clear_elr,
    CONFIG_RECORD: _read_config,
}


def decode_metadata_value(value: bytes) -> dict:
    """Decode one ``__cluster_metadata`` record value into a flat dict.

    The dict always has every key of :data:`METADATA_ROW_FIELDS`; keys that do
    not apply to the record type are ``None``. Per type:

    * TopicRecord: ``topic_name``, ``topic_id``.
    * PartitionRecord: ``topic_id``, ``partition``, ``replicas``, ``isr``,
      ``leader`` (-1 = none), ``leader_epoch``, ``partition_epoch``,
      ``leader_recovery_state`` (tagged, default 0 when absent; 1 = RECOVERING).
    * PartitionChangeRecord: ``topic_id``, ``partition``, ``leader`` (-2 =
      NO_LEADER_CHANGE when the tag is absent, -1 = no leader), ``isr`` /
      ``replicas`` (``None`` = unchanged), ``leader_recovery_state`` (``None`` =
      unchanged, i.e. tag absent or -1; 1 = RECOVERING after an unclean
      election, 0 = recovered / clean).
      Both partition types also give ``eligible_leader_replicas`` and ``last_known_elr``
      (v2+ tagged fields, KIP-966; ``None`` when absent).
    * RemoveTopicRecord: ``topic_id``.  ClearElrRecord: ``topic_name`` ("" = all).
    * ConfigRecord: ``config_resource_type`` (2 = topic), ``config_resource_name``, ``config_name``,
      ``config_value`` (``None``: the config was deleted).
    * RegisterBrokerRecord / UnregisterBrokerRecord / FenceBrokerRecord /
      UnfenceBrokerRecord / BrokerRegistrationChangeRecord: ``broker_id``, ``broker_epoch``, ``fenced``
      (1 fenced, -1 unfenced, 0 unchanged) and ``in_controlled_shutdown`` (1 entered).
    * any other record type of :data:`RECORD_TYPES`: its name, nothing else (the body
      is not read); an api key Kafka does not define: ``record_type = f"api_key_{n}"``.

    Raises :class:`MetadataDecodeError` for truncated or malformed bytes, a frame
    version other than 1, or an unsupported version of a decoded record type.
    """
    if value is None:
        raise MetadataDecodeError("metadata record value is null")
    r = ByteReader(value, 0, len(value), "metadata record")
    frame_version = r.uvarint("frame version")
    if frame_version != SUPPORTED_FRAME_VERSION:
        raise MetadataDecodeError(
            f"metadata record: unsupported frame version {frame_version} (only {SUPPORTED_FRAME_VERSION} exists)"
        )
    api_key = r.uvarint("api key")
    version = r.uvarint("record version")
    if api_key > 0x7FFF or version > 0x7FFF:
        raise MetadataDecodeError(f"metadata record: api key {api_key} / version {version} out of int16 range")

    known = RECORD_TYPES.get(api_key)
    if known is None:
        return _empty_row(api_key, version, f"api_key_{api_key}")
    record_type, max_version = known
    if api_key not in _BODY_READERS:
        return _empty_row(api_key, version, record_type)
    if version > max_version:
        raise MetadataDecodeError(f"{record_type}: unsupported version {version} (highest known {max_version})")
    row = _empty_row(api_key, version, record_type)
    r.what = f"{record_type} v{version}"
    _BODY_READERS[api_key](r, version, row)
    r.done("record body")
    return row
