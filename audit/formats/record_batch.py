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
tails are returned as :class:`Issue` rows with the byte position where they were found.
Work and memory stay proportional to the segment's size: decompression is capped per batch
and, for the segment's compressed batches together, by an :class:`InflationBudget`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
from crc32c import crc32c

if TYPE_CHECKING:
    import pyarrow as pa

#: Size of the fixed v2 batch header (base_offset .. record_count), bytes.
BATCH_HEADER_SIZE = 61
#: Bytes before ``batch_length`` counts: base_offset int64 + batch_length int32.
LOG_OVERHEAD = 12
_HEADER = struct.Struct(">qiibIhiqqqhii")

COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08  # 1 = LogAppendTime: record timestamps are max_timestamp
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
#: Smallest legacy message (crc .. value length, empty key and value) per magic, bytes after the size field.
LEGACY_MIN_SIZE = {0: 14, 1: 22}
#: Legacy attributes: codec (bits 0-2) and, for magic 1, timestamp type (bit 3); nothing else is defined.
LEGACY_ATTR_MASK = 0x0F
#: Smallest v2 record, bytes: length varint (1) + attributes (1) + timestampDelta, offsetDelta, key length,
#: value length and header count varints (1 each), as ``DefaultRecord.writeTo`` lays it out.  A batch whose
#: ``record_count`` times this exceeds its records payload cannot hold its records: ``corrupt_batch``.
MIN_RECORD_SIZE = 7
#: Largest decompressed records payload of one batch, bytes (env ``KOA_MAX_BATCH_BYTES`` overrides it).
#: Kafka bounds a batch as stored by ``max.message.bytes`` (broker ``message.max.bytes``, default 1,048,588
#: bytes, compressed); 64 MiB leaves 64x that for the compression ratio.  A batch that inflates beyond it
#: (a decompression bomb, or corruption) is reported as ``decompression_limit`` and not decoded; so is one
#: that would pass what is left of its segment's :class:`InflationBudget`.
MAX_BATCH_PAYLOAD_BYTES = 64 << 20
INT64_MAX = (1 << 63) - 1


