"""Where the Ray backend's load workers run: the value of ``--goodput-ray`` / ``run --ray``.

Pure: the accepted forms and their check, so the plugin's settings and the CLI word a bad
value alike. ``local`` starts a Ray runtime on this machine (same code path as a cluster);
``auto`` joins the cluster this machine belongs to; ``HOST:PORT`` or ``ray://HOST:PORT``
names a cluster's head.
"""

from __future__ import annotations

import re

LOCAL = "local"
#: The forms an address accepts, for error messages.
ALLOWED = "local (start Ray on this machine), auto (this machine's cluster), HOST:PORT or ray://HOST:PORT"
_HOST_PORT = re.compile(r"^(ray://)?[A-Za-z0-9._\-\[\]:]+:\d{1,5}$")


class RayAddressError(ValueError):
    """A Ray address is none of the accepted forms."""


def check_ray_address(text: str) -> str:
    """``text`` stripped, or :class:`RayAddressError` naming the allowed forms."""
    value = str(text).strip()
    if value.lower() in (LOCAL, "auto"):
        return value.lower()
    m = _HOST_PORT.match(value)
    if m is None or not 0 < int(value.rsplit(":", 1)[1]) < 65536:
        raise RayAddressError(f"{text!r} is not a Ray address; expected {ALLOWED}")
    return value
