"""Collect the environment a run is made in (hardware label, model, engine, commit)."""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Optional

from pytest_goodput._version import __version__
from pytest_goodput.schema.environment import HARDWARE_ENV, UNLABELLED, Fingerprint


def _git_commit(cwd: Optional[str] = None) -> Optional[str]:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(
    *,
    model: str,
    spec_hash: str,
    hardware: Optional[str] = None,
    engine: Optional[dict[str, str]] = None,
    cwd: Optional[str] = None,
) -> Fingerprint:
    """Fingerprint of this process's environment; ``engine`` adds the engine's provenance."""
    identity = {
        "hardware": hardware or os.environ.get(HARDWARE_ENV) or UNLABELLED,
        "model": model,
        "scenario_hash": spec_hash,
    }
    provenance = {
        "plugin_version": __version__,
        "python": platform.python_version(),
        "client_cpu": f"{_cpu_model()} x{os.cpu_count()}",
    }
    commit = _git_commit(cwd)
    if commit:
        provenance["git_commit"] = commit
    for key, value in (engine or {}).items():
        if value:
            provenance[f"engine_{key}" if not key.startswith("engine") else key] = str(value)
    return Fingerprint(identity=identity, provenance=provenance)
