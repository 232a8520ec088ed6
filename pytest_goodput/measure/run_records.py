"""A run's exchanges as records, with the cross-checks that hold for the whole run (pure).

A request whose ``usage.completion_tokens`` the stream cannot explain
(:mod:`pytest_goodput.measure.records.crosscheck`) says the engine misreports its usage: then
no request of the run is counted from the usage, every one from the stream (the tokenizer
when given, else the content chunks), so one lying response cannot leave the run's other
counts — and their TPOT — on the engine's word. The run's client notes say so, and say how
many requests began with whitespace-only chunks that TTFT skipped (``docs/metrics.md``).
"""

from __future__ import annotations

from typing import Any, Iterable

from pytest_goodput.measure.records.exchange import RawExchange
from pytest_goodput.measure.records.record import to_record
from pytest_goodput.schema.runs.results import RequestRecord
from pytest_goodput.schema.scenario.spec import ScenarioSpec


def records_of(exchanges: Iterable[RawExchange], spec: ScenarioSpec, tokenizer: Any) -> list[RequestRecord]:
    """The exchanges parsed into records; all counted from the stream when any usage disagreed."""
    exchanges = list(exchanges)

    def parse(trust_usage: bool) -> list[RequestRecord]:
        return [to_record(ex, stream=spec.stream, api=spec.api, tokenizer=tokenizer,
                          min_output_tokens=ex.plan.max_tokens if spec.ignore_eos else None,
                          trust_usage=trust_usage, fingerprint=spec.guards_outputs)
                for ex in exchanges]

    records = parse(True)
    return parse(False) if any(r.usage_disagreement for r in records) else records


def response_notes(records: list[RequestRecord]) -> list[str]:
    """What the cross-checks found in a run, for its client notes (nothing when all was well)."""
    measured = [r for r in records if not r.warmup]
    notes: list[str] = []
    flagged = [r for r in measured if r.usage_disagreement]
    if flagged:
        source = flagged[0].token_count_source
        how = "the tokenizer" if source == "tokenizer" else "content chunks"
        notes.append(f"usage disagreed with the stream on {len(flagged)} of {len(measured)} measured "
                     f"requests ({flagged[0].usage_disagreement}): every request's output tokens "
                     f"are counted from the stream ({how}), not from usage")
    blank = sum(1 for r in measured if r.leading_blank_chunks)
    if blank:
        notes.append(f"{blank} of {len(measured)} measured requests began with whitespace-only "
                     "chunks: TTFT counts from the first chunk with visible text")
    return notes


__all__ = ["records_of", "response_notes"]
