"""Seeded fault scenarios on a real KRaft cluster, recorded Jepsen-style for an independent checker.

A seed picks a leader-to-be-lost ``L``, a follower-left-behind ``F`` and a random set of *episodes*,
each on its own topics and groups so that one cluster and one audit judge them all at once:

==================  ========================================================================================
``unclean``         RF 2 on ``[L, F]``: F stops, L takes more records (acks=1) and groups commit past the
                    point F has, L crashes, F is elected uncleanly (Admin ``electLeaders(UNCLEAN)``; on 4.x
                    the ISR is empty and L sits in the KIP-966 ELR), F takes a new lineage, L comes back and
                    truncates. Groups commit before, at and past the divergence point, through Kafka's Java
                    consumer, kafka-python, the KIP-848 protocol (4.x) and Admin (epoch -1).
``clean``           RF 3, acks=all: L's crash and return are clean leader changes; every commit must stay OK.
``stale_epoch``     RF 3: commits made after the clean leader change with the older epoch, below and past its
                    end offset, and with a leader epoch the cluster never had.
``beyond_end``      commits past the log end offset, with the current epoch and with epoch -1.
``delete_records``  Admin ``deleteRecords``: commits below, at and above the new log start offset.
``recreate``        the topic is deleted and re-created under the same name (new topic id).
``expansion``       partitions added (KIP-253); groups with and without commits on the new partitions.
``txn``             transactional offset commits (``sendOffsetsToTransaction``), committed and aborted.
``deleted_group``   a group's commits, then ``deleteConsumerGroups``.
``upgrade``         (4.x) a classic group converted to a KIP-848 consumer group by a member that never commits.
==================  ========================================================================================

:func:`run_scenario` executes the schedule, ends it on a rolling restart (every broker stopped cleanly and started
again in turn, each time until no partition is under-replicated; leadership moves in clean leader elections, and
nothing is produced or committed after it, so each partition's current leader epoch began with no records), then
asks the oracle (``LabClient`` ``verdicts``: Kafka's own consumer resuming with ``auto.offset.reset=none``) for
every group-partition of the plan *with the cluster up*, copies the log dirs while it runs (a hot backup) and
leaves the cluster running for a live audit. Everything is written to ``<workdir>/scenario.json``: seed,
version, schedule with timestamps (the restart's steps ``restart`` per broker and ``rolling restart``), verdicts.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .client import LabClient, LabError
from .cluster import KafkaCluster
from . import kafka_dist

KINDS = (
    "unclean",
    "clean",
    "stale_epoch",
    "beyond_end",
    "delete_records",
    "recreate",
    "expansion",
    "txn",
    "deleted_group",
    "upgrade",
)


@dataclass
class Scenario:
    seed: int
    version: str
    workdir: Path
    brokers: int = 3
    cluster: KafkaCluster | None = None
    client: LabClient | None = None
    steps: list = field(default_factory=list)
    judged: list = field(default_factory=list)  # [group, topic, partition]
    episodes: list = field(default_factory=list)
    verdicts: list = field(default_factory=list)
    share_deliveries: list = field(default_factory=list)  # share_episode.py: every record a share group was given
    t0: float = field(default_factory=time.time)

    # --------------------------------------------------------------- helpers
    def step(self, step_name: str, **info):
        self.steps.append({"t": round(time.time() - self.t0, 3), "step": step_name, **info})

    def call(self, op: str, **args):
        res = self.client.call(op, **args)
        self.step(op, **{k: v for k, v in args.items() if k != "offsets" or len(v) < 20}, result=_short(res))
        return res

    def judge(self, group: str, topic: str, partitions) -> None:
        for p in partitions:
            self.judged.append([group, topic, int(p)])

    def describe(self, topics) -> dict:
        return {(r["topic"], r["partition"]): r for r in self.client.call("describe", topics=list(topics))}

    def wait_for(self, what: str, cond, topics, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while True:
            try:
                state = self.describe(topics)
            except LabError as exc:
                # a topic just created: the broker that answered may not have its metadata yet (Kafka 3.9 answers
                # UnknownTopicOrPartition for a moment after CreateTopics returns)
                if "UnknownTopicOrPartition" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
                continue
            if all(cond(s) for s in state.values()):
                self.step("waited", what=what)
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"seed {self.seed}: {what} not reached in {timeout}s: {state}")
            time.sleep(0.3)

    def end_offset(self, topic, partition) -> int:
        return self.client.call("offsets", partitions=[[topic, partition]])[0]["high_watermark"]

    def kafka_python_commit(
        self, group: str, topic: str, partition: int, offset: int | None = None, epoch: int = -1, consume: int = 0
    ):
        """Commit through kafka-python: consume ``consume`` records and commit the position, or commit an offset."""
        from kafka import KafkaConsumer, TopicPartition
        from kafka.structs import OffsetAndMetadata

        c = KafkaConsumer(
            bootstrap_servers=self.cluster.running_bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=20000,
        )
        try:
            tp = TopicPartition(topic, partition)
            c.assign([tp])
            if offset is None:
                got, deadline = 0, time.monotonic() + 15
                while got < consume and time.monotonic() < deadline:
                    got += sum(len(v) for v in c.poll(timeout_ms=300, max_records=consume - got).values())
                c.commit()
            else:
                c.commit({tp: OffsetAndMetadata(offset, "", epoch)})
            res = c.committed(tp, metadata=True)
            self.step(
                "kafka_python_commit",
                group=group,
                topic=topic,
                partition=partition,
                committed=[res.offset, res.leader_epoch] if res else None,
            )
        finally:
            c.close(autocommit=False)


def _short(res):
    s = json.dumps(res)
    return res if len(s) < 400 else s[:400] + "..."


# ------------------------------------------------------------------ episodes
class Episode:
    """One independent story on its own topics and groups; hooks run at the scenario's phases."""

    def __init__(self, sc: Scenario, rng: random.Random, name: str, L: int, F: int, X: list[int]):
        self.sc, self.rng, self.name, self.L, self.F, self.X = sc, rng, name, L, F, X
        self.topic = f"{name}.t"

    def g(self, suffix):
        return f"{self.name}.{suffix}"

    def setup(self): ...
    def isolated(self): ...  # F is down, L leads
    def elected(self): ...  # L is down, F leads the unclean partitions
    def recovered(self): ...  # every broker is back
    def after(self): ...  # leaders settled


