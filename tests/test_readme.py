"""The documents stay true: every error code and every setting of the code is documented in the table where it
lives (docs/api.md, docs/configuration.md), and every relative link of README.md, docs/*.md and SECURITY.md leads
to a file that exists and, for an `#anchor` into our own markdown, to a heading there (GitHub's slugs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.error_kinds import every_error_kind
from runtime.settings import PROJECT_ROOT, Settings

# Where each table lives: the errors in the API reference, the settings in the configuration page.
ERROR_TABLE_DOC = (PROJECT_ROOT / "docs" / "api.md").read_text()
ENVIRONMENT_TABLE_DOC = (PROJECT_ROOT / "docs" / "configuration.md").read_text()
# The documents whose links must resolve.
LINKED_DOCS = [PROJECT_ROOT / "README.md", PROJECT_ROOT / "SECURITY.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]


def test_every_error_code_is_in_the_error_table():
    answers = {(kind.status, kind.code) for kind in every_error_kind()}
    assert sorted((status, code) for status, code in answers if f"| {status} | `{code}` |" not in ERROR_TABLE_DOC) == []


def test_every_setting_is_in_the_environment_table():
    names = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names.append(alias if isinstance(alias, str) else f"MODERATION_{name.upper()}")
    assert [name for name in names if f"`{name}`" not in ENVIRONMENT_TABLE_DOC] == []


FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _prose(text: str) -> str:
    """The markdown without its fenced code blocks (a `#` or `[x](y)` inside them is neither heading nor link)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link text kept, lower case, punctuation dropped, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a markdown file, with GitHub's -1, -2 suffixes for repeated ones."""
    seen: dict[str, int] = {}
    result = set()
    for match in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", _prose(path.read_text()), re.M):
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto: ...: not ours to check
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path.resolve()
        if not linked.exists() or PROJECT_ROOT.resolve() not in (linked, *linked.parents):
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    return broken


@pytest.mark.parametrize("path", LINKED_DOCS, ids=lambda path: str(path.relative_to(PROJECT_ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(path):
    assert broken_links(path) == []


def test_the_slugs_are_githubs():
    assert slug("`POST /v1/moderate`: score an image") == "post-v1moderate-score-an-image"
    assert slug("`GET /v1/review/{id}`: review item status") == "get-v1reviewid-review-item-status"
    assert slug("Keys, plans, profiles and limits") == "keys-plans-profiles-and-limits"
    assert slug("Performance: where the time goes and the levers") == "performance-where-the-time-goes-and-the-levers"


def test_the_text_models_evaluation_block_lives_in_its_page():
    """training/eval_text.py rewrites what lies between these markers in docs/text-model.md, and nowhere else."""
    page = (PROJECT_ROOT / "docs" / "text-model.md").read_text()
    start, end = "<!-- eval-text:start -->", "<!-- eval-text:end -->"
    assert page.count(start) == page.count(end) == 1 and page.index(start) < page.index(end)
    assert start not in (PROJECT_ROOT / "README.md").read_text()
