"""One shape for every source of an audit: broker log dirs, or a live cluster.

A source does two things (DESIGN.md, "the three tables"):

1. :meth:`AuditSource.read_offsets` -- the raw ``__consumer_offsets`` records, as
   :data:`audit.formats.segments.RAW_SCHEMA` rows plus ``broker_id int``, materialised once;
2. :meth:`AuditSource.partition_state` -- for the commits found, the partition state the judge needs:
   :class:`PartitionTables` (``epochs``, ``bounds``, ``epoch_end_offsets``; the KRaft ``leader_timeline`` and
   ``broker_timeline`` when the source has a metadata log).

plus what the summary reports of it (:meth:`AuditSource.inputs`, :attr:`AuditSource.read_issues`,
:attr:`AuditSource.recovered`).  :func:`open_source` picks the implementation from the audit's arguments, so
:func:`audit.pipeline.run` has no source-specific branch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


__all__ = [
    "cache_disagreements",
    "READ_ISSUES_DDL",
    "AuditSource",
    "ConnectorSource",
    "LiveSource",
    "LogDirSource",
    "PartitionTables",
    "open_source",
    "raise_live_read_error",
]

#: read issues: where a source could not read (file, byte position, reason)
READ_ISSUES_DDL = "file string, position bigint, reason string, detail string, records_affected int"


@dataclass
class PartitionTables:
    """The judge's inputs besides the commits (see :mod:`audit.judge`)."""

    epochs: DataFrame
    bounds: DataFrame
    epoch_end_offsets: DataFrame | None
    leader_timeline: DataFrame | None = None
    broker_timeline: DataFrame | None = None
    #: every partition replica's bounds (log dirs only): enables REPLICA_DIVERGENCE
    replicas: DataFrame | None = None
    #: where old partitions stood when their topic grew (log dirs with a metadata log, --mode history):
    #: enables PARTITION_EXPANSION_ORDER
    expansion_offsets: DataFrame | None = None
    #: topic_id, topic: names KIP-848 assignments (from leader_timeline when there is a metadata log)
    topic_names: DataFrame | None = None


class AuditSource(ABC):
    """What :func:`audit.pipeline.run` reads from.  ``progress(msg)`` reports a stage's outcome."""

    #: records the source recovered from other replicas: [{"partition", "broker_id", "records"}]
    recovered: list[dict]

    def __init__(self, spark: SparkSession, progress: Callable[[str], None]):
        self.spark = spark
        self.progress = progress
        self.recovered = []

    def input_bytes(self) -> int | None:
        """Bytes the audit will decode, when the source knows before any Spark job (None: unknown)."""
        return None

    @abstractmethod
    def read_offsets(self) -> DataFrame:
        """Read the raw ``__consumer_offsets`` records (RAW_SCHEMA + ``broker_id``), materialised.

        Raises
        ------
        audit.io.fs.InputError, audit.sources.collector.CollectorError
            Naming what to fix.
        """

    @abstractmethod
    def partition_state(
        self, commits: DataFrame, history: bool, share_raw: DataFrame | None = None, share_topics: list | None = None
    ) -> PartitionTables:
        """Return epochs, bounds and epoch end offsets for the partitions of ``commits`` and the share states.

        ``commits`` are ``audit.commits.live_commits`` rows (``history``: every live commit is judged, not only the
        latest); the share-partition states are those of ``share_raw`` (:meth:`read_share_state`;
        ``share_topics``: the topic names share group members subscribe to, which name the states' topic ids on a
        live cluster).
        """

    def read_share_state(self) -> DataFrame | None:
        """Read the raw ``__share_group_state`` records (:data:`audit.formats.share_state.SHARE_RAW_SCHEMA`).

        They are materialised, after :meth:`read_offsets`; None when the source holds none (or does not read them).
        """
        return None

    @property
    @abstractmethod
    def read_issues(self) -> DataFrame:
        """Where the source could not read: :data:`READ_ISSUES_DDL` rows."""

    @abstractmethod
    def inputs(self) -> dict:
        """Return what ``summary.json`` says about the inputs (JSON-serialisable)."""


