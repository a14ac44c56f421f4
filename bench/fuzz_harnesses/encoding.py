"""Kafka's byte layouts written and read apart from the decoders under test: varints and zigzag varints,
tagged-field sections, CRC-valid v2 batches and legacy messages, segment entries, v2 records and records blocks,
compression as producers do it, and the ``int32 length, bytes`` key/value input layout.
"""

from __future__ import annotations

import gzip
import random
import struct
import zlib

from crc32c import crc32c

from audit.formats.record_batch import BATCH_HEADER_SIZE, LOG_OVERHEAD, decompress


def v2_batch(
    payload: bytes,
    count: int,
    codec: int,
    base_offset: int = 0,
    last_delta: int | None = None,
    attributes: int | None = None,
    epoch: int = 0,
) -> bytes:
    """One CRC-valid v2 batch around ``payload`` (its records block as stored)."""
    if last_delta is None:
        last_delta = max(min(count, 1 << 31) - 1, 0)
    attrs = codec if attributes is None else attributes
    body = (
        struct.pack(
            ">hiqqqhii",
            wrap(attrs, 16),
            wrap(last_delta, 32),
            1_700_000_000_000,
            1_700_000_000_000,
            -1,
            -1,
            -1,
            wrap(count, 32),
        )
        + payload
    )
    head = struct.pack(">qiib", wrap(base_offset, 64), len(body) + 9, wrap(epoch, 32), 2)
    return head + struct.pack(">I", crc32c(body)) + body


def legacy_message(
    magic: int, attrs: int, offset: int, key: bytes | None, value: bytes | None, timestamp: int = 1_600_000_000_000
) -> bytes:
    """One CRC-valid legacy message (``LegacyRecord``), with its offset and size prefix."""
    body = bytes([magic, attrs & 0xFF]) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for b in (key, value):
        body += struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", wrap(offset, 64), len(msg)) + msg


CODEC_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def split_kv_records(data: bytes) -> list[tuple[bytes | None, bytes | None]]:
    """``offsets_records`` input layout: repeated ``int32 key length, key, int32 value length, value``
    (length -1 = null; a length past the end takes what is left)."""
    out = []
    pos, n = 0, len(data)
    while pos < n and len(out) < 4096:
        parts = []
        for _ in range(2):
            if pos + 4 > n:
                ln, pos = -1, n
            else:
                ln = struct.unpack_from(">i", data, pos)[0]
                pos += 4
            if ln < 0:
                parts.append(None)
            else:
                parts.append(data[pos : pos + ln])
                pos += ln
        out.append((parts[0], parts[1]))
    return out


def join_kv_records(records: list[tuple[bytes | None, bytes | None]]) -> bytes:
    """Inverse of :func:`split_kv_records`."""
    out = bytearray()
    for k, v in records:
        for b in (k, v):
            out += struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b
    return bytes(out)


def wrap(v: int, bits: int) -> int:
    """``v`` as a signed ``bits``-bit integer (two's complement wrap)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def uvarint(v: int) -> bytes:
    """Unsigned base-128 varint of any non-negative integer (no length limit: over-long on purpose)."""
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag(v: int, bits: int = 64) -> bytes:
    """Kafka's zigzag varint (``ByteUtils.writeVarint``/``writeVarlong``) of ``v`` wrapped to ``bits``."""
    v = wrap(v, bits)
    return uvarint(((v << 1) ^ (v >> (bits - 1))) & ((1 << bits) - 1))


def read_uvarint(b: bytes, pos: int, limit: int = 10) -> tuple[int, int] | None:
    """(value, next position) of the unsigned varint at ``pos``; None when unterminated."""
    v = shift = 0
    for i in range(pos, min(pos + limit, len(b))):
        v |= (b[i] & 0x7F) << shift
        if b[i] < 0x80:
            return v, i + 1
        shift += 7
    return None


def read_zigzag(b: bytes, pos: int, limit: int = 10) -> tuple[int, int] | None:
    """(value, next position) of the zigzag varint at ``pos``; None when unterminated within ``limit``."""
    r = read_uvarint(b, pos, limit)
    if r is None:
        return None
    u, p = r
    return (u >> 1) ^ -(u & 1), p


def split_chain(buf: bytes) -> tuple[list[bytearray], bytes]:
    """Split a segment into its entries (v2 batches or legacy messages, each with its 12-byte offset
    and length prefix) as far as the length fields allow, and the bytes after the last one."""
    entries: list[bytearray] = []
    pos, n = 0, len(buf)
    while n - pos >= LOG_OVERHEAD + 5 and len(entries) < 20000:
        length = struct.unpack_from(">i", buf, pos + 8)[0]
        if length < 5 or pos + LOG_OVERHEAD + length > n:
            break
        entries.append(bytearray(buf[pos : pos + LOG_OVERHEAD + length]))
        pos += LOG_OVERHEAD + length
    return entries, bytes(buf[pos:])


