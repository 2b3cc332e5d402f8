"""The import layering of the top-level packages, so that it cannot silently rot.

Lower layers never import higher ones: `models` (the models) and `policy` (the rules: decisions, types, names) know
nothing of the service, nor does `adaptation` (each account's labels, correction and backtest: numpy only); `webhooks` (what a delivery is, how it is signed and sent, which URLs may be called) knows
no store; `store` (everything kept in Redis) builds on the rules; `moderation` (the flow) knows no HTTP and no Ray;
`serve_app` (the public HTTP app) knows no Ray and no process code; `admin` (the admin API) and `dashboard` (the
people's pages) sit side by side on it, and neither imports the other; `runtime` (settings, runner, embedded store,
the admin listener that joins admin and dashboard, CLI, webhook worker) starts the graph by its import path and never
imports it; `deployments` (Ray shells and the builder) sits on top. Tools (`bench`, `training`) may use the layers
they measure.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_BELOW_HTTP = {"moderation", "store", "webhooks", "models", "policy", "adaptation"}
ALLOWED: dict[str, set[str]] = {
    "models": set(),
    "policy": set(),
    "adaptation": set(),
    "webhooks": set(),
    "store": {"policy", "webhooks", "adaptation"},
    "moderation": {"models", "policy", "store", "adaptation"},
    "serve_app": _BELOW_HTTP,
    "admin": {"serve_app"} | _BELOW_HTTP,
    "dashboard": {"serve_app"} | _BELOW_HTTP,
    "runtime": {"admin", "dashboard", "serve_app"} | _BELOW_HTTP,
    "deployments": {"runtime", "admin", "dashboard", "serve_app"} | _BELOW_HTTP,
    "training": {"models", "adaptation"},
    "bench": {"runtime", "admin", "dashboard", "serve_app"} | _BELOW_HTTP,
}
# Third-party frameworks that only some layers may use.
FRAMEWORKS = {"ray": {"deployments", "runtime", "bench"}, "fastapi": {"serve_app", "admin", "dashboard"},
              "starlette": {"serve_app", "admin", "dashboard"}}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def source_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def arrows() -> set[tuple[str, str]]:
    """(importing package, imported top-level name) over all source files."""
    found = set()
    for package in ALLOWED:
        for path in source_files(package):
            for module in imported_modules(path):
                top = module.split(".")[0]
                if top != package:
                    found.add((package, top))
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_layers_below_it(package):
    wrong = sorted(top for source, top in arrows() if source == package and top in ALLOWED and top not in ALLOWED[package])
    assert not wrong, f"{package} must not import {wrong}"


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_frameworks_stay_in_their_layers(framework):
    users = sorted(source for source, top in arrows() if top == framework and source not in FRAMEWORKS[framework])
    assert not users, f"{framework} is imported by {users}"


def test_the_allowed_graph_has_no_cycle():
    visiting, done = set(), set()

    def visit(package: str) -> None:
        assert package not in visiting, f"import cycle through {package}"
        if package in done:
            return
        visiting.add(package)
        for lower in ALLOWED[package]:
            visit(lower)
        visiting.discard(package)
        done.add(package)

    for package in ALLOWED:
        visit(package)


def test_no_package_holds_a_quarter_of_the_source_lines():
    lines = {package: sum(len(p.read_text().splitlines()) for p in source_files(package)) for package in ALLOWED}
    total = sum(lines.values())
    largest = max(lines, key=lines.get)
    assert lines[largest] < total / 4, f"{largest} holds {lines[largest]} of {total} lines"


def test_every_source_package_is_in_the_layering():
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages - {"tests"} <= set(ALLOWED), sorted(packages - set(ALLOWED))
