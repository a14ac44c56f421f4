"""The ``codec_gzip``, ``codec_snappy``, ``codec_lz4`` and ``codec_zstd`` harnesses: a compressed records
block in a v2 batch or a legacy wrapper message, decoded in full by ``decode_offsets_segment``.
"""

from __future__ import annotations

import struct
from typing import Callable

from audit.formats.segments import decode_offsets_segment

from bench.fuzz_harnesses.common import SEGMENT_PATH, check_raw, make_harness
from bench.fuzz_harnesses.encoding import CODEC_NAMES, compress, decompress_for_mutation, legacy_message, v2_batch, wrap
from bench.fuzz_harnesses.mutators import (
    ByteMutate,
    bomb,
    extreme,
    mutate_chain,
    mutate_records,
    offsets_kv_mutator,
    seeded_rng,
    simple_byte_mutate,
)
from bench.fuzz_harnesses.seeds import real_records, v2_payloads


def split_codec_container(data: bytes) -> tuple[int, int, bytes]:
    """Codec harness input layout: byte 0 picks the container (``% 3``: 0 a v2 batch, 1 a magic-1
    wrapper message, 2 a magic-0 one), bytes 1-4 the int32 record count (v2) , then the compressed
    records block."""
    if len(data) < 5:
        return 0, 0, data
    return data[0] % 3, struct.unpack_from(">i", data, 1)[0], data[5:]


def join_codec_container(container: int, count: int, payload: bytes) -> bytes:
    """Inverse of :func:`split_codec_container`."""
    return bytes([container]) + struct.pack(">i", wrap(count, 32)) + payload


def codec_segment(codec: int, data: bytes) -> bytes:
    """The segment a codec harness decodes: the input's compressed block in a v2 batch or a legacy
    wrapper message with the codec's attribute bits and a valid CRC (see :func:`split_codec_container`)."""
    container, count, payload = split_codec_container(data)
    if container == 0:
        return v2_batch(payload, count, codec)
    magic = 2 - container
    return legacy_message(magic, codec, max(count - 1, 0), None, payload)


def _codec(codec: int) -> Callable[[bytes], None]:
    def harness(data: bytes) -> None:
        seg = codec_segment(codec, data)
        check_raw(decode_offsets_segment(seg, SEGMENT_PATH, 0), seg, SEGMENT_PATH)

    harness.__name__ = f"codec_{CODEC_NAMES[codec]}"
    harness.__doc__ = (
        f"A {CODEC_NAMES[codec]} records block (v2 batch or legacy wrapper, "
        f":func:`split_codec_container`) decoded in full by ``decode_offsets_segment``: "
        f"bounded decompression, then record framing and key/value decoding.  "
        f"Documented exceptions: none."
    )
    return harness


def codec_mutator(codec: int) -> Callable:
    """Custom mutator of a codec harness's inputs (:func:`split_codec_container`): the compressed stream
    itself, the record count or container, a block inflating to many tiny records, or the records inside
    (decompressed, edited with :func:`mutate_records` or :func:`mutate_chain`, compressed again)."""

    def mutate(data: bytes, max_size: int, seed: int, byte_mutate: ByteMutate = simple_byte_mutate) -> bytes:
        rng = seeded_rng(seed)
        container, count, payload = split_codec_container(data)
        r = rng.random()
        legacy_magic = None if container == 0 else 2 - container
        if r < 0.10:
            return byte_mutate(data, max_size)
        if r < 0.25:  # the compressed stream itself: frame headers, block sizes, checksums
            payload = byte_mutate(payload, max(max_size - 5, 0))
        elif r < 0.32:
            count = extreme(rng, 32)
        elif r < 0.36:
            container = rng.randrange(3)
        elif r < 0.42:  # a block inflating to many tiny records
            legacy_magic = None if container == 0 else 2 - container
            big = codec != 2 and not (codec == 3 and legacy_magic == 0)
            size = rng.choice((1 << 20, 16 << 20, 80 << 20)) if big else rng.choice((1 << 20, 8 << 20))
            payload, n = bomb(codec, rng.choice(("tiny", "tiny", "zeros")), size, legacy_magic)
            count = n if rng.random() < 0.8 else extreme(rng, 32)
        else:  # the records inside, then compressed again
            plain = decompress_for_mutation(codec, payload, legacy_magic)
            if plain is None:
                payload = byte_mutate(payload, max(max_size - 5, 0))
            elif legacy_magic is None:
                plain, n = mutate_records(rng, plain, offsets_kv_mutator, byte_mutate, max_size)
                if n is not None and rng.random() < 0.8:
                    count = n
                payload = compress(codec, plain, rng)
            else:
                plain = mutate_chain(rng, plain, offsets_kv_mutator, byte_mutate, max_size, depth=1)
                payload = compress(codec, plain, rng, legacy_magic)
        return join_codec_container(container, count, payload)[:max_size]

    return mutate


def _codec_seeds(codec: int) -> list[tuple[str, bytes]]:
    out = []
    for i, (plain, count) in enumerate(v2_payloads(12)):
        out.append((f"v2-{i}", join_codec_container(0, count, compress(codec, plain))))
    if codec != 4:
        recs = [(k, v) for k, v, _a in real_records("offsets", 40) if k is not None][:12]
        for magic in (0, 1):
            for start in (0, 6):
                inner = b"".join(
                    legacy_message(magic, 0, i if magic == 1 else 100 + i, k, v)
                    for i, (k, v) in enumerate(recs[start : start + 6])
                )
                out.append(
                    (f"magic{magic}-{start}", join_codec_container(2 - magic, 6, compress(codec, inner, None, magic)))
                )
    return out


#: One harness a codec, in :data:`~bench.fuzz_harnesses.encoding.CODEC_NAMES` order.
CODEC_HARNESSES = [
    make_harness(f"codec_{n}", _codec(c), (lambda c=c: _codec_seeds(c)), codec_mutator(c))
    for c, n in CODEC_NAMES.items()
]
