"""Bad input is counted and reported with where it was; it never crashes the audit."""

import shutil
import struct

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from audit.cli import main
from audit.formats.record_batch import scan_batches
from audit.formats.segments import decode_offsets_segment
from audit.io.fs import local_path as fs_path

from ..paths import REAL, SCENARIO

SEG = SCENARIO / "brokers/broker-1/__consumer_offsets-0/00000000000000000000.log"


def _rows(buf):
    from audit.formats.segments import RAW_SCHEMA

    return pa.Table.from_batches(decode_offsets_segment(buf, "seg.log", 0), schema=RAW_SCHEMA).to_pylist()


def _batch_positions(buf):
    return scan_batches(buf).position.tolist()


def test_flipped_crc_byte_skips_that_batch_only():
    buf = bytearray(SEG.read_bytes())
    good = _rows(bytes(buf))
    positions = _batch_positions(bytes(buf))
    target = positions[2]
    buf[target + 70] ^= 0xFF  # a byte inside the batch's records
    rows = _rows(bytes(buf))
    issues = [r for r in rows if r["kind"] == "issue"]
    assert [(i["decode_error"], i["position"]) for i in issues] == [("crc_mismatch", target)]
    kept = [r for r in rows if r["kind"] != "issue"]
    lost = [r for r in good if r["position"] == target]
    assert len(kept) == len(good) - len(lost) and lost


def test_cut_off_tail_is_reported_and_earlier_batches_kept():
    buf = SEG.read_bytes()
    positions = _batch_positions(buf)
    cut = buf[: positions[-1] + 30]
    rows = _rows(cut)
    issues = [r for r in rows if r["kind"] == "issue"]
    assert [(i["decode_error"], i["position"]) for i in issues] == [("partial_batch", positions[-1])]
    assert len([r for r in rows if r["kind"] != "issue"]) == len(
        [r for r in _rows(buf) if r["position"] < positions[-1]]
    )


def test_non_kafka_file_is_reported():
    rows = _rows(b"this is not a kafka segment at all, just some text\n" * 20)
    assert rows and all(r["kind"] == "issue" for r in rows)
    assert rows[0]["position"] == 0


def test_empty_segment_has_no_rows():
    assert _rows(b"") == []


def test_unknown_record_type_is_counted_not_fatal():
    """One record of key type 99 (no Kafka version defines it; 3..23 are KIP-848/share/streams records)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    commit_key = struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 0)
    commit_val = struct.pack(">hqih0sq", 3, 42, 5, 0, b"", 1700000000000)
    b.append(0, timestamp=1700000000000, key=commit_key, value=commit_val, headers=[])
    b.append(1, timestamp=1700000000000, key=struct.pack(">hh1s", 99, 1, b"g"), value=b"\x00\x00\x01", headers=[])
    b.append(2, timestamp=1700000000000, key=struct.pack(">hh1s", 2, 1, b"g"), value=None, headers=[])
    rows = _rows(bytes(b.build()))
    assert [r["decode_error"] for r in rows] == [None, "unknown_record_type", None]
    assert rows[0]["committed_offset"] == 42 and rows[0]["leader_epoch"] == 5
    assert rows[2]["is_tombstone"] and rows[2]["record_type"] == 2


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_all_compression_codecs(codec):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(50):
        key = struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", i)
        val = struct.pack(">hqih0sq", 3, 1000 + i, 2, 0, b"", 1700000000000 + i)
        b.append(i, timestamp=1700000000000 + i, key=key, value=val, headers=[])
    rows = _rows(bytes(b.build()))
    assert [r["committed_offset"] for r in rows] == [1000 + i for i in range(50)]
    assert {r["partition"] for r in rows} == set(range(50)) and not [r for r in rows if r["decode_error"]]


def test_audit_survives_corrupt_copy_and_reports_file_and_position(audit_dirs, tmp_path):
    src = REAL / "kraft-3.6-single-broker/data"
    dst = tmp_path / "broker"
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    seg = dst / "__consumer_offsets-24/00000000000000000000.log"
    buf = bytearray(seg.read_bytes())
    pos = _batch_positions(bytes(buf))
    buf[pos[1] + 65] ^= 0x55
    seg.write_bytes(bytes(buf))
    seg2 = dst / "__consumer_offsets-27/00000000000000000000.log"
    seg2.write_bytes(seg2.read_bytes()[:-7])
    (dst / "__consumer_offsets-31/00000000000000000000.log").write_bytes(b"garbage" * 10)
    result, out = audit_dirs("corrupt", [dst], fail_on="never")
    skipped = result.summary["records_skipped"]
    assert skipped["by_reason"].get("crc_mismatch") == 1
    assert skipped["by_reason"].get("partial_batch", 0) >= 1
    where = {(w["file"].rsplit("/", 2)[-2], w["reason"], w["position"]) for w in skipped["where"]}
    assert ("__consumer_offsets-24", "crc_mismatch", pos[1]) in where
    assert any(w[0] == "__consumer_offsets-31" for w in where)
    assert result.exit_code == 0 and (out / "findings").exists() and (out / "summary.json").exists()
    # the rest was still decoded
    assert result.summary["offset_commits"]["live"] > 0


def test_missing_dir_is_usage_error(capsys, tmp_path):
    code = main(["audit", "--log-dirs", str(tmp_path / "nope"), "--output", str(tmp_path / "out")])
    assert code == 2
    assert "does not exist" in capsys.readouterr().err


def test_empty_dir_is_usage_error(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    code = main(["audit", "--log-dirs", str(tmp_path / "empty"), "--output", str(tmp_path / "out")])
    assert code == 2
    assert "no Kafka log dir found" in capsys.readouterr().err


def test_output_that_would_replace_broker_data_or_foreign_files_is_refused(capsys, tmp_path):
    """Every run replaces the whole --output directory: never a log dir, a folder holding one,
    a folder inside one, or a non-empty directory that is not a previous audit's output."""
    logs = tmp_path / "kafka-logs"
    shutil.copytree(REAL / "kraft-3.1-groupmeta", logs)
    (tmp_path / "link-to-logs").symlink_to(logs)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "notes/todo.txt").write_text("mine")
    for output, message in (
        (logs, "overlaps --log-dirs"),
        (tmp_path, "overlaps --log-dirs"),
        (logs / "audit-out", "overlaps --log-dirs"),
        (home, "not a kafka-offset-audit output"),
        (home / "notes/todo.txt", "is a file"),
        (tmp_path / "link-to-logs", "overlaps --log-dirs"),
    ):
        code = main(["audit", "--log-dirs", str(logs), "--output", str(output), "--quiet"])
        assert code == 2, output
        assert message in capsys.readouterr().err, output
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "home" not in p.parts) == before
    assert (home / "notes/todo.txt").read_text() == "mine"


