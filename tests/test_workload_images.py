"""Images: generated PNGs, dataset images, the request body, per-request and per-run numbers,
the simulator's image tokens, and the docs' example gate (baseline, A/A, regression)."""

from __future__ import annotations

import argparse
import base64
import json
import re
import struct
import zlib
from pathlib import Path

import httpx
import pytest

# pytester's in-process runs drop modules first imported inside them (see test_reasoning_plugin)
import pytest_goodput.load.coordinator  # noqa: F401
import pytest_goodput.plugin.harness  # noqa: F401
import pytest_goodput.plugin.session  # noqa: F401
import pytest_goodput.report.files  # noqa: F401
import pytest_goodput.report.text.terminal  # noqa: F401
from pytest_goodput.cli.run import CLIError, add_spec_flags, spec_args
from pytest_goodput.engines.engine import simulator
from pytest_goodput.load.client.http import OpenAIClient
from pytest_goodput.load.requests.images import file_image, synthetic_images, synthetic_png
from pytest_goodput.load.requests.workload import WorkloadError, build_workload, load_dataset
from pytest_goodput.measure.records.exchange import RawExchange, RequestPlan
from pytest_goodput.measure.records.images import ImageError, ImagePart, image_dimensions
from pytest_goodput.measure.metrics import summarize
from pytest_goodput.measure.records.record import to_record
from pytest_goodput.schema.runs.results import ClientHealth
from pytest_goodput.schema.scenario.spec import SpecError, build_spec
from pytest_goodput.sim.model import EngineModel
from pytest_goodput.sim.profile import SimProfile
from pytest_goodput.sim.vision import image_part, image_tokens, tokens_for_image

pytest_plugins = ["pytester"]
DOCS = Path(__file__).resolve().parents[1] / "docs" / "workloads.md"


def _png_rows(png: bytes) -> bytes:
    """The decompressed scanlines of a PNG with one IDAT chunk (zlib checks its Adler-32),
    after checking every chunk's CRC."""
    pos = 8
    while pos < len(png):
        n = struct.unpack(">I", png[pos:pos + 4])[0]
        body = png[pos + 4:pos + 8 + n]
        assert struct.unpack(">I", png[pos + 8 + n:pos + 12 + n])[0] == zlib.crc32(body)
        pos += 12 + n
    n = struct.unpack(">I", png[33:37])[0]
    assert png[37:41] == b"IDAT"
    return zlib.decompress(png[41:41 + n])


# --- generated images -----------------------------------------------------------------------


def test_generated_pngs_are_valid_deterministic_unique_and_photo_sized():
    png = synthetic_png(448, 336, seed=7, key=1)
    assert image_dimensions(png) == (448, 336)
    rows = _png_rows(png)
    assert len(rows) == 336 * (1 + 3 * 448)  # one filter byte and RGB per pixel, per row
    assert rows[1:4] == rows[1 + 3 * 448 + 1:1 + 3 * 448 + 4]  # 4x4 blocks: row 1 repeats row 0
    assert png == synthetic_png(448, 336, seed=7, key=1)
    assert png != synthetic_png(448, 336, seed=7, key=2) != synthetic_png(448, 336, seed=8, key=1)
    other = _png_rows(synthetic_png(448, 336, seed=7, key=2))
    line = 1 + 3 * 448  # images of one size differ in their first block row, share the rest
    assert other[:4 * line] != rows[:4 * line] and other[4 * line:] == rows[4 * line:]
    for w, h in ((5, 3), (13, 9), (4, 4), (1, 1)):  # shorter than a block row, ragged blocks
        assert len(_png_rows(synthetic_png(w, h, seed=7, key=1))) == h * (1 + 3 * w)
    # blocks of 4x4 random colours: 3 bytes of entropy per 16 pixels, ~0.2 bytes/pixel
    assert 0.18 < len(png) / (448 * 336) < 0.3


def test_synthetic_images_draw_counts_and_sizes_from_lists():
    parts = synthetic_images([1, 2], ["448x448", "28x56"], 40, seed=3)
    assert parts == synthetic_images([1, 2], ["448x448", "28x56"], 40, seed=3)
    assert {len(p) for p in parts} == {1, 2}
    sizes = {(im.width, im.height) for p in parts for im in p}
    assert sizes == {(448, 448), (28, 56)}
    im = parts[0][0]
    assert im.url.startswith("data:image/png;base64,")
    assert image_dimensions(base64.b64decode(im.url.split(",", 1)[1])) == (im.width, im.height)
    assert synthetic_images(0, "448x448", 3, seed=3) == [(), (), ()]


