"""The house rules of the service's code, so that they cannot silently rot.

- A function is short enough to read at once: at most MAX_FUNCTION_LINES lines of body.
- A documented limit has one home. The numbers README states (the 4,096-character field limit, the batch of 100
  texts within 10 times the plan's characters, the 10 / 30 / 60 s time limits) are written once, in the module that
  owns them; anywhere else the code imports the name. A second definition of one of them fails here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICE_PACKAGES = (
    "models", "policy", "webhooks", "store", "moderation", "serve_app", "admin", "dashboard", "runtime", "deployments",
)  # fmt: skip
# The tools' entry points are read by newcomers too: the function-length rule holds for them.
TOOL_PACKAGES = ("training", "bench")
MAX_FUNCTION_LINES = 60


def service_files(packages: tuple[str, ...] = SERVICE_PACKAGES) -> Iterator[tuple[str, ast.Module]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), filename=str(path))


def test_no_function_is_over_sixty_lines():
    long = [
        f"{where}:{node.lineno} {node.name} ({node.end_lineno - node.body[0].lineno + 1} lines)"
        for where, tree in service_files(SERVICE_PACKAGES + TOOL_PACKAGES)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.body[0].lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


# Each documented limit: its home, and the places its literal would be a second definition of it.
HOMES = {
    "field characters (4,096)": "policy/types.py",
    "batch items (100)": "moderation/limits.py",
    "batch text factor (10)": "moderation/limits.py",
    "time limits (10 / 30 / 60 s)": "serve_app/deadlines.py",
}


# The documented time limits (docs/configuration.md: Environment variables): 10, 30, 60 and 30 s by default.
TIME_LIMITS = ("body_idle_timeout_s", "body_timeout_s", "request_timeout_s", "inference_timeout_s")


def _number(node: ast.AST | None) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    return None


def _names(node: ast.AST) -> str:
    """Every identifier in `node`, lower-cased and joined: what a limit's literal is bound to or compared with."""
    words = []
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            words.append(inner.id)
        elif isinstance(inner, ast.Attribute):
            words.append(inner.attr)
        elif isinstance(inner, ast.arg | ast.keyword) and inner.arg:
            words.append(inner.arg)
    return " ".join(words).lower()


def _default_of(value: ast.AST | None) -> ast.AST | None:
    """The number a name is bound to: the value itself, or a `Field(default=...)`'s default."""
    if isinstance(value, ast.Call):
        return next((k.value for k in value.keywords if k.arg == "default" and _number(k.value) is not None), None)
    return value


def _bindings(tree: ast.Module) -> Iterator[tuple[ast.AST, str, float]]:
    """(node, the names around it, the number) for each number bound to a name, a parameter, a keyword, a dict key
    or compared with something: where a limit is defined or enforced (not, say, an index or a log format)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and _number(_default_of(node.value)) is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            yield node, " ".join(_names(t) for t in targets), _number(_default_of(node.value))
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            pairs = [*zip(positional[len(positional) - len(node.defaults):], node.defaults),
                     *zip(node.kwonlyargs, node.kw_defaults)]  # fmt: skip
            for arg, default in pairs:
                if _number(default) is not None:
                    yield default, arg.arg.lower(), _number(default)
        elif isinstance(node, ast.keyword) and node.arg and _number(node.value) is not None:
            yield node, node.arg.lower(), _number(node.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and _number(value) is not None:
                    yield value, key.value.lower(), _number(value)
        elif isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if _number(side) is not None:
                    yield side, _names(node), _number(side)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                if _number(side) is not None:
                    yield side, _names(other), _number(side)


def _limit_of(names: str, number: float) -> str | None:
    """Which documented limit a number bound to `names` defines, if any."""
    if number == 4096 and any(word in names for word in ("char", "field", "reference", "url", "len")):
        return "field characters (4,096)"
    if number == 100 and any(word in names for word in ("batch", "items", "texts", "len")):
        return "batch items (100)"
    if number == 10 and any(word in names for word in ("batch", "text_max_chars", "text_limits")):
        return "batch text factor (10)"
    if number in (10, 30, 60) and any(name in names for name in TIME_LIMITS):
        return "time limits (10 / 30 / 60 s)"
    return None


def test_each_documented_limit_is_defined_in_its_home_only():
    strays = sorted(
        f"{where}:{node.lineno} {limit}: {number!r} bound to {names!r}"
        for where, tree in service_files()
        for node, names, number in _bindings(tree)
        if (limit := _limit_of(names, number)) is not None and HOMES[limit] != where
    )
    assert strays == []


def test_the_checks_find_a_second_definition():
    second = ast.parse(
        "MAX_REFERENCE_CHARS = 4096\n"
        "schema = {'maxItems': 100}\n"
        "if len(texts) > 100: pass\n"
        "total = 10 * plan.text_max_chars\n"
        "def connect(inference_timeout_s: float = 30.0): pass\n"
        "class Settings:\n    request_timeout_s: float = 60.0\n    body_timeout_s: float = Field(default=30, gt=0)\n"
    )
    found = [_limit_of(names, number) for _, names, number in _bindings(second)]
    assert sorted(limit for limit in found if limit) == sorted([
        "field characters (4,096)", "batch items (100)", "batch items (100)", "batch text factor (10)",
        "time limits (10 / 30 / 60 s)", "time limits (10 / 30 / 60 s)", "time limits (10 / 30 / 60 s)",
    ])  # fmt: skip
    unrelated = ast.parse(
        "LATENCY_BUCKETS_MS = [10, 100]\ndef page(limit: int = 100): pass\nwindow_s = 60\n"
        "def start(timeout_s: float = 10): pass\nMAX_FAILURES = 10\nname = str(model)[:100]\n"
    )
    assert [_limit_of(names, number) for _, names, number in _bindings(unrelated) if _limit_of(names, number)] == []
