"""Live-cluster metadata / epoch collector (read-only).

Asks a running cluster the two questions the judge needs about every partition
in scope, with kafka-python 3's own protocol classes:

* **epoch_end_offsets** - ``OffsetsForLeaderEpoch`` (API key 23, KIP-101/KIP-320)
  per ``(topic, partition, committed leader epoch)``, sent to the partition's
  current leader with ``current_leader_epoch`` set so that a stale leader fences
  the request (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER
  -> refresh metadata and retry).
* **bounds** - ``ListOffsets`` (API key 2) EARLIEST (-2) and LATEST (-1) per
  partition from its leader: the log start offset and the consumer-visible log
  end (high watermark; ``isolation_level=READ_UNCOMMITTED``); and EARLIEST_LOCAL
  (-4, KIP-405/KIP-1005, ListOffsets v8+) where the leader negotiated v8+: the
  first offset still on the leader's local disk (tiered storage).

Metadata (API key 3) is requested only for the topics in scope, in bounded
batches (KIP-526), never for all topics and never with auto topic creation.
Partition metadata whose leader epoch is older than one already seen is
ignored and refetched with exponential backoff (KIP-232). When no metadata
can be obtained from any known broker for
``metadata.recovery.rebootstrap.trigger.ms`` or a response carries
REBOOTSTRAP_REQUIRED (error 129), connections are closed and the collector
bootstraps again from ``bootstrap.servers`` (KIP-1102; strategy
``rebootstrap`` by default, ``none`` disables it).

Nothing is ever written to the cluster: the only requests sent are Metadata,
OffsetsForLeaderEpoch and ListOffsets (plus ApiVersions/SASL handshakes done by
kafka-python's connection layer).

The network is reached through an injectable *transport*: any object with
``send(target, request, timeout_ms) -> response`` (optionally
``close_connections()``, ``close()`` and ``api_version(target, request_type,
timeout_ms) -> int | None``, the version of that request the transport will
send to ``target``; without it no EARLIEST_LOCAL is ever asked), or a plain
callable ``send(target, request) -> response``.  ``target`` is a :class:`Broker`;
its ``node_id`` is the broker id (int) or ``"bootstrap-N"`` for the N-th
bootstrap server.  :class:`KafkaPythonTransport` is the real implementation on
kafka-python's connection manager; tests pass fakes that answer with
kafka-python response objects.

Output rows are plain ``dict``s (see :data:`EPOCH_END_OFFSETS_COLUMNS`,
:data:`BOUNDS_COLUMNS`); the caller turns them into Spark DataFrames.
"""

from __future__ import annotations

