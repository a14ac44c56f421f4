"""Legacy message sets (magic 0 and 1: ``LegacyRecord``/``AbstractLegacyRecordBatch``).

They hold logs written before Kafka 0.11, or under an old ``log.message.format.version``.

:func:`extract_legacy_records` reads one Python step per top-level message; the inner messages of a compressed
wrapper are found by walking their size chain (:func:`_walk_legacy_set`) and decoded with numpy, as kafka-python's
``LegacyRecordBatch`` reads them.  Their byte layout is in :mod:`.layout` (``LEGACY_*``).
"""

from __future__ import annotations

import struct

import numpy as np

from .compression import DecompressionLimitError, InflationBudget, decompress
from .layout import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    COMPRESSION_NAMES,
    INT64_MAX,
    LEGACY_ATTRIBUTES_OFFSET,
    LEGACY_KEY_OFFSET,
    LEGACY_SIZE_OFFSET,
    LEGACY_TIMESTAMP_OFFSET,
    LOG_OVERHEAD,
)
from .primitives import byte_view, read_int
from .results import BatchScan, ReadIssue, RecordTable

__all__ = ["extract_legacy_records"]

_I32 = struct.Struct(">i")


class _LegacyFormatError(ValueError):
    """A legacy message (or a message inside a wrapper) whose framing does not hold."""


