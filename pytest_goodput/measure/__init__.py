"""Measuring (pure): from raw exchanges to records, and from records to run metrics.

SSE parsing, per-request records (TTFT, TPOT, ITL, token counts, failures), run metrics
(throughput, goodput, percentiles, percentile SLO proofs), headline numbers and frontier
points, exactly as ``docs/metrics.md`` defines them. No I/O, no pytest.
"""
