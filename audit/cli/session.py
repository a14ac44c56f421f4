"""The Spark session of a CLI run: Spark Connect or a local JVM, its settings, and imports warmed meanwhile.

:func:`connect_target` picks a Spark Connect server (``--remote``, ``$SPARK_REMOTE``) or a classic session;
:func:`spark_conf` parses ``--conf KEY=VALUE``; :func:`hadoop_aws_package` names the S3A connector matched to
pyspark's Hadoop client; :func:`start_session` starts the session with the JVM packages the input needs, while
:func:`prewarm` imports in a thread what the audit imports later.
"""

from __future__ import annotations

import os
import re
import sys


__all__ = [
    "PREWARM_SWITCH_INTERVAL",
    "connect_target",
    "hadoop_aws_package",
    "prewarm",
    "spark_conf",
    "start_session",
]


def connect_target(args) -> str | None:
    """Return the Spark Connect URL to use: ``--remote``, else ``$SPARK_REMOTE`` (not under spark-submit).

    None for a classic session.

    Raises
    ------
    audit.spark.ConnectError
        Arguments that contradict each other.
    """
    from ..spark import ConnectError

    remote = getattr(args, "remote", None)
    env = os.environ.get("SPARK_REMOTE") if "PYSPARK_GATEWAY_PORT" not in os.environ else None
    master = getattr(args, "master", None)
    if remote and master:
        raise ConnectError("--remote and --master exclude each other: a Spark Connect server has its own master")
    if master and env:
        raise ConnectError(
            f"--master {master} is given while SPARK_REMOTE={env} is set: unset SPARK_REMOTE for a "
            "classic session, or drop --master to use that Spark Connect server"
        )
    remote = remote or env or None
    if remote and not remote.startswith("sc://"):
        raise ConnectError(f"--remote {remote!r}: a Spark Connect URL starts with sc:// (sc://HOST:PORT)")
    python_env = getattr(args, "python_env", None)
    if python_env:
        if not remote:
            raise ConnectError(
                "--python-env is for a Spark Connect server (--remote); spark-submit ships an "
                "environment with --archives FILE#env"
            )
        if not os.path.isfile(python_env):
            raise ConnectError(f"--python-env {python_env!r} is not a file: build it with kafka-offset-audit package")
    return remote


def spark_conf(items: list[str]) -> dict[str, str]:
    """Parse the ``--conf KEY=VALUE`` items into a dict.

    Raises
    ------
    audit.spark.ConnectError
        (exit 2) An item without ``=`` or a key that is not a Spark setting.
    """
    from ..spark import ConnectError

    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip().startswith("spark."):
            raise ConnectError(f"--conf {item!r}: give KEY=VALUE with a Spark setting as KEY (spark.…)")
        out[key.strip()] = value
    return out


def hadoop_aws_package() -> str:
    """``hadoop-aws`` coordinates in the version of pyspark's own Hadoop client (``hadoop-client-api-*.jar``)."""
    import glob

    from pyspark.find_spark_home import _find_spark_home

    jars = glob.glob(os.path.join(_find_spark_home(), "jars", "hadoop-client-api-*.jar"))
    found = re.search(r"hadoop-client-api-(.+)\.jar$", jars[0]) if jars else None
    version = found.group(1) if found else "3.5.0"
    return f"org.apache.hadoop:hadoop-aws:{version}"


def start_session(cfg, args, master: str | None, remote: str | None, extra_conf: dict):
    """Start the session and return ``(spark, class_data)``.

    A Spark Connect session on ``remote`` (prepared for the audit), else a session with a driver JVM here (with
    the JVM packages the input needs, and its class-data archive).
    """
    from ..spark import ClassDataArchive, ResolvedPackages, build_remote_session, build_session

    wanted: list[str] = []
    if cfg.source == "kafka-connector":
        from ..sources.cluster import connector_package

        wanted.append(connector_package())
    if any(str(p).startswith(("s3a://", "s3n://")) for p in [*cfg.log_dirs, cfg.output, cfg.history or ""]):
        wanted.append(hadoop_aws_package())  # Hadoop's S3A filesystem, matched to pyspark's Hadoop client
    packages = wanted or None
    # a Connect session is built in well under a second: waiting for these imports would delay the audit, whose
    # run() starts the report imports in a thread of its own
    warm = None if remote else prewarm(cfg.reports)
    class_data = None
    try:
        if remote:
            spark = build_remote_session(remote, conf=extra_conf)
        else:
            # the jars build_session puts on a local driver's class path are part of the archive's key
            resolved = ResolvedPackages.for_master(packages, master)
            kept = resolved.jars() if resolved else None
            class_data = ClassDataArchive.for_this_install(packages, class_path=kept)
            spark = build_session(
                master,
                verbose=getattr(args, "verbose", False),
                quick_start=cfg.mode == "latest",
                packages=packages,
                class_data=class_data,
                conf=extra_conf,
            )
    finally:
        if warm is not None:
            warm.join()
    if remote:
        from ..connect import prepare
        from ..spark import release_remote_session

        try:
            prepare(spark, cfg, python_env=getattr(args, "python_env", None))
        except BaseException:
            release_remote_session(spark)
            raise
    return spark, class_data


#: the interpreter's thread switch interval (seconds) while :func:`prewarm` imports: the main thread starts the
#: Spark JVM meanwhile through a few hundred py4j calls, each of which, with the default 5 ms, could wait that
#: long for the importing thread to let go of the GIL (shared scenario: the session took 3.3 s to build beside
#: the imports, 3.0 s with this, 2.0 s without imports)
PREWARM_SWITCH_INTERVAL = 0.0005


class _Prewarm:
    """The thread of :func:`prewarm`; :meth:`join` waits for it and puts the switch interval back."""

    def __init__(self, thread, interval: float):
        self.thread, self.interval = thread, interval

    def join(self) -> None:
        self.thread.join()
        sys.setswitchinterval(self.interval)


def prewarm(reports: bool) -> _Prewarm:
    """Import, in a thread while the Spark JVM starts, what the audit imports later on its main thread.

    This process only waits for the JVM meanwhile.  The imports are ``pyspark.testing.utils`` with pandas
    (pyspark's py4j converter for numpy arrays imports them at the first value passed to the JVM: about 0.4 s)
    and, with ``reports``, the report libraries (Great Expectations takes about 2 s, matplotlib).  The caller
    joins the thread before the audit begins, so no import runs alongside it; until then the switch interval is
    :data:`PREWARM_SWITCH_INTERVAL`.  An import error is left for the code that imports the module to raise
    and report.
    """
    import threading

    def work():
        try:
            import pyspark.testing.utils  # noqa: F401

            if reports:
                from ..report.expectations import import_gx

                import_gx()
                import matplotlib.backends.backend_svg  # noqa: F401
                import matplotlib.figure  # noqa: F401
        except Exception:  # noqa: BLE001 - reported where the audit imports them
            pass

    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, PREWARM_SWITCH_INTERVAL))
    thread = threading.Thread(target=work, name="koa-prewarm-reports", daemon=True)
    thread.start()
    return _Prewarm(thread, interval)
