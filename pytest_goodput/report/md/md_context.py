"""The context of a comparison in Markdown: the four questions side by side, and the "why" block.

Every comparison must answer which *scenario* (load, workload, model), under which
*constraints* (SLOs), on which *software* (engine, version, flags, commit) and on which
*hardware* (the engine's accelerator, named by the hardware label: the client's CPU is the
load generator's machine, not the server's). The top block shows both sides in two columns
with every changed value in bold, also when one side lacks it. Beside a regression, the
"why" block shows what the engine itself reported (``/metrics``) in both runs: a longer
queue, a smaller batch, a fuller KV cache or preemptions explain a symptom.

Pure: outcomes in, Markdown out.
"""

from __future__ import annotations

import json
from typing import Optional

from pytest_goodput.report.md.mdtable import escape_cell, fence_for, table
from pytest_goodput.report.vocabulary import fmt_change, fmt_num, fmt_percent
from pytest_goodput.report.vocabulary import sides as side_names  # 'sides' names the specs below
from pytest_goodput.schema.environment import UNLABELLED
from pytest_goodput.schema.outcomes.outcome import TestOutcome
from pytest_goodput.schema.scenario.spec import ScenarioSpec

#: Spec fields shown under "which scenario" and "under which SLOs", in this order.
SCENARIO_FIELDS = (
    "scenario", "rate", "arrival", "burstiness", "concurrency", "sweep", "sweep_over",
    "requests", "duration_s", "warmup_requests", "api", "workload", "dataset", "isl", "osl",
    "isl_dist", "osl_dist", "seed", "isl_osl", "trace", "trace_time_scale", "trace_start_s",
)
SLO_FIELDS = ("slo", "ttft_ms", "ttfo_ms", "tpot_ms", "e2e_ms", "attainment", "percentile_slos", "max_error_rate")
#: Scenario fields shown even at their default; others only when set to something else.
_ALWAYS_SHOWN = frozenset({"scenario", "rate", "concurrency", "sweep", "requests", "duration_s", "isl", "osl"})
_SCENARIO_ENV = ("model", "scenario_hash")
#: Environment keys that name the server's hardware (never the client's machine).
_HARDWARE_HINTS = ("hardware", "gpu", "accelerator")
#: Software keys in the order the top block lists them.
_SOFTWARE_ORDER = ("engine", "engine_version", "engine_flags", "engine_cmd", "engine_url", "git_commit")
_SLO_LIMITS = {"ttft_ms": "TTFT", "ttfo_ms": "TTFO", "tpot_ms": "TPOT", "e2e_ms": "E2E"}
#: How the top block names a field (others by their own name).
_LABELS = {
    "scenario": "", "isl": "ISL", "osl": "OSL", "isl_dist": "ISL distribution", "osl_dist": "OSL distribution",
    "duration_s": "duration (s)", "warmup_requests": "warm-up requests", "sweep_over": "sweep over",
    "slo": "preset", "sweep": "loads", "engine": "engine", "engine_version": "version", "engine_flags": "flags",
    "engine_cmd": "command", "engine_url": "URL", "git_commit": "commit", "hardware": "label",
    "client_cpu": "CPU", "plugin_version": "pytest-goodput", "python": "Python",
}

Part = tuple[str, Optional[str]]  # (what, value); value None: not set on this side


def spec_defaults() -> dict[str, object]:
    """Default values of the spec's fields, in JSON form (a tuple default reads as a list)."""
    out: dict[str, object] = {}
    for name, field in ScenarioSpec.model_fields.items():
        if not field.is_required() and field.default_factory is None:
            d = field.default
            out[name] = list(d) if isinstance(d, tuple) else d
    return out


