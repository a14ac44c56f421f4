"""Listening ports for the servers the tests start (Kafka nodes, Spark's master, workers and Connect server, SMTP,
Prometheus).

A port from ``bind(("127.0.0.1", 0))`` lies in the kernel's ephemeral range, the same range every outgoing
connection takes its local port from. Between the check and the server's own bind (a JVM's start-up, seconds later,
or a Kafka node stopped and started again on its old port), any client on the machine can take it, and the server
then dies with "Address already in use". :func:`free_port` picks below that range instead, where only an explicit
bind can take a port, and never hands out the same port twice in one process.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port"]

_GIVEN: set[int] = set()
#: ports other tools take by default (Spark Connect's 15002, Spark's master UI 8080 and such are below the window)
_RESERVED = {15002}
_WINDOW = 16000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on, below the ephemeral range, not given before by this process.

    Returns
    -------
    int
        The port; falls back to one from the ephemeral range when every try below it was taken.
    """
    high = _ephemeral_low()
    low = max(1024, high - _WINDOW)
    rng = random.SystemRandom()
    for _ in range(500):
        port = rng.randrange(low, high)
        if port in _GIVEN or port in _RESERVED:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _GIVEN.add(port)
        return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _GIVEN.add(port)
    return port
