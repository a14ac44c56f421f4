"""Kafka client ``.properties`` files -> kafka-python 3 keyword settings.

The live-cluster source (``audit.sources.collector``, ``kafka_datasource.py``) talks to a
cluster with the same client properties an operator already uses for the Java
tools (``kafka-consumer-groups --command-config client.properties``).  This
module parses that file (Java ``java.util.Properties`` syntax), maps every key
it understands onto the keyword arguments kafka-python 3.x accepts
(``KafkaConsumer(**kw)``, ``KafkaConnectionManager(**kw)``), keeps the two
KIP-1102 settings kafka-python itself does not implement
(``metadata.recovery.strategy``, ``metadata.recovery.rebootstrap.trigger.ms``)
for the collector, and refuses any key it does not know with an error naming
that key.

Secrets (``sasl.jaas.config``, ``*.password``, the passwords inside the JAAS
string) never appear in ``repr()``/``str()`` of a :class:`ClientConfig`, in
:class:`ClientConfigError` messages, or in text passed through :func:`redact`.
Every secret value parsed by this module is also remembered (process-local) so
that :func:`redact` can scrub it out of arbitrary strings such as exception
messages produced by other libraries.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

log = logging.getLogger(__name__)

__all__ = [
    "REDACTED",
    "ClientConfig",
    "ClientConfigError",
    "RedactingFilter",
    "is_secret_key",
    "load_client_config",
    "parse_client_properties",
    "parse_properties",
    "redact",
]

#: Replacement text for every secret value.
REDACTED = "[redacted]"

#: KIP-1102 defaults (Kafka 4.0 clients).
DEFAULT_RECOVERY_STRATEGY = "rebootstrap"
DEFAULT_REBOOTSTRAP_TRIGGER_MS = 300_000

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
_RECOVERY_STRATEGIES = ("rebootstrap", "none")
_DNS_LOOKUPS = ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")
_PEM_SUFFIXES = (".pem", ".crt", ".cer", ".ca-bundle", ".key")


class ClientConfigError(ValueError):
    """A client property is unknown, malformed or unsupported.

    The message names the offending key; it never contains the value of a
    secret key (and any text is scrubbed with :func:`redact` before use).
    """

    def __init__(self, message: str, key: str | None = None):
        super().__init__(redact(message))
        self.key = key


# --------------------------------------------------------------------------
# secrets and redaction
# --------------------------------------------------------------------------

_SECRET_KEY_RE = re.compile(r"(password|secret|jaas|token|credential|private[._]?key|keystore\.key)", re.I)

_secret_values: set[str] = set()
_MIN_SCRUB_LEN = 3
_secret_lock = threading.Lock()

# key=value / key: value / key="value" pairs whose key looks secret, in free text
_SECRET_PAIR_RE = re.compile(
    r"""(?P<key>[A-Za-z0-9_.\-]*(?:password|secret|jaas\.config|token)[A-Za-z0-9_.\-]*)
        (?P<sep>\s*=\s*|['"]\s*:\s*)
        (?P<val>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s,;}\)]+)""",
    re.I | re.X,
)


def is_secret_key(key: str) -> bool:
    """Tell whether a property name or kafka-python keyword holds a secret whose value must never be shown.

    Property names are like ``ssl.key.password``, kafka-python keywords like ``sasl_plain_password``.
    """
    return bool(_SECRET_KEY_RE.search(str(key)))


def _remember_secret(value: Any) -> None:
    # Very short values would garble every scrubbed text; they are still masked
    # in key=value form by _SECRET_PAIR_RE and in mappings by key.
    if isinstance(value, str) and len(value) >= _MIN_SCRUB_LEN:
        with _secret_lock:
            _secret_values.add(value)


def _scrub_text(text: str) -> str:
    with _secret_lock:
        secrets = sorted(_secret_values, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)

    def mask(m: re.Match) -> str:
        val = m.group("val")
        quote = val[0] if val[0] in "\"'" else ""
        return m.group("key") + m.group("sep") + quote + REDACTED + quote

    return _SECRET_PAIR_RE.sub(mask, text)


def redact(obj: Any) -> Any:
    """Return a copy of ``obj`` that is safe to log, print or store.

    - ``Mapping`` (properties or kafka-python settings): values of secret keys
      (:func:`is_secret_key`) become ``"[redacted]"``; other values are
      redacted recursively.
    - :class:`ClientConfig`: its redacted settings dict (:meth:`ClientConfig.redacted`).
    - ``str``: every secret value parsed so far in this process is replaced,
      and ``password=...``/``sasl.jaas.config=...``-style pairs are masked.
    - ``BaseException``: a string, ``"TypeName: <redacted message>"``.
    - lists/tuples/sets: element-wise; anything else is returned unchanged.

    Never raises.
    """
    try:
        if isinstance(obj, ClientConfig):
            return obj.redacted()
        if isinstance(obj, Mapping):
            return {k: (REDACTED if is_secret_key(k) and v not in (None, "") else redact(v)) for k, v in obj.items()}
        if isinstance(obj, str):
            return _scrub_text(obj)
        if isinstance(obj, BaseException):
            text = _scrub_text(str(obj))
            name = type(obj).__name__
            return text if text.startswith(name) else f"{name}: {text}"
        if isinstance(obj, (list, tuple, set, frozenset)):
            return type(obj)(redact(v) for v in obj)
        return obj
    except Exception:  # pragma: no cover - redaction must never fail loudly
        return REDACTED


class RedactingFilter(logging.Filter):
    """``logging.Filter`` that scrubs secrets out of every record it sees.

    ``logging.getLogger("kafka").addFilter(RedactingFilter())`` keeps kafka-python's
    own log lines free of passwords. The formatted message replaces
    ``record.msg`` and ``record.args`` is cleared.
    """

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: A003 - logging API
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        record.msg = _scrub_text(message)
        record.args = ()
        return True


# --------------------------------------------------------------------------
# java.util.Properties syntax
# --------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        n = s[i + 1]
        if n == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", s[i + 2 : i + 6] or ""):
            out.append(chr(int(s[i + 2 : i + 6], 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(n, n))
            i += 2
    return "".join(out)


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    buf: list[str] = []
    start = 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip(" \t\f") if buf else raw
        if not buf:
            start = lineno
            stripped = line.lstrip(" \t\f")
            if not stripped or stripped[0] in "#!":
                continue
            line = stripped
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # odd number of backslashes: continuation
            buf.append(line[:-1])
            continue
        buf.append(line)
        yield start, "".join(buf)
        buf = []
    if buf:
        yield start, "".join(buf)


def parse_properties(text: str) -> dict[str, str]:
    r"""Parse ``java.util.Properties`` text into an ordered ``{key: value}`` dict.

    Supports ``#``/``!`` comments, ``key=value``, ``key: value`` and
    ``key value`` separators, backslash line continuations and the escapes
    ``\t \n \r \f \uXXXX \<char>``.  A later duplicate key wins, as in Java.
    Never raises on syntax; returns an empty dict for empty text.
    """
    props: dict[str, str] = {}
    for _lineno, line in _logical_lines(text):
        i = 0
        key_chars = []
        while i < len(line):
            c = line[i]
            if c == "\\" and i + 1 < len(line):
                key_chars.append(line[i : i + 2])
                i += 2
                continue
            if c in "=: \t\f":
                break
            key_chars.append(c)
            i += 1
        # separator: whitespace, then at most one '=' or ':', then whitespace
        while i < len(line) and line[i] in " \t\f":
            i += 1
        if i < len(line) and line[i] in "=:":
            i += 1
            while i < len(line) and line[i] in " \t\f":
                i += 1
        key = _unescape("".join(key_chars))
        value = _unescape(line[i:])
        props[key] = value
    return props


# --------------------------------------------------------------------------
# sasl.jaas.config
# --------------------------------------------------------------------------

_JAAS_RE = re.compile(
    r"""^\s*(?P<module>[A-Za-z_$][\w.$]*)\s+(?P<flag>required|requisite|sufficient|optional)\s*
        (?P<opts>(?:[A-Za-z_][\w.\-]*\s*=\s*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s;"']+)\s*)*)
        ;\s*$""",
    re.X | re.S,
)
_JAAS_OPT_RE = re.compile(r"""([A-Za-z_][\w.\-]*)\s*=\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s;"']+)""", re.S)


def _parse_jaas(value: str) -> tuple[str, dict[str, str]]:
    m = _JAAS_RE.match(value)
    if not m:
        raise ClientConfigError(
            "sasl.jaas.config: cannot parse; expected exactly one "
            "'<LoginModule> required key=\"value\" ...;' entry (value redacted)",
            key="sasl.jaas.config",
        )
    options = {}
    for k, v in _JAAS_OPT_RE.findall(m.group("opts")):
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
            v = re.sub(r"\\(.)", r"\1", v[1:-1])
        options[k] = v
    return m.group("module"), options


# --------------------------------------------------------------------------
# property -> kafka-python mapping
# --------------------------------------------------------------------------


def _int(key: str, value: str, minimum: int | None = None) -> int:
    try:
        n = int(value.strip())
    except ValueError:
        raise ClientConfigError(f"{key}: expected an integer, got {value!r}", key=key) from None
    if minimum is not None and n < minimum:
        raise ClientConfigError(f"{key}: must be >= {minimum}, got {n}", key=key)
    return n


def _bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ClientConfigError(f"{key}: expected true or false, got {value!r}", key=key)


def _choice(key: str, value: str, choices: Iterable[str], upper: bool = False) -> str:
    v = value.strip().upper() if upper else value.strip()
    if v not in choices:
        raise ClientConfigError(f"{key}: must be one of {', '.join(choices)}; got {value!r}", key=key)
    return v


def _servers(value: str) -> list[str]:
    servers = [s.strip() for s in value.split(",") if s.strip()]
    if not servers:
        raise ClientConfigError("bootstrap.servers: empty", key="bootstrap.servers")
    return servers


# simple one-to-one numeric mappings: property -> (kafka-python keyword, minimum)
_INT_KEYS = {
    "request.timeout.ms": ("request_timeout_ms", 1),
    "metadata.max.age.ms": ("metadata_max_age_ms", 0),
    "retry.backoff.ms": ("retry_backoff_ms", 0),
    "reconnect.backoff.ms": ("reconnect_backoff_ms", 0),
    "reconnect.backoff.max.ms": ("reconnect_backoff_max_ms", 0),
    "socket.connection.setup.timeout.ms": ("socket_connection_setup_timeout_ms", 1),
    "socket.connection.setup.timeout.max.ms": ("socket_connection_setup_timeout_max_ms", 1),
    "connections.max.idle.ms": ("connections_max_idle_ms", 0),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection", 1),
    "fetch.max.bytes": ("fetch_max_bytes", 0),
    "fetch.min.bytes": ("fetch_min_bytes", 0),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", 0),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", 0),
    "max.poll.records": ("max_poll_records", 1),
}

