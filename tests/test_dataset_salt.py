"""Dataset prompts are salted per run: a repeat finds nothing of the previous run cached.

Through the CLI against the simulator (its prefix cache on, ``usage.prompt_tokens_details.
cached_tokens`` reported): two repeats of a JSONL workload whose prompts share nothing with
each other. Before the salt, every request of repeat 2 hit the cache repeat 1 filled.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pytest_goodput.load.requests.prompt_set import prompt_set, unsalted_prompts
from pytest_goodput.load.requests.workload import build_workload, load_dataset, salt_words
from pytest_goodput.measure.records.exchange import RequestPlan
from pytest_goodput.schema.scenario.spec import build_spec

TEXT = " ".join(["the quick brown fox jumps over the lazy dog"] * 12)


def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"question {i}: {TEXT}", "output_len": 4,
                                        "prompt_len": 110}) + "\n" for i in range(12)))
    return path


def test_dataset_prompts_carry_the_run_nonce_first_and_the_fingerprint_ignores_it(tmp_path: Path) -> None:
    path = dataset(tmp_path)
    spec = build_spec({"scenario": "concurrency", "concurrency": 1, "requests": 12,
                       "workload": "jsonl", "dataset": str(path)})
    bare = build_workload(spec, 12, dataset=load_dataset(str(path), "jsonl"))
    runs = [build_workload(spec, 12, dataset=load_dataset(str(path), "jsonl"), salt=s) for s in (7, 8)]
    for salt, items in zip((7, 8), runs):
        lead = " ".join(salt_words(salt)) + " "
        assert [i.prompt for i in items] == [lead + b.prompt for b in bare]
        assert [i.prompt_tokens for i in items] == [114] * 12  # the dataset's 110 and the 4 words
    assert runs[0][0].prompt != runs[1][0].prompt
    plans = [RequestPlan(i, "", None, 4, 0.0) for i in range(12)]
    fingerprint = prompt_set(spec, plans, unsalted_prompts(spec, None, load_dataset(str(path), "jsonl")))
    again = prompt_set(spec, plans, unsalted_prompts(spec, None, load_dataset(str(path), "jsonl")))
    assert fingerprint == again and fingerprint.requests == 12


def test_repeat_two_of_a_dataset_workload_hits_no_prefix_cache(tmp_path: Path) -> None:
    out = tmp_path / "runs.json"
    res = subprocess.run([sys.executable, "-m", "pytest_goodput", "run", "--scenario", "concurrency",
                          "--concurrency", "2", "--requests", "12", "--warmup", "0", "--workload",
                          "jsonl", "--dataset", str(dataset(tmp_path)), "--osl", "4", "--repeats", "2",
                          "--json", str(out)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert "Traceback" not in res.stderr and out.exists(), res.stdout + res.stderr
    runs = json.loads(out.read_text())
    assert len(runs) == 2
    cached = [[r["cached_tokens"] for r in run["requests"]] for run in runs]
    assert cached == [[0] * 12, [0] * 12]  # the simulator reports the count: 0, not absent
    assert runs[0]["prompt_set"] == runs[1]["prompt_set"]  # one workload, salt excluded