import base64
import logging
import os
import ssl
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import kafka.errors as Errors
from kafka.protocol.consumer import (
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from .client_config import ClientConfig, ClientConfigError, load_client_config, redact

log = logging.getLogger(__name__)

__all__ = [
    "BOUNDS_COLUMNS",
    "BOUNDS_DDL",
    "EPOCH_END_OFFSETS_COLUMNS",
    "EPOCH_END_OFFSETS_DDL",
    "AuthenticationFailedError",
    "Broker",
    "BrokersUnreachableError",
    "CollectionResult",
    "CollectorConfig",
    "CollectorError",
    "DeadlineExceededError",
    "KafkaPythonTransport",
    "MissingAclError",
    "OffsetCollector",
    "PartitionState",
    "PartitionsUnavailableError",
    "collect_live",
    "open_collector",
]

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

# ------------------------------------------------------------- error codes

# Kafka's error codes, from kafka-python's catalogue (kafka.errors: one class per code)
NONE = Errors.NoError.errno
UNKNOWN_TOPIC_OR_PARTITION = Errors.UnknownTopicOrPartitionError.errno
LEADER_NOT_AVAILABLE = Errors.LeaderNotAvailableError.errno
NOT_LEADER_OR_FOLLOWER = Errors.NotLeaderForPartitionError.errno  # Kafka's name since 2.6 (KIP-392)
REQUEST_TIMED_OUT = Errors.RequestTimedOutError.errno
REPLICA_NOT_AVAILABLE = Errors.ReplicaNotAvailableError.errno
NETWORK_EXCEPTION = Errors.NetworkExceptionError.errno
INVALID_TOPIC_EXCEPTION = Errors.InvalidTopicError.errno
TOPIC_AUTHORIZATION_FAILED = Errors.TopicAuthorizationFailedError.errno
GROUP_AUTHORIZATION_FAILED = Errors.GroupAuthorizationFailedError.errno
CLUSTER_AUTHORIZATION_FAILED = Errors.ClusterAuthorizationFailedError.errno
KAFKA_STORAGE_ERROR = Errors.KafkaStorageError.errno
FENCED_LEADER_EPOCH = Errors.FencedLeaderEpochError.errno
UNKNOWN_LEADER_EPOCH = Errors.UnknownLeaderEpochError.errno
OFFSET_NOT_AVAILABLE = Errors.OffsetNotAvailableError.errno
UNKNOWN_TOPIC_ID = Errors.UnknownTopicIdError.errno
#: KIP-1102 (Metadata v13 top-level error, Kafka 4.0+): kafka-python 3.0 has no class for it
REBOOTSTRAP_REQUIRED = 129

#: Partition errors after which the collector refreshes metadata and retries (KIP-320).
RETRY_WITH_REFRESH = frozenset(
    {
        UNKNOWN_TOPIC_OR_PARTITION,
        LEADER_NOT_AVAILABLE,
        NOT_LEADER_OR_FOLLOWER,
        REQUEST_TIMED_OUT,
        NETWORK_EXCEPTION,
        KAFKA_STORAGE_ERROR,
        FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH,
        OFFSET_NOT_AVAILABLE,
        UNKNOWN_TOPIC_ID,
    }
)

EARLIEST = -2  # ListOffsets timestamp spec: log start offset
LATEST = -1  # ListOffsets timestamp spec: log end (high watermark for READ_UNCOMMITTED)
#: ListOffsets timestamp spec: the leader's local log start offset (KIP-405; clients from KIP-1005)
EARLIEST_LOCAL = -4
#: first ListOffsets version whose brokers accept EARLIEST_LOCAL (ListOffsetsRequest.json "Version 8
#: enables listing offsets by local log start offset"; Kafka 3.9+ answers -4 at a lower version with
#: UNSUPPORTED_VERSION, brokers before Kafka 3.5 read it as a timestamp and answer some record's offset)
EARLIEST_LOCAL_MIN_VERSION = 8
CONSUMER_REPLICA_ID = -1


def error_name(code: int) -> str:
    """Kafka protocol error name for ``code`` (``FENCED_LEADER_EPOCH``)."""
    if code == REBOOTSTRAP_REQUIRED:
        return "REBOOTSTRAP_REQUIRED"
    err = Errors.for_code(code)
    name = getattr(err, "message", None)
    if not name or err.__name__ == "UnrecognizedBrokerError":
        return f"ERROR_{code}"
    if code == NOT_LEADER_OR_FOLLOWER:
        return "NOT_LEADER_OR_FOLLOWER"
    return name


# ------------------------------------------------------------------ errors


class CollectorError(RuntimeError):
    """Base class of every collector failure. Messages are redacted."""

    def __init__(self, message: str):
        super().__init__(redact(message))


class BrokersUnreachableError(CollectorError):
    """No metadata could be obtained from any broker before the deadline.

    ``brokers``: the brokers tried, as ``"<node_id>@<host>:<port>"`` strings.
    """

    def __init__(self, message: str, brokers: Sequence[str]):
        super().__init__(message)
        self.brokers = list(brokers)


class DeadlineExceededError(CollectorError):
    """The total deadline passed while requests were still failing.

    ``brokers``: the brokers involved; ``pending``: what was still unanswered.
    """

    def __init__(self, message: str, brokers: Sequence[str] = (), pending: Sequence[Any] = ()):
        super().__init__(message)
        self.brokers = list(brokers)
        self.pending = list(pending)


class AuthenticationFailedError(CollectorError):
    """SASL or TLS authentication with a broker failed (not retried)."""

    def __init__(self, message: str, broker: str):
        super().__init__(message)
        self.broker = broker


class MissingAclError(CollectorError):
    """The principal lacks an ACL. ``operation`` (``DESCRIBE``/``READ``...),
    ``resource_type`` (``TOPIC``/``GROUP``/``CLUSTER``), ``resources`` (names)."""

    def __init__(self, message: str, operation: str, resource_type: str, resources: Sequence[str]):
        super().__init__(message)
        self.operation = operation
        self.resource_type = resource_type
        self.resources = sorted(resources)


class PartitionsUnavailableError(CollectorError):
    """Some partitions stayed unanswered after the bounded retries.

    ``partitions``: ``{(topic, partition[, key]): last error text}``.
    """

    def __init__(self, message: str, partitions: Mapping[Any, str]):
        super().__init__(message)
        self.partitions = dict(partitions)


def acl_hint(code: int, resources: Iterable[str], api: str) -> MissingAclError:
    """Build the :class:`MissingAclError` for an authorization error ``code``
    returned by ``api`` (``Metadata``, ``OffsetsForLeaderEpoch``, ``ListOffsets``,
    ``Fetch``) on ``resources``.  KIP-320 made OffsetsForLeaderEpoch require
    DESCRIBE on the topic (CLUSTER_ACTION on the cluster before that); reading
    ``__consumer_offsets`` needs READ on that topic."""
    resources = sorted(set(resources))
    names = ", ".join(resources[:10]) + (f" (+{len(resources) - 10} more)" if len(resources) > 10 else "")
    if code == TOPIC_AUTHORIZATION_FAILED:
        op = "READ" if api == "Fetch" else "DESCRIBE"
        return MissingAclError(
            f"TOPIC_AUTHORIZATION_FAILED from {api}: the client principal needs {op} on Topic:{names} "
            f"(kafka-acls --add --operation {op.capitalize()} --topic <name> --allow-principal <principal>)",
            op,
            "TOPIC",
            resources,
        )
    if code == GROUP_AUTHORIZATION_FAILED:
        return MissingAclError(
            f"GROUP_AUTHORIZATION_FAILED from {api}: the client principal needs READ on Group:{names}",
            "READ",
            "GROUP",
            resources,
        )
    return MissingAclError(
        f"CLUSTER_AUTHORIZATION_FAILED from {api} on {names}: brokers older than Kafka 2.1 require "
        "CLUSTER_ACTION on the Cluster for OffsetsForLeaderEpoch; newer ones need DESCRIBE on the topic",
        "CLUSTER_ACTION",
        "CLUSTER",
        resources,
    )


# ------------------------------------------------------------------ model


@dataclass(frozen=True)
class Broker:
    """A request target: a broker from metadata (``node_id`` int) or a bootstrap
    server (``node_id`` ``"bootstrap-N"``)."""

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
class PartitionState:
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
        """Take bootstrap servers, timeouts, backoffs and the KIP-1102 settings
        from a parsed :class:`ClientConfig`; ``overrides`` win."""
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


class _BrokerFailure(Exception):
    def __init__(self, broker: Broker, error: BaseException):
        super().__init__(str(broker))
        self.broker = broker
        self.error = error


def _parse_host_port(server: str) -> tuple[str, int]:
    server = server.strip()
    if "://" in server:
        server = server.split("://", 1)[1]
    if server.startswith("["):
        host, _, rest = server[1:].partition("]")
        port = rest.lstrip(":")
    elif server.count(":") == 1:
        host, port = server.split(":")
    else:
        host, port = server, ""
    try:
        return host, int(port) if port else 9092
    except ValueError:
        raise ValueError(f"bad bootstrap server {server!r}: port is not a number") from None


def _chunks(items: Sequence, size: int) -> Iterator[list]:
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


def _layers(entries: Sequence[tuple]) -> list[list[tuple]]:
    """Split entries so that every (topic, partition) appears at most once per layer
    (a request may name a partition only once)."""
    layers: list[list[tuple]] = []
    depth: Counter = Counter()
    for e in entries:
        tp = (e[0], e[1])
        i = depth[tp]
        depth[tp] += 1
        if i == len(layers):
            layers.append([])
        layers[i].append(e)
    return layers


def _is_auth_failure(exc: BaseException) -> bool:
    if isinstance(
        exc,
        (
            Errors.SaslAuthenticationFailedError,
            Errors.UnsupportedSaslMechanismError,
            Errors.IllegalSaslStateError,
            ssl.SSLCertVerificationError,
        ),
    ):
        return True
    text = str(exc)
    return "CERTIFICATE_VERIFY_FAILED" in text or "SaslAuthenticationFailed" in text


# --------------------------------------------------------------- transport


class _CallableTransport:
    def __init__(self, fn: Callable[[Broker, Any], Any]):
        self._fn = fn

    def send(self, target: Broker, request: Any, timeout_ms: int | None = None) -> Any:
        return self._fn(target, request)


class KafkaPythonTransport:
    """Real transport over kafka-python 3's ``KafkaConnectionManager``.

    One connection per target, opened on demand (ApiVersions negotiation and
    SASL/TLS as configured), driven by kafka-python's IO thread so that
    :meth:`send` may be called from several threads at once.

    Args:
        client_config: a :class:`ClientConfig` (or a mapping of kafka-python
            settings: ``security_protocol``, ``sasl_*``, ``ssl_*``, ``client_id``,
            ``request_timeout_ms`` ...).
        **settings: extra kafka-python settings (override ``client_config``).
    """

    def __init__(self, client_config: ClientConfig | Mapping[str, Any] | None = None, **settings: Any):
        from kafka.net.manager import KafkaConnectionManager
        from kafka.net.selector import NetworkSelector

        if isinstance(client_config, ClientConfig):
            kw = client_config.connection_kwargs()
        else:
            kw = dict(client_config or {})
        kw.update(settings)
        self._request_timeout_ms = int(kw.get("request_timeout_ms", 30_000))
        self._setup_timeout_ms = int(kw.get("socket_connection_setup_timeout_max_ms", 30_000))
        self._net = NetworkSelector(**kw)
        self._manager = KafkaConnectionManager(self._net, **kw)
        self._net.start()
        self._registered: dict[int | str, tuple[str, int, str | None]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _register(self, target: Broker) -> None:
        # kafka-python resolves node ids through ClusterMetadata; tell it where
        # every target lives (a response-shaped update, no network involved).
        addr = (target.host, int(target.port), target.rack)
        with self._lock:
            known = self._registered.get(target.node_id)
            if known == addr:
                return
            registered = dict(self._registered)
            registered[target.node_id] = addr
            brokers = [
                MetadataResponse.MetadataResponseBroker(version=12, node_id=n, host=h, port=p, rack=r)
                for n, (h, p, r) in registered.items()
            ]
            self._manager.cluster.update_metadata(
                MetadataResponse(
                    version=12, throttle_time_ms=0, brokers=brokers, cluster_id=None, controller_id=-1, topics=[]
                )
            )
            self._registered = registered
            if known is not None:
                self._manager.close(target.node_id)  # address changed: reconnect

    def send(self, target: Broker, request: Any, timeout_ms: int | None = None) -> Any:
        """Send ``request`` to ``target`` and block for its response.

        Raises whatever kafka-python raises: ``KafkaConnectionError``,
        ``NodeNotReadyError`` (reconnect backoff), ``KafkaTimeoutError``,
        ``RequestTimedOutError``, ``SaslAuthenticationFailedError`` ...
        """
        if self._closed:
            raise Errors.KafkaConnectionError("transport closed")
        self._register(target)
        timeout_ms = int(timeout_ms or self._request_timeout_ms)
        manager = self._manager

        async def _round_trip():
            conn = manager.get_connection(target.node_id, refresh_metadata_on_err=False)
            future = conn.send_request(request, request_timeout_ms=timeout_ms)
            return await manager.wait_for(future, timeout_ms + self._setup_timeout_ms)

        return self._net.run(_round_trip)

    def api_version(self, target: Broker, request_type: Any, timeout_ms: int | None = None) -> int | None:
        """The version of ``request_type`` (a kafka-python request class, e.g. ``ListOffsetsRequest``) that
        :meth:`send` will use with ``target``: the highest that kafka-python and the broker both support, from
        the ApiVersions exchange of the connection (``KafkaConnection.broker_version_data``, which kafka-python
        also picks each request's version from).  Opens the connection if there is none yet (the one
        :meth:`send` then uses); no other request is sent.  None when no version is common to both.

        Raises what connecting raises (``KafkaConnectionError``, ``KafkaTimeoutError``, SASL/TLS errors ...).
        """
        if self._closed:
            raise Errors.KafkaConnectionError("transport closed")
        self._register(target)
        timeout_ms = int(timeout_ms or self._request_timeout_ms)
        manager = self._manager

        async def _negotiated():
            conn = manager.get_connection(target.node_id, refresh_metadata_on_err=False)
            await manager.wait_for(conn.init_future, timeout_ms + self._setup_timeout_ms)
            data = conn.broker_version_data
            if data is None:
                return None
            try:
                return data.api_version(request_type)
            except Errors.IncompatibleBrokerVersion:
                return None

        return self._net.run(_negotiated)

    def close_connections(self) -> None:
        """Close every open connection (KIP-1102 rebootstrap)."""
        with self._lock:
            ids = list(self._registered)
        for node_id in ids:
            try:
                self._manager.close(node_id)
            except Exception:  # pragma: no cover - best effort
                log.debug("closing connection to %s failed", node_id, exc_info=True)

    def close(self) -> None:
        """Close all connections and stop the IO thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._manager.close()
        finally:
            self._net.stop(timeout_ms=5000)

    def __enter__(self) -> "KafkaPythonTransport":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------- collector


class OffsetCollector:
    """Collects ``epoch_end_offsets`` and ``bounds`` rows from a live cluster.

    Args:
        transport: object with ``send(target: Broker, request, timeout_ms)``
            (optionally ``close_connections()``/``close()``), or a callable
            ``send(target, request)``; returns kafka-python response objects.
        config: :class:`CollectorConfig`.
        clock: monotonic seconds (injectable for tests).
        sleep: ``sleep(seconds)`` (injectable for tests).

    Thread-safety: one public call at a time; the collector itself fans
    requests out to at most ``max_concurrency`` threads.
    """

    def __init__(
        self,
        transport: Any,
        config: CollectorConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.config = config or CollectorConfig()
        self._transport = transport if hasattr(transport, "send") else _CallableTransport(transport)
        self._clock = clock
        self._sleep = sleep
        self._bootstrap = [
            Broker(f"bootstrap-{i}", *_parse_host_port(s)) for i, s in enumerate(self.config.bootstrap_servers)
        ]
        self._brokers: dict[int, Broker] = {}
        self._partitions: dict[tuple[str, int], PartitionState] = {}
        self._last_seen_epoch: dict[tuple[str, int], int] = {}
        self._topic_partitions: dict[str, set[int]] = defaultdict(set)
        self._missing_topics: dict[str, str] = {}
        self.topic_ids: dict[str, str] = {}
        self._failures: dict[str, list] = {}  # str(broker) -> [consecutive, total, last error]
        self._metadata_wait_started: float | None = None
        self._deadline_at: float | None = None
        self._rr = 0
        self.problems: list[dict] = []
        self.stats: Counter = Counter()
        self._stats_lock = threading.Lock()
        self.rebootstrap_reasons: list[str] = []

    # ------------------------------------------------------------ plumbing

    @contextmanager
    def _operation(self) -> Iterator[None]:
        outer = self._deadline_at is None
        if outer:
            self._deadline_at = self._clock() + self.config.deadline_ms / 1000.0
        try:
            yield
        finally:
            if outer:
                self._deadline_at = None

    def _remaining(self) -> float:
        return self._deadline_at - self._clock() if self._deadline_at is not None else float("inf")

    def _backoff_sleep(self, attempt: int) -> None:
        cfg = self.config
        delay = min(cfg.retry_backoff_ms * (2 ** max(0, attempt - 1)), cfg.retry_backoff_max_ms) / 1000.0
        delay = max(0.0, min(delay, self._remaining()))
        if delay > 0:
            self._sleep(delay)

    def _note_failure(self, broker: Broker, error: Any) -> None:
        rec = self._failures.setdefault(str(broker), [0, 0, ""])
        rec[0] += 1
        rec[1] += 1
        rec[2] = redact(error) if isinstance(error, BaseException) else redact(str(error))
        log.warning("broker %s failed: %s", broker, rec[2])

    def _note_success(self, broker: Broker) -> None:
        rec = self._failures.get(str(broker))
        if rec:
            rec[0] = 0

    def _describe_brokers(self, names: Iterable[str] | None = None) -> str:
        names = list(names) if names is not None else list(self._failures)
        parts = []
        for name in names:
            rec = self._failures.get(name)
            if rec and rec[1]:
                parts.append(f"{name} ({rec[1]} failed attempt(s), last: {rec[2]})")
            else:
                parts.append(name)
        return "; ".join(parts) or "none"

    def _send(self, broker: Broker, request: Any) -> Any:
        with self._stats_lock:
            self.stats[f"requests.{type(request).__name__.split('_v')[0]}"] += 1
        try:
            return self._transport.send(broker, request, self.config.request_timeout_ms)
        except Exception as exc:  # noqa: BLE001 - classified below
            if _is_auth_failure(exc):
                raise AuthenticationFailedError(
                    f"authentication with broker {broker} failed: {redact(exc)}; check security.protocol, "
                    "sasl.mechanism, sasl.jaas.config username/password and the ssl.* trust/key stores",
                    str(broker),
                ) from None
            raise _BrokerFailure(broker, exc) from None

    def _fan_out(self, jobs: list[tuple[Broker, Any]]) -> list[Any]:
        """Send each (broker, request); return responses or _BrokerFailure, in job order."""

        def one(job):
            broker, request = job
            try:
                return self._send(broker, request)
            except _BrokerFailure as failure:
                return failure

        workers = min(self.config.max_concurrency, len(jobs))
        if workers <= 1:
            return [one(j) for j in jobs]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="offset-audit") as pool:
            return list(pool.map(one, jobs))

    def send_all(self, jobs: list[tuple[Broker, Any]]) -> list[Any]:
        """Send each ``(broker, request)`` (at most ``max_concurrency`` in flight) and return, in job order, the
        response or the exception of a broker that failed (the failure is noted against the broker, as for the
        collector's own requests).

        Raises:
            AuthenticationFailedError: SASL/TLS failure with a broker.
        """
        out = []
        for (broker, _), outcome in zip(jobs, self._fan_out(jobs)):
            if isinstance(outcome, _BrokerFailure):
                self._note_failure(broker, outcome.error)
                out.append(outcome.error)
            else:
                self._note_success(broker)
                out.append(outcome)
        return out

    def leader(self, topic: str, partition: int) -> Broker | None:
        """The leader of ``topic``-``partition`` in the accepted metadata (None: unknown, offline, or not a
        known broker)."""
        state = self._partitions.get((topic, partition))
        if state is None or state.leader_id is None or state.leader_id < 0:
            return None
        return self._brokers.get(state.leader_id)

    # ------------------------------------------------------------ metadata

    def _metadata_candidates(self) -> list[Broker]:
        brokers = sorted(self._brokers.values(), key=lambda b: b.node_id) or list(self._bootstrap)
        self._rr = (self._rr + 1) % len(brokers)
        rotated = brokers[self._rr :] + brokers[: self._rr]
        return sorted(rotated, key=lambda b: self._failures.get(str(b), [0])[0])

    def _rebootstrap_due(self) -> bool:
        cfg = self.config
        return (
            cfg.metadata_recovery_strategy == "rebootstrap"
            and self._metadata_wait_started is not None
            and (self._clock() - self._metadata_wait_started) * 1000.0 >= cfg.metadata_recovery_rebootstrap_trigger_ms
        )

    def _rebootstrap(self, reason: str) -> None:
        """KIP-1102: close all connections and start again from bootstrap.servers."""
        log.warning("rebootstrapping from %s: %s", ", ".join(map(str, self._bootstrap)), reason)
        self.stats["rebootstraps"] += 1
        self.rebootstrap_reasons.append(reason)
        close = getattr(self._transport, "close_connections", None)
        if close is not None:
            close()
        self._brokers.clear()
        for b in self._bootstrap:
            rec = self._failures.get(str(b))
            if rec:
                rec[0] = 0
        self._metadata_wait_started = self._clock()

    def _request_metadata(self, topics: list[str]) -> tuple[Any, Broker]:
        """One MetadataRequest for exactly ``topics`` from any reachable broker."""
        cfg = self.config
        if self._metadata_wait_started is None:
            self._metadata_wait_started = self._clock()
        tried: list[str] = []
        attempt = 0
        while True:
            for broker in self._metadata_candidates():
                if self._remaining() <= 0:
                    preview = ", ".join(topics[:5]) + (" ..." if len(topics) > 5 else "")
                    names = list(dict.fromkeys(tried)) or [str(b) for b in self._metadata_candidates()]
                    raise BrokersUnreachableError(
                        f"no metadata for {len(topics)} topic(s) [{preview}] from any broker within the "
                        f"{cfg.deadline_ms} ms deadline (rebootstraps: {self.stats['rebootstraps']}, "
                        f"metadata.recovery.strategy={cfg.metadata_recovery_strategy}); brokers tried: "
                        f"{self._describe_brokers(dict.fromkeys(tried))}",
                        names,
                    )
                tried.append(str(broker))
                request = MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                    allow_auto_topic_creation=False,
                )
                try:
                    response = self._send(broker, request)
                except _BrokerFailure as failure:
                    failure_text: Any = failure.error
                else:
                    top = getattr(response, "error_code", 0) or 0
                    if top == REBOOTSTRAP_REQUIRED:
                        self._note_failure(broker, "REBOOTSTRAP_REQUIRED (129)")
                        if cfg.metadata_recovery_strategy == "rebootstrap":
                            self._rebootstrap(f"broker {broker} answered REBOOTSTRAP_REQUIRED")
                            break
                        continue
                    failure_text = (
                        f"Metadata error {error_name(top)}"
                        if top
                        else None
                        if response.brokers
                        else "Metadata response lists no brokers"
                    )
                if failure_text is not None:
                    self._note_failure(broker, failure_text)
                    # KIP-1102: checked after a failed attempt, so every (re)bootstrap gets tried at least once
                    if self._rebootstrap_due():
                        self._rebootstrap(
                            f"no metadata from any known broker for {cfg.metadata_recovery_rebootstrap_trigger_ms} "
                            "ms (metadata.recovery.rebootstrap.trigger.ms)"
                        )
                        break
                    continue
                self._note_success(broker)
                self._metadata_wait_started = None
                self._brokers = {
                    b.node_id: Broker(b.node_id, b.host, b.port, getattr(b, "rack", None)) for b in response.brokers
                }
                return response, broker
            attempt += 1
            self._backoff_sleep(attempt)

    def _apply_metadata(
        self, response: Any, requested: set[str], broker: Broker, unauthorized: set[str], topic_errors: dict[str, str]
    ) -> set[str]:
        """Merge one MetadataResponse; return the topics to refetch."""
        retry: set[str] = set()
        seen: set[str] = set()
        for t in response.topics:
            name = t.name
            if name not in requested:
                self.stats["metadata.unrequested_topics_ignored"] += 1
                continue
            seen.add(name)
            code = t.error_code
            if code == NONE:
                self._missing_topics.pop(name, None)
                topic_errors.pop(name, None)
                tid = getattr(t, "topic_id", None)
                if tid is not None and getattr(tid, "int", None):  # Metadata v10+; the zero Uuid means none
                    self.topic_ids[name] = base64.urlsafe_b64encode(tid.bytes).rstrip(b"=").decode()
                for p in t.partitions:
                    tp = (name, p.partition_index)
                    self._topic_partitions[name].add(p.partition_index)
                    epoch = p.leader_epoch if p.leader_epoch is not None else -1
                    seen_epoch = self._last_seen_epoch.get(tp, -1)
                    if epoch >= 0 and epoch < seen_epoch:
                        # KIP-232: never step back to older metadata; keep ours, refetch.
                        self.stats["metadata.stale_partitions_ignored"] += 1
                        log.info(
                            "ignoring stale metadata for %s-%s from %s: leader epoch %s < %s already seen",
                            name,
                            p.partition_index,
                            broker,
                            epoch,
                            seen_epoch,
                        )
                        retry.add(name)
                        continue
                    if p.error_code not in (NONE, LEADER_NOT_AVAILABLE, REPLICA_NOT_AVAILABLE):
                        topic_errors[name] = f"partition {p.partition_index}: {error_name(p.error_code)}"
                    self._partitions[tp] = PartitionState(
                        name,
                        p.partition_index,
                        p.leader_id,
                        epoch,
                        tuple(p.replica_nodes or ()),
                        tuple(p.isr_nodes or ()),
                        tuple(getattr(p, "offline_replicas", None) or ()),
                    )
                    if epoch >= 0:
                        self._last_seen_epoch[tp] = max(seen_epoch, epoch)
                    if p.leader_id is None or p.leader_id < 0:
                        retry.add(name)
                        topic_errors[name] = f"partition {p.partition_index} has no leader ({error_name(p.error_code)})"
            elif code in (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, INVALID_TOPIC_EXCEPTION):
                self._missing_topics[name] = error_name(code)
            elif code == TOPIC_AUTHORIZATION_FAILED:
                unauthorized.add(name)
            else:
                retry.add(name)
                topic_errors[name] = error_name(code)
        for name in requested - seen:
            retry.add(name)
            topic_errors.setdefault(name, f"topic missing from the Metadata response of {broker}")
        return retry

    def fetch_metadata(self, topics: Iterable[str]) -> dict[tuple[str, int], PartitionState]:
        """Fetch metadata for exactly ``topics`` (KIP-526: only these, in batches of
        ``metadata_batch_size``, ``allow_auto_topic_creation=False``).

        Returns ``{(topic, partition): PartitionState}`` for the topics found.
        Topics the cluster does not know are recorded in :attr:`missing_topics`
        (and ``problems``), not raised.

        Raises:
            MissingAclError: TOPIC_AUTHORIZATION_FAILED (needs DESCRIBE on the topics).
            BrokersUnreachableError: no broker answered before the deadline.
            AuthenticationFailedError: SASL/TLS failure.
        """
        wanted = sorted({t for t in topics if t})
        if not wanted:
            return {}
        with self._operation():
            pending = wanted
            attempt = 0
            unauthorized: set[str] = set()
            topic_errors: dict[str, str] = {}
            while pending:
                retry: set[str] = set()
                for batch in _chunks(pending, self.config.metadata_batch_size):
                    response, broker = self._request_metadata(batch)
                    retry |= self._apply_metadata(response, set(batch), broker, unauthorized, topic_errors)
                if unauthorized:
                    raise acl_hint(TOPIC_AUTHORIZATION_FAILED, unauthorized, "Metadata")
                pending = sorted(retry)
                if not pending:
                    break
                attempt += 1
                if attempt > self.config.max_retries or self._remaining() <= 0:
                    for name in pending:
                        if name in topic_errors:
                            log.warning("metadata for topic %s still incomplete: %s", name, topic_errors[name])
                    break
                self._backoff_sleep(attempt)
            for name in wanted:
                if name in self._missing_topics:
                    self._problem("metadata", name, None, self._missing_topics[name])
        wanted_set = set(wanted)
        return {tp: st for tp, st in self._partitions.items() if tp[0] in wanted_set}

    @property
    def missing_topics(self) -> dict[str, str]:
        """``{topic: error name}`` for topics the cluster reported as unknown."""
        return dict(self._missing_topics)

    @property
    def brokers(self) -> dict[int, Broker]:
        """Brokers of the last accepted Metadata response."""
        return dict(self._brokers)

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """The accepted metadata for one partition, if any."""
        return self._partitions.get((topic, partition))

    def _problem(self, stage: str, topic: str, partition: int | None, error: str) -> None:
        row = {"stage": stage, "topic": topic, "partition": partition, "error": redact(error)}
        if row not in self.problems:
            self.problems.append(row)

    # ------------------------------------------------- per-leader requests

    def _ensure_metadata(self, topics: Iterable[str]) -> None:
        unknown = sorted({t for t in topics if t not in self._topic_partitions and t not in self._missing_topics})
        if unknown:
            self.fetch_metadata(unknown)

    def _leader_round_trips(
        self,
        stage: str,
        entries: list[tuple],
        build: Callable[[list[tuple]], Any],
        parse: Callable[[Any], Iterable[tuple]],
        on_ok: Callable[[tuple, Broker, Any], None],
        api: str,
        optional: Callable[[tuple], bool] | None = None,
        admits: Callable[[Broker], bool | None] | None = None,
        on_skip: Callable[[tuple, str], None] | None = None,
    ) -> None:
        """Send ``entries`` (``(topic, partition, ...)``) to the partitions' leaders until each is answered.

        ``optional(entry)`` marks entries the call may leave unanswered: they go only to a leader for which
        ``admits(leader)`` is True (False, or no ``admits``: dropped; None or an exception: not known yet, kept
        for the next round), and a
        non-retriable error code, an ``IncompatibleBrokerVersion`` from the transport, or retries / the
        deadline running out drop them instead of failing the call; ``on_skip(entry, reason)`` is told of
        every dropped one.  Retriable errors retry them like the others.
        """
        pending = dict.fromkeys(entries)
        last_error: dict[tuple, str] = {}
        involved: set[str] = set()
        attempt = 0
        is_optional = optional or (lambda e: False)

        def skip(e: tuple, reason: str) -> None:
            pending.pop(e, None)
            if on_skip is not None:
                on_skip(e, reason)

        def skip_optional_pending() -> None:
            for e in [e for e in pending if is_optional(e)]:
                skip(e, last_error.get(e, "no answer"))

        while pending:
            if self._remaining() <= 0:
                skip_optional_pending()
                if not pending:
                    break
                raise DeadlineExceededError(
                    f"{api}: {len(pending)} request(s) still unanswered when the {self.config.deadline_ms} ms "
                    f"deadline passed; brokers involved: {self._describe_brokers(sorted(involved))}; e.g. "
                    + "; ".join(f"{e[0]}-{e[1]}: {last_error.get(e, 'no answer')}" for e in list(pending)[:5]),
                    sorted(involved),
                    list(pending),
                )
            refresh: set[str] = set()
            by_leader: dict[int, list[tuple]] = defaultdict(list)
            for e in list(pending):
                topic, partition = e[0], e[1]
                state = self._partitions.get((topic, partition))
                if topic in self._missing_topics:
                    self._problem(stage, topic, partition, self._missing_topics[topic])
                    pending.pop(e)
                    continue
                if state is None:
                    if (
                        topic in self._topic_partitions
                        and partition not in self._topic_partitions[topic]
                        and attempt > 0
                    ):
                        self._problem(stage, topic, partition, "UNKNOWN_PARTITION (not in topic metadata)")
                        pending.pop(e)
                        continue
                    last_error[e] = "no metadata for the partition"
                    refresh.add(topic)
                    continue
                if state.leader_id is None or state.leader_id < 0:
                    last_error[e] = "partition has no leader (offline)"
                    refresh.add(topic)
                    continue
                if state.leader_id not in self._brokers:
                    last_error[e] = f"leader {state.leader_id} is not in the broker list"
                    refresh.add(topic)
                    continue
                by_leader[state.leader_id].append(e)
            if optional is not None:
                asking = [n for n in sorted(by_leader) if any(is_optional(e) for e in by_leader[n])]
                support = self._admissions([self._brokers[n] for n in asking], admits)
                for node_id in asking:
                    verdict = support[node_id]
                    if verdict:
                        continue
                    broker = self._brokers[node_id]
                    kept = []
                    for e in by_leader[node_id]:
                        if not is_optional(e):
                            kept.append(e)
                        elif verdict is None:
                            last_error[e] = f"{api} versions of leader {broker} not known yet"
                        else:
                            skip(e, f"{api} version unsupported by {broker}")
                    by_leader[node_id] = kept
            jobs: list[tuple[Broker, list[tuple], Any]] = []
            for node_id in sorted(by_leader):
                if not by_leader[node_id]:
                    continue
                broker = self._brokers[node_id]
                involved.add(str(broker))
                for layer in _layers(by_leader[node_id]):
                    for chunk in _chunks(layer, self.config.max_partitions_per_request):
                        jobs.append((broker, chunk, build(chunk)))
            outcomes = self._fan_out([(b, req) for b, _, req in jobs]) if jobs else []
            denied: dict[int, set[str]] = defaultdict(set)
            for (broker, chunk, _), outcome in zip(jobs, outcomes):
                if isinstance(outcome, _BrokerFailure):
                    if isinstance(outcome.error, Errors.IncompatibleBrokerVersion):
                        # kafka-python refused to send (the request's min_version is above what the
                        # connection negotiated): nothing went out; optional entries are dropped
                        for e in chunk:
                            if is_optional(e):
                                skip(e, f"{api} version unsupported by {broker}")
                            else:
                                last_error[e] = f"{broker}: {redact(outcome.error)}"
                        continue
                    self._note_failure(broker, outcome.error)
                    for e in chunk:
                        last_error[e] = f"leader {broker} unreachable: {redact(outcome.error)}"
                        refresh.add(e[0])
                    continue
                self._note_success(broker)
                answers = {(t, p): (code, payload) for t, p, code, payload in parse(outcome)}
                for e in chunk:
                    got = answers.get((e[0], e[1]))
                    if got is None:
                        last_error[e] = f"partition missing from the {api} response of {broker}"
                        refresh.add(e[0])
                        continue
                    code, payload = got
                    retriable = code in RETRY_WITH_REFRESH or Errors.for_code(code).retriable
                    if code == NONE:
                        on_ok(e, broker, payload)
                        pending.pop(e, None)
                    elif is_optional(e) and not retriable:
                        skip(e, f"{error_name(code)} from {broker}")
                    elif code in (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED):
                        denied[code].add(e[0])
                    elif retriable:
                        self.stats[f"{api}.retry.{error_name(code)}"] += 1
                        last_error[e] = f"{error_name(code)} from {broker}"
                        refresh.add(e[0])
                    else:
                        raise CollectorError(f"{api} for {e[0]}-{e[1]} failed at broker {broker}: {error_name(code)}")
            for code, names in denied.items():
                raise acl_hint(code, names, api)
            if not pending:
                break
            attempt += 1
            if attempt > self.config.max_retries:
                skip_optional_pending()
                if not pending:
                    break
                unresolved = {e: last_error.get(e, "no answer") for e in pending}
                if self.config.fail_on_unavailable:
                    raise PartitionsUnavailableError(
                        f"{api}: {len(unresolved)} request(s) unanswered after {self.config.max_retries} "
                        f"retries; brokers involved: {self._describe_brokers(sorted(involved))}; "
                        + "; ".join(f"{e[0]}-{e[1]}: {err}" for e, err in list(unresolved.items())[:10]),
                        unresolved,
                    )
                for e, err in unresolved.items():
                    self._problem(stage, e[0], e[1], err)
                break
            self._backoff_sleep(attempt)
            if refresh:
                self.fetch_metadata(sorted(refresh - set(self._missing_topics)))

    def _admissions(
        self, brokers: list[Broker], admits: Callable[[Broker], bool | None] | None
    ) -> dict[int | str, bool | None]:
        """``admits(broker)`` for each broker (at most ``max_concurrency`` at once: it may open connections);
        an exception counts as None (not known yet), except SASL/TLS failures, which raise."""
        if admits is None:
            return {b.node_id: False for b in brokers}

        def one(broker: Broker) -> bool | None:
            try:
                return admits(broker)
            except Exception as exc:  # noqa: BLE001 - classified below
                if _is_auth_failure(exc):
                    raise AuthenticationFailedError(
                        f"authentication with broker {broker} failed: {redact(exc)}; check security.protocol, "
                        "sasl.mechanism, sasl.jaas.config username/password and the ssl.* trust/key stores",
                        str(broker),
                    ) from None
                log.debug("API versions of broker %s not known: %s", broker, redact(exc))
                return None

        workers = min(self.config.max_concurrency, len(brokers))
        if workers <= 1:
            return {b.node_id: one(b) for b in brokers}
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="offset-audit") as pool:
            return {b.node_id: v for b, v in zip(brokers, pool.map(one, brokers))}

    def _request_version(self, broker: Broker, request_type: Any) -> int | None:
        """The version of ``request_type`` the transport sends to ``broker`` (its ``api_version``: the ApiVersions
        negotiation of the connection), or None when the transport cannot tell."""
        probe = getattr(self._transport, "api_version", None)
        if probe is None:
            return None
        version = probe(broker, request_type, self.config.request_timeout_ms)
        return None if version is None else int(version)

    # -------------------------------------------------- OffsetsForLeaderEpoch

    def epoch_end_offsets(self, requests: Iterable[tuple[str, int, int]]) -> list[dict]:
        """End offset of each requested leader epoch, from the partition's leader.

        Args:
            requests: ``(topic, partition, committed_leader_epoch)`` triples;
                duplicates are answered once, epochs < 0 (unknown, never
                validated by Kafka's consumer) are skipped.

        Returns:
            rows ``{topic: str, partition: int, requested_epoch: int,
            leader_epoch: int, end_offset: int, answered_by_broker: int}``:
            the leader's answer per FORMATS.md section 4 (``-1, -1`` when
            undefined), sorted by topic, partition, requested_epoch.

        Protocol: OffsetsForLeaderEpoch (KIP-101) with ``replica_id=-1`` and
        ``current_leader_epoch`` from metadata (KIP-320 fencing). Each partition
        appears once per request; requests are batched per leader and sent
        with at most ``max_concurrency`` in flight. FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER (and other retriable
        errors) refresh metadata and retry with exponential backoff.

        Raises:
            MissingAclError (DESCRIBE on the topic), PartitionsUnavailableError,
            DeadlineExceededError, BrokersUnreachableError, AuthenticationFailedError.
        """
        wanted = {(str(t), int(p), int(e)) for t, p, e in requests}
        entries = sorted(r for r in wanted if r[2] >= 0)
        self.stats["epoch_end_offsets.skipped_negative_epochs"] += len(wanted) - len(entries)
        rows: list[dict] = []
        if not entries:
            return rows
        with self._operation():
            self._ensure_metadata({e[0] for e in entries})

            def build(chunk: list[tuple]) -> Any:
                topics: dict[str, list] = {}
                for topic, partition, epoch in chunk:
                    state = self._partitions[(topic, partition)]
                    topics.setdefault(topic, []).append(
                        OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                            partition=partition, current_leader_epoch=state.leader_epoch, leader_epoch=epoch
                        )
                    )
                return OffsetForLeaderEpochRequest(
                    replica_id=CONSUMER_REPLICA_ID,
                    topics=[
                        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=t, partitions=ps)
                        for t, ps in topics.items()
                    ],
                )

            def parse(response: Any) -> Iterator[tuple]:
                for t in response.topics:
                    for p in t.partitions:
                        yield t.topic, p.partition, p.error_code, (p.leader_epoch, p.end_offset)

            def on_ok(entry: tuple, broker: Broker, payload: tuple) -> None:
                leader_epoch, end_offset = payload
                if leader_epoch is None or end_offset is None or leader_epoch < 0 or end_offset < 0:
                    leader_epoch, end_offset = -1, -1
                rows.append(
                    {
                        "topic": entry[0],
                        "partition": entry[1],
                        "requested_epoch": entry[2],
                        "leader_epoch": int(leader_epoch),
                        "end_offset": int(end_offset),
                        "answered_by_broker": int(broker.node_id),
                    }
                )

            self._leader_round_trips("epoch_end_offsets", entries, build, parse, on_ok, "OffsetsForLeaderEpoch")
        rows.sort(key=lambda r: (r["topic"], r["partition"], r["requested_epoch"]))
        return rows

    # ------------------------------------------------------------- ListOffsets

    def log_bounds(self, topics: Iterable[str] = (), partitions: Iterable[tuple[str, int]] = ()) -> list[dict]:
        """Log start / end offsets of every partition of ``topics`` plus the
        explicitly listed ``(topic, partition)`` pairs.

        Returns:
            rows ``{topic: str, partition: int, log_start_offset: int,
            local_log_start_offset: int | None, log_end_offset: int,
            high_watermark: int, leader_id: int, leader_epoch: int}``
            (offsets are record offsets). ``log_end_offset`` is ListOffsets
            LATEST under READ_UNCOMMITTED, i.e. the high watermark (the end a
            consumer can see), so ``high_watermark == log_end_offset``.
            ``local_log_start_offset`` is ListOffsets EARLIEST_LOCAL: the first
            offset still on the leader's local disk (``UnifiedLog.localLogStartOffset``),
            ``>= log_start_offset`` with tiered storage (KIP-405) and equal to it
            without; None when the leader's negotiated ListOffsets version is
            below 8 (or the transport cannot tell the version), or when the
            leader answered that entry with an error (or never, within the
            retries): the partition's other columns are unaffected.
            ``leader_id`` is the broker that answered; ``leader_epoch`` its
            epoch from metadata.

        Protocol: ListOffsets (API key 2) EARLIEST (-2), LATEST (-1) and, to a
        leader whose connection negotiated ListOffsets v8+ (ApiVersions; the
        transport's ``api_version``), EARLIEST_LOCAL (-4; KIP-1005,
        ListOffsetsRequest.json "Version 8 enables listing offsets by local log
        start offset"), with ``current_leader_epoch`` (KIP-320 fencing), batched
        per leader.  A partition may appear only once in a request (Kafka
        answers a duplicate with INVALID_REQUEST), so each spec goes in its own
        request to the leader, all sent in the same round; the -4 requests
        carry ``min_version=8`` so kafka-python never sends them lower.

        Raises:
            MissingAclError (DESCRIBE on the topic), PartitionsUnavailableError,
            DeadlineExceededError, BrokersUnreachableError, AuthenticationFailedError.
        """
        topics = {str(t) for t in topics}
        explicit = {(str(t), int(p)) for t, p in partitions}
        if not topics and not explicit:
            return []
        with self._operation():
            self._ensure_metadata(topics | {t for t, _ in explicit})
            scope = set(explicit)
            for t in topics:
                scope |= {(t, p) for p in self._topic_partitions.get(t, ())}
            entries = sorted((t, p, spec) for t, p in scope for spec in (EARLIEST_LOCAL, EARLIEST, LATEST))
            offsets: dict[tuple[str, int], dict[int, int]] = defaultdict(dict)
            answered_by: dict[tuple[str, int], Broker] = {}

            def build(chunk: list[tuple]) -> Any:
                by_topic: dict[str, list] = {}
                for topic, partition, spec in chunk:
                    state = self._partitions[(topic, partition)]
                    by_topic.setdefault(topic, []).append(
                        ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=partition, current_leader_epoch=state.leader_epoch, timestamp=spec
                        )
                    )
                extra = {}
                if any(spec == EARLIEST_LOCAL for _, _, spec in chunk):
                    # never below v8: a broker before Kafka 3.5 would read -4 as a timestamp
                    extra["min_version"] = EARLIEST_LOCAL_MIN_VERSION
                return ListOffsetsRequest(
                    replica_id=CONSUMER_REPLICA_ID,
                    isolation_level=0,
                    topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
                    timeout_ms=self.config.request_timeout_ms,
                    **extra,
                )

            def is_local_start(entry: tuple) -> bool:
                return entry[2] == EARLIEST_LOCAL

            def admits(broker: Broker) -> bool:
                # raises (connection failed): not known yet
                version = self._request_version(broker, ListOffsetsRequest)
                return version is not None and version >= EARLIEST_LOCAL_MIN_VERSION

            def on_skip(entry: tuple, reason: str) -> None:
                with self._stats_lock:
                    self.stats["bounds.local_log_start_unknown"] += 1
                log.debug("%s-%s: no local log start offset (%s)", entry[0], entry[1], reason)

            def parse(response: Any) -> Iterator[tuple]:
                for t in response.topics:
                    for p in t.partitions:
                        offset = p.offset
                        if (offset is None or offset < 0) and getattr(p, "old_style_offsets", None):
                            offset = p.old_style_offsets[0]
                        yield t.name, p.partition_index, p.error_code, offset

            def on_ok(entry: tuple, broker: Broker, offset: int) -> None:
                if entry[2] == EARLIEST_LOCAL:  # a broker may answer it without an offset: left unknown
                    if offset is not None and offset >= 0:
                        offsets[(entry[0], entry[1])][EARLIEST_LOCAL] = int(offset)
                    else:
                        on_skip(entry, f"no offset from {broker}")
                    return
                offsets[(entry[0], entry[1])][entry[2]] = int(offset)
                if entry[2] == LATEST or (entry[0], entry[1]) not in answered_by:
                    answered_by[(entry[0], entry[1])] = broker

            self._leader_round_trips(
                "bounds",
                entries,
                build,
                parse,
                on_ok,
                "ListOffsets",
                optional=is_local_start,
                admits=admits,
                on_skip=on_skip,
            )

        rows = []
        for (topic, partition), found in sorted(offsets.items()):
            if EARLIEST not in found or LATEST not in found:
                continue
            state = self._partitions.get((topic, partition))
            rows.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "log_start_offset": found[EARLIEST],
                    "local_log_start_offset": found.get(EARLIEST_LOCAL),
                    "log_end_offset": found[LATEST],
                    "high_watermark": found[LATEST],
                    "leader_id": int(answered_by[(topic, partition)].node_id),
                    "leader_epoch": state.leader_epoch if state else -1,
                }
            )
        return rows

    # ------------------------------------------------------------- together

    def check_bootstrap(self) -> list[str]:
        """One MetadataRequest for no topic (``topics=[]``) to any bootstrap broker, under the
        deadline: proves a broker is reachable and the client authenticates (SASL/TLS) before any
        work starts.  Returns the brokers the cluster advertised (``host:port``).

        Raises:
            BrokersUnreachableError: no broker answered within ``deadline_ms``.
            AuthenticationFailedError: SASL/TLS failure.
        """
        with self._operation():
            self._request_metadata([])
        return [f"{b.host}:{b.port}" for b in self._brokers.values()]

    def collect(
        self,
        epoch_requests: Iterable[tuple[str, int, int]] = (),
        bounds_topics: Iterable[str] | None = None,
        bounds_partitions: Iterable[tuple[str, int]] = (),
    ) -> CollectionResult:
        """Both tables under one deadline.

        Args:
            epoch_requests: ``(topic, partition, committed_leader_epoch)``.
            bounds_topics: topics whose every partition gets a bounds row; by
                default the topics of ``epoch_requests``.
            bounds_partitions: extra ``(topic, partition)`` pairs for bounds.

        Metadata for all topics in scope is fetched first, in batches (KIP-526).
        """
        epoch_requests = list(epoch_requests)
        if bounds_topics is None:
            bounds_topics = {t for t, _, _ in epoch_requests}
        bounds_topics = set(bounds_topics)
        bounds_partitions = list(bounds_partitions)
        with self._operation():
            scope = bounds_topics | {t for t, _, _ in epoch_requests} | {t for t, _ in bounds_partitions}
            self._ensure_metadata(scope)
            epochs = self.epoch_end_offsets(epoch_requests)
            bounds = self.log_bounds(bounds_topics, bounds_partitions)
        return CollectionResult(epochs, bounds, list(self.problems), dict(self.stats), dict(self.topic_ids))

    def close(self) -> None:
        """Close the transport if it has ``close()``."""
        close = getattr(self._transport, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "OffsetCollector":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ------------------------------------------------------------- entry points


def open_collector(
    client_config: ClientConfig | str | None = None,
    *,
    bootstrap_servers: Sequence[str] | str | None = None,
    **config_overrides: Any,
) -> OffsetCollector:
    """An :class:`OffsetCollector` on the real :class:`KafkaPythonTransport`.

    Args:
        client_config: a :class:`ClientConfig`, a path to a client ``.properties``
            file, or None (PLAINTEXT defaults).
        bootstrap_servers: overrides ``bootstrap.servers`` of the properties.
        **config_overrides: :class:`CollectorConfig` fields.

    Raises:
        ClientConfigError: bad properties; ValueError: no bootstrap servers.
    """
    if isinstance(client_config, str):
        client_config = load_client_config(client_config)
    client_config = client_config or ClientConfig()
    if bootstrap_servers is not None:
        if isinstance(bootstrap_servers, str):
            bootstrap_servers = [s.strip() for s in bootstrap_servers.split(",") if s.strip()]
        config_overrides["bootstrap_servers"] = list(bootstrap_servers)
    config = CollectorConfig.from_client_config(client_config, **config_overrides)
    transport = KafkaPythonTransport(client_config.with_overrides(bootstrap_servers=list(config.bootstrap_servers)))
    return OffsetCollector(transport, config)


#: Longest wait of :func:`check_bootstrap`, ms (env ``KOA_BOOTSTRAP_CHECK_MS`` overrides it).
BOOTSTRAP_CHECK_MS = 15_000


def check_bootstrap(
    client_config: ClientConfig | str | None = None,
    *,
    bootstrap_servers: Sequence[str] | str | None = None,
    timeout_ms: int | None = None,
) -> list[str]:
    """Driver-side check that the cluster answers before Spark starts reading it.

    Opens a real collector whose whole budget, per-request timeout and connection-setup timeout
    are ``timeout_ms`` (default ``KOA_BOOTSTRAP_CHECK_MS`` or :data:`BOOTSTRAP_CHECK_MS`, 15 s) and
    asks any bootstrap broker for metadata of no topic (:meth:`OffsetCollector.check_bootstrap`),
    as a Kafka client's bootstrap does.  Returns the advertised brokers (``host:port``).

    Raises:
        ClientConfigError: bad client properties (or an unreadable file).
        BrokersUnreachableError: no broker answered within ``timeout_ms`` (the message names
            the brokers tried and their last error).
        AuthenticationFailedError: SASL/TLS failure.
        CollectorError: a bootstrap server that is not ``host:port``.
    """
    if timeout_ms is None:
        try:
            timeout_ms = int(os.environ.get("KOA_BOOTSTRAP_CHECK_MS", BOOTSTRAP_CHECK_MS))
        except ValueError:
            timeout_ms = BOOTSTRAP_CHECK_MS
    timeout_ms = max(int(timeout_ms), 1)
    if isinstance(client_config, str):
        client_config = load_client_config(client_config)
    client_config = (client_config or ClientConfig()).with_overrides(
        request_timeout_ms=timeout_ms,
        socket_connection_setup_timeout_ms=timeout_ms,
        socket_connection_setup_timeout_max_ms=timeout_ms,
    )
    try:
        collector = open_collector(
            client_config, bootstrap_servers=bootstrap_servers, deadline_ms=timeout_ms, request_timeout_ms=timeout_ms
        )
    except ValueError as exc:  # a bootstrap server that is not host:port (ClientConfigError passes through)
        if isinstance(exc, ClientConfigError):
            raise
        raise CollectorError(
            f"--bootstrap-servers {bootstrap_servers!r}: every server must be host:port ({exc})"
        ) from None
    with collector:
        try:
            return collector.check_bootstrap()
        except BrokersUnreachableError as exc:
            servers = ",".join(collector.config.bootstrap_servers)
            tried = exc.args[0].split("brokers tried: ", 1)[-1]
            hint = (
                "check the host:port list, that the brokers run, and that their listener for the configured "
                "security.protocol is reachable from here"
            )
            if "SASL" in str(client_config.settings.get("security_protocol", "")) and "disconnected" in tried:
                # a broker that rejects SASL credentials may close the connection before its
                # SaslAuthenticate error reaches the client: then only the disconnect is seen
                hint = (
                    "the brokers closed the connection during the handshake: with SASL that is how an "
                    "authentication failure can look (wrong username or password in sasl.jaas.config, or a "
                    "mechanism the listener does not enable); else " + hint
                )
            raise BrokersUnreachableError(
                f"no broker of --bootstrap-servers {servers} answered within {timeout_ms} ms "
                f"(KOA_BOOTSTRAP_CHECK_MS): {tried}; {hint}",
                exc.brokers,
            ) from None


def collect_live(
    epoch_requests: Iterable[tuple[str, int, int]],
    client_config: ClientConfig | str | None = None,
    *,
    bootstrap_servers: Sequence[str] | str | None = None,
    bounds_topics: Iterable[str] | None = None,
    **config_overrides: Any,
) -> CollectionResult:
    """Open a real collector, :meth:`OffsetCollector.collect`, close it."""
    with open_collector(client_config, bootstrap_servers=bootstrap_servers, **config_overrides) as collector:
        return collector.collect(epoch_requests, bounds_topics)
