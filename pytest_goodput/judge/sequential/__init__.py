"""Verdicts reached as measurements arrive: A/B rounds and PR launches, stopped once decided (pure)."""
