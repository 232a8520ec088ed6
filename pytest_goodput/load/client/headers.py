"""What the client says in a request's head: its line, ``Host``, who sends, the credentials.

Built once per client (the body's length is the one part that changes), so a request's head
costs one formatting of an integer at send time. No ``Accept-Encoding``: a compressing server
would batch the stream.
"""

from __future__ import annotations

import base64
import os
import urllib.parse

from pytest_goodput.schema.redaction import register

#: Says who sends (a server's log may tell clients apart by it).
USER_AGENT = "pytest-goodput"


def auth_headers(api_key_env: str | None, url: urllib.parse.SplitResult) -> tuple[dict[str, str], bytes | None]:
    """The ``Authorization`` header (the API key from ``api_key_env``, else credentials in the
    URL) and the secret to redact from what the server echoes."""
    if not api_key_env:
        if url.username is None:
            return {}, None
        pair = f"{urllib.parse.unquote(url.username)}:{urllib.parse.unquote(url.password or '')}"
        return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}, None
    key = os.environ.get(api_key_env)
    if not key:
        raise ValueError(f"environment variable {api_key_env} (API key) is not set or empty")
    register(key)  # so that every output redacts it, whatever echoes it
    return {"Authorization": f"Bearer {key}"}, key.encode()


def request_head(method: str, url: urllib.parse.SplitResult, path: str, headers: dict[str, str]) -> bytes:
    """A request's line and headers, up to the value of its ``Content-Length``."""
    host = url.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    default = 443 if url.scheme == "https" else 80
    if url.port is not None and url.port != default:
        host += f":{url.port}"
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", f"User-Agent: {USER_AGENT}",
             *(f"{k}: {v}" for k, v in headers.items()), "Content-Length: "]
    return "\r\n".join(lines).encode("latin-1")


__all__ = ["USER_AGENT", "auth_headers", "request_head"]
