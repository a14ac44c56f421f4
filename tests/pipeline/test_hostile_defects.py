"""Hostile or corrupt input found by review: each is reported with file and byte position, bounded
in time and memory, and never crashes the audit or ends it with a traceback."""

import gzip
import shutil
import struct

import pyarrow as pa
import pytest
from crc32c import crc32c

from audit.formats.record_batch import BATCH_HEADER_SIZE, scan_batches
from audit.formats.segments import RAW_SCHEMA, decode_offsets_segment

from ..paths import REAL, SCENARIO
from ..work import calls

SEG = SCENARIO / "brokers/broker-1/__consumer_offsets-0/00000000000000000000.log"
SMALL = REAL / "kraft-3.6-single-broker/data"


def _rows(buf):
    return pa.Table.from_batches(decode_offsets_segment(buf, "seg.log", 0), schema=RAW_SCHEMA).to_pylist()


def _issues(buf):
    return [(r["decode_error"], r["position"]) for r in _rows(buf) if r["kind"] == "issue"]


def _arrow_view(data: bytes) -> memoryview:
    """What Spark's binaryFile hands the decoder: a memoryview of an Arrow buffer (signed bytes)."""
    mv = memoryview(pa.array([data], pa.binary())[0].as_buffer())
    assert mv.format == "b"
    return mv


def _batch(payload: bytes, count: int, codec: int = 0, base_offset: int = 0, last_delta: int | None = None) -> bytes:
    """One CRC-valid v2 batch around ``payload`` (its records block, compressed with ``codec`` or not)."""
    last_delta = max(count - 1, 0) if last_delta is None else last_delta
    body = struct.pack(">hiqqqhii", codec, last_delta, 1700000000000, 1700000000000, -1, -1, -1, count) + payload
    head = struct.pack(">qiib", base_offset, len(body) + 9, 0, 2)
    return head + struct.pack(">I", crc32c(body)) + body


def _recrc(buf: bytearray, pos: int) -> None:
    """Recompute the CRC-32C of the v2 batch at ``pos`` after an edit."""
    length = struct.unpack_from(">i", buf, pos + 8)[0]
    buf[pos + 17 : pos + 21] = struct.pack(">I", crc32c(bytes(buf[pos + 21 : pos + 12 + length])))


def _copy(src, dst):
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


# ------------------------------------------------------------- 1. magic byte >= 0x80, signed buffers


def test_high_magic_byte_in_a_signed_buffer_is_unknown_magic_not_a_crash():
    buf = bytearray(SEG.read_bytes())
    positions = scan_batches(bytes(buf)).position.tolist()
    target = positions[2]
    buf[target + 16] = 0x80
    for data in (bytes(buf), _arrow_view(bytes(buf))):
        scan = scan_batches(data)
        assert [(i.reason, i.position) for i in scan.issues] == [("unknown_magic", target)]
        assert "magic byte 128" in scan.issues[0].detail
        assert scan.position.tolist() == positions[:2]
        assert _issues(data) == [("unknown_magic", target)]


def test_spark_binary_reader_reports_a_high_magic_byte_and_goes_on(audit_dirs, tmp_path, monkeypatch):
    """Also (defect 2): a batch whose record count is negative is counted in summary.json with file and position."""
    dst = _copy(SMALL, tmp_path / "broker")
    seg = dst / "__consumer_offsets-24/00000000000000000000.log"
    buf = bytearray(seg.read_bytes())
    pos = scan_batches(bytes(buf)).position.tolist()[1]
    buf[pos + 16] = 0xFE
    seg.write_bytes(bytes(buf))
    seg2 = next(
        p
        for p in sorted(dst.glob("__consumer_offsets-*/00000000000000000000.log"))
        if p.parent.name != "__consumer_offsets-24" and len(scan_batches(p.read_bytes())) > 1
    )
    buf2 = bytearray(seg2.read_bytes())
    pos2 = scan_batches(bytes(buf2)).position.tolist()[0]
    buf2[pos2 + BATCH_HEADER_SIZE - 4 : pos2 + BATCH_HEADER_SIZE] = struct.pack(">i", -5)
    _recrc(buf2, pos2)
    seg2.write_bytes(bytes(buf2))
    monkeypatch.setenv("KOA_READER", "spark")
    result, out = audit_dirs("high-magic-spark", [dst], fail_on="never")
    where = [
        (w["file"].rsplit("/", 2)[-2], w["reason"], w["position"]) for w in result.summary["records_skipped"]["where"]
    ]
    assert ("__consumer_offsets-24", "unknown_magic", pos) in where
    assert (seg2.parent.name, "corrupt_batch", pos2) in where
    # the readable log of the only replica now ends below its checkpointed high watermark: said too
    assert ("__consumer_offsets-24", "log_end_below_high_watermark", None) in where
    assert result.summary["records_skipped"]["by_reason"] == {
        "unknown_magic": 1,
        "corrupt_batch": 1,
        "log_end_below_high_watermark": 1,
    }
    assert result.summary["offset_commits"]["live"] > 0 and (out / "summary.json").exists()


