"""The structure-aware mutation machinery the harnesses' custom mutators share: integers and varints at
extremes, ``__consumer_offsets`` key and value edits, blocks that inflate to many tiny records, one edit of a
segment (:func:`mutate_chain`) and the mutator factories built on it.  Every mutator takes
``(data, max_size, seed, byte_mutate)``; ``byte_mutate`` is libFuzzer's own mutator under atheris and
:func:`simple_byte_mutate` otherwise.
"""

from __future__ import annotations

import random
import struct
import zlib
from typing import Callable

from audit.formats.record_batch import BATCH_HEADER_SIZE

from bench.fuzz_harnesses.encoding import (
    build_record,
    compress,
    decompress_for_mutation,
    fix_entry,
    join_kv_records,
    join_records,
    legacy_message,
    minimal_record,
    parse_record,
    read_uvarint,
    split_chain,
    split_kv_records,
    split_records,
    uvarint,
    wrap,
    zigzag,
)


_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_V2_FIELDS = (
    "base_offset",
    "batch_length",
    "partition_leader_epoch",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "base_timestamp",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
)
_V2_FMT = "qiibIhiqqqhii"


#: Extreme integers of every width the formats use.
EXTREMES = {
    8: [0, 1, -1, 127, -128, 2, 0x7F, 0x80],
    16: [0, 1, -1, 2, 3, 4, 5, 0x7FFF, -0x8000, 0x7FFE, 255, 256],
    32: [0, 1, -1, 2, 7, 0x7FFFFFFF, -0x80000000, 0x7FFFFFFE, 0xFFFF, 0x10000, 1 << 20, 1 << 24, 1000000],
    64: [
        0,
        1,
        -1,
        (1 << 63) - 1,
        -(1 << 63),
        (1 << 63) - 2,
        (1 << 32),
        (1 << 31) - 1,
        (1 << 31),
        -(1 << 31) - 1,
        1 << 62,
    ],
}


def extreme(rng: random.Random, bits: int) -> int:
    """An extreme (or near-extreme, or random) signed ``bits``-bit integer."""
    r = rng.random()
    if r < 0.7:
        return wrap(rng.choice(EXTREMES[bits]), bits)
    if r < 0.85:
        return wrap(rng.choice(EXTREMES[bits]) + rng.choice((-2, -1, 1, 2)), bits)
    return wrap(rng.getrandbits(bits), bits)


def extreme_varint(rng: random.Random) -> bytes:
    """A varint-shaped byte string at an extreme: huge, negative, over-long, or unterminated."""
    k = rng.randrange(9)
    if k == 0:
        return zigzag(extreme(rng, 32), 32)
    if k == 1:
        return zigzag(extreme(rng, 64), 64)
    if k == 2:
        return uvarint(rng.choice((0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 35, (1 << 64) - 1, (1 << 70) - 1)))
    if k == 3:
        return b"\xff" * rng.choice((5, 6, 10, 11))  # unterminated
    if k == 4:
        return b"\x80" * rng.choice((4, 9)) + b"\x00"  # over-long zero
    if k == 5:
        return b"\xff\xff\xff\xff\x0f"  # 5-byte maximum
    if k == 6:
        return b"\xff" * 9 + b"\x01"  # 10-byte maximum
    if k == 7:
        return b"\xfe\xff\xff\xff\x0f"  # zigzag int32 min/max neighbourhood
    return zigzag(rng.randrange(-300, 300), 32)


def poke(rng: random.Random, b: bytes, start: int = 0) -> bytes:
    """Overwrite (or insert) an extreme integer in some encoding at a random position >= ``start``."""
    if len(b) <= start:
        start = 0
    pos = rng.randrange(start, len(b) + 1)
    kind = rng.randrange(6)
    if kind < 4:
        bits = (8, 16, 32, 64)[kind]
        enc = struct.pack(">" + "bhiq"[kind], extreme(rng, bits))
    else:
        enc = extreme_varint(rng)
    if rng.random() < 0.6:
        return b[:pos] + enc + b[pos + len(enc) :]
    return b[:pos] + enc + b[pos:]


