"""Kafka log segments: record batches (magic 2), vectorised with numpy.

Follows Kafka's ``org.apache.kafka.common.record.DefaultRecordBatch`` and
``DefaultRecord`` (clients/src/main/java/org/apache/kafka/common/record/) and
KIP-98's batch layout. The batch walk is one Python step per *batch*; every
per-*record* field is decoded for all records of a segment at once with numpy
(one numpy pass per record position within a batch), so a segment of millions of
records costs a few dozen array operations, not millions of Python calls.

Nothing here knows about Spark. Bad input never raises: corrupt batches, partial
tails and legacy (magic 0/1) message sets are returned as :class:`Issue` rows with
the byte position where they were found.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np
from crc32c import crc32c
from kafka import codec as kafka_codec

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


@dataclass
class Issue:
    """Something that could not be read, with where it was.

    ``reason`` is one of: ``partial_batch`` (segment ends inside a batch),
    ``crc_mismatch``, ``corrupt_batch`` (impossible length or record framing),
    ``unknown_magic``, ``legacy_message_set`` (magic 0/1, counted, not decoded),
    ``unsupported_compression``, ``decompression_failed``, ``unreadable_file``.
    ``position`` is the byte position of the batch in the segment file.
    """

    reason: str
    position: int
    detail: str = ""
    base_offset: int = -1
    records: int = 0


@dataclass
class BatchScan:
    """Headers of the complete magic-2 batches of one segment, one array element per batch.

    Arrays (all numpy, same length): ``position`` (byte position in file), ``base_offset``,
    ``batch_length``, ``partition_leader_epoch``, ``attributes``, ``last_offset_delta``,
    ``base_timestamp``/``max_timestamp`` (ms), ``producer_id``, ``producer_epoch``,
    ``record_count``, ``crc_ok`` (bool).  ``end_offset`` = last offset + 1 of the last
    complete batch with a valid CRC (-1 when none); ``issues`` lists everything skipped.
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
    issues: list[Issue] = field(default_factory=list)
    bytes_read: int = 0

    def __len__(self) -> int:
        return len(self.position)

    @property
    def end_offset(self) -> int:
        ok = self.crc_ok
        if not ok.any():
            return -1
        last = np.nonzero(ok)[0][-1]
        return int(self.base_offset[last] + self.last_offset_delta[last] + 1)


def scan_batches(buf: bytes | memoryview, verify_crc: bool = True, start: int = 0) -> BatchScan:
    """Walk the batch chain of a segment file's bytes.

    ``buf``: the whole ``.log`` file content. ``start``: byte position to begin at (a
    position from the segment's ``.index``). CRC-32C (Castagnoli) is checked over
    ``attributes`` .. batch end as ``DefaultRecordBatch.isValid`` does.  A partial tail
    stops the walk; a CRC mismatch is recorded and the walk continues at the next batch
    (the length field is still trusted, as Kafka's ``FileLogInputStream`` does); an
    impossible length stops the walk with ``corrupt_batch``.  Never raises.
    """
    mv = memoryview(buf)
    n = len(mv)
    pos = start
    rows: list[tuple] = []
    positions: list[int] = []
    crc_flags: list[bool] = []
    issues: list[Issue] = []
    unpack = _HEADER.unpack_from
    while pos < n:
        if n - pos < LOG_OVERHEAD + 5:
            issues.append(Issue("partial_batch", pos, f"{n - pos} trailing bytes, too few for a batch header"))
            break
        base_offset, batch_length = struct.unpack_from(">qi", mv, pos)
        magic = mv[pos + 16]
        if magic < 2:
            # Legacy message set entry: offset int64, message_size int32, then the message.
            if batch_length < 14 or pos + LOG_OVERHEAD + batch_length > n:
                reason = "partial_batch" if batch_length >= 14 else "corrupt_batch"
                issues.append(Issue(reason, pos, f"legacy message (magic {magic}) of size {batch_length}", base_offset))
                break
            issues.append(Issue("legacy_message_set", pos, f"magic {magic} message, not decoded", base_offset, 1))
            pos += LOG_OVERHEAD + batch_length
            continue
        if magic > 2:
            issues.append(Issue("unknown_magic", pos, f"magic byte {magic}; cannot find the next batch", base_offset))
            break
        if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            issues.append(Issue("corrupt_batch", pos, f"batch_length {batch_length} below the v2 header size", base_offset))
            break
        end = pos + LOG_OVERHEAD + batch_length
        if end > n:
            issues.append(Issue("partial_batch", pos, f"batch of {LOG_OVERHEAD + batch_length} bytes but only {n - pos} remain", base_offset))
            break
        hdr = unpack(mv, pos)
        ok = True
        if verify_crc:
            stored = hdr[4]
            computed = crc32c(mv[pos + 21:end])
            if stored != computed:
                ok = False
                issues.append(Issue("crc_mismatch", pos, f"stored crc {stored:#010x}, computed {computed:#010x}", base_offset, max(hdr[12], 0)))
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
        issues=issues,
        bytes_read=pos,
    )


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