def _plain(v: object) -> Optional[str]:
    if v in (None, {}, []):
        return None
    if isinstance(v, list):
        return ", ".join(fmt_num(x) if isinstance(x, (int, float)) else str(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return fmt_num(v) if isinstance(v, float) else str(v)


def _shown(spec: dict, key: str, defaults: dict) -> bool:
    return spec.get(key) not in (None, {}, []) and (key in _ALWAYS_SHOWN or spec.get(key) != defaults.get(key))


def _scenario_parts(spec: Optional[dict], env: Optional[dict], keys: list[str]) -> list[Part]:
    spec = spec or {}
    parts: list[Part] = [(_LABELS.get(k, k), _plain(spec.get(k))) for k in keys]
    return parts + [("model", (env or {}).get("model"))]


def _slo_parts(spec: Optional[dict], keys: list[str]) -> list[Part]:
    spec = spec or {}
    parts: list[Part] = []
    for k in keys:
        v = spec.get(k)
        if k in _SLO_LIMITS:
            parts.append((f"{_SLO_LIMITS[k]} ≤", None if v is None else f"{fmt_num(v)} ms"))
        elif k == "attainment":
            parts.append(("attainment ≥", None if v is None else fmt_percent(v)))
        elif k == "max_error_rate":
            parts.append(("failed requests ≤", None if v is None else fmt_percent(v)))
        elif k == "percentile_slos":
            for name, limit in sorted((v or {}).items()):
                label = name.removesuffix("_ms").replace("_p", " p").upper()
                parts.append((f"{label} ≤", f"{fmt_num(limit)} ms"))
        else:
            parts.append((_LABELS.get(k, k), _plain(v)))
    return parts


def _env_parts(env: Optional[dict], keys: list[str]) -> list[Part]:
    return [(_LABELS.get(k, k.removeprefix("engine_")), (env or {}).get(k)) for k in keys]


def _cell(parts: list[Part], other: Optional[list[Part]]) -> str:
    """One side's values, a line each; with ``other`` (the baseline) given, changed ones bold."""
    lines = []
    for i, (what, value) in enumerate(parts):
        text = escape_cell(f"{what} {value if value is not None else 'unset'}".strip())
        if other is not None and other[i][1] != value:
            text = f"**{text}**"
        if value is not None or other is not None and other[i][1] is not None:
            lines.append(text)
    return "<br>".join(lines) or "–"


def questions_table(o: TestOutcome) -> str:
    """The four questions, baseline | current, one row each (plus the load generator's machine)."""
    spec = o.spec or {}
    base_env = o.baseline_env
    base_spec = o.baseline_spec or (spec if o.baseline_status == "compared" else None)
    defaults = spec_defaults()
    sides = [s for s in (spec, base_spec) if s]
    scen_keys = [k for k in SCENARIO_FIELDS if any(_shown(s, k, defaults) for s in sides)]
    has_request_slos = any(s.get(k) is not None for s in sides for k in _SLO_LIMITS)
    slo_keys = [k for k in SLO_FIELDS if any(s.get(k) not in (None, {}, []) for s in sides)
                and (k != "attainment" or has_request_slos)
                and (k != "max_error_rate" or any(s.get(k) != defaults.get(k) for s in sides))]
    env_keys = sorted(set(o.current_env) | set(base_env or {}))
    hardware = ["hardware"] + [k for k in env_keys if k != "hardware" and any(h in k for h in _HARDWARE_HINTS)]
    software = [k for k in _SOFTWARE_ORDER if k in env_keys]
    software += [k for k in env_keys if k.startswith("engine") and k not in software and k not in hardware]
    software.sort(key=lambda k: k == "git_commit")  # the commit under test last
    client = [k for k in env_keys if is_client(k)]
    rows = []
    for question, cur, base in (
        ("scenario", _scenario_parts(spec, o.current_env, scen_keys),
         _scenario_parts(base_spec, base_env, scen_keys) if base_spec is not None and base_env is not None else None),
        ("SLOs", _slo_parts(spec, slo_keys), _slo_parts(base_spec, slo_keys) if base_spec is not None else None),
        ("software", _env_parts(o.current_env, software), _env_parts(base_env, software) if base_env else None),
        ("hardware", _env_parts(o.current_env, hardware), _env_parts(base_env, hardware) if base_env else None),
        ("load generator", _env_parts(o.current_env, client), _env_parts(base_env, client) if base_env else None),
    ):
        if not cur:
            continue
        rows.append([f"**{question}**", "–" if base is None else _cell(base, None), _cell(cur, base)])
    note = ""
    if o.current_env.get("hardware") in (None, UNLABELLED):
        note = ("\n\nThe hardware is unlabelled: name the engine's accelerator with `--goodput-hardware` "
                "(e.g. `1xH100-80GB`); baselines from other hardware are then never compared.")
    return table(["", *side_names(o)], rows) + note


#: The engine's numbers the "why" block shows: (key, label, is a fraction).
WHY_ROWS: tuple[tuple[str, str, bool], ...] = (
    ("waiting_mean", "queue: requests waiting, mean", False),
    ("waiting_max", "queue: requests waiting, max", False),
    ("running_mean", "batch: requests running, mean", False),
    ("running_max", "batch: requests running, max", False),
    ("kv_cache_usage_mean", "KV-cache usage, mean", True),
    ("kv_cache_usage_max", "KV-cache usage, max", True),
    ("preemptions", "preemptions per run", False),
    ("prefix_cache_hit_rate", "prefix-cache hit rate", True),
    ("spec_decode_acceptance_rate", "spec-decode acceptance rate (accepted / draft tokens)", True),
)
#: Outcomes with no baseline at all, by ``baseline_status``: what the "why" block says instead.
_NO_BASELINE = {"new": "none is stored for this test yet", "off": "the run was not compared with one"}
#: Statuses that get a "why" block.
WHY_STATUSES = frozenset({"regressed", "inconclusive", "underpowered", "slo-failed"})


def _why_change(base: Optional[float], cur: Optional[float], fraction: bool) -> str:
    if base is None or cur is None:
        return "–"
    if fraction:
        return fmt_change(cur - base, scale="absolute")
    return fmt_change((cur - base) / base) if base else ("from 0" if cur > 0 else "+0.0%")


def why_block(o: TestOutcome) -> str:
    """The engine's own metrics, baseline vs current, beside a failing or doubtful verdict."""
    server = o.server or {}
    cur, base = server.get("current") or {}, server.get("baseline") or {}
    # an improvement gets the block too when speculative decoding's acceptance may explain it
    spec = "spec_decode_acceptance_rate" in cur or "spec_decode_acceptance_rate" in base
    improved = spec and any(c.verdict == "improved" for c in o.comparisons)
    if (o.status not in WHY_STATUSES and not improved) or o.scenario == "capacity":
        return ""  # a capacity search probes other rates than its baseline: no like-for-like view
    fmt = lambda v, frac: "–" if v is None else (fmt_percent(v) if frac else fmt_num(v))  # noqa: E731
    no_baseline = _NO_BASELINE.get(o.baseline_status) if o.ab is None else None
    if no_baseline is not None:  # nothing to put beside the current run: no column for it
        head = "**Why — the engine's own `/metrics` in the current run:**"
        if not cur:
            return (f"{head} the engine exported no Prometheus `/metrics` for this run, so there is no "
                    "server-side view (queue, batch, KV cache, preemptions) of this result.")
        rows = [[label, fmt(cur.get(k), frac)] for k, label, frac in WHY_ROWS if k in cur]
        return "\n\n".join([head, f"There is no baseline to compare them with ({no_baseline}).",
                             table(["engine metric", "current"], rows, "lr")])
    head = "**Why — the engine's own `/metrics`, {} vs {}:**".format(*side_names(o))
    if not cur and not base:
        return (f"{head} the engine exported no Prometheus `/metrics` for these runs, so there is no "
                "server-side view (queue, batch, KV cache, preemptions) of this result.")
    rows = [[label, fmt(base.get(k), frac), fmt(cur.get(k), frac), _why_change(base.get(k), cur.get(k), frac)]
            for k, label, frac in WHY_ROWS if k in cur or k in base]
    lines = [head]
    if not base and o.ab is not None:
        lines.append("The base engine exported no server metrics: head values only.")
    elif not base:
        lines.append("The baseline has no server metrics (recorded before they were kept, or its engine "
                     "exported none): current values only; record the baseline again to compare them.")
    elif not cur:
        lines.append("The current run has no server metrics (its engine's `/metrics` was not reachable).")
    return "\n\n".join(lines + [table(["engine metric", "baseline", "current", "change"], rows, "lrrr")])


def env_rows(o: TestOutcome) -> list[list[str]]:
    """Every environment field, baseline vs current; values that differ are bold."""
    spec = o.spec or {}
    base_env = o.baseline_env or {}
    base_spec = o.baseline_spec or (spec if o.baseline_status == "compared" else None)
    rows = []

    def row(question: str, key: str, base: Optional[str], cur: Optional[str], known: bool) -> None:
        """``known``: the baseline side of this row is known (unset there is a change)."""
        b = "–" if base is None else escape_cell(base)
        c = "–" if cur is None else escape_cell(cur)
        if known and b != c:
            c = f"**{c}**"
        rows.append([question, escape_cell(key), b, c])

    def value(s: Optional[dict], key: str) -> Optional[str]:
        v = (s or {}).get(key)
        return None if v in (None, {}, []) else json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v)

    defaults = spec_defaults()
    for key in SCENARIO_FIELDS:
        if _shown(spec, key, defaults):
            row("scenario", key, value(base_spec, key), value(spec, key), base_spec is not None)
    for key in _SCENARIO_ENV:
        if key in o.current_env or key in base_env:
            row("scenario", key, base_env.get(key), o.current_env.get(key), o.baseline_env is not None)
    has_request_slos = any(spec.get(k) is not None for k in _SLO_LIMITS)
    for key in SLO_FIELDS:
        if key == "attainment" and not has_request_slos and spec.get(key) == defaults.get(key):
            continue
        if key != "max_error_rate" and value(spec, key) is not None:
            row("SLOs", key, value(base_spec, key), value(spec, key), base_spec is not None)
    env_keys = sorted((set(o.current_env) | set(base_env)) - set(_SCENARIO_ENV))
    hardware = [k for k in env_keys if any(h in k.lower() for h in _HARDWARE_HINTS)]
    for key in [k for k in env_keys if k not in hardware]:
        row("load generator" if is_client(key) else "software", key, base_env.get(key),
            o.current_env.get(key), o.baseline_env is not None)
    for key in hardware:
        row("hardware", key, base_env.get(key), o.current_env.get(key), o.baseline_env is not None)
    return rows


def is_client(key: str) -> bool:
    """Keys that describe the client (load generator), not the server under test."""
    return key in ("client_cpu", "plugin_version", "python")


def details(o: TestOutcome) -> str:
    """The collapsed blocks: every environment field, and the scenario spec as run."""
    env = table(["question", "field", "baseline", "current"], env_rows(o))
    spec = json.dumps(o.spec or {}, indent=2, sort_keys=True)
    fence = fence_for(spec)
    return (
        "<details><summary>Environment: baseline vs current</summary>\n\n" + env + "\n\n</details>\n\n"
        "<details><summary>Run configuration</summary>\n\n"
        f"{fence}json\n{spec}\n{fence}\n\n</details>"
    )
