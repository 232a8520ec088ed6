"""PNG/SVG trend plots of a metric across main-branch runs (the optional ``plot`` extra).

One line per metric over the runs, the segment means between change points as flat steps,
and a dashed vertical line at each change point, so a reviewer sees where a step or a creep
began. matplotlib is imported only to draw, through its object API (the pyplot backend is
never touched); without it :class:`pytest_goodput.report.plot.PlotUnavailable` says how to
install it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence, Union

from pytest_goodput.judge.changepoints import ChangePoint
from pytest_goodput.report.plot import new_figure, plot_path, save_figure

#: Tick labels shown at most: a long history would print its commits on top of each other.
_MAX_TICKS = 12


def trend_file_name(nodeid: str, metric_path: str, suffix: str = ".svg") -> str:
    """A file name for one test's metric: the node id and path with unsafe characters as ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{nodeid}__{metric_path}").strip("_") + suffix


def plot_trend(labels: Sequence[str], values: Sequence[float], change_points: Sequence[ChangePoint], *,
               path: Union[str, "os.PathLike[str]"], title: str = "", ylabel: str = "") -> Path:
    """Draw ``values`` over the runs named ``labels`` with ``change_points`` marked; the format
    follows the extension (``.svg``, reproducible for diffs, or ``.png``)."""
    out = plot_path(path)
    if len(labels) != len(values) or not values:
        raise ValueError("a trend plot needs one label per value and at least one value")
    fig = new_figure((8.0, 3.8), "trend plots")
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(1, len(values) + 1))
    ax.plot(xs, list(values), color="#0072B2", marker="o", markersize=3, linewidth=1.2, label="run")
    bounds = [0, *(cp.index for cp in change_points), len(values)]
    for a, b in zip(bounds, bounds[1:]):
        segment = list(values[a:b])
        if segment:
            mean = sum(segment) / len(segment)
            ax.plot([a + 0.5, b + 0.5], [mean, mean], color="#D55E00", linewidth=1.8,
                    label="segment mean" if a == 0 else None)
    for cp in change_points:
        ax.axvline(cp.index + 0.5, color="#D55E00", linestyle="--", linewidth=1.0)
        ax.annotate(f"{cp.change * 100:+.1f}%", (cp.index + 0.5, max(values)), fontsize="small",
                    color="#D55E00", ha="left", va="top")
    step = max(1, -(-len(xs) // _MAX_TICKS))
    ax.set_xticks(xs[::step])
    ax.set_xticklabels([labels[i - 1] for i in xs[::step]], rotation=45, ha="right", fontsize="x-small")
    ax.set_xlabel("main-branch run (commit)")
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return save_figure(fig, out)
