"""The environment a run was made in: identity (must match to compare) and provenance.

Identity answers "is this the same experiment?" — hardware label, model, scenario. A
difference makes a comparison *incomparable*: an H100 baseline says nothing about an A100.
Provenance answers "what changed?" — engine version, server flags, plugin version, commit —
and is shown next to the verdict; it never blocks a comparison, since judging such a
change is the gate's job.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

#: Environment variable naming the hardware a run measures (e.g. ``1xH100-80GB``).
HARDWARE_ENV = "GOODPUT_HARDWARE"
UNLABELLED = "unlabelled"
#: Fields that must match for two runs to be comparable.
IDENTITY_KEYS: tuple[str, ...] = ("hardware", "model", "scenario_hash")
#: Provenance of one recorded session, not of its environment: what its recording did to keep
#: it valid (``run/recording.py``). Never a change between a baseline and a run.
REMEASURED = "re-measured"
REPLACES_LAUNCH = "replaces launch"
SESSION_FACTS: tuple[str, ...] = (REMEASURED, REPLACES_LAUNCH)


class Fingerprint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    identity: dict[str, str] = Field(default_factory=dict)
    provenance: dict[str, str] = Field(default_factory=dict)

    def flat(self) -> dict[str, str]:
        return {**self.identity, **self.provenance}

    @classmethod
    def from_flat(cls, flat: dict[str, str]) -> "Fingerprint":
        """Split a flat environment (as reports store it) back into identity and provenance."""
        return cls(identity={k: v for k, v in flat.items() if k in IDENTITY_KEYS},
                   provenance={k: v for k, v in flat.items() if k not in IDENTITY_KEYS})
