"""Tiered storage (KIP-405) on real Kafka: the audit against Kafka's consumer on commits in the remote-only range.

For each Kafka version of ``kafka_dist.versions()`` (4.4.0 and 3.9.2 by default) one tiered cluster runs
``tests/lab/tiered_episode.py`` (the lab's own ``RemoteStorageManager``, Kafka's topic-based
``__remote_log_metadata``): commits at the log start, in the remote-only range, at the local log start, in the local
range, at and past the log end; ``deleteRecords`` and remote retention moving the log start up; a clean leader change
and a preferred election; an unclean election. Kafka's own consumer judges every group-partition with the cluster up
(``auto.offset.reset=none``), and the leaders' ``ListOffsets`` ``EARLIEST`` / ``EARLIEST_LOCAL`` / ``LATEST`` are
recorded. Then the audit (the CLI's defaults) runs live against the cluster, on a hot copy of the log dirs taken
while it ran, and offline on a copy taken after a clean stop.

What the tests state is Kafka's truth: a commit in ``[log start, local log start)`` resumes from the remote tier
(``resume_tier`` ``remote``), ``committed_offsets``'s ``log_start_offset`` / ``local_log_start_offset`` are what
the leader answered. Broker logs, log dirs, ``tiered.json`` and every audit's output stay in pytest's temporary
directory (printed on failure). ``KOA_LAB_VERSIONS=4.4.0 pytest tests/lab/test_lab_tiered.py`` runs one version.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from . import differential, kafka_dist, soak
from .cluster import lab_jvms
from .tiered_episode import TOPICS, dump_remote_log_metadata, run_tiered_lab

VERSIONS = kafka_dist.versions()


@pytest.fixture(scope="module", params=VERSIONS, ids=[f"kafka-{v}" for v in VERSIONS])
def tiered(request, spark, tmp_path_factory):
    version = request.param
    workdir = tmp_path_factory.mktemp(f"tiered-{version}")

    def live_audit(lab):  # after Kafka's verdicts, the cluster still up
        return soak.audit(spark, workdir / "out-live", bootstrap=lab.sc.cluster.bootstrap)

    res = run_tiered_lab(version, workdir / "run", while_up=live_audit)
    res["audits"] = {"live": res["while_up"]}
    for source, dirs in (("hot", res["hot_copy"]), ("offline", res["cold_copy"])):
        t = time.monotonic()
        res["audits"][source] = soak.audit(spark, workdir / f"out-{source}", log_dirs=dirs)
        res["timings"][f"audit_{source}"] = round(time.monotonic() - t, 1)
    res["where"] = f"Kafka {version}, {workdir}"
    print(f"tiered lab, Kafka {version}: {res['timings']}")
    return res


def _bounds(lab, topic, partition) -> dict:
    return lab["bounds"][f"{topic}-{partition}"]


def _verdict(lab, group, topic, partition) -> dict:
    (v,) = [x for x in lab["verdicts"] if (x["group"], x["topic"], x["partition"]) == (group, topic, partition)]
    return v


def _commits(lab, **where) -> list[dict]:
    return [c for c in lab["commits"] if all(c[k] == v for k, v in where.items())]


def _committed(lab, source) -> dict:
    committed, _findings = differential.read_output(lab["audits"][source]["out"])
    return committed


# ------------------------------------------------------------------ Kafka's truth (the lab itself)
def test_kafka_serves_commits_in_the_remote_only_range(tiered):
    """The lab did what it says: every partition's log start is below its local log start (the remote tier holds
    ``[log start, local log start)`` alone), and Kafka's consumer resumed every commit in that range (OK)."""
    lab = tiered
    for t in TOPICS:
        if t == "tiered.unclean":  # the old leader leads again: log start = local log start (the unclean test)
            continue
        for p in (0, 1) if t == "tiered.keep" else (0,):
            b = _bounds(lab, t, p)
            assert b["log_start_offset"] < b["local_log_start_offset"] <= b["high_watermark"], (lab["where"], b)
            assert b["highest_tiered_offset"] >= b["local_log_start_offset"] - 1, (lab["where"], b)
    remote = [
        c
        for c in lab["commits"]
        if _bounds(lab, c["topic"], c["partition"])["log_start_offset"]
        <= c["offset"]
        < _bounds(lab, c["topic"], c["partition"])["local_log_start_offset"]
        and c["kind"] != "stale-epoch"
    ]
    assert len(remote) >= 15, remote
    bad = [(c, _verdict(lab, c["group"], c["topic"], c["partition"])) for c in remote]
    assert [x for x in bad if x[1]["verdict"] != "OK"] == [], lab["where"]
    # and the lab's remote storage holds the segments of every partition, __remote_log_metadata their records
    assert all(f"{t}-0" in lab["remote_segments"] for t in TOPICS), lab["remote_segments"].keys()
    assert any(Path(d).glob("__remote_log_metadata-*") for d in lab["cold_copy"])