# Consumer-behaviour keys that an operator's consumer config typically carries but
# which the auditor always overrides (it reads without a group and never commits).
_OVERRIDDEN_KEYS = {
    "group.id": "the auditor never joins a consumer group",
    "group.instance.id": "the auditor never joins a consumer group",
    "group.protocol": "the auditor never joins a consumer group",
    "enable.auto.commit": "the auditor never commits offsets",
    "auto.commit.interval.ms": "the auditor never commits offsets",
    "auto.offset.reset": "the auditor seeks explicitly",
    "isolation.level": "the auditor always reads read_committed",
    "key.deserializer": "the auditor reads raw bytes",
    "value.deserializer": "the auditor reads raw bytes",
    "session.timeout.ms": "the auditor never joins a consumer group",
    "heartbeat.interval.ms": "the auditor never joins a consumer group",
    "max.poll.interval.ms": "the auditor never joins a consumer group",
    "partition.assignment.strategy": "the auditor never joins a consumer group",
    "allow.auto.create.topics": "the auditor never creates topics",
    "exclude.internal.topics": "the auditor assigns partitions explicitly",
    "ssl.truststore.password": "not needed for PEM trust stores",
    "ssl.protocol": "Python's ssl module negotiates the TLS version",
    "ssl.enabled.protocols": "Python's ssl module negotiates the TLS version",
    "ssl.keymanager.algorithm": "Java-only setting",
    "ssl.trustmanager.algorithm": "Java-only setting",
    "ssl.secure.random.implementation": "Java-only setting",
    "security.providers": "Java-only setting",
    "client.software.name": "set by kafka-python",
    "client.software.version": "set by kafka-python",
    "metadata.max.idle.ms": "the collector requests only the topics in scope (KIP-526)",
}

