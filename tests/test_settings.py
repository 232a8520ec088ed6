"""Settings precedence (command line > ini > environment > default) and error sources."""

from __future__ import annotations

import pytest

from pytest_goodput.plugin.settings import SettingsError, in_ci, resolve


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


def test_the_simulator_is_named_like_any_engine_the_stronger_source_winning():
    s = resolve({"engine": "SIM"}, {}, {})
    assert s.engine == "sim" and s.engine_named and s.sources["engine"] == "--goodput-engine"
    # the command line beats the ini file, which beats the environment
    s = resolve({"url": "http://127.0.0.1:8000"}, {"engine": "sim"}, {})
    assert s.engine is None and s.url == "http://127.0.0.1:8000"
    s = resolve({"engine": "sim"}, {"serve": "vllm serve m --port {port}"}, {})
    assert s.engine == "sim" and s.serve is None
    s = resolve({}, {"engine": "sim"}, {"GOODPUT_URL": "http://127.0.0.1:8000"})
    assert s.engine == "sim" and s.url is None
    assert not resolve({}, {}, {}).engine_named


@pytest.mark.parametrize("cli,ini,env,needle", [
    ({"engine": "vllm"}, {}, {}, "--goodput-engine: 'vllm' is invalid for engine: allowed: sim"),
    ({"engine": "sim", "serve": "x --port {port}"}, {}, {},
     "names the simulator and --goodput-serve names another engine: name one"),
    ({}, {"engine": "sim", "url": "http://h:1"}, {}, "ini goodput_url names another engine"),
])
def test_an_unknown_or_doubly_named_engine_is_an_error(cli, ini, env, needle):
    with pytest.raises(SettingsError) as ei:
        resolve(cli, ini, env)
    assert needle in str(ei.value)


@pytest.mark.parametrize("env,ci", [
    ({}, None), ({"CI": "true"}, "CI=true"), ({"GITHUB_ACTIONS": "true"}, "GITHUB_ACTIONS=true"),
    ({"CI": "1"}, "CI=1"), ({"CI": "false"}, None), ({"CI": ""}, None), ({"CI": "0", "GITHUB_ACTIONS": "true"},
                                                                         "GITHUB_ACTIONS=true"),
])
def test_ci_is_a_variable_set_and_not_false(env, ci):
    assert in_ci(env) == ci


def test_in_ci_an_unnamed_engine_is_refused_with_the_three_ways_to_name_one():
    message = resolve({}, {}, {}).unnamed_engine({"CI": "true"})
    assert message is not None and "(CI=true)" in message
    for way in ("--goodput-url URL", '--goodput-serve "CMD"', "--goodput-engine=sim", "goodput_url",
                "goodput_serve", "goodput_engine = sim", "GOODPUT_URL", "GOODPUT_SERVE", "GOODPUT_ENGINE=sim"):
        assert way in message, way
    assert resolve({}, {}, {}).unnamed_engine({}) is None  # a developer's machine: the simulator
    assert resolve({"engine": "sim"}, {}, {}).unnamed_engine({"CI": "true"}) is None
    assert resolve({"url": "http://h:1"}, {}, {}).unnamed_engine({"CI": "true"}) is None


def test_a_url_and_a_serve_command_the_stronger_source_wins():
    s = resolve({"url": "http://127.0.0.1:8000/v1"}, {"serve": "vllm serve m --port {port}"}, {})
    assert s.url == "http://127.0.0.1:8000/v1" and s.serve is None
    s = resolve({"serve": "vllm serve m --port {port}"}, {"url": "http://127.0.0.1:8000/v1"}, {})
    assert s.serve == "vllm serve m --port {port}" and s.url is None
    s = resolve({}, {"url": "http://127.0.0.1:8000/v1"}, {"GOODPUT_SERVE": "vllm serve m --port {port}"})
    assert s.url == "http://127.0.0.1:8000/v1" and s.serve is None


@pytest.mark.parametrize("cli,ini,env,source", [
    ({"url": "http://h:1", "serve": "x --port {port}"}, {}, {}, "--goodput-serve"),
    ({}, {"url": "http://h:1", "serve": "x --port {port}"}, {}, "ini goodput_serve"),
    ({}, {}, {"GOODPUT_URL": "http://h:1", "GOODPUT_SERVE": "x --port {port}"}, "environment GOODPUT_SERVE"),
])
def test_a_url_and_a_serve_command_from_one_source_is_an_error_naming_both(cli, ini, env, source):
    with pytest.raises(SettingsError) as ei:
        resolve(cli, ini, env)
    message = str(ei.value)
    assert message.startswith(f"{source}: ") and "attaches to another: name one" in message, message
    url_source = source.replace("serve", "url").replace("SERVE", "URL")
    assert f"launches an engine and {url_source} attaches" in message, message


def test_an_ini_hardware_label_never_silently_overrides_the_environment():
    """CI labels each runner class in the environment (a GPU matrix): an ini label that
    differs is an error naming both, the same label or one of the two is fine, and the
    command line, given per invocation, still wins over both."""
    with pytest.raises(SettingsError) as ei:
        resolve({}, {"hardware": "h100x1"}, {"GOODPUT_HARDWARE": "a10g"})
    assert str(ei.value).startswith("ini goodput_hardware = 'h100x1' and environment "
                                    "GOODPUT_HARDWARE = 'a10g' disagree: keep one label")
    assert resolve({}, {"hardware": "a10g"}, {"GOODPUT_HARDWARE": "a10g"}).hardware == "a10g"
    assert resolve({}, {}, {"GOODPUT_HARDWARE": "a10g"}).hardware == "a10g"
    assert resolve({}, {"hardware": "h100x1"}, {}).hardware == "h100x1"
    s = resolve({"hardware": "l4"}, {"hardware": "h100x1"}, {"GOODPUT_HARDWARE": "a10g"})
    assert s.hardware == "l4" and s.sources["hardware"] == "--goodput-hardware"
