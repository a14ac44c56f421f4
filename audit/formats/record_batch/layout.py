"""Byte layouts of Kafka's log: the v2 record batch header, the legacy (magic 0/1) message, the offset index.

Every field is read by name: :class:`BatchHeader` (and :data:`BATCH_HEADER`, the :mod:`struct` that unpacks it)
follows ``org.apache.kafka.common.record.DefaultRecordBatch`` (clients/src/main/java/org/apache/kafka/common/
record/), whose ``*_OFFSET`` constants the ``*_OFFSET`` names here repeat; the legacy message's fields follow
``LegacyRecord``; :data:`INDEX_ENTRY` follows ``OffsetIndex``.  Nothing here reads bytes by itself.
"""

from __future__ import annotations

import operator
import struct
from typing import Any, Callable, NamedTuple

import numpy as np

__all__ = [
    "ATTRIBUTES_OFFSET",
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BASE_OFFSET_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "BATCH_HEADER",
    "BATCH_HEADER_SIZE",
    "COMPRESSION_NAMES",
    "CRC_OFFSET",
    "INDEX_ENTRY",
    "INT64_MAX",
    "LAST_OFFSET_DELTA_OFFSET",
    "LEGACY_ATTRIBUTES_OFFSET",
    "LEGACY_ATTR_MASK",
    "LEGACY_CRC_ATTRIBUTES",
    "LEGACY_CRC_OFFSET",
    "LEGACY_KEY_OFFSET",
    "LEGACY_MIN_SIZE",
    "LEGACY_SIZE_OFFSET",
    "LEGACY_TIMESTAMP_OFFSET",
    "LENGTH_OFFSET",
    "LOG_HEADER",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_RECORD_SIZE",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORDS_OFFSET",
    "BatchHeader",
    "batch_header_fields",
]

# --------------------------------------------------------------------------- v2 record batch header

#: Byte offset of each field of a v2 batch header from the start of the batch (``DefaultRecordBatch``).
BASE_OFFSET_OFFSET = 0  # int64
LENGTH_OFFSET = 8  # int32: bytes of the batch after this field
PARTITION_LEADER_EPOCH_OFFSET = 12  # int32
MAGIC_OFFSET = 16  # int8
CRC_OFFSET = 17  # uint32: CRC-32C of attributes .. batch end
ATTRIBUTES_OFFSET = 21  # int16
LAST_OFFSET_DELTA_OFFSET = 23  # int32
BASE_TIMESTAMP_OFFSET = 27  # int64
MAX_TIMESTAMP_OFFSET = 35  # int64
PRODUCER_ID_OFFSET = 43  # int64
PRODUCER_EPOCH_OFFSET = 51  # int16
BASE_SEQUENCE_OFFSET = 53  # int32
RECORDS_COUNT_OFFSET = 57  # int32
RECORDS_OFFSET = 61  # the records (or the compressed block of them) start here

#: Size of the fixed v2 batch header (base_offset .. record_count), bytes.
BATCH_HEADER_SIZE = RECORDS_OFFSET
#: Bytes before ``batch_length`` counts: base_offset int64 + batch_length int32.
LOG_OVERHEAD = PARTITION_LEADER_EPOCH_OFFSET


class BatchHeader(NamedTuple):
    """The fixed header of a v2 record batch, field by field as ``DefaultRecordBatch`` lays it out.

    Each field's comment gives its byte offset from the start of the batch and its size; :data:`BATCH_HEADER`
    unpacks the 61 bytes into one.
    """

    base_offset: int  # 0, int64
    batch_length: int  # 8, int32: bytes after this field (the batch is LOG_OVERHEAD + batch_length bytes)
    partition_leader_epoch: int  # 12, int32
    magic: int  # 16, int8: 2
    crc: int  # 17, uint32: CRC-32C (Castagnoli) of attributes .. batch end
    attributes: int  # 21, int16: compression (bits 0-2), timestamp type (3), transactional (4), control (5)
    last_offset_delta: int  # 23, int32
    base_timestamp: int  # 27, int64, ms
    max_timestamp: int  # 35, int64, ms
    producer_id: int  # 43, int64
    producer_epoch: int  # 51, int16
    base_sequence: int  # 53, int32
    records_count: int  # 57, int32


#: The v2 batch header, unpacked field by field into a :class:`BatchHeader` (as kafka-python's
#: ``DefaultRecordBase.HEADER_STRUCT`` reads it).
BATCH_HEADER = struct.Struct(
    ">q"  # base_offset int64
    "i"  # batch_length int32
    "i"  # partition_leader_epoch int32
    "b"  # magic int8
    "I"  # crc uint32
    "h"  # attributes int16
    "i"  # last_offset_delta int32
    "q"  # base_timestamp int64
    "q"  # max_timestamp int64
    "q"  # producer_id int64
    "h"  # producer_epoch int16
    "i"  # base_sequence int32
    "i"  # records_count int32
)


def batch_header_fields(*names: str) -> Callable[[tuple], Any]:
    """Make a getter of the fields ``names`` (of :class:`BatchHeader`) from a tuple :data:`BATCH_HEADER` unpacked.

    For the batch walk, which keeps each header as the plain tuple (a :class:`BatchHeader` made per batch would
    slow it by a sixth).

    Returns
    -------
    Callable[[tuple], Any]
        The getter: their values as a tuple, or the value for one name.
    """
    return operator.itemgetter(*(BatchHeader._fields.index(name) for name in names))


#: The two fields every log entry (v2 batch or legacy message) starts with: offset int64, length int32.
LOG_HEADER = struct.Struct(">qi")

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08  # 1 = LogAppendTime: record timestamps are max_timestamp
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
#: Smallest v2 record, bytes: length varint (1) + attributes (1) + timestampDelta, offsetDelta, key length,
#: value length and header count varints (1 each), as ``DefaultRecord.writeTo`` lays it out.  A batch whose
#: ``record_count`` times this exceeds its records payload cannot hold its records: ``corrupt_batch``.
MIN_RECORD_SIZE = 7
INT64_MAX = (1 << 63) - 1

# --------------------------------------------------------------------------- legacy message (magic 0/1)

#: Byte offsets in a legacy message (``LegacyRecord``, after the log's offset int64 and size int32): offset
#: int64 at 0, size int32 at 8, crc uint32 at 12 (CRC-32 of magic .. message end), magic int8 at 16,
#: attributes int8 at 17, for magic 1 a timestamp int64 at 18; then key and value, each an int32 length
#: (-1 null) and that many bytes.
LEGACY_SIZE_OFFSET = LENGTH_OFFSET
LEGACY_CRC_OFFSET = LOG_OVERHEAD
LEGACY_ATTRIBUTES_OFFSET = 17
LEGACY_TIMESTAMP_OFFSET = 18
#: Byte position of the key length in a legacy message, from the start of its offset field, per magic.
LEGACY_KEY_OFFSET = {0: 18, 1: 26}
#: A legacy message's crc uint32 and attributes (read unsigned), from :data:`LEGACY_CRC_OFFSET`; the magic
#: between them is skipped.
LEGACY_CRC_ATTRIBUTES = struct.Struct(">IxB")
#: Smallest legacy message (crc .. value length, empty key and value) per magic, bytes after the size field.
LEGACY_MIN_SIZE = {0: 14, 1: 22}
#: Legacy attributes: codec (bits 0-2) and, for magic 1, timestamp type (bit 3); nothing else is defined.
LEGACY_ATTR_MASK = 0x0F

# --------------------------------------------------------------------------- offset index

#: One ``.index`` entry: relative offset int32, physical position int32 (``OffsetIndex``).
INDEX_ENTRY = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])