_SSL_UNSUPPORTED = {
    "ssl.truststore.certificates": "inline PEM is not supported; write it to a file and set ssl.truststore.location",
    "ssl.keystore.certificate.chain": "inline PEM is not supported; write it to a file and set ssl.keystore.location",
    "ssl.keystore.key": "inline PEM is not supported; write it to a file and set ssl.keystore.location",
}

_KNOWN_SPECIAL = {
    "bootstrap.servers",
    "client.id",
    "client.rack",
    "client.dns.lookup",
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.kerberos.service.name",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "ssl.cipher.suites",
    "check.crcs",
    "receive.buffer.bytes",
    "send.buffer.bytes",
    "metadata.recovery.strategy",
    "metadata.recovery.rebootstrap.trigger.ms",
    "retry.backoff.max.ms",
    "default.api.timeout.ms",
}


def _consumer_keys() -> set[str]:
    from kafka import KafkaConsumer

    return set(KafkaConsumer.DEFAULT_CONFIG)


def _connection_keys() -> set[str]:
    from kafka.net.manager import KafkaConnectionManager

    return set(KafkaConnectionManager.DEFAULT_CONFIG)


@dataclass(frozen=True, repr=False)
class ClientConfig:
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
                _remember_secret(v)
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


def parse_client_properties(props: Mapping[str, str], source: str | None = None) -> ClientConfig:
    """Map Java client properties onto kafka-python 3 settings.

    Mapping (Java property -> kafka-python keyword): ``bootstrap.servers`` -> ``bootstrap_servers`` (list),
    ``client.id``, ``security.protocol``, ``sasl.mechanism`` (default ``GSSAPI`` for SASL_* as in Java),
    ``sasl.jaas.config`` (Plain/Scram login modules) -> ``sasl_plain_username`` / ``sasl_plain_password``,
    ``ssl.truststore.location`` (PEM) -> ``ssl_cafile``, ``ssl.keystore.location`` (PEM with key and chain) ->
    ``ssl_certfile``, ``ssl.key.password`` (else ``ssl.keystore.password``) -> ``ssl_password``,
    ``ssl.endpoint.identification.algorithm`` ("" disables) -> ``ssl_check_hostname``, timeouts/backoffs in ms
    one-to-one; ``metadata.recovery.strategy`` and ``metadata.recovery.rebootstrap.trigger.ms`` (KIP-1102) are kept
    on the :class:`ClientConfig` for the collector.

    Parameters
    ----------
    props : Mapping[str, str]
        ``{property: string value}`` as read by :func:`parse_properties`.
    source : str or None, optional
        Optional origin (a path) shown in messages.

    Returns
    -------
    ClientConfig
        The mapped configuration.

    Raises
    ------
    ClientConfigError
        An unknown key (the message names it), a malformed value, or a setting kafka-python cannot honour (JKS/PKCS12
        stores, inline PEM, an unsupported SASL login module).  Secret values are never part of the message.
    """
    for k, v in props.items():
        if is_secret_key(k):
            _remember_secret(v)

    settings: dict[str, Any] = {}
    ignored: list[tuple[str, str]] = []
    strategy = DEFAULT_RECOVERY_STRATEGY
    trigger_ms = DEFAULT_REBOOTSTRAP_TRIGGER_MS
    retry_backoff_max_ms = None
    default_api_timeout_ms = None
    where = f" in {source}" if source else ""

    for key, raw in props.items():
        value = raw.strip()
        if _client_setting(key, raw, value, props, settings, where):
            continue
        if key == "metadata.recovery.strategy":
            strategy = _choice(key, value.lower(), _RECOVERY_STRATEGIES)
        elif key == "metadata.recovery.rebootstrap.trigger.ms":
            trigger_ms = _int(key, value, 0)
        elif key == "retry.backoff.max.ms":
            retry_backoff_max_ms = _int(key, value, 0)
        elif key == "default.api.timeout.ms":
            default_api_timeout_ms = _int(key, value, 1)
        elif key in _OVERRIDDEN_KEYS:
            ignored.append((key, _OVERRIDDEN_KEYS[key]))
            log.info("client property %s ignored: %s", key, _OVERRIDDEN_KEYS[key])
        else:
            raise ClientConfigError(f"unknown client property {key!r}{where}; remove it or check the spelling", key=key)

    _check_sasl(settings, where)
    return ClientConfig(
        settings=settings,
        metadata_recovery_strategy=strategy,
        metadata_recovery_rebootstrap_trigger_ms=trigger_ms,
        retry_backoff_max_ms=retry_backoff_max_ms,
        default_api_timeout_ms=default_api_timeout_ms,
        ignored=tuple(ignored),
        source=source,
    )