def simple_byte_mutate(data: bytes, max_size: int) -> bytes:
    """A plain byte mutation (used when libFuzzer's own mutator is not at hand)."""
    rng = random.Random(hash(bytes(data)) ^ random.getrandbits(32))
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
        elif op == 2 and b:
            del b[rng.randrange(len(b))]
        elif b:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    return bytes(b[:max_size])


ByteMutate = Callable[[bytes, int], bytes]


_RECORD_TYPES = (0, 1, 2, 3, 4, 5, 8, 9, 15, 16, 17, 18, 23, 24, 99, -1, 0x7FFF, -0x8000)


def mutate_offsets_key(rng: random.Random, key: bytes | None) -> bytes | None:
    """A ``__consumer_offsets`` key with one structural edit: record type, a string length or the
    partition at an extreme, a truncated or extended tail."""
    if key is None or len(key) < 2 or rng.random() < 0.05:
        group = rng.choice((b"g", b"", b"payments-\xff", b"x" * rng.choice((1, 200, 1500))))
        return (
            struct.pack(">hh", rng.choice((0, 1, 2, 3)), len(group))
            + group
            + struct.pack(">h", 1)
            + b"t"
            + struct.pack(">i", rng.randrange(-2, 50))
        )
    op = rng.randrange(7)
    if op == 0:
        return struct.pack(">h", rng.choice(_RECORD_TYPES)) + key[2:]
    if op in (1, 2) and len(key) >= 4:
        glen = struct.unpack_from(">h", key, 2)[0]
        if op == 1 or glen < 0 or 4 + glen + 2 > len(key):
            return key[:2] + struct.pack(">h", extreme(rng, 16)) + key[4:]
        t = 4 + glen
        return key[:t] + struct.pack(">h", extreme(rng, 16)) + key[t + 2 :]
    if op == 3 and len(key) >= 4:
        return key[:-4] + struct.pack(">i", extreme(rng, 32))
    if op == 4:
        return key[: rng.randrange(len(key) + 1)]
    if op == 5:
        return key + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    return poke(rng, key)


VALUE_VERSIONS = (0, 1, 2, 3, 4, 5, -1, 0x7FFF, -0x8000)


def mutate_offsets_value(rng: random.Random, value: bytes | None) -> bytes | None:
    """An OffsetCommitValue / GroupMetadataValue with one structural edit: version, offset, epoch,
    metadata length (int16 or compact varint), timestamps, member count; or null (a tombstone)."""
    r = rng.random()
    if value is None or r < 0.04:
        if value is None or rng.random() < 0.5:
            v = rng.choice((0, 1, 3, 4))
            body = struct.pack(">q", extreme(rng, 64))
            if v >= 3:
                body += struct.pack(">i", rng.choice((-1, 0, 5, -2, 0x7FFFFFFF)))
            body += (b"\x01" if v == 4 else struct.pack(">h", 0)) + struct.pack(">q", 1_700_000_000_000)
            if v == 1:
                body += struct.pack(">q", -1)
            return struct.pack(">h", v) + body + (b"\x00" if v == 4 else b"")
        return None
    if len(value) < 2:
        return poke(rng, value)
    op = rng.randrange(8)
    if op == 0:
        return struct.pack(">h", rng.choice(VALUE_VERSIONS)) + value[2:]
    if op == 1 and len(value) >= 10:  # committed offset (or group metadata's protocol type + generation)
        return value[:2] + struct.pack(">q", extreme(rng, 64)) + value[10:]
    if op == 2 and len(value) >= 14:  # leader epoch of v3+
        return value[:10] + struct.pack(">i", extreme(rng, 32)) + value[14:]
    if op == 3 and len(value) >= 12:  # metadata length: int16 (v0-v3) or compact varint (v4)
        version = struct.unpack_from(">h", value, 0)[0]
        at = 14 if version >= 3 else 10
        if version >= 4:
            r2 = read_uvarint(value, at, 5)
            end = r2[1] if r2 else at + 1
            return value[:at] + extreme_varint(rng) + value[end:]
        return value[:at] + struct.pack(">h", extreme(rng, 16)) + value[at + 2 :]
    if op == 4:
        return value[: rng.randrange(len(value) + 1)]
    if op == 5:
        return value + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
    return poke(rng, value, 2)


