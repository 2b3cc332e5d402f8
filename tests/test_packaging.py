"""A regular (non-editable) install carries every room of the service and its served weights.

`make install` installs the project editable, which finds any folder of the checkout whether or not
pyproject.toml lists it: a room left out of `packages.find` (as `adaptation/` once was) passed every other test and
broke only a real wheel. This builds the wheel from a copy of the tracked files, installs it into a folder of its
own, and imports every module of every room from there, with the editable finder and the checkout off the path.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
TOOLS = {"tests", "training", "bench"}  # run from a checkout, never installed


def service_rooms() -> set[str]:
    return {p.parent.name for p in ROOT.glob("*/__init__.py")} - TOOLS


# Run in a fresh interpreter: drops the editable install's finder and the checkout from the path, then imports every
# module of each room and reports where each was found.
IMPORT_EVERY_MODULE = """
import importlib, json, pkgutil, sys
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in type(f).__module__]
sys.path[:] = [p for p in sys.path if p not in ("", {root!r})]
found = {{}}
for room in {rooms!r}:
    package = importlib.import_module(room)
    found[room] = package.__file__
    for module in pkgutil.walk_packages(package.__path__, room + "."):
        found[module.name] = importlib.import_module(module.name).__file__
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from a copy of the tracked files, installed non-editable into a folder of its own."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
    for name in tracked:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(source)],
                   check=True, capture_output=True)  # fmt: skip
    (wheel,) = (work / "dist").glob("*.whl")
    target = work / "site"
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)], check=True,
                   capture_output=True)  # fmt: skip
    return target


def test_pyproject_lists_every_room():
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(service_rooms() - {name.rstrip("*") for name in listed}) == []


def test_a_regular_install_imports_every_module_of_every_room_from_the_wheel(installed):
    rooms = sorted(service_rooms())
    code = IMPORT_EVERY_MODULE.format(root=str(ROOT), rooms=rooms)
    run = subprocess.run([sys.executable, "-c", code], cwd=installed.parent, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(installed), "RAY_USAGE_STATS_ENABLED": "0"}, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.splitlines()[-1])
    assert sorted(set(rooms) - set(found)) == []
    assert sorted(name for name, path in found.items() if not path.startswith(str(installed))) == []
    # Every module of the checkout's rooms went into the wheel.
    in_checkout = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for room in rooms for p in (ROOT / room).rglob("*.py")
    }  # fmt: skip
    assert sorted(in_checkout - set(found)) == []


def test_the_wheel_carries_the_weights_the_registry_serves(installed):
    registry = yaml.safe_load((ROOT / "config" / "models.yaml").read_text())
    entries = registry["models"] if isinstance(registry, dict) and "models" in registry else registry
    named = {entry["weights"] for entry in entries if isinstance(entry, dict) and entry.get("weights")}
    assert named, "config/models.yaml names no weights file"
    assert sorted(name for name in named if not (installed / name).is_file()) == []
    # Every served file beside them (calibration, side heads, thresholds, the cascade's tables), and no report.
    text = Path("models") / "weights" / "text"
    served = sorted(p.name for p in (ROOT / text).iterdir() if p.is_file())
    assert sorted(p.name for p in (installed / text).iterdir()) == served
