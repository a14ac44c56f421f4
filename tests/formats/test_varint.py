"""``audit.formats.record_batch.read_varint`` against kafka-python's own varint codec
(``kafka.record.util``, which follows ``ByteUtils.readVarint/readVarlong``)."""

import numpy as np
import pytest
from kafka.record.util import decode_varint, encode_varint

from audit.formats.record_batch import read_varint


def _encode(values) -> tuple[np.ndarray, np.ndarray]:
    buf = bytearray()
    pos = []
    for v in values:
        pos.append(len(buf))
        encode_varint(int(v), buf.append)
    return np.frombuffer(bytes(buf), dtype=np.uint8), np.array(pos, dtype=np.int64)


@pytest.mark.parametrize("max_bytes", [5, 10])
def test_every_width_decodes_as_kafka_python_does(max_bytes):
    rng = np.random.default_rng(7)
    bits = 31 if max_bytes == 5 else 63
    # values whose zigzag form takes 1, 2, 3, ... bytes, both signs, and the edges of each width
    edges = [0, -1, 63, -64, 64, -65, 8191, -8192, 8192, -8193, (1 << bits) - 1, -(1 << bits)]
    values = edges + [int(v) for v in rng.integers(-(1 << bits), (1 << bits) - 1, 3000, dtype=np.int64)]
    values += [int(v) for v in rng.integers(-9000, 9000, 3000)]
    data, pos = _encode(values)
    got, size, ok = read_varint(data, pos, max_bytes)
    assert ok.all()
    want = [decode_varint(bytes(data), int(p)) for p in pos]
    assert got.tolist() == [w[0] for w in want]
    assert (pos + size).tolist() == [w[1] for w in want]


def test_a_varint_cut_by_the_buffer_end_or_too_long_is_not_ok():
    data, _ = _encode([300])  # two bytes: 0xd8 0x04
    got, size, ok = read_varint(data[:1], np.array([0]), 5)
    assert not ok[0]  # its second byte is past the end
    got, size, ok = read_varint(data, np.array([0, 1, 2]), 5)
    assert ok.tolist() == [True, True, False]  # position 2 is past the end
    assert got[:2].tolist() == [300, 2]
    six = np.array([0xFF] * 5 + [0x01], dtype=np.uint8)
    assert not read_varint(six, np.array([0]), 5)[2][0]  # a varint takes at most 5 bytes
    assert read_varint(six, np.array([0]), 10)[2][0]


def _heads(ts, off, klen):
    """Record-body heads (timestampDelta, offsetDelta, key length) then 8 bytes of key, each encoded by kafka-python."""
    buf, pos = bytearray(), []
    for t, o, k in zip(ts, off, klen):
        pos.append(len(buf))
        for v in (t, o, k):
            encode_varint(int(v), buf.append)
        buf += b"k" * 8
    return np.frombuffer(bytes(buf), dtype=np.uint8), np.array(pos, dtype=np.int64)


def test_short_record_heads_read_as_one_varint_at_a_time():
    """short_heads (one gather for the three varints that open a record body) gives what read_varint gives,
    one- and two-byte offset deltas and key lengths mixed; a longer varint anywhere, or a head too near the
    end of the buffer, hands the whole set back to read_varint (None)."""
    from audit.formats.record_batch import short_heads

    rng = np.random.default_rng(3)
    n = 2000
    ts = rng.integers(-64, 64, n)
    off = rng.integers(-8192, 8192, n)
    klen = np.where(rng.random(n) < 0.5, rng.integers(-1, 64, n), rng.integers(64, 8192, n))
    data, pos = _heads(ts, off, klen)
    got = short_heads(data, pos)
    assert got is not None
    t, s1, _ = read_varint(data, pos, 10)
    o, s2, _ = read_varint(data, pos + s1, 5)
    k, s3, _ = read_varint(data, pos + s1 + s2, 5)
    for a, b in zip(got, (t, o, k, pos + s1 + s2 + s3)):
        np.testing.assert_array_equal(a, b)
    assert (got[0] == ts).all() and (got[1] == off).all() and (got[2] == klen).all()
    for bad in (
        (ts, off, np.append(klen[:-1], 8192)),
        (np.append(ts[:-1], 64), off, klen),
        (ts, np.append(off[:-1], -8193), klen),
    ):
        assert short_heads(*_heads(*bad)) is None
    assert short_heads(data, np.append(pos, len(data) - 4)) is None
