"""The training room's index (training/__init__.py) stays true: every file `models/weights/text/` serves is named
there with the scripts that write it and the make target that runs them, each script exists, each target is in the
Makefile, and every module of the room is named."""

from __future__ import annotations

import ast
import re

import pytest

from models.text_toxicity import WEIGHTS_DIR
from training.text_data import REPO_ROOT

TRAINING = REPO_ROOT / "training"
INDEX = ast.get_docstring(ast.parse((TRAINING / "__init__.py").read_text(encoding="utf-8"))) or ""
# "- `use-ft.pt`: `train_text.py`, `make train-text`": a served file, its scripts, its make target.
SERVED_LINE = re.compile(r"^- `([^`/]+\.(?:json|pt|safetensors))`: ((?:`[a-z_]+\.py`, )+)`make ([a-z-]+)`$", re.M)
SERVED = {m.group(1): (re.findall(r"`([a-z_]+\.py)`", m.group(2)), m.group(3)) for m in SERVED_LINE.finditer(INDEX)}
MAKE_TARGETS = set(re.findall(r"^([a-z][a-z-]*):", (REPO_ROOT / "Makefile").read_text(encoding="utf-8"), re.M))


def test_every_served_file_is_named_by_the_index():
    served = sorted(p.name for p in WEIGHTS_DIR.iterdir() if p.is_file())
    assert [name for name in served if name not in SERVED] == []


@pytest.mark.parametrize("name", sorted(SERVED))
def test_the_index_names_a_served_file_that_exists(name):
    assert (WEIGHTS_DIR / name).is_file()


@pytest.mark.parametrize("name", sorted(SERVED))
def test_each_served_files_scripts_exist_and_its_make_target_is_in_the_makefile(name):
    scripts, target = SERVED[name]
    assert [script for script in scripts if not (TRAINING / script).is_file()] == []
    assert target in MAKE_TARGETS


def test_every_make_target_the_index_names_is_in_the_makefile():
    assert sorted(set(re.findall(r"`make ([a-z-]+)`", INDEX)) - MAKE_TARGETS) == []


def test_every_module_of_the_room_is_named_by_the_index():
    modules = [p.name for p in TRAINING.glob("*.py") if p.name != "__init__.py"]
    modules += [f"{p.parent.name}/" for p in TRAINING.glob("*/__init__.py")]
    assert [name for name in modules if f"`{name}`" not in INDEX] == []


def test_every_experiment_is_named_by_the_index():
    experiments = sorted(p.name for p in (TRAINING / "experiments").glob("*.py") if p.name != "__init__.py")
    assert [name for name in experiments if f"`{name}`" not in INDEX] == []
