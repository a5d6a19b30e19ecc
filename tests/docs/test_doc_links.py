"""Every link in README.md and docs/*.md leads somewhere: a relative file or folder exists, and an `#anchor` names a
heading of its page (GitHub's anchors). Links to other sites are not fetched (no network here); they must at least be
https URLs."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)


def prose(text: str) -> str:
    """The page without code: links inside code blocks and code spans are examples, not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"[`*_]|<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found: set[str] = set(HTML_ANCHOR.findall(text))
    counts: dict[str, int] = {}
    for heading in HEADING.findall(text):
        base = slug(heading)
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(page: Path) -> list[str]:
    text = prose(page.read_text(encoding="utf-8"))
    return LINK.findall(text) + REFERENCE.findall(text)


def shown(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else path.name


def broken(page: Path, target: str) -> str | None:
    """Why `target` (a link on `page`) leads nowhere, or None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
        ok = target.startswith(("https://", "mailto:", "http://127.0.0.1", "http://localhost"))
        return None if ok else f"{target}: not an https link"
    path_part, _, anchor = target.partition("#")
    destination = (page.parent / unquote(path_part)).resolve() if path_part else page
    if not destination.exists():
        return f"{target}: {shown(destination)} does not exist"
    if anchor and destination.suffix == ".md" and unquote(anchor).lower() not in anchors(destination):
        return f"{target}: no heading #{anchor} in {shown(destination)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO_ROOT)) for p in PAGES])
def test_every_link_leads_somewhere(page: Path) -> None:
    problems = [problem for target in links(page) if (problem := broken(page, target))]
    assert problems == [], f"{page.relative_to(REPO_ROOT)}: broken links:\n" + "\n".join(problems)


def test_the_checker_finds_broken_links_and_anchors(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## The `make run` step (optional)\n")
    page.write_text(
        "# Title\n\n[ok](other.md#the-make-run-step-optional) [self](#title) [gone](missing.md) "
        "[bad anchor](other.md#nope) ![image](other.md)\n\n```\n[not a link](nowhere.md)\n```\n"
    )
    assert [broken(page, target) for target in links(page)] == [
        None, None, "missing.md: missing.md does not exist", "other.md#nope: no heading #nope in other.md", None,
    ]
