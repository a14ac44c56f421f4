"""Share groups (KIP-932) in the lab: episodes whose groups are ``KafkaShareConsumer`` members, a record of every
record each group was given, and the oracle computed from that record and the partitions' final logs.

Kafka is the judge: each share group polls through ``LabClient`` (``share_open`` / ``share_poll`` /
``share_close``, explicit acknowledgement, group config ``share.auto.offset.reset=earliest``) and every delivery
Kafka made is kept in ``Scenario.share_deliveries`` (saved in ``scenario.json`` as ``share_deliveries``): group,
handle, phase, topic, topic id, partition, offset, leader epoch, delivery count, the acknowledgement given
(``accept`` / ``release`` / ``reject`` / ``hold``), the commit's error if it failed, ``late`` for a held record
acknowledged at a later ``share_poll``. Nothing here predicts what Kafka does; :func:`oracle` only counts.

==========================  ============================================================================================
``share_unclean``           RF 2 on ``[L, F]``, min.insync.replicas=1: records while both are in sync (F's end ``kept``),
                            F down, more records with acks=1 (lost). Share groups when L dies: ``past`` accepted all L
                            had, ``at-divergence`` accepted exactly ``[0, kept)``, ``gap-release`` and ``gap-hold``
                            accepted a range past F's end with records before it released, or held (acquired, not
                            acknowledged, the member staying across the election), ``early`` accepted a few records.
                            F is elected uncleanly and takes fewer new records than L had past ``kept`` (``past``
                            polls then); once L is back more are produced, past where ``past`` stood, and every group
                            drains the partition (``gap-hold`` acknowledging its held records first).
``share_delete_records``    ``behind`` (a few records accepted) and ``straddle`` (records below and above the cut accepted,
                            a range across it released), then ``deleteRecords`` past both start offsets, more records,
                            and both drain.
``share_recreate``          a group with state on the topic (a few accepted, a range released), the topic deleted and
                            created again under the same name (a new topic id), new records, the group drains.
==========================  ============================================================================================

On Kafka 3.x the episodes do nothing (no share groups). :func:`run_share_lab` runs them on a fresh cluster through
:func:`tests.lab.scenario.run_scenario` (with the unclean election, the closing rolling restart and a hot copy),
drains every group once more after the restart, reads each partition's final log (``read_topic`` with leader
epochs) and what the brokers report (``share_offsets``: Admin ``listShareGroupOffsets``), stops the cluster cleanly
and returns the log dirs, ``scenario.json`` and the oracle.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

from . import kafka_dist
from .scenario import EPISODES, Episode, Scenario, Unclean, finish, run_scenario, save

KINDS = ("share_unclean", "share_delete_records", "share_recreate")

#: Broker configs of a share-group lab cluster: three state partitions (default 50), small segments, writes that
#: need one in-sync replica (the unclean flow leaves one broker up for a moment), quick heartbeats and retries.
CLUSTER_OVERRIDES = {
    "broker": {
        "share.coordinator.state.topic.num.partitions": 3,
        "share.coordinator.state.topic.replication.factor": 3,
        "share.coordinator.state.topic.min.isr": 1,
        "share.coordinator.state.topic.segment.bytes": 1 << 20,
        "group.share.min.heartbeat.interval.ms": 1000,
        "group.share.heartbeat.interval.ms": 1000,
        "group.share.initialize.retry.interval.ms": 2000,
    }
}

FIRST_POLL_MS = 15000  # a new member's first records: join, assignment, share-partition initialisation
DRAIN_WAIT_MS = 10000  # a drain that gets nothing at all gives up after this


def _ranges(offsets) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    out, run = [], None
    for o in sorted(set(offsets)):
        if run and o == run[1] + 1:
            run[1] = o
        else:
            run = [o, o]
            out.append(run)
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in out)


def share_poll(sc: Scenario, name: str, phase: str, topic_id: str | None, **args) -> list:
    """``share_poll`` on handle ``name`` (``<group>@<n>``); every delivery and late acknowledgement goes into
    ``sc.share_deliveries``, a summary into the schedule. Returns the deliveries."""
    res = sc.client.call("share_poll", name=name, **args)
    group = name.rsplit("@", 1)[0]
    t = round(time.time() - sc.t0, 3)
    got = res["late"] + res["records"]
    for d in got:
        sc.share_deliveries.append({"group": group, "handle": name, "phase": phase, "t": t, "topic_id": topic_id, **d})
    by: dict = {}
    for d in got:
        key = f"{'late-' if d.get('late') else ''}{d['ack']}@e{d['leader_epoch']}/d{d['delivery_count']}"
        by.setdefault(key, []).append(d["offset"])
    sc.step(
        "share_poll",
        name=name,
        acks=args.get("acks"),
        delivered=len(res["records"]),
        by_ack={k: _ranges(v) for k, v in by.items()},
        commit_errors=res["commit_errors"],
        held=res["held"],
    )
    return res["records"]


class ShareEpisode(Episode):
    """Helpers of the share episodes: handles, polls recorded into ``sc.share_deliveries``, drains."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.on = kafka_dist.major(self.sc.version) >= 4
        self.phase = "setup"
        self.topic_id = None
        self._n = 0

    def create(self, **args):
        self.sc.call("create_topic", topic=self.topic, **args)
        self.topic_id = self.described_id()

    def described_id(self, other_than: str | None = None, timeout: float = 30) -> str:
        """The topic's id once the brokers' metadata has it (and it is not ``other_than``) with a leader."""
        deadline = time.monotonic() + timeout
        while True:
            state, err = self.sc.client.try_call("describe", topics=[self.topic])
            if err is None and state[0]["topic_id"] != other_than and state[0]["leader"] >= 0:
                return state[0]["topic_id"]
            if time.monotonic() > deadline:
                raise TimeoutError(err or state)
            time.sleep(0.3)

    def open(self, suffix: str, **config) -> str:
        self._n += 1
        name = f"{self.g(suffix)}@{self._n}"
        self.sc.call("share_open", name=name, group=self.g(suffix), topics=[self.topic], config=config)
        return name

    def poll(self, name: str, **args) -> list:
        return share_poll(self.sc, name, self.phase, self.topic_id, **args)

    def close(self, name: str) -> dict:
        res = self.sc.client.call("share_close", name=name)
        self.sc.step("share_close", name=name, held=res["held"], error=res["error"], logged=len(res["log"]))
        return res

    def share_offsets(self, suffix: str) -> list:
        res = self.sc.client.call("share_offsets", group=self.g(suffix))
        self.sc.step("share_offsets", group=self.g(suffix), result=res)
        return res

    def take(self, suffix: str, accept: int, **poll) -> None:
        """A new member accepts the first ``accept`` records (``share.acquire.mode=record_limit``: it acquires no
        more than it is given) and leaves."""
        name = self.open(suffix, **{"max.poll.records": accept, "share.acquire.mode": "record_limit"})
        self.poll(name, max_records=accept, min_ms=FIRST_POLL_MS, timeout_ms=40000, **poll)
        self.close(name)

    def drain(self, suffixes, held: dict | None = None) -> None:
        """Every group of ``suffixes`` polls (accepting) until several polls in a row come back empty, then leaves.
        ``held``: ``{suffix: (open handle, acknowledgement)}``: that member polls instead of a new one, first
        acknowledging the records it holds."""
        held = held or {}
        names = {s: held[s][0] if s in held else self.open(s) for s in suffixes}  # all join at once
        for s, name in names.items():
            more = {"held_ack": held[s][1]} if s in held else {}
            self.poll(name, min_ms=DRAIN_WAIT_MS, idle_polls=4, timeout_ms=90000, **more)
            self.close(name)

    def end(self) -> int:
        return self.sc.end_offset(self.topic, 0)