KVMutate = Callable[[random.Random, bytes | None, bytes | None], tuple[bytes | None, bytes | None]]


def offsets_kv_mutator(rng, key, value):
    """(key, value) of a ``__consumer_offsets`` record with one structural edit of either."""
    if rng.random() < 0.4:
        return mutate_offsets_key(rng, key), value
    return key, mutate_offsets_value(rng, value)


def bomb(codec: int, kind: str, size: int, legacy_magic: int | None = None) -> tuple[bytes, int]:
    """(compressed block, record count) of a records block of ``size`` bytes that compresses well:
    zeros, or the smallest valid record (or legacy message) repeated.  Built once per process, and
    compressed in 1 MiB pieces, so the mutator never holds the inflated bytes."""
    key = (codec, kind, size, legacy_magic)
    if key in _BOMBS:
        return _BOMBS[key]
    if kind == "zeros":
        unit = bytes(1)
    elif legacy_magic is None:
        unit = zigzag(6, 32) + minimal_record(0)
    else:
        unit = legacy_message(legacy_magic, 0, 0, None, b"")
    reps = max(size // len(unit), 1)
    count = reps if kind != "zeros" else size // 7
    piece_reps = max((1 << 20) // len(unit), 1)
    piece = unit * piece_reps

    def pieces():  # the same 1 MiB piece again and again: never the whole block in memory
        for i in range(0, reps, piece_reps):
            yield piece if reps - i >= piece_reps else unit * (reps - i)

    if codec == 1:
        z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        block = b"".join(z.compress(p) for p in pieces()) + z.flush()
    elif codec == 3 and legacy_magic != 0:
        import lz4.frame

        c = lz4.frame.LZ4FrameCompressor()
        block = c.begin() + b"".join(c.compress(p) for p in pieces()) + c.flush()
    elif codec == 4:
        import zstandard

        c = zstandard.ZstdCompressor().compressobj()
        block = b"".join(c.compress(p) for p in pieces()) + c.flush()
    else:  # snappy (bounded to a few MiB by the callers) and magic-0 lz4: whole
        block = compress(codec, b"".join(pieces()), None, legacy_magic)
    _BOMBS[key] = (block, count)
    return _BOMBS[key]


_BOMBS: dict = {}


def mutate_records(
    rng: random.Random, plain: bytes, kv: KVMutate, byte_mutate: ByteMutate, max_size: int
) -> tuple[bytes, int | None]:
    """Edit an uncompressed v2 records block; returns it and its new record count (None: unknown)."""
    bodies, tail = split_records(plain)
    op = rng.randrange(10)
    if not bodies or op == 0:
        return byte_mutate(plain, max(len(plain) * 2, 64)), None
    i = rng.randrange(len(bodies))
    f = parse_record(bodies[i])
    if op in (1, 2, 3) and f is not None:  # key / value through the format-aware mutator
        f[3], f[4] = kv(rng, f[3], f[4])
        bodies[i] = build_record(f)
    elif op == 4 and f is not None:  # a numeric field of the record at an extreme
        j = rng.randrange(4)
        if j == 0:
            f[0] = extreme(rng, 8)
        elif j == 1:
            f[1] = extreme(rng, 64)
        elif j == 2:
            f[2] = extreme(rng, 32)
        else:
            f[5] = extreme_varint(rng) + f[5][1:]
        bodies[i] = build_record(f)
    elif op == 5:  # a length varint (record, key or value) at an extreme: framing must catch it
        raw = join_records(bodies[:i]) + extreme_varint(rng) + bodies[i] + join_records(bodies[i + 1 :], tail)
        return raw, len(bodies)
    elif op == 6 and f is not None:  # key/value length lies, bytes stay
        key_len_pos = 1 + len(zigzag(f[1], 64)) + len(zigzag(f[2], 32))
        b = bodies[i]
        bodies[i] = b[:key_len_pos] + extreme_varint(rng) + b[key_len_pos + 1 :]
    elif op == 7:  # many copies of a record (a batch of many records)
        k = rng.choice((2, 10, 100, 1000, max(1, max_size // max(len(bodies[i]) + 1, 1))))
        bodies[i : i + 1] = [bodies[i]] * k
    elif op == 8 and len(bodies) > 1:
        del bodies[i]
    else:
        bodies[i] = byte_mutate(bodies[i], len(bodies[i]) + 16)
    return join_records(bodies, tail), len(bodies)


def _mutate_v2(rng: random.Random, e: bytearray, kv: KVMutate, byte_mutate: ByteMutate, max_size: int) -> bytearray:
    if len(e) < BATCH_HEADER_SIZE:
        return fix_entry(bytearray(byte_mutate(bytes(e), len(e) + 8)))
    hdr = list(_V2_HEADER.unpack_from(e, 0))
    codec = hdr[5] & 7
    op = rng.randrange(10)
    if op <= 2:  # a header field at an extreme, CRC fixed so the field is what is checked
        j = rng.choice((0, 1, 2, 3, 5, 5, 6, 6, 7, 8, 9, 10, 11, 12, 12, 12))
        bits = {"q": 64, "i": 32, "b": 8, "h": 16, "I": 32}[_V2_FMT[j]]
        v = extreme(rng, bits)
        if j == 5 and rng.random() < 0.7:  # attributes: codec, timestamp type, transactional, control
            v = rng.choice((0, 1, 2, 3, 4, 5, 6, 7, 0x08, 0x10, 0x20, 0x30, 0x40, 0x7FFF)) | (
                hdr[5] & ~7 if rng.random() < 0.5 else 0
            )
        if j == 3:
            v = rng.choice((0, 1, 3, 0x7F, -1, -128))
        hdr[j] = v
        e[:BATCH_HEADER_SIZE] = _pack_header(hdr)
        return fix_entry(e, length=(j != 1))
    payload = bytes(e[BATCH_HEADER_SIZE:])
    if op == 3 and codec:  # the compressed bytes themselves
        payload = byte_mutate(payload, len(payload) + 64)
        return fix_entry(bytearray(e[:BATCH_HEADER_SIZE] + payload))
    if op == 4:  # compress (or recompress) the records with another codec
        plain = payload if codec == 0 else decompress_for_mutation(codec, payload)
        if plain is None:
            return e
        new = rng.choice((1, 2, 3, 4))
        hdr[5] = (hdr[5] & ~7) | new
        e2 = bytearray(_pack_header(hdr)) + compress(new, plain, rng)
        return fix_entry(e2)
    if op == 5 and rng.random() < 0.3:  # a block that inflates to many tiny records (or zeros)
        new = rng.choice((1, 2, 3, 4))
        size = rng.choice((1 << 20, 16 << 20, 80 << 20)) if new != 2 else rng.choice((1 << 20, 8 << 20))
        block, count = bomb(new, rng.choice(("tiny", "tiny", "zeros")), size)
        hdr[5] = (hdr[5] & ~7) | new
        hdr[12] = count if rng.random() < 0.8 else extreme(rng, 32)
        hdr[6] = max(min(count, 1 << 31) - 1, 0)
        return fix_entry(bytearray(_pack_header(hdr)) + block)
    plain = payload if codec == 0 else decompress_for_mutation(codec, payload)
    if plain is None:
        return fix_entry(bytearray(e[:BATCH_HEADER_SIZE] + byte_mutate(payload, len(payload) + 64)))
    plain, count = mutate_records(rng, plain, kv, byte_mutate, max_size)
    if count is not None and rng.random() < 0.8:
        hdr[12] = wrap(count, 32)
        hdr[6] = wrap(max(count - 1, 0), 32)
    block = compress(codec, plain, rng) if codec in (1, 2, 3, 4) else plain
    return fix_entry(bytearray(_pack_header(hdr)) + block)


def _pack_header(hdr: list) -> bytes:
    """The 61-byte v2 header of ``hdr`` (values wrapped to their field widths)."""
    bits = {"q": 64, "i": 32, "b": 8, "h": 16}
    return _V2_HEADER.pack(*[x & 0xFFFFFFFF if c == "I" else wrap(x, bits[c]) for x, c in zip(hdr, _V2_FMT)])


def _legacy_fields(e: bytearray):
    """(magic, attrs, timestamp, key, value, ok) of a legacy entry."""
    if len(e) < 18:
        return 0, 0, -1, None, None, False
    magic, attrs = e[16], e[17]
    pos = 18 + (8 if magic == 1 else 0)
    ts = struct.unpack_from(">q", e, 18)[0] if magic == 1 and len(e) >= 26 else -1
    out = []
    for _ in range(2):
        if pos + 4 > len(e):
            return magic, attrs, ts, None, None, False
        ln = struct.unpack_from(">i", e, pos)[0]
        pos += 4
        if ln < 0:
            out.append(None)
        else:
            if pos + ln > len(e):
                return magic, attrs, ts, None, None, False
            out.append(bytes(e[pos : pos + ln]))
            pos += ln
    return magic, attrs, ts, out[0], out[1], pos == len(e)


def _mutate_legacy(
    rng: random.Random, e: bytearray, kv: KVMutate, byte_mutate: ByteMutate, max_size: int, depth: int = 0
) -> bytearray:
    offset = struct.unpack_from(">q", e, 0)[0]
    magic, attrs, ts, key, value, ok = _legacy_fields(e)
    op = rng.randrange(8)
    if not ok or op == 0:
        return fix_entry(bytearray(e[:16]) + bytearray(byte_mutate(bytes(e[16:]), len(e) + 16)))
    codec = attrs & 7
    if op == 1:  # offset, attributes, magic or timestamp at an extreme
        j = rng.randrange(4)
        if j == 0:
            offset = extreme(rng, 64)
        elif j == 1:
            attrs = rng.choice((0, 1, 2, 3, 4, 5, 7, 8, 9, 0x10, 0x80, 0xFF))
        elif j == 2:
            magic = rng.choice((0, 1))
        else:
            ts = extreme(rng, 64)
        return bytearray(legacy_message(magic, attrs, offset, key, value, ts))
    if codec in (1, 2, 3) and value is not None and depth == 0:
        if op == 2 and rng.random() < 0.3:  # a wrapper inflating to many tiny messages
            big = codec != 2 and not (codec == 3 and magic == 0)
            block, _count = bomb(
                codec,
                rng.choice(("tiny", "zeros")),
                rng.choice((1 << 20, 16 << 20, 80 << 20)) if big else 8 << 20,
                magic,
            )
            return bytearray(legacy_message(magic, attrs, offset, key, block, ts))
        if op in (2, 3, 4, 5):
            inner = decompress_for_mutation(codec, value, magic)
            if inner is not None:
                inner = mutate_chain(rng, inner, kv, byte_mutate, max_size, depth + 1)
                return bytearray(legacy_message(magic, attrs, offset, key, compress(codec, inner, rng, magic), ts))
        return bytearray(legacy_message(magic, attrs, offset, key, byte_mutate(value, len(value) + 32), ts))
    if op in (2, 3, 4, 5):
        key, value = kv(rng, key, value)
    elif op == 6:  # a key or value length that lies, CRC fixed
        b = bytearray(legacy_message(magic, attrs, offset, key, value, ts))
        at = 18 + (8 if magic == 1 else 0)
        if rng.random() < 0.5 and key is not None:
            at += 4 + len(key)
        b[at : at + 4] = struct.pack(">i", extreme(rng, 32))
        return fix_entry(b)
    else:
        value = byte_mutate(value or b"", len(value or b"") + 16)
    return bytearray(legacy_message(magic, attrs, offset, key, value, ts))


def mutate_chain(
    rng: random.Random,
    buf: bytes,
    kv: KVMutate,
    byte_mutate: ByteMutate,
    max_size: int,
    depth: int = 0,
    other: bytes | None = None,
) -> bytes:
    """One structure-aware edit of a segment (a chain of v2 batches and/or legacy messages), at most
    ``max_size`` bytes: bytes of one entry with its CRC (and length) recomputed, a header field, record
    or key/value at an extreme (:func:`_mutate_v2`, :func:`_mutate_legacy`; ``kv`` edits keys and values;
    ``depth`` > 0 inside a legacy wrapper), a length field at an extreme, entries duplicated, dropped,
    swapped or spliced from ``other``, the segment cut short or padded with zeros, or plain
    ``byte_mutate``."""
    entries, tail = split_chain(buf)
    r = rng.random()
    if not entries or r < 0.12:
        return byte_mutate(buf, max_size)
    i = rng.randrange(len(entries))
    if r < 0.22:  # bytes of one entry, then CRC (and length) fixed: corruption behind the CRC
        e = entries[i]
        start = rng.choice((12, 16, 17, 21, BATCH_HEADER_SIZE)) if len(e) > BATCH_HEADER_SIZE else 12
        e2 = bytearray(e[:start]) + bytearray(byte_mutate(bytes(e[start:]), len(e) + 64))
        entries[i] = fix_entry(e2, length=rng.random() < 0.9)
    elif r < 0.75:
        e = entries[i]
        if e[16] == 2:
            entries[i] = _mutate_v2(rng, e, kv, byte_mutate, max_size)
        elif e[16] in (0, 1):
            entries[i] = _mutate_legacy(rng, e, kv, byte_mutate, max_size, depth)
        else:
            entries[i] = fix_entry(bytearray(byte_mutate(bytes(e), len(e) + 8)))
    elif r < 0.80:  # the length field at an extreme (CRC untouched)
        entries[i][8:12] = struct.pack(">i", extreme(rng, 32))
    elif r < 0.85:
        entries.insert(rng.randrange(len(entries) + 1), bytearray(entries[i]))
    elif r < 0.88 and len(entries) > 1:
        del entries[i]
    elif r < 0.91 and len(entries) > 1:
        j = rng.randrange(len(entries))
        entries[i], entries[j] = entries[j], entries[i]
    elif r < 0.94:  # splice an entry of another input
        o, _ = split_chain(other) if other else ([], b"")
        if o:
            entries.insert(rng.randrange(len(entries) + 1), rng.choice(o))
    elif r < 0.97:  # cut the segment short, or end it with preallocated zeros
        out = b"".join(entries) + tail
        return out[: rng.randrange(len(out) + 1)] if rng.random() < 0.6 else out + bytes(rng.choice((1, 17, 64, 4096)))
    else:
        tail = byte_mutate(tail, len(tail) + 64)
    out = b"".join(entries) + tail
    return out[:max_size]


def seeded_rng(seed: int) -> random.Random:
    return random.Random(seed)


def segment_mutator(kv: KVMutate) -> Callable:
    """A libFuzzer custom mutator ``(data, max_size, seed[, byte_mutate]) -> bytes`` for segment inputs:
    :func:`mutate_chain` with the record key/value mutator ``kv``."""

    def mutate(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = simple_byte_mutate) -> bytes:
        return mutate_chain(seeded_rng(seed), data, kv, byte_mutate, max_size)

    return mutate


def kv_records_mutate(kv: KVMutate, data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate) -> bytes:
    rng = seeded_rng(seed)
    recs = split_kv_records(data)
    r = rng.random()
    if not recs or r < 0.1:
        return byte_mutate(data, max_size)
    i = rng.randrange(len(recs))
    if r < 0.8:
        recs[i] = kv(rng, *recs[i])
    elif r < 0.88:
        recs.insert(rng.randrange(len(recs) + 1), recs[i])
    elif r < 0.94 and len(recs) > 1:
        del recs[i]
    else:
        k, v = recs[i]
        recs[i] = (k, None if v is None else byte_mutate(v, len(v) + 32))
    return join_kv_records(recs)[:max_size]


def value_mutator(fn: Callable) -> Callable:
    """Custom mutator of single-value inputs: ``fn(rng, value)`` (a structural edit) or a byte mutation."""

    def mutate(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = simple_byte_mutate) -> bytes:
        rng = seeded_rng(seed)
        if rng.random() < 0.25:
            return byte_mutate(data, max_size)
        out = fn(rng, data)
        return (out if out is not None else b"")[:max_size]

    return mutate


#: The segment mutator of the ``__consumer_offsets`` harnesses (and of the batch and tail scans).
OFFSETS_MUTATOR = segment_mutator(offsets_kv_mutator)