def _client_setting(
    key: str, raw: str, value: str, props: Mapping[str, str], settings: dict[str, Any], where: str
) -> bool:
    """Tell whether ``key`` is a property mapped onto kafka-python settings (then put into ``settings``).

    ``value`` is ``raw`` stripped.

    Raises
    ------
    ClientConfigError
        A malformed or unsupported value.
    """
    if key in _INT_KEYS:
        name, minimum = _INT_KEYS[key]
        settings[name] = _int(key, value, minimum)
    elif key == "bootstrap.servers":
        settings["bootstrap_servers"] = _servers(value)
    elif key == "client.id":
        settings["client_id"] = value
    elif key == "client.rack":
        settings["client_rack"] = value
    elif key == "client.dns.lookup":
        settings["client_dns_lookup"] = _choice(key, value, _DNS_LOOKUPS)
    elif key == "security.protocol":
        settings["security_protocol"] = _choice(key, value, _SECURITY_PROTOCOLS, upper=True)
    elif key == "sasl.mechanism":
        settings["sasl_mechanism"] = _choice(key, value, _SASL_MECHANISMS, upper=True)
    elif key == "sasl.kerberos.service.name":
        settings["sasl_kerberos_service_name"] = value
    elif key == "sasl.jaas.config":
        _jaas_settings(key, value, settings, where)
    elif key == "check.crcs":
        settings["check_crcs"] = _bool(key, value)
    elif key in ("receive.buffer.bytes", "send.buffer.bytes"):
        n = _int(key, value, -1)
        settings[key.replace(".", "_")] = None if n == -1 else n
    else:
        return _ssl_setting(key, raw, value, props, settings)
    return True


