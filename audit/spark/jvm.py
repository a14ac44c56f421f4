"""The driver JVM's options and its class-data archive (start-up time of an embedded driver)."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import time

from pyspark.sql import SparkSession


__all__ = [
    "METASPACE_JAVA_OPTION",
    "QUICK_START_JAVA_OPTIONS",
    "SMALL_MACHINE_CPUS",
    "SMALL_MACHINE_JAVA_OPTIONS",
    "STALE_DUMP_SECONDS",
    "ClassDataArchive",
    "ResolvedPackages",
    "available_cpus",
    "driver_java_options",
    "heap_java_options",
    "pid_alive",
    "quick_start_java_options",
    "single_jvm_master",
]


#: JVM options for an embedded local driver in ``--mode latest`` (``KOA_DRIVER_JAVA_OPTIONS`` overrides;
#: set it empty to keep the JVM's defaults).  C1-only JIT: such a run is short Spark jobs over small tables,
#: where C2 compiler threads cost more than they win on few cores.  Not used for ``--mode history``, whose JVM
#: work grows with the number of commits.  C1-only also shrinks the default code cache, which one audit with
#: reports nearly fills (the JVM then stops compiling), so it gets 240 MiB.  Measurements: docs/benchmarks.md.
QUICK_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
#: added to :data:`QUICK_START_JAVA_OPTIONS` on a machine of at most :data:`SMALL_MACHINE_CPUS` CPUs: one JIT
#: compiler thread and the serial collector, so the JVM's own threads leave the cores to the audit's tasks and
#: planning.  On more cores the defaults stay: ``local[*]`` runs more task threads there, which a
#: single-threaded collector would stall.
SMALL_MACHINE_JAVA_OPTIONS = "-XX:CICompilerCount=1 -XX:+UseSerialGC"
SMALL_MACHINE_CPUS = 2


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def quick_start_java_options(cpus: int | None = None) -> str:
    """Return :data:`QUICK_START_JAVA_OPTIONS`, plus :data:`SMALL_MACHINE_JAVA_OPTIONS` on a small machine.

    :data:`SMALL_MACHINE_JAVA_OPTIONS` is added when ``cpus`` (default :func:`available_cpus`) is at most
    :data:`SMALL_MACHINE_CPUS`.
    """
    cpus = available_cpus() if cpus is None else cpus
    return QUICK_START_JAVA_OPTIONS + (" " + SMALL_MACHINE_JAVA_OPTIONS if cpus <= SMALL_MACHINE_CPUS else "")


#: the driver's metaspace size at which the first full collection runs: the JVM's default (about 21 MB) is passed
#: while Spark loads its classes, and each raise of that mark is a full collection (one of 130 ms in a small audit)
METASPACE_JAVA_OPTION = "-XX:MetaspaceSize=256m"


def _size_mib(size: str) -> int | None:
    """Return the MiB of a Spark memory size (``spark.driver.memory``: ``2g``, ``1536m``, ``1024`` = MiB).

    None when it does not parse.
    """
    import re

    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", size.lower())
    if not m:
        return None
    n, unit = int(m.group(1)), m.group(2) or "m"
    return {"k": n // 1024, "m": n, "g": n << 10, "t": n << 20}[unit]


def heap_java_options(driver_memory: str) -> str:
    """Return an initial heap of half ``driver_memory`` (``-Xms``) and :data:`METASPACE_JAVA_OPTION`.

    These are for a driver of a quick-start run.  The JVM otherwise starts with 1/64 of the machine's memory as
    heap, of which a third is young generation: a small audit allocates some 5 GB (task binaries' broadcast
    chunks, sort and aggregation pages, planning), which then takes 40-odd young collections, each copying the
    same survivors, and full ones as the old generation grows.  Only the initial size changes: the maximum stays
    ``driver_memory``.  Empty when ``driver_memory`` does not parse or is under 256 MiB.
    """
    mib = _size_mib(driver_memory)
    if mib is None or mib < 256:
        return ""
    return f"-Xms{mib // 2}m {METASPACE_JAVA_OPTION}"


def driver_java_options(
    master: str, quick_start: bool, launching: bool, driver_memory: str | None = None
) -> str | None:
    """Return the ``spark.driver.extraJavaOptions`` to set, or None.

    Only when this process starts the driver JVM (on this machine: ``local*``, or client mode to a cluster's
    master, whose driver plans and schedules here); ``KOA_DRIVER_JAVA_OPTIONS`` (even empty) wins over
    :func:`quick_start_java_options` (plus :func:`heap_java_options` of ``driver_memory`` when given); a
    client-mode driver to a cluster gets them too.
    """
    if not launching:
        return None
    default = ""
    if quick_start:
        default = " ".join(
            o for o in (quick_start_java_options(), heap_java_options(driver_memory) if driver_memory else "") if o
        )
    opts = os.environ.get("KOA_DRIVER_JAVA_OPTIONS", default)
    return opts.strip() or None


def _cache_dir(name: str) -> str:
    """``$XDG_CACHE_HOME/kafka-offset-audit/<name>`` (else ``~/.cache/kafka-offset-audit/<name>``)."""
    return os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kafka-offset-audit", name
    )


def _artifact(jar_name: str) -> str:
    """``hadoop-client-api-3.5.0.jar`` -> ``hadoop-client-api``: a jar's artifact, without its version."""
    import re

    m = re.match(r"(.+?)-\d", jar_name)
    return m.group(1) if m else jar_name.removesuffix(".jar")


