"""A TCP forwarder on loopback: a stable bootstrap address in front of brokers that move.

Stands in for the DNS name or load balancer a real deployment's ``bootstrap.servers`` names: after every
broker restarts on a new port, only this address still reaches the cluster (what KIP-1102 rebootstrap is for).
``Forwarder(target_port)``; ``retarget(port)`` sends new connections elsewhere; ``close()`` stops it.
"""

from __future__ import annotations

import socket
import threading


class Forwarder:
    def __init__(self, target_port: int, host: str = "127.0.0.1"):
        self.host, self.target_port = host, target_port
        self._srv = socket.create_server((host, 0))
        self.port = self._srv.getsockname()[1]
        self.connections = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def retarget(self, port: int) -> None:
        self.target_port = port

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            self.connections += 1
            try:
                upstream = socket.create_connection((self.host, self.target_port), timeout=5)
            except OSError:
                client.close()  # the client sees a closed connection, as from a dead broker
                continue
            upstream.settimeout(None)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed = True
        self._srv.close()
