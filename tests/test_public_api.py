"""The curated public API (``pytest_goodput.__all__``): every name resolves, and importing the
package stays cheap (its names are imported on first use)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import pytest_goodput

NAMES = [n for n in pytest_goodput.__all__ if n != "judge"]


@pytest.mark.parametrize("name", NAMES)
def test_every_public_name_resolves(name):
    value = getattr(pytest_goodput, name)
    assert value is not None
    if name != "__version__":
        assert getattr(value, "__name__", name) == name  # the object itself, not a stand-in


def test_judge_is_the_judging_package_with_its_function():
    import pytest_goodput.judge as judge_package

    assert pytest_goodput.judge is judge_package
    assert callable(pytest_goodput.judge.judge)


def test_no_public_name_is_shadowed_by_a_subpackage():
    # Importing pytest_goodput.<name> rebinds the attribute to that package: a function or
    # class of the same name would change meaning with import order.
    package = Path(pytest_goodput.__file__).parent
    shadowed = [n for n in pytest_goodput.__all__
                if ((package / n).is_dir() or (package / f"{n}.py").is_file())
                and pytest_goodput._EXPORTS.get(n) != f"pytest_goodput.{n}"]
    assert shadowed == []


def test_star_import_gives_exactly_the_public_names():
    namespace: dict = {}
    exec("from pytest_goodput import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(pytest_goodput.__all__)


def test_all_is_exactly_the_lazily_imported_names_and_the_version():
    assert sorted(pytest_goodput.__all__) == sorted([*pytest_goodput._EXPORTS, "__version__"])


def test_dir_lists_the_public_names():
    listed = dir(pytest_goodput)
    assert set(pytest_goodput.__all__) <= set(listed)
    assert listed == sorted(listed)


def test_an_unknown_name_raises_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no attribute 'ScenarioSpek'"):
        pytest_goodput.ScenarioSpek  # noqa: B018
    assert not hasattr(pytest_goodput, "no_such_name")


def test_version_comes_from_the_version_module():
    from pytest_goodput._version import __version__

    assert pytest_goodput.__version__ == __version__


def test_importing_the_package_loads_neither_pydantic_nor_numpy():
    code = ("import sys, pytest_goodput; "
            "print(sorted(m for m in ('pydantic', 'numpy', 'httpx', 'httptools') if m in sys.modules)); "
            "pytest_goodput.ScenarioSpec; print('pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "True"], out.stdout + out.stderr


def test_measurement_is_a_deprecated_name_of_session():
    with pytest.warns(DeprecationWarning, match="runner returns a Session"):
        old = pytest_goodput.Measurement
    assert old is pytest_goodput.Session
    assert "Measurement" not in pytest_goodput.__all__


def test_from_measurement_is_a_deprecated_name_of_from_session():
    from pytest_goodput.measure.metrics import summarize
    from pytest_goodput.schema.runs.results import ClientHealth

    spec = pytest_goodput.build_spec({"scenario": "offline", "requests": 1})
    fresh = pytest_goodput.Session(spec=spec, results=[summarize([], spec, ClientHealth(valid=True, cpu_utilization=0.1))])
    with pytest.warns(DeprecationWarning, match="use from_session"):
        side = pytest_goodput.judge.from_measurement(fresh)
    assert side == pytest_goodput.judge.from_session(fresh)


def test_runs_is_a_deprecated_name_of_a_sessions_results():
    fresh = pytest_goodput.Session()
    with pytest.warns(DeprecationWarning, match="use Session.results"):
        assert fresh.runs == fresh.results == []
