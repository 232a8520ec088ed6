"""What a run produced and what a baseline stores of it: records, run metrics, history (pure)."""