def _legacy_key_value(mv, pos: int, end: int) -> tuple[int, int, int, int]:
    """Read the key and value of the legacy message body at ``pos`` (its key length field), inside ``end``.

    Returns
    -------
    tuple of int
        (key start, key length, value start, value length); lengths are -1 for null.

    Raises
    ------
    _LegacyFormatError
        For a length field, key or value that does not fit inside ``end``.
    """
    out: list[int] = []
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
    """Fix the header checksum of an lz4 frame as Kafka 0.8/0.9 wrote it for magic 0.

    KAFKA-3160: the header checksum byte covers the wrong bytes.  The frame is returned with the checksum the LZ4
    frame format defines (second byte of the xxh32 of the frame descriptor) put back, so a standard lz4 frame
    decoder reads it.
    """
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
    """Read the messages of a decompressed legacy wrapper's message set.

    As ``AbstractLegacyRecordBatch`` (and kafka-python's ``LegacyRecordBatch``) iterate them: inner messages laid
    out as the wrapper's magic says, never compressed themselves; magic 1 inner offsets relative (absolute = the
    wrapper's offset minus the last inner offset plus the inner offset, kept as written when that base would be
    negative), magic 0 absolute; a LogAppendTime wrapper's timestamp for every inner message.

    Only the chain of message sizes is walked in Python; every field is then read with numpy.

    Returns
    -------
    list of numpy.ndarray
        ``(offsets, timestamps, key starts, key lengths, value starts, value lengths)`` as int64 arrays with
        positions into ``inner``.

    Raises
    ------
    DecompressionLimitError
        As soon as the set holds more than ``max_messages`` messages.
    _LegacyFormatError
        For a message that does not fit (or whose key or value does not fit it), an empty set, a compressed
        inner message or an offset beyond int64.
    """
    from array import array

    n = len(inner)
    key_at = LEGACY_KEY_OFFSET[magic]
    need = key_at + 8 - LOG_OVERHEAD  # message size that holds the header and both length fields
    unpack = _I32.unpack_from
    starts = array("q")
    pos = 0
    while pos < n:
        if pos + LOG_OVERHEAD > n:
            raise _LegacyFormatError(f"inner message at byte {pos} of the decompressed set is cut short")
        size = unpack(inner, pos + LEGACY_SIZE_OFFSET)[0]
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
    end = p + LOG_OVERHEAD + read_int(arr, p + LEGACY_SIZE_OFFSET, 4)
    attrs = arr[p + LEGACY_ATTRIBUTES_OFFSET]
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
    timestamps = read_int(arr, p + LEGACY_TIMESTAMP_OFFSET, 8) if magic == 1 else np.full(len(p), -1, dtype=np.int64)
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
    """Read every message of the legacy (magic 0/1) entries selected by ``batch_mask``.

    As Kafka's ``AbstractLegacyRecordBatch`` (and kafka-python's ``LegacyRecordBatch``) read them: a
    wrapper message's value is decompressed (gzip, snappy, lz4, with Kafka 0.8's lz4 header checksum for
    magic 0) by :func:`_inflate_wrapper`, bounded by the batch cap and the segment's ``budget``, and its
    inner messages walked by :func:`_walk_legacy_set` (magic-1 relative offsets made absolute).  Keys and
    values of plain messages are copied into the returned table's own buffer, which also holds each
    decompressed set; a timestamp is -1 for magic 0, the wrapper's for inner messages of a LogAppendTime
    wrapper.  An entry that cannot be read (a key or value length that does not fit, a null or empty
    compressed set, an inner message that does not fit) is dropped whole and reported by
    :func:`_legacy_issue`.  One Python step per entry; a wrapper's inner messages are read with numpy.

    Parameters
    ----------
    buf : bytes or memoryview
        The whole ``.log`` file content (a memoryview may hold signed bytes).
    scan : BatchScan
        Its entries (:func:`~.batches.scan_batches`).
    batch_mask : numpy.ndarray
        bool, one per entry of ``scan``: the legacy entries to read.
    budget : InflationBudget, optional
        What the segment's compressed entries may still inflate to (spent here); default: the budget of the
        selected entries (:meth:`InflationBudget.for_batches`).

    Returns
    -------
    RecordTable
        One row per message, in the order of their entries (an entry's inner messages in set order), with
        positions into the table's own ``data``.  Never raises.
    """
    from array import array

    mv = byte_view(buf)
    if budget is None:
        budget = InflationBudget.for_batches(scan, batch_mask)
    blob = bytearray()
    parts: list[list[np.ndarray]] = []
    issues: list[ReadIssue] = []
    plain = tuple(array("q") for _ in range(7))  # the columns of plain messages, in RecordTable's order
    batch_a, off_a, ts_a, ks_a, kl_a, vs_a, vl_a = plain
    for i in np.nonzero(batch_mask)[0].tolist():
        pos = int(scan.position[i])
        end = pos + LOG_OVERHEAD + int(scan.batch_length[i])
        magic = int(scan.magic[i])
        attrs = int(scan.attributes[i])
        codec = attrs & ATTR_COMPRESSION_MASK
        wrapper_offset = int(scan.base_offset[i])
        try:
            ks, kl, vs, vl = _legacy_key_value(mv, pos + LEGACY_KEY_OFFSET[magic], end)
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
            inner, cols = _inflate_wrapper(
                mv, vs, vl, codec, magic, wrapper_offset, attrs, int(scan.base_timestamp[i]), budget
            )
        except Exception as exc:  # codec errors have many types; framing errors are _LegacyFormatError
            issues.append(_legacy_issue(exc, codec, pos, magic, wrapper_offset))
            continue
        parts.append(_wrapper_columns(i, cols, len(blob)))
        blob += inner
    return _legacy_table(blob, plain, parts, issues)


