"""A parsed Kafka client configuration: :class:`ClientConfig`, and :class:`ClientConfigError`.

:class:`ClientConfig` holds kafka-python 3 keyword settings and the KIP-1102 settings kafka-python does not
implement; its ``repr()``/``str()`` show the settings redacted, and it hands ``KafkaConsumer`` and the connection
manager the keywords each accepts.  :class:`ClientConfigError` names a bad property, never a secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .redaction import Redactable, is_secret_key, redact, remember_secret


__all__ = [
    "DEFAULT_REBOOTSTRAP_TRIGGER_MS",
    "DEFAULT_RECOVERY_STRATEGY",
    "ClientConfig",
    "ClientConfigError",
]

#: KIP-1102 defaults (Kafka 4.0 clients).
DEFAULT_RECOVERY_STRATEGY = "rebootstrap"
DEFAULT_REBOOTSTRAP_TRIGGER_MS = 300_000


class ClientConfigError(ValueError):
    """A client property is unknown, malformed or unsupported.

    The message names the offending key; it never contains the value of a
    secret key (and any text is scrubbed with :func:`redact` before use).
    """

    def __init__(self, message: str, key: str | None = None):
        super().__init__(redact(message))
        self.key = key


def _consumer_keys() -> set[str]:
    from kafka import KafkaConsumer

    return set(KafkaConsumer.DEFAULT_CONFIG)


def _connection_keys() -> set[str]:
    from kafka.net.manager import KafkaConnectionManager

    return set(KafkaConnectionManager.DEFAULT_CONFIG)


@dataclass(frozen=True, repr=False)
class ClientConfig(Redactable):
    """A parsed Kafka client configuration.

    Attributes
    ----------
    settings : Mapping[str, Any]
        kafka-python 3 keyword settings (``security_protocol``, ``sasl_plain_password``, ``ssl_cafile``,
        ``request_timeout_ms`` ...).  Contains secrets: never log it; use :meth:`redacted`.
    metadata_recovery_strategy : str
        KIP-1102 ``metadata.recovery.strategy``, ``"rebootstrap"`` (default) or ``"none"``.
    metadata_recovery_rebootstrap_trigger_ms : int
        KIP-1102 trigger, ms (default 300000).
    retry_backoff_max_ms : int or None
        ``retry.backoff.max.ms`` (KIP-580) or None.
    default_api_timeout_ms : int or None
        ``default.api.timeout.ms`` or None; the collector uses it as its total deadline.
    ignored : tuple of (str, str)
        ``(key, reason)`` for keys accepted but overridden by the auditor.
    source : str or None
        Where the properties came from (a path), for messages.
    """

    settings: Mapping[str, Any] = field(default_factory=dict)
    metadata_recovery_strategy: str = DEFAULT_RECOVERY_STRATEGY
    metadata_recovery_rebootstrap_trigger_ms: int = DEFAULT_REBOOTSTRAP_TRIGGER_MS
    retry_backoff_max_ms: int | None = None
    default_api_timeout_ms: int | None = None
    ignored: tuple[tuple[str, str], ...] = ()
    source: str | None = None

    @property
    def bootstrap_servers(self) -> list[str] | None:
        """``bootstrap.servers`` as a list of ``host:port`` strings, or None when absent."""
        servers = self.settings.get("bootstrap_servers")
        return list(servers) if servers else None

    def redacted(self) -> dict[str, Any]:
        """All settings (plus the KIP-1102 ones) with secret values replaced by ``[redacted]``."""
        out = redact(dict(self.settings))
        out["metadata_recovery_strategy"] = self.metadata_recovery_strategy
        out["metadata_recovery_rebootstrap_trigger_ms"] = self.metadata_recovery_rebootstrap_trigger_ms
        if self.retry_backoff_max_ms is not None:
            out["retry_backoff_max_ms"] = self.retry_backoff_max_ms
        if self.default_api_timeout_ms is not None:
            out["default_api_timeout_ms"] = self.default_api_timeout_ms
        return out

    def __repr__(self) -> str:
        src = f", source={self.source!r}" if self.source else ""
        return f"ClientConfig({self.redacted()!r}{src})"

    __str__ = __repr__

    def with_overrides(self, **settings: Any) -> "ClientConfig":
        """Return a copy whose kafka-python settings are updated with ``settings``."""
        merged = dict(self.settings)
        merged.update(settings)
        for k, v in settings.items():
            if is_secret_key(k):
                remember_secret(v)
        return ClientConfig(
            merged,
            self.metadata_recovery_strategy,
            self.metadata_recovery_rebootstrap_trigger_ms,
            self.retry_backoff_max_ms,
            self.default_api_timeout_ms,
            self.ignored,
            self.source,
        )

    def consumer_kwargs(self) -> dict[str, Any]:
        """Return the settings accepted by ``kafka.KafkaConsumer`` (it rejects unknown keywords)."""
        keys = _consumer_keys()
        return {k: v for k, v in self.settings.items() if k in keys}

    def connection_kwargs(self) -> dict[str, Any]:
        """Return the settings accepted by ``kafka.net.manager.KafkaConnectionManager``.

        That is the connection layer used by the collector's real transport.
        """
        keys = _connection_keys() | {"retry_backoff_ms"}
        return {k: v for k, v in self.settings.items() if k in keys}
