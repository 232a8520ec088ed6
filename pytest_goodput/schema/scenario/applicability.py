"""Which marker arguments apply to which scenarios (pure).

An argument that does not apply to its scenario changes nothing the run does, only the spec's
identity hash: a test that names one was written for another scenario, or misreads this one,
and its marker is refused. The rule judges the keywords a marker gives, not values: a spec
read back from JSON has every field set, and derived specs (a sweep's points, a capacity
search's probes) carry their parent's arguments. The same table says in ``docs/markers.md``
where each argument applies.

"Applies" means the scenario reads the argument: SLOs apply everywhere (every run's requests
are checked against them, an offline batch's too), a load argument only where that load is
built from it.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from pytest_goodput.schema.scenario.trace import SET_BY_TRACE, TRACE_ONLY

SCENARIOS: tuple[str, ...] = ("offline", "server", "interactive", "concurrency", "sweep", "capacity",
                              "trace")
#: A sweep whose points are open-loop rates (``sweep_over='rate'``), where the open loop's
#: arguments apply; a concurrency sweep's points are closed loops.
RATE_SWEEP = "sweep over rate"
#: Per-request limits: what goodput and attainment count requests against.
REQUEST_SLOS: tuple[str, ...] = ("ttft_ms", "ttfo_ms", "tpot_ms", "e2e_ms", "slo")


class Applies(NamedTuple):
    """Where an argument applies, and why it does not elsewhere (by scenario, else ``other``)."""

    where: tuple[str, ...]
    other: str
    why: Mapping[str, str] = {}


def _all_but(*left_out: str) -> tuple[str, ...]:
    return tuple(s for s in SCENARIOS if s not in left_out)


_OPEN = ("server", "interactive", "capacity")
_NO_ARRIVALS = {"offline": "offline sends every request at once",
                "concurrency": "a closed loop sends when a user's last request ends",
                "sweep": "a concurrency sweep's points are closed loops",
                "trace": "the trace sets the arrival times"}
_ONE_RUN = "each {} is one run: record more sessions (--goodput-sessions) to measure the noise"
_TRACE_SETS = "the trace sets the requests' lengths and shared prefixes"

#: Arguments that apply to some scenarios only; every other argument applies to all.
APPLIES: dict[str, Applies] = {
    "rate": Applies(_OPEN, "", {**_NO_ARRIVALS, "sweep": "a sweep's points take their load from sweep="}),
    "arrival": Applies((*_OPEN, RATE_SWEEP), "", _NO_ARRIVALS),
    "burstiness": Applies((*_OPEN, RATE_SWEEP), "", _NO_ARRIVALS),
    "concurrency": Applies((*_all_but("sweep"), RATE_SWEEP), "",
                           {"sweep": "a concurrency sweep's points take their users from sweep="}),
    "warmup_s": Applies(_all_but("offline"), "",
                        {"offline": "offline sends everything at once: use warmup_requests="}),
    "repeats": Applies(_all_but("sweep", "capacity"), "",
                       {"sweep": _ONE_RUN.format("point"), "capacity": _ONE_RUN.format("probe")}),
    "saturation_stop": Applies(("sweep", RATE_SWEEP), "only a sweep climbs through loads"),
    "head_launches": Applies(_all_but("sweep", "capacity"), "", {
        "sweep": "a sweep's points are judged on its frontier, one launch",
        "capacity": "a capacity search is judged on its capacity, one launch"}),
    "gate": Applies((*_all_but("capacity"), RATE_SWEEP), "", {
        "capacity": "a capacity search is judged on its capacity (set its tolerance with tolerances=)"}),
    "turns": Applies(("server", "interactive", "concurrency"), "conversations run in an open loop "
                     "(server, interactive) or a closed one (concurrency)"),
    "think_time_s": Applies(("server", "interactive", "concurrency"), "conversations run in an open "
                            "loop (server, interactive) or a closed one (concurrency)"),
    **{name: Applies(("sweep",), "only a sweep measures a frontier over several loads")
       for name in ("sweep", "sweep_over", "frontier_percentile", "gpus", "interactivity_tolerance")},
    **{name: Applies(("capacity",), "only a capacity search probes rates")
       for name in ("capacity_max_rate", "capacity_resolution")},
    **{name: Applies(("trace",), "only a trace replay reads a trace") for name in ("trace", *TRACE_ONLY)},
    **{name: Applies(_all_but("capacity"), "", {"capacity": "A/B mode does not compare capacity searches "
                                               "(each side would probe other rates)"})
       for name in ("base_serve", "base_url", "base_sim", "ab_min_rounds", "ab_max_rounds", "ab_relaunch", "ab_order_seed")},
    **{name: Applies(_all_but("trace"), _TRACE_SETS)
       for name in (*SET_BY_TRACE, "range_ratio", "length_cv", "min_len", "max_len")
       if name not in ("rate", "arrival", "burstiness")},
}


def applies_to(name: str) -> tuple[str, ...]:
    """The scenarios (and ``RATE_SWEEP``) where the argument applies: all when unrestricted."""
    entry = APPLIES.get(name)
    return entry.where if entry is not None else SCENARIOS


def _label(scenario: str, sweep_over: Any) -> str:
    if scenario == "sweep":
        return "a rate sweep" if sweep_over == "rate" else "a concurrency sweep"
    return f"scenario {scenario!r}"


def not_applicable(args: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(argument, why) for each argument the marker's scenario would ignore, in the marker's
    order; an unknown scenario is left to the type check."""
    scenario = args.get("scenario", "server")
    if scenario not in SCENARIOS:
        return []
    sweep_over = args.get("sweep_over", "concurrency")
    found = []
    for name, value in args.items():
        entry = APPLIES.get(name) if isinstance(name, str) else None
        if entry is None or scenario in entry.where or (
                scenario == "sweep" and sweep_over == "rate" and RATE_SWEEP in entry.where):
            continue
        why = entry.why.get(scenario, entry.other)
        found.append((name, f"{name}={value!r} does not apply to {_label(scenario, sweep_over)}"
                      f"{': ' + why if why else ''}; it applies to {', '.join(entry.where)}"))
    if "attainment" in args and not any(k in args for k in REQUEST_SLOS):
        found.append(("attainment", f"attainment={args['attainment']!r} is the share of requests "
                      "within every per-request limit: it needs ttft_ms=, ttfo_ms=, tpot_ms=, e2e_ms= "
                      "or slo="))
    return found