def max_batch_payload_bytes() -> int:
    """The decompressed-payload cap of one batch in bytes: ``KOA_MAX_BATCH_BYTES`` when set to a positive
    integer, else :data:`MAX_BATCH_PAYLOAD_BYTES`."""
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
    """What is left of one segment's inflation budget (see :data:`SEGMENT_INFLATION_FLOOR`):
    decompressed ``bytes`` and ``records`` of compressed batches."""

    bytes: int
    records: int

    @classmethod
    def for_batches(cls, scan: "BatchScan", mask: np.ndarray) -> "InflationBudget":
        """The budget of the batches of ``scan`` selected by ``mask``, from their compressed ones' stored size."""
        compressed = mask & ((scan.attributes & ATTR_COMPRESSION_MASK) != 0)
        stored = int(scan.batch_length[compressed].astype(np.int64).sum()) + LOG_OVERHEAD * int(compressed.sum())
        return cls(
            max(SEGMENT_INFLATION_FLOOR, SEGMENT_INFLATION_RATIO * stored),
            max(SEGMENT_RECORD_FLOOR, stored // STORED_BYTES_PER_RECORD),
        )

    def cap(self) -> int:
        """Decompressed bytes the next block may have: the per-batch cap or what is left, the smaller."""
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


def issue_batch(schema: pa.Schema, source_file: str, source_partition: int, issues: list[Issue]) -> pa.RecordBatch:
    """The ``kind = 'issue'`` rows of ``issues`` (:class:`Issue`: one per skipped batch or unreadable file) in
    ``schema``, a pyarrow schema with the columns ``source_file, source_partition, kind, position`` (bytes),
    ``offset`` (the batch's base offset, -1 unknown), ``decode_error`` (the reason), ``detail`` and
    ``records_affected``; its other columns are null."""
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


def byte_view(buf: bytes | memoryview) -> memoryview:
    """``buf`` as a flat memoryview of unsigned bytes (format ``B``).

    Arrow buffers (Spark's ``binaryFile`` content) export a *signed* byte format (``b``): indexing
    them gives -128..127, so a byte >= 0x80 (a magic byte, an attribute) would read negative."""
    mv = memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


@dataclass
class Issue:
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
    issues: list[Issue] = field(default_factory=list)
    bytes_read: int = 0

    def __len__(self) -> int:
        return len(self.position)

    @property
    def end_offset(self) -> int:
        """Kafka offset after the last valid batch (``DefaultRecordBatch.nextOffset``), -1 when none.
        Computed with Python integers: :func:`scan_batches` already marked a batch whose next offset
        would pass 2^63-1 as corrupt, so this never wraps."""
        ok = self.crc_ok
        if not ok.any():
            return -1
        last = np.nonzero(ok)[0][-1]
        return int(self.base_offset[last]) + int(self.last_offset_delta[last]) + 1


def scan_batches(buf: bytes | memoryview, verify_crc: bool = True, start: int = 0) -> BatchScan:
    """Walk the batch chain of a segment file's bytes.

    ``buf``: the whole ``.log`` file content. ``start``: byte position to begin at (a
    position from the segment's ``.index``). CRC-32C (Castagnoli) is checked over
    ``attributes`` .. batch end as ``DefaultRecordBatch.isValid`` does; a legacy message's
    CRC-32 over ``magic`` .. message end as ``LegacyRecord.isValid`` does.  A partial tail
    stops the walk; a CRC mismatch is recorded and the walk continues at the next batch
    (the length field is still trusted, as Kafka's ``FileLogInputStream`` does); an
    impossible length stops the walk with ``corrupt_batch``.  Zero bytes from a batch
    boundary to the end of the file are a preallocated segment's unwritten space
    (``log.preallocate``), not an issue.  A magic byte other than 0, 1 or 2 (read unsigned,
    whatever the buffer's format) stops the walk with ``unknown_magic``; a batch whose next
    offset passes 2^63-1 is ``corrupt_batch`` (kept out of ``end_offset``) and the walk goes on.
    Never raises.
    """
    mv = byte_view(buf)
    n = len(mv)
    pos = start
    rows: list[tuple] = []
    positions: list[int] = []
    crc_flags: list[bool] = []
    issues: list[Issue] = []
    unpack = _HEADER.unpack_from
    while pos < n:
        if n - pos < LOG_OVERHEAD + 5:
            if not _zero_to_end(mv, pos):
                issues.append(Issue("partial_batch", pos, f"{n - pos} trailing bytes, too few for a batch header"))
            break
        base_offset, batch_length = struct.unpack_from(">qi", mv, pos)
        if batch_length == 0 and base_offset == 0 and _zero_to_end(mv, pos):
            break  # space the broker preallocated (log.preallocate=true) and has not written yet
        magic = mv[pos + 16]
        if magic in LEGACY_MIN_SIZE:
            # legacy entry: offset int64, size int32, crc uint32, magic int8, attributes int8,
            # [timestamp int64 (magic 1)], key bytes, value bytes
            if batch_length < LEGACY_MIN_SIZE[magic] or pos + LOG_OVERHEAD + batch_length > n:
                reason = "partial_batch" if batch_length >= LEGACY_MIN_SIZE[magic] else "corrupt_batch"
                issues.append(Issue(reason, pos, f"legacy message (magic {magic}) of size {batch_length}", base_offset))
                break
            end = pos + LOG_OVERHEAD + batch_length
            stored, attrs = struct.unpack_from(">IxB", mv, pos + LOG_OVERHEAD)
            ts = struct.unpack_from(">q", mv, pos + 18)[0] if magic == 1 else -1
            count = 0 if attrs & ATTR_COMPRESSION_MASK else 1
            ok = _offset_fits(issues, pos, base_offset, 0, count)
            if ok and verify_crc:
                computed = zlib.crc32(mv[pos + 16 : end])
                if stored != computed:
                    ok = False
                    issues.append(
                        Issue(
                            "crc_mismatch",
                            pos,
                            f"legacy message (magic {magic}): stored crc {stored:#010x}, computed {computed:#010x}",
                            base_offset,
                            count,
                        )
                    )
            rows.append(
                (base_offset, batch_length, -1, magic, stored, attrs & LEGACY_ATTR_MASK, 0, ts, ts, -1, -1, -1, count)
            )
            positions.append(pos)
            crc_flags.append(ok)
            pos = end
            continue
        if magic != 2:
            issues.append(Issue("unknown_magic", pos, f"magic byte {magic}; cannot find the next batch", base_offset))
            break
        if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            issues.append(
                Issue("corrupt_batch", pos, f"batch_length {batch_length} below the v2 header size", base_offset)
            )
            break
        end = pos + LOG_OVERHEAD + batch_length
        if end > n:
            issues.append(
                Issue(
                    "partial_batch",
                    pos,
                    f"batch of {LOG_OVERHEAD + batch_length} bytes but only {n - pos} remain",
                    base_offset,
                )
            )
            break
        hdr = unpack(mv, pos)
        ok = -INT64_MAX <= base_offset + hdr[6] + 1 <= INT64_MAX or _offset_fits(
            issues, pos, base_offset, hdr[6], max(hdr[12], 0)
        )
        if ok and verify_crc:
            stored = hdr[4]
            computed = crc32c(mv[pos + 21 : end])
            if stored != computed:
                ok = False
                issues.append(
                    Issue(
                        "crc_mismatch",
                        pos,
                        f"stored crc {stored:#010x}, computed {computed:#010x}",
                        base_offset,
                        max(hdr[12], 0),
                    )
                )
        rows.append(hdr)
        positions.append(pos)
        crc_flags.append(ok)
        pos = end
    if rows:
        cols = list(zip(*rows))
    else:
        cols = [()] * 13
    return BatchScan(
        position=np.asarray(positions, dtype=np.int64),
        base_offset=np.asarray(cols[0], dtype=np.int64),
        batch_length=np.asarray(cols[1], dtype=np.int32),
        partition_leader_epoch=np.asarray(cols[2], dtype=np.int32),
        attributes=np.asarray(cols[5], dtype=np.int16),
        last_offset_delta=np.asarray(cols[6], dtype=np.int32),
        base_timestamp=np.asarray(cols[7], dtype=np.int64),
        max_timestamp=np.asarray(cols[8], dtype=np.int64),
        producer_id=np.asarray(cols[9], dtype=np.int64),
        producer_epoch=np.asarray(cols[10], dtype=np.int16),
        record_count=np.asarray(cols[12], dtype=np.int32),
        crc_ok=np.asarray(crc_flags, dtype=bool),
        magic=np.asarray(cols[3], dtype=np.int8),
        issues=issues,
        bytes_read=pos,
    )


def _offset_fits(issues: list[Issue], pos: int, base_offset: int, last_offset_delta: int, records: int) -> bool:
    """False (and a ``corrupt_batch`` issue) when a batch's next offset, ``base_offset +
    last_offset_delta + 1``, is not a valid int64 Kafka offset (it would wrap past 2^63-1)."""
    nxt = base_offset + last_offset_delta + 1  # Python int: no wrap
    if -INT64_MAX <= nxt <= INT64_MAX:
        return True
    issues.append(
        Issue(
            "corrupt_batch",
            pos,
            f"base offset {base_offset} + last offset delta {last_offset_delta} + 1 does not fit in an int64 offset",
            base_offset,
            records,
        )
    )
    return False


def _zero_to_end(mv: memoryview, pos: int) -> bool:
    """True when every byte from ``pos`` to the end of ``mv`` is zero."""
    return not np.frombuffer(mv, dtype=np.uint8, offset=pos).any()


#: One ``.index`` entry: relative offset int32, physical position int32 (``OffsetIndex``).
INDEX_ENTRY = np.dtype([("relative_offset", ">i4"), ("position", ">i4")])


def index_start(buf: bytes | memoryview, index: bytes | memoryview | None, segment_base: int) -> int:
    """Byte position in a segment to start reading its last batches from, using its ``.index``.

    Kafka's offset index (``OffsetIndex``, one entry per ``log.index.interval.bytes``) maps the
    last offset of a batch (relative to ``segment_base``) to the batch's byte position, in
    increasing order; the active segment's index is preallocated and zero after its entries.
    The newest entry that points inside ``buf`` at a magic-2 batch header holding that offset
    is used (found by binary search, so only a few pages of a memory-mapped index are read);
    an index that is missing, empty, stale or from another segment gives 0 (read from the
    start).  Never raises.
    """
    if not index or len(buf) < BATCH_HEADER_SIZE:
        return 0
    entries = np.frombuffer(index, dtype=INDEX_ENTRY, count=len(index) // INDEX_ENTRY.itemsize)
    # the last entry with a non-zero position: entries are written in order, zeros follow them
    lo, hi = 0, len(entries)
    while lo < hi:
        mid = (lo + hi) // 2
        if int(entries[mid]["position"]) > 0:
            lo = mid + 1
        else:
            hi = mid
    for i in range(lo - 1, max(lo - 4, -1), -1):  # the newest few entries; a stale one is skipped
        p, rel = int(entries[i]["position"]), int(entries[i]["relative_offset"])
        if not 0 < p <= len(buf) - BATCH_HEADER_SIZE:
            continue
        base_offset, _length, _epoch, magic = struct.unpack_from(">qiib", buf, p)
        last_delta = struct.unpack_from(">i", buf, p + 23)[0]
        if magic == 2 and base_offset <= segment_base + rel <= base_offset + last_delta:
            return p
    return 0


def scan_tail(buf: bytes | memoryview, index: bytes | memoryview | None = None, segment_base: int = 0) -> BatchScan:
    """The last batches of a segment, for its log end offset, without reading the whole file.

    Follows ``LogSegment.readNextOffset``: start at the position of the newest ``.index`` entry
    (:func:`index_start`) and walk the batches from there to the end, checking their CRC.
    When that region has no valid batch (a corrupt tail, or an index that does not match),
    the whole segment is scanned as :func:`scan_batches` does.  ``end_offset`` of the result is
    the log end offset (after the last complete, CRC-valid batch); ``issues`` are those of the
    batches read.  Batches before the start position are not read (the offset-commit decoder
    reads ``__consumer_offsets`` segments in full).  Never raises.
    """
    start = index_start(buf, index, segment_base)
    if start:
        scan = scan_batches(buf, start=start)
        if scan.crc_ok.any():
            return scan
    return scan_batches(buf)


def decompress(codec_id: int, data: bytes, max_bytes: int | None = None) -> bytes | bytearray:
    """Decompress one batch's records block with the real codec libraries, at most ``max_bytes`` out.

    Kafka ``CompressionType`` ids: 1 gzip (one or more members, as ``GZIPInputStream`` reads
    them), 2 snappy (raw or xerial-framed, as the Java producer writes it), 3 lz4 (frame
    format), 4 zstd (frames read across, as ``ZstdInputStream`` does).  The stream is
    decompressed incrementally and stops as soon as the output would pass ``max_bytes``
    (default :func:`max_batch_payload_bytes`), so a small block that inflates to gigabytes
    costs at most ``max_bytes`` of memory; snappy's preamble declares each block's length,
    which is checked before decompressing.  Returns the records bytes (``bytes`` or, to spare a copy,
    ``bytearray``).  Raises :class:`DecompressionLimitError` beyond
    the cap, ``ValueError`` for an unknown id or a truncated stream, the codec's own error
    for bad data.
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
    """gzip members in sequence, at most ``cap`` bytes out (``zlib`` with ``max_length``)."""
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
    """One LZ4 frame (``KafkaLZ4BlockInputStream``), at most ``cap`` bytes out."""
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
    """zstd frames, read across as kafka.codec does, at most ``cap`` bytes out."""
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
    """Raise :class:`DecompressionLimitError` when the lengths snappy's preambles declare (one raw
    block, or the blocks of a xerial stream) add up to more than ``cap`` bytes."""

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


# --------------------------------------------------------------------------- varints


def _read_varint_general(arr: np.ndarray, pos: np.ndarray, max_bytes: int):
    n = len(arr)
    steps = np.arange(max_bytes, dtype=np.int64)
    idx = pos[:, None] + steps[None, :]
    inside = idx < n
    b = arr[np.minimum(idx, n - 1)].astype(np.uint64)
    term = ((b & 0x80) == 0) & inside
    ok = term.any(axis=1)
    size = np.argmax(term, axis=1).astype(np.int64) + 1
    mask = steps[None, :] < size[:, None]
    shifts = (7 * steps).astype(np.uint64)
    raw = (((b & np.uint64(0x7F)) << shifts[None, :]) * mask).sum(axis=1, dtype=np.uint64)
    return raw, size, ok


def read_varint(arr: np.ndarray, pos: np.ndarray, max_bytes: int, zigzag: bool = True):
    """Decode one (zigzag) varint at each position of ``pos`` in the uint8 array ``arr``.

    Returns ``(values int64, sizes int64, ok bool)``; ``ok`` is False where no terminating
    byte was found within ``max_bytes`` (5 for varint, 10 for varlong) or the buffer ended.
    Follows ``org.apache.kafka.common.utils.ByteUtils.readVarint/readVarlong``.  One- and two-byte
    varints (the common case: small lengths and deltas) take a fast path.
    """
    m = len(pos)
    if m == 0 or len(arr) == 0:
        e = np.zeros(m, dtype=np.int64)
        return e, np.ones(m, dtype=np.int64), np.zeros(m, dtype=bool)
    n = len(arr)
    inside = pos < n
    b0 = arr.take(pos, mode="clip")  # positions are never negative; past the end: masked by ``inside``
    single = (b0 < 0x80) & inside
    raw = b0.astype(np.int64)  # values are built in 64 bits and read as unsigned for the zigzag below
    size = np.ones(m, dtype=np.int64)
    ok = single.copy()
    multi = np.nonzero(~single)[0]
    if len(multi) and max_bytes >= 2:
        # two-byte varints (lengths and deltas of 64..8191) are the next most common: no matrix for them
        pm = pos[multi]
        b1 = arr.take(pm + 1, mode="clip")
        two = (b1 < 0x80) & (pm + 1 < n)
        t = multi[two]
        raw[t] = (raw[t] & 0x7F) | (b1[two].astype(np.int64) << 7)
        size[t] = 2
        ok[t] = True
        multi = multi[~two]
    if len(multi):
        r, sz, k = _read_varint_general(arr, pos[multi], max_bytes)
        raw[multi], size[multi], ok[multi] = r.view(np.int64), sz, k
    if zigzag:  # (raw >>> 1) ^ -(raw & 1), in place: raw is this call's own array
        sign = raw & 1
        np.negative(sign, out=sign)
        np.right_shift(raw.view(np.uint64), np.uint64(1), out=raw.view(np.uint64))
        raw ^= sign
    return raw, size, ok


_BE = {(2, True): ">i2", (4, True): ">i4", (8, True): ">i8", (2, False): ">u2", (4, False): ">u4", (8, False): ">u8"}


def overlapping_view(arr: np.ndarray, dtype: str) -> np.ndarray:
    """Unaligned view of the uint8 array ``arr`` whose element *i* is the ``dtype`` integer
    starting at byte *i* (one gather then reads many integers at arbitrary positions).  A buffer
    shorter than one integer is zero-padded first."""
    size = np.dtype(dtype).itemsize
    if len(arr) < size:
        padded = np.zeros(size, dtype=np.uint8)
        padded[: len(arr)] = arr
        arr = padded
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return np.ndarray(shape=(len(arr) - size + 1,), dtype=dtype, buffer=arr, offset=0, strides=(1,))


def read_int(arr: np.ndarray, pos: np.ndarray, nbytes: int, signed: bool = True, in_range: bool = False) -> np.ndarray:
    """Big-endian integers of ``nbytes`` (2, 4 or 8) at each position, as int64.

    One gather through an unaligned, overlapping view of ``arr`` (element *i* = the
    ``nbytes`` bytes at *i*).  Positions too close to the end read the last whole
    integer instead: callers mask such rows out.  ``in_range``: the caller has checked that
    ``0 <= pos <= len(arr) - nbytes`` everywhere (no clipping pass; an index outside raises IndexError).
    """
    if len(pos) == 0 or len(arr) == 0:
        return np.zeros(len(pos), dtype=np.int64)
    view = overlapping_view(arr, _BE[(nbytes, signed)])
    return view[pos if in_range else np.clip(pos, 0, len(view) - 1)].astype(np.int64)


# --------------------------------------------------------------------------- records


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
    issues: list[Issue] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.batch)


def extract_records(buf: bytes | memoryview, scan: BatchScan, batch_mask: np.ndarray | None = None) -> RecordTable:
    """Locate every record of the batches selected by ``batch_mask`` (default: CRC-valid ones).

    Compressed batches are decompressed with :func:`decompress` (at most
    :func:`max_batch_payload_bytes` each, and together within the segment's
    :class:`InflationBudget`; a batch inflating beyond either is dropped and reported as
    ``decompression_limit``) and appended to the buffer.  Records are framed in lock-step (step *k*
    reads the *k*-th record of every batch at once) while many batches are left, then the few left
    record by record (:func:`_frame_records`).  A batch whose record count is negative or larger
    than its (decompressed) payload can hold at :data:`MIN_RECORD_SIZE` bytes a record, or whose
    records overrun it, is dropped whole and reported as ``corrupt_batch`` (Kafka's
    ``DefaultRecordBatch`` throws ``InvalidRecordException`` for these).  A batch of count 0 (emptied
    by compaction) has no records and is no issue.
    Legacy message sets among the selected batches are read by :func:`extract_legacy_records`
    and merged in log order.  Never raises.
    """
    selected = scan.crc_ok.copy() if batch_mask is None else batch_mask & scan.crc_ok
    legacy = selected & (scan.magic < 2)
    budget = InflationBudget.for_batches(scan, selected)
    table = _extract_v2_records(buf, scan, selected & ~legacy, budget)
    if legacy.any():
        table = _merge_in_log_order(table, extract_legacy_records(buf, scan, legacy, budget))
    return table


#: Byte position of the key length in a legacy message, from the start of its offset field.
_LEGACY_KEY_OFFSET = {0: 18, 1: 26}
_I32 = struct.Struct(">i")


class _LegacyFormatError(ValueError):
    """A legacy message (or a message inside a wrapper) whose framing does not hold."""


def _legacy_key_value(mv, pos: int, end: int) -> tuple[int, int, int, int]:
    """(key start, key length, value start, value length) of the legacy message body at ``pos`` (its key
    length field), inside ``end``; lengths are -1 for null.  Raises :class:`_LegacyFormatError`."""
    out = []
    for what in ("key", "value"):
        if pos + 4 > end:
            raise _LegacyFormatError(f"message ends inside its {what} length")
        n = _I32.unpack_from(mv, pos)[0]
        pos += 4
        if n < -1 or pos + max(n, 0) > end:
            raise _LegacyFormatError(f"{what} length {n} does not fit the message")
        out += (pos, n)
        pos += max(n, 0)
    return out[0], out[1], out[2], out[3]


def _kafka08_lz4(payload: bytes) -> bytes:
    """An lz4 frame as Kafka 0.8/0.9 wrote it for magic 0 (KAFKA-3160: the header checksum byte covers
    the wrong bytes), with the checksum the LZ4 frame format defines (second byte of the xxh32 of the
    frame descriptor) put back, so a standard lz4 frame decoder reads it."""
    import xxhash

    b = bytes(payload)
    if len(b) < 7:
        return b
    end = 7 + (8 if b[4] & 0x08 else 0)  # FLG bit 3: the descriptor carries an 8-byte content size
    if len(b) < end:
        return b
    hc = (xxhash.xxh32_intdigest(b[4 : end - 1]) >> 8) & 0xFF
    return b[: end - 1] + bytes([hc]) + b[end:]


def _walk_legacy_set(inner, magic: int, wrapper_offset: int, wrapper_attrs: int, wrapper_ts: int, max_messages: int):
    """The messages of a decompressed legacy wrapper's message set, as ``AbstractLegacyRecordBatch``
    (and kafka-python's ``LegacyRecordBatch``) iterate them: inner messages laid out as the wrapper's
    magic says, never compressed themselves; magic 1 inner offsets relative (absolute = the wrapper's
    offset minus the last inner offset plus the inner offset, kept as written when that base would be
    negative), magic 0 absolute; a LogAppendTime wrapper's timestamp for every inner message.

    Only the chain of message sizes is walked in Python; every field is then read with numpy.  Returns
    ``(offsets, timestamps, key starts, key lengths, value starts, value lengths)`` as int64 arrays with
    positions into ``inner``.  Raises :class:`DecompressionLimitError` as soon as the set holds more
    than ``max_messages`` messages, :class:`_LegacyFormatError` for a message that does not fit (or
    whose key or value does not fit it), an empty set, a compressed inner message or an offset beyond
    int64."""
    from array import array

    n = len(inner)
    key_at = _LEGACY_KEY_OFFSET[magic]
    need = key_at + 8 - LOG_OVERHEAD  # message size that holds the header and both length fields
    unpack = _I32.unpack_from
    starts = array("q")
    pos = 0
    while pos < n:
        if pos + LOG_OVERHEAD > n:
            raise _LegacyFormatError(f"inner message at byte {pos} of the decompressed set is cut short")
        size = unpack(inner, pos + 8)[0]
        if size < need or pos + LOG_OVERHEAD + size > n:
            raise _LegacyFormatError(
                f"inner message at byte {pos} has size {size}, {n - pos - LOG_OVERHEAD} bytes left"
            )
        starts.append(pos)
        if len(starts) > max_messages:
            raise DecompressionLimitError(
                f"the decompressed message set holds more than {max_messages} messages, what is left of the "
                f"segment's budget for records in compressed batches"
            )
        pos += LOG_OVERHEAD + size
    if not starts:
        raise _LegacyFormatError("the decompressed message set holds no message")
    arr = np.frombuffer(inner, dtype=np.uint8)
    p = np.frombuffer(starts, dtype=np.int64)
    end = p + LOG_OVERHEAD + read_int(arr, p + 8, 4)
    attrs = arr[p + 17]
    if (attrs & ATTR_COMPRESSION_MASK).any():
        k = int(np.argmax((attrs & ATTR_COMPRESSION_MASK) != 0))
        raise _LegacyFormatError(f"inner message at byte {int(p[k])} is compressed again (attributes {int(attrs[k])})")
    kl = read_int(arr, p + key_at, 4)
    ks = p + key_at + 4
    vpos = ks + np.maximum(kl, 0)
    ok = (kl >= -1) & (vpos + 4 <= end)
    vl = read_int(arr, np.where(ok, vpos, 0), 4)
    vs = vpos + 4
    ok &= (vl >= -1) & (vs + np.maximum(vl, 0) <= end)
    if not ok.all():
        k = int(np.argmin(ok))
        raise _LegacyFormatError(
            f"inner message at byte {int(p[k])}: key length {int(kl[k])} or value length "
            f"{int(vl[k])} does not fit the message"
        )
    offsets = read_int(arr, p, 8)
    timestamps = read_int(arr, p + 18, 8) if magic == 1 else np.full(len(p), -1, dtype=np.int64)
    if magic == 1:
        base = wrapper_offset - int(offsets[-1])
        if base >= 0:
            if int(offsets.max()) + base > INT64_MAX or int(offsets.min()) + base < -INT64_MAX - 1:
                raise _LegacyFormatError(f"inner offsets plus the base {base} do not fit in int64 offsets")
            offsets = offsets + base
        if wrapper_attrs & ATTR_TIMESTAMP_TYPE:
            timestamps[:] = wrapper_ts
    return [offsets, timestamps, np.where(kl >= 0, ks, 0), kl, np.where(vl >= 0, vs, 0), vl]


def extract_legacy_records(
    buf: bytes | memoryview, scan: BatchScan, batch_mask: np.ndarray, budget: InflationBudget | None = None
) -> RecordTable:
    """Every message of the legacy (magic 0/1) entries selected by ``batch_mask``.

    As Kafka's ``AbstractLegacyRecordBatch`` (and kafka-python's ``LegacyRecordBatch``) read them: a
    wrapper message's value is decompressed (gzip, snappy, lz4, with Kafka 0.8's lz4 header checksum for
    magic 0) with :func:`decompress`, bounded by the batch cap and the segment's ``budget``
    (:class:`InflationBudget`, default: that of the selected entries), and its inner messages walked by
    :func:`_walk_legacy_set` (magic-1 relative offsets made absolute).  Keys and values of plain messages
    are copied into the returned table's own buffer, which also holds each decompressed set; a timestamp
    is -1 for magic 0, the wrapper's for inner messages of a LogAppendTime wrapper.  An entry that cannot
    be read (a key or value length that does not fit, a null or empty compressed set, an inner message
    that does not fit) is dropped whole and reported (``decompression_limit`` beyond the budget,
    ``decompression_failed`` for another compressed wrapper, else ``corrupt_batch``).  Never raises.
    """
    from array import array

    mv = byte_view(buf)
    if budget is None:
        budget = InflationBudget.for_batches(scan, batch_mask)
    blob = bytearray()
    parts: list[list[np.ndarray]] = []
    issues: list[Issue] = []
    batch_a, off_a, ts_a, ks_a, kl_a, vs_a, vl_a = (array("q") for _ in range(7))
    for i in np.nonzero(batch_mask)[0].tolist():
        pos = int(scan.position[i])
        end = pos + LOG_OVERHEAD + int(scan.batch_length[i])
        magic = int(scan.magic[i])
        attrs = int(scan.attributes[i])
        codec = attrs & ATTR_COMPRESSION_MASK
        wrapper_offset = int(scan.base_offset[i])
        try:
            ks, kl, vs, vl = _legacy_key_value(mv, pos + _LEGACY_KEY_OFFSET[magic], end)
            if not codec:
                batch_a.append(i)
                off_a.append(wrapper_offset)
                ts_a.append(int(scan.base_timestamp[i]) if magic == 1 else -1)
                for b_start, b_len, s_a, l_a in ((ks, kl, ks_a, kl_a), (vs, vl, vs_a, vl_a)):
                    s_a.append(len(blob) if b_len >= 0 else 0)
                    l_a.append(b_len)
                    if b_len > 0:
                        blob += mv[b_start : b_start + b_len]
                continue
            if vl < 0:
                raise _LegacyFormatError("the wrapper message of a compressed set has a null value")
            if codec not in (1, 2, 3):
                raise _LegacyFormatError(f"compression id {codec} does not exist for magic {magic}")
            payload = bytes(mv[vs : vs + vl])
            if codec == 3 and magic == 0:
                payload = _kafka08_lz4(payload)
            inner = decompress(codec, payload, budget.cap())
            cols = _walk_legacy_set(
                inner, magic, wrapper_offset, attrs, int(scan.base_timestamp[i]), max(budget.records, 0)
            )
            budget.spend(len(inner), len(cols[0]))
        except Exception as exc:  # codec errors have many types; framing errors are _LegacyFormatError
            reason = (
                "decompression_limit"
                if isinstance(exc, DecompressionLimitError)
                else "decompression_failed"
                if codec
                else "corrupt_batch"
            )
            issues.append(
                Issue(
                    reason,
                    pos,
                    f"legacy message (magic {magic}, {COMPRESSION_NAMES.get(codec, codec)}): {exc}",
                    wrapper_offset,
                )
            )
            continue
        shift = len(blob)
        blob += inner
        m = len(cols[0])
        k_len, v_len = cols[3], cols[5]
        parts.append(
            [
                np.full(m, i, dtype=np.int64),
                cols[0],
                cols[1],
                np.where(k_len >= 0, cols[2] + shift, 0),
                k_len,
                np.where(v_len >= 0, cols[4] + shift, 0),
                v_len,
            ]
        )
    plain = [
        np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, np.int64)
        for a in (batch_a, off_a, ts_a, ks_a, kl_a, vs_a, vl_a)
    ]
    if parts:  # plain messages and decompressed sets, in the order of their entries
        allp = [np.concatenate([plain[c]] + [p[c] for p in parts]) for c in range(7)]
        order = np.argsort(allp[0], kind="stable")
        plain = [c[order] for c in allp]
    return RecordTable(
        data=np.frombuffer(blob, dtype=np.uint8),
        batch=plain[0],
        offset=plain[1],
        timestamp=plain[2],
        key_start=plain[3],
        key_len=plain[4],
        value_start=plain[5],
        value_len=plain[6],
        issues=issues,
    )


def _merge_in_log_order(a: RecordTable, b: RecordTable) -> RecordTable:
    """Both tables' records in one, ordered by batch (file position) and, within one, as they were."""
    for x, y in ((a, b), (b, a)):
        if not len(y):  # nothing to interleave: keep x's buffer as it is (no copy of the segment)
            return replace(x, issues=a.issues + b.issues)
    shift = len(a.data)
    order = np.argsort(np.concatenate([a.batch, b.batch]), kind="stable")
    cat = lambda x, y: np.concatenate([x, y])[order]  # noqa: E731
    return RecordTable(
        data=np.concatenate([a.data, b.data]),
        batch=cat(a.batch, b.batch),
        offset=cat(a.offset, b.offset),
        timestamp=cat(a.timestamp, b.timestamp),
        key_start=cat(a.key_start, b.key_start + shift),
        key_len=cat(a.key_len, b.key_len),
        value_start=cat(a.value_start, b.value_start + shift),
        value_len=cat(a.value_len, b.value_len),
        issues=a.issues + b.issues,
    )


