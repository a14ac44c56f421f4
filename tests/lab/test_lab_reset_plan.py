"""Reset plans, with Kafka as the judge: on each lab Kafka version a cluster runs an unclean election (commits past
the divergence point), commits below the log start and past the log end; the live audit (the CLI's defaults,
``--fail-on error``) writes ``reset_plan/``; each group's CSV is applied as written with Kafka's own
``kafka-consumer-groups --reset-offsets --from-file --execute`` (ConsumerGroupCommand from Maven Central's
kafka-tools); then Kafka's Java consumer resumes every planned group-partition with ``auto.offset.reset=none``: no
exception, and each resumes where the plan said (its first record's offset, or its settled position at the log
end).

Share groups (KIP-932), on the newest 4.x lab version only: an unclean election under their share-partition
states and deleted records past their start offsets; each share group's CSV is applied as written with
``kafka-share-groups --reset-offsets --from-file`` (ShareGroupCommand, which takes the file from Kafka 4.4 on), then a
``KafkaShareConsumer`` of each group is delivered every planned partition's records from the plan's offset on."""

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
        _records_as_planned(sc, planned)
    finally:
        scenario.finish(sc)


def _records_as_planned(sc, planned: dict) -> None:
    """Each row's ``records`` against the records in the partition now, read with Kafka's consumer: a truncation's
    (the records from the divergence offset to the old position, which the group reads instead of skipping) and a
    past-the-end's (those appended from the log end to the old position) are the records there once the log has
    grown past the old position; below the log start, none of the offsets skipped holds a record any more."""
    logs = {t: sc.client.call("read_topic", topic=t, timeout_ms=60000) for t in {t for _g, t, _p in planned}}
    wrong = []
    for (group, topic, partition), r in planned.items():
        offsets = logs[topic][str(partition)]
        low, high = sorted((r["committed_offset"], r["reset_to"]))
        held = sum(1 for o in offsets if low <= o < high)
        end = max(offsets, default=-1) + 1
        if r["rule"] == "the log start offset":
            ok = held == 0 and r["records"] == high - low and min(offsets, default=high) >= high
        elif end >= high:
            ok = held == r["records"]
        else:  # the log has not reached the old position yet: the records to come are counted too
            ok = held == end - low and r["records"] == high - low
        if not ok:
            wrong.append((group, topic, partition, r, held, end))
    assert not wrong, wrong


# ------------------------------------------------------------------ share groups (KIP-932)
_4X = [v for v in kafka_dist.versions() if kafka_dist.major(v) >= 4]
SHARE_VERSION = max(_4X, key=lambda v: tuple(int(x) for x in v.split("."))) if _4X else None
SHARE_EPISODES = ["share_unclean", "share_delete_records"]


