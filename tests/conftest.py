"""Shared fixtures of the project's own tests.

httpx imports httpcore lazily, at its first request. pytester's in-process runs drop modules
first imported inside them, and a re-imported httpcore's exceptions escape httpx's mapping
(a raw ``httpcore.ConnectError`` instead of ``httpx.ConnectError``), so httpcore is imported here,
before any test runs.
"""

from __future__ import annotations

import subprocess
import sys

import httpcore  # noqa: F401
import pytest

from pytest_goodput.engines.engine import simulator

SIM = "import sys; from pytest_goodput.sim.server import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def sim_url():
    """A default simulator in its own process, for one test module (tests may override)."""
    proc = subprocess.Popen([sys.executable, "-c", SIM, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def slow_sim_url():
    """A simulator twice as slow as the default one, for regressions the gate must catch."""
    with simulator(slowdown=2.0) as eng:
        yield eng.base_url


@pytest.fixture(autouse=True)
def _not_in_ci(monkeypatch):
    """Tests see the environment a developer has: the gate's CI-only rules (a missing baseline
    fails in CI) and GitHub's annotations are tested where a test sets CI or GITHUB_ACTIONS."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
