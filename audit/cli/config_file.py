"""``--config FILE``: the audit's flags from a TOML file, the command line winning.

Every flag of ``kafka-offset-audit audit`` (and of the ``spark-submit`` application) is a key of the file: its
long name without ``--`` (``bootstrap-servers``, ``fail-on``; ``_`` may stand for ``-``).  A flag that takes a
value takes a TOML string or number, one that takes several (``log-dirs``) a TOML array, a switch
(``skip-reports``) ``true`` or ``false``, a repeatable flag (``conf``) an array of its values.  The file's values
come before the command line's, so a flag given on the command line wins; a repeatable flag gets both.

Example
-------
::

    bootstrap-servers = "kafka-1:9092,kafka-2:9092"
    client-config = "/etc/kafka/audit.properties"
    output = "/var/lib/kafka-offset-audit/latest"
    fail-on = "critical"
    exclude-groups = "console-consumer-.*"
    conf = ["spark.driver.memory=4g"]
"""

from __future__ import annotations

import argparse
import tomllib
from typing import Any


__all__ = ["ConfigFileError", "config_arguments", "with_config_file"]


class ConfigFileError(ValueError):
    """The ``--config`` file cannot be read, is not TOML, or has a key or value no flag takes (exit status 2)."""


def _option(actions: dict[str, argparse.Action], key: str) -> tuple[str, argparse.Action]:
    flag = "--" + key.replace("_", "-")
    if flag not in actions or flag == "--config" or flag in ("--help", "--version"):
        raise ConfigFileError(f"unknown key {key!r}: the keys are the flags of `audit --help` without '--'")
    return flag, actions[flag]


def _tokens(flag: str, action: argparse.Action, key: str, value: Any) -> list[str]:
    """Turn one key's value into command-line tokens."""
    if action.nargs == 0:  # a switch (store_true)
        if not isinstance(value, bool):
            raise ConfigFileError(f"{key} = {value!r}: a switch takes true or false")
        return [flag] if value else []
    values = value if isinstance(value, list) else [value]
    if any(isinstance(v, (dict, list, bool)) for v in values):
        raise ConfigFileError(f"{key} = {value!r}: give a string or a number (an array for a flag taking several)")
    text = [str(v) for v in values]
    if action.nargs is None and isinstance(action.default, list):  # repeatable, one value each time (--conf)
        return [t for v in text for t in (flag, v)]
    if action.nargs in ("+", "*"):
        return [flag, *text] if text else []
    if len(text) != 1:
        raise ConfigFileError(f"{key} = {value!r}: this flag takes one value")
    return [flag, text[0]]


def config_arguments(path: str, parser: argparse.ArgumentParser) -> list[str]:
    """Read the TOML file at ``path`` as command-line tokens for ``parser`` (the ``audit`` subcommand's).

    Returns
    -------
    list of str
        The tokens, in the file's order.

    Raises
    ------
    ConfigFileError
        The file is missing or unreadable, not TOML, or has a key no flag of ``parser`` has, or a value the flag
        cannot take; the message names the file and what to fix.
    """
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigFileError(f"--config {path!r}: cannot read it ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"--config {path!r} is not TOML: {exc}") from None
    actions = {s: a for a in parser._actions for s in a.option_strings if s.startswith("--")}
    tokens: list[str] = []
    for key, value in data.items():
        try:
            flag, action = _option(actions, key)
            tokens += _tokens(flag, action, key, value)
        except ConfigFileError as exc:
            raise ConfigFileError(f"--config {path!r}: {exc}") from None
    return tokens


def with_config_file(argv: list[str], parser: argparse.ArgumentParser, start: int = 0) -> list[str]:
    """Return ``argv`` with the tokens of its ``--config FILE`` (if any) put in at ``start``.

    ``start`` is where the subcommand's own arguments begin (after ``audit``), so the file's values come first
    and the command line's later ones win; ``--config`` itself stays for the parser to accept.

    Raises
    ------
    ConfigFileError
        As :func:`config_arguments`.
    """
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)  # `--conf` is not `--config`
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv[start:])
    if not known.config:
        return list(argv)
    return [*argv[:start], *config_arguments(known.config, parser), *argv[start:]]