class LogDirSource(AuditSource):
    """Broker log dirs (or copies), read by :func:`audit.sources.logdirs.read_log_dirs`.

    A damaged ``__consumer_offsets`` replica is completed from another (:func:`recover_from_replicas`).
    """

    def __init__(self, spark: SparkSession, progress: Callable[[str], None], log_dirs: list[str], latest: bool):
        super().__init__(spark, progress)
        self.log_dirs, self.latest = log_dirs, latest
        self.src: Any = None  # audit.sources.logdirs.LogDirTables, once read_offsets ran
        self.inventory: Any = None  # audit.sources.logdirs.Inventory, once listed

    def input_bytes(self) -> int:
        """List the log dirs (driver only, :func:`audit.sources.logdirs.discover`; raises its InputError)."""
        from .logdirs import discover, log_bytes

        if self.inventory is None:
            self.inventory = discover(self.spark, self.log_dirs)
        return log_bytes(self.inventory)

    def read_offsets(self) -> DataFrame:
        from .logdirs import read_log_dirs, recover_from_replicas

        self.src = src = read_log_dirs(self.spark, self.log_dirs, reduce_latest=self.latest, inventory=self.inventory)
        inv = src.inventory
        self.progress(
            f"read: {len(inv.log_dirs)} log dirs, {len(inv.replicas)} partition replicas, "
            f"{len(src.offsets_replicas)} __consumer_offsets partitions"
        )
        raw, self.recovered = recover_from_replicas(self.spark, src.raw_offsets, src, reduce_latest=self.latest)
        if self.recovered:
            self.progress(
                "recovered "
                + ", ".join(
                    f"{r['records']} records of __consumer_offsets-{r['partition']} from broker {r['broker_id']}"
                    for r in self.recovered
                )
            )
        return raw

    def read_share_state(self) -> DataFrame | None:
        return self.src.share_raw if self.src is not None else None

    def partition_state(
        self, commits: DataFrame, history: bool, share_raw: DataFrame | None = None, share_topics: list | None = None
    ) -> PartitionTables:
        s = self.src  # the log dirs' epochs and bounds cover every partition, the share-partitions' too
        expansions = None
        if history:  # the group's commits before its first one on a new partition are needed
            from .expansion import expansion_offsets

            expansions = expansion_offsets(self.spark, s.leader_timeline, s.bounds, s.inventory.replicas, commits)
        return PartitionTables(
            s.epochs, s.bounds, s.epoch_end_offsets, s.leader_timeline, s.broker_timeline, s.replicas, expansions
        )

    @property
    def read_issues(self) -> DataFrame:
        return self.src.read_issues

    def inputs(self) -> dict:
        src = self.src
        return {
            "log_dirs": self.log_dirs,
            "brokers": [
                {"log_dir": ld.uri, "broker_id": ld.broker_id, "broker_id_from_meta_properties": ld.broker_id_known}
                for ld in src.inventory.log_dirs
            ],
            "partition_replicas": len(src.inventory.replicas),
            "metadata_log": src.metadata_source,
            "consumer_offsets_replicas": {
                str(p): {
                    "broker_id": v["answered_by_broker"],
                    "chosen_as": v["authority"],
                    "replicas": v["replica_count"],
                }
                for p, v in sorted(src.offsets_replicas.items())
            },
            # replicas whose partition.metadata topic id is not their topic's (logdirs.topic_id_mismatches);
            # ``stale`` ones are left out of epochs, bounds and REPLICA_DIVERGENCE
            "topic_id_mismatches": src.topic_id_mismatches,
            "notes": src.inventory.notes,
        }


