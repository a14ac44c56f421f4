"""SparkSession for the embedded (local) mode and for spark-submit."""
from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def build_session(master: str | None = None, app_name: str = "kafka-offset-audit", verbose: bool = False) -> SparkSession:
    """Create (or reuse) a SparkSession.

    ``master`` None keeps what spark-submit set, else ``local[*]``.  Python workers use this
    interpreter (``PYSPARK_PYTHON``), so the installed ``audit`` package and its codecs are found.
    Arrow batches stay small because each input row is a whole segment file.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        # not under spark-submit (which sets the gateway and its own spark.master)
        builder = builder.config("spark.master", os.environ.get("KOA_SPARK_MASTER", "local[*]"))
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
