"""A free TCP port on loopback, for the rendezvous, agents' /metrics and the dashboard.

One definition that the supervisor, the reference trainer's launcher, the benchmarks and the tests
all import: the port is free when asked, so a caller binds it at once (another process can take it
in between; callers that start a server report a port in use as such).
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel has just handed out on `host` and released."""
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port