class LiveSource(AuditSource):
    """A running cluster, read-only.

    ``__consumer_offsets`` is read through the ``kafka_offsets_topic`` data source, the partition state through
    :class:`audit.sources.collector.OffsetCollector` (see :mod:`audit.sources.cluster`).
    ``consumer_factory``/``collect`` replace kafka-python (tests).
    """

    def __init__(
        self,
        spark: SparkSession,
        progress: Callable[[str], None],
        bootstrap_servers: str,
        client_config: str | None,
        max_concurrency: int | None = None,
        consumer_factory: Callable[..., Any] | None = None,
        collect: Callable[..., Any] | None = None,
        latest: bool = False,
    ):
        super().__init__(spark, progress)
        self.latest = latest
        self.bootstrap_servers, self.client_config = bootstrap_servers, client_config
        self.max_concurrency, self.consumer_factory, self.collect = max_concurrency, consumer_factory, collect
        self.info: dict = {}

    def read_offsets(self) -> DataFrame:
        from .cluster import read_offsets_topic

        try:
            raw = read_offsets_topic(
                self.spark, self.bootstrap_servers, self.client_config, self.consumer_factory, latest=self.latest
            ).localCheckpoint()
        except Exception as exc:  # a worker's failure reaches the driver wrapped by Spark
            raise_live_read_error(exc)
        self.progress(f"read: __consumer_offsets of {self.bootstrap_servers}")
        return raw

    def read_share_state(self) -> DataFrame | None:
        from .cluster import read_share_state_topic

        try:
            raw = read_share_state_topic(self.spark, self.bootstrap_servers, self.client_config, self.consumer_factory)
            if raw is not None:
                raw = raw.localCheckpoint()
        except Exception as exc:  # noqa: BLE001 - share groups are optional: the consumer groups' audit goes on
            from .client_config import redact

            text = str(exc)
            marker = "KafkaOffsetsTopicError: "
            message = text.rsplit(marker, 1)[1].strip().splitlines()[0] if marker in text else redact(exc)[:500]
            self.info["share_state_error"] = message
            self.progress(f"read: __share_group_state not read, share groups not audited: {message}")
            return None
        if raw is not None:
            self.progress(f"read: __share_group_state of {self.bootstrap_servers}")
        return raw

    def partition_state(
        self, commits: DataFrame, history: bool, share_raw: DataFrame | None = None, share_topics: list | None = None
    ) -> PartitionTables:
        from .cluster import cluster_tables, live_collect

        collect = self.collect or live_collect(self.bootstrap_servers, self.client_config, self.max_concurrency)
        share_requests = None
        if share_raw is not None:

            def share_requests(topic_ids: dict) -> tuple[list, list]:
                # every (topic, partition, leader epoch) a state was written under: a few per share-partition
                names = {v: k for k, v in topic_ids.items()}
                rows = (
                    share_raw.where("kind = 'record' AND decode_error IS NULL AND NOT is_tombstone")
                    .select("topic_id", "partition", "leader_epoch")
                    .distinct()
                    .collect()
                )
                known = [(names[r.topic_id], r.partition, r.leader_epoch) for r in rows if r.topic_id in names]
                reqs = sorted({k for k in known if k[2] is not None and k[2] >= 0})
                return reqs, sorted({(t, p) for t, p, _ in known})

        live = cluster_tables(
            self.spark, commits, collect, history=history, share_topics=share_topics, share_requests=share_requests
        )
        self.info = {**live.info, **{k: v for k, v in self.info.items() if k == "share_state_error"}}
        self.progress(
            f"collect: {live.info['epoch_requests']} OffsetsForLeaderEpoch requests, "
            f"{live.info['partitions']} partitions"
        )
        return PartitionTables(live.epochs, live.bounds, live.epoch_end_offsets, topic_names=live.topic_names)

    @property
    def read_issues(self) -> DataFrame:
        return self.spark.createDataFrame([], READ_ISSUES_DDL)

    def inputs(self) -> dict:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "client_config": bool(self.client_config),
            "cluster": self.info,
        }


