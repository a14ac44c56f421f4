"""Reset plans, with Kafka as the judge: on each lab Kafka version a cluster runs an unclean election (commits past
the divergence point), commits below the log start and past the log end; the live audit (the CLI's defaults,
``--fail-on error``) writes ``reset_plan/``; each group's CSV is applied as written with Kafka's own
``kafka-consumer-groups --reset-offsets --from-file --execute`` (ConsumerGroupCommand from Maven Central's
kafka-tools); then Kafka's Java consumer resumes every planned group-partition with ``auto.offset.reset=none``: no
exception, and each resumes where the plan said (its first record's offset, or its settled position at the log
end)."""

from __future__ import annotations

import json
import subprocess

import pytest

from . import kafka_dist, scenario, soak

EPISODES = ["unclean", "beyond_end", "delete_records"]


def _reset(bootstrap: str, version: str, group: str, csv: str, mode: str) -> str:
    cmd = kafka_dist.consumer_groups_command(
        version, bootstrap, "--reset-offsets", "--group", group, "--from-file", csv, mode
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "Exception" not in proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("version", kafka_dist.versions())
def test_the_plans_kafka_applies_resume_every_group_where_they_say(spark, tmp_path, version):
    sc = scenario.run_scenario(7, version, tmp_path / "lab", kinds=EPISODES, hot_copy=False)
    try:
        out = tmp_path / "out"
        res = soak.audit(spark, out, bootstrap=sc.cluster.bootstrap)
        assert res["error"] is None, res["error"]
        doc = json.loads((out / "reset_plan" / "plan.json").read_text())
        planned = {(g["group_id"], r["topic"], r["partition"]): r for g in doc["groups"] for r in g["rows"]}
        # every episode kind gives at least one row: a truncation, below the log start, past the log end
        assert {r["rule"] for r in planned.values()} == {
            "the divergence offset",
            "the log start offset",
            "the log end offset",
        }, doc
        for g in doc["groups"]:
            csv = str(out / "reset_plan" / g["file"])
            dry = _reset(sc.cluster.bootstrap, version, g["group_id"], csv, "--dry-run")
            # Kafka's tool reads the file as written: its dry run shows each planned offset (3.9's tool prints the
            # rows on one line: compared as a sequence of cells)
            cells = dry.split()
            shown = {tuple(cells[i : i + 4]) for i in range(len(cells) - 3)}
            for r in g["rows"]:
                assert (g["group_id"], r["topic"], str(r["partition"]), str(r["reset_to"])) in shown, dry
            _reset(sc.cluster.bootstrap, version, g["group_id"], csv, "--execute")
        verdicts = sc.client.call("verdicts", group_partitions=[list(k) for k in planned], timeout_ms=6000)
        wrong = []
        for v in verdicts:
            want = planned[(v["group"], v["topic"], v["partition"])]["reset_to"]
            resumed = v.get("first_fetched_offset", v.get("position"))
            if v["verdict"] != "OK" or v["committed_offset"] != want or resumed != want:
                wrong.append((v, want))
        assert not wrong and len(verdicts) == len(planned), wrong
    finally:
        scenario.finish(sc)