def _jaas_settings(key: str, value: str, settings: dict[str, Any], where: str) -> None:
    """Put the credentials or the Kerberos service name of ``sasl.jaas.config`` into ``settings``; return nothing.

    The credentials are those of the Plain/Scram login modules.

    Raises
    ------
    ClientConfigError
        A missing option or another login module.
    """
    module, options = _parse_jaas(value)
    short = module.rsplit(".", 1)[-1]
    if short in ("PlainLoginModule", "ScramLoginModule"):
        for opt in ("username", "password"):
            if opt not in options:
                raise ClientConfigError(f"sasl.jaas.config: {short} needs the {opt} option{where}", key=key)
        settings["sasl_plain_username"] = options["username"]
        settings["sasl_plain_password"] = options["password"]
        _remember_secret(options["password"])
    elif short == "Krb5LoginModule":
        if "serviceName" in options:
            settings.setdefault("sasl_kerberos_service_name", options["serviceName"])
    else:
        raise ClientConfigError(
            f"sasl.jaas.config: login module {short} is not supported (supported: "
            f"PlainLoginModule, ScramLoginModule, Krb5LoginModule){where}",
            key=key,
        )


def _ssl_setting(key: str, raw: str, value: str, props: Mapping[str, str], settings: dict[str, Any]) -> bool:
    """Tell whether ``key`` is one of the ``ssl.*`` properties (then mapped into ``settings``).

    Raises
    ------
    ClientConfigError
        A store kafka-python cannot read (not PEM) or an unsupported property.
    """
    if key in ("ssl.truststore.location", "ssl.keystore.location"):
        store = key.split(".")[1]
        type_key = f"ssl.{store}.type"
        store_type = props.get(type_key, "").strip().upper()
        if store_type and store_type != "PEM":
            raise ClientConfigError(
                f"{type_key}={store_type}: kafka-python reads PEM files only; convert the "
                f"{store} (keytool -exportcert / openssl pkcs12) and set {type_key}=PEM",
                key=type_key,
            )
        if not store_type and not value.lower().endswith(_PEM_SUFFIXES):
            raise ClientConfigError(
                f"{key}: {os.path.basename(value)!r} does not look like a PEM file and "
                f"{type_key} is not set; kafka-python reads PEM files only (set {type_key}=PEM)",
                key=key,
            )
        settings["ssl_cafile" if store == "truststore" else "ssl_certfile"] = value
    elif key in ("ssl.truststore.type", "ssl.keystore.type"):
        if value.upper() != "PEM":
            raise ClientConfigError(
                f"{key}={value}: kafka-python reads PEM files only; convert the store and set {key}=PEM", key=key
            )
    elif key == "ssl.key.password":
        settings["ssl_password"] = raw
    elif key == "ssl.keystore.password":
        if "ssl.key.password" not in props:  # PEM keystores: the key password (Java uses ssl.key.password)
            settings["ssl_password"] = raw
    elif key == "ssl.endpoint.identification.algorithm":
        if value.lower() not in ("", "https"):
            raise ClientConfigError(f"{key}: must be 'https' or empty, got {value!r}", key=key)
        settings["ssl_check_hostname"] = value.lower() == "https"
    elif key == "ssl.cipher.suites":
        if value:
            settings["ssl_ciphers"] = ":".join(s.strip() for s in value.split(",") if s.strip())
    elif key in _SSL_UNSUPPORTED:
        raise ClientConfigError(f"{key}: {_SSL_UNSUPPORTED[key]}", key=key)
    else:
        return False
    return True


def _check_sasl(settings: dict[str, Any], where: str) -> None:
    """Default ``sasl_mechanism`` to GSSAPI under a SASL_* protocol (as in Java); return nothing.

    Raises
    ------
    ClientConfigError
        A PLAIN/SCRAM mechanism without credentials, or OAUTHBEARER.
    """
    protocol = settings.get("security_protocol", "PLAINTEXT")
    if protocol.startswith("SASL_"):
        mech = settings.setdefault("sasl_mechanism", "GSSAPI")
        if mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and "sasl_plain_password" not in settings:
            raise ClientConfigError(
                f"security.protocol={protocol} with sasl.mechanism={mech} needs sasl.jaas.config with "
                f"username and password{where}",
                key="sasl.jaas.config",
            )
        if mech == "OAUTHBEARER":
            raise ClientConfigError(
                "sasl.mechanism=OAUTHBEARER needs a token provider object; not configurable from a properties file",
                key="sasl.mechanism",
            )


def load_client_config(path: str | os.PathLike) -> ClientConfig:
    """Read a Kafka client ``.properties`` file and map it with :func:`parse_client_properties`.

    Raises
    ------
    ClientConfigError
        Unknown/malformed keys (see :func:`parse_client_properties`) or an unreadable file (the message names the
        path, never its contents).
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ClientConfigError(f"cannot read client properties {path}: {exc.strerror}") from None
    return parse_client_properties(parse_properties(text), source=path)