def _spark_artifacts() -> set[str]:
    from pyspark.find_spark_home import _find_spark_home

    return {_artifact(os.path.basename(j)) for j in glob.glob(os.path.join(_find_spark_home(), "jars", "*.jar"))}


def single_jvm_master(master: str | None) -> bool:
    """Whether ``master`` (None: ``KOA_SPARK_MASTER``, else ``local[*]``) runs the executor inside the driver's JVM.

    ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: yes. ``local-cluster[...]`` and cluster masters: no.
    """
    m = master or os.environ.get("KOA_SPARK_MASTER", "local[*]")
    return m == "local" or m.startswith("local[")


class ResolvedPackages:
    """The local jars an earlier run's ``spark.jars.packages`` resolved to, kept for drivers on a local master.

    A driver given ``spark.jars.packages`` resolves them through ivy, then serves every jar to its executor
    through its file server, which copies each into a new ``userFiles-*`` directory, even in local mode where the
    executor runs in the driver's own JVM. ``hadoop-aws`` brings the 686 MB AWS SDK bundle: each local run with an
    ``s3a://`` path spent 4-5 s more starting its session (on a 2-core machine, a session and one job: 13.6-15.5 s,
    against 9.7-10.5 s with the same jars on the class path). On a local master the jars of an earlier resolution
    go on the driver's class path instead (``spark.driver.extraClassPath``); any other master still gets
    ``spark.jars.packages``, for its executors. The list is kept in
    ``$XDG_CACHE_HOME/kafka-offset-audit/packages`` (else ``~/.cache/...``), one file per set of coordinates and
    Spark version, and is used only while every jar in it still exists. A jar of a library Spark ships itself
    (``hadoop-client-api``, ``snappy-java`` ...) is left out, in whatever version: ``spark.jars``' class loader
    asks Spark's own first, and the class path keeps it that way.
    """

    def __init__(self, packages: list[str], directory: str | None = None):
        import pyspark

        self.packages = sorted(packages)
        key = hashlib.sha256(f"{pyspark.__version__}\n{','.join(self.packages)}".encode()).hexdigest()[:16]
        self.path = os.path.join(directory or _cache_dir("packages"), f"{key}.txt")

    @classmethod
    def for_master(cls, packages: list[str] | None, master: str | None) -> "ResolvedPackages | None":
        """Return the kept resolution of ``packages`` for a driver on ``master``.

        None without packages or on a master whose executors are JVMs of their own (:func:`single_jvm_master`).
        """
        return cls(packages) if packages and single_jvm_master(master) else None

    def jars(self) -> list[str] | None:
        """Return the kept jar paths, or None when none are kept or one of them is gone."""
        try:
            with open(self.path) as f:
                jars = [line.strip() for line in f if line.strip()]
        except OSError:
            return None
        return jars if jars and all(os.path.isfile(j) for j in jars) else None

    def record(self, spark: SparkSession) -> None:
        """Keep the jars ``spark`` (a session started with ``spark.jars.packages``) resolved.

        A file it cannot write is left unwritten: the next run resolves again.
        """
        from urllib.parse import unquote, urlparse

        uris = spark.sparkContext.getConf().get("spark.jars", "") or ""
        jars = [unquote(urlparse(u).path) if u.startswith("file:") else u for u in uris.split(",") if u.strip()]
        if not jars or not all(os.path.isfile(j) for j in jars):
            return
        # spark.jars' loader asks Spark's own first: a library Spark has (in any version) stays Spark's
        own = _spark_artifacts()
        jars = [j for j in jars if _artifact(os.path.basename(j).split("_", 1)[-1]) not in own]
        if not jars:
            return
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            tmp = f"{self.path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write("\n".join(jars) + "\n")
            os.replace(tmp, self.path)
        except OSError:
            pass