def decompress(codec_id: int, data: bytes) -> bytes:
    """Decompress one batch's records block with the real codec libraries.

    Kafka ``CompressionType`` ids: 1 gzip, 2 snappy (raw or xerial-framed, as the Java
    producer writes it), 3 lz4 (frame format), 4 zstd.  Uses ``kafka.codec``.
    Raises ``ValueError`` for an unknown id, the codec's own error for bad data.
    """
    if codec_id == 1:
        return kafka_codec.gzip_decode(data)
    if codec_id == 2:
        return kafka_codec.snappy_decode(data)
    if codec_id == 3:
        return kafka_codec.lz4_decode(data)
    if codec_id == 4:
        return kafka_codec.zstd_decode(data)
    raise ValueError(f"unknown compression codec id {codec_id}")


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
    Follows ``org.apache.kafka.common.utils.ByteUtils.readVarint/readVarlong``.  Single-byte
    varints (the common case: small lengths and deltas) take a fast path.
    """
    m = len(pos)
    if m == 0 or len(arr) == 0:
        e = np.zeros(m, dtype=np.int64)
        return e, np.ones(m, dtype=np.int64), np.zeros(m, dtype=bool)
    n = len(arr)
    inside = pos < n
    b0 = arr[np.minimum(pos, n - 1)]
    single = (b0 < 0x80) & inside
    raw = b0.astype(np.uint64)
    size = np.ones(m, dtype=np.int64)
    ok = single.copy()
    multi = np.nonzero(~single)[0]
    if len(multi):
        r, sz, k = _read_varint_general(arr, pos[multi], max_bytes)
        raw[multi], size[multi], ok[multi] = r, sz, k
    if zigzag:
        val = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    else:
        val = raw.astype(np.int64)
    return val, size, ok


_BE = {(2, True): ">i2", (4, True): ">i4", (8, True): ">i8", (2, False): ">u2", (4, False): ">u4", (8, False): ">u8"}


def overlapping_view(arr: np.ndarray, dtype: str) -> np.ndarray:
    """Unaligned view of the uint8 array ``arr`` whose element *i* is the ``dtype`` integer
    starting at byte *i* (one gather then reads many integers at arbitrary positions).  A buffer
    shorter than one integer is zero-padded first."""
    size = np.dtype(dtype).itemsize
    if len(arr) < size:
        padded = np.zeros(size, dtype=np.uint8)
        padded[:len(arr)] = arr
        arr = padded
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return np.ndarray(shape=(len(arr) - size + 1,), dtype=dtype, buffer=arr, offset=0, strides=(1,))


def read_int(arr: np.ndarray, pos: np.ndarray, nbytes: int, signed: bool = True) -> np.ndarray:
    """Big-endian integers of ``nbytes`` (2, 4 or 8) at each position, as int64.

    One gather through an unaligned, overlapping view of ``arr`` (element *i* = the
    ``nbytes`` bytes at *i*).  Positions too close to the end read the last whole
    integer instead: callers mask such rows out.
    """
    if len(pos) == 0 or len(arr) == 0:
        return np.zeros(len(pos), dtype=np.int64)
    view = overlapping_view(arr, _BE[(nbytes, signed)])
    return view[np.clip(pos, 0, len(view) - 1)].astype(np.int64)


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

    Compressed batches are decompressed with :func:`decompress` and appended to the buffer.
    Records are framed in lock-step: step *k* reads the *k*-th record of every batch at once.
    A batch whose records overrun it is dropped whole and reported as ``corrupt_batch``.
    Never raises.
    """
    if batch_mask is None:
        batch_mask = scan.crc_ok.copy()
    else:
        batch_mask = batch_mask & scan.crc_ok
    issues: list[Issue] = []
    base = np.frombuffer(buf, dtype=np.uint8)
    sec_start = scan.position + BATCH_HEADER_SIZE
    sec_end = scan.position + LOG_OVERHEAD + scan.batch_length.astype(np.int64)
    codecs = scan.attributes & ATTR_COMPRESSION_MASK
    extra: list[bytes] = []
    extra_len = len(base)
    sec_start = sec_start.copy()
    sec_end = sec_end.copy()
    mv = memoryview(buf)
    for i in np.nonzero(batch_mask & (codecs != 0) & (scan.record_count > 0))[0]:
        c = int(codecs[i])
        try:
            if c not in COMPRESSION_NAMES:
                raise ValueError(f"compression id {c}")
            block = decompress(c, bytes(mv[int(sec_start[i]):int(sec_end[i])]))
        except Exception as exc:  # codec errors have many types
            reason = "unsupported_compression" if c not in COMPRESSION_NAMES else "decompression_failed"
            issues.append(Issue(reason, int(scan.position[i]), f"{COMPRESSION_NAMES.get(c, c)}: {exc}", int(scan.base_offset[i]), int(scan.record_count[i])))
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
    bad = np.zeros(len(sel), dtype=bool)
    rec_batch_parts, rec_start_parts, rec_end_parts, rec_step_parts = [], [], [], []
    max_count = int(counts.max()) if len(counts) else 0
    active = np.arange(len(sel))
    for k in range(max_count):
        active = active[counts[active] > k]
        if len(active) == 0:
            break
        p = cur[active]
        length, size, ok = read_varint(data, p, 5)
        start = p + size
        stop = start + length
        ok &= (length >= 0) & (stop <= ends[active])
        bad[active[~ok]] = True
        cur[active] = np.where(ok, stop, ends[active])
        rec_batch_parts.append(active)
        rec_step_parts.append(np.full(len(active), k, dtype=np.int64))
        rec_start_parts.append(start)
        rec_end_parts.append(stop)
        active = active[ok]
    if rec_batch_parts:
        rb = np.concatenate(rec_batch_parts)
        order = np.lexsort((np.concatenate(rec_step_parts), rb))  # log order: batch, then record
        rb = rb[order]
        rs = np.concatenate(rec_start_parts)[order]
        re_ = np.concatenate(rec_end_parts)[order]
    else:
        rb = rs = re_ = np.zeros(0, dtype=np.int64)
    # Record bodies: attributes int8, timestampDelta varlong, offsetDelta varint,
    # key (varint length + bytes), value (varint length + bytes), headers.
    p = rs + 1
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
        issues.append(Issue("corrupt_batch", int(scan.position[i]), "record framing overruns the batch", int(scan.base_offset[i]), int(scan.record_count[i])))
    keep = ~bad[rb] if len(rb) else np.zeros(0, dtype=bool)
    bi = sel[rb[keep]]
    attrs = scan.attributes[bi]
    log_append = (attrs & ATTR_TIMESTAMP_TYPE) != 0
    ts = np.where(log_append, scan.max_timestamp[bi], scan.base_timestamp[bi] + ts_delta[keep])
    return RecordTable(
        data=data,
        batch=bi.astype(np.int64),
        offset=scan.base_offset[bi] + off_delta[keep],
        timestamp=ts.astype(np.int64),
        key_start=key_start[keep],
        key_len=key_len[keep],
        value_start=value_start[keep],
        value_len=value_len[keep],
        issues=issues,
    )


def control_types(records: RecordTable) -> np.ndarray:
    """Control record type per record (0 ABORT, 1 COMMIT, other values as written; -1 if unreadable).

    The key of a control record is ``int16 version, int16 type`` (``ControlRecordType``).
    """
    ok = records.key_len >= 4
    pos = np.where(ok, records.key_start + 2, 0)
    t = read_int(records.data, pos, 2) if len(pos) else np.zeros(0, dtype=np.int64)
    return np.where(ok, t, -1)
