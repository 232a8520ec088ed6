"""Workloads: length distributions, prompt construction, dataset loaders and their errors."""

import json

import numpy as np
import pytest

from pytest_goodput.load.requests.workload import (
    WORDS,
    WorkloadError,
    build_workload,
    index_words,
    load_dataset,
    load_tokenizer,
    sample_lengths,
    sample_order,
)
from pytest_goodput.schema.scenario.spec import ScenarioSpec


def spec(**kw):
    kw.setdefault("scenario", "offline")
    kw.setdefault("requests", 10)
    return ScenarioSpec(**kw)


def test_fixed_lengths_give_exact_word_counts():
    items = build_workload(spec(isl=12, osl=7), 5)
    assert [len(i.prompt.split(" ")) for i in items] == [12] * 5
    assert [i.prompt_tokens for i in items] == [12] * 5
    assert [i.max_tokens for i in items] == [7] * 5
    assert all(w in WORDS for i in items for w in i.prompt.split(" "))


def test_prompts_start_with_unique_index_words():
    items = build_workload(spec(isl=16), 300)
    heads = {" ".join(i.prompt.split(" ")[:3]) for i in items}
    assert len(heads) == 300
    assert items[0].prompt.split(" ")[:3] == [WORDS[0]] * 3
    assert index_words(len(WORDS) + 2) == [WORDS[0], WORDS[1], WORDS[2]]


def test_salt_changes_heads_not_lengths():
    a = build_workload(spec(isl=16), 20, salt=1)
    b = build_workload(spec(isl=16), 20, salt=2)
    assert [x.prompt_tokens for x in a] == [x.prompt_tokens for x in b]
    assert all(x.prompt != y.prompt for x, y in zip(a, b))
    assert [x.prompt.split(" ")[7:] for x in a] == [x.prompt.split(" ")[7:] for x in b]


def test_deterministic_and_prefix_stable():
    s = spec(isl=40, osl=20, isl_dist="lognormal", osl_dist="normal", seed=5)
    a = build_workload(s, 200)
    assert a == build_workload(s, 200)
    assert build_workload(s, 400)[:200] == a
    assert a != build_workload(s.model_copy(update={"seed": 6}), 200)


def test_uniform_range_ratio_bounds_and_mean():
    x = sample_lengths(100, 20_000, "uniform", range_ratio=0.5, rng=np.random.default_rng(1))
    assert x.min() == 50 and x.max() == 150
    assert x.mean() == pytest.approx(100, rel=0.01)


@pytest.mark.parametrize("dist", ["normal", "lognormal"])
def test_normal_and_lognormal_mean_and_cv(dist):
    x = sample_lengths(200, 50_000, dist, cv=0.3, rng=np.random.default_rng(2))
    assert x.mean() == pytest.approx(200, rel=0.01)
    assert x.std() / x.mean() == pytest.approx(0.3, rel=0.05)


def test_clipping_to_min_and_max_len():
    x = sample_lengths(100, 10_000, "lognormal", cv=2.0, min_len=20, max_len=150,
                       rng=np.random.default_rng(3))
    assert x.min() == 20 and x.max() == 150
    items = build_workload(spec(isl=100, osl=100, isl_dist="normal", osl_dist="normal",
                                length_cv=1.0, min_len=5, max_len=120), 500)
    assert min(i.prompt_tokens for i in items) >= 5 and max(i.max_tokens for i in items) <= 120


def test_unknown_distribution():
    with pytest.raises(WorkloadError, match="unknown length distribution"):
        sample_lengths(10, 3, "zipf")


def test_sample_order_cycles_through_every_entry():
    order = sample_order(4, 10, seed=0)
    assert sorted(order[:4]) == [0, 1, 2, 3] and sorted(order[4:8]) == [0, 1, 2, 3]
    assert len(order) == 10


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_jsonl_loader_and_sampling(tmp_path):
    path = write(tmp_path, "d.jsonl", "\n".join([
        json.dumps({"prompt": "hello there", "output_len": 5}),
        "",
        json.dumps({"prompt": "a b c", "max_tokens": 9, "prompt_len": 4}),
    ]))
    ds = load_dataset(path, "jsonl")
    assert [(e.prompt, e.output_len, e.prompt_len) for e in ds.entries] == [
        ("hello there", 5, None), ("a b c", 9, 4)]
    items = build_workload(spec(workload="jsonl", dataset=path, seed=1), 4)
    assert sorted((i.prompt, i.prompt_tokens, i.max_tokens) for i in items) == [
        ("a b c", 4, 9), ("a b c", 4, 9), ("hello there", None, 5), ("hello there", None, 5)]


@pytest.mark.parametrize("line, msg", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"output_len": 3}', "'prompt' must be"),
    ('{"prompt": "x"}', "'output_len'"),
    ('{"prompt": "x", "output_len": 0}', "'output_len'"),
    ('{"prompt": "x", "output_len": 2, "prompt_len": "7"}', "'prompt_len'"),
])
def test_jsonl_malformed_line_names_file_and_line(tmp_path, line, msg):
    path = write(tmp_path, "bad.jsonl", '{"prompt": "ok", "output_len": 1}\n' + line + "\n")
    with pytest.raises(WorkloadError, match=msg) as err:
        load_dataset(path, "jsonl")
    assert f"{path}:2" in str(err.value)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(WorkloadError, match="does not exist"):
        load_dataset(str(tmp_path / "nope.jsonl"), "jsonl")
    with pytest.raises(WorkloadError, match="is empty"):
        load_dataset(write(tmp_path, "e.jsonl", "\n\n"), "jsonl")


def test_sharegpt_loader_skips_and_counts_malformed(tmp_path):
    data = [
        {"conversations": [{"from": "human", "value": "what is up"},
                           {"from": "gpt", "value": "the sky is up there"}]},
        {"conversations": [{"from": "gpt", "value": "no human turn"}]},
        {"conversations": "not a list"},
        "not an object",
        {"conversations": [{"from": "system", "value": "sys"}, {"from": "human", "value": "hi"},
                           {"from": "human", "value": "again"}, {"from": "gpt", "value": "hey you"}]},
    ]
    ds = load_dataset(write(tmp_path, "s.json", json.dumps(data)), "sharegpt")
    assert [(e.prompt, e.output_len) for e in ds.entries] == [("what is up", 5), ("hi", 2)]
    assert ds.skipped == 3


def test_sharegpt_errors(tmp_path):
    with pytest.raises(WorkloadError, match="no usable conversations"):
        load_dataset(write(tmp_path, "s.json", json.dumps([{"x": 1}])), "sharegpt")
    with pytest.raises(WorkloadError, match=r"s2.json:1: not valid JSON"):
        load_dataset(write(tmp_path, "s2.json", "[{"), "sharegpt")


class CharTokenizer:
    """Counts characters: far from one word = one token, so fitting has work to do."""

    def encode(self, text, add_special_tokens=False):
        return list(text)


def test_tokenizer_fits_prompt_and_reports_count():
    items = build_workload(spec(isl=60, osl=4), 3, tokenizer=CharTokenizer())
    for it in items:
        assert it.prompt_tokens == len(it.prompt)
        assert abs(it.prompt_tokens - 60) <= 10


def test_load_tokenizer_none_without_name():
    assert load_tokenizer(None) is None
    assert load_tokenizer("") is None
