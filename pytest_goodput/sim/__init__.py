"""The embedded engine simulator: a modelled continuous-batching LLM server.

``profile`` holds the knobs and presets, ``model`` the pure virtual-time performance model,
``openai`` the pure request parsing and response encoding of the OpenAI API, ``server`` the
HTTP front end that runs the model in real time (``python -m pytest_goodput sim``).
"""

from pytest_goodput.sim.model import (
    EngineModel,
    SimRequest,
    StepResult,
    Timeline,
    simulate,
)
from pytest_goodput.sim.profile import (
    PRESETS,
    SimProfile,
    SimProfileError,
    profile_from_env_and_args,
)

__all__ = [
    "EngineModel", "PRESETS", "SimProfile", "SimProfileError", "SimRequest", "StepResult",
    "Timeline", "profile_from_env_and_args", "simulate",
]