#: a dump whose JVM has not ended after this long (seconds) is given up and removed
STALE_DUMP_SECONDS = 3600
_CDS_LOG = (
    "-Xlog:cds*=off"  # the JVM's CDS warnings (a class it cannot archive, a mismatched archive) stay off the console
)


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` of this host exists (a pid of 0 or less: no)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ClassDataArchive:
    """The embedded driver JVM's AppCDS archive (JDK 13+ dynamic archive, JEP 350), kept in a cache directory.

    A Spark driver loads thousands of classes; from a class-data archive they are mapped, already parsed and
    verified, instead (docs/benchmarks.md: about 3 s of a small audit).  The first run on a
    machine (for this JDK, these pyspark jars and ``--packages``) starts its JVM with ``-XX:ArchiveClassesAtExit``;
    that JVM writes the archive (some 180 MB, about 10 s) after the audit's process has ended.  The next run checks the finished file with a JVM of its own (``-Xshare:on
    -XX:+VerifySharedSpaces``: a JVM mapping a truncated archive crashes, so an unchecked file is never used) and
    moves it into place; from then on runs start with ``-XX:SharedArchiveFile``.  The JVM checks the archive
    against its own build and class path and, should they differ, loads classes as usual.  Results never
    change: only where classes are loaded from.  ``KOA_CDS=off`` turns it off (worth it where every run starts
    with an empty cache, as in a throw-away container); ``KOA_CDS_DIR`` names the directory (default
    ``$XDG_CACHE_HOME/kafka-offset-audit/cds``, else ``~/.cache/kafka-offset-audit/cds``).
    """

    def __init__(self, directory: str, key: str, java: str):
        self.directory = directory
        self.java = java
        self.path = os.path.join(directory, f"spark-driver-{key}.jsa")
        self.dump_path: str | None = None

    @classmethod
    def for_this_install(
        cls, packages: list[str] | None = None, class_path: list[str] | None = None
    ) -> "ClassDataArchive | None":
        """Return the archive for the JVM spark-submit would start and pyspark's jars.

        Its key holds ``packages`` and the jars put on the driver's class path (``class_path``,
        :class:`ResolvedPackages`) too.  The JVM is ``$JAVA_HOME/bin/java``, else ``java`` on the PATH, as Spark's
        ``spark-class`` picks it.  None when turned off, under spark-submit, when no JDK is found, or when the cache
        directory cannot be created or written.
        """
        if (
            os.environ.get("KOA_CDS", "on").lower() in ("off", "0", "false", "no")
            or "PYSPARK_GATEWAY_PORT" in os.environ
        ):
            return None  # turned off, or under spark-submit (its JVM runs already)
        java = (
            os.path.join(os.environ["JAVA_HOME"], "bin", "java")
            if os.environ.get("JAVA_HOME")
            else shutil.which("java")
        )
        if not java or not os.path.exists(java):
            return None
        java_home = os.path.dirname(os.path.dirname(os.path.realpath(java)))
        h = hashlib.sha256()
        for f in [os.path.join(java_home, "release")] + glob.glob(
            os.path.join(java_home, "lib", "server", "libjvm.so")
        ):
            try:
                st = os.stat(f)
                h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
            except OSError:
                pass
        import pyspark
        from pyspark.find_spark_home import _find_spark_home

        h.update(f"pyspark {pyspark.__version__}\n".encode())
        for jar in sorted(glob.glob(os.path.join(_find_spark_home(), "jars", "*.jar"))):
            h.update(f"{os.path.basename(jar)}:{os.path.getsize(jar)}\n".encode())
        h.update(",".join(packages or []).encode())
        if class_path:
            h.update(("\nclass path " + os.pathsep.join(class_path)).encode())
        cache = os.environ.get("KOA_CDS_DIR") or _cache_dir("cds")
        try:
            os.makedirs(cache, exist_ok=True)
        except OSError:
            return None
        if not os.access(cache, os.W_OK):
            return None
        return cls(cache, h.hexdigest()[:16], java)

    def ready(self) -> bool:
        return os.path.isfile(self.path) and os.path.getsize(self.path) > 0

    def java_options(self) -> str:
        """Return the driver's options for the class data archive.

        ``-XX:SharedArchiveFile`` when the archive is in place (after promoting a finished dump,
        :meth:`promote_finished_dumps`); else ``-XX:ArchiveClassesAtExit`` to a file of this process, unless another
        run's JVM is writing one now (then nothing).
        """
        if not self.ready() and self.promote_finished_dumps() == "dumping":
            return ""
        if self.ready():
            return f"-XX:SharedArchiveFile={self.path} {_CDS_LOG}"
        self.dump_path = f"{self.path[:-4]}.dumping-{os.getpid()}.jsa"
        return f"-XX:ArchiveClassesAtExit={self.dump_path} -XX:+VerifySharedSpaces {_CDS_LOG}"

    def record_jvm(self, spark: SparkSession) -> None:
        """Note, for a run that dumps, its JVM's pid and class path beside the dump (``<dump>.json``).

        The next run then knows when the JVM has ended and can check the file with the same class path.
        """
        if self.dump_path is None:
            return
        import json

        jvm = spark.sparkContext._jvm
        info = {
            "pid": int(jvm.ProcessHandle.current().pid()),  # type: ignore[union-attr]
            "class_path": str(jvm.System.getProperty("java.class.path")),  # type: ignore[union-attr]
        }
        tmp = f"{self.dump_path}.json.tmp"
        with open(tmp, "w") as f:
            json.dump(info, f)
        os.replace(tmp, f"{self.dump_path}.json")

    def promote_finished_dumps(self) -> str | None:
        """Check each earlier run's dump whose JVM has ended and move the first good one into place.

        Bad and given-up dumps are removed.

        Returns
        -------
        str or None
            "dumping" while another run's JVM is still writing one, else None.
        """
        import json
        import subprocess
        import tempfile

        busy = None
        for orphan in glob.glob(f"{self.path[:-4]}.dumping-*.jsa"):  # a run that failed before recording its JVM
            try:
                if not os.path.exists(f"{orphan}.json") and time.time() - os.path.getmtime(orphan) > STALE_DUMP_SECONDS:
                    os.remove(orphan)
            except OSError:
                pass
        for meta in sorted(glob.glob(f"{self.path[:-4]}.dumping-*.jsa.json")):
            dump = meta[:-5]
            try:
                with open(meta) as f:
                    info = json.load(f)
                age = time.time() - os.path.getmtime(meta)
            except (OSError, ValueError):
                continue
            if pid_alive(int(info.get("pid", 0))) and age < STALE_DUMP_SECONDS:
                busy = "dumping"
                continue
            good = False
            if not self.ready() and os.path.isfile(dump) and os.path.getsize(dump) > 0:
                with tempfile.TemporaryDirectory(prefix="koa-cds-check-") as tmp:
                    try:
                        good = (
                            subprocess.run(
                                [
                                    self.java,
                                    "-Xshare:on",
                                    f"-XX:SharedArchiveFile={dump}",
                                    "-XX:+VerifySharedSpaces",
                                    "-XX:-CreateCoredumpOnCrash",
                                    f"-XX:ErrorFile={tmp}/hs_err.log",
                                    "-cp",
                                    info["class_path"],
                                    "-version",
                                ],
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL,
                                cwd=tmp,
                                timeout=60,
                            ).returncode
                            == 0
                        )
                    except (OSError, subprocess.SubprocessError, KeyError):
                        good = False
            try:
                if good:
                    os.replace(dump, self.path)
                elif os.path.exists(dump):
                    os.remove(dump)
                os.remove(meta)
            except OSError:
                pass
        return busy
