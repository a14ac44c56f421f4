"""Share groups (KIP-932) on a real Kafka 4.x cluster: what Kafka gave each share group through an unclean leader
election, ``deleteRecords`` and a topic re-created under its name, recorded delivery by delivery by real
``KafkaShareConsumer`` members (``tests/lab/share_episode.py``), and the oracle computed from that record and the
partitions' final logs (a record is its (offset, leader epoch)).

The lab runs once, on the newest 4.x of ``kafka_dist.versions()`` (4.4.0 by default); it is skipped only when no
4.x version is configured (``KOA_LAB_VERSIONS=3.9.2``). The assertions are what Kafka did, checked against the
recorded deliveries; the oracle's own counting is checked on a hand-made record as well.
"""

from __future__ import annotations

import json

import pytest

from . import kafka_dist, soak
from .cluster import lab_jvms
from .share_episode import compare_share, oracle, run_share_lab

_4X = [v for v in kafka_dist.versions() if kafka_dist.major(v) >= 4]
VERSION = max(_4X, key=lambda v: tuple(int(x) for x in v.split("."))) if _4X else None


@pytest.fixture(scope="module")
def share_lab(tmp_path_factory, spark):
    if VERSION is None:
        pytest.skip(f"share groups need Kafka 4.x; KOA_LAB_VERSIONS={kafka_dist.versions()} has none")
    workdir = tmp_path_factory.mktemp(f"share-lab-{VERSION}")

    def live_audit(sc):  # the CLI's defaults against the running cluster, after the oracle
        return soak.audit(spark, workdir / "out-live", bootstrap=sc.cluster.bootstrap)

    res = run_share_lab(VERSION, workdir, while_up=live_audit)
    res["audits"] = {
        "live": res["while_up"],
        "offline": soak.audit(spark, workdir / "out-offline", log_dirs=res["log_dirs"]),
        "hot": soak.audit(spark, workdir / "out-hot", log_dirs=res["hot_copy"]),
    }
    res["workdir"] = workdir
    res["scenario"] = json.loads(res["scenario_json"].read_text())
    res["rows"] = {(r["group"], r["topic"], r["partition"]): r for r in res["oracle"]}
    return res


def _positions(lab, kind: str) -> dict:
    """The episode's ``share positions`` step (what it set up before the fault)."""
    steps = [s for s in lab["scenario"]["schedule"] if s["step"] == "share positions" and f".{kind}." in s["topic"]]
    assert len(steps) == 1, (kind, steps)
    return steps[0]


def _row(lab, group: str, topic: str) -> dict:
    return lab["rows"][(group, topic, 0)]


def _deliveries(lab, group: str, phases=None) -> list:
    return [
        d
        for d in lab["scenario"]["share_deliveries"]
        if d["group"] == group and (phases is None or d["phase"] in phases)
    ]


def _accepted(ds) -> set:
    return {d["offset"] for d in ds if d["ack"] == "accept" and not d.get("commit_error")}


# ------------------------------------------------------------------ the run itself
def test_run_share_lab_returns_the_stopped_log_dirs_the_scenario_and_the_oracle(share_lab):
    lab = share_lab
    assert {"log_dirs", "scenario_json", "oracle", "hot_copy"} <= set(lab)
    assert len(lab["log_dirs"]) == 4 and all((d / "meta.properties").is_file() for d in lab["log_dirs"])
    # the cluster was stopped cleanly: every broker left its clean-shutdown marker and no JVM runs
    assert all((d / ".kafka_cleanshutdown").exists() for d in lab["log_dirs"] if "broker" in d.parent.name)
    assert lab_jvms(lab["workdir"]) == []
    assert len(lab["hot_copy"]) == 4 and all((d / "meta.properties").is_file() for d in lab["hot_copy"])
    state = sorted({p.name for d in lab["log_dirs"] for p in d.glob("__share_group_state-*")})
    assert state == ["__share_group_state-0", "__share_group_state-1", "__share_group_state-2"], state
    assert lab["scenario_json"].is_file() and lab["scenario"]["share_deliveries"]
    assert json.loads((lab["workdir"] / "share_oracle.json").read_text()) == lab["oracle"]
    keys = {"group", "topic", "partition", "never_delivered", "accepted_twice", "redelivered", "lost_in_flight"}
    assert all(keys | {"final_start_offset"} <= set(r) for r in lab["oracle"])
    groups = {r["group"].rsplit(".", 1)[1] for r in lab["oracle"]}
    assert groups == {"past", "at-divergence", "gap-release", "gap-hold", "early", "behind", "straddle", "old"}


