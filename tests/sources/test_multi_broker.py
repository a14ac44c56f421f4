"""Several brokers: each __consumer_offsets partition is read from one replica only, the leader's
cache answers, and replicas whose caches disagree are reported."""

import shutil

import pytest

from ..paths import REAL


def _copy(src, dst, node_id):
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    meta = dst / "meta.properties"
    meta.write_text(
        "\n".join(f"node.id={node_id}" if ln.startswith("node.id=") else ln for ln in meta.read_text().splitlines())
        + "\n"
    )


@pytest.mark.slow
def test_two_replicas_never_count_a_commit_twice(audit_dirs, tmp_path):
    src = REAL / "kraft-3.6-single-broker/data"
    _copy(src, tmp_path / "b1", 1)
    _copy(src, tmp_path / "b2", 2)
    # broker 2 disagrees about where epoch 2 of orders-0 starts (an unclean election's footprint)
    (tmp_path / "b2/orders-0/leader-epoch-checkpoint").write_text("0\n2\n0 0\n2 50\n")
    single, _ = audit_dirs("single", [src], fail_on="never")
    double, out = audit_dirs("double", [tmp_path], fail_on="never")
    assert double.summary["offset_commits"] == single.summary["offset_commits"]
    assert double.summary["findings"]["by_name"] == single.summary["findings"]["by_name"]
    assert {int(v["broker_id"]) for v in double.summary["inputs"]["consumer_offsets_replicas"].values()} == {1}
    assert all(v["replicas"] == 2 for v in double.summary["inputs"]["consumer_offsets_replicas"].values())
    dis = double.summary["epoch_cache_disagreements"]
    assert dis == [{"topic": "orders", "partition": 0, "leader_epoch": 2, "start_offset_by_broker": {"1": 57, "2": 50}}]
    assert len(double.summary["inputs"]["brokers"]) == 2


def test_broker_folders_are_not_mistaken_for_partitions(spark):
    """``brokers/broker-1/`` holds meta.properties: a log dir, not partition 1 of a topic "broker"."""
    from audit.sources.logdirs import discover

    from ..paths import SCENARIO

    inv = discover(spark, [str(SCENARIO / "brokers")])
    assert sorted(ld.broker_id for ld in inv.log_dirs) == [1, 2, 3, 100]
    assert not [r for r in inv.replicas if r.topic == "broker"]
    assert {r.partition for r in inv.replicas if r.topic == "__consumer_offsets"} == set(range(8))


@pytest.mark.slow
def test_overlapping_log_dir_roots_are_read_once(audit_dirs, scenario_latest):
    """A folder of log dirs given together with one of its log dirs (and again with a trailing
    slash): every file is read once, so nothing is counted twice."""
    from ..paths import SCENARIO

    single, _ = scenario_latest
    roots = [SCENARIO / "brokers", SCENARIO / "brokers/broker-1", f"{SCENARIO / 'brokers'}/"]
    result, _out = audit_dirs("overlap", roots)
    for part in ("findings", "offset_commits", "records_read", "records_skipped"):
        assert result.summary[part] == single.summary[part], part
    assert len(result.summary["inputs"]["brokers"]) == 4
    assert [n for n in result.summary["inputs"]["notes"] if "overlaps another --log-dirs root" in n] == [
        f"{SCENARIO / 'brokers/broker-1'}: overlaps another --log-dirs root; its files are read once",
        f"{SCENARIO / 'brokers'}/: overlaps another --log-dirs root; its files are read once",
    ]
