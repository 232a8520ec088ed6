"""The passing self-check (tests/fake_selfcheck.py) in the Python processes a test starts.

tests/conftest.py puts this folder on PYTHONPATH and sets ``GOODPUT_TEST_SELFCHECK=pass`` for
integration tests not marked ``real_selfcheck``. Nothing is imported up front (a process's
imports are what some tests check): the verdicts are replaced as their modules finish loading.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path


#: The modules holding the verdicts (fake_selfcheck.VERDICTS, which is imported only to patch).
PATCHED = frozenset({"pytest_goodput.load.selfcheck.health", "pytest_goodput.measure.metrics"})
#: pytest's assertion rewriting, whose loader is patched to patch them as well.
REWRITE = "_pytest.assertion.rewrite"


class _ForceValid(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the loader of the self-check's modules to patch them."""

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name not in PATCHED and name != REWRITE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Patching(spec.loader)
                return spec
        return None


class _Patching(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return self.loader.create_module(spec)

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        self.loader.exec_module(module)
        if module.__name__ == REWRITE:
            _patch_rewriting(module.AssertionRewritingHook)
        else:
            _fake().patch(module)


def _patch_rewriting(hook: type) -> None:
    """pytest's assertion rewriting imports the modules of a distribution it marks for rewrite
    (an ``.egg-info`` of the repository on ``sys.path`` marks this package) ahead of every
    other finder: its loader patches them too."""
    exec_module = hook.exec_module

    def patching_exec_module(self, module):  # type: ignore[no-untyped-def]
        exec_module(self, module)
        if module.__name__ in PATCHED:
            _fake().patch(module)

    hook.exec_module = patching_exec_module


def _fake():  # type: ignore[no-untyped-def]
    """tests/fake_selfcheck.py, by its path: a process may have changed ``sys.path`` (xdist)."""
    if "fake_selfcheck" not in sys.modules:
        path = Path(__file__).resolve().parent.parent / "fake_selfcheck.py"
        spec = importlib.util.spec_from_file_location("fake_selfcheck", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["fake_selfcheck"] = module
        spec.loader.exec_module(module)
    return sys.modules["fake_selfcheck"]


if os.environ.get("GOODPUT_TEST_SELFCHECK") in ("pass", "retry"):
    if os.environ["GOODPUT_TEST_SELFCHECK"] == "retry":  # the re-measure rule's first tries real
        PATCHED = PATCHED | {"pytest_goodput.run.remeasure"}
    sys.meta_path.insert(0, _ForceValid())