def _extract_v2_records(
    buf: bytes | memoryview, scan: BatchScan, batch_mask: np.ndarray, budget: InflationBudget
) -> RecordTable:
    """:func:`extract_records` for the magic-2 batches selected by ``batch_mask``, compressed ones
    within ``budget``."""
    batch_mask = batch_mask.copy()
    issues: list[Issue] = []
    base = np.frombuffer(buf, dtype=np.uint8)
    sec_start = scan.position + BATCH_HEADER_SIZE
    sec_end = scan.position + LOG_OVERHEAD + scan.batch_length.astype(np.int64)
    codecs = scan.attributes & ATTR_COMPRESSION_MASK
    counts_all = scan.record_count.astype(np.int64)
    cap = max_batch_payload_bytes()
    # Record counts the bytes cannot hold (DefaultRecordBatch: a negative count is an
    # InvalidRecordException; each record takes at least MIN_RECORD_SIZE bytes): reported whole,
    # before any decompression or framing work, so a forged count costs nothing.
    room = np.where(codecs == 0, sec_end - sec_start, cap)
    impossible = batch_mask & ((counts_all < 0) | (counts_all * MIN_RECORD_SIZE > room))
    for i in np.nonzero(impossible)[0]:
        c = int(counts_all[i])
        what = (
            f"negative record count {c}"
            if c < 0
            else f"record count {c} needs at least {c * MIN_RECORD_SIZE} bytes, the records payload "
            + (f"has {int(room[i])}" if codecs[i] == 0 else f"may inflate to at most {cap}")
        )
        issues.append(Issue("corrupt_batch", int(scan.position[i]), what, int(scan.base_offset[i]), max(c, 0)))
    batch_mask &= ~impossible
    extra: list[bytes] = []
    extra_len = len(base)
    sec_start = sec_start.copy()
    sec_end = sec_end.copy()
    mv = byte_view(buf)
    for i in np.nonzero(batch_mask & (codecs != 0) & (scan.record_count > 0))[0]:
        c = int(codecs[i])
        try:
            if c not in COMPRESSION_NAMES:
                raise ValueError(f"compression id {c}")
            budget.check_records(int(counts_all[i]))
            block = decompress(c, bytes(mv[int(sec_start[i]) : int(sec_end[i])]), budget.cap())
            budget.spend(len(block), int(counts_all[i]))
            if int(counts_all[i]) * MIN_RECORD_SIZE > len(block):
                issues.append(
                    Issue(
                        "corrupt_batch",
                        int(scan.position[i]),
                        f"record count {int(counts_all[i])} needs "
                        f"at least {int(counts_all[i]) * MIN_RECORD_SIZE} bytes, the decompressed records "
                        f"payload has {len(block)}",
                        int(scan.base_offset[i]),
                        int(counts_all[i]),
                    )
                )
                batch_mask[i] = False
                continue
        except Exception as exc:  # codec errors have many types
            reason = (
                "unsupported_compression"
                if c not in COMPRESSION_NAMES
                else "decompression_limit"
                if isinstance(exc, DecompressionLimitError)
                else "decompression_failed"
            )
            issues.append(
                Issue(
                    reason,
                    int(scan.position[i]),
                    f"{COMPRESSION_NAMES.get(c, c)}: {exc}",
                    int(scan.base_offset[i]),
                    int(scan.record_count[i]),
                )
            )
            batch_mask[i] = False
            continue
        sec_start[i] = extra_len
        sec_end[i] = extra_len + len(block)
        extra.append(block)
        extra_len += len(block)
    data = np.concatenate([base] + [np.frombuffer(b, dtype=np.uint8) for b in extra]) if extra else base

    sel = np.nonzero(batch_mask & (scan.record_count > 0))[0]
    counts = scan.record_count[sel].astype(np.int64)
    cur = sec_start[sel].copy()
    ends = sec_end[sel]
    rb, rs, re_, bad = _frame_records(data, cur, ends, counts)
    # Record bodies: attributes int8, timestampDelta varlong, offsetDelta varint,
    # key (varint length + bytes), value (varint length + bytes), headers.
    p = rs + 1
    heads = _short_heads(data, p)
    if heads is not None:
        ts_delta, off_delta, key_len, key_start = heads
        ok1 = ok2 = ok3 = True
    else:
        ts_delta, s1, ok1 = read_varint(data, p, 10)
        p = p + s1
        off_delta, s2, ok2 = read_varint(data, p, 5)
        p = p + s2
        key_len, s3, ok3 = read_varint(data, p, 5)
        key_start = p + s3
    p = key_start + np.maximum(key_len, 0)
    value_len, s4, ok4 = read_varint(data, np.minimum(p, max(len(data) - 1, 0)), 5)
    value_start = p + s4
    p = value_start + np.maximum(value_len, 0)
    rec_ok = ok1 & ok2 & ok3 & ok4 & (key_len >= -1) & (value_len >= -1) & (p <= re_)
    bad_batches = np.unique(rb[~rec_ok]) if len(rb) else rb
    bad[bad_batches] = True
    for j in np.nonzero(bad)[0]:
        i = sel[j]
        issues.append(
            Issue(
                "corrupt_batch",
                int(scan.position[i]),
                "record framing overruns the batch",
                int(scan.base_offset[i]),
                int(scan.record_count[i]),
            )
        )
    keep = ~bad[rb] if len(rb) else np.zeros(0, dtype=bool)
    if keep.all():  # the usual case: no copies
        keep = slice(None)
    bi = sel[rb[keep]]
    attrs = scan.attributes[bi]
    log_append = (attrs & ATTR_TIMESTAMP_TYPE) != 0
    ts = np.where(log_append, scan.max_timestamp[bi], scan.base_timestamp[bi] + ts_delta[keep])
    return RecordTable(
        data=data,
        batch=bi.astype(np.int64, copy=False),
        offset=scan.base_offset[bi] + off_delta[keep],
        timestamp=ts.astype(np.int64, copy=False),
        key_start=key_start[keep],
        key_len=key_len[keep],
        value_start=value_start[keep],
        value_len=value_len[keep],
        issues=issues,
    )


