"""Replays every input the fuzzer found (``tests/data/fuzz-regressions/<harness>/``) and every committed
seed (``tests/data/fuzz-seeds/<harness>/``) through its harness of :mod:`bench.fuzz_harnesses`, without
atheris: no exception beyond what the entry point documents, at most :data:`MAX_CALLS` Python and builtin
function calls an input (the work, counted by a profile hook, not the time: a loaded machine slows an input
down but never makes it do more), and, for the inputs that blew memory up, less than 256 MiB above the
process's start-up RSS (its own ``VmHWM``).  Regression inputs are named ``<kind>-<what>``, ``kind`` one of ``crash``,
``hang``, ``blowup``.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.fuzz_harnesses import HARNESSES, REGRESSION_DIR, SEED_DIR, saved_inputs

from ..work import OverBudget as _OverBudget
from ..work import calls

REPO = Path(__file__).resolve().parents[2]
BLOWUP_MB = 256
#: function calls (Python and builtin) one input may take through its harness: the costliest committed input takes
#: about 400,000; the hangs they were found with walked records one numpy step or Python object at a time, for
#: millions of calls, or never ended
MAX_CALLS = 2_000_000


def _cases():
    out = []
    for root in (REGRESSION_DIR, SEED_DIR):
        for name in sorted(HARNESSES):
            for p in saved_inputs(root, name):
                out.append(pytest.param(name, p, id=f"{root.name}/{name}/{p.name}"))
    return out


CASES = _cases()


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def test_every_harness_has_seeds_and_the_regressions_name_their_harness():
    for name in HARNESSES:
        assert saved_inputs(SEED_DIR, name), f"no committed seed for {name}"
    if REGRESSION_DIR.is_dir():
        for d in REGRESSION_DIR.iterdir():
            assert d.name in HARNESSES, f"{d} is not a harness"
            for p in d.iterdir():
                assert p.name.split("-", 1)[0] in ("crash", "hang", "blowup"), p
    total = sum(p.stat().st_size for p in SEED_DIR.rglob("*") if p.is_file())
    assert total < 2 << 20


@pytest.fixture(scope="module", autouse=True)
def warm_harnesses():
    """Each harness run once on its first seed, uncounted: the lazy imports (pandas, codecs) of a first call are
    not an input's work, and a budget overrun must never interrupt an import half-way."""
    for name, harness in HARNESSES.items():
        seeds = saved_inputs(SEED_DIR, name)
        if seeds:
            harness.fn(seeds[0].read_bytes())


@pytest.mark.parametrize("name,path", CASES)
def test_input_replays_without_crash_in_bounded_work(name, path):
    data = path.read_bytes()
    try:
        calls(lambda: HARNESSES[name].fn(data), MAX_CALLS)
    except _OverBudget:
        pytest.fail(f"{path.name}: more than {MAX_CALLS:,} function calls")


_MEASURE = textwrap.dedent("""
    import resource, sys
    from bench import fuzz_harnesses as fh
    h = fh.HARNESSES[sys.argv[1]]
    for p in sorted(fh.saved_inputs(fh.SEED_DIR, sys.argv[1]))[:3]:  # warm up: lazy imports, codecs
        h.fn(p.read_bytes())
    with open("/proc/self/statm") as f:
        base = int(f.read().split()[1]) * resource.getpagesize() / 2 ** 20
    data = open(sys.argv[2], "rb").read()
    h.fn(data)
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent (pytest, big after the Spark
    # tests) across vfork+exec, which made every input look like a 280 MiB blow-up
    with open("/proc/self/status") as f:
        peak = int(next(ln for ln in f if ln.startswith("VmHWM")).split()[1]) / 1024
    print(f"GROWTH {peak - base:.0f}")
""")