def test_delete_records_and_remote_retention_move_the_log_start_through_the_remote_tier(tiered):
    lab = tiered
    dr = lab["phases"]["delete_records"]
    assert _bounds(lab, "tiered.delrec", 0)["log_start_offset"] == dr["cut"], (lab["where"], dr)
    for c in _commits(lab, topic="tiered.delrec"):
        want = "OffsetOutOfRangeException" if c["offset"] < dr["cut"] else "OK"
        assert _verdict(lab, c["group"], c["topic"], 0)["verdict"] == want, (lab["where"], c, dr)
    ret = lab["phases"]["retention"]
    start = _bounds(lab, "tiered.retention", 0)["log_start_offset"]
    assert ret["before"]["log_start_offset"] < start < ret["before"]["local_log_start_offset"], (lab["where"], ret)
    # the new log start is where a remote segment the retention kept begins
    assert [s for s in lab["remote_segments"]["tiered.retention-0"] if s[0] == start], lab["remote_segments"]
    cs = _commits(lab, topic="tiered.retention")
    assert any(c["offset"] < start for c in cs) and any(
        start <= c["offset"] < ret["before"]["local_log_start_offset"] for c in cs
    )
    for c in cs:
        want = "OffsetOutOfRangeException" if c["offset"] < start else "OK"
        assert _verdict(lab, c["group"], c["topic"], 0)["verdict"] == want, (lab["where"], c, start)


def test_a_clean_leader_change_on_a_tiered_topic(tiered):
    """Commits of the old epoch in the remote tier resume; a commit of the old epoch past that epoch's end is a
    LogTruncationException at the new epoch's first offset (Kafka's epoch validation works from the remote tier)."""
    lab = tiered
    ph = lab["phases"]["leader"]
    e0, e1, e2 = ph["epochs"]
    assert e0 < e1 < e2, ph
    for c in _commits(lab, topic="tiered.leader"):
        v = _verdict(lab, c["group"], c["topic"], 0)
        if c["kind"] == "stale-epoch":
            assert (v["verdict"], v["divergent_offset"]) == ("LogTruncationException", ph["new_epoch_first"]), v
        else:
            assert v["verdict"] == "OK", (lab["where"], c, v)


def test_an_unclean_election_on_a_tiered_topic(tiered):
    """Kafka allows it (Admin ``electLeaders(UNCLEAN)``, on 3.9 and 4.x alike); commits past the divergence point are
    LogTruncationException at F's end, though the records past it were in the remote tier. The old leader truncates
    below its own local log start and rebuilds from the new leader: its log start becomes the divergence point, and
    once it leads again (a preferred election) Kafka's log start *is* the divergence point: a commit below it, in the
    remote tier and served while F led, is out of range."""
    lab = tiered
    u = lab["phases"]["unclean"]
    assert u["allowed"], (lab["where"], u["answers"])
    f_end = u["f_end"]
    assert u["isolated"]["highest_tiered_offset"] > f_end  # L had uploaded records F never got
    for c in _commits(lab, topic="tiered.unclean"):
        v = _verdict(lab, c["group"], c["topic"], 0)
        if c["kind"] in ("past-div-remote", "past-div-local"):
            assert (v["verdict"], v["divergent_offset"]) == ("LogTruncationException", f_end), (lab["where"], c, v)
        elif c["offset"] >= _bounds(lab, "tiered.unclean", 0)["log_start_offset"]:
            assert v["verdict"] == "OK", (lab["where"], c, v)
    assert u["l_back"]["log_start_offset"] < f_end, u  # F led: the remote tier below the divergence was served
    assert u["l_leads"]["log_start_offset"] == f_end == _bounds(lab, "tiered.unclean", 0)["log_start_offset"], u
    below = [c for c in _commits(lab, topic="tiered.unclean") if c["offset"] < f_end]
    assert below and all(
        _verdict(lab, c["group"], c["topic"], 0)["verdict"] == "OffsetOutOfRangeException" for c in below
    ), below
    # and the remote tier below the divergence point is deleted (L's remote-log-manager, its log start now there):
    # what remains remote is F's lineage from F's end on
    assert u["remote_l_back"] and all(s[0] >= f_end for s in lab["remote_segments"]["tiered.unclean-0"]), (
        u["remote_l_back"],
        lab["remote_segments"]["tiered.unclean-0"],
    )


