"""Kafka's compression codecs, bounded, so that a decompression bomb costs at most a cap.

:func:`decompress` inflates one records block (gzip, snappy, lz4, zstd) and stops at a cap, so a decompression bomb
costs at most the cap; :class:`InflationBudget` bounds what the compressed batches of one segment inflate to
together.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .layout import ATTR_COMPRESSION_MASK, LOG_OVERHEAD
from .primitives import byte_view

if TYPE_CHECKING:
    from .results import BatchScan

__all__ = [
    "MAX_BATCH_PAYLOAD_BYTES",
    "SEGMENT_INFLATION_FLOOR",
    "SEGMENT_INFLATION_RATIO",
    "SEGMENT_RECORD_FLOOR",
    "STORED_BYTES_PER_RECORD",
    "DecompressionLimitError",
    "InflationBudget",
    "decompress",
    "max_batch_payload_bytes",
]

#: Largest decompressed records payload of one batch, bytes (env ``KOA_MAX_BATCH_BYTES`` overrides it).
#: Kafka bounds a batch as stored by ``max.message.bytes`` (broker ``message.max.bytes``, default 1,048,588
#: bytes, compressed); 64 MiB leaves 64x that for the compression ratio.  A batch that inflates beyond it
#: (a decompression bomb, or corruption) is reported as ``decompression_limit`` and not decoded; so is one
#: that would pass what is left of its segment's :class:`InflationBudget`.
MAX_BATCH_PAYLOAD_BYTES = 64 << 20


def max_batch_payload_bytes() -> int:
    """Return the decompressed-payload cap of one batch in bytes.

    Returns
    -------
    int
        ``KOA_MAX_BATCH_BYTES`` when set to a positive integer, else :data:`MAX_BATCH_PAYLOAD_BYTES`.
    """
    import os

    try:
        v = int(os.environ.get("KOA_MAX_BATCH_BYTES", ""))
    except ValueError:
        return MAX_BATCH_PAYLOAD_BYTES
    return v if v > 0 else MAX_BATCH_PAYLOAD_BYTES


class DecompressionLimitError(ValueError):
    """A compressed records block inflates beyond the cap it was given (see :func:`decompress`)."""


#: What the compressed batches of one segment may inflate to *in total* (the per-batch cap alone lets a
#: small segment of many bombs, each just under the cap, inflate without bound): their records blocks
#: at most max(:data:`SEGMENT_INFLATION_FLOOR`, :data:`SEGMENT_INFLATION_RATIO` x their stored bytes)
#: decompressed bytes, holding at most max(:data:`SEGMENT_RECORD_FLOOR`, stored bytes /
#: :data:`STORED_BYTES_PER_RECORD`) records.  A batch (or legacy wrapper message) that would pass
#: either is reported as ``decompression_limit`` and not decoded; decoding memory and time grow with
#: the records and bytes decoded, so both stay proportional to the segment's size (a segment under
#: 1 MiB decodes within about 256 MiB).  Compressed offset commits take well over 4 stored bytes a
#: record (neighbours differ at least in partition and offset) and usually inflate 2-10 fold; what
#: passes the budget (a small segment whose batches inflate past 16 MiB at more than 16 fold) is
#: reported, not decoded.
SEGMENT_INFLATION_FLOOR = 16 << 20
SEGMENT_INFLATION_RATIO = 16
SEGMENT_RECORD_FLOOR = 1 << 16
STORED_BYTES_PER_RECORD = 4


@dataclass
class InflationBudget:
    """What is left of one segment's inflation budget (see :data:`SEGMENT_INFLATION_FLOOR`).

    Its fields: the decompressed ``bytes`` and ``records`` of compressed batches.
    """

    bytes: int
    records: int

    @classmethod
    def for_batches(cls, scan: "BatchScan", mask: np.ndarray) -> "InflationBudget":
        """Make the budget of the batches of ``scan`` selected by ``mask``, from their compressed ones' stored size."""
        compressed = mask & ((scan.attributes & ATTR_COMPRESSION_MASK) != 0)
        stored = int(scan.batch_length[compressed].astype(np.int64).sum()) + LOG_OVERHEAD * int(compressed.sum())
        return cls(
            max(SEGMENT_INFLATION_FLOOR, SEGMENT_INFLATION_RATIO * stored),
            max(SEGMENT_RECORD_FLOOR, stored // STORED_BYTES_PER_RECORD),
        )

    def cap(self) -> int:
        """Return the decompressed bytes the next block may have: the per-batch cap or what is left, the smaller."""
        return max(min(max_batch_payload_bytes(), self.bytes), 0)

    def check_records(self, n: int) -> None:
        """Raise :class:`DecompressionLimitError` when ``n`` more records would pass the budget."""
        if n > self.records:
            raise DecompressionLimitError(
                f"{n} records would pass what is left of the segment's budget for records in compressed "
                f"batches ({max(self.records, 0)}; at most one per {STORED_BYTES_PER_RECORD} stored bytes, "
                f"or {SEGMENT_RECORD_FLOOR})"
            )

    def spend(self, nbytes: int, records: int) -> None:
        self.bytes -= nbytes
        self.records -= records


def decompress(codec_id: int, data: bytes, max_bytes: int | None = None) -> bytes | bytearray:
    """Decompress one batch's records block with the real codec libraries, at most ``max_bytes`` out.

    Kafka ``CompressionType`` ids: 1 gzip (one or more members, as ``GZIPInputStream`` reads
    them), 2 snappy (raw or xerial-framed, as the Java producer writes it), 3 lz4 (frame
    format), 4 zstd (frames read across, as ``ZstdInputStream`` does).  The stream is
    decompressed incrementally and stops as soon as the output would pass ``max_bytes``
    (default :func:`max_batch_payload_bytes`), so a small block that inflates to gigabytes
    costs at most ``max_bytes`` of memory; snappy's preamble declares each block's length,
    which is checked before decompressing.

    Returns
    -------
    bytes or bytearray
        The records bytes (``bytes`` or, to spare a copy, ``bytearray``).

    Raises
    ------
    DecompressionLimitError
        Beyond the cap.
    ValueError
        For an unknown id or a truncated stream.
    Exception
        The codec's own error, for bad data.
    """
    cap = max_batch_payload_bytes() if max_bytes is None else int(max_bytes)
    if codec_id == 1:
        return _gzip_bounded(data, cap)
    if codec_id == 2:
        _snappy_check_length(data, cap)
        # imported here: kafka-python's package import (its clients) costs each Python worker about 0.15 s,
        # and only snappy needs it
        from kafka import codec as kafka_codec

        return kafka_codec.snappy_decode(data)
    if codec_id == 3:
        return _lz4_bounded(data, cap)
    if codec_id == 4:
        return _zstd_bounded(data, cap)
    raise ValueError(f"unknown compression codec id {codec_id}")


def _over(cap: int) -> DecompressionLimitError:
    return DecompressionLimitError(f"decompressed records exceed {cap} bytes (KOA_MAX_BATCH_BYTES)")


def _gzip_bounded(data: bytes, cap: int) -> bytearray:
    """Decompress gzip members in sequence, at most ``cap`` bytes out (``zlib`` with ``max_length``)."""
    out = bytearray()
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        buf = rest
        while not d.eof:
            out += d.decompress(buf, cap - len(out) + 1)
            if len(out) > cap:
                raise _over(cap)
            buf = d.unconsumed_tail
            if not buf and not d.eof:
                raise ValueError("gzip stream ended before the end-of-stream marker")
        rest = d.unused_data
        if not rest.startswith(b"\x1f\x8b"):  # GZIPInputStream stops where no further member starts
            return out


def _lz4_bounded(data: bytes, cap: int) -> bytearray:
    """Decompress one LZ4 frame (``KafkaLZ4BlockInputStream``), at most ``cap`` bytes out."""
    import lz4.frame

    d = lz4.frame.LZ4FrameDecompressor()
    out = bytearray()
    buf = bytes(data)
    while not d.eof:
        out += d.decompress(buf, max_length=cap - len(out) + 1)
        buf = b""
        if len(out) > cap:
            raise _over(cap)
        if d.needs_input and not d.eof:
            raise ValueError("lz4 frame ended before its end mark")
    return out


def _zstd_bounded(data: bytes, cap: int) -> bytearray:
    """Decompress zstd frames, read across as kafka.codec does, at most ``cap`` bytes out."""
    import io

    import zstandard

    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
        while True:
            chunk = reader.read(min(1 << 20, cap - len(out) + 1))
            if not chunk:
                return out
            out += chunk
            if len(out) > cap:
                raise _over(cap)


def _snappy_check_length(data: bytes, cap: int) -> None:
    """Raise :class:`DecompressionLimitError` when snappy's preambles declare more than ``cap`` bytes.

    The lengths the preambles declare (one raw block, or the blocks of a xerial stream) are added up.
    """

    def preamble(mv, pos: int) -> int:  # the uncompressed length, a little-endian base-128 varint
        n, shift = 0, 0
        for i in range(pos, min(pos + 5, len(mv))):
            n |= (mv[i] & 0x7F) << shift
            if mv[i] < 0x80:
                return n
            shift += 7
        raise ValueError("snappy block without a length preamble")

    mv = byte_view(data)
    total = 0
    if (
        len(mv) > 16 and bytes(mv[:8]) == b"\x82SNAPPY\x00"
    ):  # as kafka.codec._detect_xerial_stream  # xerial framing: 16-byte header, then [int32 size][block]...
        pos = 16
        while pos + 4 <= len(mv):
            size = struct.unpack_from(">i", mv, pos)[0]
            if size < 0:
                raise ValueError("xerial snappy block of negative size")
            total += preamble(mv, pos + 4)
            pos += 4 + size
            if total > cap:
                raise _over(cap)
    else:
        total = preamble(mv, 0)
    if total > cap:
        raise _over(cap)
