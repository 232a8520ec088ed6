"""Settings checked against this machine before any goodput test runs: CPU sets that must fit
it, the base simulator's knobs, packet capture that must be possible here, and the exports'
``FORMAT=PATH`` values (a format this version writes).

Each check needs part of the core (the CPU planner, the simulator's profile, the capture
probe), so the entry point imports this module only when one of these settings is given and
the session has goodput work; a suite without goodput tests never loads it.
"""

from __future__ import annotations

from typing import Optional

import pytest

from pytest_goodput.interop.writers import ExportUsageError, parse_targets
from pytest_goodput.load.selfcheck.capture import unavailable
from pytest_goodput.plugin.settings import Settings
from pytest_goodput.run.affinity import plan
from pytest_goodput.schema.cpus import CpuSetError
from pytest_goodput.sim.profile import SimProfileError, checked_knobs


def capture_refused() -> Optional[str]:
    """Why this process may not capture packets (``capture=on`` is then a usage error), or None."""
    return unavailable("http://127.0.0.1")


def check_machine(settings: Settings) -> None:
    """A setting this machine cannot honour is a usage error naming where it came from."""
    if settings.engine_cpus or settings.client_cpus:
        _check_cpus(settings)
    if settings.base_sim is not None:
        _check_base_sim(settings)
    if settings.capture == "on" and (why := capture_refused()):  # a usage error, not N failed tests
        raise pytest.UsageError(f"pytest-goodput: {settings.sources.get('capture')}=on: {why}")
    if settings.export:
        try:
            parse_targets(settings.export, settings.sources.get("export", "--goodput-export"))
        except ExportUsageError as exc:  # before any test runs, not after the session measured
            raise pytest.UsageError(f"pytest-goodput: {exc}") from None


def _check_cpus(settings: Settings) -> None:
    """CPU sets that do not fit this machine are a usage error now, not a failed test later."""
    try:
        plan(settings.engine_cpus, settings.client_cpus, client_count=settings.workers or 1)
    except CpuSetError as exc:
        where = " / ".join(settings.sources.get(k, k) for k in ("engine_cpus", "client_cpus")
                           if getattr(settings, k))
        raise pytest.UsageError(f"pytest-goodput: {where}: {exc}") from None


def _check_base_sim(settings: Settings) -> None:
    """Simulator knobs that do not parse are a usage error before any engine starts."""
    try:
        checked_knobs(settings.base_sim or "", "--goodput-base-sim")
    except SimProfileError as exc:
        raise pytest.UsageError(f"pytest-goodput: {settings.sources.get('base_sim', 'base_sim')}: "
                                f"{str(exc).partition(': ')[2]}") from None
