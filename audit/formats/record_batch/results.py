"""What the decoders return: the batch headers and records of a segment, and what could not be read.

:class:`BatchScan` (the batch headers of a segment), :class:`RecordTable` (its records) and :class:`ReadIssue` (what
could not be read, and where), with :func:`issue_batch` for ReadIssue rows as Arrow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["BatchScan", "ReadIssue", "RecordTable", "issue_batch"]


@dataclass
class ReadIssue:
    """Something that could not be read, with where it was.

    ``reason`` is one of: ``partial_batch`` (segment ends inside a batch),
    ``crc_mismatch``, ``corrupt_batch`` (impossible length, record count, last offset or record
    framing), ``unknown_magic``, ``unsupported_compression``, ``decompression_failed``,
    ``decompression_limit`` (the records inflate beyond :func:`max_batch_payload_bytes`, or beyond
    what is left of the segment's :class:`InflationBudget`),
    ``unreadable_file``.  ``position`` is the byte position of the batch (or legacy
    message) in the segment file.
    """

    reason: str
    position: int
    detail: str = ""
    base_offset: int = -1
    records: int = 0


@dataclass
class BatchScan:
    """Headers of the complete batches of one segment, one array element per batch.

    Arrays (all numpy, same length): ``position`` (byte position in file), ``base_offset``,
    ``batch_length``, ``partition_leader_epoch``, ``attributes``, ``last_offset_delta``,
    ``base_timestamp``/``max_timestamp`` (ms), ``producer_id``, ``producer_epoch``,
    ``record_count``, ``crc_ok`` (bool), ``magic``.  A legacy (magic 0/1) message set entry
    is one element: ``base_offset`` is its offset (for a compressed wrapper, the offset of
    its last inner message), ``last_offset_delta`` 0, ``partition_leader_epoch`` and
    ``producer_id`` -1, ``attributes`` its codec and timestamp-type bits, ``record_count``
    1 (0 for a compressed wrapper: not known before decompression), timestamps the message
    timestamp (-1 for magic 0).  ``crc_ok`` is False for a CRC mismatch and for a batch whose
    next offset (base offset + last offset delta + 1) does not fit in an int64 (reported as
    ``corrupt_batch``: Kafka offsets are int64 and never wrap).  ``end_offset`` = last offset + 1
    of the last complete batch with a valid CRC (-1 when none); ``issues`` lists everything skipped.
    """

    position: np.ndarray
    base_offset: np.ndarray
    batch_length: np.ndarray
    partition_leader_epoch: np.ndarray
    attributes: np.ndarray
    last_offset_delta: np.ndarray
    base_timestamp: np.ndarray
    max_timestamp: np.ndarray
    producer_id: np.ndarray
    producer_epoch: np.ndarray
    record_count: np.ndarray
    crc_ok: np.ndarray
    magic: np.ndarray
    issues: list[ReadIssue] = field(default_factory=list)
    bytes_read: int = 0

    def __len__(self) -> int:
        return len(self.position)

    @property
    def end_offset(self) -> int:
        """Kafka offset after the last valid batch (``DefaultRecordBatch.nextOffset``), -1 when none.

        Computed with Python integers: :func:`scan_batches` already marked a batch whose next offset
        would pass 2^63-1 as corrupt, so this never wraps.
        """
        ok = self.crc_ok
        if not ok.any():
            return -1
        last = np.nonzero(ok)[0][-1]
        return int(self.base_offset[last]) + int(self.last_offset_delta[last]) + 1


@dataclass
class RecordTable:
    """Every record of the decodable batches of a segment, one array element per record.

    ``data`` is the uint8 buffer the ``*_start`` positions point into (the segment's bytes,
    with decompressed blocks appended).  ``key_len``/``value_len`` are -1 for null.
    ``offset`` = batch base_offset + offset_delta; ``timestamp`` in ms (LogAppendTime
    batches use the batch max_timestamp, as ``DefaultRecord`` does).  ``batch`` indexes
    the :class:`BatchScan` arrays.
    """

    data: np.ndarray
    batch: np.ndarray
    offset: np.ndarray
    timestamp: np.ndarray
    key_start: np.ndarray
    key_len: np.ndarray
    value_start: np.ndarray
    value_len: np.ndarray
    issues: list[ReadIssue] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.batch)


def issue_batch(schema: pa.Schema, source_file: str, source_partition: int, issues: list[ReadIssue]) -> pa.RecordBatch:
    """Build the ``kind = 'issue'`` rows of ``issues`` in ``schema``.

    ``issues``: :class:`ReadIssue`, one per skipped batch or unreadable file.  ``schema``: a pyarrow schema with the
    columns ``source_file, source_partition, kind, position`` (bytes), ``offset`` (the batch's base offset, -1
    unknown), ``decode_error`` (the reason), ``detail`` and ``records_affected``; its other columns are null.
    """
    import pyarrow as pa

    n = len(issues)
    values = {
        "source_file": [source_file] * n,
        "source_partition": [source_partition] * n,
        "kind": ["issue"] * n,
        "position": [i.position for i in issues],
        "offset": [i.base_offset for i in issues],
        "decode_error": [i.reason for i in issues],
        "detail": [i.detail for i in issues],
        "records_affected": [i.records for i in issues],
    }
    return pa.RecordBatch.from_arrays(
        [pa.array(values[f.name], f.type) if f.name in values else pa.nulls(n, f.type) for f in schema],
        schema=schema,
    )
