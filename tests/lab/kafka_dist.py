"""Kafka from Maven Central: one cached classpath per tested version, and the lab's Java helper.

``tests/lab/pom.xml`` declares the broker (``kafka_2.13``: ``kafka.Kafka``, ``kafka.tools.StorageTool``,
``kafka.tools.DumpLogSegments``), ``kafka-clients`` and a logging backend. :func:`classpath` runs
``mvn -q dependency:copy-dependencies`` for a version into the git-ignored ``tests/lab/.cache/`` the first
time it is asked for, and :func:`lab_client` compiles ``tests/lab/java/LabClient.java`` with ``javac``
against that version's ``kafka-clients`` (the oracle and the Java committer).  Kafka Streams has a classpath of its
own (:func:`streams_classpath`: the same pom with its ``streams`` profile) and :func:`lab_streams` compiles
``tests/lab/java/streams/*.java`` against it.

Environment: ``KOA_LAB_VERSIONS`` (comma-separated, default :data:`DEFAULT_VERSIONS`), ``KOA_LAB_EVERY_VERSION``
(``1``: every feature test on every version, not one each), ``KOA_LAB_CACHE``
(cache directory), ``MVN`` / ``JAVA`` / ``JAVAC`` (the tools' paths).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

LAB = Path(__file__).resolve().parent
POM = LAB / "pom.xml"
JAVA_SRC = LAB / "java"
CACHE = Path(os.environ.get("KOA_LAB_CACHE", LAB / ".cache"))

#: The newest 4.x and the newest 3.9.x that resolve from Maven Central with their dependencies.
DEFAULT_VERSIONS = ("4.4.0", "3.9.2")


def versions() -> list[str]:
    """The Kafka versions the lab tests run against (``KOA_LAB_VERSIONS`` or :data:`DEFAULT_VERSIONS`)."""
    raw = os.environ.get("KOA_LAB_VERSIONS", "")
    return [v.strip() for v in raw.split(",") if v.strip()] or list(DEFAULT_VERSIONS)


def feature_versions(index: int) -> list[str]:
    """The version a feature test runs against: one of :func:`versions`, picked by ``index`` so that the feature
    tests share the versions out among them (each version brings up its own clusters; the differential test,
    Kafka's consumer as the judge, runs on every version). ``KOA_LAB_EVERY_VERSION=1``: every version."""
    every = versions()
    if os.environ.get("KOA_LAB_EVERY_VERSION") == "1":
        return every
    return [every[index % len(every)]]


def major(version: str) -> int:
    return int(version.split(".")[0])


def _logging_backend(version: str) -> list[str]:
    # Kafka 4.x logs through log4j2, 3.x through reload4j (both behind SLF4J 1.7).
    if major(version) >= 4:
        return ["-Dlog.groupId=org.apache.logging.log4j", "-Dlog.artifactId=log4j-slf4j-impl", "-Dlog.version=2.25.3"]
    return ["-Dlog.groupId=org.slf4j", "-Dlog.artifactId=slf4j-reload4j", "-Dlog.version=1.7.36"]


def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "w")
    fcntl.flock(fh, fcntl.LOCK_EX)
    return fh


def _resolved(name: str, pom: Path, version: str, expect: str, extra: list[str] = ()) -> Path:
    """``CACHE/<name>``: the dependencies of ``pom`` at ``-Dkafka.version=version``, copied there by Maven the first
    time (under a lock, through a partial directory renamed when complete).  ``expect``: a jar glob that must be
    among them.  Raises ``RuntimeError`` with Maven's output when they do not resolve."""
    target = CACHE / name
    done = target / ".complete"
    if done.exists():
        return target
    with _locked(CACHE / f".{name}.lock"):
        if done.exists():
            return target
        tmp = CACHE / f".{name}.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [
            os.environ.get("MVN", "mvn"),
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-Dkafka.version={version}",
            f"-DoutputDirectory={tmp}",
            *extra,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not any(tmp.glob(expect)):
            raise RuntimeError(
                f"Maven could not resolve {name}: {' '.join(cmd)}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
            )
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        done.write_text(version)
    return target


def classpath(version: str) -> Path:
    """The directory of jars for ``version``, resolved by Maven into the cache on first use.

    Raises ``RuntimeError`` with Maven's output when the version does not resolve.
    """
    return _resolved(f"kafka-{version}", POM, version, "kafka_2.13-*.jar", _logging_backend(version))


TOOLS_POM = LAB / "tools-pom.xml"


def tools_classpath(version: str) -> Path:
    """The directory of jars of Kafka ``version``'s command-line tools (``kafka-tools``: ``kafka-consumer-groups``
    is ``org.apache.kafka.tools.consumer.group.ConsumerGroupCommand``), resolved by Maven from
    ``tests/lab/tools-pom.xml`` into the cache on first use.  Raises ``RuntimeError`` with Maven's output when the
    version does not resolve."""
    return _resolved(f"kafka-tools-{version}", TOOLS_POM, version, "kafka-tools-*.jar")