# ------------------------------------------------------------------ share_unclean
def _lineage(lab) -> dict:
    steps = [s for s in lab["scenario"]["schedule"] if s["step"] == "share new lineage"]
    assert len(steps) == 1, steps
    return steps[0]


def test_the_group_past_fs_end_never_got_the_new_records_up_to_its_old_position(share_lab):
    """``past`` accepted everything L had; F, elected uncleanly, wrote other records at those offsets: Kafka never
    gave them to ``past`` (its share-partition state is by offset), and gave it everything after them."""
    pos = _positions(share_lab, "share_unclean")
    row = _row(share_lab, pos["groups"]["past"], pos["topic"])
    assert pos["kept"] < pos["l_end"] < row["log_end_offset"], (pos, row)
    assert row["never_delivered"] == list(range(pos["kept"], pos["l_end"])), (pos, row)
    after = _deliveries(share_lab, pos["groups"]["past"], ("elected", "recovered", "final"))
    assert sorted(d["offset"] for d in after) == list(range(pos["l_end"], row["log_end_offset"])), pos


def test_while_fs_log_ended_below_pasts_position_kafka_gave_it_nothing_and_logged_an_error(share_lab):
    """F's log ended below the offsets ``past`` had accepted on L: ``past`` polled and got nothing, and the share
    partition's leader logged (at every fetch) that the log start offset is not greater than the start offset."""
    pos, lin = _positions(share_lab, "share_unclean"), _lineage(share_lab)
    group = pos["groups"]["past"]
    assert pos["kept"] < lin["f_end"] < pos["l_end"], (pos, lin)
    assert _deliveries(share_lab, group, ("elected",)) == []
    polls = [s for s in share_lab["scenario"]["schedule"] if s["step"] == "share_poll" and s["name"].startswith(group)]
    assert any(s["delivered"] == 0 and s["commit_errors"] == [] for s in polls), polls
    errors = [e for e in share_lab["broker_errors"] if f"for the share partition: {group}-" in e["line"]]
    assert errors, share_lab["broker_errors"][:5]
    assert all(
        f"ERROR The log start offset: 0 is not greater than the start offset: {pos['l_end']} " in e["line"]
        for e in errors
    ), errors


def test_the_group_at_fs_end_and_the_early_group_got_every_record_of_the_new_lineage(share_lab):
    pos, lin = _positions(share_lab, "share_unclean"), _lineage(share_lab)
    assert lin["leader_epoch"] > pos["leader_epoch"], (pos, lin)
    for role in ("at-divergence", "early"):
        group = pos["groups"][role]
        row = _row(share_lab, group, pos["topic"])
        assert row["never_delivered"] == [] and row["lost_in_flight"] == [], (role, row)
        # F's records: every offset from F's end on, each with F's leader epoch
        ds = [d for d in _deliveries(share_lab, group) if d["offset"] >= pos["kept"]]
        assert sorted(d["offset"] for d in ds) == list(range(pos["kept"], row["log_end_offset"])), (role, pos)
        assert {d["leader_epoch"] for d in ds} == {lin["leader_epoch"]}, (role, pos, lin)


def test_a_new_record_at_an_offset_a_group_accepted_on_l_is_never_delivered_any_other_is(share_lab):
    """One rule for every group of the unclean episode, the gap groups (a range past F's end accepted, records
    before it released or held when L died) included: never delivered = the offsets at or past F's end that the
    group had accepted on L."""
    pos = _positions(share_lab, "share_unclean")
    for role, group in pos["groups"].items():
        row = _row(share_lab, group, pos["topic"])
        on_l = _accepted(_deliveries(share_lab, group, ("setup", "isolated")))
        expected = sorted(o for o in on_l if pos["kept"] <= o < row["log_end_offset"])
        assert row["never_delivered"] == expected, (role, pos, row)
        if role.startswith("gap"):
            assert expected, (role, pos)  # the accepted range past F's end


