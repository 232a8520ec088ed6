"""``python -m pytest_goodput run``: one scenario against an engine, its metrics printed."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Optional

from pytest_goodput.cli.cpus import add_cpu_flags, cpu_plan, placed_client
from pytest_goodput.engines.engine import DEFAULT_READY_TIMEOUT_S, MAX_READY_TIMEOUT_S, select
from pytest_goodput.interop.writers import ExportUsageError, parse_targets
from pytest_goodput.judge.slos import slo_outcomes
from pytest_goodput.load.client.event_loop import RunInterrupted
from pytest_goodput.load.pools import RunStopped
from pytest_goodput.load.selfcheck import capture
from pytest_goodput.load import ray_runtime
from pytest_goodput.load.trace import identified_spec
from pytest_goodput.report.exports import run_tests, write_exports
from pytest_goodput.report.text.run_result import render_result
from pytest_goodput.run.runner import measure
from pytest_goodput.schema.addresses import RAY_LOCAL, RayAddressError
from pytest_goodput.schema.runs.results import RunResult
from pytest_goodput.schema.scenario.spec import ScenarioSpec
from pytest_goodput.store.files import write_atomic

#: CLI flag → spec field, for flags whose name is not the field's.
FLAG_FIELDS = {
    "duration": "duration_s",
    "timeout": "timeout_s",
    "warmup": "warmup_requests",
    "warmup_seconds": "warmup_s",
    "trace_start": "trace_start_s",
    "think_time": "think_time_s",
    "slice_duration": "slice_s",
}
SPEC_FLAGS = (
    ("--scenario", str, "offline | server | interactive | concurrency | sweep | capacity | trace"),
    ("--rate", float, "arrival rate, requests/s"),
    ("--arrival", str, "poisson | gamma | constant"),
    ("--burstiness", float, "gamma shape (1 = Poisson)"),
    ("--concurrency", int, "closed-loop users, or in-flight ceiling"),
    ("--requests", int, "measured requests"),
    ("--duration", float, "bound on the measured window, seconds"),
    ("--warmup", int, "warm-up requests (not measured)"),
    ("--warmup-seconds", float, "warm-up seconds (not measured)"),
    ("--seed", int, "seed of prompts and schedule"),
    ("--timeout", float, "per-request timeout, seconds"),
    ("--api", str, "completions | chat"),
    ("--temperature", float, "sampling temperature sent with every request (0: greedy, which also "
                             "sends --seed and turns the output guard on)"),
    ("--workload", str, "synthetic | jsonl | sharegpt"),
    ("--dataset", str, "dataset file (jsonl or sharegpt)"),
    ("--isl", int, "input length, tokens"),
    ("--osl", int, "output length, tokens"),
    ("--isl-dist", str, "fixed | uniform | normal | lognormal"),
    ("--osl-dist", str, "fixed | uniform | normal | lognormal"),
    ("--range-ratio", float, "uniform length spread"),
    ("--isl-osl", str, "ISL/OSL preset: 1k/1k | 1k/8k | 8k/1k"),
    ("--trace", str, "trace file to replay (Mooncake JSONL or CSV; scenario trace)"),
    ("--trace-time-scale", float, "multiply the trace's times (0.5: twice as fast)"),
    ("--trace-start", float, "skip the trace's first seconds"),
    ("--images-per-request", str, "images per chat request (comma-separated: one drawn per request)"),
    ("--image-size", str, "WIDTHxHEIGHT of generated images (comma-separated: one drawn per image)"),
    ("--sweep", str, "comma-separated concurrencies (or rates with --sweep-over rate)"),
    ("--sweep-over", str, "concurrency | rate"),
    ("--attainment", float, "target fraction of good requests"),
    ("--workers", int, "client processes the load is sharded over"),
    ("--sketch-above", int, "with --ray: runs of more requests ship sketches and a sample, not "
                            "every record (default 2000000)"),
    ("--capture", str, "off | auto | on: receive times from a packet capture (docs/capture.md)"),
    ("--repeats", int, "run the scenario this many times"),
    ("--slice-duration", float, "time slices: metrics per window of this many seconds, where the "
                                "steady state began, the degradation within the run (off by default)"),
    # multi-turn conversations and shared prefixes (docs/workloads.md)
    ("--turns", int, "requests per conversation (chat; closed and open loops)"),
    ("--think-time", float, "mean seconds between a conversation's turns"),
    ("--prefix-len", int, "tokens of a shared prefix"),
    ("--prefix-groups", int, "distinct shared prefixes"),
    ("--prefix-fraction", float, "fraction of prompts (conversations) with a shared prefix"),
)


#: Exit statuses of ``python -m pytest_goodput`` (one contract for every command).
EXIT_OK = 0  # every judged run passed
EXIT_FAIL = 1  # a regression, a broken SLO, or failed requests beyond max_error_rate
EXIT_USAGE = 2  # bad flags, bad input files, an unwritable output path
EXIT_INVALID = 3  # the client set the pace: the runs measure the load generator, not the engine
EXIT_INTERRUPTED = 130  # Ctrl-C: the runs so far are reported, marked interrupted, never judged


class CLIError(Exception):
    """A usage error: bad flags or values (exit 2)."""


def parse_slo(text: str) -> dict[str, Any]:
    """``ttft_ms=450,tpot_ms=40`` or a preset name such as ``mlperf/llama2-70b/interactive``."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            out["slo"] = part
            continue
        key, _, value = part.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise CLIError(f"--slo: {part!r} needs a number after '='") from None
    return out


