"""Every documentation page renders as written: no code fence left open or closed by the wrong line.

A stray fence line on GitHub turns the rest of a page (options tables, headings) into one code
block; the README sends users to those pages, so a broken one is a broken product. Pages are
parsed as CommonMark (markdown-it-py, the parser GitHub's rendering follows for fences).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parent.parent

#: A line that opens a fence: up to three spaces, three or more backticks or tildes, then text.
FENCE_OPENER = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*\S")


def doc_pages() -> list[Path]:
    """The pages a user reads: the README, the changelog and everything under docs/."""
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def fence_problems(text: str, name: str) -> list[str]:
    """Each fence that is never closed, or that swallows a fence meant to open a new block."""
    lines = text.splitlines()
    problems = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type != "fence" or token.map is None:
            continue
        start, end = token.map
        marker = token.markup
        closing = re.compile(r"[\s>]*" + re.escape(marker[0]) + "{%d,}\\s*" % len(marker))
        closed = end - 1 > start and bool(closing.fullmatch(lines[end - 1]))
        if not closed:
            problems.append(f"{name}:{start + 1}: the fence opened here is never closed")
        for offset, line in enumerate(lines[start + 1:end - 1 if closed else end]):
            inner = FENCE_OPENER.match(line)
            if inner and inner.group(1)[0] == marker[0] and len(inner.group(1)) >= len(marker):
                problems.append(
                    f"{name}:{start + 1}: the fence opened here swallows the fence at line "
                    f"{start + 2 + offset} ({line.strip()!r}): one fence line too many or "
                    "too few above it"
                )
                break
    return problems


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fence_opens_and_closes_where_written(page: Path) -> None:
    """The page's fences pair up as its author meant: none open to the end, none swallow."""
    assert fence_problems(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT))) == []


def test_a_stray_fence_is_named_with_its_file_and_line() -> None:
    """The check finds the two ways a fence breaks a page, and says where."""
    stray = "# T\n\n```bash\nls\n```\n\n```\n\n## Options\n\n```bash\npytest\n```\n"
    assert fence_problems(stray, "page.md") == [
        "page.md:7: the fence opened here swallows the fence at line 11 ('```bash'): "
        "one fence line too many or too few above it"
    ]
    unclosed = "# T\n\n```python\nx = 1\n"
    assert fence_problems(unclosed, "page.md") == [
        "page.md:3: the fence opened here is never closed"
    ]
    nested = "````markdown\n```python\nx = 1\n```\n````\n"
    assert fence_problems(nested, "page.md") == []