# ------------------------------------------------------------- 5. checkpoint errors, int64 offsets


def test_checkpoint_parsers_raise_checkpoint_error_for_bad_numbers():
    from audit.formats.checkpoints import CheckpointError, parse_leader_epoch_checkpoint, parse_offset_checkpoint

    for text in ("0\n1\nx 5\n", "0\n1\n3 y\n", "0\n1\n3 99999999999999999999\n"):
        with pytest.raises(CheckpointError, match="leader-epoch-checkpoint"):
            parse_leader_epoch_checkpoint(text)
    for text in ("0\n1\nt x 5\n", "0\n1\nt 0 five\n"):
        with pytest.raises(CheckpointError, match="offset checkpoint"):
            parse_offset_checkpoint(text)
    assert parse_leader_epoch_checkpoint("0\n2\n0 0\n3 60\n") == [(0, 0), (3, 60)]
    assert parse_offset_checkpoint("0\n1\ndev.payments 0 42\n") == {("dev.payments", 0): 42}


def test_last_offset_past_int64_is_corrupt_not_wrapped():
    good = _batch(b"", 0, base_offset=100, last_delta=4)
    near = (1 << 63) - 5
    wraps = _batch(b"", 0, base_offset=near, last_delta=10)
    scan = scan_batches(good + wraps)
    assert [(i.reason, i.position) for i in scan.issues] == [("corrupt_batch", len(good))]
    assert "int64" in scan.issues[0].detail
    assert scan.end_offset == 105
    assert scan_batches(wraps).end_offset == -1
    # the largest offset that still fits is fine
    assert scan_batches(_batch(b"", 0, base_offset=(1 << 63) - 12, last_delta=10)).end_offset == (1 << 63) - 1


# ------------------------------------------------------------- 2. bounds: record counts, decompression


def test_record_count_the_payload_cannot_hold_is_corrupt_and_costs_nothing():
    """2^31-1 records claimed over 1 MiB of zeros: each record needs at least 7 bytes."""
    bomb = _batch(bytes(1 << 20), (1 << 31) - 1)
    zstd_count = _batch(__import__("zstandard").ZstdCompressor().compress(bytes(1 << 20)), (1 << 31) - 1, codec=4)
    good = SEG.read_bytes()
    _rows(good)  # uncounted: the first decode's lazy imports are not this input's work
    out = []
    calls(lambda: out.append(_rows(bomb + zstd_count + good)), 200_000)  # nothing per claimed record
    rows = out[0]
    issues = [(r["decode_error"], r["position"], r["detail"].split(" needs")[0]) for r in rows if r["kind"] == "issue"]
    assert issues == [
        ("corrupt_batch", 0, f"record count {(1 << 31) - 1}"),
        ("corrupt_batch", len(bomb), f"record count {(1 << 31) - 1}"),
    ]
    assert len([r for r in rows if r["kind"] != "issue"]) == len(_rows(good))


def test_zero_filled_records_payload_is_corrupt_at_its_first_record():
    """A count the payload could hold, but records of length 0: a record body is at least 6 bytes."""
    _rows(SEG.read_bytes())  # uncounted: the first decode's lazy imports
    out = []
    calls(lambda: out.append(_issues(_batch(bytes(1 << 20), 100_000))), 50_000)  # stops at the first record
    assert out[0] == [("corrupt_batch", 0)]


