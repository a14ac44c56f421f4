"""Tiered storage (KIP-405) in the lab: commits in the remote-only range of a partition, judged by Kafka's consumer.

A 3-broker cluster with tiered storage (:class:`~tests.lab.cluster.KafkaCluster` ``tiered=True``: the lab's
``RemoteStorageManager``, ``tests/lab/java/tiered/LabRemoteStorage.java``, over one directory the brokers share, and
Kafka's topic-based ``__remote_log_metadata``). Every topic has ``remote.storage.enable=true``, segments rolled every
:data:`SEGMENT_MS` (``segment.ms``: 4.x refuses ``segment.bytes`` under 1 MiB), ``local.retention.bytes`` of about two
segments, ``retention.ms=-1``: the leader uploads each rolled segment and the brokers then delete it locally, so the
*local log start offset* (Kafka's ``ListOffsets`` ``EARLIEST_LOCAL``) climbs above the *log start offset*
(``EARLIEST``), which stays where the remote tier begins. Records are produced in rounds, one segment per round.

==================  ===============================================================================================
``tiered.keep``     2 partitions. Groups commit (the ``commit`` op, with the epoch Kafka's consumer would commit: the
                    leader epoch of the record before the offset) at the log start, in the middle of the remote-only
                    range, one short of the local log start, exactly at it, in the local range, at the log end and
                    past it; Admin resets (epoch -1) into the remote range and past the end; a consumer group that
                    reads from the earliest offset (fetching from the remote tier) and commits what it consumed.
``tiered.delrec``   Commits across the remote range, then ``deleteRecords`` to an offset inside it: the log start
                    rises, the commits below it are out of range, those above it stay in the remote tier.
``tiered.retention``  Commits at many remote offsets, then ``retention.bytes`` lowered to about half the remote tier:
                    Kafka's remote-log-manager deletes the oldest remote segments and the log start rises.
``tiered.leader``   A clean leader change: the leader stops (controlled shutdown), the next takes records in a new
                    epoch and uploads them; commits in the old epoch's remote range, the new epoch's remote and local
                    ranges, and one with the old epoch past its end; the old leader returns (its follower fetch
                    rebuilds from the remote tier) and a preferred election gives it the partition back: one more
                    epoch, more records, more commits.
``tiered.deleted``  Tiered, then deleted: the brokers delete its remote segments and write the partition's
                    deletion to ``__remote_log_metadata`` (every record type Kafka 3.9/4.x writes there appears).
``tiered.unclean``  RF 2 on ``[L, F]``: F stops, L takes records (acks=1), uploads them and deletes them locally (its
                    local log starts past F's end), groups commit at and past F's end; L is killed, F is elected
                    uncleanly (Admin ``electLeaders(UNCLEAN)``, if Kafka allows it on a tiered topic: the answer is
                    recorded), takes a shorter new lineage, L returns (truncating below its own local log start) and,
                    being the preferred replica, leads again after a preferred election.
==================  ===============================================================================================

Then, with the cluster up and nothing written any more (each partition's bounds stable): Kafka's consumer judges every
group-partition (``verdicts``: resume with ``auto.offset.reset=none``), the leaders' ``EARLIEST`` / ``EARLIEST_LOCAL``
/ ``LATEST_TIERED`` / ``LATEST`` are recorded per partition, ``while_up`` runs (the live audit), a hot copy of the
log dirs is taken; a clean stop, and a cold copy. Nothing here predicts what Kafka does: every expectation of the
tests is what the brokers answered.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import time
from pathlib import Path

from . import kafka_dist
from .client import LabClient
from .cluster import KafkaCluster
from .scenario import Scenario, copy_log_dirs, finish, save

SEGMENT_MS = 150  # segment.ms: a segment per produce round (rounds are SEGMENT_MS + a little apart)
VALUE_SIZE = 100
PER_ROUND = 25  # records per partition per round
ROUNDS = 8
LOCAL_RETENTION_BYTES = 5000  # about two segments of PER_ROUND records of VALUE_SIZE bytes

TOPIC_CONFIGS = {
    "remote.storage.enable": "true",
    "segment.ms": str(SEGMENT_MS),
    "local.retention.bytes": str(LOCAL_RETENTION_BYTES),
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "min.insync.replicas": "1",
}
#: brokers of the tiered lab: segments deleted locally are gone from the log dirs a second later (default a minute);
#: index files preallocated at 64 KiB (default 10 MiB: the hot copy of every active segment's sparse index files
#: would weigh ~1 GB)
CLUSTER_OVERRIDES = {"broker": {"log.segment.delete.delay.ms": 1000, "log.index.size.max.bytes": 65536}}

KEEP, DELREC, RETENTION, LEADER, UNCLEAN = (
    "tiered.keep",
    "tiered.delrec",
    "tiered.retention",
    "tiered.leader",
    "tiered.unclean",
)
DELETED = "tiered.deleted"
TOPICS = (KEEP, DELREC, RETENTION, LEADER, UNCLEAN)  # judged, and their bounds recorded
L_UNCLEAN, F_UNCLEAN = 2, 3  # tiered.unclean's leader to be lost and follower left behind
LEADER_REPLICAS = [1, 2, 3]  # tiered.leader: broker 1 leads first, stops, returns, leads again


class TieredLab:
    """State of one run: the :class:`Scenario` (cluster, client, steps, judged, verdicts) and what it recorded."""

    def __init__(self, version: str, workdir: Path, seed: int = 1):
        self.version = version
        self.workdir = Path(workdir)
        self.rng = random.Random(f"tiered/{seed}/{version}")
        self.sc = Scenario(seed, version, self.workdir, brokers=3)
        self.commits: list[dict] = []  # {group, topic, partition, offset, epoch (-1: none), kind, phase}
        self.phases: dict = {}  # what each phase saw and did
        self.bounds: dict = {}  # (topic, partition) -> tiered_offsets row, final, with the cluster up
        self.observed: dict = {}  # version behaviours (unclean election, checkpoints, ...)

    # ------------------------------------------------------------ helpers
    def step(self, name, **info):
        self.sc.step(name, **info)

    def parts(self, topic) -> list[list]:
        return [[topic, p] for p in range(2 if topic == KEEP else 1)]

    def all_parts(self) -> list[list]:
        return [tp for t in TOPICS for tp in self.parts(t)]

    def tiered_offsets(self, parts, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            res, err = self.sc.client.try_call("tiered_offsets", partitions=parts)
            if err is None:
                return {(r["topic"], r["partition"]): r for r in res}
            if time.monotonic() > deadline:
                raise TimeoutError(f"tiered_offsets {parts}: {err}")
            time.sleep(0.5)

    def wait_tiered(self, what: str, parts, cond=None, timeout: float = 90, settle: int = 3) -> dict:
        """Until every partition of ``parts`` has a local log start above its log start (``cond(row)`` too, if
        given) and the leaders' answers stayed the same ``settle`` polls in a row (0.5 s apart)."""
        cond = cond or (lambda r: True)
        deadline = time.monotonic() + timeout
        last, same = None, 0
        while True:
            state = self.tiered_offsets(parts)
            ok = all(r["local_log_start_offset"] > r["log_start_offset"] and cond(r) for r in state.values())
            same = same + 1 if (ok and state == last) else 0
            if ok and same >= settle - 1:
                self.step("tiered", what=what, state=list(state.values()))
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not tiered in {timeout}s: {state}")
            last = state
            time.sleep(0.5)

    def wait_stable(self, what: str, parts, timeout: float = 60, settle: int = 4) -> dict:
        """Until the leaders' tiered offsets of ``parts`` stayed the same ``settle`` polls in a row."""
        deadline = time.monotonic() + timeout
        last, same = None, 0
        while True:
            state = self.tiered_offsets(parts)
            same = same + 1 if state == last else 0
            if same >= settle - 1:
                self.step("stable", what=what)
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: still moving after {timeout}s: {state}")
            last = state
            time.sleep(0.5)

    def produce_rounds(self, parts, rounds: int = ROUNDS, count: int = PER_ROUND, acks: str = "all") -> dict:
        """``rounds`` rounds of ``count`` records to each partition, a segment roll apart."""
        first, last = {}, {}
        for i in range(rounds):
            if i:
                time.sleep(SEGMENT_MS / 1000 + 0.06)
            for t, p in parts:
                r = self.sc.client.call("produce", topic=t, partition=p, count=count, acks=acks, value_size=VALUE_SIZE)
                if r["failed"]:
                    raise RuntimeError(f"produce to {t}-{p}: {r}")
                first.setdefault((t, p), r["first"])
                last[(t, p)] = r["last"]
        self.step(
            "produce rounds",
            parts=parts,
            rounds=rounds,
            count=count,
            acks=acks,
            offsets={f"{t}-{p}": [first[(t, p)], last[(t, p)]] for t, p in parts},
        )
        return {k: (first[k], last[k]) for k in first}

    def record_epochs(self, topic) -> dict:
        """Kafka's consumer reading the topic from its log start (the remote tier included): ``{partition:
        {offset: leader epoch}}``."""
        recs = self.sc.client.call("read_topic", topic=topic, epochs=True)
        return {int(p): {o: e for o, e in rows} for p, rows in recs.items()}

    def commit(self, group, topic, partition, offset, kind, phase, epochs=None, admin=False):
        """A commit as Kafka's consumer would make it: the leader epoch of the record before ``offset`` (at the
        log start: of the record there; past the end: of the last record), from ``epochs`` (:meth:`record_epochs`);
        ``admin``: ``alterConsumerGroupOffsets``, no epoch (-1)."""
        epoch = None
        if not admin:
            known = epochs[partition]
            below = [o for o in known if o < offset]
            epoch = known[max(below)] if below else known[min(known)]
        offsets = [{"topic": topic, "partition": partition, "offset": offset, "epoch": epoch}]
        if admin:
            self.sc.call("alter_offsets", group=group, offsets=offsets)
        else:
            self.sc.call("commit", group=group, offsets=offsets)
        self.sc.judge(group, topic, [partition])
        self.commits.append(
            {
                "group": group,
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "epoch": -1 if admin else epoch,
                "kind": kind,
                "phase": phase,
            }
        )

    # ------------------------------------------------------------ phases
    def setup(self):
        sc = self.sc
        sc.call("create_topic", topic=KEEP, partitions=2, rf=3, configs=TOPIC_CONFIGS)
        for t in (DELREC, RETENTION):
            sc.call("create_topic", topic=t, partitions=1, rf=3, configs=TOPIC_CONFIGS)
        sc.call("create_topic", topic=LEADER, assignments={"0": LEADER_REPLICAS}, configs=TOPIC_CONFIGS)
        sc.call("create_topic", topic=UNCLEAN, assignments={"0": [L_UNCLEAN, F_UNCLEAN]}, configs=TOPIC_CONFIGS)
        sc.call("create_topic", topic=DELETED, partitions=1, rf=2, configs=TOPIC_CONFIGS)
        sc.wait_for("leaders", lambda s: s["leader"] >= 0 and set(s["isr"]) == set(s["replicas"]), [*TOPICS, DELETED])
        parts = [*self.all_parts(), [DELETED, 0]]
        self.produce_rounds(parts)
        self.phases["setup"] = self.wait_tiered("setup", parts)

    def delete_topic(self):
        """``tiered.deleted`` deleted: its remote segments go (the lab's storage folder empties) and
        ``__remote_log_metadata`` gets the partition's deletion."""
        sc = self.sc
        before = remote_segments(sc.cluster.remote_dir).get(f"{DELETED}-0", [])
        sc.call("delete_topic", topic=DELETED)
        deadline = time.monotonic() + 60
        while remote_segments(sc.cluster.remote_dir).get(f"{DELETED}-0"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{DELETED}: remote segments still there: {remote_segments(sc.cluster.remote_dir)}")
            time.sleep(0.5)
        self.phases["deleted"] = {"remote_segments_before": before}

    def keep(self):
        r, t = self.rng, KEEP
        state = self.tiered_offsets(self.parts(t))
        epochs = self.record_epochs(t)
        kinds: dict = {}
        for p in (0, 1):
            b = state[(t, p)]
            ls, lls, end = b["log_start_offset"], b["local_log_start_offset"], b["high_watermark"]
            kinds[p] = {
                "remote-start": ls,
                "remote-mid": r.randint(ls + 1, lls - 2),
                "remote-last": lls - 1,
                "local-start": lls,
                "local-mid": r.randint(lls + 1, end - 1),
                "at-end": end,
                "past-end": end + r.randint(1, 20),
            }
        for kind in kinds[0]:
            for p in (0, 1):
                self.commit(f"{t}.{kind}", t, p, kinds[p][kind], kind, "keep", epochs)
        for p in (0, 1):
            b = state[(t, p)]
            self.commit(
                f"{t}.admin-remote",
                t,
                p,
                r.randint(b["log_start_offset"] + 1, b["local_log_start_offset"] - 1),
                "admin-remote",
                "keep",
                admin=True,
            )
            self.commit(
                f"{t}.admin-past-end",
                t,
                p,
                b["high_watermark"] + r.randint(1, 20),
                "admin-past-end",
                "keep",
                admin=True,
            )
        # a consumer that reads from the earliest offset (the remote tier) and commits what it consumed
        res = self.sc.call(
            "consume_commit", group=f"{t}.consumed", topics=[t], max_records=r.randint(30, 90), max_poll=7
        )
        self.sc.judge(f"{t}.consumed", t, [0, 1])
        for c in res["committed"]:
            self.commits.append(
                {
                    "group": f"{t}.consumed",
                    "topic": t,
                    "partition": c["partition"],
                    "offset": c["offset"],
                    "epoch": c["epoch"],
                    "kind": "consumed",
                    "phase": "keep",
                }
            )
        self.phases["keep"] = {"bounds": list(state.values()), "offsets": kinds, "consumed": res}

    def delete_records(self):
        r, t = self.rng, DELREC
        b = self.tiered_offsets(self.parts(t))[(t, 0)]
        ls, lls, end = b["log_start_offset"], b["local_log_start_offset"], b["high_watermark"]
        assert lls - ls >= 8, b
        cut = r.randint(ls + 3, lls - 4)
        epochs = self.record_epochs(t)
        offsets = {
            "below-cut-start": ls,
            "below-cut": r.randint(ls + 1, cut - 1),
            "at-cut": cut,
            "above-cut-remote": r.randint(cut + 1, lls - 1),
            "local-start": lls,
            "local": r.randint(lls + 1, end),
        }
        for kind, off in offsets.items():
            self.commit(f"{t}.{kind}", t, 0, off, kind, "delete_records", epochs)
        self.sc.call("delete_records", topic=t, partition=0, before=cut)
        state = self.wait_tiered("after deleteRecords", self.parts(t), lambda x: x["log_start_offset"] == cut)
        self.phases["delete_records"] = {"before": b, "cut": cut, "offsets": offsets, "after": state[(t, 0)]}

    def _remote_bytes(self, topic, partition) -> int:
        """Bytes of the partition's segments in the lab's remote storage (its folders ``<topic>-<p>-<id>``)."""
        root = self.sc.cluster.remote_dir
        return sum(f.stat().st_size for d in root.glob(f"{topic}-{partition}-*") for f in d.glob("*/segment.log"))

    def retention(self):
        r, t = self.rng, RETENTION
        b = self.tiered_offsets(self.parts(t))[(t, 0)]
        ls, lls, end = b["log_start_offset"], b["local_log_start_offset"], b["high_watermark"]
        epochs = self.record_epochs(t)
        # a commit every few offsets across the remote tier, whatever the retention will take
        step = max(1, (lls - ls) // 7)
        offsets = {f"remote-{i}": o for i, o in enumerate(range(ls, lls, step))}
        offsets["remote-last"] = lls - 1
        offsets["local-start"] = lls
        offsets["local"] = r.randint(lls + 1, end)
        for kind, off in offsets.items():
            self.commit(f"{t}.{kind}", t, 0, off, kind, "retention", epochs)
        remote = self._remote_bytes(t, 0)
        target = max(LOCAL_RETENTION_BYTES, int(remote * 0.55))
        self.sc.call("alter_topic_config", topic=t, configs={"retention.bytes": str(target)})
        state = self.wait_tiered("after remote retention", self.parts(t), lambda x: x["log_start_offset"] > ls)
        self.phases["retention"] = {
            "before": b,
            "remote_bytes": remote,
            "retention_bytes": target,
            "offsets": offsets,
            "after": state[(t, 0)],
        }

    def leader_change(self):
        r, t, sc = self.rng, LEADER, self.sc
        first = LEADER_REPLICAS[0]
        before = self.tiered_offsets(self.parts(t))[(t, 0)]
        e0 = before["leader_epoch"]
        epochs = self.record_epochs(t)
        self.commit(
            f"{t}.old-remote",
            t,
            0,
            r.randint(before["log_start_offset"] + 1, before["local_log_start_offset"] - 1),
            "old-remote",
            "leader",
            epochs,
        )
        sc.cluster.stop_node(first)
        sc.step("stop leader", broker=first, topic=t)
        sc.wait_for("a new leader", lambda s: s["leader"] not in (-1, first), [t])
        new_first = self.produce_rounds(self.parts(t), rounds=6)[(t, 0)][0]
        mid = self.wait_tiered(
            "new leader uploaded", self.parts(t), lambda x: x["local_log_start_offset"] > new_first + PER_ROUND
        )[(t, 0)]
        e1 = mid["leader_epoch"]
        epochs = self.record_epochs(t)
        assert epochs[0][new_first] == e1 > e0, (epochs[0].get(new_first), e0, e1)
        self.commit(
            f"{t}.old-epoch-remote",
            t,
            0,
            r.randint(before["log_start_offset"] + 1, new_first),
            "old-epoch-remote",
            "leader",
            epochs,
        )
        self.commit(
            f"{t}.new-epoch-remote",
            t,
            0,
            r.randint(new_first + 1, mid["local_log_start_offset"] - 1),
            "new-epoch-remote",
            "leader",
            epochs,
        )
        self.commit(
            f"{t}.new-epoch-local",
            t,
            0,
            r.randint(mid["local_log_start_offset"], mid["high_watermark"]),
            "new-epoch-local",
            "leader",
            epochs,
        )
        # the old epoch with an offset past its end (a stale commit): Kafka's consumer's epoch validation decides
        stale = r.randint(new_first + 1, mid["high_watermark"])
        self.sc.call(
            "commit", group=f"{t}.stale-epoch", offsets=[{"topic": t, "partition": 0, "offset": stale, "epoch": e0}]
        )
        self.sc.judge(f"{t}.stale-epoch", t, [0])
        self.commits.append(
            {
                "group": f"{t}.stale-epoch",
                "topic": t,
                "partition": 0,
                "offset": stale,
                "epoch": e0,
                "kind": "stale-epoch",
                "phase": "leader",
            }
        )
        sc.cluster.start_node(first)
        sc.step("start", broker=first)
        sc.wait_for("old leader back in sync", lambda s: set(s["isr"]) == set(s["replicas"]), [t], timeout=90)
        res = sc.call("elect", type="preferred", partitions=[[t, 0]])
        sc.wait_for("preferred leader", lambda s: s["leader"] == first, [t])
        third_first = self.produce_rounds(self.parts(t), rounds=4)[(t, 0)][0]
        after = self.wait_tiered(
            "preferred leader uploaded", self.parts(t), lambda x: x["local_log_start_offset"] > third_first
        )[(t, 0)]
        epochs = self.record_epochs(t)
        self.commit(
            f"{t}.after-preferred-remote",
            t,
            0,
            r.randint(third_first, after["local_log_start_offset"] - 1),
            "after-preferred-remote",
            "leader",
            epochs,
        )
        self.commit(
            f"{t}.after-preferred-local", t, 0, after["high_watermark"], "after-preferred-local", "leader", epochs
        )
        self.phases["leader"] = {
            "before": before,
            "mid": mid,
            "after": after,
            "new_epoch_first": new_first,
            "third_epoch_first": third_first,
            "epochs": [e0, e1, after["leader_epoch"]],
            "elect": res,
        }

    def unclean(self):
        r, t, sc = self.rng, UNCLEAN, self.sc
        L, F = L_UNCLEAN, F_UNCLEAN
        base = self.tiered_offsets(self.parts(t))[(t, 0)]
        epochs = self.record_epochs(t)
        self.commit(
            f"{t}.remote-before",
            t,
            0,
            r.randint(base["log_start_offset"] + 1, base["local_log_start_offset"] - 1),
            "remote-before",
            "unclean",
            epochs,
        )
        sc.cluster.stop_node(F)
        sc.step("stop follower", broker=F, topic=t)
        sc.wait_for("F out of ISR", lambda s: F not in s["isr"] and s["leader"] == L, [t])
        f_end = base["high_watermark"]
        self.produce_rounds(self.parts(t), rounds=5, acks="1")
        # L uploads records F never got: the remote tier holds part of the lineage that the election will drop
        iso = self.wait_tiered(
            "L uploaded past F's end",
            self.parts(t),
            # and deleted it locally: L's local log starts past F's end, the lost records past it are remote only
            lambda x: x["highest_tiered_offset"] > f_end + PER_ROUND and x["local_log_start_offset"] > f_end,
        )[(t, 0)]
        epochs = self.record_epochs(t)
        self.commit(f"{t}.at-divergence", t, 0, f_end, "at-divergence", "unclean", epochs)
        self.commit(
            f"{t}.past-div-remote",
            t,
            0,
            r.randint(f_end + 1, min(iso["local_log_start_offset"], iso["highest_tiered_offset"])),
            "past-div-remote",
            "unclean",
            epochs,
        )
        self.commit(f"{t}.past-div-local", t, 0, iso["high_watermark"], "past-div-local", "unclean", epochs)
        remote_before = sorted(p.name for p in sc.cluster.remote_dir.glob(f"{t}-0-*/*") if not p.name.startswith("."))
        sc.cluster.kill(L)
        sc.step("kill leader", broker=L, topic=t)
        sc.wait_for("offline", lambda s: s["leader"] == -1, [t])
        sc.cluster.start_node(F)
        sc.step("start", broker=F)
        deadline = time.monotonic() + 30
        tries = []
        while True:
            res, err = sc.client.try_call("elect", type="unclean", partitions=[[t, 0]])
            tries.append(err or res)
            if err is None and all(x["error"] is None or "ElectionNotNeeded" in x["error"] for x in res):
                allowed = True
                break
            if time.monotonic() > deadline:
                allowed = False
                break
            time.sleep(1)
        sc.step("unclean election", allowed=allowed, tries=tries[-3:], attempts=len(tries))
        info = {
            "base": base,
            "f_end": f_end,
            "isolated": iso,
            "allowed": allowed,
            "answers": tries[:2] + tries[-2:],
            "remote_before": remote_before,
        }
        if allowed:
            sc.wait_for("F leads uncleanly", lambda s: s["leader"] == F, [t])
            self.produce_rounds(self.parts(t), rounds=2, count=PER_ROUND // 2, acks="1")
            info["new_lineage"] = self.tiered_offsets(self.parts(t))[(t, 0)]
            res = sc.call("consume_commit", group=f"{t}.new-lineage", topics=[t])
            sc.judge(f"{t}.new-lineage", t, [0])
            for c in res["committed"]:
                self.commits.append(
                    {
                        "group": f"{t}.new-lineage",
                        "topic": t,
                        "partition": 0,
                        "offset": c["offset"],
                        "epoch": c["epoch"],
                        "kind": "new-lineage",
                        "phase": "unclean",
                    }
                )
        sc.cluster.start_node(L)
        sc.step("start", broker=L)
        if allowed:
            sc.wait_for("L truncated and back in ISR", lambda s: L in s["isr"], [t], timeout=90)
            info["l_back"] = self.wait_stable("L back, F leads", self.parts(t))[(t, 0)]
            info["remote_l_back"] = remote_segments(sc.cluster.remote_dir).get(f"{t}-0", [])
            # L is the preferred replica: a preferred election (auto.leader.rebalance would make it too) gives it
            # the partition back, with the log it rebuilt after its truncation
            info["preferred"] = sc.call("elect", type="preferred", partitions=[[t, 0]])
            sc.wait_for("L leads again", lambda s: s["leader"] == L, [t])
            info["l_leads"] = self.wait_stable("L leads again", self.parts(t))[(t, 0)]
        else:
            sc.wait_for("L leads again", lambda s: s["leader"] >= 0, [t], timeout=90)
        info["remote_after"] = sorted(
            p.name for p in sc.cluster.remote_dir.glob(f"{t}-0-*/*") if not p.name.startswith(".")
        )
        info["truncations"] = truncation_lines(sc.cluster, t)
        self.phases["unclean"] = info
        self.observed["unclean_election_allowed"] = allowed

    # ------------------------------------------------------------ the end
    def settle(self):
        from .scenario import wait_replicated

        wait_replicated(self.sc, "before the verdicts")
        self.bounds = self.wait_stable("final bounds", self.all_parts())
        self.step("final bounds", bounds=list(self.bounds.values()))


TRUNCATING = re.compile(r"Truncat\w* [^\n]*")


def truncation_lines(cluster, topic: str) -> list[str]:
    """The brokers' log lines that tell a truncation of ``topic`` (follower truncation, divergence, tiered
    rebuilds), at most 20."""
    out = []
    for node in cluster.broker_nodes():
        if node.log_file.exists():
            for line in node.log_file.read_text(errors="replace").splitlines():
                if f"{topic}-0" in line and ("runcat" in line or "remote" in line.lower() and "uild" in line):
                    out.append(f"broker {node.node_id}: {line[line.find('] ') + 2 :][:400]}")
    return out[:20]


def _broker_of(log_dir: Path) -> int | None:
    """The broker id of a lab log dir (``.../broker-N/data``) or of its copy (``.../broker-N``)."""
    for part in (log_dir.name, log_dir.parent.name):
        if part.startswith("broker-"):
            return int(part.split("-")[1])
    return None


def replica_files(log_dirs) -> dict:
    """Per tiered partition and broker: the first local segment's base offset (what the log dir starts at), the
    ``leader-epoch-checkpoint`` entries and the ``log-start-offset-checkpoint`` / ``recovery-point`` entries."""
    out: dict = {}
    for d in map(Path, log_dirs):
        b = _broker_of(d)
        if b is None:
            continue
        ckpt = {}
        for name in ("log-start-offset-checkpoint", "replication-offset-checkpoint"):
            f = d / name
            rows = f.read_text().split("\n")[2:] if f.exists() else []
            ckpt[name] = {tuple(x.split()[:2]): int(x.split()[2]) for x in rows if len(x.split()) == 3}
        for pd in d.glob("tiered.*-*"):
            topic, p = pd.name.rsplit("-", 1)
            segs = sorted(int(f.stem) for f in pd.glob("*.log"))
            lec = pd / "leader-epoch-checkpoint"
            entries = (
                [list(map(int, x.split())) for x in lec.read_text().split("\n")[2:] if x.strip()]
                if lec.exists()
                else None
            )
            out.setdefault(f"{topic}-{p}", {})[b] = {
                "first_segment": segs[0] if segs else None,
                "segments": len(segs),
                "leader_epoch_checkpoint": entries,
                "log_start_offset_checkpoint": ckpt["log-start-offset-checkpoint"].get((topic, p)),
                "high_watermark_checkpoint": ckpt["replication-offset-checkpoint"].get((topic, p)),
            }
    return out


def remote_segments(remote_dir: Path) -> dict:
    """The lab's remote storage: ``{"<topic>-<p>": [[start, end, segment id], ...]}`` sorted."""
    out: dict = {}
    for d in Path(remote_dir).glob("*-*-*"):
        m = re.match(r"(.+)-(\d+)-(.{22})$", d.name)
        if not m:
            continue
        for s in d.iterdir():
            if s.name.startswith("."):
                continue
            a, b, sid = s.name.split("-", 2)
            out.setdefault(f"{m.group(1)}-{m.group(2)}", []).append([int(a), int(b), sid])
    return {k: sorted(v) for k, v in sorted(out.items())}


# ------------------------------------------------------------ Kafka's decoder of __remote_log_metadata
DUMP_PAYLOAD = re.compile(r"^\| offset: (\d+) .*? payload: (\w+)\{(.*)\}\s*$", re.M)


def dump_remote_log_metadata(version: str, log_dirs) -> list[dict]:
    """Every record of the ``__remote_log_metadata`` segments under ``log_dirs`` as Kafka's ``kafka-dump-log
    --remote-log-metadata-decoder`` prints it (``kafka.tools.DumpLogSegments`` in 3.9, ``org.apache.kafka.tools.
    DumpLogSegments`` in 4.x; both have the option): ``{"broker", "partition", "offset", "type"
    (RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate, RemotePartitionDeleteMetadata, ...), "topic_id",
    "topic", "topic_partition", "segment_id", "start_offset", "end_offset", "state", "broker_id",
    "segment_leader_epochs" ({epoch: start offset}), "event_timestamp_ms", "max_timestamp_ms",
    "segment_size_in_bytes", "raw"}`` (fields a record type lacks are absent)."""
    from .streams_episode import _dump_log_segments

    segments = sorted(p for d in log_dirs for p in Path(d).glob("__remote_log_metadata-*/*.log"))
    if not segments:
        return []
    cp, main = _dump_log_segments(version)
    proc = subprocess.run(
        [
            kafka_dist.java(),
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            cp,
            main,
            "--remote-log-metadata-decoder",
            "--print-data-log",
            "--files",
            ",".join(map(str, segments)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"DumpLogSegments failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    out = []
    chunks = re.split(r"^Dumping (\S+)$", proc.stdout, flags=re.M)
    for path, text in zip(chunks[1::2], chunks[2::2]):
        p = Path(path)
        broker = _broker_of(p.parent.parent)
        partition = int(p.parent.name.rsplit("-", 1)[1])
        for m in DUMP_PAYLOAD.finditer(text):
            out.append(
                {
                    "broker": broker,
                    "partition": partition,
                    "offset": int(m.group(1)),
                    "type": m.group(2),
                    **parse_metadata_payload(m.group(3)),
                    "raw": m.group(2) + "{" + m.group(3) + "}",
                }
            )
    return out


def parse_metadata_payload(body: str) -> dict:
    """The fields of a ``RemoteLogSegmentMetadata{...}``-style ``toString`` (see :func:`dump_remote_log_metadata`)."""
    res: dict = {}
    m = re.search(r"topic(?:Id)?Partition=([A-Za-z0-9_-]{22}):(.+?)-(\d+)[,}]", body)
    if m:
        res.update(topic_id=m.group(1), topic=m.group(2), topic_partition=int(m.group(3)))
    m = re.search(r"RemoteLogSegmentId\{topicIdPartition=[^,]+, id=([A-Za-z0-9_-]{22})\}", body)
    if m:
        res["segment_id"] = m.group(1)
    for key, name in (
        ("startOffset", "start_offset"),
        ("endOffset", "end_offset"),
        ("brokerId", "broker_id"),
        ("maxTimestampMs", "max_timestamp_ms"),
        ("eventTimestampMs", "event_timestamp_ms"),
        ("segmentSizeInBytes", "segment_size_in_bytes"),
    ):
        m = re.search(rf"\b{key}=(-?\d+)", body)
        if m:
            res[name] = int(m.group(1))
    m = re.search(r"\bstate=(\w+)", body)
    if m:
        res["state"] = m.group(1)
    m = re.search(r"segmentLeaderEpochs=\{([^}]*)\}", body)
    if m:
        res["segment_leader_epochs"] = {
            int(a): int(b) for a, b in (kv.split("=") for kv in m.group(1).split(", ") if kv)
        }
    return res


# ------------------------------------------------------------ the run
def run_tiered_lab(version: str, workdir, seed: int = 1, while_up=None) -> dict:
    """The tiered scenario on a fresh Kafka ``version`` cluster (module docstring), Kafka's verdicts with the cluster
    up, ``while_up(lab)`` (the live audit), a hot copy, a clean stop and a cold copy. Returns ``{"version",
    "verdicts", "commits", "bounds": {"topic-p": tiered_offsets row}, "phases", "observed", "hot_copy", "cold_copy",
    "log_dirs", "replicas" (:func:`replica_files` of the cold copy), "remote_segments", "while_up", "seconds"}``,
    written to ``<workdir>/tiered.json`` too."""
    t0 = time.monotonic()
    workdir = Path(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    lab = TieredLab(version, workdir, seed)
    sc = lab.sc
    sc.cluster = KafkaCluster(version, workdir / "cluster", brokers=3, tiered=True, overrides=CLUSTER_OVERRIDES)
    timings = {}
    try:
        sc.cluster.start()
        sc.client = LabClient(version, sc.cluster.bootstrap, log=workdir / "lab-client.log")
        sc.step("started", version=version, tiered=True)
        for phase in (
            "setup",
            "keep",
            "delete_records",
            "retention",
            "delete_topic",
            "leader_change",
            "unclean",
            "settle",
        ):
            t = time.monotonic()
            getattr(lab, phase)()
            timings[phase] = round(time.monotonic() - t, 1)
        t = time.monotonic()
        sc.verdicts = sc.client.call("verdicts", group_partitions=sc.judged, timeout_ms=8000)
        sc.step("verdicts", count=len(sc.verdicts))
        timings["verdicts"] = round(time.monotonic() - t, 1)
        again = lab.tiered_offsets(lab.all_parts())
        lab.observed["bounds_moved_during_verdicts"] = [
            [k, lab.bounds[k], v] for k, v in again.items() if v != lab.bounds[k]
        ]
        time.sleep(1.5)  # one log-start-offset checkpoint interval
        hot = copy_log_dirs(sc.cluster, workdir / "hot-copy")
        sc.step("hot copy")
        t = time.monotonic()
        up = while_up(lab) if while_up is not None else None
        timings["while_up"] = round(time.monotonic() - t, 1)
    except BaseException:
        save(sc)
        (workdir / "tiered-partial.json").write_text(
            json.dumps(_jsonable({"commits": lab.commits, "phases": lab.phases}), indent=1, default=str)
        )
        finish(sc, keep_logs=True)
        raise
    finish(sc)
    cold = copy_log_dirs(sc.cluster, workdir / "cold-copy")
    save(sc)
    res = {
        "version": version,
        "verdicts": sc.verdicts,
        "judged": sc.judged,
        "commits": lab.commits,
        "bounds": {f"{t}-{p}": r for (t, p), r in lab.bounds.items()},
        "phases": lab.phases,
        "observed": lab.observed,
        "hot_copy": hot,
        "cold_copy": cold,
        "log_dirs": sc.cluster.log_dirs(),
        "remote_dir": sc.cluster.remote_dir,
        "replicas": replica_files(cold),
        "remote_segments": remote_segments(sc.cluster.remote_dir),
        "while_up": up,
        "timings": timings,
        "seconds": round(time.monotonic() - t0, 1),
        "workdir": workdir,
    }
    (workdir / "tiered.json").write_text(
        json.dumps(_jsonable({k: v for k, v in res.items() if k != "while_up"}), indent=1, default=str)
    )
    return res


def _jsonable(obj):
    if isinstance(obj, dict):
        return {(f"{k[0]}-{k[1]}" if isinstance(k, tuple) else str(k)): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj
