"""Transport and request plumbing of the live-cluster collector.

The network is reached through an injectable *transport* (see
:mod:`audit.sources.collector`): :class:`KafkaPythonTransport` is the real one,
on kafka-python's connection manager; :class:`CallableTransport` wraps a plain
``send(target, request)`` callable.  :class:`RequestSender` is the collector's
lowest layer: the bootstrap servers, the deadline of one public call, the
exponential backoff, per-broker failure bookkeeping, and the round trips
themselves (one request, or many fanned out to at most ``max_concurrency``
threads).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Mapping

import kafka.errors as Errors
from kafka.protocol.metadata import MetadataResponse

from ..client_config import ClientConfig, redact
from .errors import authentication_failed, is_auth_failure
from .model import Broker, CollectorConfig

# the package's logger: records keep the name ``audit.sources.collector``
log = logging.getLogger(__package__)


class BrokerFailure(Exception):
    """A request to ``broker`` failed with ``error`` (connection, timeout ...: anything but SASL/TLS)."""

    def __init__(self, broker: Broker, error: BaseException):
        super().__init__(str(broker))
        self.broker = broker
        self.error = error


def parse_host_port(server: str) -> tuple[str, int]:
    """Split a ``bootstrap.servers`` entry into ``(host, port)``.

    Entries are ``host:port`` or ``[v6]:port``, with an optional ``scheme://``; port 9092 when absent.

    Raises
    ------
    ValueError
        The port is not a number.
    """
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


class CallableTransport:
    """A transport around a plain callable ``send(target, request) -> response``."""

    def __init__(self, fn: Callable[[Broker, Any], Any]):
        self._fn = fn

    def send(self, target: Broker, request: Any, timeout_ms: int | None = None) -> Any:
        return self._fn(target, request)


class KafkaPythonTransport:
    """Real transport over kafka-python 3's ``KafkaConnectionManager``.

    One connection per target, opened on demand (ApiVersions negotiation and SASL/TLS as configured), driven by
    kafka-python's IO thread so that :meth:`send` may be called from several threads at once.

    Parameters
    ----------
    client_config : ClientConfig, mapping or None, optional
        A :class:`ClientConfig` (or a mapping of kafka-python settings: ``security_protocol``, ``sasl_*``,
        ``ssl_*``, ``client_id``, ``request_timeout_ms`` ...).
    **settings
        Extra kafka-python settings (override ``client_config``).
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
        """Return the version of ``request_type`` that :meth:`send` will use with ``target``.

        ``request_type`` is a kafka-python request class, e.g. ``ListOffsetsRequest``.  The version is the highest
        that kafka-python and the broker both support, from the ApiVersions exchange of the connection
        (``KafkaConnection.broker_version_data``, which kafka-python also picks each request's version from).
        Opens the connection if there is none yet (the one :meth:`send` then uses); no other request is sent.
        None when no version is common to both.

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


class RequestSender:
    """The collector's lowest layer: deadline, backoff, broker failures, and the round trips.

    The state it works on is set by :class:`audit.sources.collector.OffsetCollector`.
    """

    config: CollectorConfig
    _transport: Any
    _clock: Callable[[], float]
    _sleep: Callable[[float], None]
    _bootstrap: list[Broker]
    _failures: dict[str, list]
    _deadline_at: float | None
    stats: Counter
    _stats_lock: threading.Lock

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
            if is_auth_failure(exc):
                raise authentication_failed(broker, exc) from None
            raise BrokerFailure(broker, exc) from None

    def _fan_out(self, jobs: list[tuple[Broker, Any]]) -> list[Any]:
        """Send each (broker, request); return responses or BrokerFailure, in job order."""

        def one(job):
            broker, request = job
            try:
                return self._send(broker, request)
            except BrokerFailure as failure:
                return failure

        workers = min(self.config.max_concurrency, len(jobs))
        if workers <= 1:
            return [one(j) for j in jobs]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="offset-audit") as pool:
            return list(pool.map(one, jobs))

    def send_all(self, jobs: list[tuple[Broker, Any]]) -> list[Any]:
        """Send each ``(broker, request)`` of ``jobs``, at most ``max_concurrency`` in flight.

        Returns
        -------
        list
            In job order, the response, or the exception of a broker that failed (the failure is noted against the
            broker, as for the collector's own requests).

        Raises
        ------
        AuthenticationFailedError
            SASL/TLS failure with a broker.
        """
        out = []
        for (broker, _), outcome in zip(jobs, self._fan_out(jobs)):
            if isinstance(outcome, BrokerFailure):
                self._note_failure(broker, outcome.error)
                out.append(outcome.error)
            else:
                self._note_success(broker)
                out.append(outcome)
        return out