def _compress(codec: int, data: bytes) -> bytes:
    from kafka import codec as kc

    return {1: lambda d: gzip.compress(d, 1), 2: kc.snappy_encode, 3: kc.lz4_encode, 4: kc.zstd_encode}[codec](data)


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_batch_inflating_past_the_cap_is_reported_not_decoded(codec, monkeypatch):
    monkeypatch.setenv("KOA_MAX_BATCH_BYTES", str(1 << 20))
    bomb = _batch(_compress(codec, bytes(8 << 20)), 1000, codec=codec)
    good = SEG.read_bytes()
    rows = _rows(bomb + good)
    assert [(r["decode_error"], r["position"]) for r in rows if r["kind"] == "issue"] == [("decompression_limit", 0)]
    assert len([r for r in rows if r["kind"] != "issue"]) == len(_rows(good))


def test_compressed_batches_under_the_cap_still_decode(monkeypatch):
    """The cap is on the output: multi-member gzip and multi-frame zstd decode whole, as Kafka reads them."""
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from audit.formats.record_batch import decompress

    payload = bytes(range(256)) * 4096
    for codec in (1, 2, 3, 4):
        assert decompress(codec, _compress(codec, payload), len(payload)) == payload
    assert decompress(1, gzip.compress(payload[:1000]) + gzip.compress(payload[1000:]), len(payload)) == payload
    z = __import__("zstandard").ZstdCompressor()
    assert decompress(4, z.compress(payload[:1000]) + z.compress(payload[1000:]), len(payload)) == payload
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=4,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(20):
        b.append(
            i,
            timestamp=1700000000000,
            key=struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", i),
            value=struct.pack(">hqih0sq", 3, 10 + i, 2, 0, b"", 1700000000000),
            headers=[],
        )
    monkeypatch.setenv("KOA_MAX_BATCH_BYTES", "4096")
    assert [r["committed_offset"] for r in _rows(bytes(b.build()))] == [10 + i for i in range(20)]


