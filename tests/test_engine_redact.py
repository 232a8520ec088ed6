"""The one redaction layer (``schema.redaction``): what it removes, and what it leaves alone."""

from __future__ import annotations

import base64
import json

import pytest

from pytest_goodput.engines.engine import attach
from pytest_goodput.schema import redaction
from pytest_goodput.schema.redaction import redact, register, register_command, register_url


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    monkeypatch.setattr(redaction, "_registered", set())


def test_serve_command_flags_assignments_and_api_key(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-live-123456")
    redaction.register_env("MY_KEY")
    cmd = ("env VLLM_API_KEY=sk-live-123456 HF_TOKEN=hf_abcdef vllm serve m --api-key sk-live-123456 "
           "--hf-token=hf_abcdef --port 8000 --served-model-name m")
    out = redact(cmd)
    assert "sk-live" not in out and "hf_abcdef" not in out
    assert "VLLM_API_KEY=***" in out and "--api-key ***" in out and "--hf-token=***" in out
    assert "--port 8000 --served-model-name m" in out


def test_values_from_a_command_are_removed_wherever_they_appear_later():
    register_command("llama-server --api-key Zq9-secret-77 --port {port}")
    assert redact("server said: bad key Zq9-secret-77") == "server said: bad key ***"


def test_url_userinfo_its_password_and_its_basic_auth_encoding():
    assert redact("http://user:pw@127.0.0.1:8000/v1") == "http://***@127.0.0.1:8000/v1"
    assert redact("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    register_url("http://alice:pa55word-x@example.test/v1")
    basic = base64.b64encode(b"alice:pa55word-x").decode()
    assert redact(f"echo {basic} and pa55word-x") == "echo *** and ***"


def test_headers_and_schemes():
    assert redact("Authorization: Bearer abc.def-123") == "Authorization: Bearer ***"
    assert redact('{"authorization": "Basic dXNlcjpwYXNz"}') == '{"authorization": "Basic ***"}'
    assert redact("got Bearer tok_abcdefgh here") == "got Bearer *** here"


def test_secret_looking_environment_values(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_planted_value")
    monkeypatch.setenv("GOODPUT_API_KEY_ENV", "OPENAI_API_KEY")  # a name, not a secret
    monkeypatch.setenv("SOME_AUTH_ENABLED", "true")  # a setting, not a secret
    assert redact("x hf_planted_value y") == "x *** y"
    assert redact("variable OPENAI_API_KEY, enabled true") == "variable OPENAI_API_KEY, enabled true"


def test_settings_that_only_mention_tokens_and_numbers_are_left_alone(monkeypatch):
    monkeypatch.setenv("X_KEY", "0.123456")  # replacing numbers would corrupt JSON documents
    text = "--max-tokens 2048 --tokenizer m max_tokens=64 --api-key-env OPENAI_API_KEY 0.123456"
    assert redact(text) == text


def test_json_stays_json_and_escaped_secrets_are_found():
    register('sk"quoted\\secret')
    doc = json.dumps({"cmd": "vllm --api-key abcdefgh --port 1", "echo": 'sk"quoted\\secret'})
    out = json.loads(redact(doc))
    assert out == {"cmd": "vllm --api-key *** --port 1", "echo": "***"}


def test_short_values_are_not_registered():
    register("ab", "12345678", "true")
    assert redaction.known_secrets({}) == []


def test_attach_keeps_url_credentials_out_of_provenance_and_errors():
    e = attach("http://bob:hunter2-secret@127.0.0.1:9/v1", model="m")
    assert "hunter2" not in json.dumps(e.provenance)
    with pytest.raises(ValueError) as err:
        attach("ftp://bob:hunter2-secret@127.0.0.1:9")
    assert "hunter2" not in str(err.value) and "***@" in str(err.value)
