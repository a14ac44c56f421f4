"""Python side of ``tests/lab/java/LabClient.java``: Kafka's Java clients as a JSON-lines subprocess."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

from . import kafka_dist
from .cluster import _die_with_parent


class LabError(RuntimeError):
    """An operation the Java client reported as failed (``error`` is ``Class: message``)."""


class LabClient:
    """``LabClient(version, bootstrap).call(op, **args)``: one long-lived JVM running Kafka's clients."""

    def __init__(self, version: str, bootstrap: str, log: Path | None = None):
        self.version = version
        self._log = open(log, "a") if log else subprocess.DEVNULL
        cmd = [
            kafka_dist.java(),
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            f"-Dlog4j2.configurationFile={Path(__file__).parent / 'client-log4j2.xml'}",
            f"-Dlog4j.configuration=file:{Path(__file__).parent / 'client-log4j.properties'}",
            "-cp",
            kafka_dist.java_classpath(version, with_client=True),
            "LabClient",
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
        """Run one operation; returns its ``result``; raises :class:`LabError` when Kafka refused it."""
        with self._lock:
            self._next += 1
            self._proc.stdin.write(json.dumps({"id": self._next, "op": op, **args}) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise LabError(f"LabClient exited (status {self._proc.poll()}) during {op}")
        resp = json.loads(line)
        if not resp.get("ok"):
            raise LabError(f"{op}: {resp.get('error')}")
        return resp.get("result")

    def try_call(self, op: str, **args):
        """``call`` that returns the error text instead of raising."""
        try:
            return self.call(op, **args), None
        except LabError as e:
            return None, str(e)

    def close(self):
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def out_of_range_commits(lab: "LabClient", topic: str) -> None:
    """A 3-partition topic of 30 records each, consumer group ``app`` caught up, and two findings:
    ``replayer`` committed past the log end of partition 0, ``archiver`` below the log start of partition 1
    (after ``deleteRecords``).  The clean-and-broken baseline of the live-mode lab tests."""
    lab.call("create_topic", topic=topic, partitions=3, rf=3)
    for p in range(3):
        lab.call("produce", topic=topic, partition=p, count=30, acks="all")
    lab.call("consume_commit", group="app", topics=[topic])
    lab.call("alter_offsets", group="replayer", offsets=[{"topic": topic, "partition": 0, "offset": 95}])
    lab.call("alter_offsets", group="archiver", offsets=[{"topic": topic, "partition": 1, "offset": 3}])
    lab.call("delete_records", topic=topic, partition=1, before=10)