def test_records_released_or_held_on_l_were_given_again_from_fs_log(share_lab):
    pos = _positions(share_lab, "share_unclean")
    for role, (a, b) in pos["gaps"].items():
        group = pos["groups"][role]
        later = {d["offset"]: d for d in _deliveries(share_lab, group, ("recovered", "final")) if not d.get("late")}
        assert set(range(a, b)) <= set(later), (role, pos, sorted(later))
        # those past F's end are F's records: its leader epoch, not the one L wrote them with
        assert all(later[o]["leader_epoch"] > pos["leader_epoch"] for o in range(max(a, pos["kept"]), b)), pos
        # what L gave out past F's end and the group never settled is in no final log: lost in flight (below
        # F's end F has the same records: they were given again and accepted)
        row = _row(share_lab, group, pos["topic"])
        lost = [[o, pos["leader_epoch"]] for o in range(max(a, pos["kept"]), b)]
        assert row["lost_in_flight"] == lost, (role, pos, row)
    # the held records' late acknowledgement, sent after the election, failed
    late = [d for d in _deliveries(share_lab, pos["groups"]["gap-hold"]) if d.get("late")]
    a, b = pos["gaps"]["gap-hold"]
    assert sorted(d["offset"] for d in late) == list(range(a, b)), late
    assert all(d["ack"] == pos["held_ack"] and d.get("commit_error") for d in late), late


# ------------------------------------------------------------------ every group
def test_no_record_was_accepted_twice(share_lab):
    assert [r for r in share_lab["oracle"] if r["accepted_twice"]] == []


def test_every_group_drained_and_kafka_reports_no_lag(share_lab):
    """After the drains (and a last one after the rolling restart) Kafka reports every share-partition with lag 0,
    the unclean episode's groups with records never delivered included."""
    rows = share_lab["oracle"]
    assert all(r["final_lag"] == 0 for r in rows), [(r["group"], r["final_lag"]) for r in rows]
    assert all(r["final_start_offset"] is not None for r in rows)
    assert all(r["log_start_offset"] <= r["final_start_offset"] <= r["log_end_offset"] for r in rows), rows
    final = [d for d in share_lab["scenario"]["share_deliveries"] if d["phase"] == "final"]
    assert final == [], final  # nothing left to give after the rolling restart moved the leaders


# ------------------------------------------------------------------ share_delete_records
def test_delete_records_past_the_groups_start_offsets(share_lab):
    pos = _positions(share_lab, "share_delete_records")
    cut, (a, b) = pos["cut"], pos["gap"]
    for role, group in pos["groups"].items():
        row = _row(share_lab, group, pos["topic"])
        assert row["log_start_offset"] == cut and row["final_start_offset"] >= cut, (role, row)
        assert row["never_delivered"] == [], (role, row)
        after = [d for d in _deliveries(share_lab, group, ("after", "final")) if not d.get("late")]
        assert min(d["offset"] for d in after) >= cut, (role, after[:3])
    # the records `straddle` released below the cut were deleted before anyone got them again
    row = _row(share_lab, pos["groups"]["straddle"], pos["topic"])
    assert row["lost_in_flight"] == [[o, 0] for o in range(a, cut)], (pos, row)
    assert row["redelivered"] == [[o, 0] for o in range(cut, b)], (pos, row)


# ------------------------------------------------------------------ share_recreate
def test_a_recreated_topic_is_read_from_its_start_by_the_group_of_the_old_one(share_lab):
    steps = [s for s in share_lab["scenario"]["schedule"] if s["step"] == "share recreated"]
    assert len(steps) == 1, steps
    st = steps[0]
    group = st["topic"].rsplit(".", 1)[0] + ".old"
    row = _row(share_lab, group, st["topic"])
    assert row["topic_id"] == st["topic_id"] != st["old_topic_id"]
    assert row["never_delivered"] == [] and row["delivered"] == row["log_end_offset"], row
    first = _deliveries(share_lab, group, ("setup",))
    released = [[d["offset"], d["leader_epoch"]] for d in first if d["ack"] == "release"]
    assert list(row["older_topic_ids"]) == [st["old_topic_id"]], row
    assert row["older_topic_ids"][st["old_topic_id"]]["lost_in_flight"] == released, row