def _short_heads(data: np.ndarray, p: np.ndarray):
    """The first three varints of the record bodies whose ``timestampDelta`` starts at each of ``p``, when every
    one is short: a one-byte timestamp delta, an offset delta and a key length of one or two bytes each (records
    of one produce request, keys under 8192 bytes: nearly every record a broker writes).  Returns
    ``(timestamp_delta, offset_delta, key_length, key_start)`` as :func:`read_varint` reads them, or None when
    some record's are longer (or too near the end of ``data``): the caller reads them one varint at a time.
    One gather of eight bytes from each position (the five the heads may span) instead of up to six gathers."""
    if len(p) == 0 or len(data) < 8:
        return None
    words = overlapping_view(data, "<u8")  # eight bytes from each position, in the buffer's order
    if int(p.max()) >= len(words):
        return None
    b = words[p].view(np.uint8).reshape(-1, 8)
    b0, b1, b2, b3, b4 = (b[:, i] for i in range(5))
    off1 = b1 < 0x80
    kb0 = np.where(off1, b2, b3)
    kb1 = np.where(off1, b3, b4)
    key1 = kb0 < 0x80
    if not ((b0 < 0x80) & (off1 | (b2 < 0x80)) & (key1 | (kb1 < 0x80))).all():
        return None

    def zigzag(lo: np.ndarray, hi: np.ndarray, one: np.ndarray) -> np.ndarray:
        raw = np.where(one, lo, (lo & 0x7F) | (hi.astype(np.int64) << 7)).astype(np.int64, copy=False)
        return (raw >> 1) ^ -(raw & 1)

    ts = b0.astype(np.int64)
    key_start = p + 3 + ~off1 + ~key1  # each two-byte varint one byte more
    return (ts >> 1) ^ -(ts & 1), zigzag(b1, b2, off1), zigzag(kb0, kb1, key1), key_start


