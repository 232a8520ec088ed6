"""``--goodput-export`` as users meet it: the plugin's flag through ``pytester`` and the CLI's
``--export`` through a subprocess, against the simulator (docs/export.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

# pytester's in-process runs drop modules first imported inside them: the plugin's lazily
# loaded core (numpy, the writers) is imported here, before any pytester run.
import pytest_goodput.interop.writers  # noqa: F401
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.machine  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.md.markdown  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401

sys.path.insert(0, str(Path(__file__).parent))

from test_export import SCHEMAS, VLLM_KEYS  # noqa: E402

pytest_plugins = ["pytester"]

SECRET = "sk-export-test-0123456789abcdefghijkl"
TEST = """
import pytest

@pytest.mark.goodput(scenario="concurrency", concurrency=2, requests=24, isl=16, osl=8, ttft_p99_ms=5000)
def test_chat(goodput):
    pass
"""


def _llmd_schema() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((SCHEMAS / "llmd_benchmark_report_v0_2_1.json").read_text()))


def test_the_plugin_flag_writes_every_format_and_no_secret(pytester, sim_url, monkeypatch):
    monkeypatch.setenv("EXPORT_TEST_KEY", SECRET)
    pytester.makepyfile(test_perf=TEST)
    out = pytester.path / "out"
    res = pytester.runpytest(f"--goodput-url={sim_url}", "--goodput-api-key-env=EXPORT_TEST_KEY",
                             f"--goodput-export=llmd={out}/report.json", "--goodput-export", f"vllm={out}/vllm.json",
                             f"--goodput-export=bmf={out}/bmf.json", f"--goodput-export=pytorch={out}/pt.json")
    res.assert_outcomes(passed=1)
    report = json.loads((out / "report.json").read_text())
    _llmd_schema().validate(report)
    assert report["run"]["keywords"] == ["pytest-goodput", "status:passed"]
    assert report["results"]["request_performance"]["aggregate"]["requests"]["total"] == 24
    vllm = json.loads((out / "vllm.json").read_text())
    assert set(vllm) <= set(VLLM_KEYS) and vllm["completed"] == 24 and len(vllm["ttfts"]) == 24
    bmf = json.loads((out / "bmf.json").read_text())
    assert set(bmf) == {"test_perf.py::test_chat"} and "ttft-p99-ms" in bmf["test_perf.py::test_chat"]
    records = json.loads((out / "pt.json").read_text())
    ttft = next(r for r in records if r["metric"]["name"] == "metrics.ttft_ms.p99")
    assert ttft["metric"]["target_value"] == 5000.0 and ttft["metric"]["extra_info"]["status"] == "passed"
    for f in out.iterdir():
        assert SECRET not in f.read_text(), f.name


@pytest.mark.parametrize("args,ini,needle", [
    (["--goodput-export=csv=out.csv"], "", "--goodput-export 'csv=out.csv': unknown format 'csv'; "
                                           "allowed: llmd, vllm, bmf, pytorch"),
    (["--goodput-export", "llmd"], "", "--goodput-export 'llmd': give FORMAT=PATH, FORMAT one of llmd, vllm"),
    ([], "[pytest]\ngoodput_export = bmf=a.json nope=b\n", "ini goodput_export 'nope=b': unknown format 'nope'"),
])
def test_a_bad_export_is_a_usage_error_before_any_test_runs(pytester, args, ini, needle):
    pytester.makepyfile(test_perf=TEST)
    if ini:
        pytester.makeini(ini)
    res = pytester.runpytest("--goodput-engine=sim", *args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert needle in res.stderr.str()
    assert not (pytester.path / "out.csv").exists()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_goodput", *args], capture_output=True, text=True,
                          timeout=300)


def test_the_cli_exports_a_run_and_a_comparison(tmp_path, sim_url):
    runs = []
    for name in ("base", "head"):
        path = tmp_path / f"{name}.json"
        done = _cli("run", "--url", sim_url, "--scenario", "concurrency", "--concurrency", "2", "--requests",
                    "24", "--isl", "16", "--osl", "8", "--json", str(path),
                    "--export", f"vllm={tmp_path}/{name}.vllm.json", "--goodput-export", f"bmf={tmp_path}/{name}.bmf.json")
        assert done.returncode == 0, done.stderr  # the suite's self-check: the client kept pace
        runs.append(path)
    vllm = json.loads((tmp_path / "head.vllm.json").read_text())
    assert set(vllm) <= set(VLLM_KEYS) and vllm["num_prompts"] == 24 and vllm["label"] == "run"
    assert "run" in json.loads((tmp_path / "head.bmf.json").read_text())
    # The head against itself: every verdict a pass, so the exit code is one thing (0).
    done = _cli("compare", str(runs[1]), str(runs[1]), "--export", f"llmd={tmp_path}/cmp.json",
                "--export", f"pytorch={tmp_path}/cmp.pt.json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "cmp.json").read_text())
    _llmd_schema().validate(report)
    assert any(k.startswith("status:") for k in report["run"]["keywords"])
    records = json.loads((tmp_path / "cmp.pt.json").read_text())
    gated = [r for r in records if r["metric"]["name"] in ("metrics.ttft_ms.p99", "throughput.output_tokens_per_s")]
    assert len(gated) == 2 and all("verdict" in r["metric"]["extra_info"] for r in gated), gated


def test_the_cli_refuses_a_bad_export_before_running(tmp_path):
    done = _cli("run", "--export", "xml=out.xml")
    assert done.returncode == 2
    assert "--export 'xml=out.xml': unknown format 'xml'; allowed: llmd, vllm, bmf, pytorch" in done.stderr
    done = _cli("compare", "a.json", "b.json", "--export", "vllm")
    assert done.returncode == 2 and "give FORMAT=PATH" in done.stderr