def _inflate_wrapper(
    mv: memoryview,
    vs: int,
    vl: int,
    codec: int,
    magic: int,
    wrapper_offset: int,
    attrs: int,
    wrapper_ts: int,
    budget: InflationBudget,
) -> tuple[bytes | bytearray, list[np.ndarray]]:
    """Decompress the message set of a legacy wrapper message whose value is ``mv[vs:vs + vl]``; read its columns.

    The value is decompressed with :func:`decompress` (codec 1 gzip, 2 snappy, 3 lz4, the only ones
    ``LegacyRecord`` knows; magic 0's lz4 header checksum as Kafka 0.8 wrote it, :func:`_kafka08_lz4`) within
    what is left of ``budget``, its inner messages walked by :func:`_walk_legacy_set`, and ``budget`` spent.

    Parameters
    ----------
    mv : memoryview
        The segment's bytes, unsigned.
    vs, vl : int
        The wrapper's value: byte position and length (-1 for null).
    codec, magic, wrapper_offset, attrs, wrapper_ts : int
        The wrapper's codec id, magic, offset, attributes and timestamp.
    budget : InflationBudget
        What the segment's compressed entries may still inflate to; spent.

    Returns
    -------
    tuple
        ``(inner, columns)``: the decompressed set, and :func:`_walk_legacy_set`'s int64 columns (offsets,
        timestamps, key starts, key lengths, value starts, value lengths) with positions into it.

    Raises
    ------
    _LegacyFormatError
        For a null value, a codec id legacy messages do not have, or a set that does not frame.
    DecompressionLimitError
        Beyond the batch cap or the budget; the codec's own errors for bad data.
    """
    if vl < 0:
        raise _LegacyFormatError("the wrapper message of a compressed set has a null value")
    if codec not in (1, 2, 3):
        raise _LegacyFormatError(f"compression id {codec} does not exist for magic {magic}")
    payload = bytes(mv[vs : vs + vl])
    if codec == 3 and magic == 0:
        payload = _kafka08_lz4(payload)
    inner = decompress(codec, payload, budget.cap())
    cols = _walk_legacy_set(inner, magic, wrapper_offset, attrs, wrapper_ts, max(budget.records, 0))
    budget.spend(len(inner), len(cols[0]))
    return inner, cols


def _legacy_issue(exc: Exception, codec: int, pos: int, magic: int, wrapper_offset: int) -> ReadIssue:
    """Make the issue of a legacy entry at byte ``pos`` that :func:`extract_legacy_records` could not read.

    ``decompression_limit`` for a wrapper beyond the batch cap or the segment's budget, ``decompression_failed``
    for another compressed wrapper, else ``corrupt_batch``; the detail names the magic, the codec and ``exc``.
    """
    reason = (
        "decompression_limit"
        if isinstance(exc, DecompressionLimitError)
        else "decompression_failed"
        if codec
        else "corrupt_batch"
    )
    detail = f"legacy message (magic {magic}, {COMPRESSION_NAMES.get(codec, codec)}): {exc}"
    return ReadIssue(reason, pos, detail, wrapper_offset)


def _wrapper_columns(i: int, cols: list[np.ndarray], shift: int) -> list[np.ndarray]:
    """Build the :class:`RecordTable` columns of the inner messages of entry ``i``, their positions moved by ``shift``.

    The columns are batch, offset, timestamp, key start and length, value start and length; ``shift`` is where
    their set starts in the table's buffer; a null key or value keeps position 0.  ``cols``:
    :func:`_walk_legacy_set`'s int64 columns.
    """
    m = len(cols[0])
    k_len, v_len = cols[3], cols[5]
    return [
        np.full(m, i, dtype=np.int64),
        cols[0],
        cols[1],
        np.where(k_len >= 0, cols[2] + shift, 0),
        k_len,
        np.where(v_len >= 0, cols[4] + shift, 0),
        v_len,
    ]


def _legacy_table(blob: bytearray, plain: tuple, parts: list[list[np.ndarray]], issues: list[ReadIssue]) -> RecordTable:
    """Build the :class:`RecordTable` of the legacy messages read, in the order of their entries.

    Parameters
    ----------
    blob : bytearray
        The table's buffer: plain messages' keys and values and the decompressed sets (not copied).
    plain : tuple of array.array
        Seven ``"q"`` arrays, the columns of the plain messages in :class:`RecordTable`'s order, batch first.
    parts : list of list of numpy.ndarray
        The columns of each wrapper's inner messages (:func:`_wrapper_columns`), in the same order.
    issues : list of ReadIssue
        The table's issues.
    """
    cols = [np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, np.int64) for a in plain]
    if parts:  # plain messages and decompressed sets, in the order of their entries
        allp = [np.concatenate([cols[c]] + [p[c] for p in parts]) for c in range(7)]
        order = np.argsort(allp[0], kind="stable")
        cols = [c[order] for c in allp]
    return RecordTable(
        data=np.frombuffer(blob, dtype=np.uint8),
        batch=cols[0],
        offset=cols[1],
        timestamp=cols[2],
        key_start=cols[3],
        key_len=cols[4],
        value_start=cols[5],
        value_len=cols[6],
        issues=issues,
    )
