"""Which engine a report's numbers come from: its first line (pure).

Read from each outcome's environment (the engine's provenance: the simulator and its knobs,
the serve command, or the URL attached to), so the plugin's reports and ``compare`` over
stored results say the same. Commands and URLs were redacted when the engine was started;
every sink redacts again.
"""

from __future__ import annotations

from typing import Callable, Mapping, NamedTuple, Optional, Sequence

from pytest_goodput.schema.outcomes.outcome import TestOutcome

#: The simulator's ``engine`` provenance value (``engines.engine.simulator``).
SIMULATOR = "pytest-goodput-sim"


class EngineName(NamedTuple):
    """An engine in words; ``literal``: a command or URL, shown as code in Markdown."""

    text: str
    literal: bool


def engine_name(env: Mapping[str, str]) -> Optional[EngineName]:
    """The engine of one environment, or None when it recorded none."""
    kind = env.get("engine")
    if kind == SIMULATOR:
        flags = env.get("engine_flags")
        return EngineName("embedded simulator" + (f" ({flags})" if flags else ""), False)
    if env.get("engine_cmd"):
        return EngineName(env["engine_cmd"], True)
    if env.get("engine_url"):
        return EngineName(env["engine_url"], True)
    name = kind or env.get("engine_name")
    if not name:
        return None
    version = env.get("engine_version")
    return EngineName(name + (f" {version}" if version else ""), False)


def engine_names(outcomes: Sequence[TestOutcome]) -> tuple[list[EngineName], list[str]]:
    """The engines measured (in order, once each) and the A/B base engines."""
    names: list[EngineName] = []
    for o in outcomes:
        name = engine_name(o.current_env)
        if name is not None and name not in names:
            names.append(name)
    bases = list(dict.fromkeys(o.ab.base for o in outcomes if o.ab is not None))
    return names, bases


def engine_line(outcomes: Sequence[TestOutcome], code: Callable[[str], str] = str,
                plain: Callable[[str], str] = str) -> str:
    """``engine: embedded simulator`` (or the command or URL; ``engines:`` when several); A/B
    base engines follow. ``code`` formats a command or URL, ``plain`` other words (Markdown:
    a code span, escaped text)."""
    names, bases = engine_names(outcomes)
    shown = [code(n.text) if n.literal else plain(n.text) for n in names]
    text = ("engines: " if len(shown) > 1 else "engine: ") + ("; ".join(shown) or "not recorded")
    if bases:
        text += " (A/B base: " + "; ".join(code(b) for b in bases) + ")"
    return text
