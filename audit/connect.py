"""What a Spark Connect session (``--remote``) needs before the audit runs on it.

A Connect client has no JVM and the server's Python workers have never seen the ``audit`` package: the package is
shipped as a ``pyfile`` artifact and, when given, a packed environment (``kafka-offset-audit package``) as an
``archive`` artifact that becomes the workers' Python (``spark.sql.execution.pyspark.python``), the way Spark's
"Python Package Management" guide does it for Spark Connect (``SparkSession.addArtifacts``).  Paths are checked
up front so that a server that cannot do what the run asks fails with exit status 2, not halfway through.
"""

from __future__ import annotations

import os
import uuid

from .spark import ConnectError


__all__ = [
    "ENV_NAME",
    "check_kafka_connector",
    "check_shared_output",
    "prepare",
]

#: the directory name a ``--python-env`` archive is unpacked under, in each Python worker's working directory
ENV_NAME = "koa_env"


def prepare(spark, cfg, python_env: str | None = None) -> None:
    """Ship the package (and ``python_env``) to ``spark``'s server and check it can run ``cfg``'s audit.

    Raises :class:`audit.spark.ConnectError` (exit status 2) when the server cannot read what this client writes
    for a local ``--output`` (no shared filesystem), or lacks Spark's Kafka connector for ``--source
    kafka-connector``.
    """
    from .package import package_zip

    spark.addArtifacts(package_zip(), pyfile=True)
    if python_env:
        spark.addArtifacts(f"{os.path.abspath(python_env)}#{ENV_NAME}", archive=True)
        spark.conf.set("spark.sql.execution.pyspark.python", f"{ENV_NAME}/bin/python")
    check_shared_output(spark, cfg.output)
    if cfg.bootstrap_servers and cfg.source == "kafka-connector":
        check_kafka_connector(spark)


def check_shared_output(spark, output: str) -> None:
    """Check, for a local ``output``, that a probe file this client writes beside it is readable by the server.

    The output's tables are written there by the server, its summary and reports by this client.
    """
    from .io import fs

    uri = fs.to_uri(output).rstrip("/")
    if not fs.is_local(uri):
        return
    anc = os.path.dirname(fs.local_path(uri))
    while anc and not os.path.isdir(anc) and os.path.dirname(anc) != anc:
        anc = os.path.dirname(anc)
    # not a dot file: Spark's file listing skips hidden names
    probe = os.path.join(anc, f"koa-connect-probe-{uuid.uuid4().hex[:12]}")
    try:
        with open(probe, "wb") as f:
            f.write(b"kafka-offset-audit")
        try:
            seen = spark.read.format("binaryFile").load("file:" + probe).select("length").collect()
        except Exception:  # noqa: BLE001 - PATH_NOT_FOUND on the server
            seen = []
        if [r[0] for r in seen] != [len(b"kafka-offset-audit")]:
            raise ConnectError(
                f"the Spark Connect server does not see {anc} of this machine: with --remote, --output (and "
                "--log-dirs, --history) must be on storage both reach, a filesystem they share or s3a://"
            )
    finally:
        try:
            os.remove(probe)
        except OSError:
            pass


def check_kafka_connector(spark) -> None:
    """Spark's Kafka connector must be on the server's class path (``--source kafka-connector``)."""
    try:
        _ = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", "127.0.0.1:9")
            .option("subscribe", "__consumer_offsets")
            .load()
            .schema
        )  # resolving the schema looks the source up
    except Exception as exc:  # noqa: BLE001 - DATA_SOURCE_NOT_FOUND
        from .sources.cluster import connector_package

        raise ConnectError(
            f"--source kafka-connector: the Spark Connect server has no Kafka connector ({str(exc).splitlines()[0][:200]}); "
            f"start it with --packages {connector_package()}, or use --source kafka-python"
        ) from None
