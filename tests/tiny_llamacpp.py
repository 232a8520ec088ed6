"""The tests' tiny llama.cpp engine: a random-weight GGUF served by the xllamacpp wheel."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

import pytest

from pytest_goodput.engines.engine import Engine, launch
from pytest_goodput.engines.tinyllama import write_tiny_llama

ALIAS = "tiny"


@contextmanager
def two_slot_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """Two slots, one compute thread, niced so the client keeps its share of the CPU."""
    model = write_tiny_llama(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    cmd = ["nice", "-n", "10", sys.executable, "-m", "pytest_goodput.engines.llamacpp_server",
           "--model", model, "--port", "{port}", "--parallel", "2", "--threads", "1", "--alias", ALIAS]
    with launch(cmd, ready_timeout_s=60) as eng:
        yield eng
