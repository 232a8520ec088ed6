"""Render a PR report as GitHub would: Markdown + Mermaid in a headless browser, to a PNG.

Why: the report is read in a browser, not as text. A chart whose line is invisible, two
colours that look alike or a misaligned table only show once rendered. This script makes a
real report — a sweep recorded as the baseline on the embedded simulator, then the same
sweep against a 20 % slower one (a regression, with the engine's ``/metrics`` in the "why"
block) — converts it with ``marked`` (GitHub-flavoured Markdown), draws its Mermaid charts
with ``mermaid`` and screenshots the page with a headless Chromium. Look at the PNG.

    python bench/render_report.py                         # writes goodput-report.png (about 40 s)
    python bench/render_report.py --markdown goodput.md   # render an existing report instead

Needs ``node``/``npm`` (the two packages are installed into ``--scratch``, default
``.goodput/render``, never into the project) and a Chromium (``apt-get install chromium``
on Debian/Ubuntu, or pass ``--chromium PATH``). It prints the files it wrote and the time
each step took.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_goodput.engines.engine import simulator
from pytest_goodput.judge.judge import Policy
from pytest_goodput.report.md.markdown import render_markdown
from pytest_goodput.run.gating import TestGate
from pytest_goodput.run.runner import measure
from pytest_goodput.schema.scenario.spec import build_spec

NPM_PACKAGES = ("mermaid@11", "marked@15")
SWEEP = {"scenario": "sweep", "sweep": [1, 4, 16], "duration_s": 3.0, "isl": 128, "osl": 64,
         "ttft_ms": 450.0, "tpot_ms": 80.0}
NODEID = "example_suite/test_serving.py::test_frontier"

#: Page CSS close to GitHub's Markdown rendering: bordered tables, zebra rows, system font.
CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; font-size: 14px;
       max-width: 1100px; margin: 24px auto; color: #1f2328; line-height: 1.5; }
table { border-collapse: collapse; margin: 12px 0; display: block; overflow: auto; }
th, td { border: 1px solid #d0d7de; padding: 6px 13px; }
tr:nth-child(2n) { background: #f6f8fa; }
code { background: #eff1f3; padding: 0.2em 0.4em; border-radius: 6px; font-size: 85%; }
pre { background: #f6f8fa; padding: 16px; overflow: auto; }
details { margin: 8px 0; }
"""


def valid_measure(spec, engine, tries: int = 3):
    """Measure until the client kept up (as the plugin re-measures an invalid run): a busy
    machine must not turn the picture into an "invalid run" one."""
    for _ in range(tries - 1):
        m = measure(spec, engine)
        if all(r.client.valid for r in m.results):
            return m
        print("client set the pace; measuring again:", "; ".join(r for x in m.results for r in x.client.reasons))
    return measure(spec, engine)


def make_report(seconds: dict[str, float]) -> str:
    """A sweep baseline on the simulator, the same sweep 20 % slower, and its report."""
    spec = build_spec(SWEEP)
    with tempfile.TemporaryDirectory() as tmp:
        base_dir = Path(tmp)
        t0 = time.perf_counter()
        with simulator() as eng:
            m = valid_measure(spec, eng)
            TestGate(NODEID, spec, eng, baseline_dir=base_dir, policy=Policy(compare=False, update=True)).finish([m])
        seconds["baseline sweep"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        with simulator(slowdown=1.2) as slow:
            m = valid_measure(spec, slow)
            outcome = TestGate(NODEID, spec, slow, baseline_dir=base_dir, policy=Policy()).finish([m])
        seconds["slower sweep"] = time.perf_counter() - t0
    return render_markdown([outcome], title="pytest-goodput report (rendered by bench/render_report.py)")


def ensure_packages(scratch: Path) -> None:
    """``marked`` and ``mermaid`` in ``scratch/node_modules`` (installed once)."""
    if (scratch / "node_modules/mermaid/dist/mermaid.min.js").exists() and \
            (scratch / "node_modules/marked/lib/marked.umd.js").exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("npm not found: install Node.js (it brings npm), then run this again")
    scratch.mkdir(parents=True, exist_ok=True)
    subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(scratch), *NPM_PACKAGES],
                   check=True)


def html_page(markdown: str, scratch: Path) -> str:
    """The report as a page: marked converts it, mermaid draws each ```mermaid block."""
    mods = (scratch / "node_modules").resolve().as_uri()
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>{CSS}</style>
<script src="{mods}/marked/lib/marked.umd.js"></script>
<script src="{mods}/mermaid/dist/mermaid.min.js"></script></head>
<body><div id="report"></div><script>
const md = {json.dumps(markdown)};
const renderer = new marked.Renderer();
const code = renderer.code.bind(renderer);
renderer.code = (tok) => tok.lang === 'mermaid'
  ? '<pre class="mermaid">' + tok.text.replace(/</g, '&lt;') + '</pre>' : code(tok);
document.getElementById('report').innerHTML = marked.parse(md, {{gfm: true, renderer}});
mermaid.initialize({{startOnLoad: false, securityLevel: 'strict'}});
mermaid.run({{querySelector: '.mermaid'}}).then(() => document.title = 'rendered',
  (e) => {{ document.title = 'mermaid failed'; document.body.prepend('MERMAID ERROR: ' + e); }});
</script></body></html>"""


def screenshot(chromium: str, page: Path, png: Path, width: int, height: int) -> None:
    subprocess.run([
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--allow-file-access-from-files", f"--window-size={width},{height}",
        "--virtual-time-budget=15000", f"--screenshot={png.resolve()}", page.resolve().as_uri(),
    ], check=True, capture_output=True, timeout=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", type=Path, help="render this report instead of making one")
    ap.add_argument("--out", type=Path, default=Path("goodput-report.png"))
    ap.add_argument("--scratch", type=Path, default=Path(".goodput/render"),
                    help="where marked and mermaid are installed (not part of the project)")
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser")
                    or shutil.which("google-chrome"))
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--height", type=int, default=3200)
    args = ap.parse_args()
    if not args.chromium:
        sys.exit("no Chromium found: apt-get install chromium (or pass --chromium PATH)")
    seconds: dict[str, float] = {}
    text = args.markdown.read_text(encoding="utf-8") if args.markdown else make_report(seconds)
    ensure_packages(args.scratch)
    md_path, page = args.out.with_suffix(".md"), args.out.with_suffix(".html")
    md_path.write_text(text, encoding="utf-8")
    page.write_text(html_page(text, args.scratch), encoding="utf-8")
    t0 = time.perf_counter()
    screenshot(args.chromium, page, args.out, args.width, args.height)
    seconds["render"] = time.perf_counter() - t0
    for step, s in seconds.items():
        print(f"{step}: {s:.1f} s")
    print(f"wrote {md_path}, {page} and {args.out}")


if __name__ == "__main__":
    main()
