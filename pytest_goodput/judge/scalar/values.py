"""Re-exports of ``judge/values.py`` (the samples' metric values, below every part of the judge)."""

from pytest_goodput.judge.values import (PREFIX_SHARE, Sessions, as_sessions, baseline_value, common_prefix,
                                         failures, group_value, latency_column, metric_value, pairable,
                                         pooled, rate_column, slowest_success)

__all__ = ["PREFIX_SHARE", "Sessions", "as_sessions", "baseline_value", "common_prefix", "failures",
           "group_value", "latency_column", "metric_value", "pairable", "pooled", "rate_column",
           "slowest_success"]
