"""Vectorised readers of Kafka's primitive types in a byte buffer, at many positions at once, with numpy.

The types are big-endian integers and (zigzag) varints.

:func:`read_varint` follows ``org.apache.kafka.common.utils.ByteUtils.readVarint/readVarlong``;
:func:`read_int` and :func:`overlapping_view` read fixed-width big-endian integers through one gather;
:func:`byte_view` gives any buffer as unsigned bytes.  Nothing here knows about batches or records.
"""

from __future__ import annotations

import numpy as np

__all__ = ["byte_view", "overlapping_view", "read_int", "read_varint"]


def byte_view(buf: bytes | memoryview) -> memoryview:
    """Return ``buf`` as a flat memoryview of unsigned bytes (format ``B``).

    Arrow buffers (Spark's ``binaryFile`` content) export a *signed* byte format (``b``): indexing
    them gives -128..127, so a byte >= 0x80 (a magic byte, an attribute) would read negative.
    """
    mv = memoryview(buf)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


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

    Follows ``org.apache.kafka.common.utils.ByteUtils.readVarint/readVarlong``.  One- and two-byte
    varints (the common case: small lengths and deltas) take a fast path.

    Returns
    -------
    tuple of numpy.ndarray
        ``(values int64, sizes int64, ok bool)``; ``ok`` is False where no terminating
        byte was found within ``max_bytes`` (5 for varint, 10 for varlong) or the buffer ended.
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
    """View the uint8 array ``arr`` unaligned: element *i* is the ``dtype`` integer starting at byte *i*.

    One gather then reads many integers at arbitrary positions.  A buffer shorter than one integer is
    zero-padded first.
    """
    size = np.dtype(dtype).itemsize
    if len(arr) < size:
        padded = np.zeros(size, dtype=np.uint8)
        padded[: len(arr)] = arr
        arr = padded
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return np.ndarray(shape=(len(arr) - size + 1,), dtype=dtype, buffer=arr, offset=0, strides=(1,))


def read_int(arr: np.ndarray, pos: np.ndarray, nbytes: int, signed: bool = True, in_range: bool = False) -> np.ndarray:
    """Read the big-endian integers of ``nbytes`` (2, 4 or 8) at each position, as int64.

    One gather through an unaligned, overlapping view of ``arr`` (element *i* = the
    ``nbytes`` bytes at *i*).  Positions too close to the end read the last whole
    integer instead: callers mask such rows out.  ``in_range``: the caller has checked that
    ``0 <= pos <= len(arr) - nbytes`` everywhere (no clipping pass; an index outside raises IndexError).
    """
    if len(pos) == 0 or len(arr) == 0:
        return np.zeros(len(pos), dtype=np.int64)
    view = overlapping_view(arr, _BE[(nbytes, signed)])
    return view[pos if in_range else np.clip(pos, 0, len(view) - 1)].astype(np.int64)