def _run_measured(name: str, path: Path, limit_mb: int) -> float:
    """Peak RSS growth (MiB) of a fresh process replaying ``path``; the process is killed (and the test
    fails) as soon as its RSS passes start-up + ``limit_mb`` * 2, so a blow-up cannot take the machine."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO)] + sys.path))
    proc = subprocess.Popen(
        [sys.executable, "-c", _MEASURE, name, str(path)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    status = Path(f"/proc/{proc.pid}/status")
    first = None
    deadline = time.monotonic() + 120
    while proc.poll() is None:
        try:
            rss = int(next(ln for ln in status.read_text().splitlines() if ln.startswith("VmRSS")).split()[1]) / 1024
        except (OSError, StopIteration):
            rss = 0
        first = rss if first is None else first
        if rss - first > 2 * limit_mb + 300 or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail(f"{path.name}: RSS {rss:.0f} MiB (started at {first:.0f}) or time out; killed")
        time.sleep(0.02)
    out, err = proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    return float(out.split("GROWTH")[-1])


@pytest.mark.parametrize("name,path", [c for c in CASES if c.values[1].name.startswith("blowup-")])
def test_blowup_input_stays_within_the_memory_bound(name, path):
    growth = _run_measured(name, path, BLOWUP_MB)
    assert growth < BLOWUP_MB, f"{path.name}: peak RSS {growth:.0f} MiB above start-up (limit {BLOWUP_MB})"


# =========================================================================== unit tests of the fixes

import struct  # noqa: E402
import zlib  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from audit.formats import record_batch as rb  # noqa: E402
from audit.formats.record_batch import records as rb_records  # noqa: E402
from audit.formats.segments import RAW_SCHEMA, decode_offsets_segment  # noqa: E402
from bench.fuzz_harnesses import compress, legacy_message, minimal_record, v2_batch, zigzag  # noqa: E402

from ..paths import REAL, SCENARIO  # noqa: E402

SEG = SCENARIO / "brokers/broker-1/__consumer_offsets-0/00000000000000000000.log"


def _issues(buf):
    t = pa.Table.from_batches(decode_offsets_segment(buf, "seg.log", 0), schema=RAW_SCHEMA)
    return [(r["decode_error"], r["position"]) for r in t.to_pylist() if r["kind"] == "issue"]


@pytest.fixture(autouse=True)
def _time_guard():
    """A last guard, not a measure: each test below bounds its work with :func:`calls`; should one still hang (a
    loop in code the profile hook does not see), the alarm ends it after 30 s instead of stalling the run."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 30)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _records(table):
    """(batch, offset, timestamp, key, value) of every record of a RecordTable."""
    d = table.data
    out = []
    for j in range(len(table)):
        k = None if table.key_len[j] < 0 else d[table.key_start[j] : table.key_start[j] + table.key_len[j]].tobytes()
        v = (
            None
            if table.value_len[j] < 0
            else d[table.value_start[j] : table.value_start[j] + table.value_len[j]].tobytes()
        )
        out.append((int(table.batch[j]), int(table.offset[j]), int(table.timestamp[j]), k, v))
    return out


def _tiny_records(n: int) -> bytes:
    return (zigzag(6, 32) + minimal_record(0)) * n