def test_what_the_brokers_checkpoint_for_a_tiered_partition(tiered):
    """The files the offline audit reads, after the clean stop: ``log-start-offset-checkpoint`` holds the log start
    Kafka answered (not the first local segment, which is the local log start), and the ``leader-epoch-checkpoint``
    is truncated at the log start, not at the local log start (its first entry starts at or below the log start).
    The deleted segments are gone from the log dirs (``log.segment.delete.delay.ms``)."""
    lab = tiered
    for tp, replicas in lab["replicas"].items():
        b = lab["bounds"][tp]
        for broker, r in replicas.items():
            where = (lab["where"], tp, broker, b, r)
            assert r["log_start_offset_checkpoint"] == b["log_start_offset"], where
            assert r["first_segment"] is not None and r["first_segment"] >= b["log_start_offset"], where
            assert r["leader_epoch_checkpoint"] and r["leader_epoch_checkpoint"][0][1] <= b["log_start_offset"], where
    # the leaders' local log start is the first local segment of their replica
    firsts = {tp: {r["first_segment"] for r in reps.values()} for tp, reps in lab["replicas"].items()}
    assert all(lab["bounds"][tp]["local_log_start_offset"] in fs for tp, fs in firsts.items()), (firsts, lab["bounds"])


# ------------------------------------------------------------------ the audit against Kafka
@pytest.mark.parametrize("source", soak.SOURCES)
def test_audit_ran(tiered, source):
    a = tiered["audits"][source]
    assert a["error"] is None, f"the {source} audit raised ({tiered['where']}):\n{a['error']}"
    assert a["exit_code"] in (0, 1) and a["report_html"] and a["validation_result"], a


@pytest.mark.parametrize("source", soak.SOURCES)
def test_audit_agrees_with_kafkas_consumer(tiered, source):
    """Every group-partition Kafka's consumer judged: the audit's verdict agrees (``tests/lab/differential.py``;
    the hot copy's documented difference, a log start not yet checkpointed, compared with the offline audit)."""
    lab = tiered
    out = lab["audits"][source]["out"]
    ref = lab["audits"]["offline"]["out"] if source == "hot" else None
    rows = differential.compare(lab["verdicts"], out, reference=ref)
    assert len(rows) == len(lab["verdicts"]) > 40
    bad = [r for r in rows if not r["agree"]]
    assert not bad, "\n".join(
        [f"{len(bad)} disagreement(s) with Kafka's consumer, {source} audit, {lab['where']}:"]
        + [
            f"  {r['group']} {r['topic']}-{r['partition']}: consumer {r['oracle']}"
            f"{'' if r['divergent_offset'] is None else ' @' + str(r['divergent_offset'])}, audit {r['audit']}: {r['why']}"
            for r in bad
        ]
    )


@pytest.mark.parametrize("source", soak.SOURCES)
def test_bounds_are_what_kafka_answered(tiered, source):
    """``committed_offsets``'s ``log_start_offset`` is the leader's ``EARLIEST`` and ``local_log_start_offset`` its
    ``EARLIEST_LOCAL``, on every judged group-partition of a tiered topic; ``bounds/`` says the same."""
    lab = tiered
    committed = _committed(lab, source)
    wrong = []
    for c in lab["commits"]:
        row = committed.get((c["group"], c["topic"], c["partition"]))
        b = _bounds(lab, c["topic"], c["partition"])
        if row is None:
            wrong.append((c["group"], c["partition"], "no committed_offsets row"))
            continue
        got = (row.get("log_start_offset"), row.get("local_log_start_offset", "<no column>"))
        want = (b["log_start_offset"], b["local_log_start_offset"])
        if got != want:
            wrong.append((c["group"], c["partition"], f"(log_start, local_log_start) {got} != Kafka's {want}"))
    assert not wrong, (source, lab["where"], sorted(set(wrong)))
    bounds = {
        (r["topic"], r["partition"]): r for r in pq.read_table(lab["audits"][source]["out"] / "bounds").to_pylist()
    }
    wrong = []
    for tp, b in lab["bounds"].items():
        t, p = tp.rsplit("-", 1)
        r = bounds.get((t, int(p))) or {}
        got = (r.get("log_start_offset"), r.get("local_log_start_offset", "<no column>"), r.get("log_end_offset"))
        want = (b["log_start_offset"], b["local_log_start_offset"], b["high_watermark"])
        if got != want:
            wrong.append((tp, f"bounds (log_start, local_log_start, log_end) {got} != Kafka's {want}"))
    assert not wrong, (source, lab["where"], wrong)