class ConnectorSource(LiveSource):
    """``--source kafka-connector``: ``__consumer_offsets`` through Spark's own Kafka connector.

    The read is :func:`audit.sources.cluster.read_offsets_connector`; the partition state as :class:`LiveSource`.
    """

    def read_offsets(self) -> DataFrame:
        from .cluster import read_offsets_connector
        from .collector import CollectorError

        try:
            raw = read_offsets_connector(
                self.spark, self.bootstrap_servers, self.client_config, latest=self.latest
            ).localCheckpoint()
        except CollectorError:
            raise
        except Exception as exc:  # noqa: BLE001 - the JVM's error, shortened
            text = str(exc)
            if "Failed to find data source: kafka" in text:
                from .cluster import connector_package

                raise CollectorError(
                    f"Spark's Kafka connector is not on the classpath: run with --packages "
                    f"{connector_package()} (spark-submit) or let kafka-offset-audit start Spark"
                ) from None
            first = next((ln.strip() for ln in text.splitlines() if "Exception" in ln or "Error" in ln), text[:300])
            from .client_config import redact

            raise CollectorError(
                f"reading __consumer_offsets with Spark's Kafka connector failed: {redact(first)}"
            ) from None
        self.progress(f"read: __consumer_offsets of {self.bootstrap_servers} (Spark's Kafka connector)")
        return raw

    def inputs(self) -> dict:
        return {**super().inputs(), "source": "kafka-connector"}


def raise_live_read_error(exc: BaseException):
    """Raise the :class:`audit.sources.collector.CollectorError` for a failure of the live read, else re-raise.

    The failure is one of the live ``__consumer_offsets`` read; ``exc`` is re-raised when it is not one.  The
    data source raises :class:`audit.sources.kafka_datasource.KafkaOffsetsTopicError` (message already redacted)
    in a Python worker; Spark hands it to the driver wrapped in its own exception, whose text holds the original
    message after ``KafkaOffsetsTopicError: ``.
    """
    from .collector import CollectorError
    from .kafka_datasource import KafkaOffsetsTopicError

    marker = "KafkaOffsetsTopicError: "
    text = str(exc)
    if isinstance(exc, KafkaOffsetsTopicError):
        message = text
    elif marker in text:
        message = text.rsplit(marker, 1)[1].strip().splitlines()[0]
    else:
        raise exc
    raise CollectorError(f"reading __consumer_offsets failed: {message}") from None


def open_source(
    spark: SparkSession,
    cfg: Any,
    progress: Callable[[str], None],
    *,
    consumer_factory: Callable[..., Any] | None = None,
    collect: Callable[..., Any] | None = None,
) -> AuditSource:
    """Open the source ``cfg`` names: ``--bootstrap-servers`` or ``--log-dirs``.

    ``cfg`` is an :class:`audit.pipeline.AuditConfig`.
    """
    if cfg.bootstrap_servers:
        connector = getattr(cfg, "source", "kafka-python") == "kafka-connector"
        return (ConnectorSource if connector else LiveSource)(
            spark,
            progress,
            cfg.bootstrap_servers,
            cfg.client_config,
            cfg.max_concurrency,
            consumer_factory,
            collect,
            latest=cfg.mode == "latest",
        )
    return LogDirSource(spark, progress, cfg.log_dirs, latest=cfg.mode == "latest")


def cache_disagreements(epochs: DataFrame) -> DataFrame:
    """Epochs whose start offset differs between replicas' caches (an unclean election's footprint).

    Input: topic, partition, broker_id, leader_epoch, start_offset rows (every replica's cache).
    Output: topic, partition, leader_epoch, start_offset_by_broker map<string, long>.
    """
    return (
        epochs.groupBy("topic", "partition", "leader_epoch")
        .agg(
            F.countDistinct("start_offset").alias("n"),
            F.map_from_entries(F.collect_list(F.struct(F.col("broker_id").cast("string"), "start_offset"))).alias(
                "start_offset_by_broker"
            ),
        )
        .where(F.col("n") > 1)
        .drop("n")
    )