#: Records are framed in lock-step (step *k* reads the *k*-th record of every batch at once) while at
#: least this many batches still have records; one numpy step costs about as much as walking this many
#: records one by one in Python, so the few batches left (say one batch of 100,000 records) are walked
#: record by record instead: framing costs O(records), never O(records of the largest batch) numpy steps.
LOCKSTEP_MIN_BATCHES = 48


def _frame_records(data: np.ndarray, cur: np.ndarray, ends: np.ndarray, counts: np.ndarray):
    """Record boundaries of batches whose records start at ``cur`` and end at ``ends`` (positions in the
    uint8 array ``data``), ``counts`` records each.

    Each record is a zigzag varint length (at most 5 bytes, ``ByteUtils.readVarint``) then that many
    bytes, at least ``MIN_RECORD_SIZE - 1``, inside its batch.  Returns ``(batch, start, stop, bad)``:
    per record (in log order) the index of its batch and its body's byte range, and per batch whether
    its framing failed (its records are then unusable).
    """
    n = len(cur)
    bad = np.zeros(n, dtype=bool)
    cur = cur.copy()
    # record k of batch j goes to first[j] + k: log order (batch, then record) without a sort
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    total = int(first[-1])
    out_s = np.empty(total, dtype=np.int64)
    out_e = np.empty(total, dtype=np.int64)
    framed = np.zeros(total, dtype=bool)
    max_count = int(counts.max()) if n else 0
    # the batches still framing, packed: (index, position, end, first slot, count), narrowed only when a
    # batch runs out of records or fails, not at every step
    ids, c, e, f, cn = np.arange(n), cur[:n], ends.astype(np.int64, copy=False), first[:-1], counts
    low = 0  # no batch of (ids) has fewer records than this
    k = 0
    while k < max_count:
        if k >= low:
            more = cn > k
            if not more.all():
                ids, c, e, f, cn = ids[more], c[more], e[more], f[more], cn[more]
            low = int(cn.min()) if len(cn) else 0
        if len(ids) < LOCKSTEP_MIN_BATCHES:
            break
        length, size, ok = read_varint(data, c, 5)
        start = c + size
        stop = start + length
        # a record body has at least MIN_RECORD_SIZE - 1 bytes (attributes and five varints)
        ok &= (length >= MIN_RECORD_SIZE - 1) & (stop <= e)
        dest = f + k
        out_s[dest] = start
        out_e[dest] = stop
        framed[dest] = True
        c = stop
        k += 1
        if not ok.all():
            bad[ids[~ok]] = True
            ids, c, e, f, cn = ids[ok], c[ok], e[ok], f[ok], cn[ok]
    cur[ids] = c  # where each batch still framing goes on
    active = ids[cn > k]
    if len(active):
        mv = memoryview(np.ascontiguousarray(data))
        for j in active.tolist():
            starts, stops, ok = _walk_records(mv, int(cur[j]), int(ends[j]), int(counts[j]) - k)
            bad[j] |= not ok
            m = len(starts)
            if m:
                dest = slice(int(first[j]) + k, int(first[j]) + k + m)
                out_s[dest] = np.frombuffer(starts, dtype=np.int64)
                out_e[dest] = np.frombuffer(stops, dtype=np.int64)
                framed[dest] = True
    rb = np.repeat(np.arange(n, dtype=np.int64), counts)
    if not framed.all():  # records after a batch's framing failed (the batch is dropped whole later)
        return rb[framed], out_s[framed], out_e[framed], bad
    return rb, out_s, out_e, bad


