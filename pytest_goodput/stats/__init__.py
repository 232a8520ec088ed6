"""Statistics for the gate: intervals, bootstrap, binomial proofs (pure, numpy only).

Every method here is written out with its formula in ``docs/statistics.md``. scipy is
deliberately not a runtime dependency: the binomial and Student-t distributions are
computed here and cross-checked against scipy in the tests.
"""

from __future__ import annotations

from pytest_goodput.stats.binomial import (
    binom_cdf,
    binom_pmf_all,
    newcombe_interval,
    percentile_proof,
    wilson_interval,
)
from pytest_goodput.stats.bootstrap import (
    bootstrap_interval,
    bootstrap_ratio_interval,
    default_block,
    paired_index_chunks,
    paired_indices,
)
from pytest_goodput.stats.inputs import check_confidence, finite, z_value
from pytest_goodput.stats.quantiles import (
    Interval,
    Statistic,
    nearest_rank,
    nearest_rank_rows,
    nearest_rank_stat,
    percentile,
    quantile_interval,
    quantile_interval_ranks,
)
from pytest_goodput.stats.student import prediction_interval, t_cdf, t_ppf

__all__ = [
    "Interval",
    "Statistic",
    "binom_cdf",
    "binom_pmf_all",
    "bootstrap_interval",
    "bootstrap_ratio_interval",
    "default_block",
    "check_confidence",
    "finite",
    "nearest_rank",
    "nearest_rank_rows",
    "nearest_rank_stat",
    "newcombe_interval",
    "paired_index_chunks",
    "paired_indices",
    "percentile",
    "percentile_proof",
    "prediction_interval",
    "quantile_interval",
    "quantile_interval_ranks",
    "t_cdf",
    "t_ppf",
    "wilson_interval",
    "z_value",
]
