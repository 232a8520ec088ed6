"""ISL/OSL presets: the request shapes the industry publishes serving frontiers at.

Pure. ``isl_osl="1k/8k"`` sets ``isl=1024, osl=8192``; an explicit ``isl=`` or ``osl=`` wins
over the preset, as explicit SLOs win over an ``slo=`` preset.
"""

from __future__ import annotations

from typing import Any

#: Preset name -> (input tokens, output tokens). "k" is 1024 tokens, as published.
ISL_OSL_PRESETS: dict[str, tuple[int, int]] = {
    "1k/1k": (1024, 1024),  # chat
    "1k/8k": (1024, 8192),  # reasoning: short question, long answer
    "8k/1k": (8192, 1024),  # summarization / retrieval: long context, short answer
}


def expand_isl_osl(data: dict[str, Any]) -> dict[str, Any]:
    """Fill ``isl``/``osl`` from ``data["isl_osl"]`` where not given; raise on an unknown name."""
    preset = data.get("isl_osl")
    if preset is None:
        return data
    if not isinstance(preset, str) or preset.lower() not in ISL_OSL_PRESETS:
        raise ValueError(f"unknown ISL/OSL preset {preset!r}; allowed: {', '.join(ISL_OSL_PRESETS)}")
    isl, osl = ISL_OSL_PRESETS[preset.lower()]
    out = dict(data, isl_osl=preset.lower())
    out.setdefault("isl", isl)
    out.setdefault("osl", osl)
    return out
