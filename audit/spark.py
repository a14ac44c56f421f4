"""SparkSession for the embedded (local) mode and for spark-submit."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import shutil
import sys
import time

from pyspark.sql import SparkSession


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
    """:data:`QUICK_START_JAVA_OPTIONS`, plus :data:`SMALL_MACHINE_JAVA_OPTIONS` when ``cpus`` (default
    :func:`available_cpus`) is at most :data:`SMALL_MACHINE_CPUS`."""
    cpus = available_cpus() if cpus is None else cpus
    return QUICK_START_JAVA_OPTIONS + (" " + SMALL_MACHINE_JAVA_OPTIONS if cpus <= SMALL_MACHINE_CPUS else "")


#: the driver's metaspace size at which the first full collection runs: the JVM's default (about 21 MB) is passed
#: while Spark loads its classes, and each raise of that mark is a full collection (one of 130 ms in a small audit)
METASPACE_JAVA_OPTION = "-XX:MetaspaceSize=256m"


def _size_mib(size: str) -> int | None:
    """MiB of a Spark memory size (``spark.driver.memory``: ``2g``, ``1536m``, ``1024`` = MiB); None when it
    does not parse."""
    import re

    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", size.lower())
    if not m:
        return None
    n, unit = int(m.group(1)), m.group(2) or "m"
    return {"k": n // 1024, "m": n, "g": n << 10, "t": n << 20}[unit]


def heap_java_options(driver_memory: str) -> str:
    """An initial heap of half ``driver_memory`` (``-Xms``) and :data:`METASPACE_JAVA_OPTION`, for a driver of a
    quick-start run.  The JVM otherwise starts with 1/64 of the machine's memory as heap, of which a third is young
    generation: a small audit allocates some 5 GB (task binaries' broadcast chunks, sort and aggregation pages,
    planning), which then takes 40-odd young collections, each copying the same survivors, and full ones as the old
    generation grows.  Only the initial size changes: the maximum stays ``driver_memory``.  Empty when
    ``driver_memory`` does not parse or is under 256 MiB."""
    mib = _size_mib(driver_memory)
    if mib is None or mib < 256:
        return ""
    return f"-Xms{mib // 2}m {METASPACE_JAVA_OPTION}"


def driver_java_options(
    master: str, quick_start: bool, launching: bool, driver_memory: str | None = None
) -> str | None:
    """``spark.driver.extraJavaOptions`` to set, or None: only when this process starts the driver JVM (on this
    machine: ``local*``, or client mode to a cluster's master, whose driver plans and schedules here);
    ``KOA_DRIVER_JAVA_OPTIONS`` (even empty) wins over :func:`quick_start_java_options` (plus
    :func:`heap_java_options` of ``driver_memory`` when given); a client-mode driver to a cluster gets them too."""
    if not launching:
        return None
    default = ""
    if quick_start:
        default = " ".join(
            o for o in (quick_start_java_options(), heap_java_options(driver_memory) if driver_memory else "") if o
        )
    opts = os.environ.get("KOA_DRIVER_JAVA_OPTIONS", default)
    return opts.strip() or None


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
    def for_this_install(cls, packages: list[str] | None = None) -> "ClassDataArchive | None":
        """The archive for the JVM spark-submit would start (``$JAVA_HOME/bin/java``, else ``java`` on the
        PATH, as Spark's ``spark-class`` picks it) and pyspark's jars; None when turned off, under spark-submit,
        when no JDK is found, or when the cache directory cannot be created or written."""
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
        cache = os.environ.get("KOA_CDS_DIR") or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
            "kafka-offset-audit",
            "cds",
        )
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
        """The driver's options: ``-XX:SharedArchiveFile`` when the archive is in place (after promoting a
        finished dump, :meth:`promote_finished_dumps`); else ``-XX:ArchiveClassesAtExit`` to a file of this
        process, unless another run's JVM is writing one now (then nothing)."""
        if not self.ready() and self.promote_finished_dumps() == "dumping":
            return ""
        if self.ready():
            return f"-XX:SharedArchiveFile={self.path} {_CDS_LOG}"
        self.dump_path = f"{self.path[:-4]}.dumping-{os.getpid()}.jsa"
        return f"-XX:ArchiveClassesAtExit={self.dump_path} -XX:+VerifySharedSpaces {_CDS_LOG}"

    def record_jvm(self, spark: SparkSession) -> None:
        """For a run that dumps: note its JVM's pid and class path beside the dump (``<dump>.json``), so the next
        run knows when the JVM has ended and can check the file with the same class path."""
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
        """Check each earlier run's dump whose JVM has ended and move the first good one into place; remove bad
        and given-up ones.  Returns "dumping" while another run's JVM is still writing one, else None."""
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


#: the directory holding ``sitecustomize.py``, the start-up hook of the Python processes Spark starts (on their
#: path through the JVM's ``PYTHONPATH``; never imported by the audit itself)
WORKER_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_site")


@contextlib.contextmanager
def _worker_site(apply: bool):
    """While the driver JVM starts, :data:`WORKER_SITE` first on ``PYTHONPATH`` if ``apply``: Spark appends the
    JVM's ``PYTHONPATH`` to every Python process it starts (workers, their daemon, a Python data source's
    planners; a ``local-cluster`` executor inherits it), whose start-up hook then imports the installed pyspark
    rather than recompiling Spark's zip.  This process's own environment is restored afterwards.
    ``KOA_WORKER_SITE=off`` leaves ``PYTHONPATH`` alone."""
    if not apply or os.environ.get("KOA_WORKER_SITE", "on") == "off":
        yield
        return
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (WORKER_SITE, before) if p)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