@pytest.mark.parametrize("source", soak.SOURCES)
def test_resume_tier_is_remote_exactly_between_the_log_start_and_the_local_log_start(tiered, source):
    lab = tiered
    committed = _committed(lab, source)
    wrong = []
    for c in lab["commits"]:
        row = committed.get((c["group"], c["topic"], c["partition"])) or {}
        b = _bounds(lab, c["topic"], c["partition"])
        remote = b["log_start_offset"] <= c["offset"] < b["local_log_start_offset"]
        tier = row.get("resume_tier", "<no column>")
        if (tier == "remote") != remote or (not remote and tier not in ("local", None)):
            wrong.append(
                (
                    c["group"],
                    c["partition"],
                    c["offset"],
                    tier,
                    "remote" if remote else "not remote",
                    b["log_start_offset"],
                    b["local_log_start_offset"],
                )
            )
    assert not wrong, (source, lab["where"], wrong)


# ------------------------------------------------------------------ __remote_log_metadata: our decoder and Kafka's
def _ours(log_dirs) -> list[dict]:
    from audit.formats.remote_log_metadata import decode_remote_log_metadata_segment

    rows = []
    for d in map(Path, log_dirs):
        broker = d.name
        for seg in sorted(d.glob("__remote_log_metadata-*/*.log")):
            part = int(seg.parent.name.rsplit("-", 1)[1])
            for batch in decode_remote_log_metadata_segment(seg.read_bytes(), str(seg), part):
                for r in batch.to_pylist():
                    rows.append({**r, "broker": int(broker.split("-")[1]), "segment_file": seg.name})
    return rows


def test_remote_log_metadata_decoder_matches_kafka_dump_log(tiered):
    """Every record of every replica's ``__remote_log_metadata`` segments, decoded by
    ``audit.formats.remote_log_metadata`` and by Kafka's ``kafka-dump-log --remote-log-metadata-decoder`` (3.9's
    ``kafka.tools.DumpLogSegments`` and 4.x's ``org.apache.kafka.tools.DumpLogSegments`` both have it): the same
    records at the same offsets, field by field (record type, topic, topic id, partition, segment id, start and end
    offsets, broker, state, leader epochs, timestamps, size)."""
    pytest.importorskip("audit.formats.remote_log_metadata")
    lab = tiered
    theirs = dump_remote_log_metadata(lab["version"], lab["cold_copy"])
    ours = _ours(lab["cold_copy"])
    assert theirs and ours, lab["where"]
    assert [r for r in ours if r["kind"] != "record" or r["decode_error"]] == [], lab["where"]
    kinds = Counter(r["type"] for r in theirs)
    # a segment's copy and its deletion (retention, deleteRecords, the deleted topic: Kafka 3.9 and 4.4 delete a
    # deleted topic's remote segments one by one and write no RemotePartitionDeleteMetadata for it)
    assert {"RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate"} <= set(kinds), kinds
    states = Counter(r.get("state") for r in theirs)
    assert {
        "COPY_SEGMENT_STARTED",
        "COPY_SEGMENT_FINISHED",
        "DELETE_SEGMENT_STARTED",
        "DELETE_SEGMENT_FINISHED",
    } <= set(states), states
    by_key = {(r["broker"], r["source_partition"], r["offset"]): r for r in ours}
    assert len(by_key) == len(ours) == len(theirs), (len(by_key), len(ours), len(theirs))
    diffs = []
    for k in theirs:
        o = by_key.get((k["broker"], k["partition"], k["offset"]))
        if o is None:
            diffs.append((k["raw"], "missing"))
            continue
        want = {
            "record_type": k["type"] + "Record",
            "topic": k.get("topic"),
            "topic_id": k.get("topic_id"),
            "partition": k.get("topic_partition"),
            "segment_id": k.get("segment_id"),
            "start_offset": k.get("start_offset"),
            "end_offset": k.get("end_offset"),
            "broker_id": k.get("broker_id"),
            "state_name": k.get("state"),
            "event_timestamp": k.get("event_timestamp_ms"),
            "max_timestamp": k.get("max_timestamp_ms"),
            "segment_size_bytes": k.get("segment_size_in_bytes"),
            "segment_leader_epochs": None
            if k.get("segment_leader_epochs") is None
            else [{"leader_epoch": e, "start_offset": s} for e, s in k["segment_leader_epochs"].items()],
        }
        got = {f: o.get(f) for f in want}
        if got != want:
            diffs.append((k["raw"], {f: (got[f], want[f]) for f in want if got[f] != want[f]}))
    assert not diffs, (lab["where"], len(diffs), diffs[:5])


def test_no_jvm_left_running(tiered):
    assert lab_jvms(tiered["workdir"]) == []
