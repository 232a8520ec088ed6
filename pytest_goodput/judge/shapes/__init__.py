"""Judges of run shapes beyond one number: frontiers, capacity, saturation, degradation (pure)."""
