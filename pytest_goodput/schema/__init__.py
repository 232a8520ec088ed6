"""Schema (pure, the lowest layer): the pydantic models every other layer speaks.

Scenario specs (marker arguments and CLI flags), per-request records and run results,
outcomes and verdicts, baseline files, environment fingerprints, frontier points, and the
metric registry that says what each metric is. No I/O, no pytest; imports nothing else of
the product.
"""
