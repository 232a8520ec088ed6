"""A recording keeps what is valid: a launch its client paced is replaced, the others kept.

A recording measures one session per engine launch (``plugin/recording.py``). A session
whose run the client paced is first measured again on the same launch (``remeasure.py``);
one that stays invalid is measured on a fresh launch instead, at most
:data:`MAX_EXTRA_LAUNCHES` times in a recording, and the valid sessions before it are never
discarded. What that took is each session's provenance (``environment.SESSION_FACTS``),
stored with it in the baseline and stated in the test's notes. A session still paced once
the extra launches are spent is left out, and the valid ones are stored when there are at
least :data:`MIN_KEPT` of them; only a recording with fewer is refused, naming how many
sessions were valid and what to change (``docs/decisions.md``, "A recording keeps what is
valid").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from pytest_goodput.run.remeasure import TRIES, paced_by_client
from pytest_goodput.schema.environment import REMEASURED, REPLACES_LAUNCH
from pytest_goodput.schema.runs.session import Session

#: Extra engine launches one recording may spend replacing launches its client paced: a
#: launch a client stalled on twice points at the machine, not a hiccup; two fresh launches
#: give a passing disturbance two more chances, and bound the cost (minutes a launch on a GPU).
MAX_EXTRA_LAUNCHES = 2

#: Valid sessions a recording stores without its paced ones: two measure a run-to-run spread
#: (one would leave the whole spread to the registry's prior, as a one-session push does by
#: choice, not by accident).
MIN_KEPT = 2

#: How the test's note on what its recording took begins (reports single it out).
RECORDING_NOTE = "recording kept what is valid"

#: What to change when a recording is refused for its client.
CHANGE = ("give the client CPUs of its own (--goodput-client-cpus / --goodput-engine-cpus), run "
          "fewer jobs beside the recording, or lower the test's load; then record again")


@dataclass
class Launches:
    """The extra launches one recording spent, and how many it has left."""

    extra: int = MAX_EXTRA_LAUNCHES
    replaced: list[str] = field(default_factory=list)  # "test session k", one per extra launch

    @property
    def left(self) -> int:
        return self.extra - len(self.replaced)


def session_reasons(m: Session) -> list[str]:
    """Why the client set the pace of a session (sweeps and capacity searches re-measure their
    own points and probes: their validity is judged per run, not here)."""
    return paced_by_client(m.results) if m.kind == "runs" else []


def valid_session(measure: Callable[[], Session], relaunch: Optional[Callable[[], None]],
                  launches: Launches, session: int, who: str = "",
                  say: Optional[Callable[[str], None]] = None) -> Session:
    """Session ``session`` (1-based) of a recording: ``measure()`` (re-measured on its launch
    by the one rule), then, while its client still set the pace and the recording has extra
    launches left, ``relaunch()`` and measure it on the fresh launch; ``say`` hears why at
    once. ``relaunch`` None: an engine not started here, which cannot be replaced."""
    m = measure()
    replaced: list[str] = []
    while (why := session_reasons(m)) and relaunch is not None and launches.left > 0:
        launches.replaced.append(f"{who} session {session}".strip())
        replaced.append(f"session {session}'s launch, the client set the pace of {TRIES} runs on it "
                        f"({'; '.join(why)})")
        if say is not None:
            say(f"goodput: {who}: replacing {replaced[-1]}; extra launches left in this recording: "
                f"{launches.left}")
        relaunch()
        m = measure()
    if replaced:
        m.provenance[REPLACES_LAUNCH] = "; ".join(replaced)
    return m


def kept_sessions(sessions: Sequence[Session]) -> tuple[list[Session], Optional[str]]:
    """The sessions a recording stores, and the test's note on what keeping them valid took
    (None: nothing): a session its client still paced is left out when at least
    :data:`MIN_KEPT` others are valid; with fewer, all are returned (and refused by the gate,
    ``refusal``)."""
    paced = {k: why for k, m in enumerate(sessions, 1) if (why := session_reasons(m))}
    valid = len(sessions) - len(paced)
    drop = bool(paced) and valid >= MIN_KEPT
    kept = [m for k, m in enumerate(sessions, 1) if not (drop and k in paced)]
    remeasured = [f"session {k}" for k, m in enumerate(sessions, 1) if REMEASURED in m.provenance]
    replaced = [f"session {k}" for k, m in enumerate(sessions, 1) if REPLACES_LAUNCH in m.provenance]
    if not remeasured and not replaced and not drop:
        return kept, None
    parts = [f"{RECORDING_NOTE}: {valid} of {len(sessions)} sessions valid"]
    if drop:
        parts.append(f"{valid} stored; left out, the client set their pace on every try: "
                     + ", ".join(f"session {k} ({'; '.join(why)})" for k, why in paced.items()))
    if remeasured:
        parts.append(f"re-measured on their launch (the client set the pace): {', '.join(remeasured)}")
    if replaced:
        parts.append("launch replaced (the client set the pace on it twice), earlier sessions kept: "
                     + ", ".join(replaced))
    return kept, "; ".join(parts)


def refusal(nodeid: str, sessions: Sequence[Session]) -> str:
    """Why a recording whose client still set the pace is not stored, and what to change."""
    invalid = [(k, m, why) for k, m in enumerate(sessions, 1) if (why := paced_by_client(m.results))]
    where = ", ".join(f"session {k}" for k, _, _ in invalid) or "a session"
    first = invalid[0][2] if invalid else ["client health check failed"]
    tried = (f"re-measured on its launch and on up to {MAX_EXTRA_LAUNCHES} replacement launches "
             "(of an engine started here)" if any(m.kind == "runs" for _, m, _ in invalid)
             else "each invalid sweep point or capacity probe re-measured")
    return (f"{nodeid}: baseline not recorded: {len(sessions) - len(invalid)} of {len(sessions)} "
            f"sessions valid (a recording stores its valid sessions when at least {MIN_KEPT} are); the client set the pace of {where} even {tried} ({'; '.join(first)}): {CHANGE}")
