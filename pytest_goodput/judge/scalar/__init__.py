"""One gated metric at a time: its value from samples, its interval and its verdict (pure)."""
