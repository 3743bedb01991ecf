"""Serving the agent's registry at `/metrics` (prometheus_client's own HTTP server)."""

from __future__ import annotations

import errno
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from triage.config import ConfigError


class MetricsServer:
    """A running `/metrics` endpoint; `port` is the bound one (useful with port 0)."""

    def __init__(self, registry: CollectorRegistry, bind: str, port: int) -> None:
        try:
            server, thread = start_http_server(port, addr=bind, registry=registry)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"port {port} on {bind} is already in use (another `triage "
                    "agent` or exporter?); pass a free --port"
                ) from None
            raise ConfigError(f"cannot serve /metrics on {bind}:{port}: {exc}") from None
        self._server: WSGIServer = server
        self._thread: threading.Thread = thread
        self.bind = bind
        self.port: int = server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self.bind}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