def test_image_headers_png_jpeg_gif_and_refusals():
    # a JPEG: SOI, an APP0 segment of 16 bytes, then SOF0 with height 480, width 640
    jpeg = (b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
            + b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 480, 640) + b"\x00" * 12)
    assert image_dimensions(jpeg) == (640, 480)
    assert image_dimensions(b"GIF89a" + struct.pack("<HH", 320, 200) + b"\x00" * 4) == (320, 200)
    with pytest.raises(ImageError, match="not a PNG, JPEG or GIF"):
        image_dimensions(b"BM not an image")


def test_dataset_images_local_files_and_data_urls(tmp_path):
    (tmp_path / "a.png").write_bytes(synthetic_png(56, 28, 0, 0))
    url = file_image("a.png", str(tmp_path)).url
    ds = tmp_path / "d.jsonl"
    ds.write_text(json.dumps({"prompt": "one two", "output_len": 4, "images": ["a.png", url]}) + "\n"
                  + json.dumps({"prompt": "three", "output_len": 2}) + "\n")
    loaded = load_dataset(str(ds), "jsonl")
    assert [(im.width, im.height) for im in loaded.entries[0].images] == [(56, 28), (56, 28)]
    assert loaded.entries[1].images == ()
    spec = build_spec({"workload": "jsonl", "dataset": str(ds), "api": "chat", "rate": 1.0,
                       "images_per_request": 1, "image_size": "28x28"})
    items = build_workload(spec, 2, dataset=loaded)
    # an entry's own images first, then the generated one
    assert sorted(len(i.images) for i in items) == [1, 3]
    assert all(i.images[-1].width == 28 for i in items)
    completions = build_spec({"workload": "jsonl", "dataset": str(ds), "rate": 1.0})
    with pytest.raises(WorkloadError, match="has images: they need api='chat'"):
        build_workload(completions, 2, dataset=loaded)


@pytest.mark.parametrize("entry, message", [
    ({"images": "a.png"}, "'images' must be a list"),
    ({"images": ["https://example.com/a.png"]}, "only local files and data: URLs"),
    ({"images": ["a.bmp"]}, "allowed types are"),
    ({"images": ["missing.png"]}, "cannot be read"),
])
def test_dataset_image_errors_name_the_line(tmp_path, entry, message):
    ds = tmp_path / "d.jsonl"
    ds.write_text(json.dumps({"prompt": "p", "output_len": 1, **entry}) + "\n")
    with pytest.raises(WorkloadError, match=re.escape(f"{ds}:1: ") + ".*" + re.escape(message)):
        load_dataset(str(ds), "jsonl")


@pytest.mark.parametrize("args, message", [
    ({"images_per_request": 1}, "needs api='chat'"),
    ({"api": "chat", "images_per_request": 33}, "count in 0..32"),
    ({"api": "chat", "images_per_request": 1, "image_size": "448"}, "WIDTHxHEIGHT"),
    ({"api": "chat", "image_size": "28x28"}, "applies only with images_per_request"),
])
def test_spec_refuses_bad_image_arguments(args, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        build_spec({"rate": 1.0, **args})


# --- the request, the record, the run -------------------------------------------------------


def _image(w: int, h: int) -> ImagePart:
    return ImagePart("data:image/png;base64,AAAA", w, h)


def test_chat_body_carries_text_then_image_parts():
    client = OpenAIClient("http://127.0.0.1:1/v1", "m", api="chat")
    plan = RequestPlan(0, "describe", 1, 8, 0.0, images=(_image(2, 3), _image(4, 5)))
    body = json.loads(client.build_body(plan))
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "describe"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]
    plain = json.loads(client.build_body(RequestPlan(0, "describe", 1, 8, 0.0)))
    assert plain["messages"] == [{"role": "user", "content": "describe"}]


