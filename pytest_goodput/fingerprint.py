"""The environment a run was made in: identity (must match to compare) and provenance.

Identity answers "is this the same experiment?" — hardware label, model, scenario. A
difference makes a comparison *incomparable*: an H100 baseline says nothing about an A100.
Provenance answers "what changed?" — engine version, server flags, plugin version, commit —
and is shown next to the verdict; it never blocks a comparison, since judging such a
change is the gate's job.
"""

from __future__ import annotations

import os
import platform
import subprocess
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from . import __version__

#: Environment variable naming the hardware a run measures (e.g. ``1xH100-80GB``).
HARDWARE_ENV = "GOODPUT_HARDWARE"
UNLABELLED = "unlabelled"


class Fingerprint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    identity: dict[str, str] = Field(default_factory=dict)
    provenance: dict[str, str] = Field(default_factory=dict)

    def flat(self) -> dict[str, str]:
        return {**self.identity, **self.provenance}


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


def identity_mismatches(baseline: Fingerprint, current: Fingerprint) -> list[str]:
    """Human-readable reasons two runs are incomparable (empty when they are comparable)."""
    reasons = []
    for key in sorted(set(baseline.identity) | set(current.identity)):
        b, c = baseline.identity.get(key), current.identity.get(key)
        if b != c:
            reasons.append(f"{key} differs: baseline {b!r}, current {c!r}")
    return reasons


def what_changed(
    baseline: Fingerprint, current: Fingerprint
) -> dict[str, tuple[Optional[str], Optional[str]]]:
    """Provenance fields whose value moved (baseline, current)."""
    keys = sorted(set(baseline.provenance) | set(current.provenance))
    return {
        k: (baseline.provenance.get(k), current.provenance.get(k))
        for k in keys
        if baseline.provenance.get(k) != current.provenance.get(k)
    }
