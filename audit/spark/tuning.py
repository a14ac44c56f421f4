"""How an audit's queries are spread and tuned: parallelism, a small input's settings, compaction."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from .session import is_connect


__all__ = [
    "SMALL_INPUT_BYTES",
    "SMALL_INPUT_CONF",
    "SMALL_TABLE_ROWS",
    "broadcast_unless_small",
    "compact",
    "default_parallelism",
    "distribute",
    "small_settings",
    "small_tables",
    "tuned_for_input",
]


def default_parallelism(spark) -> int:
    """Return the tasks the session runs at once.

    ``SparkContext.defaultParallelism``; over Spark Connect (no SparkContext here), the partitions of a ``range``
    the server plans with its leaf-node default parallelism (one small job, asked once per session).
    """
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    cached = getattr(spark, "_koa_parallelism", None)
    if cached is None:
        from pyspark.sql import functions as F

        cached = int(spark.range(0, 1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()[0]) + 1
        spark._koa_parallelism = cached
    return cached


def distribute(spark, rows: list, schema: str, slices: int):
    """Make a DataFrame of ``rows`` (tuples, DDL ``schema``) in ``slices`` partitions.

    ``parallelize`` on a session with a SparkContext, a local relation repartitioned (round robin) over Spark
    Connect.
    """
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
    """Tell whether ``spark`` runs with a small input's settings now.

    That is, inside :class:`tuned_for_input` for a small input; one shuffle partition set by hand does not count.
    """
    return spark.conf.get("spark.koa.smallInput", "false") == "true"


class small_tables:
    """Set :data:`SMALL_INPUT_CONF` on ``spark`` while one phase of a large audit builds small tables (context manager).

    The tables are of about ``rows`` rows (< :data:`SMALL_TABLE_ROWS`); the session's values are restored when it
    ends; nothing when a small input's settings are already on or the tables are larger.

    The partition-state read of log dirs (small files, replicas, leader-epoch caches, bounds, the KRaft metadata
    replay) builds tables sized by the cluster's partitions, not by its commits: a 20M-commit input has the same
    few hundred replicas as a 10k-commit one, and adaptive execution would add a job per shuffle for them.  The
    decode that follows runs with the input's own settings (``compact`` and the readers' slices follow them too).
    Only Spark's physical execution changes, never a result.
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


def broadcast_unless_small(df):
    """Return ``df`` with a broadcast hint (the small side of a join, shipped to every task).

    Except while a small input's settings are on (:func:`small_settings`): there each broadcast's build side
    would be a Spark job of its own, and the join runs as well inside the job that needs it.
    """
    from pyspark.sql import functions as F

    return df if small_settings(df.sparkSession) else F.broadcast(df)


def compact(df):
    """Return ``df`` read in one task while a small input's settings are on (:func:`small_settings`), else ``df``.

    For a materialised table of a few hundred rows spread over the partitions of the job that made it (a task
    per file slice), each later query otherwise runs that many tasks per stage reading it (shared scenario: about
    500 tasks in all).  A narrow ``coalesce``: nothing is recomputed or shuffled.  Not for a table already
    partitioned by a shuffle: a checkpoint keeps that partitioning, which later joins and windows on the same
    keys reuse, and a coalesce would hide it.
    """
    return df.coalesce(1) if small_settings(df.sparkSession) else df


class tuned_for_input:
    """Set :data:`SMALL_INPUT_CONF` on ``spark`` while an audit of a small input runs (context manager).

    The input is of ``input_bytes`` (< :data:`SMALL_INPUT_BYTES`); the session's own values are restored
    afterwards; nothing for a larger input.  ``input_bytes`` None (unknown before reading): :meth:`decide`
    applies it later, once the commits are counted.
    """

    def __init__(self, spark: SparkSession, input_bytes: int | None):
        self.spark = spark
        self.undecided = input_bytes is None
        self.small = input_bytes is not None and input_bytes < SMALL_INPUT_BYTES
        self.saved: dict[str, str | None] = {}

    def _apply(self) -> None:
        self.saved = _apply_small_input_conf(self.spark)

    def decide(self, commit_rows: int) -> None:
        """Tune now, for an input of unknown size after the decode, if the commits table is small.

        Small: fewer than :data:`SMALL_TABLE_ROWS` rows (once; nothing when the size was known).
        """
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
