"""Welch's two-sample t-test on means (unequal variances), for the workload sameness check."""

from __future__ import annotations

import math
from typing import Sequence

from pytest_goodput.stats.student import t_ppf


def welch_different(a: Sequence[float], b: Sequence[float], confidence: float = 0.99) -> bool:
    """Whether the means of ``a`` and ``b`` differ at ``confidence`` (two-sided).

    Welch's t = (mean_b - mean_a) / sqrt(s_a²/n_a + s_b²/n_b) against the Student-t quantile
    with the Welch–Satterthwaite degrees of freedom. Both samples constant (a fixed output
    length): different exactly when the means differ. Fewer than two values on a side: False
    (no spread to judge against), unless both sides are constant.
    """
    na, nb = len(a), len(b)
    if na == 0 or nb == 0:
        return False
    ma, mb = math.fsum(a) / na, math.fsum(b) / nb
    va = math.fsum((x - ma) ** 2 for x in a) / (na - 1) if na > 1 else 0.0
    vb = math.fsum((x - mb) ** 2 for x in b) / (nb - 1) if nb > 1 else 0.0
    if va == 0.0 and vb == 0.0:
        return ma != mb and (na > 1 or nb > 1)
    if na < 2 or nb < 2:
        return False
    qa, qb = va / na, vb / nb
    se = math.sqrt(qa + qb)
    df = (qa + qb) ** 2 / ((qa * qa / (na - 1) if qa else 0.0) + (qb * qb / (nb - 1) if qb else 0.0))
    return abs(mb - ma) / se > t_ppf(0.5 + confidence / 2.0, df)


__all__ = ["welch_different"]