def test_output_may_be_new_empty_or_a_previous_audit(spark, tmp_path):
    from audit.io.outputs import check_output_target
    from audit.io.fs import InputError

    check_output_target(spark, str(tmp_path / "new"), [str(tmp_path / "logs")])
    (tmp_path / "empty").mkdir()
    check_output_target(spark, str(tmp_path / "empty"), [str(tmp_path / "logs")])
    prev = tmp_path / "prev"
    (prev / "findings").mkdir(parents=True)
    (prev / "summary.json").write_text('{"tool": "kafka-offset-audit", "findings": {}}')
    check_output_target(spark, str(prev), [str(tmp_path / "logs")])
    (prev / "summary.json").write_text('{"tool": "something-else"}')
    with pytest.raises(InputError, match="not a kafka-offset-audit output"):
        check_output_target(spark, str(prev), [str(tmp_path / "logs")])
    (prev / "summary.json").write_text("not json")
    with pytest.raises(InputError, match="not a kafka-offset-audit output"):
        check_output_target(spark, str(prev), [])


def test_bad_arguments_exit_2(tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["audit", "--log-dirs", str(tmp_path), "--output", str(tmp_path / "o"), "--mode", "sometimes"])
    assert exc.value.code == 2


def test_segment_gone_before_the_executor_reads_it_is_reported(tmp_path):
    """A listed segment that cannot be opened on the executor becomes an ``unreadable_file`` issue."""
    from audit.sources.logdirs import decode_offsets_files

    path = f"file:{tmp_path}/__consumer_offsets-3/00000000000000000000.log"
    out = pa.Table.from_batches(list(decode_offsets_files(iter([pa.RecordBatch.from_pydict({"path": [path]})]))))
    rows = out.to_pylist()
    assert [(r["kind"], r["decode_error"], r["source_file"], r["source_partition"]) for r in rows] == [
        ("issue", "unreadable_file", path, 3)
    ]


def test_spark_binary_reader_gives_the_same_audit(scenario_latest, audit_dirs, monkeypatch):
    """Hadoop URIs are read through Spark's binaryFile; forced on local files it must agree."""
    from pyspark.testing import assertDataFrameEqual

    monkeypatch.setenv("KOA_READER", "spark")
    result, out = audit_dirs("binaryfile-reader", [SCENARIO / "brokers"])
    _, want = scenario_latest
    spark = SparkSession.getActiveSession()
    for table in ("findings", "committed_offsets", "bounds", "epochs"):
        assertDataFrameEqual(spark.read.parquet(str(out / table)), spark.read.parquet(str(want / table)))
    assert result.summary["records_read"] == scenario_latest[0].summary["records_read"]


def test_bad_checkpoint_lines_are_reported_and_the_rest_is_used(audit_dirs, tmp_path):
    """A leader-epoch-checkpoint line that does not parse is skipped with its text; good lines still count."""
    dst = tmp_path / "brokers"
    shutil.copytree(SCENARIO / "brokers", dst)
    ckpt = dst / "broker-1/dev.payments-0/leader-epoch-checkpoint"
    lines = ckpt.read_text().splitlines()
    ckpt.write_text("\n".join(lines[:2] + ["x 12"] + lines[2:] + ["3 99999999999999999999"]) + "\n")
    result, out = audit_dirs("bad-ckpt-lines", [dst])
    where = [w for w in result.summary["records_skipped"]["where"] if w["reason"] == "bad_checkpoint_line"]
    assert sorted(w["detail"] for w in where) == ["3 99999999999999999999", "x 12"]
    assert all(w["file"].endswith("broker-1/dev.payments-0/leader-epoch-checkpoint") for w in where)
    # the good lines still give the divergence offset the Java consumer computed (60)
    spark = SparkSession.getActiveSession()
    found = (
        spark.read.parquet(str(out / "findings"))
        .where("finding = 'LOG_TRUNCATION' and topic = 'dev.payments' and partition = 0")
        .collect()
    )
    assert found and {r["divergence_offset"] for r in found} == {60}


