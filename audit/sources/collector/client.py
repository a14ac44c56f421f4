"""The live-cluster collector and its entry points.

:class:`OffsetCollector` stacks the layers of the package (request plumbing,
metadata, per-leader requests, OffsetsForLeaderEpoch and ListOffsets) and holds
their state; :func:`open_collector`, :func:`check_bootstrap` and
:func:`collect_live` open one on the real :class:`KafkaPythonTransport`.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter, defaultdict
from typing import Any, Callable, Iterable, Sequence

from ..client_config import ClientConfig, ClientConfigError, load_client_config
from .errors import BrokersUnreachableError, CollectorError
from .model import Broker, CollectionResult, CollectorConfig
from .offsets import OffsetRequests
from .transport import CallableTransport, KafkaPythonTransport, parse_host_port


class OffsetCollector(OffsetRequests):
    """Collects ``epoch_end_offsets`` and ``bounds`` rows from a live cluster.

    Thread-safety: one public call at a time; the collector itself fans requests out to at most
    ``max_concurrency`` threads.

    Parameters
    ----------
    transport : object or callable
        Object with ``send(target: Broker, request, timeout_ms)`` (optionally ``close_connections()``/``close()``),
        or a callable ``send(target, request)``; returns kafka-python response objects.
    config : CollectorConfig, optional
        The collector's settings (:class:`CollectorConfig`).
    clock : callable, default time.monotonic
        Monotonic seconds (injectable for tests).
    sleep : callable, default time.sleep
        ``sleep(seconds)`` (injectable for tests).
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
        self._transport = transport if hasattr(transport, "send") else CallableTransport(transport)
        self._clock = clock
        self._sleep = sleep
        self._bootstrap = [
            Broker(f"bootstrap-{i}", *parse_host_port(s)) for i, s in enumerate(self.config.bootstrap_servers)
        ]
        self._brokers = {}
        self._partitions = {}
        self._last_seen_epoch = {}
        self._topic_partitions = defaultdict(set)
        self._missing_topics = {}
        self.topic_ids = {}
        self._failures = {}  # str(broker) -> [consecutive, total, last error]
        self._metadata_wait_started = None
        self._deadline_at = None
        self._rr = 0
        self.problems = []
        self.stats = Counter()
        self._stats_lock = threading.Lock()
        self.rebootstrap_reasons = []

    # ------------------------------------------------------------- together

    def check_bootstrap(self) -> list[str]:
        """Send one MetadataRequest for no topic (``topics=[]``) to any bootstrap broker, under the deadline.

        This proves a broker is reachable and the client authenticates (SASL/TLS) before any work starts.

        Returns
        -------
        list of str
            The brokers the cluster advertised (``host:port``).

        Raises
        ------
        BrokersUnreachableError
            No broker answered within ``deadline_ms``.
        AuthenticationFailedError
            SASL/TLS failure.
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
        """Collect both tables under one deadline.

        Metadata for all topics in scope is fetched first, in batches (KIP-526).

        Parameters
        ----------
        epoch_requests : iterable of (str, int, int)
            ``(topic, partition, committed_leader_epoch)``.
        bounds_topics : iterable of str, optional
            Topics whose every partition gets a bounds row; by default the topics of ``epoch_requests``.
        bounds_partitions : iterable of (str, int)
            Extra ``(topic, partition)`` pairs for bounds.
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
    """Create an :class:`OffsetCollector` on the real :class:`KafkaPythonTransport`.

    Parameters
    ----------
    client_config : ClientConfig, str or None, optional
        A :class:`ClientConfig`, a path to a client ``.properties`` file, or None (PLAINTEXT defaults).
    bootstrap_servers : sequence of str, str or None, optional
        Overrides ``bootstrap.servers`` of the properties.
    **config_overrides
        :class:`CollectorConfig` fields.

    Raises
    ------
    ClientConfigError
        Bad properties.
    ValueError
        No bootstrap servers.
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
    """Check, on the driver, that the cluster answers before Spark starts reading it.

    Opens a real collector whose whole budget, per-request timeout and connection-setup timeout are ``timeout_ms``
    (default ``KOA_BOOTSTRAP_CHECK_MS`` or :data:`BOOTSTRAP_CHECK_MS`, 15 s) and asks any bootstrap broker for
    metadata of no topic (:meth:`OffsetCollector.check_bootstrap`), as a Kafka client's bootstrap does.

    Returns
    -------
    list of str
        The advertised brokers (``host:port``).

    Raises
    ------
    ClientConfigError
        Bad client properties (or an unreadable file).
    BrokersUnreachableError
        No broker answered within ``timeout_ms`` (the message names the brokers tried and their last error).
    AuthenticationFailedError
        SASL/TLS failure.
    CollectorError
        A bootstrap server that is not ``host:port``.
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