def _only_4x(hook):
    def run(self, *a, **kw):
        if self.on:
            self.phase = hook.__name__
            return hook(self, *a, **kw)

    run.__name__ = hook.__name__
    return run


class ShareUnclean(ShareEpisode, Unclean):
    GROUPS = ("past", "at-divergence", "gap-release", "gap-hold", "early")

    def unclean_partitions(self):
        return [[self.topic, 0]] if self.on else []

    @_only_4x
    def setup(self):
        sc, r = self.sc, self.rng
        self.parts = 1
        self.create(assignments={"0": [self.L, self.F]}, configs={"min.insync.replicas": "1"})
        self.kept = r.randint(10, 40)
        sc.call("produce", topic=self.topic, partition=0, count=self.kept, acks="all")
        # well before the divergence point
        self.take("early", r.randint(1, self.kept // 2))

    @_only_4x
    def isolated(self):
        sc, r = self.sc, self.rng
        sc.call("produce", topic=self.topic, partition=0, count=r.randint(5, 40), acks="1")
        self.l_end = self.end()
        kept, l_end = self.kept, self.l_end
        # everything L has accepted: past F's end
        name = self.open("past")
        self.poll(name, max_records=l_end, min_ms=FIRST_POLL_MS)
        self.close(name)
        # exactly F's end accepted; anything given past it released
        name = self.open("at-divergence", **{"max.poll.records": kept, "share.acquire.mode": "record_limit"})
        self.poll(
            name,
            max_records=kept,
            min_ms=FIRST_POLL_MS,
            acks=[{"partition": 0, "from": kept, "ack": "release"}],
        )
        self.close(name)
        # a range past F's end accepted, records before it released (gap-release) or held (gap-hold: acquired,
        # not acknowledged, its member still there) when L dies
        self.gaps, self.held = {}, {}
        for s in ("gap-release", "gap-hold"):
            a = r.randint(max(0, kept - 8), kept + (l_end - kept) // 2 - 1)
            b = r.randint(max(a + 1, kept), l_end - 1)
            self.gaps[s] = [a, b]
            name = self.open(s)
            ack = s.split("-")[1]
            self.poll(
                name,
                polls=1,
                min_ms=FIRST_POLL_MS,
                acks=[{"partition": 0, "from": a, "to": b, "ack": ack, "delivery": 1}],
            )
            if ack == "hold":
                self.held[s] = (name, r.choice(["accept", "release"]))  # its acknowledgement once it polls again
            else:
                self.close(name)
        for s in self.GROUPS:
            self.share_offsets(s)
        sc.step(
            "share positions",
            topic=self.topic,
            kept=kept,
            l_end=l_end,
            leader_epoch=self._epoch(0),
            gaps=self.gaps,
            held_ack=self.held["gap-hold"][1],
            groups={s: self.g(s) for s in self.GROUPS},
        )

    @_only_4x
    def elected(self):
        sc, r = self.sc, self.rng
        # fewer records than L had past F's end: F's log ends below the offsets `past` accepted on L
        sc.call("produce", topic=self.topic, partition=0, count=r.randint(1, self.l_end - self.kept - 1), acks="1")
        self.f_end = self.end()
        sc.step("share new lineage", topic=self.topic, f_end=self.f_end, leader_epoch=self._epoch(0))
        self.drain(["past"])

    @_only_4x
    def recovered(self):
        sc, r = self.sc, self.rng
        # past the offset where `past` stood when L died, so that its drain has records past it too
        n = max(0, self.l_end - self.end()) + r.randint(1, 10)
        sc.call("produce", topic=self.topic, partition=0, count=n, acks="all")
        self.drain(self.GROUPS, self.held)
        for s in self.GROUPS:
            self.share_offsets(s)


class ShareDeleteRecords(ShareEpisode):
    GROUPS = ("behind", "straddle")

    @_only_4x
    def setup(self):
        sc, r = self.sc, self.rng
        self.create(partitions=1, rf=min(2, sc.brokers))
        n = r.randint(20, 50)
        sc.call("produce", topic=self.topic, partition=0, count=n, acks="all")
        self.cut = r.randint(8, n - 5)
        self.take("behind", r.randint(1, self.cut - 5))
        # accepted below and above the cut, a range across it released
        self.gap = [r.randint(1, self.cut - 1), r.randint(self.cut + 1, n - 1)]
        name = self.open("straddle")
        self.poll(
            name,
            polls=1,
            min_ms=FIRST_POLL_MS,
            acks=[{"partition": 0, "from": self.gap[0], "to": self.gap[1], "ack": "release", "delivery": 1}],
        )
        self.close(name)
        for s in self.GROUPS:
            self.share_offsets(s)

    @_only_4x
    def after(self):
        sc = self.sc
        sc.call("delete_records", topic=self.topic, partition=0, before=self.cut)
        sc.step(
            "share positions", topic=self.topic, cut=self.cut, gap=self.gap, groups={s: self.g(s) for s in self.GROUPS}
        )
        sc.call("produce", topic=self.topic, partition=0, count=self.rng.randint(1, 10), acks="all")
        self.drain(self.GROUPS)
        for s in self.GROUPS:
            self.share_offsets(s)


class ShareRecreate(ShareEpisode):
    GROUPS = ("old",)

    @_only_4x
    def setup(self):
        sc, r = self.sc, self.rng
        self.create(partitions=1, rf=min(2, sc.brokers))
        n = r.randint(20, 40)
        sc.call("produce", topic=self.topic, partition=0, count=n, acks="all")
        a = r.randint(3, n // 2)
        name = self.open("old")
        self.poll(
            name,
            polls=1,
            min_ms=FIRST_POLL_MS,
            acks=[{"partition": 0, "from": a, "to": a + r.randint(1, 5), "ack": "release", "delivery": 1}],
        )
        self.close(name)
        self.share_offsets("old")

    @_only_4x
    def after(self):
        sc, r = self.sc, self.rng
        old_id = self.topic_id
        sc.call("delete_topic", topic=self.topic)
        deadline = time.monotonic() + 30
        while True:
            _, err = sc.client.try_call("create_topic", topic=self.topic, partitions=1, rf=min(2, sc.brokers))
            if err is None:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(err)
            time.sleep(0.5)
        self.topic_id = self.described_id(other_than=old_id)
        sc.step("share recreated", topic=self.topic, old_topic_id=old_id, topic_id=self.topic_id)
        sc.call("produce", topic=self.topic, partition=0, count=r.randint(1, 15), acks="all")
        self.drain(self.GROUPS)
        self.share_offsets("old")


EPISODES.update(
    {"share_unclean": ShareUnclean, "share_delete_records": ShareDeleteRecords, "share_recreate": ShareRecreate}
)


# ------------------------------------------------------------------ the oracle
def _tally(mine: list) -> dict:
    """Deliveries of one group-partition of one topic id: given / accepted counts per (offset, epoch), the settled
    (accepted or rejected, commit without error) and the lists the oracle reports."""
    given = Counter((d["offset"], d["leader_epoch"]) for d in mine if not d.get("late"))
    ok = [d for d in mine if not d.get("commit_error")]
    accepted = Counter((d["offset"], d["leader_epoch"]) for d in ok if d["ack"] == "accept")
    settled = set(accepted) | {(d["offset"], d["leader_epoch"]) for d in ok if d["ack"] == "reject"}
    return {"given": given, "accepted": accepted, "unsettled": {k for k in given if k not in settled}}


def oracle(deliveries: list, final_logs: dict, start_offsets: dict, judged: list) -> list:
    """Per (group, topic, partition) of ``judged``: what Kafka gave the group against what the partition holds.

    ``deliveries``: ``share_deliveries`` entries; ``final_logs``: ``{(topic, partition): {"topic_id",
    "log_start_offset", "log_end_offset", "records": [[offset, leader_epoch], ...]}}`` read after every group
    drained; ``start_offsets``: ``{(group, topic, partition): share_offsets entry}``. A record is (offset, leader
    epoch) within the topic id of the final log; deliveries of an older topic id (a deleted topic of the same name)
    are counted apart, in ``older_topic_ids``.

    - ``never_delivered``: offsets of the final log, at or above its log start offset, whose (offset, epoch) the
      group was never given;
    - ``accepted_twice`` / ``redelivered``: [offset, epoch] accepted (acknowledged ACCEPT, commit without error)
      more than once / delivered more than once (a late acknowledgement of a held record is no delivery);
    - ``lost_in_flight``: [offset, epoch] delivered, never accepted nor rejected, and not in the final log;
    - ``final_start_offset`` / ``final_start_epoch`` / ``final_lag``: what ``listShareGroupOffsets`` reports.
    """
    out = []
    for group, topic, partition in judged:
        log = final_logs[(topic, partition)]
        final = {(o, e) for o, e in log["records"] if o >= log["log_start_offset"]}
        by_id: dict = {}
        for d in deliveries:
            if (d["group"], d["topic"], d["partition"]) == (group, topic, partition):
                by_id.setdefault(d.get("topic_id") or log["topic_id"], []).append(d)
        cur = _tally(by_id.pop(log["topic_id"], []))
        older = {}
        for tid, ds in by_id.items():
            t = _tally(ds)
            older[tid] = {
                "delivered": sum(t["given"].values()),
                "lost_in_flight": sorted(list(k) for k in t["unsettled"]),
            }
        so = start_offsets.get((group, topic, partition)) or {}
        out.append(
            {
                "group": group,
                "topic": topic,
                "partition": partition,
                "topic_id": log["topic_id"],
                "log_start_offset": log["log_start_offset"],
                "log_end_offset": log["log_end_offset"],
                "delivered": sum(cur["given"].values()),
                "never_delivered": sorted(o for o, e in final if (o, e) not in cur["given"]),
                "accepted_twice": sorted([o, e] for (o, e), n in cur["accepted"].items() if n > 1),
                "redelivered": sorted([o, e] for (o, e), n in cur["given"].items() if n > 1),
                "lost_in_flight": sorted(list(k) for k in cur["unsettled"] if k not in final),
                "final_start_offset": so.get("start_offset"),
                "final_start_epoch": so.get("leader_epoch"),
                "final_lag": so.get("lag"),
                "older_topic_ids": older,
            }
        )
    return out


# ------------------------------------------------------------------ the lab run
def share_judged(sc: Scenario) -> list:
    """[group, topic, partition] of every group a ``share_open`` step opened, on every partition of its topics."""
    topics = {}
    for st in sc.steps:
        if st["step"] == "share_open":
            topics.setdefault(st["group"], set()).update(st["topics"])
    parts = sc.describe(sorted({t for ts in topics.values() for t in ts}))
    return sorted([g, t, p] for g, ts in topics.items() for (t, p) in parts if t in ts)


def final_drain(sc: Scenario) -> None:
    """Every share group joins once more (after the rolling restart moved the leaders) and polls until empty."""
    groups = {}
    for st in sc.steps:
        if st["step"] == "share_open":
            groups[st["group"]] = st["topics"]
    ids = {t: s["topic_id"] for (t, _p), s in sc.describe(sorted({t for ts in groups.values() for t in ts})).items()}
    names = {}
    for g, ts in groups.items():
        names[g] = f"{g}@final"
        sc.call("share_open", name=names[g], group=g, topics=ts, config={})
    for i, (g, name) in enumerate(names.items()):  # the members joined together: only the first waits long
        wait = DRAIN_WAIT_MS if i == 0 else 3000
        share_poll(sc, name, "final", ids[groups[g][0]], min_ms=wait, idle_polls=4, timeout_ms=90000)
        res = sc.client.call("share_close", name=name)
        sc.step("share_close", name=name, held=res["held"], error=res["error"], logged=len(res["log"]))


def read_final_logs(sc: Scenario, judged: list) -> dict:
    """``{(topic, partition): {"topic_id", "log_start_offset", "log_end_offset", "records": [[offset, epoch]]}}``."""
    out = {}
    state = sc.describe(sorted({t for _g, t, _p in judged}))
    for topic in sorted({t for _g, t, _p in judged}):
        recs = sc.client.call("read_topic", topic=topic, epochs=True)
        for p, rows in recs.items():
            o = sc.client.call("offsets", partitions=[[topic, int(p)]])[0]
            out[(topic, int(p))] = {
                "topic_id": state[(topic, int(p))]["topic_id"],
                "log_start_offset": o["log_start_offset"],
                "log_end_offset": o["high_watermark"],
                "records": rows,
            }
    return out


SHARE_ERROR = re.compile(
    r"\] (ERROR|WARN) .*(SharePartition|[Ss]hare ?[Gg]roup|ShareCoordinator|ShareFetch|__share_group_state)"
)


def broker_share_lines(cluster, levels=("ERROR",)) -> list:
    """The brokers' log lines at ``levels`` that name share groups (SharePartition, share coordinator, the state
    topic, ...), without their timestamps, counted: ``[{"node", "line", "count"}]``."""
    counts: Counter = Counter()
    for node in cluster.nodes.values():
        if node.log_file.exists():
            for line in node.log_file.read_text(errors="replace").splitlines():
                m = SHARE_ERROR.search(line)
                if m and m.group(1) in levels:
                    counts[(node.node_id, line[line.index("] ") + 2 :][:600])] += 1
    return [{"node": n, "line": line, "count": c} for (n, line), c in sorted(counts.items())]


def share_oracle(sc: Scenario) -> list:
    """With the cluster up after the scenario: every share group drains once more (:func:`final_drain`), then
    :func:`oracle` over the recorded deliveries and the final logs.  Empty when no share group ran (3.x)."""
    if not any(st["step"] == "share_open" for st in sc.steps):
        return []
    final_drain(sc)
    judged = share_judged(sc)
    logs = read_final_logs(sc, judged)
    offsets = {}
    for g in sorted({g for g, _t, _p in judged}):
        for o in sc.client.call("share_offsets", group=g):
            offsets[(g, o["topic"], o["partition"])] = o
    rows = oracle(sc.share_deliveries, logs, offsets, judged)
    sc.step("share oracle", rows=len(rows))
    return rows


def compare_share(rows: list, out: Path) -> list:
    """The audit's ``share_partitions/`` (under ``out``) against the oracle's ``rows``, one dict per oracle row:
    ``group, topic, partition, expected`` (records of the final log the group was never given), ``audit`` (of its
    LOG_TRUNCATION's records at risk, those in the log; 0 when the share-partition is OK or has no state),
    ``verdict``, ``divergence_offset``, ``in_flight`` (the audit's ``records_in_flight_lost``),
    ``lost_in_flight_past_divergence`` (the oracle's, at or past the divergence offset) and ``agree``: the counts
    are equal, every never-delivered offset is at or past the divergence offset, and the audit names no more
    records lost in flight than Kafka's consumers held there."""
    import pyarrow.parquet as pq

    path = Path(out) / "share_partitions"
    table = pq.read_table(path).to_pylist() if path.exists() else []
    audit = {(r["group_id"], r["topic"], r["partition"]): r for r in table}
    cmp = []
    for r in rows:
        a = audit.get((r["group"], r["topic"], r["partition"])) or {}
        verdict = a.get("verdict", "OK")
        got = (a.get("records_in_log") or 0) if verdict == "LOG_TRUNCATION" else 0
        d = a.get("divergence_offset")
        lost = [o for o, _e in r["lost_in_flight"] if d is not None and o >= d]
        in_flight = a.get("records_in_flight_lost") or 0
        agree = (
            got == len(r["never_delivered"])
            and (d is None or all(o >= d for o in r["never_delivered"]))
            and in_flight <= len(lost)
        )
        cmp.append(
            {
                "group": r["group"],
                "topic": r["topic"],
                "partition": r["partition"],
                "expected": len(r["never_delivered"]),
                "audit": got,
                "verdict": verdict,
                "divergence_offset": d,
                "in_flight": in_flight,
                "lost_in_flight_past_divergence": len(lost),
                "agree": agree,
            }
        )
    return cmp


def run_share_lab(version: str, workdir, seed: int = 1, while_up=None) -> dict:
    """The share episodes on a fresh Kafka ``version`` (4.x) cluster, through :func:`run_scenario` (unclean
    election, rolling restart), a final drain of every group, the oracle with the cluster up, a hot copy, a clean
    stop. Returns ``{"version", "seed", "log_dirs": [each node's log dir, cluster stopped cleanly],
    "scenario_json": Path, "oracle": [oracle() rows], "hot_copy": [each node's hot copy], "broker_errors":
    broker_share_lines(), "while_up": while_up(sc)'s result}``; ``<workdir>/share_oracle.json`` holds the oracle
    too.  ``while_up(sc)`` runs after the hot copy, the cluster still up (a live audit)."""
    from .scenario import copy_log_dirs

    if kafka_dist.major(version) < 4:
        raise ValueError(f"share groups need Kafka 4.x, not {version}")
    workdir = Path(workdir)
    sc = run_scenario(
        seed, version, workdir, kinds=list(KINDS), hot_copy=False, cluster_options={"overrides": CLUSTER_OVERRIDES}
    )
    try:
        rows = share_oracle(sc)
        time.sleep(1.5)  # one log-start-offset checkpoint interval of the lab's brokers
        hot = copy_log_dirs(sc.cluster, workdir / "hot-copy")
        sc.step("hot copy")
        path = save(sc)
        (workdir / "share_oracle.json").write_text(json.dumps(rows, indent=1))
        up = while_up(sc) if while_up is not None else None
    except BaseException:
        save(sc)
        finish(sc, keep_logs=True)
        raise
    finish(sc)
    return {
        "version": version,
        "seed": seed,
        "log_dirs": sc.cluster.log_dirs(),
        "scenario_json": path,
        "oracle": rows,
        "hot_copy": hot,
        "broker_errors": broker_share_lines(sc.cluster),
        "while_up": up,
    }