#: the JVM options of a Kafka command-line tool's run (a few requests, then exit), as the lab's other JVMs start:
#: the heap of Kafka's scripts (``kafka-run-class.sh``: 256 MiB), C1-only JIT and the serial collector, where the
#: JVM's defaults (G1, the full JIT) cost such a short run more CPU than they save; nothing the tool does changes
TOOL_JVM_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")


def consumer_groups_command(version: str, bootstrap: str, *args: str) -> list[str]:
    """The command line of Kafka ``version``'s ``kafka-consumer-groups --bootstrap-server bootstrap args...``
    (ConsumerGroupCommand from :func:`tools_classpath`)."""
    return [
        java(),
        *TOOL_JVM_OPTIONS,
        "-cp",
        f"{tools_classpath(version)}/*",
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "--bootstrap-server",
        bootstrap,
        *args,
    ]


def share_groups_command(version: str, bootstrap: str, *args: str) -> list[str]:
    """The command line of Kafka ``version``'s ``kafka-share-groups --bootstrap-server bootstrap args...``
    (ShareGroupCommand from :func:`tools_classpath`: share groups, Kafka 4.x; ``--reset-offsets --from-file`` from
    4.4 on)."""
    return [
        java(),
        *TOOL_JVM_OPTIONS,
        "-cp",
        f"{tools_classpath(version)}/*",
        "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
        "--bootstrap-server",
        bootstrap,
        *args,
    ]


def java() -> str:
    return os.environ.get("JAVA", "java")


def lab_client(version: str) -> Path:
    """Compile ``tests/lab/java/*.java`` against ``version``'s clients; returns the classes directory."""
    return _compiled(f"labclient-{version}", sorted(JAVA_SRC.glob("*.java")), classpath(version), version)


def lab_tiered(version: str) -> Path:
    """Compile ``tests/lab/java/tiered/*.java`` (``lab.tiered.LabRemoteStorage``, the lab's KIP-405
    ``RemoteStorageManager``) against ``version``'s ``kafka-storage-api``; returns the classes directory, which a
    tiered cluster (``KafkaCluster(tiered=True)``) puts on its brokers' classpath."""
    return _compiled(f"labtiered-{version}", sorted((JAVA_SRC / "tiered").glob("*.java")), classpath(version), version)


def streams_classpath(version: str) -> Path:
    """The directory of jars for ``version`` with Kafka Streams (``kafka-streams`` and its ``rocksdbjni``) besides
    the broker and clients: ``tests/lab/pom.xml`` with its ``streams`` profile, resolved by Maven into the cache on
    first use.  A directory of its own, so that the brokers' classpath (:func:`classpath`) stays as it is."""
    return _resolved(
        f"kafka-streams-{version}", POM, version, "kafka-streams-*.jar", [*_logging_backend(version), "-Pstreams"]
    )


def lab_streams(version: str) -> Path:
    """Compile ``tests/lab/java/streams/*.java`` (``LabStreams``) against :func:`streams_classpath`; returns the
    classes directory."""
    return _compiled(
        f"labstreams-{version}", sorted((JAVA_SRC / "streams").glob("*.java")), streams_classpath(version), version
    )


def streams_java_classpath(version: str) -> str:
    """``-cp`` of a ``LabStreams`` JVM."""
    return os.pathsep.join([str(lab_streams(version)), f"{streams_classpath(version)}/*"])


def _compiled(name: str, sources: list[Path], cp: Path, version: str) -> Path:
    """``CACHE/<name>``: ``sources`` compiled against the jars in ``cp`` (again whenever a source changed)."""
    out = CACHE / name
    stamp = out / ".stamp"
    key = "\n".join(f"{p.name}:{p.stat().st_mtime_ns}:{p.stat().st_size}" for p in sources)
    if stamp.exists() and stamp.read_text() == key:
        return out
    with _locked(CACHE / f".{name}.lock"):
        if stamp.exists() and stamp.read_text() == key:
            return out
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        cmd = [
            os.environ.get("JAVAC", "javac"),
            "-nowarn",
            "-encoding",
            "UTF-8",
            "-d",
            str(out),
            "-cp",
            f"{cp}/*",
            *map(str, sources),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"javac failed for Kafka {version}:\n{proc.stdout}\n{proc.stderr}")
        stamp.write_text(key)
    return out


def java_classpath(version: str, with_client: bool = False, with_tiered: bool = False) -> str:
    parts = [f"{classpath(version)}/*"]
    if with_client:
        parts.insert(0, str(lab_client(version)))
    if with_tiered:
        parts.append(str(lab_tiered(version)))
    return os.pathsep.join(parts)
