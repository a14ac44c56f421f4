"""SparkSession for the embedded (local) mode and for spark-submit."""
from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


#: JVM options for an embedded local driver in ``--mode latest`` (``KOA_DRIVER_JAVA_OPTIONS`` overrides;
#: set it empty to keep the JVM's defaults).  C1-only JIT: such a run is a few dozen short Spark jobs
#: over small tables, and on a 2-core machine C2 compiler threads cost more than they win
#: (benchmark, 5M commits, local[2]: 24-26 s -> 20-21 s).  Not used for ``--mode history``, whose
#: JVM work grows with the number of commits (there C1 was 40% slower: 94 s -> 133 s).
#: C1-only also shrinks the default code cache to 48 MiB, which one audit with reports nearly
#: fills (42 MiB); once full the JVM stops compiling and runs interpreted, so give it 240 MiB.
QUICK_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


def driver_java_options(master: str, quick_start: bool, launching: bool) -> str | None:
    """``spark.driver.extraJavaOptions`` to set, or None: only when this process starts a local
    driver JVM; ``KOA_DRIVER_JAVA_OPTIONS`` (even empty) wins over :data:`QUICK_START_JAVA_OPTIONS`."""
    if not launching or not master.startswith("local"):
        return None
    opts = os.environ.get("KOA_DRIVER_JAVA_OPTIONS", QUICK_START_JAVA_OPTIONS if quick_start else "")
    return opts.strip() or None


def build_session(master: str | None = None, app_name: str = "kafka-offset-audit", verbose: bool = False,
                  quick_start: bool = False, packages: list[str] | None = None) -> SparkSession:
    """Create (or reuse) a SparkSession.

    ``master`` None keeps what spark-submit set, else ``local[*]``.  Python workers use this
    interpreter (``PYSPARK_PYTHON``), so the installed ``audit`` package and its codecs are found.
    Arrow batches stay small because each input row is a whole segment file.
    ``quick_start``: when this call starts a local driver JVM, give it
    :data:`QUICK_START_JAVA_OPTIONS` (the CLI sets it for ``--mode latest``).  Under spark-submit
    the driver JVM already runs and nothing changes.
    ``packages``: Maven coordinates for ``spark.jars.packages`` (resolved from Maven Central when this call
    starts the driver JVM; under spark-submit pass ``--packages`` instead).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    launching = "PYSPARK_GATEWAY_PORT" not in os.environ and SparkSession.getActiveSession() is None
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        # not under spark-submit (which sets the gateway and its own spark.master)
        builder = builder.config("spark.master", os.environ.get("KOA_SPARK_MASTER", "local[*]"))
    java_opts = driver_java_options(master or os.environ.get("KOA_SPARK_MASTER", "local[*]"), quick_start, launching)
    if java_opts:
        builder = builder.config("spark.driver.extraJavaOptions", java_opts)
        if (master or "").startswith("local-cluster"):
            # local-cluster's executors are JVMs of this machine, started cold like the driver
            builder = builder.config("spark.executor.extraJavaOptions", java_opts)
    if packages:
        builder = builder.config("spark.jars.packages", ",".join(packages))
    builder = (builder
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.memory", os.environ.get("KOA_DRIVER_MEMORY", "2g"))
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "8")
               .config("spark.sql.shuffle.partitions", os.environ.get("KOA_SHUFFLE_PARTITIONS", "8"))
               .config("spark.sql.session.timeZone", "UTC")
               # inputs are explicit file lists: stat them on the driver rather than in a listing job
               .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
               .config("spark.sql.files.openCostInBytes", str(1 << 20))
               .config("spark.sql.adaptive.coalescePartitions.initialPartitionNum", "8")
               .config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"]))
    spark = builder.getOrCreate()
    if not verbose:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


#: an audit decoding fewer bytes of ``__consumer_offsets`` and ``__cluster_metadata`` segments than this is
#: "small": every table it builds fits in one task (32 MiB holds about 400,000 offset commits)
SMALL_INPUT_BYTES = int(os.environ.get("KOA_SMALL_INPUT_BYTES", 32 << 20))
#: Spark SQL settings for a small audit.  Its queries run over tables of a few thousand rows, where the time
#: goes to planning and compiling, not to data: adaptive execution re-plans after every shuffle (one more job
#: each), eight shuffle partitions make eight tasks of nothing, and code generation compiles Java with Janino
#: for every stage and projection (a JFR profile of the shared scenario: 13% of the JVM's samples in Janino).
#: ``spark.sql.codegen.factoryMode=NO_CODEGEN`` (an internal setting; Spark's own test suites run every
#: expression both ways) evaluates expressions interpreted instead.  Shared scenario, reports on, local[2]:
#: run() 21 s -> 18 s with the first three, -> 16.5 s with all four.  Results do not change: only the physical
#: execution does.
SMALL_INPUT_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1",
                    "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


#: the same for a source that cannot tell its size before reading (a live cluster): a commits table
#: (``audit.commits.live_commits``) of fewer rows than this once decoded.  Not applied to a large input whose
#: table turns out small: the 20M-commit benchmark (about 80,000 rows) judged slower interpreted than compiled.
SMALL_TABLE_ROWS = 50_000


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
        for k, v in SMALL_INPUT_CONF.items():
            self.saved[k] = self.spark.conf.get(k, None)
            self.spark.conf.set(k, v)

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
        for k, v in self.saved.items():
            if v is None:
                self.spark.conf.unset(k)
            else:
                self.spark.conf.set(k, v)
        return False
