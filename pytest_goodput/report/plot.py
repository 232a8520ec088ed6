"""PNG/SVG frontier plots (the optional ``plot`` extra: matplotlib).

matplotlib is imported only when a plot is drawn, and through its object API (a ``Figure``
on the Agg canvas), so plotting never changes the process-wide pyplot backend. Without
matplotlib, :class:`PlotUnavailable` says how to install it; callers show it as a notice.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from pytest_goodput.measure.frontier import pareto_frontier, step_polyline
from pytest_goodput.schema.outcomes.frontier import FrontierPoint

if TYPE_CHECKING:
    from matplotlib.figure import Figure

INSTALL_HINT = 'pip install "pytest-goodput[plot]"'
FORMATS = (".svg", ".png")


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed; the message tells the user how to get it."""


def _finite_xy(points: Sequence[FrontierPoint]) -> tuple[list[float], list[float]]:
    keep = [
        (p.interactivity, p.throughput)
        for p in points
        if p.interactivity is not None and p.throughput is not None
        and math.isfinite(p.interactivity) and math.isfinite(p.throughput)
    ]
    return [x for x, _ in keep], [y for _, y in keep]


def build_figure(
    current_points: Sequence[FrontierPoint],
    current_frontier: Sequence[FrontierPoint],
    baseline_points: Optional[Sequence[FrontierPoint]] = None,
    baseline_frontier: Optional[Sequence[FrontierPoint]] = None,
    title: str = "",
    per_gpu: bool = False,
) -> "Figure":
    """The figure :func:`plot_frontiers` saves; raises :class:`PlotUnavailable`."""
    fig = new_figure((7.0, 4.5), "frontier plots")
    ax = fig.add_subplot(1, 1, 1)
    all_x = _finite_xy(list(current_points) + list(baseline_points or []))[0]
    all_x += _finite_xy(list(current_frontier) + list(baseline_frontier or []))[0]
    x_start = min(all_x) if all_x else None
    # The step function holds the first point's throughput for every x left of it, so both
    # lines start at the leftmost x shown; they end at their last point (nothing beyond).
    series = [("baseline", baseline_points, baseline_frontier, "tab:gray", "--", "x"),
              ("current", current_points, current_frontier, "tab:blue", "-", "o")]
    for name, points, frontier, color, style, marker in series:
        if frontier is None and points is None:
            continue
        if points:
            px, py = _finite_xy(points)
            ax.scatter(px, py, color=color, marker=marker, s=22, alpha=0.6, zorder=2,
                       label=f"{name} points")
        front = pareto_frontier(frontier or [])
        xs, ys = step_polyline(front, x_start=x_start)
        if xs:
            ax.plot(xs, ys, color=color, linestyle=style, linewidth=1.8, zorder=3,
                    label=f"{name} frontier")
            fx, fy = _finite_xy(front)
            ax.scatter(fx, fy, color=color, marker=marker, s=40, zorder=4)
    ax.set_xlabel("interactivity (output tokens/s/user)")
    ax.set_ylabel("throughput (output tokens/s/GPU)" if per_gpu else "throughput (output tokens/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig


def plot_frontiers(
    current_points: Sequence[FrontierPoint],
    current_frontier: Sequence[FrontierPoint],
    baseline_points: Optional[Sequence[FrontierPoint]] = None,
    baseline_frontier: Optional[Sequence[FrontierPoint]] = None,
    *,
    path: Union[str, "os.PathLike[str]"],
    title: str = "",
    per_gpu: bool = False,
) -> Path:
    """Draw current (solid) and baseline (dashed) frontiers as step functions with all points.

    The format follows the extension (``.svg`` or ``.png``). SVG output is reproducible
    (fixed ids, no date) so it diffs cleanly in a PR.
    """
    out = plot_path(path)
    fig = build_figure(current_points, current_frontier, baseline_points, baseline_frontier,
                       title=title, per_gpu=per_gpu)
    return save_figure(fig, out)


def plot_path(path: Union[str, "os.PathLike[str]"]) -> Path:
    """``path`` as a Path, checked to end in a format a plot can be saved as."""
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise ValueError(f"plot path must end in {' or '.join(FORMATS)}, got {str(out)!r}")
    return out


def new_figure(size: tuple[float, float], what: str) -> "Figure":
    """A figure on the Agg canvas (pyplot's backend untouched); raises :class:`PlotUnavailable`
    naming ``what`` needs matplotlib."""
    mpl = _matplotlib(what)
    fig = mpl.figure.Figure(figsize=size, dpi=100)
    mpl.backends.backend_agg.FigureCanvasAgg(fig)
    return fig


def _matplotlib(what: str) -> Any:
    """matplotlib with its Agg canvas and figure modules (the one import of it), or
    :class:`PlotUnavailable` naming ``what`` needs it."""
    try:
        import matplotlib.backends.backend_agg, matplotlib.figure  # noqa: E401
    except ImportError as err:
        raise PlotUnavailable(f"{what} need matplotlib: {INSTALL_HINT}") from err
    return matplotlib


def save_figure(fig: "Figure", out: Path) -> Path:
    """Save as the extension says; SVG is reproducible (fixed ids, no date) so it diffs cleanly."""
    matplotlib = _matplotlib("figures")  # present: the figure exists
    suffix = out.suffix.lower()
    out.parent.mkdir(parents=True, exist_ok=True)
    metadata = {"Date": None} if suffix == ".svg" else {"Software": None}
    with matplotlib.rc_context({"svg.hashsalt": "pytest-goodput", "svg.fonttype": "none"}):
        fig.savefig(out, format=suffix[1:], metadata=metadata)
    return out