class Unclean(Episode):
    def create_topic(self) -> None:
        """The episode's topic: 1-3 partitions, each replicated to L and F only, ``min.insync.replicas=1``."""
        self.parts = self.rng.randint(1, 3)
        self.sc.call(
            "create_topic",
            topic=self.topic,
            assignments={str(p): [self.L, self.F] for p in range(self.parts)},
            configs={"min.insync.replicas": "1"},
        )

    def setup(self):
        sc, r = self.sc, self.rng
        self.create_topic()
        self.kept = {p: r.randint(5, 60) for p in range(self.parts)}
        for p, n in self.kept.items():
            sc.call("produce", topic=self.topic, partition=p, count=n, acks="all")
        # a group that stays well before any divergence point
        sc.call("consume_commit", group=self.g("early"), topics=[self.topic], max_records=3 * self.parts, max_poll=1)
        sc.judge(self.g("early"), self.topic, range(self.parts))

    def isolated(self):
        sc, r = self.sc, self.rng
        self.lost = {p: r.randint(1, 50) for p in range(self.parts)}
        for p, n in self.lost.items():
            sc.call("produce", topic=self.topic, partition=p, count=n, acks="1")
        # consumed everything L has, past what F has: these commits sit past the divergence point
        sc.call("consume_commit", group=self.g("java-past"), topics=[self.topic])
        sc.judge(self.g("java-past"), self.topic, range(self.parts))
        if kafka_dist.major(sc.version) >= 4:
            sc.call("consume_commit", group=self.g("kip848-past"), protocol="consumer", topics=[self.topic])
            sc.judge(self.g("kip848-past"), self.topic, range(self.parts))
        p = r.randrange(self.parts)
        sc.kafka_python_commit(self.g("py-past"), self.topic, p, consume=self.kept[p] + r.randint(1, self.lost[p]))
        sc.judge(self.g("py-past"), self.topic, [p])
        # exactly at F's end, and one record short of it, with the epoch the records carry
        p = r.randrange(self.parts)
        sc.call(
            "commit",
            group=self.g("at-divergence"),
            offsets=[{"topic": self.topic, "partition": p, "offset": self.kept[p], "epoch": self._epoch(p)}],
        )
        sc.judge(self.g("at-divergence"), self.topic, [p])
        # Admin reset (epoch -1) into the records that will be lost
        sc.call(
            "alter_offsets",
            group=self.g("admin-past"),
            offsets=[{"topic": self.topic, "partition": p, "offset": self.kept[p] + self.lost[p]}],
        )
        sc.judge(self.g("admin-past"), self.topic, [p])

    def _epoch(self, p):
        return self.sc.client.call("offsets", partitions=[[self.topic, p]])[0]["leader_epoch"]

    def unclean_partitions(self):
        return [[self.topic, p] for p in range(self.parts)]

    def elected(self):
        sc, r = self.sc, self.rng
        for p in range(self.parts):
            n = r.choice([0, r.randint(1, self.lost[p]), self.lost[p], self.lost[p] + r.randint(1, 30)])
            if n:
                sc.call("produce", topic=self.topic, partition=p, count=n, acks="1")
        # a group that commits on the new lineage
        sc.call("consume_commit", group=self.g("new-lineage"), topics=[self.topic])
        sc.judge(self.g("new-lineage"), self.topic, range(self.parts))