def _sse(*events: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def _delta(text: str) -> dict:
    return {"id": "x", "choices": [{"index": 0, "delta": {"content": text}}]}


def test_record_image_numbers_hand_computed():
    # 2 images, 10x20 and 30x40 pixels: 200 + 1200 = 1400 pixels; the text is 5 tokens and
    # the engine counted 5 + 300 prompt tokens, so the images cost 300.
    plan = RequestPlan(0, "a b c d e", 5, 2, 0.0, images=(_image(10, 20), _image(30, 40)))
    body = _sse(_delta(" x"), _delta(" y"),
                {"id": "x", "choices": [], "usage": {"prompt_tokens": 305, "completion_tokens": 2}})
    reads = [(0.10, body)]
    r = to_record(RawExchange(plan, 0.0, 0.2, 200, reads, request_bytes=1234), stream=True, api="chat")
    assert r.ok
    assert (r.images, r.image_pixels, r.request_bytes, r.image_tokens, r.prompt_tokens) == (2, 1400, 1234, 300, 305)
    # no usage: the engine's accounting is unknown, so are the image tokens
    bare = _sse(_delta(" x"), _delta(" y"))
    r2 = to_record(RawExchange(plan, 0.0, 0.2, 200, [(0.1, bare)], request_bytes=10), stream=True, api="chat")
    assert (r2.image_tokens, r2.prompt_tokens, r2.images) == (None, 5, 2)


def test_run_metrics_of_images_hand_computed():
    def rec(i: int, images: tuple, nbytes: int, prompt: int):
        plan = RequestPlan(i, "a b", 2, 1, 0.0, images=images)
        body = _sse(_delta(" x"), {"id": "x", "choices": [], "usage": {"prompt_tokens": prompt,
                                                                        "completion_tokens": 1}})
        return to_record(RawExchange(plan, 0.0, 0.1, 200, [(0.05, body)], request_bytes=nbytes),
                         stream=True, api="chat")

    records = [rec(0, (_image(28, 28),), 1000, 3), rec(1, (_image(28, 28),) * 3, 3000, 5),
               rec(2, (), 200, 2)]
    spec = build_spec({"scenario": "offline", "requests": 3, "api": "chat"})
    result = summarize(records, spec, ClientHealth(valid=True, cpu_utilization=0.1))
    m = result.metrics
    assert (m.images.mean, m.images.max) == (4 / 3, 3.0)  # (1 + 3 + 0) / 3
    assert m.request_bytes.mean == 1400.0  # (1000 + 3000 + 200) / 3
    assert (m.image_tokens.count, m.image_tokens.mean) == (2, 2.0)  # (3-2) and (5-2): requests with images
    assert m.tokens_per_chunk.mean == 1.0


# --- the simulator's image tokens -----------------------------------------------------------


def test_image_token_rule_hand_computed():
    assert tokens_for_image(448, 448) == 16 * 16 == 256
    assert tokens_for_image(1024, 768) == 37 * 28 == 1036  # ceil(1024/28) = 37, ceil(768/28) = 28
    assert tokens_for_image(1, 1) == 1 and tokens_for_image(29, 28) == 2
    # the prompt's last 100 of 150 tokens are images: a chunk [40, 90) holds 40 of them
    assert image_part(40, 50, 150, 100) == 40
    assert (image_part(0, 50, 150, 100), image_part(60, 500, 150, 100), image_part(0, 10, 150, 0)) == (0, 90, 0)
    png = synthetic_png(56, 84, 0, 0)
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"},
                                                       {"type": "image_url", "image_url": {"url": url}},
                                                       {"type": "image_url", "image_url": url}]}]}
    assert image_tokens(body) == 2 * (2 * 3)
    with pytest.raises(ValueError, match="base64 data URL"):
        image_tokens({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://x/a.png"}}]}]})


def test_image_tokens_cost_image_cost_times_a_text_tokens_prefill():
    # one step prefills a 100-token prompt, 80 of them image tokens: with image_cost 3 the step
    # costs 4 + 0.02 x 100 + 0.02 x (3 - 1) x 80 = 9.2 ms, against 6 ms at image_cost 1
    def first_step(cost: float) -> float:
        model = EngineModel(SimProfile(image_cost=cost, prefix_caching=False))
        model.add_request("r", 100, 4, image_tokens=80)
        return model.step().duration_s * 1000

    assert first_step(1.0) == pytest.approx(6.0)
    assert first_step(3.0) == pytest.approx(9.2)


def test_simulator_counts_image_tokens_in_usage_and_refuses_bad_images():
    im = synthetic_images(1, "448x448", 1, 0)[0][0]
    content = [{"type": "text", "text": "a b c"}, {"type": "image_url", "image_url": {"url": im.url}}]
    with simulator() as eng:
        ok = httpx.post(eng.base_url + "/chat/completions", timeout=10, json={
            "model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 2,
            "ignore_eos": True}).json()
        bad = httpx.post(eng.base_url + "/chat/completions", timeout=10, json={
            "model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}]}]})
    assert ok["usage"]["prompt_tokens"] == 3 + 256
    assert bad.status_code == 400 and "not a PNG, JPEG or GIF" in bad.json()["error"]["message"]


# --- the docs' example gate, run as written -------------------------------------------------


def _docs_example(section: str) -> str:
    """The first python block of a section of docs/workloads.md: the test runs what users read."""
    text = DOCS.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return body.split("```python\n", 1)[1].split("```", 1)[0]


def test_example_suite_runs_the_docs_image_gate_verbatim():
    suite = DOCS.parents[1] / "example_suite" / "test_vision.py"
    assert suite.read_text(encoding="utf-8") == _docs_example("Images")
    assert (DOCS.parents[1] / "example_suite" / "baselines" / "test_vision" / "test_vision_requests.json").is_file()


@pytest.fixture(scope="module")
def image_sims():
    """A simulator, and one whose image tokens cost three text tokens' prefill (steps twice
    the default's: a busy CI machine's client keeps up with them)."""
    with simulator(time_scale=2.0) as base, simulator(time_scale=2.0, image_cost=3.0) as slow:
        yield base.base_url, slow.base_url


def test_docs_image_gate_passes_a_a_and_catches_costlier_images(pytester, image_sims):
    base_url, slow_url = image_sims
    pytester.makepyfile(test_vision=_docs_example("Images"))
    out = pytester.path / "out.json"
    pytester.runpytest(f"--goodput-url={base_url}", "--goodput-update-baseline", "--goodput-sessions=3",
                       f"--goodput-json={out}").assert_outcomes(passed=1)
    run = json.loads(out.read_text())["tests"][0]["runs"][0]
    assert 1 < run["metrics"]["images"]["mean"] < 2  # one or two images per request
    tokens = {r["image_tokens"] for r in run["requests"]}
    # 336x336 = 12 x 12 = 144 tokens, 448x448 = 16 x 16 = 256; two images add up
    assert tokens <= {144, 256, 288, 400, 512} and len(tokens) > 1
    assert min(r["request_bytes"] for r in run["requests"]) > 30_000  # one 336x336 PNG, base64
    res = pytester.runpytest(f"--goodput-url={base_url}", "--goodput-baseline", f"--goodput-json={out}")
    res.assert_outcomes(passed=1)  # A/A: the same engine again
    aa = json.loads(out.read_text())["tests"][0]["outcome"]
    assert {c["metric"] for c in aa["comparisons"]} >= {"metrics.ttft_ms.p50", "metrics.e2e_ms.p50"}
    # A/A passes: nothing regressed (an inconclusive verdict on a busy machine is not a failure)
    assert not any(c["verdict"] == "regressed" for c in aa["comparisons"]), aa["comparisons"]
    res = pytester.runpytest(f"--goodput-url={slow_url}", "--goodput-baseline",
                             f"--goodput-json={out}")
    res.assert_outcomes(failed=1)
    outcome = json.loads(out.read_text())["tests"][0]["outcome"]
    verdicts = {c["metric"]: c["verdict"] for c in outcome["comparisons"]}
    assert verdicts["metrics.ttft_ms.p50"] == "regressed", verdicts


def test_cli_image_flags_take_one_value_or_a_list():
    parser = argparse.ArgumentParser()
    add_spec_flags(parser)
    one = spec_args(parser.parse_args(["--images-per-request", "2", "--image-size", "448x448"]))
    assert (one["images_per_request"], one["image_size"]) == (2, "448x448")
    many = spec_args(parser.parse_args(["--images-per-request", "0,1,2", "--image-size", "28x28,56x28"]))
    assert (many["images_per_request"], many["image_size"]) == ([0, 1, 2], ["28x28", "56x28"])
    assert build_spec({"api": "chat", "rate": 1.0, **many}).images_per_request == (0, 1, 2)
    with pytest.raises(CLIError, match="--images-per-request"):
        spec_args(parser.parse_args(["--images-per-request", "two"]))
