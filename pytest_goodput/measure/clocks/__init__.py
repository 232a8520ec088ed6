"""The engine's clock (pure): its latency histograms over a run and its per-request timing, beside ours.

``histogram``: a run's delta histogram, merged over runs, its exact mean and the bucket that
bounds each percentile (vLLM's per-request ``metrics`` object is read by
``schema.runs.engine_clock.EngineTiming.from_metrics``).
``summary``: a measurement's engine-side numbers and the per-request difference from ours.
"""
