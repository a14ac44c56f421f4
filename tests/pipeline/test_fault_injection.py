"""The fault-injection table (``python -m bench.faults``) as tests: each fault damages a copy of the shared
scenario one way; the real CLI must finish with the expected exit status, report the damage with file and byte
position in summary.json, and leave every group-partition the fault did not touch exactly as a clean run has it."""

import pytest

from audit.formats.segments import RAW_SCHEMA, decode_offsets_segment
from bench import faults

from ..paths import SCENARIO


@pytest.fixture(scope="module")
def clean(spark, tmp_path_factory):
    return faults.clean_run(tmp_path_factory.mktemp("faults-clean"))


@pytest.mark.parametrize("fault", faults.FAULTS, ids=[f.name for f in faults.FAULTS])
def test_fault(fault, clean, tmp_path):
    tables, n_offsets = clean
    row = faults.run_fault(fault, tmp_path, tables, n_offsets)
    assert row["ok"], row["problems"]
    if row["exit"] == 0:
        assert row["changed_untouched"] == []


def test_the_table_detects_a_change_outside_the_touched_partitions(clean, tmp_path):
    """The comparison can fail: a fault that claims to touch nothing while it damages dev.payments-0's epochs."""
    tables, n_offsets = clean

    def lying(root):
        for d in root.glob("*/dev.payments-0"):
            (d / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
        return faults.Damage(set())

    row = faults.run_fault(faults.Fault("lying", "x", lying), tmp_path, tables, n_offsets)
    assert not row["ok"] and any(k[1:] == ["dev.payments", 0] for k in row["changed_untouched"])


def test_groups_live_in_the_partition_kafka_hashes_them_to():
    """``java_hash_partition`` is the coordinator's ``Utils.abs(groupId.hashCode) % partitions``: every group key in
    the scenario's __consumer_offsets-N segments hashes to N."""
    import pyarrow as pa

    dirs = sorted(SCENARIO.glob("brokers/broker-1/__consumer_offsets-*"))
    n = len(dirs)
    seen = 0
    for d in dirs:
        p = int(d.name.rsplit("-", 1)[1])
        for seg in d.glob("*.log"):
            rows = pa.Table.from_batches(decode_offsets_segment(seg.read_bytes(), str(seg), p), schema=RAW_SCHEMA)
            for g in {r for r in rows.column("group_id").to_pylist() if r}:
                assert faults.java_hash_partition(g, n) == p, (g, p)
                seen += 1
    assert seen >= 5
    assert faults.java_hash_partition("", 50) == 0
    assert faults.java_hash_partition("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE
