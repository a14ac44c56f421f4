"""The collector's output contract and data model.

The columns of the two tables it produces (:data:`EPOCH_END_OFFSETS_COLUMNS`,
:data:`BOUNDS_COLUMNS`), the request targets (:class:`Broker`), the accepted
partition metadata (:class:`PartitionMetadata`), the knobs
(:class:`CollectorConfig`) and the result of one collection
(:class:`CollectionResult`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..client_config import ClientConfig

# ---------------------------------------------------------------- contract

#: ``epoch_end_offsets`` rows: one per (topic, partition, requested epoch >= 0).
EPOCH_END_OFFSETS_COLUMNS = (
    ("topic", "string"),
    ("partition", "int"),
    ("requested_epoch", "int"),
    ("leader_epoch", "int"),  # -1 when undefined
    ("end_offset", "bigint"),  # -1 when undefined
    ("answered_by_broker", "int"),
)
EPOCH_END_OFFSETS_DDL = ", ".join(f"{n} {t}" for n, t in EPOCH_END_OFFSETS_COLUMNS)

#: ``bounds`` rows: one per partition in scope.  Offsets are Kafka record offsets (bigint).
#: ``local_log_start_offset``: the first offset still on the leader's local disk (ListOffsets
#: EARLIEST_LOCAL, timestamp -4; KIP-405, exposed to clients by KIP-1005 at ListOffsetsRequest.json
#: version 8+); equal to ``log_start_offset`` on a topic without tiered storage, larger once segments
#: live only in the remote tier; None (null) when the leader does not support ListOffsets v8 or
#: answered the -4 entry with an error.
BOUNDS_COLUMNS = (
    ("topic", "string"),
    ("partition", "int"),
    ("log_start_offset", "bigint"),
    ("local_log_start_offset", "bigint"),  # None when the leader cannot tell (see above)
    ("log_end_offset", "bigint"),
    ("high_watermark", "bigint"),
    ("leader_id", "int"),
    ("leader_epoch", "int"),
)
BOUNDS_DDL = ", ".join(f"{n} {t}" for n, t in BOUNDS_COLUMNS)

# ------------------------------------------------------------------ model


@dataclass(frozen=True)
class Broker:
    """A request target: a broker from metadata or a bootstrap server.

    ``node_id`` is the broker's int for a broker from metadata, ``"bootstrap-N"`` for a bootstrap server.
    """

    node_id: int | str
    host: str
    port: int
    rack: str | None = None

    def __str__(self) -> str:
        return f"{self.node_id}@{self.host}:{self.port}"

    @property
    def is_bootstrap(self) -> bool:
        """True for a ``bootstrap.servers`` entry (not yet identified by metadata)."""
        return isinstance(self.node_id, str)


@dataclass(frozen=True)
class PartitionMetadata:
    """What the accepted metadata says about one partition."""

    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()


@dataclass
class CollectorConfig:
    """Collector knobs. Times in milliseconds.

    bootstrap_servers: ``host:port`` strings (``bootstrap.servers``).
    metadata_batch_size: topics per MetadataRequest (KIP-526), default 100.
    max_partitions_per_request: partitions per OffsetsForLeaderEpoch/ListOffsets request.
    max_concurrency: requests in flight at once (one per broker batch), default 4.
    max_retries: retry rounds after a retriable partition error, default 8.
    retry_backoff_ms / retry_backoff_max_ms: exponential backoff base and cap.
    request_timeout_ms: per request (the transport enforces it).
    deadline_ms: total budget of one public call (or of :meth:`OffsetCollector.collect`).
    metadata_recovery_strategy: ``"rebootstrap"`` (default) or ``"none"`` (KIP-1102).
    metadata_recovery_rebootstrap_trigger_ms: KIP-1102 trigger, default 300000.
    fail_on_unavailable: raise :class:`PartitionsUnavailableError` when partitions
        stay unanswered (default); when False they are listed in ``problems``.
    """

    bootstrap_servers: Sequence[str] = ("localhost:9092",)
    metadata_batch_size: int = 100
    max_partitions_per_request: int = 1000
    max_concurrency: int = 4
    max_retries: int = 8
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    request_timeout_ms: int = 30_000
    deadline_ms: int = 600_000
    metadata_recovery_strategy: str = "rebootstrap"
    metadata_recovery_rebootstrap_trigger_ms: int = 300_000
    fail_on_unavailable: bool = True

    def __post_init__(self):
        if isinstance(self.bootstrap_servers, str):
            self.bootstrap_servers = [s.strip() for s in self.bootstrap_servers.split(",") if s.strip()]
        if not self.bootstrap_servers:
            raise ValueError("bootstrap_servers is empty")
        if self.metadata_batch_size < 1 or self.max_partitions_per_request < 1 or self.max_concurrency < 1:
            raise ValueError("metadata_batch_size, max_partitions_per_request and max_concurrency must be >= 1")
        if self.metadata_recovery_strategy not in ("rebootstrap", "none"):
            raise ValueError("metadata_recovery_strategy must be 'rebootstrap' or 'none'")

    @classmethod
    def from_client_config(cls, client_config: ClientConfig, **overrides: Any) -> "CollectorConfig":
        """Take bootstrap servers, timeouts, backoffs and the KIP-1102 settings from a parsed :class:`ClientConfig`.

        ``overrides`` win.
        """
        s = client_config.settings
        kw: dict[str, Any] = {
            "metadata_recovery_strategy": client_config.metadata_recovery_strategy,
            "metadata_recovery_rebootstrap_trigger_ms": client_config.metadata_recovery_rebootstrap_trigger_ms,
        }
        if client_config.bootstrap_servers:
            kw["bootstrap_servers"] = client_config.bootstrap_servers
        if "request_timeout_ms" in s:
            kw["request_timeout_ms"] = s["request_timeout_ms"]
        if "retry_backoff_ms" in s:
            kw["retry_backoff_ms"] = s["retry_backoff_ms"]
        if client_config.retry_backoff_max_ms is not None:
            kw["retry_backoff_max_ms"] = client_config.retry_backoff_max_ms
        if client_config.default_api_timeout_ms is not None:
            kw["deadline_ms"] = client_config.default_api_timeout_ms
        kw.update(overrides)
        return cls(**kw)


@dataclass
class CollectionResult:
    """Rows for the two tables plus what could not be collected.

    epoch_end_offsets: rows with :data:`EPOCH_END_OFFSETS_COLUMNS`.
    bounds: rows with :data:`BOUNDS_COLUMNS`.
    problems: ``{"stage", "topic", "partition", "error"}`` dicts (missing topics,
        unknown partitions, partitions left unanswered when ``fail_on_unavailable`` is False).
    stats: counters (requests per API, stale metadata ignored, rebootstraps, retries).
    """

    epoch_end_offsets: list[dict] = field(default_factory=list)
    bounds: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    #: topic name -> topic id (Kafka's ``Uuid.toString``: URL-safe base64, no padding), from Metadata v10+
    topic_ids: dict = field(default_factory=dict)
