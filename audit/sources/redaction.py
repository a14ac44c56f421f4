"""Secrets of Kafka client configurations: which keys hold one, and scrubbing them out of any text.

A property name or kafka-python keyword that looks secret (:func:`is_secret_key`) never has its value shown.
Every secret value parsed (:func:`remember_secret`) is remembered, process-local, so that :func:`redact` can scrub
it out of arbitrary strings such as exception messages produced by other libraries; :class:`RedactingFilter` does
the same for log records.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Mapping


__all__ = [
    "REDACTED",
    "Redactable",
    "RedactingFilter",
    "is_secret_key",
    "redact",
    "remember_secret",
    "scrub_text",
]

#: Replacement text for every secret value.
REDACTED = "[redacted]"


class Redactable:
    """An object that knows its own form safe to show: :func:`redact` returns its :meth:`redacted`."""

    def redacted(self) -> dict[str, Any]:
        """Return the object's settings with secret values replaced by ``[redacted]``."""
        raise NotImplementedError


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


def remember_secret(value: Any) -> None:
    # Very short values would garble every scrubbed text; they are still masked
    # in key=value form by _SECRET_PAIR_RE and in mappings by key.
    if isinstance(value, str) and len(value) >= _MIN_SCRUB_LEN:
        with _secret_lock:
            _secret_values.add(value)


def scrub_text(text: str) -> str:
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
    - :class:`Redactable` (a :class:`audit.sources.client_config.ClientConfig`): its
      :meth:`~Redactable.redacted` settings dict.
    - ``str``: every secret value parsed so far in this process is replaced,
      and ``password=...``/``sasl.jaas.config=...``-style pairs are masked.
    - ``BaseException``: a string, ``"TypeName: <redacted message>"``.
    - lists/tuples/sets: element-wise; anything else is returned unchanged.

    Never raises.
    """
    try:
        if isinstance(obj, Redactable):
            return obj.redacted()
        if isinstance(obj, Mapping):
            return {k: (REDACTED if is_secret_key(k) and v not in (None, "") else redact(v)) for k, v in obj.items()}
        if isinstance(obj, str):
            return scrub_text(obj)
        if isinstance(obj, BaseException):
            text = scrub_text(str(obj))
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
        record.msg = scrub_text(message)
        record.args = ()
        return True
