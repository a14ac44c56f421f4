"""The live-cluster source's code path on recorded answers, not on a live cluster (the lab's tests drive the real
one): __consumer_offsets replayed by a fake read_committed consumer (broker-1's real segments), OffsetsForLeaderEpoch and ListOffsets
answers recorded from the real cluster (ground_truth.json). Must agree with the Java consumer."""

import json
from types import SimpleNamespace

import pytest

from ..paths import SCENARIO

TRUTH = json.loads((SCENARIO / "ground_truth.json").read_text())


def recorded_collect(reqs, parts):
    answers, bounds = {}, {}
    for r in TRUTH:
        resp = r.get("offsets_for_leader_epoch_response")
        if resp:
            answers[(r["topic"], r["partition"], resp["requested_epoch"])] = resp
        bounds[(r["topic"], r["partition"])] = {
            "topic": r["topic"],
            "partition": r["partition"],
            "log_start_offset": r["log_start_offset"],
            "log_end_offset": r["log_end_offset"],
            "high_watermark": r["log_end_offset"],
            "leader_id": r["current_leader"],
            "leader_epoch": r["current_leader_epoch"],
        }
    eeo = []
    for t, p, e in reqs:
        a = answers[(t, p, e)]
        eeo.append(
            {
                "topic": t,
                "partition": p,
                "requested_epoch": e,
                "leader_epoch": a["leader_epoch"],
                "end_offset": a["end_offset"],
                "answered_by_broker": a["asked_broker"],
            }
        )
    return SimpleNamespace(epoch_end_offsets=eeo, bounds=[bounds[tp] for tp in parts], problems=[], stats={})


@pytest.fixture(scope="module")
def live_run(spark, tmp_path_factory):
    from pyspark import cloudpickle

    from audit.pipeline import AuditConfig, run

    from . import test_kafka_datasource as fakes

    cloudpickle.register_pickle_by_value(fakes)
    try:
        out = tmp_path_factory.mktemp("live") / "out"
        cfg = AuditConfig(bootstrap_servers="127.0.0.1:29101", output=str(out), quiet=True, reports=False)
        result = run(cfg, spark, consumer_factory=fakes.ReplayConsumer, collect=recorded_collect)
    finally:
        cloudpickle.unregister_pickle_by_value(fakes)
    return result, out


@pytest.mark.slow
def test_live_source_on_recorded_answers_agrees_with_java_consumer(spark, live_run):
    result, out = live_run
    findings = spark.read.parquet(str(out / "findings")).collect()
    trunc = {(f.group_id, f.topic, f.partition, f.divergence_offset) for f in findings if f.finding == "LOG_TRUNCATION"}
    want = {
        (r["group"], r["topic"], r["partition"], r["divergent_offset"])
        for r in TRUTH
        if r["java_consumer_verdict"] == "LogTruncationException"
    }
    assert trunc == want
    oor = {(f.group_id, f.topic, f.partition) for f in findings if f.finding == "OFFSET_OUT_OF_RANGE"}
    for r in TRUTH:
        key = (r["group"], r["topic"], r["partition"])
        if r["java_consumer_verdict"] == "OffsetOutOfRangeException":
            assert key in oor
        if r["java_consumer_verdict"] == "OK":
            assert key not in oor
    committed = spark.read.parquet(str(out / "committed_offsets")).count()
    assert committed == sum(1 for r in TRUTH if r["committed_offset"] is not None)
    assert result.summary["inputs"]["bootstrap_servers"] == "127.0.0.1:29101"


@pytest.mark.slow
def test_live_source_on_recorded_answers_and_log_dirs_give_the_same_findings(spark, live_run, scenario_latest):
    _r, live_out = live_run
    _r2, dir_out = scenario_latest
    cols = ["group_id", "topic", "partition", "finding", "committed_offset", "divergence_offset"]
    live = sorted(tuple(r) for r in spark.read.parquet(str(live_out / "findings")).select(*cols).collect())
    dirs = sorted(tuple(r) for r in spark.read.parquet(str(dir_out / "findings")).select(*cols).collect())
    assert live == dirs


def test_source_arguments_are_validated():
    from pydantic import ValidationError

    from audit.pipeline import AuditConfig

    with pytest.raises(ValidationError, match="either --log-dirs"):
        AuditConfig(output="o")
    with pytest.raises(ValidationError, match="either --log-dirs"):
        AuditConfig(output="o", log_dirs=["x"], bootstrap_servers="h:1")
    with pytest.raises(ValidationError, match="regular expression"):
        AuditConfig(output="o", log_dirs=["x"], groups="(")
