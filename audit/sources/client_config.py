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

This module reads the file and parses its syntax (:func:`load_client_config`,
:func:`parse_properties`); the mapping onto kafka-python settings is
:mod:`audit.sources.client_mapping`, the parsed configuration and its error
:mod:`audit.sources.client_settings`, the redaction :mod:`audit.sources.redaction`.
Their public names are importable from here too.
"""

from __future__ import annotations

import os
import re
from typing import Iterable

from .client_mapping import parse_client_properties
from .client_settings import DEFAULT_REBOOTSTRAP_TRIGGER_MS, DEFAULT_RECOVERY_STRATEGY, ClientConfig, ClientConfigError
from .redaction import REDACTED, RedactingFilter, is_secret_key, redact

__all__ = [
    "DEFAULT_REBOOTSTRAP_TRIGGER_MS",
    "DEFAULT_RECOVERY_STRATEGY",
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
