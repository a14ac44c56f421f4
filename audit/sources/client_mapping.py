"""Java client properties -> kafka-python 3 settings: :func:`parse_client_properties`.

Every key it understands is mapped onto the keyword arguments kafka-python 3.x accepts (``KafkaConsumer(**kw)``,
``KafkaConnectionManager(**kw)``): the connection's, SASL's (``sasl.jaas.config``'s login modules) and SSL's
(PEM stores only); the two KIP-1102 settings kafka-python itself does not implement are kept on the
:class:`audit.sources.client_config.ClientConfig` for the collector; consumer-behaviour keys the auditor overrides
are accepted and ignored; any other key is refused with an error naming it.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Iterable, Mapping

from .client_settings import DEFAULT_REBOOTSTRAP_TRIGGER_MS, DEFAULT_RECOVERY_STRATEGY, ClientConfig, ClientConfigError
from .redaction import is_secret_key, remember_secret

#: the logger of :mod:`audit.sources.client_config`, whose part this mapping is
log = logging.getLogger("audit.sources.client_config")

__all__ = [
    "parse_client_properties",
]

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
_RECOVERY_STRATEGIES = ("rebootstrap", "none")
_DNS_LOOKUPS = ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")
_PEM_SUFFIXES = (".pem", ".crt", ".cer", ".ca-bundle", ".key")


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
            remember_secret(v)

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
        remember_secret(options["password"])
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
