"""bench/'s opening lines are its index: every module of bench/, in any folder, has a line of its own there (a
package by its folder), and every path the index names exists. Every module outside `experiments/` is part of
`make bench`'s run (reached by imports from bench/run.py), and that run imports no experiment."""

from __future__ import annotations

import ast
import re
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent.parent / "bench"
EXPERIMENTS = "experiments/"


def _index() -> list[str]:
    """The paths the index names, one per `- `path`: ...` line, in order."""
    opening = ast.get_docstring(ast.parse((BENCH / "__init__.py").read_text())) or ""
    return re.findall(r"^- `([^`]+)`:", opening, flags=re.MULTILINE)


def _modules() -> list[str]:
    """Every module of bench/ as the index names it: its path below bench/, a package's `__init__.py` by its folder."""
    paths = sorted(path.relative_to(BENCH) for path in BENCH.rglob("*.py") if path != BENCH / "__init__.py")
    return [f"{path.parent}/" if path.name == "__init__.py" else str(path) for path in paths]


def test_the_index_names_every_module_of_bench_on_a_line_of_its_own():
    named = _index()
    assert [module for module in _modules() if named.count(module) != 1] == []


def test_every_path_the_index_names_exists():
    assert [path for path in _index() if not (BENCH / path).exists()] == []


def _module_path(dotted: str) -> Path | None:
    parts = dotted.split(".")[1:]
    if not parts:
        return None
    candidates = (BENCH.joinpath(*parts).with_suffix(".py"), BENCH.joinpath(*parts, "__init__.py"))
    return next((candidate for candidate in candidates if candidate.exists()), None)


def _bench_imports(path: Path) -> set[Path]:
    """The modules of bench/ that `path` imports, anywhere in it (a function's own imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            dotted = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found |= {module for name in dotted if name.split(".")[0] == "bench" and (module := _module_path(name))}
    return found


def _reached_from_run() -> set[str]:
    reached, todo = set(), [BENCH / "run.py"]
    while todo:
        path = todo.pop()
        if path not in reached:
            reached.add(path)
            todo.extend(_bench_imports(path))
    return {str(path.relative_to(BENCH)) for path in reached}


def test_every_module_outside_experiments_is_part_of_the_run_and_the_run_imports_no_experiment():
    modules = {str(path.relative_to(BENCH)) for path in BENCH.rglob("*.py") if path != BENCH / "__init__.py"}
    reached = _reached_from_run()
    assert sorted(m for m in modules - reached if not m.startswith(EXPERIMENTS)) == []
    assert sorted(m for m in reached if m.startswith(EXPERIMENTS)) == []
