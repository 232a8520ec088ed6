"""Frontier plots: files by extension, drawing agrees with step_lookup, notice without matplotlib."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from pytest_goodput.measure.frontier import pareto_frontier, step_lookup
from pytest_goodput.report.plot import PlotUnavailable, build_figure, plot_frontiers
from pytest_goodput.schema.outcomes.frontier import FrontierPoint


def pt(x: float, y: float, load: float = 1.0) -> FrontierPoint:
    return FrontierPoint(load=load, load_kind="concurrency", interactivity=x, throughput=y)


CUR = [pt(10, 1100, 64), pt(20, 850, 32), pt(15, 500, 16), pt(40, 480, 8), pt(80, 150, 1)]
BASE = [pt(8, 1000, 64), pt(20, 800, 32), pt(40, 500, 8), pt(60, 300, 2), pt(30, 100, 4)]


def test_missing_matplotlib_raises_a_notice_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(PlotUnavailable) as exc:
        plot_frontiers(CUR, pareto_frontier(CUR), path=tmp_path / "f.svg")
    assert 'pip install "pytest-goodput[plot]"' in str(exc.value)
    assert not (tmp_path / "f.svg").exists()


def test_unknown_extension_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.svg or \.png"):
        plot_frontiers(CUR, pareto_frontier(CUR), path=tmp_path / "f.jpg")


def test_svg_and_png_by_extension(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    svg = plot_frontiers(CUR, pareto_frontier(CUR), BASE, pareto_frontier(BASE),
                         path=str(tmp_path / "sub" / "f.svg"), title='vLLM "main" vs PR')
    assert svg == tmp_path / "sub" / "f.svg"
    text = svg.read_text()
    assert "<svg" in text and "vLLM" in text
    png = plot_frontiers(CUR, pareto_frontier(CUR), path=tmp_path / "f.PNG")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_svg_is_reproducible(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    a = plot_frontiers(CUR, pareto_frontier(CUR), BASE, pareto_frontier(BASE), path=tmp_path / "a.svg")
    b = plot_frontiers(CUR, pareto_frontier(CUR), BASE, pareto_frontier(BASE), path=tmp_path / "b.svg")
    assert a.read_text() == b.read_text()


def _level(xs: list[float], ys: list[float], x: float) -> list[float]:
    """Heights of the drawn horizontal segments strictly spanning x."""
    return [ys[i] for i in range(len(xs) - 1) if xs[i] < x < xs[i + 1] and ys[i] == ys[i + 1]]


def test_drawn_lines_agree_with_step_lookup() -> None:
    pytest.importorskip("matplotlib")
    fig = build_figure(CUR, pareto_frontier(CUR), BASE, pareto_frontier(BASE), title="t")
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"current frontier", "baseline frontier"}
    assert lines["baseline frontier"].get_linestyle() == "--"
    assert lines["current frontier"].get_linestyle() == "-"
    rng = random.Random(0)
    for label, front in (("current frontier", pareto_frontier(CUR)), ("baseline frontier", pareto_frontier(BASE))):
        line = lines[label]
        assert line.get_drawstyle() == "default"  # the vertices already encode the steps
        xs = [float(v) for v in line.get_xdata()]
        ys = [float(v) for v in line.get_ydata()]
        assert xs[0] == 8  # both start at the leftmost x shown
        assert xs[-1] == front[-1].interactivity  # and end at their last point
        for _ in range(300):
            x = rng.uniform(8, 80)
            level = _level(xs, ys, x)
            if level:
                assert level == [step_lookup(front, x)]
            elif x > xs[-1]:
                assert step_lookup(front, x) is None
    # every point is scattered: 5 + 5 raw points, plus the frontier markers
    offsets = sum(len(c.get_offsets()) for c in ax.collections)
    assert offsets == len(CUR) + len(BASE) + len(pareto_frontier(CUR)) + len(pareto_frontier(BASE))


def test_current_only_figure_has_no_baseline() -> None:
    pytest.importorskip("matplotlib")
    fig = build_figure(CUR, pareto_frontier(CUR), per_gpu=True)
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["current frontier"]
    assert "GPU" in ax.get_ylabel()
