"""A Kafka connection's settings (an Airflow ``kafka`` connection) as the audit's bootstrap servers and client file.

The Apache Kafka provider of Airflow keeps a ``kafka`` connection's client configuration in its extra, as a JSON
object of librdkafka property names (``bootstrap.servers``, ``security.protocol``, ``sasl.mechanisms``,
``sasl.username``, ``sasl.password``, ``ssl.ca.location`` ...).  The audit takes Java client properties
(``--client-config``, :mod:`audit.sources.client_config`).  :func:`connection_properties` maps the one onto the
other; :func:`write_client_properties` writes them to a file only its owner reads, so a secret never reaches a
command line, a DAG file or a log.

Mapping (librdkafka -> Java): ``sasl.mechanisms`` -> ``sasl.mechanism``; ``sasl.username``/``sasl.password`` (or
the connection's login and password) -> ``sasl.jaas.config`` with the PLAIN or SCRAM login module of the
mechanism; ``ssl.ca.location`` -> ``ssl.truststore.location`` of type PEM.  Consumer settings the audit has no use
for, since it never joins a group (``group.id``, ``auto.offset.reset``, ``enable.auto.commit``,
``isolation.level``, ``session.timeout.ms``, ``enable.partition.eof``), are left out.  Every other key is passed
as is and checked by :func:`audit.sources.client_config.load_client_config` when the audit starts.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

__all__ = ["CONSUMER_ONLY", "connection_properties", "write_client_properties"]

#: librdkafka consumer settings of a connection that the audit (which joins no group) leaves out
CONSUMER_ONLY = (
    "group.id",
    "auto.offset.reset",
    "enable.auto.commit",
    "isolation.level",
    "session.timeout.ms",
    "enable.partition.eof",
)
_RENAMED = {"sasl.mechanisms": "sasl.mechanism", "ssl.ca.location": "ssl.truststore.location"}
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def connection_properties(
    extra: Mapping[str, Any],
    host: str | None = None,
    port: int | None = None,
    login: str | None = None,
    password: str | None = None,
) -> tuple[str, dict[str, str]]:
    """Map a Kafka connection onto ``(bootstrap servers, Java client properties)``.

    Parameters
    ----------
    extra : mapping
        The connection's extra: librdkafka or Java client properties.
    host, port : str, int, optional
        The connection's host and port: the bootstrap servers when ``extra`` has no ``bootstrap.servers``.
    login, password : str, optional
        SASL credentials when ``extra`` has no ``sasl.username``/``sasl.jaas.config``.

    Returns
    -------
    tuple of (str, dict of str to str)
        The bootstrap servers (``host:port[,...]``) and the other properties, Java's names.

    Raises
    ------
    ValueError
        No bootstrap servers, or credentials for a SASL mechanism with no username/password login module
        (``GSSAPI``, ``OAUTHBEARER``: give ``sasl.jaas.config`` instead).  The message never holds a secret.
    """
    props = {str(k): _text(v) for k, v in extra.items() if v is not None and k not in CONSUMER_ONLY}
    bootstrap = props.pop("bootstrap.servers", None)
    if not bootstrap and host:
        bootstrap = f"{host}:{port}" if port and ":" not in host else host
    if not bootstrap:
        raise ValueError(
            "the Kafka connection names no bootstrap servers: set bootstrap.servers in its extra, or its host"
        )
    pem = "ssl.ca.location" in props
    for old, new in _RENAMED.items():
        if old in props:
            props.setdefault(new, props.pop(old))
    if pem:
        props.setdefault("ssl.truststore.type", "PEM")
    user = props.pop("sasl.username", None) or login
    secret = props.pop("sasl.password", None) or password
    if user and "sasl.jaas.config" not in props:
        mechanism = props.setdefault("sasl.mechanism", "PLAIN").upper()
        module = _LOGIN_MODULES.get(mechanism)
        if module is None:
            raise ValueError(
                f"the Kafka connection has a username for sasl.mechanism {mechanism}, which takes no username and "
                f"password: give sasl.jaas.config in its extra instead"
            )
        props["sasl.jaas.config"] = f"{module} required username={_quoted(user)} password={_quoted(secret or '')};"
    return bootstrap, props


def _escaped(value: str) -> str:
    """Escape ``value`` for a ``java.util.Properties`` file (backslashes, line breaks, a leading space)."""
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "\\" + out if out.startswith(" ") else out


def write_client_properties(props: Mapping[str, str], path: str) -> str:
    """Write ``props`` as a Java properties file at ``path``, readable by its owner only (mode 0600).

    Returns
    -------
    str
        ``path``.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        for key, value in props.items():
            fh.write(f"{key}={_escaped(value)}\n")
    return path
