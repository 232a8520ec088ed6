"""What the gate decided: per-metric comparisons, SLOs, frontiers and A/B rounds (pure)."""