def spec_args(ns: argparse.Namespace) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for flag, _, _ in SPEC_FLAGS:
        name = flag[2:].replace("-", "_")
        value = getattr(ns, name, None)
        if value is None:
            continue
        if name == "sweep":
            try:
                value = [float(v) for v in value.split(",") if v.strip()]
            except ValueError:
                raise CLIError(f"--sweep: {value!r} is not a comma-separated list of numbers") from None
        if name in ("images_per_request", "image_size"):
            parts = [v.strip() for v in value.split(",") if v.strip()]
            if name == "images_per_request":
                if not all(v.isdigit() for v in parts):
                    raise CLIError(f"--images-per-request: {value!r} is not a count or counts (1 or 0,1,2)")
                parts = [int(v) for v in parts]
            value = parts[0] if len(parts) == 1 else parts
        args[FLAG_FIELDS.get(name, name)] = value
    if ns.no_stream:
        args["stream"] = False
    if ns.slo:
        args.update(parse_slo(ns.slo))
    return args


def add_engine_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="engine base URL (http://host:port[/v1]); default: start the simulator")
    p.add_argument("--serve", help='command launching an engine, "{port}" = a free port')
    p.add_argument("--model", help="model name (default: the engine's first model)")
    p.add_argument("--api-key-env", help="environment variable holding the API key")
    p.add_argument("--ready-timeout", type=float, default=DEFAULT_READY_TIMEOUT_S, metavar="S",
                   help="seconds a --serve engine may take to answer its health probe before "
                        f"the run fails with its log (default {DEFAULT_READY_TIMEOUT_S:g}, "
                        f"at most {MAX_READY_TIMEOUT_S:g})")


def add_spec_flags(p: argparse.ArgumentParser) -> None:
    """The scenario's flags (read back by :func:`spec_args`): ``run`` and ``ab`` share them."""
    for flag, typ, help_ in SPEC_FLAGS:
        p.add_argument(flag, type=typ, default=None, help=help_)
    p.add_argument("--slo", help="ttft_ms=450,tpot_ms=40,ttft_p99_ms=450 or a preset name")
    p.add_argument("--no-stream", action="store_true", help="non-streamed requests")


def add_run_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="run one scenario and print its metrics")
    add_engine_flags(run)
    add_cpu_flags(run)
    add_spec_flags(run)
    run.add_argument("--json", help="write the full result (with per-request records) here")
    add_export_flag(run)
    add_ray_flag(run)


def add_export_flag(p: argparse.ArgumentParser) -> None:
    """``--export FORMAT=PATH`` (also spelt ``--goodput-export``), repeatable: ``run`` and ``compare``."""
    p.add_argument("--export", "--goodput-export", action="append", metavar="FORMAT=PATH",
                   help="also write the results for another tool: llmd (llm-d Benchmark Report "
                   "v0.2.1), vllm (vllm bench serve JSON), bmf (Bencher) or pytorch (PyTorch "
                   "benchmark database); repeatable (docs/export.md)")


def export_flag(ns: argparse.Namespace) -> list[str]:
    """The ``--export`` values, checked before anything runs (a usage error names the formats)."""
    values = list(getattr(ns, "export", None) or [])
    try:
        parse_targets(values, "--export")
    except ExportUsageError as exc:
        raise CLIError(str(exc)) from None
    return values


def add_ray_flag(p: argparse.ArgumentParser) -> None:
    """``--ray [ADDRESS]``, shared by ``run`` and ``ab``: alone, a Ray runtime started here."""
    p.add_argument("--ray", nargs="?", const=RAY_LOCAL, metavar="ADDRESS",
                   help="run the load workers on Ray actors: alone (or local), on a Ray runtime "
                   "started here; ADDRESS joins a cluster: auto, HOST:PORT or ray://HOST:PORT "
                   "(pytest-goodput[ray])")