class Clean(Episode):
    def setup(self):
        sc, r = self.sc, self.rng
        self.parts = r.randint(1, 2)
        sc.call(
            "create_topic",
            topic=self.topic,
            assignments={str(p): [self.L, *self.X, self.F][:3] for p in range(self.parts)},
            configs={"min.insync.replicas": "1"},
        )
        for p in range(self.parts):
            sc.call("produce", topic=self.topic, partition=p, count=r.randint(10, 40), acks="all")
        sc.call("consume_commit", group=self.g("before"), topics=[self.topic], max_records=r.randint(1, 9), max_poll=1)
        sc.judge(self.g("before"), self.topic, range(self.parts))

    def isolated(self):
        self.sc.call("consume_commit", group=self.g("isolated"), topics=[self.topic])
        self.sc.judge(self.g("isolated"), self.topic, range(self.parts))

    def elected(self):
        sc = self.sc
        for p in range(self.parts):
            sc.call("produce", topic=self.topic, partition=p, count=self.rng.randint(1, 20), acks="all")
        sc.call("consume_commit", group=self.g("during"), topics=[self.topic])
        sc.judge(self.g("during"), self.topic, range(self.parts))

    def after(self):
        sc = self.sc
        # preferred election moves leadership back to L: another clean leader change
        sc.call("elect", type="preferred", partitions=[[self.topic, p] for p in range(self.parts)])
        for p in range(self.parts):
            sc.call("produce", topic=self.topic, partition=p, count=self.rng.randint(1, 10), acks="all")
        sc.kafka_python_commit(self.g("py-after"), self.topic, 0, consume=self.rng.randint(1, 10))
        sc.judge(self.g("py-after"), self.topic, [0])


