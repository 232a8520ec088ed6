"""Secrets never reach provenance (baselines, reports)."""

from __future__ import annotations

from pytest_goodput.engines.engine import redact


def test_redact_api_key_value_flags_env_and_url(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-live-123456")
    cmd = ("env VLLM_API_KEY=sk-live-123456 HF_TOKEN=hf_abc vllm serve m --api-key sk-live-123456 "
           "--hf-token=hf_abc --port 8000 --served-model-name m")
    out = redact(cmd, "MY_KEY")
    assert "sk-live" not in out and "hf_abc" not in out
    assert "VLLM_API_KEY=***" in out and "--api-key ***" in out and "--hf-token=***" in out
    assert "--port 8000 --served-model-name m" in out
    assert redact("http://user:pw@127.0.0.1:8000/v1") == "http://***@127.0.0.1:8000/v1"
    assert redact("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
