"""The addresses a user gives the product, each in the forms it accepts (pure, plain Python).

An engine's base URL has one normal form (``.../v1``). Where the Ray backend's load workers
run is the value of ``--goodput-ray`` / ``run --ray``: ``local`` starts a Ray runtime on this
machine (same code path as a cluster); ``auto`` joins the cluster this machine belongs to;
``HOST:PORT`` or ``ray://HOST:PORT`` names a cluster's head. One check per address, so the
plugin's settings and the CLI word a bad value alike.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

RAY_LOCAL = "local"
#: The forms an address accepts, for error messages.
RAY_ALLOWED = "local (start Ray on this machine), auto (this machine's cluster), HOST:PORT or ray://HOST:PORT"
_HOST_PORT = re.compile(r"^(ray://)?[A-Za-z0-9._\-\[\]:]+:\d{1,5}$")


class RayAddressError(ValueError):
    """A Ray address is none of the accepted forms."""


def check_ray_address(text: str) -> str:
    """``text`` stripped, or :class:`RayAddressError` naming the allowed forms."""
    value = str(text).strip()
    if value.lower() in (RAY_LOCAL, "auto"):
        return value.lower()
    m = _HOST_PORT.match(value)
    if m is None or not 0 < int(value.rsplit(":", 1)[1]) < 65536:
        raise RayAddressError(f"{text!r} is not a Ray address; expected {RAY_ALLOWED}")
    return value


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
