"""Kafka log segments: record batches (magic 2), vectorised with numpy; legacy message sets (magic 0/1).

Follows Kafka's ``org.apache.kafka.common.record.DefaultRecordBatch`` and
``DefaultRecord`` (clients/src/main/java/org/apache/kafka/common/record/) and
KIP-98's batch layout. The batch walk is one Python step per *batch*; every
per-*record* field is decoded for all records of a segment at once with numpy
(records are framed one numpy pass per record position while many batches are left, then
record by record for the few left), so a segment of millions of records costs a few dozen
array operations and one short Python step per record at most.

Legacy message sets (magic 0 and 1, ``LegacyRecord``/``AbstractLegacyRecordBatch``: logs
written before Kafka 0.11, or under an old ``log.message.format.version``) are read one Python
step per top-level message; the inner messages of a compressed wrapper are found by walking
their size chain and decoded with numpy, as kafka-python's ``LegacyRecordBatch`` reads them.

Nothing here knows about Spark. Bad input never raises: corrupt batches and partial
tails are returned as :class:`ReadIssue` rows with the byte position where they were found.
Work and memory stay proportional to the segment's size: decompression is capped per batch
and, for the segment's compressed batches together, by an :class:`InflationBudget`.

The package's modules, each importable on its own:

- :mod:`.layout`: the byte layouts, field by field (:class:`BatchHeader`, the legacy message, the ``.index``
  entry) and the attribute bits;
- :mod:`.primitives`: big-endian integers and varints at many positions at once (:func:`read_varint`,
  :func:`read_int`, :func:`overlapping_view`, :func:`byte_view`);
- :mod:`.results`: :class:`BatchScan`, :class:`RecordTable`, :class:`ReadIssue` and :func:`issue_batch`;
- :mod:`.compression`: :func:`decompress`, bounded, and the segment's :class:`InflationBudget`;
- :mod:`.batches`: the batch chain (:func:`scan_batches`, :func:`scan_tail`, :func:`index_start`);
- :mod:`.records`: the records of v2 batches (:func:`extract_records`);
- :mod:`.legacy`: the messages of legacy message sets (:func:`extract_legacy_records`).

Everything is re-exported here.  A module-level setting is read in the module that uses it (for example
``records.LOCKSTEP_MIN_BATCHES``): to change it, set it there.
"""

from __future__ import annotations

from .batches import index_start, scan_batches, scan_tail
from .compression import (
    MAX_BATCH_PAYLOAD_BYTES,
    SEGMENT_INFLATION_FLOOR,
    SEGMENT_INFLATION_RATIO,
    SEGMENT_RECORD_FLOOR,
    STORED_BYTES_PER_RECORD,
    DecompressionLimitError,
    InflationBudget,
    decompress,
    max_batch_payload_bytes,
)
from .layout import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    COMPRESSION_NAMES,
    INDEX_ENTRY,
    INT64_MAX,
    LEGACY_ATTR_MASK,
    LEGACY_MIN_SIZE,
    LOG_OVERHEAD,
    MIN_RECORD_SIZE,
    BatchHeader,
)
from .legacy import extract_legacy_records
from .primitives import byte_view, overlapping_view, read_int, read_varint
from .records import short_heads, LOCKSTEP_MIN_BATCHES, control_types, extract_records
from .results import BatchScan, ReadIssue, RecordTable, issue_batch

__all__ = [
    "short_heads",
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER",
    "BATCH_HEADER_SIZE",
    "COMPRESSION_NAMES",
    "INDEX_ENTRY",
    "INT64_MAX",
    "LEGACY_ATTR_MASK",
    "LEGACY_MIN_SIZE",
    "LOCKSTEP_MIN_BATCHES",
    "LOG_OVERHEAD",
    "MAX_BATCH_PAYLOAD_BYTES",
    "MIN_RECORD_SIZE",
    "SEGMENT_INFLATION_FLOOR",
    "SEGMENT_INFLATION_RATIO",
    "SEGMENT_RECORD_FLOOR",
    "STORED_BYTES_PER_RECORD",
    "BatchHeader",
    "BatchScan",
    "DecompressionLimitError",
    "InflationBudget",
    "ReadIssue",
    "RecordTable",
    "byte_view",
    "control_types",
    "decompress",
    "extract_legacy_records",
    "extract_records",
    "index_start",
    "issue_batch",
    "max_batch_payload_bytes",
    "overlapping_view",
    "read_int",
    "read_varint",
    "scan_batches",
    "scan_tail",
]
