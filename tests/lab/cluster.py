"""A real KRaft cluster on loopback: one controller and N brokers, each its own ``kafka.Kafka`` JVM.

Ports are picked free at start, log dirs live under a work directory, segments are small so that
segment rolls and ``__consumer_offsets`` compaction really happen. ``stop()`` shuts every node down
cleanly (brokers first, so controlled shutdown reaches the controller); ``kill(node)`` is SIGKILL;
``start_node``/``restart`` bring a node back on its old ports and log dir. Every JVM is started with
``PR_SET_PDEATHSIG`` so it dies with the Python process that started it, and an ``atexit`` hook kills
any node still running: the lab never leaves a JVM behind.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from ..ports import free_port
from . import kafka_dist

CONTROLLER_ID = 100
_LIVE: "weakref.WeakSet[KafkaCluster]" = weakref.WeakSet()

LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders><Console name="STDOUT" target="SYSTEM_OUT">
    <PatternLayout pattern="[%d] %p %m (%c)%n"/></Console></Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.clients" level="WARN"/>
    <Logger name="kafka.log.LogCleaner" level="INFO"/>
    <Root level="INFO"><AppenderRef ref="STDOUT"/></Root>
  </Loggers>
</Configuration>
"""
LOG4J1 = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
"""


def _die_with_parent():  # runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    os.setsid()


def _replace_text(path: Path, text: str) -> None:
    """``path`` holds ``text``: left alone when it already does, else replaced whole (``os.replace``)."""
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def new_cluster_id() -> str:
    """A random cluster id as Kafka's ``Uuid.randomUuid`` makes them: never starting with '-', which
    kafka-storage's argument parser would take for an option."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


@dataclass
class Node:
    node_id: int
    role: str  # "controller" or "broker"
    port: int
    dir: Path
    proc: subprocess.Popen | None = None
    starts: int = 0
    extra_port: int | None = None  # a broker's second client listener (KafkaCluster.extra_listener)

    @property
    def log_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_file(self) -> Path:
        return self.dir / "server.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass(eq=False)
