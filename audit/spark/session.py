"""Starting a SparkSession: embedded, under spark-submit, or a Spark Connect client."""

from __future__ import annotations

import contextlib
import os
import sys

from pyspark.sql import SparkSession

from .jvm import ClassDataArchive, ResolvedPackages, driver_java_options


__all__ = [
    "CACHE_IN_SESSION_CONF",
    "CONNECT_SESSION_CONF",
    "DATAFRAME_DEBUGGING_CONF",
    "WORKER_SITE",
    "ConnectError",
    "build_remote_session",
    "build_session",
    "is_connect",
    "release_remote_session",
]


#: the directory holding ``sitecustomize.py``, the start-up hook of the Python processes Spark starts (on their
#: path through the JVM's ``PYTHONPATH``; never imported by the audit itself)
WORKER_SITE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "worker_site")


@contextlib.contextmanager
def _worker_site(apply: bool):
    """Put :data:`WORKER_SITE` first on ``PYTHONPATH`` while the driver JVM starts, if ``apply``.

    Spark appends the JVM's ``PYTHONPATH`` to every Python process it starts (workers, their daemon, a Python
    data source's planners; a ``local-cluster`` executor inherits it), whose start-up hook then imports the
    installed pyspark rather than recompiling Spark's zip.  This process's own environment is restored
    afterwards.  ``KOA_WORKER_SITE=off`` leaves ``PYTHONPATH`` alone.
    """
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
    """Tell whether the user gave Spark setting ``key``.

    It is looked for in ``PYSPARK_SUBMIT_ARGS`` when this process starts the JVM, else in the running JVM's
    configuration (spark-submit's ``--conf``, ``spark-defaults.conf``).
    """
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
    starts the driver JVM; under spark-submit pass ``--packages`` instead). When this call starts a driver on a
    plain local master (:func:`~audit.spark.jvm.single_jvm_master`) and an earlier run resolved the same
    coordinates, their jars go on the driver's class path instead (:class:`~audit.spark.jvm.ResolvedPackages`).
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
    conf = dict(conf or {})
    starts_local = launching and SparkContext._gateway is None
    resolved = ResolvedPackages.for_master(packages, the_master) if starts_local else None
    kept = resolved.jars() if resolved else None
    if kept:
        user_cp = conf.pop("spark.driver.extraClassPath", "")
        builder = builder.config(
            "spark.driver.extraClassPath", os.pathsep.join([*kept, *([user_cp] if user_cp else [])])
        )
    elif packages:
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
    for k, v in CACHE_IN_SESSION_CONF.items():
        builder = builder.config(k, v)
    for k, v in conf.items():
        builder = builder.config(k, v)
    with _worker_site(starts_local and the_master.startswith("local")):
        spark = builder.getOrCreate()
    if resolved is not None and not kept and "spark.jars.packages" not in conf:
        resolved.record(spark)
    if class_data is not None:
        class_data.record_jvm(spark)
    if not verbose:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


#: settings under which caching a DataFrame (``cache()``, ``persist()``) keeps the session: otherwise Spark's
#: ``CacheManager`` plans the cached query in a clone of the session with these turned off
#: (``getOrCloneSessionWithConfigsOff``), and through Spark Connect the clone copies the session's artifacts, the
#: ``--python-env`` archive included, which the server then adds and unpacks once more (about 2 s for 83 MB).
#: The audit reads no bucketed table, and lets adaptive execution coalesce a cached plan's output as any other.
CACHE_IN_SESSION_CONF = {
    "spark.sql.sources.bucketing.autoBucketedScan.enabled": "false",
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}

#: the settings :func:`build_session` gives a session it starts, that a Spark Connect session may set too (Spark
#: SQL's runtime settings; the driver's memory, UI and JVM options are the Connect server's)
CONNECT_SESSION_CONF = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "8",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
    "spark.sql.files.openCostInBytes": str(1 << 20),
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "8",
    DATAFRAME_DEBUGGING_CONF: "false",
    **CACHE_IN_SESSION_CONF,
}


class ConnectError(Exception):
    """The Spark Connect server cannot be used as asked (the message says what to fix; exit status 2)."""


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (``pyspark.sql.connect``), not one with a driver JVM here."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def build_remote_session(
    remote: str, app_name: str = "kafka-offset-audit", conf: dict[str, str] | None = None
) -> SparkSession:
    """Build a Spark Connect session on ``remote`` (``sc://HOST:PORT[/;param=value...]``, as ``pyspark`` takes it).

    No JVM starts in this process.  Sets :data:`CONNECT_SESSION_CONF` (``spark.sql.shuffle.partitions`` from
    ``KOA_SHUFFLE_PARTITIONS``, default 8) on the session; a setting the server refuses stays the server's.
    ``conf`` (the CLI's ``--conf``) is set after them; a setting of those the server refuses is an error.

    Raises
    ------
    ConnectError
        When the Spark Connect client libraries are missing (``pip install 'kafka-offset-audit[connect]'``) or
        no server answers at ``remote``.
    """
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


#: seconds :func:`release_remote_session` waits for the server to release a session before leaving it to expire
RELEASE_TIMEOUT_S = 10.0


def release_remote_session(spark, timeout: float = RELEASE_TIMEOUT_S) -> bool:
    """Release a Spark Connect session on its server and close the channel (``SparkSession.stop()``).

    pyspark's client leaves its session on the server when the process ends (unless
    ``SPARK_CONNECT_RELEASE_SESSION_ON_EXIT`` is set): the server then keeps the session's checkpointed blocks,
    temporary views and artifacts (a ``--python-env`` archive unpacked per session) until
    ``spark.connect.session.manager.defaultSessionTimeout`` (60 minutes by default), and an audit scheduled
    every few minutes piles them up.  The ``ReleaseSession`` call runs in a daemon thread and is waited for
    ``timeout`` seconds at most, so an unreachable server cannot hold the process.  Returns whether the
    release finished in time without an error.  A session with a driver JVM here is left alone (False).
    """
    if not is_connect(spark):
        return False
    import threading

    done: list[bool] = []

    def stop() -> None:
        try:
            spark.stop()
            done.append(True)
        except Exception:  # noqa: BLE001 - the server then expires the session itself
            pass

    t = threading.Thread(target=stop, name="koa-release-session", daemon=True)
    t.start()
    t.join(timeout)
    return bool(done)


def _reachable(remote: str, timeout: float = 10.0) -> None:
    """Fail fast when nothing accepts a TCP connection at ``remote``'s host and port.

    The Connect client would retry for minutes before giving up.

    Raises
    ------
    ConnectError
        When nothing accepts a TCP connection at ``remote``'s host and port (default 15002).
    """
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