class StaleEpoch(Clean):
    def setup(self):
        sc, r = self.sc, self.rng
        self.parts = 1
        sc.call(
            "create_topic",
            topic=self.topic,
            assignments={"0": [self.L, *self.X, self.F][:3]},
            configs={"min.insync.replicas": "1"},
        )
        sc.call("produce", topic=self.topic, partition=0, count=r.randint(10, 40), acks="all")
        self.first_end = sc.end_offset(self.topic, 0)

    def isolated(self):
        pass

    def elected(self):
        self.sc.call("produce", topic=self.topic, partition=0, count=self.rng.randint(5, 30), acks="all")

    def after(self):
        sc, r = self.sc, self.rng
        end = sc.end_offset(self.topic, 0)
        cur = sc.client.call("offsets", partitions=[[self.topic, 0]])[0]["leader_epoch"]
        commits = {
            "stale-below": (r.randint(0, self.first_end), 0),
            "stale-past": (r.randint(self.first_end + 1, end), 0),
            "future-epoch": (r.randint(0, end), cur + r.randint(1, 5)),
            "current": (r.randint(0, end), cur),
        }
        for suffix, (off, ep) in commits.items():
            sc.call(
                "commit",
                group=self.g(suffix),
                offsets=[{"topic": self.topic, "partition": 0, "offset": off, "epoch": ep}],
            )
            sc.judge(self.g(suffix), self.topic, [0])


class BeyondEnd(Episode):
    def setup(self):
        sc, r = self.sc, self.rng
        sc.call("create_topic", topic=self.topic, partitions=1, rf=min(3, sc.brokers))
        sc.call("produce", topic=self.topic, partition=0, count=r.randint(5, 30), acks="all")

    def after(self):
        sc, r = self.sc, self.rng
        end = sc.end_offset(self.topic, 0)
        cur = sc.client.call("offsets", partitions=[[self.topic, 0]])[0]["leader_epoch"]
        for suffix, off, ep in (
            ("past-end-epoch", end + r.randint(1, 20), cur),
            ("past-end-m1", end + r.randint(1, 20), None),
            ("at-end", end, cur),
        ):
            sc.call(
                "commit",
                group=self.g(suffix),
                offsets=[{"topic": self.topic, "partition": 0, "offset": off, "epoch": ep}],
            )
            sc.judge(self.g(suffix), self.topic, [0])


class DeleteRecords(Episode):
    def setup(self):
        sc, r = self.sc, self.rng
        sc.call("create_topic", topic=self.topic, partitions=1, rf=min(2, sc.brokers))
        n = r.randint(20, 60)
        sc.call("produce", topic=self.topic, partition=0, count=n, acks="all")
        self.cut = r.randint(5, n - 5)
        sc.call(
            "consume_commit",
            group=self.g("below"),
            topics=[self.topic],
            max_records=r.randint(1, self.cut - 1),
            max_poll=1,
        )
        sc.call(
            "commit",
            group=self.g("at-start"),
            offsets=[{"topic": self.topic, "partition": 0, "offset": self.cut, "epoch": 0}],
        )
        sc.call(
            "commit", group=self.g("above"), offsets=[{"topic": self.topic, "partition": 0, "offset": n, "epoch": 0}]
        )
        for s in ("below", "at-start", "above"):
            sc.judge(self.g(s), self.topic, [0])

    def after(self):
        self.sc.call("delete_records", topic=self.topic, partition=0, before=self.cut)


class Recreate(Episode):
    def setup(self):
        sc, r = self.sc, self.rng
        sc.call("create_topic", topic=self.topic, partitions=1, rf=min(2, sc.brokers))
        sc.call("produce", topic=self.topic, partition=0, count=r.randint(20, 50), acks="all")
        sc.call("consume_commit", group=self.g("old"), topics=[self.topic])
        sc.judge(self.g("old"), self.topic, [0])

    def after(self):
        sc, r = self.sc, self.rng
        sc.call("delete_topic", topic=self.topic)
        deadline = time.monotonic() + 30
        while True:
            _, err = sc.client.try_call("create_topic", topic=self.topic, partitions=1, rf=min(2, sc.brokers))
            if err is None:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(err)
            time.sleep(0.5)
        sc.call("produce", topic=self.topic, partition=0, count=r.randint(1, 15), acks="all")
        # a commit on the new topic with the old topic's leader epoch and an offset only the old one had
        sc.call(
            "commit",
            group=self.g("new"),
            offsets=[{"topic": self.topic, "partition": 0, "offset": r.randint(0, 5), "epoch": 0}],
        )
        sc.judge(self.g("new"), self.topic, [0])