def _walk_records(mv: memoryview, pos: int, end: int, n: int):
    """Frame ``n`` records from byte ``pos`` of ``mv`` (unsigned bytes) one at a time, as one step of
    :func:`_frame_records` does for many batches: ``(starts, stops, ok)``, ``ok`` False at the first
    record whose length varint is unterminated within 5 bytes, too small, or overruns ``end``."""
    from array import array

    starts, stops = array("q"), array("q")
    size = len(mv)
    min_body = MIN_RECORD_SIZE - 1
    for _ in range(n):
        if pos >= size:
            return starts, stops, False
        b = mv[pos]
        if b < 0x80:
            raw, pos = b, pos + 1
        else:
            raw, shift, i = b & 0x7F, 7, pos + 1
            while True:
                if i >= size or i >= pos + 5:
                    return starts, stops, False
                b = mv[i]
                raw |= (b & 0x7F) << shift
                i += 1
                if b < 0x80:
                    break
                shift += 7
            pos = i
        length = (raw >> 1) ^ -(raw & 1)
        stop = pos + length
        if length < min_body or stop > end:
            return starts, stops, False
        starts.append(pos)
        stops.append(stop)
        pos = stop
    return starts, stops, True


def control_types(records: RecordTable) -> np.ndarray:
    """Control record type per record (0 ABORT, 1 COMMIT, other values as written; -1 if unreadable).

    The key of a control record is ``int16 version, int16 type`` (``ControlRecordType``).
    """
    ok = records.key_len >= 4
    pos = np.where(ok, records.key_start + 2, 0)
    t = read_int(records.data, pos, 2) if len(pos) else np.zeros(0, dtype=np.int64)
    return np.where(ok, t, -1)