def refuse_capture(spec: ScenarioSpec, urls: list[Optional[str]]) -> None:
    """``--capture on`` where no capture can run: a usage error before any engine starts.

    An engine this command launches listens on 127.0.0.1 over plain HTTP (``None`` here).
    """
    if spec.capture != "on":
        return
    for url in urls:
        why = capture.why_not(spec.backend, url or "http://127.0.0.1/")
        if why is not None:
            raise CLIError(f"--capture on: {why}; --capture auto falls back to read-time stamps")


def ready_timeout(value: float) -> float:
    """``--ready-timeout``, checked: a positive number of seconds up to a day."""
    if not (math.isfinite(value) and 0 < value <= MAX_READY_TIMEOUT_S):
        raise CLIError(f"--ready-timeout: {value:g} is not allowed: give seconds > 0 and "
                       f"<= {MAX_READY_TIMEOUT_S:g}")
    return value


def ray_backend(ns: argparse.Namespace, args: dict[str, Any]) -> bool:
    """``--ray [ADDRESS]``: the Ray backend at that address (checked); False when not given."""
    if getattr(ns, "ray", None) is None:
        return False
    try:
        ray_runtime.configure(ns.ray)
    except RayAddressError as exc:
        raise CLIError(f"--ray: {exc}") from None
    args["backend"] = "ray"
    return True


def cmd_run(ns: argparse.Namespace) -> int:
    args = spec_args(ns)
    exports = export_flag(ns)
    on_ray = ray_backend(ns, args)
    spec = identified_spec(args, "command line")  # a bad trace: before any engine
    refuse_capture(spec, [ns.url])
    engine_cpus, client_cpus = cpu_plan(ns, ["--url"] if ns.url else [])
    engine = select(url=ns.url, serve=ns.serve, model=ns.model, api_key_env=ns.api_key_env,
                    ready_timeout_s=ready_timeout(ns.ready_timeout), cpus=engine_cpus)
    code = EXIT_FAIL  # until judged: an interrupted or crashed run keeps the engine's log
    stopped: Optional[BaseException] = None
    try:
        with placed_client(client_cpus):
            m = measure(spec, engine)
        code = run_exit_code(m.results)
    except (RunInterrupted, RunStopped) as exc:  # the runs so far are written, marked, not judged
        m, code = exc.partial, EXIT_INTERRUPTED if isinstance(exc, RunInterrupted) else EXIT_FAIL
        stopped = exc
    finally:
        if on_ray:
            ray_runtime.shutdown()
        engine.close(keep_log=code != EXIT_OK)
        for log in engine.kept_logs:
            print(f"engine log kept: {log}", file=sys.stderr)
    for r in m.results:
        print(render_result(r))
    if ns.json:
        body = m.result.model_dump_json(indent=1) if len(m.results) == 1 else (
            "[" + ",".join(r.model_dump_json() for r in m.results) + "]")
        write_atomic(Path(ns.json), body + "\n")
    if exports and m.results:
        env = {k: v for k, v in engine.provenance.items() if k in ("engine", "engine_version")}
        write_exports(exports, run_tests(m.results, {"model": engine.model or "", **env}), "--export")
    if stopped is not None:
        what = "interrupted" if isinstance(stopped, RunInterrupted) else f"error: {stopped}"
        print(f"{what}: partial result" + (f" written to {ns.json}" if ns.json else ""), file=sys.stderr)
    return code


def run_exit_code(runs: list[RunResult]) -> int:
    """The exit status of ``run`` (see :mod:`pytest_goodput.cli`), judged by the gate's SLO judging.

    1 when requests failed beyond ``max_error_rate`` (always, whoever set the pace) or, with
    a valid client, any SLO broke; 3 when the client set the pace; 0 otherwise. A sweep or
    capacity search crosses the knee on purpose: only its error rate is judged here.
    """
    if not runs:
        return 0
    judged_alone = runs[0].spec.scenario not in ("sweep", "capacity")
    outcomes = [o for r in runs for o in slo_outcomes([r], strict=False)]
    if any(o.name == "error_rate" and not o.ok for o in outcomes):
        return EXIT_FAIL
    if not all(r.client.valid for r in runs):
        return EXIT_INVALID
    if judged_alone and any(not o.ok for o in outcomes):
        return EXIT_FAIL
    return EXIT_OK