def test_default_cap_stops_a_zstd_bomb_in_bounded_memory():
    """A zstd block of a few KiB that inflates to 256 MiB (beyond the 64 MiB default cap)."""
    import tracemalloc

    import zstandard

    cobj = zstandard.ZstdCompressor(level=1).compressobj()
    chunk = bytes(1 << 20)
    block = b"".join(cobj.compress(chunk) for _ in range(256)) + cobj.flush()
    assert len(block) < 256 << 10
    bomb = _batch(block, 1000, codec=4)
    tracemalloc.start()
    try:
        issues = _issues(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert issues == [("decompression_limit", 0)]
    assert peak < 200 << 20


def test_negative_record_count_in_consumer_offsets_is_reported():
    """DefaultRecordBatch throws InvalidRecordException for a negative count; it was dropped silently."""
    buf = bytearray(SEG.read_bytes())
    positions = scan_batches(bytes(buf)).position.tolist()
    target = positions[1]
    lost = [r for r in _rows(bytes(buf)) if r["position"] == target]
    buf[target + BATCH_HEADER_SIZE - 4 : target + BATCH_HEADER_SIZE] = struct.pack(">i", -5)
    _recrc(buf, target)
    rows = _rows(bytes(buf))
    issues = [r for r in rows if r["kind"] == "issue"]
    assert [(i["decode_error"], i["position"], i["detail"]) for i in issues] == [
        ("corrupt_batch", target, "negative record count -5")
    ]
    assert lost and len(rows) - 1 == len(_rows(SEG.read_bytes())) - len(lost)


# ------------------------------------------------------------- 3. unwritable --output


def _no_spark(monkeypatch):
    """Make starting a Spark session fail the test: what is checked up front needs none."""
    import audit.spark

    def refuse(*a, **k):
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(audit.spark, "build_session", refuse)
    monkeypatch.setattr(audit.spark, "build_remote_session", refuse)


def test_output_under_a_file_is_refused_up_front(capsys, tmp_path, monkeypatch):
    from audit.cli import main

    (tmp_path / "afile").write_text("not a directory")
    out = tmp_path / "afile" / "audit-out"
    _no_spark(monkeypatch)  # refused before any Spark work, not after the audit
    code = main(["audit", "--log-dirs", str(SMALL), "--output", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{str(tmp_path / 'afile')!r} is a file, not a directory" in err and "Traceback" not in err
    assert (tmp_path / "afile").read_text() == "not a directory"


def test_check_output_parent_needs_no_spark(tmp_path):
    from audit.io.outputs import check_output_parent
    from audit.io.fs import InputError

    check_output_parent(str(tmp_path / "new" / "deeper" / "out"))
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="is a file, not a directory"):
        check_output_parent(str(tmp_path / "f" / "deeper" / "out"))


# ------------------------------------------------------------- 4. unreachable cluster, bad client config


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_bootstrap_servers_exit_2_with_a_clear_message(capsys, tmp_path, monkeypatch):
    from audit.cli import main

    monkeypatch.setenv("KOA_BOOTSTRAP_CHECK_MS", "1500")
    port = _closed_port()
    _no_spark(monkeypatch)  # the bootstrap check comes before Spark starts
    code = main(["audit", "--bootstrap-servers", f"127.0.0.1:{port}", "--output", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"no broker of --bootstrap-servers 127.0.0.1:{port} answered within 1500 ms" in err
    assert "ECONNREFUSED" in err


@pytest.mark.parametrize(
    "text, named",
    [
        ("security.protocol=PLAINTEXTT\n", "security.protocol"),
        ("bootstrap.servers=x:1\nno.such.property=1\n", "no.such.property"),
        ("fetch.max.bytes=lots\n", "fetch.max.bytes"),
    ],
)
def test_malformed_client_config_exits_2_before_any_connection(capsys, tmp_path, text, named):
    from audit.cli import main

    props = tmp_path / "client.properties"
    props.write_text(text)
    code = main(
        [
            "audit",
            "--bootstrap-servers",
            f"127.0.0.1:{_closed_port()}",
            "--client-config",
            str(props),
            "--output",
            str(tmp_path / "out"),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert named in err and "no broker" not in err


def test_worker_side_read_failure_becomes_a_collector_error(spark, tmp_path, monkeypatch):
    """Past the driver-side check (or when a broker dies after it), the data source's error reaches the
    driver wrapped by Spark; run() unwraps it to the CollectorError the CLI maps to exit 2."""
    from audit.pipeline import AuditConfig, run
    from audit.sources.collector import CollectorError

    cfg = AuditConfig(
        bootstrap_servers=f"127.0.0.1:{_closed_port()}", output=str(tmp_path / "out"), quiet=True, reports=False
    )
    with pytest.raises(CollectorError, match="reading __consumer_offsets failed: .*127.0.0.1"):
        run(cfg, spark, checked=True)


# ------------------------------------------- 6. a damaged replica when other replicas hold intact copies


def _tables(out):
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    # which broker answered (and the text naming it) may change; the verdicts and offsets may not
    return {
        t: sorted(
            tuple(r)
            for r in spark.read.parquet(str(out / t)).drop("answered_by_broker", "authority", "detail").collect()
        )
        for t in ("findings", "committed_offsets")
    }


@pytest.mark.parametrize(
    "damage, reason, file_end",
    [
        (lambda d: (d / "leader-epoch-checkpoint").unlink(), "leader_epoch_cache_missing", "leader-epoch-checkpoint"),
        (
            lambda d: (d / "leader-epoch-checkpoint").write_bytes(b"\x00\xffgarbled\n"),
            "leader_epoch_cache_unreadable",
            "leader-epoch-checkpoint",
        ),
        (
            lambda d: (d / "leader-epoch-checkpoint").write_bytes(b""),
            "leader_epoch_cache_empty",
            "leader-epoch-checkpoint",
        ),
        (lambda d: sorted(d.glob("*.log"))[-1].write_bytes(b""), "log_end_below_high_watermark", "dev.payments-0"),
    ],
)
def test_damaged_leader_replica_is_reported_and_an_intact_replica_used(
    damage, reason, file_end, scenario_latest, audit_dirs, tmp_path
):
    """The leader of dev.payments-0 (broker 1, where the divergence point 60 is judged) loses its epoch cache or its
    segment: the findings stay those of the clean run, because brokers 2 and 3 hold the same lineage, and the damage
    is reported with the file and the replica used instead."""
    dst = _copy(SCENARIO / "brokers", tmp_path / "brokers")
    damage(dst / "broker-1/dev.payments-0")
    result, out = audit_dirs(f"damaged-{reason}", [dst])
    assert _tables(out) == _tables(scenario_latest[1])
    where = [w for w in result.summary["records_skipped"]["where"] if w["reason"] == reason]
    assert len(where) == 1 and where[0]["file"].endswith(file_end)
    assert "broker 1's replica of dev.payments-0" in where[0]["detail"]
    assert "used broker 2's replica instead" in where[0]["detail"]


def test_a_sole_damaged_replica_is_still_used_and_says_so(audit_dirs, tmp_path):
    """With no intact replica left the damaged one is used; the summary says the findings rest on it."""
    dst = _copy(SCENARIO / "brokers", tmp_path / "brokers")
    others = [d for d in dst.glob("*/dev.payments-0") if d.parent.name != "broker-1"]
    assert others
    for d in others:
        shutil.rmtree(d)
    (dst / "broker-1/dev.payments-0/leader-epoch-checkpoint").unlink()
    result, out = audit_dirs("sole-damaged", [dst])
    where = [w for w in result.summary["records_skipped"]["where"] if w["reason"] == "leader_epoch_cache_missing"]
    assert len(where) == 1 and "no intact replica" in where[0]["detail"]
    from pyspark.sql import SparkSession

    bounds = (
        SparkSession.getActiveSession()
        .read.parquet(str(out / "bounds"))
        .where("topic = 'dev.payments' and partition = 0")
        .first()
    )
    assert bounds["answered_by_broker"] == 1 and "no intact replica" in bounds["authority"]


def test_checkpoint_header_problems_are_named():
    from audit.formats.checkpoints import checkpoint_header_problem

    assert checkpoint_header_problem("") is None
    assert checkpoint_header_problem("0\n1\n0 0\n") is None
    assert "version" in checkpoint_header_problem("1\n1\n0 0\n")
    assert "entry-count" in checkpoint_header_problem("0\nx\n")
    assert checkpoint_header_problem("0\n2\n0 0\n") == "header says 2 entries, found 1"


# ------------------------------------------- a batch lost on the chosen replica comes back from another one


def test_corrupt_offsets_batch_is_recovered_from_another_replica_in_history_mode(
    scenario_history, audit_dirs, tmp_path
):
    """A CRC-broken batch of __consumer_offsets on the chosen replica (broker 1): its commit is read from broker 2's
    copy; every commit of the history equals the clean run's, and the skipped batch is still reported."""
    from pyspark.sql import SparkSession

    dst = _copy(SCENARIO / "brokers", tmp_path / "brokers")
    seg = dst / "broker-1/__consumer_offsets-6/00000000000000000000.log"
    buf = bytearray(seg.read_bytes())
    pos = int(scan_batches(bytes(buf)).position[1])
    buf[pos + 45] ^= 0xFF
    seg.write_bytes(bytes(buf))
    result, out = audit_dirs("recover-history", [dst], mode="history")
    assert result.summary["records_recovered"] == {
        "total": 1,
        "from_replicas": [{"partition": 6, "broker_id": 2, "records": 1}],
    }
    assert [(w["reason"], w["position"]) for w in result.summary["records_skipped"]["where"]] == [("crc_mismatch", pos)]
    spark = SparkSession.getActiveSession()
    for t in ("commits", "findings", "committed_offsets"):
        got = spark.read.parquet(str(out / t)).drop("answered_by_broker", "detail")
        want = spark.read.parquet(str(scenario_history[1] / t)).drop("answered_by_broker", "detail")
        assert sorted(map(tuple, got.collect()), key=repr) == sorted(map(tuple, want.collect()), key=repr), t
    assert result.summary["offset_commits"] == scenario_history[0].summary["offset_commits"]
