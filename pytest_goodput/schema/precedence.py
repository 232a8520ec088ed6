"""The one precedence rule of every knob: marker > command line > ini file > environment.

A value is "set" when it is neither None nor an empty string; the first set candidate, in the
order given (strongest source first), wins and keeps the name of its source, so a bad value
is reported with where it came from (as pytest-timeout's ``get_params`` does). The plugin's
settings (``plugin/settings.py``: command line, ini, environment), a test's marker over those
settings, and a metric's tolerance (``schema/registry.py``) all pick through :func:`pick`.

Plain Python on purpose: the plugin's entry point imports it in every pytest session.
"""

from __future__ import annotations

from typing import Any, Optional

#: The sources, strongest first (``docs/guide.md``, "Options").
SOURCES = ("marker", "command line", "ini", "environment")


def is_set(value: Any) -> bool:
    """Whether a source gave the knob a value (None and "" mean it did not)."""
    return value is not None and value != ""


def pick(*candidates: tuple[str, Any]) -> tuple[Optional[str], Any]:
    """``(source, value)`` of the first set candidate, strongest first; ``(None, None)`` if none is."""
    for where, value in candidates:
        if is_set(value):
            return where, value
    return None, None


__all__ = ["SOURCES", "is_set", "pick"]
