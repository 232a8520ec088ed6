"""Misspelt goodput names are errors, with the name meant: a marker, an ini key.

pytest only warns about an unknown marker or ini key, and for this plugin a warning is a silent
no-op with a green build: ``@pytest.mark.goodputs(...)`` on a docstring-only test passes
measuring nothing; ``goodput_urll = ...`` measures the simulator and baselines it as the engine.
So a name that is close to the plugin's and is not registered stops the run, naming the closest
valid one (difflib). Plain Python and pytest only: checked in every run, goodput tests or not.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Iterable, Optional

import pytest

PREFIX = "goodput"
#: How close an unregistered name must be to one of the plugin's to be taken for a misspelling.
CUTOFF = 0.75
#: pytest's own error for an unregistered marker under ``--strict-markers`` (raised on import).
STRICT_MARKER = re.compile(r"'([\w.]+)' not found in `markers` configuration option")


def _meant(name: str, valid: Iterable[str]) -> Optional[str]:
    """The plugin's name ``name`` probably meant, or None when it is not taken for one of ours."""
    valid = sorted(valid)
    close = difflib.get_close_matches(name.lower(), valid, n=1, cutoff=CUTOFF)
    if close:
        return close[0]
    if name.lower().startswith(PREFIX):
        return difflib.get_close_matches(name.lower(), valid, n=1, cutoff=0.0)[0]
    return None


_registered_key = pytest.StashKey[frozenset]()


def registered_markers(config: pytest.Config) -> frozenset:
    """Every marker name the session knows (pytest's, plugins', the ini's ``markers``)."""
    if _registered_key not in config.stash:
        config.stash[_registered_key] = frozenset(
            line.split(":")[0].split("(")[0].strip() for line in config.getini("markers"))
    return config.stash[_registered_key]


def misspelt_marker(item: pytest.Item, marker: str) -> Optional[str]:
    """Why the item's marker that is not ``marker`` but looks like it is refused, or None."""
    registered = registered_markers(item.config)
    for mark in item.iter_markers():
        if mark.name == marker or mark.name in registered:
            continue
        if _meant(mark.name, [marker]) is not None:
            return (f"{item.nodeid}: unknown marker @pytest.mark.{mark.name}: did you mean "
                    f"@pytest.mark.{marker}? A misspelt marker measures nothing and the test passes")
    return None


def check_ini_keys(config: pytest.Config, known: Iterable[str]) -> None:
    """A usage error for an ini key the plugin does not know that is close to one it does."""
    known = set(known)
    unknown = getattr(config, "_get_unknown_ini_keys", lambda: set())()
    for key in sorted(unknown):
        meant = _meant(key, known)
        if meant is None:
            continue
        where = config.inipath.name if config.inipath else "the ini file"
        raise pytest.UsageError(
            f"pytest-goodput: unknown ini key {key!r} in {where}: did you mean {meant!r}? "
            f"(every key: docs/guide.md, \"Options\")"
        )


def check_names(config: pytest.Config, known_ini: Iterable[str], marker: str) -> None:
    """Check the ini keys now, and have the marker meant named under ``--strict-markers`` too,
    where pytest itself refuses an unregistered marker while importing the test module."""
    check_ini_keys(config, known_ini)
    config.pluginmanager.register(_StrictMarkerHint(marker), "goodput-misspellings")


class _StrictMarkerHint:
    """Adds "did you mean" to pytest's own collection error for a misspelt goodput marker."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        found = STRICT_MARKER.search(str(report.longrepr)) if report.failed else None
        longrepr: Any = report.longrepr
        if found and _meant(found.group(1), [self.marker]) is not None and hasattr(longrepr, "addsection"):
            longrepr.addsection("pytest-goodput", f"unknown marker @pytest.mark.{found.group(1)}: "
                                f"did you mean @pytest.mark.{self.marker}?")