class KafkaCluster:
    """``KafkaCluster(version, workdir, brokers=3)``; ``start()`` returns when every node serves."""

    version: str
    workdir: Path
    brokers: int = 3
    overrides: dict = field(default_factory=dict)
    heap: str = "384m"
    nodes: dict = field(default_factory=dict)
    cluster_id: str = field(default_factory=new_cluster_id)
    #: a second client listener on every broker, e.g. "SASL_SSL" (configure it through ``overrides``)
    extra_listener: str | None = None
    #: extra log4j logger levels, e.g. {"kafka.authorizer.logger": "DEBUG"}
    loggers: dict = field(default_factory=dict)
    #: tiered storage (KIP-405): every broker runs the lab's RemoteStorageManager (``lab.tiered.LabRemoteStorage``,
    #: ``tests/lab/java/tiered``) over :attr:`remote_dir` with the topic-based metadata manager, quick
    #: remote-log-manager and retention tasks (:meth:`tiered_properties`); topics opt in with
    #: ``remote.storage.enable=true``. ``overrides`` still win.
    tiered: bool = False

    def __post_init__(self):
        self.workdir = Path(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.nodes[CONTROLLER_ID] = Node(CONTROLLER_ID, "controller", free_port(), self.workdir / "controller-100")
        for i in range(1, self.brokers + 1):
            self.nodes[i] = Node(
                i,
                "broker",
                free_port(),
                self.workdir / f"broker-{i}",
                extra_port=free_port() if self.extra_listener else None,
            )
        _LIVE.add(self)

    # ----------------------------------------------------------------- config
    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.broker_nodes())

    @property
    def running_bootstrap(self) -> str:
        """Only the brokers that are up (a client given a stopped one logs refused connections)."""
        return ",".join(f"127.0.0.1:{n.port}" for n in self.broker_nodes() if n.running) or self.bootstrap

    def bootstrap_for(self, listener: str) -> str:
        """Bootstrap servers of the brokers' ``extra_listener``."""
        assert listener == self.extra_listener, (listener, self.extra_listener)
        return ",".join(f"127.0.0.1:{n.extra_port}" for n in self.broker_nodes())

    def broker_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.role == "broker"]

    def log_dirs(self) -> list[Path]:
        return [n.log_dir for n in self.nodes.values()]

    @property
    def remote_dir(self) -> Path:
        """A tiered cluster's remote storage: one directory all brokers share (``rsm.config.dir``)."""
        return self.workdir / "remote-storage"

    #: ``__remote_log_metadata``: partitions of a tiered cluster (Kafka's default is 50)
    REMOTE_LOG_METADATA_PARTITIONS = 3

    def tiered_properties(self) -> dict:
        """Broker configs of a tiered cluster, the same keys in 3.9.x and 4.x (``RemoteLogManagerConfig``,
        ``TopicBasedRemoteLogMetadataManagerConfig`` under the ``rlmm.config.`` prefix, ``rsm.config.`` for ours)."""
        rf = min(3, self.brokers)
        return {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "lab.tiered.LabRemoteStorage",
            "rsm.config.dir": str(self.remote_dir),
            "remote.log.metadata.manager.listener.name": "PLAINTEXT",
            "rlmm.config.remote.log.metadata.topic.replication.factor": rf,
            "rlmm.config.remote.log.metadata.topic.num.partitions": self.REMOTE_LOG_METADATA_PARTITIONS,
            # 4.x (default 2): the metadata topic stays writable with one broker up (an unclean election's setting)
            "rlmm.config.remote.log.metadata.topic.min.isr": 1,
            "remote.log.manager.task.interval.ms": 500,
            "remote.log.manager.thread.pool.size": 2,
            "remote.log.manager.copier.thread.pool.size": 1,
            "remote.log.manager.expiration.thread.pool.size": 1,
            "remote.log.reader.threads": 2,
            # local segments deleted soon after upload: the retention check every second, from one second after start
            "log.retention.check.interval.ms": 1000,
            "log.initial.task.delay.ms": 1000,
        }

    def _properties(self, node: Node) -> dict:
        ctl = self.nodes[CONTROLLER_ID]
        rf = min(3, self.brokers)
        common = {
            "node.id": node.node_id,
            "controller.quorum.voters": f"{CONTROLLER_ID}@127.0.0.1:{ctl.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(node.log_dir),
            "num.network.threads": 2,
            "num.io.threads": 2,
            "background.threads": 2,
            "num.recovery.threads.per.data.dir": 1,
        }
        if node.role == "controller":
            return {
                **common,
                "process.roles": "controller",
                "listeners": f"CONTROLLER://127.0.0.1:{node.port}",
                "broker.session.timeout.ms": 4000,
                "broker.heartbeat.interval.ms": 500,
                # the controller refuses a topic with remote.storage.enable=true unless this is set on it too
                **({"remote.log.storage.system.enable": "true"} if self.tiered else {}),
                **self.overrides.get("controller", {}),
            }
        extra = f",{self.extra_listener}://127.0.0.1:{node.extra_port}" if self.extra_listener else ""
        if self.extra_listener:
            common["listener.security.protocol.map"] += f",{self.extra_listener}:{self.extra_listener}"
        return {
            **common,
            "process.roles": "broker",
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port}{extra}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}{extra}",
            "inter.broker.listener.name": "PLAINTEXT",
            "broker.heartbeat.interval.ms": 500,
            "broker.session.timeout.ms": 4000,
            "auto.create.topics.enable": "false",
            "offsets.topic.num.partitions": 5,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.segment.bytes": 1 << 20,
            "transaction.state.log.num.partitions": 2,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.segment.bytes": 1 << 20,
            "group.initial.rebalance.delay.ms": 0,
            "log.segment.bytes": 1 << 20,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 4 << 20,
            "log.cleaner.io.buffer.size": 64 << 10,
            "log.cleaner.backoff.ms": 1000,
            "log.cleaner.min.cleanable.ratio": 0.01,
            "num.replica.fetchers": 1,
            "replica.lag.time.max.ms": 6000,
            "replica.fetch.wait.max.ms": 100,
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": 1,
            # a hot copy sees deleteRecords only once the log start offset is checkpointed (default 60 s)
            "log.flush.start.offset.checkpoint.interval.ms": 1000,
            **(self.tiered_properties() if self.tiered else {}),
            **self.overrides.get("broker", {}),
        }

    def _write_config(self, node: Node) -> Path:
        node.dir.mkdir(parents=True, exist_ok=True)
        path = node.dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self._properties(node).items()))
        log4j2 = LOG4J2
        for k, v in self.loggers.items():
            line = f'    <Logger name="{k}" level="{v}"/>\n'
            if f'<Logger name="{k}" ' in log4j2:
                log4j2 = re.sub(rf'    <Logger name="{re.escape(k)}" level="\w+"/>\n', line, log4j2)
            else:
                log4j2 = log4j2.replace("    <Root ", line + "    <Root ")
        # shared by the nodes: a node starting while another's JVM reads it must never see it half written (a
        # truncated log4j2.xml leaves that JVM without logging, so its start is never seen)
        _replace_text(self.workdir / "log4j2.xml", log4j2)
        _replace_text(
            self.workdir / "log4j.properties",
            LOG4J1 + "".join(f"log4j.logger.{k}={v}\n" for k, v in self.loggers.items()),
        )
        return path

    def _jvm(self, main: str, *args: str) -> list[str]:
        return [
            kafka_dist.java(),
            f"-Xmx{self.heap}",
            "-Xms32m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Xshare:auto",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.xml'}",
            f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp",
            kafka_dist.java_classpath(self.version, with_tiered=self.tiered),
            main,
            *args,
        ]

    # -------------------------------------------------------------- lifecycle
    def format(self) -> None:
        procs = []
        for node in self.nodes.values():
            cfg = self._write_config(node)
            procs.append(
                (
                    node,
                    subprocess.Popen(
                        self._jvm(
                            "kafka.tools.StorageTool",
                            "format",
                            "-t",
                            self.cluster_id,
                            "-c",
                            str(cfg),
                            "--ignore-formatted",
                        ),
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                        preexec_fn=_die_with_parent,
                    ),
                )
            )
        for node, p in procs:
            out, _ = p.communicate(timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"kafka-storage format failed for node {node.node_id}:\n{out}")

    def start(self, timeout: float = 120) -> "KafkaCluster":
        """Format and start every node; returns when each serves. A node that fails to start has every node of
        the cluster killed before the error is raised; on a cluster's first start, a port another process bound
        in the meantime ("Address already in use") gets the whole cluster new ports and a fresh start, twice at
        most."""
        fresh = all(n.starts == 0 for n in self.nodes.values())
        for attempt in range(3):
            self.format()
            for node in self.nodes.values():
                self._spawn(node)
            try:
                for node in self.nodes.values():
                    self._wait_started(node, timeout)
                return self
            except (RuntimeError, TimeoutError):
                self.kill_all()
                if not (fresh and attempt < 2 and any(self._bind_failed(n) for n in self.nodes.values())):
                    raise
            for node in self.nodes.values():
                shutil.rmtree(node.log_dir, ignore_errors=True)
                node.port = free_port()
                if node.extra_port is not None:
                    node.extra_port = free_port()
        raise AssertionError("unreachable")

    @staticmethod
    def _bind_failed(node: Node) -> bool:
        text = node.log_file.read_text(errors="replace") if node.log_file.exists() else ""
        return "Address already in use" in text[text.rfind(f"===== lab: start #{node.starts} ") :]

    def _spawn(self, node: Node) -> None:
        cfg = self._write_config(node)
        node.starts += 1
        with open(node.log_file, "a") as log:
            log.write(f"\n===== lab: start #{node.starts} of node {node.node_id} at {time.time():.3f} =====\n")
            log.flush()
            node.proc = subprocess.Popen(
                self._jvm("kafka.Kafka", str(cfg)),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )

    def _wait_started(self, node: Node, timeout: float) -> None:
        marker = f"===== lab: start #{node.starts} "
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = node.log_file.read_text(errors="replace")
            tail = text[text.rfind(marker) :]
            if "Kafka Server started" in tail:
                return
            if not node.running:
                raise RuntimeError(f"node {node.node_id} exited during start-up; log:\n{tail[-6000:]}")
            time.sleep(0.2)
        raise TimeoutError(f"node {node.node_id} not started in {timeout}s; log: {node.log_file}")

    def start_node(self, node_id: int, timeout: float = 120) -> None:
        node = self.nodes[node_id]
        if node.running:
            return
        self._spawn(node)
        self._wait_started(node, timeout)

    def stop_node(self, node_id: int, timeout: float = 60) -> None:
        """Clean shutdown (SIGTERM: controlled shutdown, flushed logs, clean-shutdown marker)."""
        node = self.nodes[node_id]
        if not node.running:
            return
        node.proc.send_signal(signal.SIGTERM)
        try:
            node.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            node.proc.kill()
            node.proc.wait()

    def kill(self, node_id: int) -> None:
        """SIGKILL: no controlled shutdown, no flush, no clean-shutdown marker; the log is recovered at restart."""
        node = self.nodes[node_id]
        if node.running:
            node.proc.kill()
            node.proc.wait()

    def move(self, node_id: int, timeout: float = 120) -> int:
        """Stop a broker cleanly and start it again on a new port (a new advertised address, as after a
        redeployment); returns the new port."""
        self.stop_node(node_id)
        node = self.nodes[node_id]
        node.port = free_port()
        if node.extra_port is not None:
            node.extra_port = free_port()
        self.start_node(node_id, timeout)
        return node.port

    def restart(self, node_id: int) -> None:
        self.stop_node(node_id)
        self.start_node(node_id)

    def stop(self) -> None:
        """Every broker, then the controller, shut down cleanly."""
        for node in self.broker_nodes():
            if node.running:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.broker_nodes():
            if node.proc is not None:
                try:
                    node.proc.wait(60)
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait()
        self.stop_node(CONTROLLER_ID)

    def kill_all(self) -> None:
        for node in self.nodes.values():
            if node.running:
                node.proc.kill()
                node.proc.wait()

    def running_brokers(self) -> list[int]:
        return [n.node_id for n in self.broker_nodes() if n.running]

    def logs_tail(self, chars: int = 3000) -> str:
        return "\n".join(
            f"--- node {n.node_id} ---\n{n.log_file.read_text(errors='replace')[-chars:]}"
            for n in self.nodes.values()
            if n.log_file.exists()
        )


def lab_jvms(workdir: Path) -> list[int]:
    """PIDs of processes whose command line names this workdir (a JVM left running)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if str(workdir) in (d / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


@atexit.register
def _kill_leftovers():
    for c in list(_LIVE):
        c.kill_all()
