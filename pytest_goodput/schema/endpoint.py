"""An engine endpoint's base URL in its one normal form (``.../v1``)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def normalize_base_url(url: str) -> str:
    """Return the ``.../v1`` API root for ``http://h:p``, ``http://h:p/v1`` or either with ``/``."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("base URL is empty; expected e.g. http://127.0.0.1:8000/v1")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"base URL {url!r} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"base URL {url!r} has no host")
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))
