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


def _heading_text(inline) -> str:  # type: ignore[no-untyped-def]
    """A heading's text as GitHub renders it (code spans and emphasis by their content)."""
    return "".join(t.content for t in (inline.children or []) if t.type in ("text", "code_inline"))


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading suffixed -1, -2..."""
    tokens = MarkdownIt("commonmark").parse(text)
    seen: dict[str, int] = {}
    out = set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        slug = re.sub(r"[^\w\- ]", "", _heading_text(tokens[i + 1]).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    """Each relative link of ``page`` whose file or heading anchor does not exist."""
    text = page.read_text(encoding="utf-8")
    problems = []
    for token in MarkdownIt("commonmark").parse(text):
        for child in token.children or []:
            href = child.attrGet("href") if child.type == "link_open" else None
            if not href or re.match(r"[a-z]+:", href):
                continue
            target, _, anchor = str(href).partition("#")
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                problems.append(f"{page.relative_to(ROOT)}: {href}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path.read_text(encoding="utf-8")):
                problems.append(f"{page.relative_to(ROOT)}: {href}: no such heading")
    return problems


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_its_file_and_heading(page: Path) -> None:
    """A link to a page or a section of it arrives: the "Full data" links of the figures page
    into the archive, the README's links into the guide."""
    assert broken_links(page) == []


def test_anchors_follow_githubs_rule() -> None:
    page = "# A `cli` run: 2× faster (2026-12-04)\n\n## Notes\n\n## Notes\n"
    assert anchors(page) == {"a-cli-run-2-faster-2026-12-04", "notes", "notes-1"}
