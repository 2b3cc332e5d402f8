"""The README's layout table, docs/architecture.md's and the rooms' opening lines agree, so a first guess holds.

A newcomer finds a rule's file from a room's name, the README's one-line row and the architecture page's longer row,
then the room's opening lines (its `__init__.py` docstring). Each room has a row in both tables; every file a row
names exists in that room; every room has opening lines; and a room with an index (its opening lines name files)
names all of its files, so that the index cannot fall behind the folder.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests")
NAMED_FILE = re.compile(r"`([\w/]+\.py)`")


def layout_rows(document: str) -> dict[str, str]:
    """{room: its row} of the document's layout table (rows whose first cell names rooms as `name/`)."""
    rows = {}
    for line in (ROOT / document).read_text().splitlines():
        if line.startswith("| `") and line.count("|") >= 3:
            for room in re.findall(r"`(\w+)/`", line.split("|")[1]):
                rows[room] = line
    return rows


def opening(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


def packages() -> list[Path]:
    """Every room and every folder of a room that is a package."""
    return sorted(init.parent for room in ROOMS for init in (ROOT / room).rglob("__init__.py"))


def room_files(room: str) -> set[str]:
    """Paths of the room's modules relative to the room, `__init__.py` files left out."""
    return {str(p.relative_to(ROOT / room)) for p in (ROOT / room).rglob("*.py") if p.name != "__init__.py"}


@pytest.mark.parametrize("document", ["README.md", "docs/architecture.md"])
def test_each_room_has_a_row_in_the_layout_table(document):
    assert [room for room in ROOMS if room not in layout_rows(document)] == []


def test_every_file_a_row_of_the_architecture_table_names_exists_in_its_room():
    missing = []
    for room, row in layout_rows("docs/architecture.md").items():
        files = room_files(room) if (ROOT / room).is_dir() else set()
        for name in NAMED_FILE.findall(row):
            if name not in files and not any(f.endswith("/" + name) for f in files) and not (ROOT / name).is_file():
                missing.append(f"{room}: {name}")
    assert missing == []


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_package_opens_with_an_index_of_its_modules_and_folders(package):
    """The opening lines name each module (`name.py`) and each sub-package (`name/`) directly in the folder; a
    sub-package's may instead be named, by their path in the room, in the room's own index (as bench/ does)."""
    room = ROOT / package.relative_to(ROOT).parts[0]
    text = opening(package)
    rooms_index = opening(room) if room != package else ""
    assert len(text.split()) >= 5, f"{package.relative_to(ROOT)}/__init__.py has no opening lines"
    parts = [p for p in package.glob("*.py") if p.name != "__init__.py"] + [p.parent for p in package.glob("*/__init__.py")]
    unnamed = [
        str(part.relative_to(ROOT)) for part in parts
        if f"`{part.name}{'/' if part.is_dir() else ''}`" not in text and str(part.relative_to(ROOT)) not in text
        and f"`{part.relative_to(room)}{'/' if part.is_dir() else ''}`" not in rooms_index
    ]  # fmt: skip
    assert sorted(unnamed) == []
