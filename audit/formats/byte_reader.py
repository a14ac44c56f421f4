"""Byte readers shared by the ``__consumer_offsets`` and ``__share_group_state`` decoders.

A cursor over one value (:class:`ValueReader`) for the per-record decoders of Kafka's generated message
classes: classic (int16/int32 lengths) and flexible (KIP-482: compact lengths as unsigned varints plus
tagged fields) strings, bytes and tagged-field sections, as ``org.apache.kafka.common.protocol.Readable`` /
``ByteBufferAccessor`` read them.  And the vectorised builders of Arrow columns from many byte slices of one
buffer at once: UTF-8 strings (:func:`utf8_slices`, :func:`gather_slices`) and 16-byte uuids in the form of
``org.apache.kafka.common.Uuid.toString()`` (:func:`uuid_strings`).
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa


__all__ = [
    "GATHER_CHUNK",
    "ValueReader",
    "gather_slices",
    "utf8_slices",
    "uuid_strings",
]


def utf8_slices(data: np.ndarray, start: np.ndarray, length: np.ndarray, valid: np.ndarray) -> pa.Array:
    """Arrow utf8 array of ``data[start:start+length]`` per row; null where not ``valid`` or length < 0."""
    n = len(start)
    ok = valid & (length >= 0)
    lens = np.where(ok, length, 0).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    chars = gather_slices(data, np.where(ok, start, 0), lens, offsets) if total else np.zeros(0, dtype=np.uint8)
    validity = pa.array(ok).buffers()[1] if not ok.all() else None
    arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(chars)])
    try:
        return arr.cast(pa.large_string()).cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # Not valid UTF-8 somewhere: decode per value, replacing bad bytes.
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in arr.to_pylist()], pa.string())


_B64URL = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", dtype=np.uint8)


def uuid_strings(data: np.ndarray, start: np.ndarray) -> pa.Array:
    """Return Arrow strings of the 16-byte uuids at ``data[start:start+16]`` in Kafka's ``Uuid.toString()`` form.

    That form is URL-safe base64 without padding, 22 characters; null where ``start`` is -1.  Vectorised: 16 bytes
    padded to 18 make six 3-byte groups, 24 sextets, of which the first 22 carry the uuid.
    """
    n = len(start)
    ok = start >= 0
    if not ok.any():
        return pa.nulls(n, pa.string())
    raw = np.zeros((n, 18), dtype=np.uint8)
    idx = np.where(ok, start, 0)[:, None] + np.arange(16)
    raw[:, :16] = data[np.minimum(idx, len(data) - 1)]
    g = raw.reshape(n, 6, 3).astype(np.uint32)
    word = (g[:, :, 0] << 16) | (g[:, :, 1] << 8) | g[:, :, 2]
    sextets = np.stack([(word >> s) & 63 for s in (18, 12, 6, 0)], axis=2).reshape(n, 24)[:, :22]
    chars = np.ascontiguousarray(_B64URL[sextets]).reshape(-1)
    offsets = np.arange(n + 1, dtype=np.int32) * 22
    validity = None if ok.all() else pa.array(ok).buffers()[1]
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars), validity)


#: :func:`gather_slices` builds its per-byte index for at most this many bytes at a time (8 index bytes per
#: byte gathered); a longer string is copied as one slice.
GATHER_CHUNK = 1 << 18


def gather_slices(data: np.ndarray, start: np.ndarray, lens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Concatenate ``data[start[i]:start[i] + lens[i]]`` of every row.

    ``offsets``: the running sum of ``lens`` with a leading 0.  Memory stays near the output size: the vectorised
    per-byte index is built for at most :data:`GATHER_CHUNK` bytes of rows at a time, and a row longer than that
    (a huge metadata string) is copied as a slice.
    """
    total = int(offsets[-1])
    out = np.empty(total, dtype=np.uint8)
    n = len(lens)
    big = np.nonzero(lens > GATHER_CHUNK)[0]
    for i in big.tolist():
        out[offsets[i] : offsets[i + 1]] = data[start[i] : start[i] + lens[i]]
    small = lens.copy()
    small[big] = 0
    cum = np.cumsum(small)
    lo = 0
    while lo < n:
        # rows lo..hi-1 hold at most GATHER_CHUNK bytes of the strings left (at least one row)
        hi = max(int(np.searchsorted(cum, (cum[lo - 1] if lo else 0) + GATHER_CHUNK, side="right")), lo + 1)
        ln = small[lo:hi]
        m = int(ln.sum())
        if m:
            rows = np.repeat(np.arange(lo, hi, dtype=np.int64), ln)
            t = np.arange(m, dtype=np.int64) - np.repeat(np.cumsum(ln) - ln, ln)
            out[offsets[rows] + t] = data[start[rows] + t]
        lo = hi
    return out


class ValueReader:
    """Cursor over one value for the (rare) per-record group metadata decode."""

    def __init__(self, b: bytes, pos: int = 0):
        self.b, self.p = b, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.p + n > len(self.b):
            raise ValueError(f"need {n} bytes at {self.p}, value has {len(self.b)}")
        v = self.b[self.p : self.p + n]
        self.p += n
        return v

    def i16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def i64(self) -> int:
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self) -> int:
        shift = val = 0
        while True:
            byte = self.take(1)[0]
            val |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return val
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def string(self, flexible: bool) -> str | None:
        n = self.uvarint() - 1 if flexible else self.i16()
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def bytes_(self, flexible: bool) -> bytes | None:
        n = self.uvarint() - 1 if flexible else self.i32()
        return None if n < 0 else self.take(n)

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())