def fix_entry(e: bytearray, length: bool = True) -> bytearray:
    """Recompute an entry's length field (when ``length``) and its CRC: CRC-32C over attributes..end
    for magic 2, CRC-32 over magic..end for legacy messages."""
    if len(e) < 17:
        return e
    if length:
        e[8:12] = struct.pack(">i", len(e) - LOG_OVERHEAD)
    magic = e[16]
    if magic == 2 and len(e) >= BATCH_HEADER_SIZE:
        e[17:21] = struct.pack(">I", crc32c(bytes(e[21:])))
    elif magic in (0, 1):
        e[12:16] = struct.pack(">I", zlib.crc32(bytes(e[16:])))
    return e


#: Decompressed sizes the mutators work with (a records block larger than this is mutated as bytes).
_MUTATE_PLAIN_CAP = 8 << 20


def decompress_for_mutation(codec: int, payload: bytes, legacy_magic: int | None = None) -> bytes | None:
    try:
        if legacy_magic == 0 and codec == 3:
            from kafka.codec import lz4_decode_old_kafka

            return lz4_decode_old_kafka(payload) if len(payload) < (1 << 20) else None
        return decompress(codec, payload, _MUTATE_PLAIN_CAP)
    except Exception:
        return None


def compress(codec: int, plain: bytes, rng: random.Random | None = None, legacy_magic: int | None = None) -> bytes:
    """Compress a records block as a producer would: gzip, snappy (xerial-framed as the Java client
    writes it, or raw), lz4 (frame; Kafka 0.8's broken framing for magic 0), zstd."""
    from kafka import codec as kc

    if codec == 1:
        return gzip.compress(plain, compresslevel=rng.choice((1, 6, 9)) if rng else 6)
    if codec == 2:
        if rng is not None and rng.random() < 0.3:
            import snappy

            return snappy.compress(plain)
        return kc.snappy_encode(plain)
    if codec == 3:
        return kc.lz4_encode_old_kafka(plain) if legacy_magic == 0 else kc.lz4_encode(plain)
    if codec == 4:
        return kc.zstd_encode(plain)
    return plain


def split_records(plain: bytes) -> tuple[list[bytes], bytes]:
    """The record bodies of an uncompressed v2 records block (each without its length varint) and
    whatever follows the last one that fits."""
    out, pos, n = [], 0, len(plain)
    while pos < n and len(out) < 200000:
        r = read_zigzag(plain, pos, 5)
        if r is None:
            break
        ln, p = r
        if ln < 0 or p + ln > n:
            break
        out.append(plain[p : p + ln])
        pos = p + ln
    return out, plain[pos:]


def join_records(bodies: list[bytes], tail: bytes = b"") -> bytes:
    """A v2 records block: each body after its zigzag varint length, then ``tail`` (inverse of
    :func:`split_records`)."""
    return b"".join(zigzag(len(b), 32) + b for b in bodies) + tail


def parse_record(body: bytes) -> list | None:
    """[attributes, timestamp delta, offset delta, key, value, headers block] of one record body."""
    if not body:
        return None
    pos = 1
    r1 = read_zigzag(body, pos, 10)
    if r1 is None:
        return None
    tsd, pos = r1
    r2 = read_zigzag(body, pos, 5)
    if r2 is None:
        return None
    offd, pos = r2
    fields = [body[0], tsd, offd]
    for _ in range(2):
        r = read_zigzag(body, pos, 5)
        if r is None:
            return None
        ln, pos = r
        if ln < 0:
            fields.append(None)
        else:
            if pos + ln > len(body):
                return None
            fields.append(body[pos : pos + ln])
            pos += ln
    fields.append(body[pos:])
    return fields


def build_record(f: list) -> bytes:
    """One record body from the fields :func:`parse_record` returns (key/value None = null)."""
    out = bytes([f[0] & 0xFF]) + zigzag(f[1], 64) + zigzag(f[2], 32)
    for b in (f[3], f[4]):
        out += zigzag(-1, 32) if b is None else zigzag(len(b), 32) + b
    return out + f[5]


def minimal_record(i: int = 0) -> bytes:
    """The smallest v2 record body: null key and value, no headers (6 bytes after its length)."""
    return bytes([0]) + zigzag(0, 64) + zigzag(i, 32) + b"\x01\x01\x00"


def tagged_fields(fields: list[tuple[int, bytes]]) -> bytes:
    """A flexible struct's tagged-field section: uvarint count, then per field uvarint tag, uvarint size, bytes."""
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(b)) + b for t, b in fields)


def overlong_uvarint(v: int, extra: int = 1) -> bytes:
    """``v`` as an unsigned varint padded with ``extra`` needless continuation bytes (same value)."""
    b = bytearray(uvarint(v))
    b[-1] |= 0x80
    return bytes(b) + b"\x80" * (extra - 1) + b"\x00"