def test_record_by_record_framing_equals_lock_step(monkeypatch):
    """Fix 1: the batches left when few remain are framed one record at a time; the result is the lock-step
    one, records and issues alike, on real segments and on batches broken in every way framing checks."""
    bodies = [minimal_record(i) for i in range(5)]
    good = b"".join(zigzag(len(b), 32) + b for b in bodies)
    broken = [
        v2_batch(good, 5, 0),
        v2_batch(good[:-3], 5, 0),  # last record overruns the batch
        v2_batch(b"\xff\xff\xff\xff\xff\x01" + good, 6, 0),  # length varint of 6 bytes
        v2_batch(zigzag(2, 32) + b"\x00\x00" + good, 6, 0),  # a record body shorter than 6 bytes
        v2_batch(zigzag(-1, 32) + good, 6, 0),  # negative length
        v2_batch(good + b"\x80", 6, 0),  # varint cut by the end of the data
    ]
    segments = [p.read_bytes() for p in sorted(REAL.glob("*/**/__consumer_offsets-*/*.log"))[:40]]
    segments += [b"".join(broken), b"".join(broken * 30), b"".join(broken[1:])]
    for buf in segments:
        scan = rb.scan_batches(buf)
        results = []
        for threshold in (0, 10**9):  # 0: lock-step throughout; 10**9: record by record throughout
            monkeypatch.setattr(rb_records, "LOCKSTEP_MIN_BATCHES", threshold)
            t = rb.extract_records(buf, scan)
            results.append((_records(t), [(i.reason, i.position) for i in t.issues]))
        assert results[0] == results[1]
    issues = [i.reason for i in rb.extract_records(b"".join(broken), rb.scan_batches(b"".join(broken))).issues]
    assert issues == ["corrupt_batch"] * 5


def test_a_batch_of_many_records_is_framed_in_linear_time():
    """Fix 1: lock-step framing took one numpy step per record of the largest batch (150,000 records:
    2.4 s, 127 MiB); now a batch of 150,000 records frames in well under a second."""
    buf = v2_batch(_tiny_records(150_000), 150_000, 0)
    out = []
    # about 2 calls a record (array appends); the lock-step framing took a numpy step, several calls, per record
    assert calls(lambda: out.append(rb.extract_records(buf, rb.scan_batches(buf))), 4 * 150_000) > 0
    t = out[0]
    assert len(t) == 150_000 and not t.issues and t.offset[-1] == 0


def test_many_bombs_under_the_batch_cap_stop_at_the_segment_budget():
    """Fix 2: each zstd batch inflates to 10 MiB, under the 64 MiB per-batch cap, so any number of them
    (10 in a 10 KiB segment here: 100 MiB) was inflated.  The segment's budget stops them after
    max(16 MiB, 16 x their stored size)."""
    block = compress(4, bytes(10 << 20))
    bomb = v2_batch(block, 1000, 4)
    buf = bomb * 10 + SEG.read_bytes()
    assert len(buf) < 64 << 10
    # the first fits the budget (and, being zeros, fails record framing: corrupt_batch); none other does
    assert sorted(_issues(buf)) == [("corrupt_batch", 0)] + [
        ("decompression_limit", k * len(bomb)) for k in range(1, 10)
    ]


def test_compressed_records_count_against_the_segment_budget():
    """Fix 2: a few KiB of zstd holding millions of 7-byte records (2.4 million: 60 s and 1 GiB; 300,000
    here: seconds) were all decoded; records of compressed batches may number at most max(65,536, stored
    bytes / 4) per segment."""
    buf = v2_batch(compress(4, _tiny_records(300_000)), 300_000, 4)
    out = []
    assert calls(lambda: out.append(_issues(buf)), 300_000) > 0  # stopped before a call per record
    assert out[0] == [("decompression_limit", 0)]
    ok = v2_batch(compress(4, _tiny_records(60_000)), 60_000, 4)  # under the floor: decoded
    t = rb.extract_records(ok, rb.scan_batches(ok))
    assert len(t) == 60_000 and not t.issues


def _legacy_wrapper(magic: int, codec: int, offset: int, inner: bytes, attrs_extra: int = 0) -> bytes:
    return legacy_message(magic, codec | attrs_extra, offset, None, compress(codec, inner, None, magic))


def test_legacy_inner_message_of_negative_size_is_reported_not_looped_on():
    """Fix 3: kafka-python's LegacyRecordBatch walks inner messages by their size field; size -12 never
    advances and the walk never ends (nor does its list stop growing)."""
    inner = bytearray(legacy_message(1, 0, 0, b"k", b"v"))
    inner[8:12] = struct.pack(">i", -12)
    buf = _legacy_wrapper(1, 1, 0, bytes(inner))
    out = []
    assert calls(lambda: out.append(_issues(buf)), 10_000) > 0  # the walk that never advanced never ended
    assert out[0] == [("decompression_failed", 0)]


