"""Ports of launched engines: picking a free one, and telling a port clash from a crash.

An engine that dies at start-up because its port was taken says so only in words (its log);
the launcher retries a port it picked itself, and names the port the engine could not bind.
"""

from __future__ import annotations

import re
import socket
from typing import Optional

__all__ = ["CLASH_PATTERNS", "free_port", "port_in_use", "clashed_port"]

CLASH_PATTERNS = re.compile(
    r"address already in use|eaddrinuse|errno 98|address in use|couldn'?t bind|"
    r"failed to bind|bind failed|port .* (is )?(already )?in use",
    re.IGNORECASE,
)
#: A port number on a clash line: "('127.0.0.1', 8000)", "127.0.0.1:8000", "port: 8080".
_CLASH_PORT = re.compile(r"(?:\bport\b\W{0,3}|['\"],\s*|:)(\d{2,5})\b(?![.\d])", re.IGNORECASE)


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (bind to port 0, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something listens on ``host:port`` (a bind with SO_REUSEADDR fails)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def clashed_port(log_tail: str) -> Optional[int]:
    """The port a clash line of the engine's log names, if it names one."""
    for line in reversed(log_tail.splitlines()):
        if CLASH_PATTERNS.search(line):
            ports = [int(m) for m in _CLASH_PORT.findall(line) if 0 < int(m) < 65536]
            if ports:
                return ports[-1]
    return None