#: PySpark 4's DataFrame query context (a static setting, default true): while it is on, every Column function
#: and operator built in Python (``F.col``, ``==``, ``cast`` ...) also looks up the active session and this
#: setting, and sets and clears the JVM's ``PySparkCurrentOrigin`` around its own call: some ten py4j round trips
#: instead of one (shared scenario, skip-reports: about a third of its 10,400 calls).  It only adds the Python
#: line to the context of an error raised by an expression.  Off unless the user set it
#: (``--conf spark.python.sql.dataFrameDebugging.enabled=true``, to spark-submit or in ``PYSPARK_SUBMIT_ARGS``).
DATAFRAME_DEBUGGING_CONF = "spark.python.sql.dataFrameDebugging.enabled"


def _user_set(key: str, launching: bool) -> bool:
    """Whether the user gave Spark setting ``key``: in ``PYSPARK_SUBMIT_ARGS`` when this process starts the JVM,
    else in the running JVM's configuration (spark-submit's ``--conf``, ``spark-defaults.conf``)."""
    if launching:
        return key in os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    from pyspark import SparkConf

    try:
        return SparkConf().contains(key)
    except Exception:  # noqa: BLE001 - no JVM to ask: leave the setting alone
        return True


def build_session(
    master: str | None = None,
    app_name: str = "kafka-offset-audit",
    verbose: bool = False,
    quick_start: bool = False,
    packages: list[str] | None = None,
    class_data: ClassDataArchive | None = None,
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """Create (or reuse) a SparkSession.

    ``master`` None keeps what spark-submit set, else ``local[*]``.  Python workers use this
    interpreter (``PYSPARK_PYTHON``), so the installed ``audit`` package and its codecs are found.
    Arrow batches stay small because each input row is a whole segment file.
    ``quick_start``: when this call starts the driver JVM (any master, client mode), give it
    :func:`driver_java_options` (the CLI sets it for ``--mode latest``).  Under spark-submit
    the driver JVM already runs and nothing changes.
    ``packages``: Maven coordinates for ``spark.jars.packages`` (resolved from Maven Central when this call
    starts the driver JVM; under spark-submit pass ``--packages`` instead).
    ``class_data``: when this call starts a local driver JVM, it uses (or writes) that class-data archive
    (:class:`ClassDataArchive`; the CLI passes one).  ``conf``: more Spark settings (the CLI's ``--conf``), set
    last so they win.
    When this call starts a local master, the Python processes Spark starts import pyspark from its installed
    copy, not recompiled from Spark's zip in every one (:func:`_worker_site`).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    launching = "PYSPARK_GATEWAY_PORT" not in os.environ and SparkSession.getActiveSession() is None
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        # not under spark-submit (which sets the gateway and its own spark.master)
        builder = builder.config("spark.master", os.environ.get("KOA_SPARK_MASTER", "local[*]"))
    the_master = master or os.environ.get("KOA_SPARK_MASTER", "local[*]")
    driver_memory = os.environ.get("KOA_DRIVER_MEMORY", "2g")
    java_opts = driver_java_options(the_master, quick_start, launching, driver_memory)
    executor_opts = driver_java_options(the_master, quick_start, launching)  # their heap is spark.executor.memory
    if (master or "").startswith("local-cluster") and executor_opts:
        # local-cluster's executors are JVMs of this machine, started cold like the driver
        builder = builder.config("spark.executor.extraJavaOptions", executor_opts)
    from pyspark import SparkContext

    if class_data is not None and launching and SparkContext._gateway is None and the_master.startswith("local"):
        java_opts = " ".join(o for o in (java_opts, class_data.java_options()) if o)  # the driver's classes only
    if java_opts:
        builder = builder.config("spark.driver.extraJavaOptions", java_opts)
    if packages:
        builder = builder.config("spark.jars.packages", ",".join(packages))
    if not _user_set(DATAFRAME_DEBUGGING_CONF, launching):
        builder = builder.config(DATAFRAME_DEBUGGING_CONF, "false")
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "8")
        .config("spark.sql.shuffle.partitions", os.environ.get("KOA_SHUFFLE_PARTITIONS", "8"))
        .config("spark.sql.session.timeZone", "UTC")
        # inputs are explicit file lists: stat them on the driver rather than in a listing job
        .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
        .config("spark.sql.files.openCostInBytes", str(1 << 20))
        .config("spark.sql.adaptive.coalescePartitions.initialPartitionNum", "8")
        .config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"])
    )
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    with _worker_site(launching and SparkContext._gateway is None and the_master.startswith("local")):
        spark = builder.getOrCreate()
    if class_data is not None:
        class_data.record_jvm(spark)
    if not verbose:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


#: the settings :func:`build_session` gives a session it starts, that a Spark Connect session may set too (Spark
#: SQL's runtime settings; the driver's memory, UI and JVM options are the Connect server's)
CONNECT_SESSION_CONF = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "8",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
    "spark.sql.files.openCostInBytes": str(1 << 20),
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "8",
    DATAFRAME_DEBUGGING_CONF: "false",
}


class ConnectError(Exception):
    """The Spark Connect server cannot be used as asked (the message says what to fix; exit status 2)."""


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (``pyspark.sql.connect``), not one with a driver JVM here."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def build_remote_session(
    remote: str, app_name: str = "kafka-offset-audit", conf: dict[str, str] | None = None
) -> SparkSession:
    """A Spark Connect session on ``remote`` (``sc://HOST:PORT[/;param=value...]``, as ``pyspark`` takes it);
    no JVM starts in this process.  Sets :data:`CONNECT_SESSION_CONF` (``spark.sql.shuffle.partitions`` from
    ``KOA_SHUFFLE_PARTITIONS``, default 8) on the session; a setting the server refuses stays the server's.
    ``conf`` (the CLI's ``--conf``) is set after them; a setting of those the server refuses is an error.

    Raises :class:`ConnectError` when the Spark Connect client libraries are missing (``pip install
    'kafka-offset-audit[connect]'``) or no server answers at ``remote``."""
    try:
        import google.rpc  # noqa: F401 - googleapis-common-protos
        import grpc  # noqa: F401
        import grpc_status  # noqa: F401
    except ImportError as exc:
        raise ConnectError(
            f"--remote needs the Spark Connect client libraries ({exc}): "
            "pip install 'kafka-offset-audit[connect]' (or pyspark-client)"
        ) from None
    _reachable(remote)
    try:
        spark = SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
        defaults = dict(
            CONNECT_SESSION_CONF, **{"spark.sql.shuffle.partitions": os.environ.get("KOA_SHUFFLE_PARTITIONS", "8")}
        )
        for k, v in defaults.items():
            try:
                spark.conf.set(k, v)
            except Exception:  # noqa: BLE001 - a server may pin a setting: its value stays
                pass
        for k, v in (conf or {}).items():
            try:
                spark.conf.set(k, v)
            except Exception as exc:  # noqa: BLE001 - CANNOT_MODIFY_CONFIG: the server's (static) setting
                raise ConnectError(
                    f"--conf {k}: the Spark Connect server does not let a session set it "
                    f"({str(exc).splitlines()[0][:200]}); set it where the server starts"
                ) from None
    except ConnectError:
        raise
    except Exception as exc:  # noqa: BLE001 - grpc's errors: no server, refused, bad URL
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConnectError(
            f"no Spark Connect server answers at {remote} ({first[:300]}): start one "
            "(sbin/start-connect-server.sh) or fix --remote / SPARK_REMOTE"
        ) from None
    return spark


def _reachable(remote: str, timeout: float = 10.0) -> None:
    """Fail fast (:class:`ConnectError`) when nothing accepts a TCP connection at ``remote``'s host and port (default
    15002): the Connect client would retry for minutes before giving up."""
    import socket
    from urllib.parse import urlparse

    u = urlparse(remote.split(";", 1)[0].replace("sc://", "http://", 1))
    host, port = u.hostname, u.port or 15002
    if not host:
        raise ConnectError(f"--remote {remote!r} names no host: sc://HOST:PORT")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise ConnectError(
            f"no Spark Connect server answers at {remote.split(';', 1)[0]} ({exc}): start one "
            "(sbin/start-connect-server.sh) or fix --remote / SPARK_REMOTE"
        ) from None


def default_parallelism(spark) -> int:
    """Tasks the session runs at once: ``SparkContext.defaultParallelism``; over Spark Connect (no SparkContext
    here), the partitions of a ``range`` the server plans with its leaf-node default parallelism (one small job,
    asked once per session)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    cached = getattr(spark, "_koa_parallelism", None)
    if cached is None:
        from pyspark.sql import functions as F

        cached = int(spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()[0]) + 1
        spark._koa_parallelism = cached
    return cached


def distribute(spark, rows: list, schema: str, slices: int):
    """A DataFrame of ``rows`` (tuples, DDL ``schema``) in ``slices`` partitions: ``parallelize`` on a session
    with a SparkContext, a local relation repartitioned (round robin) over Spark Connect."""
    if not is_connect(spark):
        return spark.createDataFrame(spark.sparkContext.parallelize(rows, slices), schema)
    return spark.createDataFrame(rows, schema).repartition(slices)


#: an audit decoding fewer bytes of ``__consumer_offsets`` and ``__cluster_metadata`` segments than this is
#: "small": every table it builds fits in one task (32 MiB holds about 400,000 offset commits)
SMALL_INPUT_BYTES = int(os.environ.get("KOA_SMALL_INPUT_BYTES", 32 << 20))
#: Spark SQL settings for a small audit.  Its queries run over tables of a few thousand rows, where the time
#: goes to planning and compiling, not to data: adaptive execution re-plans after every shuffle (one more job
#: each), eight shuffle partitions make eight tasks of nothing, and code generation compiles Java with Janino
#: for every stage and projection.  ``spark.sql.codegen.factoryMode=NO_CODEGEN`` (an internal setting; Spark's
#: own test suites run every expression both ways) evaluates expressions interpreted instead.  Constraint
#: propagation off: the optimizer then infers no extra not-null and equality filters from each operator's
#: constraints, work that grows with a plan's size (the judge's union of every rule) and saves nothing on a few
#: thousand rows.  Broadcast joins off: each broadcast's build side is a Spark job of its own,
#: where a sort-merge join over one shuffle partition runs inside the job that needs it.  Results do not change:
#: only the optimized and physical plans do.
SMALL_INPUT_CONF = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.constraintPropagation.enabled": "false",
    "spark.koa.smallInput": "true",
}  # the last one only marks the state (small_settings)


#: the same for a source that cannot tell its size before reading (a live cluster): a commits table
#: (``audit.commits.live_commits``) of fewer rows than this once decoded.  Not applied to a large input whose
#: table turns out small: its judge runs faster compiled than interpreted.
SMALL_TABLE_ROWS = 50_000


def small_settings(spark: SparkSession) -> bool:
    """Whether ``spark`` runs with a small input's settings now (inside :class:`tuned_for_input` for a small
    input; one shuffle partition set by hand does not count)."""
    return spark.conf.get("spark.koa.smallInput", "false") == "true"


class small_tables:
    """Context manager: :data:`SMALL_INPUT_CONF` on ``spark`` while one phase of a large audit builds tables of
    about ``rows`` rows (< :data:`SMALL_TABLE_ROWS`), the session's values restored when it ends; nothing when a
    small input's settings are already on or the tables are larger.

    The partition-state read of log dirs (small files, replicas, leader-epoch caches, bounds, the KRaft metadata
    replay) builds tables sized by the cluster's partitions, not by its commits: a 20M-commit input has the same
    few hundred replicas as a 10k-commit one, and adaptive execution would add a job per shuffle for them.  The decode that follows runs with the input's own settings (``compact`` and the readers' slices
    follow them too).  Only Spark's physical execution changes, never a result.
    """

    def __init__(self, spark: SparkSession, rows: int):
        self.spark = spark
        self.on = rows < SMALL_TABLE_ROWS and not small_settings(spark)
        self.saved: dict[str, str | None] = {}

    def __enter__(self):
        if self.on:
            self.saved = _apply_small_input_conf(self.spark)
        return self

    def __exit__(self, *exc):
        _restore_conf(self.spark, self.saved)
        return False


def _apply_small_input_conf(spark: SparkSession) -> dict[str, str | None]:
    """Set :data:`SMALL_INPUT_CONF` on ``spark``; returns the values it replaced (None: unset)."""
    saved = {k: spark.conf.get(k, None) for k in SMALL_INPUT_CONF}
    for k, v in SMALL_INPUT_CONF.items():
        spark.conf.set(k, v)
    return saved


def _restore_conf(spark: SparkSession, saved: dict[str, str | None]) -> None:
    """Put back the values :func:`_apply_small_input_conf` replaced."""
    for k, v in saved.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def compact(df):
    """``df`` read in one task while a small input's settings are on (:func:`small_settings`), else ``df``
    itself.  For a materialised table of a few hundred rows spread over the partitions of the job that made it
    (a task per file slice), each later query otherwise runs that many tasks per stage reading it (shared
    scenario: about 500 tasks in all).  A narrow ``coalesce``: nothing is recomputed or shuffled.  Not for a
    table already partitioned by a shuffle: a checkpoint keeps that partitioning, which later joins and windows
    on the same keys reuse, and a coalesce would hide it."""
    return df.coalesce(1) if small_settings(df.sparkSession) else df


class tuned_for_input:
    """Context manager: :data:`SMALL_INPUT_CONF` on ``spark`` while an audit of ``input_bytes`` (<
    :data:`SMALL_INPUT_BYTES`) runs, the session's own values restored afterwards; nothing for a larger input.
    ``input_bytes`` None (unknown before reading): :meth:`decide` applies it later, once the commits are counted."""

    def __init__(self, spark: SparkSession, input_bytes: int | None):
        self.spark = spark
        self.undecided = input_bytes is None
        self.small = input_bytes is not None and input_bytes < SMALL_INPUT_BYTES
        self.saved: dict[str, str | None] = {}

    def _apply(self) -> None:
        self.saved = _apply_small_input_conf(self.spark)

    def decide(self, commit_rows: int) -> None:
        """For an input of unknown size, after the decode: tune now if the commits table has fewer than
        :data:`SMALL_TABLE_ROWS` rows (once; nothing when the size was known)."""
        if self.undecided:
            self.undecided = False
            self.small = commit_rows < SMALL_TABLE_ROWS
            if self.small:
                self._apply()

    def __enter__(self):
        if self.small:
            self._apply()
        return self

    def __exit__(self, *exc):
        _restore_conf(self.spark, self.saved)
        return False


def in_parallel(*fns):
    """Call ``fns`` at once, each in its own thread, and return their results in order (the first error is raised
    after all ended).  Spark runs jobs of several threads side by side; for the small tables of an audit a job
    is mostly the driver's planning and scheduling, which one thread leaves a core idle for.  Each thread gets
    the caller's Spark local properties (job group, scheduler pool: ``pyspark.inheritable_thread_target``), so a
    caller's cancellation or pool covers these jobs too."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(fns), thread_name_prefix="koa") as pool:
        futures = [pool.submit(inheriting(fn)) for fn in fns]
    return [f.result() for f in futures]


def inheriting(fn):
    """``fn`` wrapped to run, in another thread, with this thread's Spark local properties and tags
    (``pyspark.inheritable_thread_target`` given the active or default session); ``fn`` itself without one."""
    from pyspark import inheritable_thread_target
    from pyspark.errors import PySparkRuntimeError

    try:
        session = SparkSession.active()  # the thread's, or the default one (a thread of in_parallel has none)
    except PySparkRuntimeError:
        return fn
    return inheritable_thread_target(session)(fn)


def collect_together(queries: dict) -> dict[str, list[dict]]:
    """Several small, bounded queries (name -> DataFrame: each an aggregate, or sorted and ``limit``-ed) collected
    in one Spark job instead of one each: a union of the queries, each row carrying its query's columns in a
    struct of its own (the others null), so every value keeps its Spark type and each query its row order.

    Returns name -> rows (``Row.asDict()``: dicts, nested structs kept as ``Row``).  Raises whatever Spark
    raises for the queries.  Only for bounded results: the rows are all brought to the driver."""
    from pyspark.sql import functions as F

    if not queries:
        return {}
    names = list(queries)
    structs = {n: F.struct(*[F.col(f"`{c}`") for c in queries[n].columns]) for n in names}
    types = {n: queries[n].select(structs[n].alias("s")).schema["s"].dataType for n in names}
    parts = [
        queries[n].select(
            F.lit(i).alias("_q"),
            *[(structs[n] if m == n else F.lit(None).cast(types[m])).alias(f"_{j}") for j, m in enumerate(names)],
        )
        for i, n in enumerate(names)
    ]
    union = parts[0]
    for p in parts[1:]:
        union = union.union(p)
    out: dict[str, list[dict]] = {n: [] for n in names}
    for row in union.collect():
        i = row["_q"]
        out[names[i]].append(row[f"_{i}"].asDict())
    return out
