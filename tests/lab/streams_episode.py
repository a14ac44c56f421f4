"""Streams groups (KIP-1071, ``group.protocol=streams``) in the lab: Kafka's own Streams client on a fresh cluster,
and Kafka's own description of the group as the reference for whom each committed input partition belongs to.

:func:`run_streams_lab` starts a one-broker KRaft cluster (4.1+; from 4.2 a freshly formatted cluster has the
``streams.version`` feature at 1 and ``streams`` among ``group.coordinator.rebalance.protocols`` by default: nothing
to enable; on 4.1 the unstable feature and API versions are turned on at format time), then one ``LabStreams`` JVM
(``tests/lab/java/streams/LabStreams.java``) that

* creates ``streams-in`` (4 partitions, :data:`RECORDS` keyed records each), ``streams-out`` and ``streams-counts``;
* runs the application ``lab-streams-app`` as two KafkaStreams instances (two processes of the group: each its own
  process id, ``client.id`` and state dir), ``a`` with two stream threads and ``b`` with one: three members;
* with two subtopologies: ``0`` reads ``streams-in`` (mapValues to ``streams-out``, and a re-key into the
  repartition topic ``lab-streams-app-rekeyed-repartition``), ``1`` reads that repartition topic (count, in-memory
  store with changelog ``lab-streams-app-counts-changelog``, to ``streams-counts``): 4 tasks each.

Once every record is processed and committed and Kafka describes the group as Stable with every task assigned
(each member's current assignment its target), Kafka's answers are recorded: Admin ``describeStreamsGroups``,
``listStreamsGroupOffsets`` and the end offsets. ``while_up(cluster)`` runs then (e.g. a live audit), the group is
described again (``unchanged``: the same members, epochs and tasks), the Streams JVM is halted *without* closing
(its members stay in the group, as after a crash: the log keeps their member and assignment records, no
tombstones) and the cluster is stopped cleanly at once (long before the members' session timeout), and the log
dirs are copied.

What :func:`run_streams_lab` returns::

    {
      "version": "4.4.0", "group": "lab-streams-app",
      "topics": {"input": "streams-in", "output": ..., "counts": ..., "sources": [every source topic, the
                 repartition topic too], "partitions": {topic: partition count}},
      "log_dirs": [Path, ...],               # copies, made after the clean stop (controller and broker)
      "description": {                       # Admin.describeStreamsGroups, when settled
        "group", "state" ("Stable"), "group_epoch", "target_assignment_epoch", "topology_epoch", "coordinator",
        "assignor",
        "subtopologies": [{"subtopology_id", "source_topics", "repartition_source_topics": {topic: partitions},
                           "repartition_sink_topics", "state_changelog_topics"}],
        "members": [{"member_id", "member_epoch", "instance_id", "rack_id", "client_id", "client_host",
                     "process_id", "topology_epoch", "is_classic", "active_tasks": [{"subtopology_id",
                     "partitions"}], "standby_tasks", "warmup_tasks", "target_active_tasks"}],
        "owners": {(topic, partition): {"member_id", "process_id", "client_id", "client_host"}},
      },
      "committed": [{"group", "topic", "partition", "offset", "leader_epoch"}],   # listStreamsGroupOffsets
      "end_offsets": {(topic, partition): offset},                            # of every source topic
      "processed": {"a": n, "b": n},           # records each instance's subtopology 0 processed
      "unchanged": bool,                        # described again after while_up: the same members and tasks
      "while_up": while_up(cluster) or None,
      "description_again": {...},               # the description after while_up
      "records": [{"partition", "offset", "type", "group", "key", "value"}],  # __consumer_offsets, Kafka-decoded
      "timings": {step: seconds since start},
    }

``description["owners"]`` has every partition of every source topic: task *p* of a subtopology is partition *p* of
each of its source topics (input and repartition topics) that has a partition *p*, owned by the member whose
active tasks hold it. Everything (owners as a list) is also written to ``<workdir>/streams.json``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import zipfile
from pathlib import Path
from typing import Callable

from . import kafka_dist
from .cluster import KafkaCluster, _die_with_parent

APP_ID = "lab-streams-app"
INPUT, OUTPUT, COUNTS = "streams-in", "streams-out", "streams-counts"
PARTS = 4
RECORDS = 20  # per input partition
#: (instance name, stream threads): one KafkaStreams instance is one process of the group, each thread a member
INSTANCES = (("a", 2), ("b", 1))
MEMBER_KEYS = ("member_id", "process_id", "client_id", "client_host")

#: Broker configs: quick streams-group heartbeats (default 5 s) and a short wait before the first assignment.
CLUSTER_OVERRIDES = {
    "broker": {
        "group.streams.min.heartbeat.interval.ms": 1000,
        "group.streams.heartbeat.interval.ms": 1000,
        "group.streams.initial.rebalance.delay.ms": 1000,
    }
}


def _version_tuple(version: str) -> tuple:
    return tuple(int(x) for x in version.split(".")[:2])


def supported(version: str) -> bool:
    """``group.protocol=streams`` exists: Kafka 4.1 (early access) and later."""
    return _version_tuple(version) >= (4, 1)


def cluster_overrides(version: str) -> dict:
    """:data:`CLUSTER_OVERRIDES`, plus on 4.1 (streams groups in early access) the unstable feature and API versions
    turned on, which, set when the storage is formatted, bring ``streams.version=1`` with them."""
    out = {k: dict(v) for k, v in CLUSTER_OVERRIDES.items()}
    if _version_tuple(version) < (4, 2):
        out["broker"].update({"unstable.api.versions.enable": "true", "unstable.feature.versions.enable": "true"})
        out.setdefault("controller", {})["unstable.feature.versions.enable"] = "true"
    return out


class LabStreamsError(RuntimeError):
    """An operation ``LabStreams`` reported as failed."""


class StreamsClient:
    """``StreamsClient(version, bootstrap).call(op, **args)``: the ``LabStreams`` JVM (JSON lines, as LabClient)."""

    def __init__(self, version: str, bootstrap: str, log: Path | None = None):
        self._log = open(log, "a") if log else subprocess.DEVNULL
        here = Path(__file__).parent
        cmd = [
            kafka_dist.java(),
            "-Xmx320m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={here / 'client-log4j2.xml'}",
            f"-Dlog4j.configuration=file:{here / 'client-log4j.properties'}",
            "-cp",
            kafka_dist.streams_java_classpath(version),
            "LabStreams",
            bootstrap,
        ]
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
            preexec_fn=_die_with_parent,
        )
        self._lock = threading.Lock()
        self._next = 0

    def call(self, op: str, **args):
        with self._lock:
            self._next += 1
            self._proc.stdin.write(json.dumps({"id": self._next, "op": op, **args}) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise LabStreamsError(f"LabStreams exited (status {self._proc.poll()}) during {op}")
        resp = json.loads(line)
        if not resp.get("ok"):
            raise LabStreamsError(f"{op}: {resp.get('error')}")
        return resp.get("result")

    def halt(self) -> None:
        """Exit at once, closing nothing (no member leaves its group)."""
        if self._proc.poll() is None:
            try:
                self._proc.stdin.write(json.dumps({"id": 0, "op": "quit"}) + "\n")
                self._proc.stdin.flush()
                self._proc.wait(15)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()
            self._log = subprocess.DEVNULL


# ----------------------------------------------------------------------------------------- from the description
def source_topics(description: dict) -> dict:
    """``{subtopology_id: [source topics, repartition source topics]}``."""
    return {
        s["subtopology_id"]: [*s["source_topics"], *sorted(s["repartition_source_topics"])]
        for s in description["subtopologies"]
    }


def task_count(topics: list[str], partitions: dict) -> int:
    """The tasks of a subtopology: the most partitions among its source topics."""
    return max((partitions[t] for t in topics), default=0)


def owners(description: dict, partitions: dict) -> dict:
    """``{(topic, partition): member}`` for every partition of every source topic whose task is active on a member
    (:data:`MEMBER_KEYS` of it): task *p* of a subtopology is partition *p* of each of its source topics."""
    sources = source_topics(description)
    out = {}
    for m in description["members"]:
        who = {k: m[k] for k in MEMBER_KEYS}
        for task in m["active_tasks"]:
            for p in task["partitions"]:
                for t in sources.get(task["subtopology_id"], []):
                    if p < partitions[t]:
                        out[(t, p)] = who
    return out


def _task_set(tasks: list) -> list:
    return sorted((t["subtopology_id"], p) for t in tasks for p in t["partitions"])


def settled(description: dict, partitions: dict, members: int) -> bool:
    """Stable, ``members`` members, each with tasks and its current active tasks its target, every task of every
    subtopology active on exactly one member."""
    if description["state"].lower() != "stable" or len(description["members"]) != members:
        return False
    held = []
    for m in description["members"]:
        active = _task_set(m["active_tasks"])
        if (
            not active
            or active != _task_set(m["target_active_tasks"])
            or m["member_epoch"] != description["group_epoch"]
        ):
            return False
        held += active
    expected = sorted(
        (s, p) for s, topics in source_topics(description).items() for p in range(task_count(topics, partitions))
    )
    return sorted(held) == expected


def _layout(description: dict) -> list:
    """What must not change while the group is held: members, epochs and tasks."""
    return sorted(
        (m["member_id"], m["member_epoch"], m["process_id"], m["client_id"], tuple(_task_set(m["active_tasks"])))
        for m in description["members"]
    ) + [description["group_epoch"], description["target_assignment_epoch"], description["topology_epoch"]]


def run_streams_lab(
    version: str,
    workdir: Path,
    while_up: Callable[[KafkaCluster], object] | None = None,
    timeout: float = 120,
) -> dict:
    """Run the streams lab on a fresh cluster of ``version`` (4.1+) in ``workdir``; see the module's docstring for
    what it returns."""
    if not supported(version):
        raise ValueError(f"Kafka {version} has no streams groups (group.protocol=streams is 4.1+)")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    timings = {}

    def mark(step: str) -> None:
        timings[step] = round(time.monotonic() - t0, 1)

    kafka_dist.lab_streams(version)  # Maven and javac before the cluster's clock starts
    _dump_log_segments(version)  # for the end
    mark("classpath")
    cluster = KafkaCluster(version, workdir / "cluster", brokers=1, overrides=cluster_overrides(version))
    app = None
    try:
        cluster.start()
        mark("cluster up")
        app = StreamsClient(version, cluster.bootstrap, log=workdir / "labstreams.log")
        app.call("create_topics", names=[INPUT, OUTPUT, COUNTS], partitions=PARTS)
        app.call("produce", topic=INPUT, partitions=PARTS, count=RECORDS)
        for name, threads in INSTANCES:
            app.call(
                "start",
                name=name,
                app_id=APP_ID,
                client_id=f"{APP_ID}-{name}",
                input=INPUT,
                output=OUTPUT,
                counts=COUNTS,
                threads=threads,
                state_dir=str(workdir / "state" / name),
                commit_ms=200,
            )
        mark("streams started")
        deadline = time.monotonic() + timeout
        while not (state := _observe(app))["ready"]:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"streams group never settled in {timeout}s: {json.dumps(_jsonable(state), default=str)[:6000]}"
                )
            time.sleep(0.5)
        mark("settled")
        description, partitions = state["description"], state["partitions"]
        description["owners"] = owners(description, partitions)
        result = {
            "version": version,
            "group": APP_ID,
            "topics": {
                "input": INPUT,
                "output": OUTPUT,
                "counts": COUNTS,
                "sources": sorted(partitions),
                "partitions": partitions,
            },
            "description": description,
            "committed": state["committed"],
            "end_offsets": state["end_offsets"],
            "processed": state["processed"],
        }
        result["while_up"] = while_up(cluster) if while_up else None
        mark("while_up")
        again = app.call("describe", group=APP_ID)
        result["unchanged"] = _layout(again) == _layout(description)
        result["description_again"] = again
    finally:
        if app is not None:
            app.halt()  # the members stay in the group: the log keeps their records as Kafka described them
        cluster.stop()
    mark("stopped")
    dest = workdir / "log-dirs"
    shutil.rmtree(dest, ignore_errors=True)
    result["log_dirs"] = []
    for node in cluster.nodes.values():
        shutil.copytree(node.log_dir, dest / node.dir.name)
        result["log_dirs"].append(dest / node.dir.name)
    mark("copied")
    result["records"] = kafka_records(version, result["log_dirs"])
    mark("decoded")
    result["timings"] = timings
    (workdir / "streams.json").write_text(json.dumps(_jsonable(result), indent=1, default=str))
    return result


DUMP_RECORD = re.compile(r"^\| offset: (\d+) .*? key: (\{.*\}) payload: (.*)$", re.M)


def _dump_log_segments(version: str) -> tuple[str, str]:
    """(classpath, main class) of Kafka's ``kafka-dump-log``: ``kafka.tools.DumpLogSegments`` in the broker's jar up
    to 4.1, ``org.apache.kafka.tools.DumpLogSegments`` in ``kafka-tools`` since."""
    for cp, pattern in (
        (kafka_dist.tools_classpath(version), "kafka-tools-*.jar"),
        (kafka_dist.classpath(version), "kafka_2.13-*.jar"),
    ):
        for jar in cp.glob(pattern):
            names = set(zipfile.ZipFile(jar).namelist())
            for main in ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"):
                if main.replace(".", "/") + ".class" in names:
                    return f"{cp}/*", main
    raise RuntimeError(f"no DumpLogSegments among Kafka {version}'s jars")


def kafka_records(version: str, log_dirs: list[Path]) -> list[dict]:
    """Every record of ``__consumer_offsets`` in ``log_dirs`` as Kafka's ``DumpLogSegments --offsets-decoder``
    decodes it (:func:`_dump_log_segments`):
    ``{"partition", "offset", "type", "group", "key", "value"}``: ``type`` the record type (int), ``group`` the key's
    group id (``groupId``, or ``group`` in OffsetCommit and GroupMetadata keys), ``key`` the key's decoded data,
    ``value`` ``{"version", "data"}`` or None for a tombstone; in log order."""
    segments = sorted(p for d in log_dirs for p in Path(d).glob("__consumer_offsets-*/*.log"))
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
            "--offsets-decoder",
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
        partition = int(Path(path).parent.name.rsplit("-", 1)[1])
        for m in DUMP_RECORD.finditer(text):
            key = json.loads(m.group(2))
            payload = m.group(3).strip()
            out.append(
                {
                    "partition": partition,
                    "offset": int(m.group(1)),
                    "type": int(key["type"]),
                    "group": key["data"].get("groupId", key["data"].get("group")),
                    "key": key["data"],
                    "value": None if payload in ("<DELETE>", "null") else json.loads(payload),
                }
            )
    return out


def _observe(app: StreamsClient) -> dict:
    """One look at the application and the group; ``ready`` once all is processed, committed and settled."""
    out = {"ready": False, "states": app.call("states"), "processed": app.call("processed")}
    try:
        description = app.call("describe", group=APP_ID)
    except LabStreamsError as e:  # the group does not exist yet
        out["error"] = str(e)
        return out
    out["description"] = description
    sources = sorted({t for ts in source_topics(description).values() for t in ts})
    if not sources:
        return out
    try:
        partitions = app.call("partitions", topics=sources)
        ends = app.call("end_offsets", topics=sources)
    except LabStreamsError as e:  # an internal topic not created yet
        out["error"] = str(e)
        return out
    committed = sorted(app.call("committed", group=APP_ID), key=lambda c: (c["topic"], c["partition"]))
    out.update(
        partitions=partitions,
        end_offsets={(e["topic"], e["partition"]): e["offset"] for e in ends},
        committed=committed,
    )
    done = {(c["topic"], c["partition"]): c["offset"] for c in committed}
    members = sum(t for _, t in INSTANCES)
    out["ready"] = (
        all(s == "RUNNING" for s in out["states"].values())
        and sum(out["processed"].values()) == PARTS * RECORDS
        and all(done.get(tp) == end for tp, end in out["end_offsets"].items() if end > 0)
        and settled(description, partitions, members)
    )
    return out


def _jsonable(obj):
    if isinstance(obj, dict):
        return {(f"{k[0]}:{k[1]}" if isinstance(k, tuple) else str(k)): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


# ----------------------------------------------------------------------------------------- the soak's episode
from .scenario import EPISODES, Unclean  # noqa: E402 - scenario imports this module at its end


class StreamsUnclean(Unclean):
    """A streams group (KIP-1071) whose commits sit past a divergence point, in the soak's scenario (4.1+).

    ``setup``: the episode's topic (partitions led by L, replicated to F only), keyed records on every partition, and
    the application ``<episode>.app`` (one KafkaStreams instance with two stream threads, ``group.protocol=streams``,
    the :class:`StreamsClient` topology, internal topics at replication factor 3) started on it; the group commits
    what it processed.  ``isolated`` (F down, L leads): more records, processed and committed by the running
    application (its commits now sit past F's end; one seed in four closes the application first, so that its
    commits sit at F's end, the divergence point), then the instance is closed (its members leave; the group keeps
    its offsets, topology and epoch) and the input partitions are judged: Kafka's consumer resumes from each commit
    with ``auto.offset.reset=none`` as for any group.  ``elected``: the new leader writes none, some, as many or more
    records than were lost, so the new lineage may pass the commits.  Earlier versions: the episode does nothing."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.on = supported(self.sc.version)
        self.app_id = self.g("app")
        self.app: StreamsClient | None = None

    def unclean_partitions(self):
        return [[self.topic, p] for p in range(self.parts)] if self.on else []

    def _produce(self, count: int) -> None:
        assert self.app is not None
        self.app.call("produce", topic=self.topic, partitions=self.parts, count=count)
        self.sc.step("streams produce", topic=self.topic, partitions=self.parts, count=count)

    def _committed_to_end(self, timeout: float = 90) -> list:
        """Wait until the group's commits on the input topic reach its end offsets; returns the commits."""
        assert self.app is not None
        deadline = time.monotonic() + timeout
        while True:
            ends = {e["partition"]: e["offset"] for e in self.app.call("end_offsets", topics=[self.topic])}
            try:
                committed = [c for c in self.app.call("committed", group=self.app_id) if c["topic"] == self.topic]
            except LabStreamsError:  # the group does not exist yet
                committed = []
            if {c["partition"]: c["offset"] for c in committed} == ends:
                self.sc.step("streams committed", group=self.app_id, committed=committed)
                return committed
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.app_id}: commits {committed} never reached the end offsets {ends}")
            time.sleep(0.5)

    def setup(self):
        if not self.on:
            return
        sc, r = self.sc, self.rng
        self.create_topic()
        self.app = StreamsClient(sc.version, sc.cluster.bootstrap, log=sc.workdir / f"{self.name}.labstreams.log")
        out, counts = f"{self.name}.out", f"{self.name}.counts"
        self.app.call("create_topics", names=[out, counts], partitions=self.parts, rf=3)
        self._produce(r.randint(5, 30))
        self.app.call(
            "start",
            name="a",
            app_id=self.app_id,
            client_id=f"{self.app_id}-a",
            input=self.topic,
            output=out,
            counts=counts,
            threads=2,
            state_dir=str(sc.workdir / "streams-state" / self.name),
            commit_ms=200,
            rf=3,
        )
        sc.step("streams started", group=self.app_id, topic=self.topic)
        self._committed_to_end()

    def isolated(self):
        if not self.on:
            return
        sc, r = self.sc, self.rng
        n = r.randint(1, 30)
        self.lost = dict.fromkeys(range(self.parts), n)
        self.past = r.random() < 0.75
        if self.past:  # the application processes and commits what only L holds
            self._produce(n)  # acks=all: F is out of the ISR, L alone holds them
            self._committed_to_end()
        assert self.app is not None
        closed = self.app.call("close", name="a", timeout_ms=30000)
        self.app.halt()
        self.app = None
        sc.step("streams closed", group=self.app_id, closed=closed)
        if not self.past:  # closed at F's end, exactly at the divergence point to come
            for p in range(self.parts):
                sc.call("produce", topic=self.topic, partition=p, count=n, acks="1")
        sc.judge(self.app_id, self.topic, range(self.parts))

    def elected(self):
        if not self.on:
            return
        sc, r = self.sc, self.rng
        for p in range(self.parts):
            n = r.choice([0, r.randint(1, self.lost[p]), self.lost[p], self.lost[p] + r.randint(1, 30)])
            if n:
                sc.call("produce", topic=self.topic, partition=p, count=n, acks="1")

    def recovered(self): ...

    def after(self): ...


EPISODES["streams_unclean"] = StreamsUnclean
KINDS = ("streams_unclean",)