def _share_tool(bootstrap: str, version: str, *args: str) -> str:
    proc = subprocess.run(
        kafka_dist.share_groups_command(version, bootstrap, *args), capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0 and "Exception" not in proc.stderr, (args, proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc.stdout


def _share_states(bootstrap: str, version: str) -> dict:
    """``kafka-share-groups --list --state``: group -> state."""
    lines = _share_tool(bootstrap, version, "--list", "--state").splitlines()
    return {c[0]: c[1] for c in (line.split() for line in lines[1:]) if len(c) >= 2}


def _out_of_range_after_the_drains(sc) -> str:
    """``share_delete_records``' groups drained their partition, then left: more records, and ``deleteRecords`` past
    their share-partitions' start offsets, with no fetch since (Kafka moves a start offset below the log start on
    the next fetch only): the audit finds ``OFFSET_OUT_OF_RANGE``.  Returns the episode's name."""
    (ep,) = [e for e in sc.episodes if e.endswith(".share_delete_records")]
    topic, end = f"{ep}.t", sc.end_offset(f"{ep}.t", 0)
    sc.call("produce", topic=topic, partition=0, count=10, acks="all")
    sc.call("delete_records", topic=topic, partition=0, before=end + 5)
    sc.step("share positions past the log start", topic=topic, end=end, log_start=end + 5)
    return ep


def test_the_share_plans_kafka_applies_deliver_each_share_group_from_where_they_say(spark, tmp_path):
    """Share groups on the newest 4.x: an unclean election under their share-partition states (LOG_TRUNCATION) and
    deleted records past their start offsets (OFFSET_OUT_OF_RANGE); every member has left.  The live audit plans
    each truncated group at its reset offset and the out-of-range ones not at all; each share group's CSV is applied
    as written with Kafka's own ``kafka-share-groups --reset-offsets --from-file`` (``--dry-run``: the planned
    offsets, ``--export``: the file's lines; then ``--execute``); then a KafkaShareConsumer of each group is
    delivered the records of every planned partition from the plan's offset on, with no error."""
    import pyarrow.parquet as pq

    from audit.report.reset_plan import SHARE_OUT_OF_RANGE

    from .share_episode import CLUSTER_OVERRIDES, FIRST_POLL_MS, share_poll

    if SHARE_VERSION is None:
        pytest.skip(f"share groups need Kafka 4.x; KOA_LAB_VERSIONS={kafka_dist.versions()} has none")
    version = SHARE_VERSION
    sc = scenario.run_scenario(
        1,
        version,
        tmp_path / "lab",
        kinds=SHARE_EPISODES,
        hot_copy=False,
        cluster_options={"overrides": CLUSTER_OVERRIDES},
    )
    try:
        boot = sc.cluster.bootstrap
        deleted = _out_of_range_after_the_drains(sc)
        out = tmp_path / "out"
        res = soak.audit(spark, out, bootstrap=boot)
        assert res["error"] is None, res["error"]
        doc = json.loads((out / "reset_plan" / "plan.json").read_text())
        share = [f for f in pq.read_table(out / "findings").to_pylist() if f["group_type"] == "share"]
        truncated = {(f["group_id"], f["topic"], f["partition"]): f for f in share if f["finding"] == "LOG_TRUNCATION"}
        out_of_range = [f for f in share if f["finding"] == "OFFSET_OUT_OF_RANGE"]
        assert truncated and out_of_range and {f["group_id"].rsplit(".", 1)[0] for f in out_of_range} == {deleted}
        plans = [g for g in doc["groups"] if g["tool"] == "kafka-share-groups"]
        planned = {(g["group_id"], r["topic"], r["partition"]): r for g in plans for r in g["rows"]}
        # every truncation is planned, at the divergence offset (or the newest start offset below it); out of
        # range: none
        newest = {
            (s["group_id"], s["topic"], s["partition"]): s["start_offset"]
            for s in pq.read_table(out / "share_partitions").to_pylist()
        }
        assert set(planned) == set(truncated), doc
        assert not {n["group_id"] for n in doc["no_plan"]} & {f["group_id"] for f in share}, doc
        for k, f in truncated.items():
            assert planned[k]["reset_to"] == min(newest[k], f["divergence_offset"]), (planned[k], f)
            assert planned[k]["rule"] == "the divergence offset" or newest[k] < f["divergence_offset"], planned[k]
        assert doc["findings_not_reset"].get(SHARE_OUT_OF_RANGE) == len(out_of_range), doc
        # every member of every share group has left (each handle the episodes opened was closed): inactive
        opened = {s["name"] for s in sc.steps if s["step"] == "share_open"}
        assert opened == {s["name"] for s in sc.steps if s["step"] == "share_close"}, opened
        states = _share_states(boot, version)
        assert all(states.get(g["group_id"]) == "Empty" for g in plans), states
        for g in plans:
            csv = out / "reset_plan" / g["file"]
            args = ("--reset-offsets", "--group", g["group_id"], "--from-file", str(csv))
            dry = _share_tool(boot, version, *args, "--dry-run")
            cells = dry.split()
            shown = {tuple(cells[i : i + 4]) for i in range(len(cells) - 3)}
            for r in g["rows"]:
                assert (g["group_id"], r["topic"], str(r["partition"]), str(r["reset_to"])) in shown, dry
            # --export prints the plan Kafka would apply in the form --from-file reads: the file's own lines
            exported = _share_tool(boot, version, *args, "--dry-run", "--export")
            assert sorted(exported.split()) == sorted(csv.read_text().split()), (exported, csv.read_text())
            done = _share_tool(boot, version, *args, "--execute")
            sc.step(
                "kafka-share-groups --reset-offsets", group=g["group_id"], dry_run=dry, export=exported, execute=done
            )
            starts = {
                (o["topic"], o["partition"]): o["start_offset"]
                for o in sc.client.call("share_offsets", group=g["group_id"])
            }
            assert all(starts[(r["topic"], r["partition"])] == r["reset_to"] for r in g["rows"]), (starts, g)
        # Kafka's share consumer, a new member of each group, is given each planned partition from the plan's offset
        wrong = []
        for g in plans:
            topics = sorted({r["topic"] for r in g["rows"]})
            name = f"{g['group_id']}@reset"
            sc.call("share_open", name=name, group=g["group_id"], topics=topics, config={})
            got = share_poll(sc, name, "reset", None, min_ms=FIRST_POLL_MS, idle_polls=4, timeout_ms=90000)
            closed = sc.client.call("share_close", name=name)
            errors = [d for d in got if d.get("commit_error")]
            for r in g["rows"]:
                offsets = sorted(
                    d["offset"] for d in got if (d["topic"], d["partition"]) == (r["topic"], r["partition"])
                )
                end = sc.end_offset(r["topic"], r["partition"])
                if not offsets or offsets[0] != r["reset_to"] or offsets != list(range(r["reset_to"], end)):
                    wrong.append((g["group_id"], r, offsets[:5], len(offsets), end))
            if errors or closed["error"] is not None:
                wrong.append((g["group_id"], errors[:3], closed["error"]))
        assert not wrong, wrong
    finally:
        scenario.save(sc)
        scenario.finish(sc)
