"""Settings precedence (command line > ini > environment > default) and error sources."""

from __future__ import annotations

import pytest

from pytest_goodput.plugin.settings import SettingsError, resolve


def test_precedence():
    env = {"GOODPUT_SCALE": "0.1", "GOODPUT_URL": "http://env", "GOODPUT_MODEL": "env-m"}
    s = resolve({"scale": "0.5"}, {"scale": "0.25", "url": "http://ini"}, env)
    assert s.scale == 0.5 and s.sources["scale"] == "--goodput-scale"
    assert s.url == "http://ini" and s.sources["url"] == "ini goodput_url"
    assert s.model == "env-m" and s.sources["model"] == "environment GOODPUT_MODEL"
    assert s.tolerance is None and s.history == 10 and s.sessions == 5 and not s.compare


def test_baseline_flag_and_update():
    s = resolve({"baseline": ""}, {"baseline_dir": "perf/b"}, {})
    assert s.compare and s.baseline_dir == "perf/b"
    s = resolve({"baseline": "mine", "update": True}, {"baseline_dir": "perf/b"}, {})
    assert s.compare and s.update and s.baseline_dir == "mine"


def test_bool_from_ini_and_env():
    assert resolve({}, {"strict": True}, {}).strict
    # an explicit ini "false" beats the environment; an absent command-line flag does not
    s = resolve({"strict": False}, {"strict": False}, {"GOODPUT_STRICT": "1"})
    assert not s.strict and s.sources["strict"] == "ini goodput_strict"
    assert resolve({}, {}, {"GOODPUT_STRICT": "yes"}).strict
    assert not resolve({}, {}, {"GOODPUT_STRICT": "0"}).strict


@pytest.mark.parametrize(
    "cli,ini,env,needle",
    [
        ({"scale": "x"}, {}, {}, "--goodput-scale: 'x' is not a valid float for scale"),
        ({}, {"tolerance": "5%"}, {}, "ini goodput_tolerance: '5%' is not a valid float"),
        ({}, {}, {"GOODPUT_STRICT": "maybe"}, "environment GOODPUT_STRICT: 'maybe'"),
        ({"tolerance": "1.5"}, {}, {}, "--goodput-tolerance: 1.5 is invalid for tolerance"),
        ({"scale": "0"}, {}, {}, "--goodput-scale: 0.0 is invalid for scale"),
    ],
)
def test_errors_name_the_source(cli, ini, env, needle):
    with pytest.raises(SettingsError) as ei:
        resolve(cli, ini, env)
    assert needle in str(ei.value)