class Expansion(Episode):
    def setup(self):
        sc, r = self.sc, self.rng
        sc.call("create_topic", topic=self.topic, partitions=1, rf=min(2, sc.brokers))
        sc.call("produce", topic=self.topic, partition=0, count=r.randint(5, 20), acks="all")
        sc.call("consume_commit", group=self.g("before"), topics=[self.topic])

    def after(self):
        sc, r = self.sc, self.rng
        sc.call("create_partitions", topic=self.topic, total=3)
        for p in (1, 2):
            sc.call("produce", topic=self.topic, partition=p, count=r.randint(1, 10), acks="all")
        sc.call("consume_commit", group=self.g("after"), topics=[self.topic])
        sc.judge(self.g("before"), self.topic, [0, 1, 2])
        sc.judge(self.g("after"), self.topic, [0, 1, 2])


class Txn(Episode):
    def setup(self):
        sc, r = self.sc, self.rng
        sc.call("create_topic", topic=self.topic, partitions=1, rf=min(3, sc.brokers))
        n = r.randint(10, 40)
        sc.call("produce", topic=self.topic, partition=0, count=n, acks="all")
        sc.call(
            "txn_commit",
            group=self.g("committed"),
            transactional_id=self.g("tx1"),
            offsets=[{"topic": self.topic, "partition": 0, "offset": r.randint(0, n), "epoch": 0}],
            produce_topic=self.topic,
        )
        sc.call(
            "commit",
            group=self.g("aborted"),
            offsets=[{"topic": self.topic, "partition": 0, "offset": r.randint(0, n // 2), "epoch": 0}],
        )
        sc.call(
            "txn_commit",
            group=self.g("aborted"),
            transactional_id=self.g("tx2"),
            abort=True,
            offsets=[{"topic": self.topic, "partition": 0, "offset": n + 100, "epoch": 0}],
        )
        sc.judge(self.g("committed"), self.topic, [0])
        sc.judge(self.g("aborted"), self.topic, [0])


class DeletedGroup(Episode):
    def setup(self):
        sc = self.sc
        sc.call("create_topic", topic=self.topic, partitions=1, rf=min(2, sc.brokers))
        sc.call("produce", topic=self.topic, partition=0, count=self.rng.randint(3, 20), acks="all")
        sc.call("consume_commit", group=self.g("gone"), topics=[self.topic])
        sc.call("consume_commit", group=self.g("kept"), topics=[self.topic])
        sc.judge(self.g("gone"), self.topic, [0])
        sc.judge(self.g("kept"), self.topic, [0])

    def after(self):
        self.sc.call("delete_group", group=self.g("gone"))


class Upgrade(Episode):
    """4.x: a classic group's commits, then a KIP-848 member joins (the coordinator converts the group,
    writing a GroupMetadata tombstone but no offset tombstone), reads without committing and leaves."""

    def setup(self):
        sc, r = self.sc, self.rng
        sc.call("create_topic", topic=self.topic, partitions=2, rf=min(2, sc.brokers))
        for p in range(2):
            sc.call("produce", topic=self.topic, partition=p, count=r.randint(5, 30), acks="all")
        sc.call(
            "consume_commit", group=self.g("migrated"), topics=[self.topic], max_records=r.randint(1, 9), max_poll=1
        )
        sc.judge(self.g("migrated"), self.topic, [0, 1])

    def after(self):
        if kafka_dist.major(self.sc.version) >= 4:
            self.sc.call(
                "consume_commit",
                group=self.g("migrated"),
                protocol="consumer",
                topics=[self.topic],
                commit=False,
                max_records=3,
                max_poll=1,
            )


EPISODES = {
    "unclean": Unclean,
    "clean": Clean,
    "stale_epoch": StaleEpoch,
    "beyond_end": BeyondEnd,
    "delete_records": DeleteRecords,
    "recreate": Recreate,
    "expansion": Expansion,
    "txn": Txn,
    "deleted_group": DeletedGroup,
    "upgrade": Upgrade,
}


def plan_episodes(rng: random.Random, unclean: tuple[int, int] = (2, 4)) -> list[str]:
    kinds = ["unclean"] * rng.randint(*unclean)
    kinds += [k for k in KINDS[1:] if rng.random() < 0.7]
    kinds += ["clean"] * rng.randint(0, 1)
    rng.shuffle(kinds)
    return kinds


def schedule_rng(seed: int, version: str, brokers: int = 3) -> tuple[random.Random, int, int]:
    """The seed's random schedule on ``version``: its generator, and the brokers it makes leader ``L`` and follower
    ``F`` of the unclean partitions (the generator's first draw; the episode plan is its next)."""
    rng = random.Random(f"{seed}/{version}")
    L, F = rng.sample(range(1, brokers + 1), 2)
    return rng, L, F


def planned_episodes(seed: int, version: str, brokers: int = 3, unclean: tuple[int, int] = (2, 4)) -> list[str]:
    """The episode kinds :func:`run_scenario` runs for ``seed`` on ``version`` (no cluster needed)."""
    rng, _L, _F = schedule_rng(seed, version, brokers)
    return plan_episodes(rng, unclean)


def covering_seeds(versions: list[str], search: int = 4000) -> list[int]:
    """One seed per version such that, together, the versions' plans run every episode kind (:data:`KINDS`) at
    least once, with the fewest episodes in all (then the smallest seeds).  Seeds ``1..k`` are searched, ``k``
    such that ``k ** len(versions)`` stays within ``search``; if no choice covers every kind, ``1, 2, ...``
    (and :func:`uncovered_kinds` names what is missing)."""
    import itertools

    n = len(versions)
    if n == 0:
        return []
    k = max(2, int(search ** (1 / n)))
    plans = [[(s, planned_episodes(s, v)) for s in range(1, k + 1)] for v in versions]
    best: tuple[int, list[int]] | None = None
    for choice in itertools.product(*plans):
        if set().union(*(set(p) for _s, p in choice)) >= set(KINDS):
            key = (sum(len(p) for _s, p in choice), [s for s, _p in choice])
            best = key if best is None or key < best else best
    return best[1] if best else list(range(1, n + 1))


def uncovered_kinds(cases: list[tuple[str, int]]) -> set[str]:
    """The episode kinds that none of ``cases`` ((version, seed) pairs) runs."""
    return set(KINDS) - {k for v, s in cases for k in planned_episodes(s, v)}


def run_scenario(
    seed: int,
    version: str,
    workdir: Path,
    brokers: int = 3,
    unclean: tuple[int, int] = (2, 4),
    hot_copy: bool = True,
    cluster_options: dict | None = None,
    kinds: list[str] | None = None,
    extra_kinds: list[str] | None = None,
) -> Scenario:
    """Run seed's schedule on a fresh cluster; returns the Scenario with the cluster still up.

    ``cluster_options``: more :class:`KafkaCluster` fields (``overrides``, ``heap``, ``loggers``), e.g. for a
    benchmark that keeps the cluster.  ``kinds``: these episodes (names of :data:`EPISODES`) instead of the seed's
    plan; ``extra_kinds``: these after the plan (the soak's share-group episodes).  The caller stops ``sc.cluster`` (and ``sc.client``) — see :func:`finish`.
    """
    workdir = Path(workdir)
    shutil.rmtree(workdir, ignore_errors=True)
    rng, L, F = schedule_rng(seed, version, brokers)
    sc = Scenario(seed, version, workdir, brokers)
    X = [b for b in range(1, brokers + 1) if b not in (L, F)]
    sc.cluster = KafkaCluster(version, workdir / "cluster", brokers=brokers, **(cluster_options or {}))
    try:
        sc.cluster.start()
        sc.client = LabClient(version, sc.cluster.bootstrap, log=workdir / "lab-client.log")
        sc.step("started", version=version, brokers=brokers, L=L, F=F)
        kinds = (list(kinds) if kinds else plan_episodes(rng, unclean)) + list(extra_kinds or ())
        eps = [EPISODES[k](sc, rng, f"s{seed}.e{i}.{k}", L, F, X) for i, k in enumerate(kinds)]
        sc.episodes = [e.name for e in eps]
        for e in eps:
            e.setup()
        unclean_parts = [tp for e in eps if isinstance(e, Unclean) for tp in e.unclean_partitions()]
        topics = sorted({t for t, _ in unclean_parts})

        stop_f = rng.choice(["stop", "kill"])
        (sc.cluster.stop_node if stop_f == "stop" else sc.cluster.kill)(F)
        sc.step(f"{stop_f} follower", broker=F)
        sc.wait_for("F out of ISR", lambda s: F not in s["isr"] and s["leader"] == L, topics)
        for e in eps:
            e.isolated()

        crash_l = rng.choice(["kill", "kill-mid-produce", "stop"])
        crash_l = os.environ.get("KOA_LAB_CRASH", crash_l)  # to try one fault on any seed
        if crash_l == "kill-mid-produce":
            crash_mid_produce(sc, rng.choice(unclean_parts), L)
        else:
            (sc.cluster.kill if crash_l == "kill" else sc.cluster.stop_node)(L)
        sc.step(f"{crash_l} leader", broker=L)
        sc.wait_for("unclean partitions offline", lambda s: s["leader"] == -1, topics)
        sc.cluster.start_node(F)
        sc.step("start", broker=F)
        deadline = time.monotonic() + 60
        while True:
            res = sc.call("elect", type="unclean", partitions=unclean_parts)
            if all(r["error"] is None or "ElectionNotNeeded" in r["error"] for r in res):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"seed {seed}: unclean election failed: {res}")
            time.sleep(0.5)
        sc.wait_for("F leads uncleanly", lambda s: s["leader"] == F, topics)
        for e in eps:
            e.elected()

        sc.cluster.start_node(L)
        sc.step("start", broker=L)
        sc.wait_for("L truncated and back in ISR", lambda s: L in s["isr"], topics, timeout=90)
        for e in eps:
            e.recovered()
        for e in eps:
            e.after()
        time.sleep(1)
        # the last write was the last episode's: end on a rolling restart, then nothing more is written
        rolling_restart(sc)
        take_verdicts(sc)
        if hot_copy:
            time.sleep(1.5)  # one log-start-offset checkpoint interval of the lab's brokers
            copy_log_dirs(sc.cluster, workdir / "hot-copy")
            sc.step("hot copy")
        save(sc)
        return sc
    except BaseException:
        save(sc)
        finish(sc, keep_logs=True)
        raise


def crash_mid_produce(sc: Scenario, tp, broker: int) -> None:
    """SIGKILL ``broker`` while a second client is producing to ``tp`` (acks=1) on it."""
    import threading

    producer = LabClient(sc.version, sc.cluster.running_bootstrap, log=sc.workdir / "lab-client-producer.log")
    producer.call("produce", topic=tp[0], partition=tp[1], count=1, acks="1")  # connected, metadata known
    result = {}
    t = threading.Thread(
        target=lambda: result.update(
            r=producer.try_call("produce", topic=tp[0], partition=tp[1], count=5000, acks="1", value_size=200, rounds=1)
        )
    )
    t.start()
    time.sleep(0.4)
    sc.cluster.kill(broker)
    t.join(120)
    producer.close()
    sc.step("produce during crash", topic=tp[0], partition=tp[1], result=_short(result.get("r")))


def all_partitions(sc: Scenario) -> dict:
    """``describe`` of every topic, the internal ones too: ``{(topic, partition): state}``."""
    deadline = time.monotonic() + 30
    while True:
        names, err = sc.client.try_call("list_topics")
        if err is None:
            state, err = sc.client.try_call("describe", topics=names)
            if err is None:
                return {(r["topic"], r["partition"]): r for r in state}
        if time.monotonic() > deadline:  # e.g. a topic deleted between the listing and the describe, for 30 s
            raise TimeoutError(f"seed {sc.seed}: cannot describe the topics: {err}")
        time.sleep(0.5)


def wait_replicated(sc: Scenario, what: str, timeout: float = 90) -> dict:
    """Until every partition of every topic has a leader and its whole replica set in the ISR (no
    under-replicated partition)."""
    deadline = time.monotonic() + timeout
    while True:
        state = all_partitions(sc)
        under = {k: s for k, s in state.items() if s["leader"] < 0 or set(s["isr"]) != set(s["replicas"])}
        if not under:
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"seed {sc.seed}: {what}: under-replicated after {timeout}s: {under}")
        time.sleep(0.3)


def rolling_restart(sc: Scenario, timeout: float = 90) -> None:
    """Restart every broker in turn, cleanly (SIGTERM: controlled shutdown, so each partition the broker leads
    moves to another ISR member in a clean leader election), waiting each time until it serves again and no
    partition is under-replicated. Nothing is produced or committed: the leader epochs the restart begins hold
    no records (a live source sees the current epoch with no start offset)."""
    t = time.monotonic()
    state = wait_replicated(sc, "before the rolling restart", timeout)
    first = {k: s["leader"] for k, s in state.items()}
    changes = 0
    for b in sorted(sc.cluster.running_brokers()):
        t_b = time.monotonic()
        led = sum(1 for s in state.values() if s["leader"] == b)
        sc.cluster.stop_node(b)
        sc.cluster.start_node(b)
        new = wait_replicated(sc, f"broker {b} restarted", timeout)
        moved = sum(1 for k, s in new.items() if k in state and s["leader"] != state[k]["leader"])
        changes += moved
        state = new
        sc.step("restart", broker=b, clean=True, led=led, leaders_moved=moved, seconds=round(time.monotonic() - t_b, 1))
    sc.step(
        "rolling restart",
        brokers=sorted(sc.cluster.running_brokers()),
        partitions=len(state),
        leader_changes=changes,
        leaders_not_where_they_were=sum(1 for k, s in state.items() if first.get(k) != s["leader"]),
        seconds=round(time.monotonic() - t, 1),
    )


def take_verdicts(sc: Scenario) -> list:
    sc.verdicts = sc.client.call("verdicts", group_partitions=sc.judged, timeout_ms=6000)
    sc.step("verdicts", count=len(sc.verdicts))
    return sc.verdicts


def copy_log_dirs(cluster: KafkaCluster, dest: Path) -> list[Path]:
    """Copy every node's log dir while the cluster runs, as a hot backup would (files may change under it)."""
    out = []
    for node in cluster.nodes.values():
        target = dest / node.dir.name
        try:
            shutil.copytree(node.log_dir, target, dirs_exist_ok=True)
        except shutil.Error:
            pass  # a file removed or replaced mid-copy (segment deletion, cleaner swap): a real hot copy has that too
        out.append(target)
    return out


def save(sc: Scenario) -> Path:
    path = sc.workdir / "scenario.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "seed": sc.seed,
                "version": sc.version,
                "brokers": sc.brokers,
                "episodes": sc.episodes,
                "judged": sc.judged,
                "verdicts": sc.verdicts,
                "schedule": sc.steps,
                **({"share_deliveries": sc.share_deliveries} if sc.share_deliveries else {}),
            },
            indent=1,
            default=str,
        )
    )
    return path


def finish(sc: Scenario, keep_logs: bool = False) -> None:
    """Close the client and stop the cluster cleanly (log dirs stay under the workdir)."""
    if sc.client is not None:
        sc.client.close()
        sc.client = None
    if sc.cluster is not None:
        sc.cluster.stop()


from . import share_episode  # noqa: E402,F401 - registers the share-group episodes (KIP-932) in EPISODES
from . import streams_episode  # noqa: E402,F401 - registers the streams-group episode (KIP-1071) in EPISODES