def test_legacy_relative_offsets_beyond_int64_are_reported():
    """Fix 3: the wrapper offset minus the last inner (relative) offset plus an inner offset passed
    2^63-1, and numpy raised OverflowError out of the decoder."""
    inner = legacy_message(1, 0, 5, b"k", b"a") + legacy_message(1, 0, 0, b"k", b"b")
    buf = _legacy_wrapper(1, 1, (1 << 63) - 2, inner)  # base 2^63-2: the first message at 2^63+3
    assert _issues(buf) == [("decompression_failed", 0)]


def test_legacy_value_length_past_the_message_is_corrupt_not_a_truncated_value():
    """Fix 3: kafka-python sliced a value whose length passes the message end short and decoded it."""
    msg = bytearray(legacy_message(1, 0, 7, b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00\x01" + bytes(24)))
    msg[-26 - 4 : -26] = struct.pack(">i", 40)  # value length 40, 26 bytes there
    msg[12:16] = struct.pack(">I", zlib.crc32(bytes(msg[16:])))
    assert _issues(bytes(msg)) == [("corrupt_batch", 0)]


def test_legacy_gzip_bomb_is_bounded():
    """Fix 3: kafka-python decompressed a legacy wrapper without any cap (a 30 KiB gzip member of
    24 MiB of inner messages here: 700,000 of them, then one Python object each)."""
    inner = legacy_message(1, 0, 0, None, b"") * ((24 << 20) // 34)
    buf = _legacy_wrapper(1, 1, 0, inner)
    assert len(buf) < 1 << 20
    out = []
    assert calls(lambda: out.append(_issues(buf)), 10_000) > 0  # not a Python object per inner message
    assert out[0] == [("decompression_limit", 0)]


def test_legacy_sets_decode_as_kafka_python_reads_them():
    """Fix 3 keeps valid input as it was: every magic, codec (Kafka 0.8 lz4 framing for magic 0) and
    timestamp type decodes to what kafka-python's LegacyRecordBatch gives."""
    from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

    msgs = [(b"key%d" % i if i % 3 else None, b"value%d" % i * i if i % 4 else None) for i in range(7)]
    for magic in (0, 1):
        for codec in (0, 1, 2, 3):
            for log_append in (False, True):
                b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
                for i, (k, v) in enumerate(msgs):
                    b.append(i if (codec and magic == 1) else 50 + i, timestamp=1_600_000_000_000 + i, key=k, value=v)
                raw = bytearray(b.build())
                if codec:
                    raw[0:8] = struct.pack(">q", 50 + len(msgs) - 1)
                if log_append and magic == 1:
                    raw[17] |= 0x08
                    raw[18:26] = struct.pack(">q", 1_700_000_000_000)
                    raw[12:16] = struct.pack(">I", zlib.crc32(bytes(raw[16:])))
                buf = (
                    bytes(raw)
                    if codec
                    else b"".join(
                        legacy_message(
                            magic, 0x08 if (log_append and magic == 1) else 0, 50 + i, k, v, 1_600_000_000_000 + i
                        )
                        for i, (k, v) in enumerate(msgs)
                    )
                )
                scan = rb.scan_batches(buf)
                got = [(o, t, k, v) for _b, o, t, k, v in _records(rb.extract_records(buf, scan))]
                expected = []
                for p in scan.position.tolist():
                    n = struct.unpack_from(">i", buf, p + 8)[0]
                    for m in LegacyRecordBatch(buf[p : p + 12 + n], magic):
                        expected.append((m.offset, -1 if m.timestamp is None else m.timestamp, m.key, m.value))
                assert got == expected, (magic, codec, log_append)
                assert [o for o, *_ in got] == list(range(50, 57))


def test_huge_metadata_string_is_gathered_without_a_per_byte_index():
    """Fix 4: ``utf8_slices`` built an int64 index per string byte (8 bytes of index per byte: a 20 MiB
    metadata string needed 160 MiB more); long strings are copied as slices now, equal bytes."""
    import tracemalloc

    from audit.formats.offsets import gather_slices

    data = np.frombuffer(bytes(range(256)) * (80 << 12), dtype=np.uint8)  # 20 MiB
    start = np.array([5, 0, 1000, 7], dtype=np.int64)
    lens = np.array([3, len(data) - 10, 0, 300], dtype=np.int64)
    offsets = np.zeros(5, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    tracemalloc.start()
    try:
        out = gather_slices(data, start, lens, offsets)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(out, np.concatenate([data[s : s + n] for s, n in zip(start, lens)]))
    assert peak < len(data) + (24 << 20)


def test_grouping_keys_by_width_matches_plain_grouping():
    """Fix 5: ``group_equal_bytes`` stacked every key into rows as wide as the longest one (60,000 keys
    with one 1 KiB key: 60,000 x 129 words, several copies); keys are compared per width now, with the
    same grouping."""
    from audit.formats.latest import group_equal_bytes

    rng = np.random.default_rng(3)
    keys = [bytes(rng.integers(0, 3, size=int(rng.integers(0, 40))).astype(np.uint8)) for _ in range(3000)]
    keys += [b"x" * 1024, b"x" * 1024, b"y" * 1025, b""]
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    lens = np.array([len(k) for k in keys], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    ids = group_equal_bytes(data, start, lens)
    assert ids[-2] == -1  # longer than MAX_KEY_BYTES
    by_id, by_key = {}, {}
    for i, k in enumerate(keys[:-2] + [keys[-1]]):
        j = i if i < len(keys) - 2 else len(keys) - 1
        assert ids[j] >= 0
        by_id.setdefault(int(ids[j]), set()).add(k)
        by_key.setdefault(k, set()).add(int(ids[j]))
    assert all(len(v) == 1 for v in by_id.values()) and all(len(v) == 1 for v in by_key.values())


def test_one_long_key_does_not_widen_every_row():
    """Fix 5: 60,000 10-byte keys and one of 1 KiB took 60,000 x 129 words of 8 bytes, several times
    (about 190 MiB); per width it is a few MiB."""
    import tracemalloc

    from audit.formats.latest import group_equal_bytes

    keys = [struct.pack(">hh1sh", 1, 1, b"g", 0) + struct.pack(">i", i % 1000)[1:] for i in range(60_000)]
    keys.append(b"z" * 1024)
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    lens = np.array([len(k) for k in keys], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    tracemalloc.start()
    try:
        ids = group_equal_bytes(data, start, lens)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(set(ids[:-1].tolist())) == 1000 and ids[-1] >= 0
    assert peak < 32 << 20


@pytest.mark.parametrize(
    "value,expected",
    [
        ("1", 1),
        ("2147483647", 2147483647),
        ("-2147483648", -2147483648),
        ("2147483648", None),
        ("-2147483649", None),
        ("99999999999999999999", None),
        ("1_0", None),
        ("0x10", None),
        ("9" * 5000, None),
        ("0" * 5000 + "7", 7),
    ],
)
def test_broker_id_fits_the_int_column_or_is_unknown(value, expected):
    """Fix 6: ``broker_id_of`` returned any Python int (``node.id=2147483648``, ``1_0``), and raised
    ValueError for a value of over 4,300 digits (Python's int() limit); the audit stores broker ids in
    int columns, and the broker itself reads them with Integer.parseInt (leading zeros and all)."""
    from audit.formats.checkpoints import broker_id_of, parse_meta_properties

    assert broker_id_of(parse_meta_properties(f"version=1\nnode.id={value}\n")) == expected