# ------------------------------------------------------------------ the oracle's counting
def test_the_oracle_counts_identities_not_offsets():
    """A hand-made record: L wrote offsets 0-3 in epoch 0, F (epoch 2) rewrote 2-4. The group accepted 0 and 1
    (1 after a release), accepted 2 on L, held 3 on L and lost its late acknowledgement; F's 3 and 4 came
    later, 4 twice (accepted twice), then the topic was re-created: a delivery of the old topic id counts apart."""
    D = lambda o, e, ack, n=1, **kw: {  # noqa: E731
        "group": "g",
        "topic": "t",
        "partition": 0,
        "topic_id": kw.pop("tid", "new"),
        "offset": o,
        "leader_epoch": e,
        "delivery_count": n,
        "ack": ack,
        **kw,
    }
    deliveries = [
        D(0, 0, "accept"),
        D(1, 0, "release"),
        D(1, 0, "accept", 2),
        D(2, 0, "accept"),
        D(3, 0, "hold"),
        D(3, 0, "release", late=True, commit_error="NetworkException: gone"),
        D(3, 2, "accept", 2),
        D(4, 2, "accept"),
        D(4, 2, "accept", 2),
        D(5, 2, "reject"),
        D(7, 0, "release", tid="old"),
    ]
    logs = {
        ("t", 0): {
            "topic_id": "new",
            "log_start_offset": 0,
            "log_end_offset": 6,
            "records": [[0, 0], [1, 0], [2, 2], [3, 2], [4, 2], [5, 2]],
        }
    }
    offsets = {("g", "t", 0): {"start_offset": 5, "leader_epoch": 2, "lag": 0}}
    (row,) = oracle(deliveries, logs, offsets, [["g", "t", 0]])
    assert row["never_delivered"] == [2]  # F's record at 2: the group only had L's
    assert row["accepted_twice"] == [[4, 2]]
    assert row["redelivered"] == [[1, 0], [4, 2]]  # a late acknowledgement is no delivery
    assert row["lost_in_flight"] == [[3, 0]]  # L's 3: held, its release failed, not in the final log
    assert row["delivered"] == 9
    assert (row["final_start_offset"], row["final_start_epoch"], row["final_lag"]) == (5, 2, 0)
    assert row["older_topic_ids"] == {"old": {"delivered": 1, "lost_in_flight": [[7, 0]]}}


# ------------------------------------------------------------------ the audit against Kafka
@pytest.mark.parametrize("source", soak.SOURCES)
def test_the_audit_predicts_every_record_kafka_never_gave_a_share_group(share_lab, source):
    """Each audit (the CLI's defaults: live against the running cluster, offline on the stopped cluster's log dirs,
    and on the hot copy) against the oracle: for every share group-partition, the records of the final log the group
    was never given are exactly the records its LOG_TRUNCATION counts in the log (none when OK), all at or past the
    divergence offset; and no more records lost in flight than the consumers held there."""
    a = share_lab["audits"][source]
    assert a["error"] is None and a["exit_code"] in (0, 1), a["error"]
    assert a["report_html"] and a["validation_result"], a
    rows = compare_share(share_lab["oracle"], a["out"])
    bad = [r for r in rows if not r["agree"]]
    assert not bad, (source, bad)
    skipped = [r for r in rows if r["expected"]]
    assert skipped and all(r["verdict"] == "LOG_TRUNCATION" for r in skipped), rows
    summary = json.loads((a["out"] / "summary.json").read_text())
    assert summary["share_groups"]["state_read"] and summary["share_groups"]["share_partitions"] >= len(
        {(r["group"], r["topic"]) for r in rows if r["verdict"] != "OK" or r["expected"]}
    )


def test_share_findings_carry_group_type_share_and_their_owners(share_lab):
    import pyarrow.parquet as pq

    findings = pq.read_table(share_lab["audits"]["offline"]["out"] / "findings").to_pylist()
    share = [f for f in findings if f["group_id"] in {r["group"] for r in share_lab["oracle"]}]
    assert share and all(f["group_type"] == "share" for f in share), share[:3]
    truncations = [f for f in share if f["finding"] == "LOG_TRUNCATION"]
    assert truncations and all(f["cause"] == "unclean_election" and f["severity"] == "critical" for f in truncations)
    # the members that drained last hold the partitions: their client id is the lab's share consumer
    assert all(f["owner_member_id"] and f["owner_client_id"] for f in truncations), truncations[:2]