def test_log_dirs_with_hash_and_space_in_their_path(scenario_latest, audit_dirs, tmp_path):
    """``#`` and blanks are ordinary characters of a directory name, not URI syntax."""
    dst = tmp_path / "kafka #1 copy" / "brokers"
    shutil.copytree(SCENARIO / "brokers", dst)
    result, _out = audit_dirs("awkward-path", [dst])
    want = scenario_latest[0].summary
    assert result.summary["findings"] == want["findings"]
    assert result.summary["offset_commits"] == want["offset_commits"]
    assert not result.summary["records_skipped"]["by_reason"]


def test_metadata_segment_gone_before_the_executor_reads_it_is_reported(tmp_path):
    """The KRaft metadata decoder reports a file it cannot open, like the other readers."""
    from audit.sources.logdirs import decode_metadata_files

    path = f"file:{tmp_path}/__cluster_metadata-0/00000000000000000000.log"
    rows = pa.Table.from_batches(
        list(decode_metadata_files(iter([pa.RecordBatch.from_pydict({"path": [path]})])))
    ).to_pylist()
    assert [(r["source_file"], r["timestamp"], r["decode_error"].split(":")[0]) for r in rows] == [
        (path, None, "unreadable_file at byte 0")
    ]


def test_corrupt_metadata_batch_is_reported_once_with_reason_and_position(audit_dirs, tmp_path):
    """A CRC mismatch in __cluster_metadata is reported by the metadata decoder with its byte position,
    not as an undecodable record and not a second time by the log-end-offset scan."""
    dst = tmp_path / "brokers"
    shutil.copytree(SCENARIO / "brokers", dst)
    positions = {}
    for seg in dst.glob("*/__cluster_metadata-0/00000000000000000000.log"):
        buf = bytearray(seg.read_bytes())
        last = scan_batches(bytes(buf)).position.tolist()[-1]
        buf[last + 70] ^= 0xFF
        seg.write_bytes(bytes(buf))
        positions[str(seg)] = last
    result, _ = audit_dirs("bad-metadata-batch", [dst])
    where = [w for w in result.summary["records_skipped"]["where"] if "__cluster_metadata" in w["file"]]
    used = result.summary["inputs"]["metadata_log"].split(" ", 2)[2]
    chosen = [w for w in where if w["file"].startswith(used)]
    assert [(w["reason"], w["position"]) for w in chosen] == [("crc_mismatch", positions[fs_path(chosen[0]["file"])])]
    assert result.summary["records_skipped"]["by_reason"].get("metadata_record_undecodable", 0) == 0


def test_records_read_by_type_stays_bounded_under_many_unknown_types_and_versions(audit_dirs, tmp_path):
    """300 records of 300 unknown record types and 300 offset commits of 300 unknown value versions, appended to
    a real segment: summary.json counts them under a few keys ('other record types ...', 'OffsetCommit v(other)')
    instead of 600 keys, every record still counted, and records_skipped keeps each one's reason."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    dst = tmp_path / "broker"
    shutil.copytree(REAL / "kraft-3.6-single-broker/data", dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    seg = dst / "__consumer_offsets-24/00000000000000000000.log"
    buf = seg.read_bytes()
    base = scan_batches(buf).end_offset
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 22,
    )
    for i in range(300):
        b.append(
            i, timestamp=1700000000000, key=struct.pack(">hh1s", 100 + i, 1, b"g"), value=b"\x00\x00\x01", headers=[]
        )
    for i in range(300):
        key = struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", i)
        b.append(300 + i, timestamp=1700000000000, key=key, value=struct.pack(">hq", 1000 + i, 5), headers=[])
    batch = bytearray(b.build())
    batch[0:8] = struct.pack(">q", base)  # the segment's next offset (the CRC starts after it, at attributes)
    seg.write_bytes(buf + bytes(batch))
    result, _ = audit_dirs("many-kinds", [dst], fail_on="never")
    by_type = result.summary["records_read"]["by_record_type"]
    other = sum(n for k, n in by_type.items() if k.startswith("other record types"))
    assert other == 300 and by_type.get("OffsetCommit v(other)") == 300, by_type
    assert not [k for k in by_type if k.startswith("type_")] and len(by_type) < 20, sorted(by_type)
    reasons = result.summary["records_skipped"]["by_reason"]
    assert reasons.get("unknown_record_type") == 300 and reasons.get("unknown_value_version") == 300, reasons
