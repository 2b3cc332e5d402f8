"""The README's curl examples work as written against the running graph."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from runtime.settings import PROJECT_ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")]


def bash_block(section: str) -> str:
    """The first bash block after the heading `section`, without its `export` lines (the test sets them)."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    block = re.search(re.escape(section) + r".*?```bash\n(.*?)```", readme, re.S).group(1)
    return "\n".join(line for line in block.splitlines() if not line.startswith("export "))


def curl_commands(section: str) -> list[str]:
    """The one-command curl lines (continuations joined) of the section's bash block."""
    joined = bash_block(section).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip().startswith("curl ")]


def run(command: str, env: dict) -> tuple[int, dict]:
    answer = subprocess.run(
        command.replace("curl ", "curl -w '\\n%{http_code}' ", 1),
        shell=True, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    body, _, status = answer.stdout.rpartition("\n")
    return int(status), json.loads(body)


def test_quick_start_examples(serve_graph, new_key):
    key = new_key()["Authorization"].split()[1]
    env = {**os.environ, "KEY": key, "BASE": serve_graph["base_url"]}
    commands = curl_commands("## Quick start")
    assert len(commands) == 5
    answers = [run(command, env) for command in commands]
    statuses = [status for status, _ in answers]
    assert statuses[:4] == [200, 200, 200, 200]
    assert answers[1][1]["decision"] == "allow" and answers[2][1]["decision"] == "block"
    assert statuses[4] in (200, 404)  # review item 1 exists only if this account made it


def test_admin_profile_example(serve_graph, admin):
    token = admin["Authorization"].split()[1]
    command = bash_block("## Admin API and CLI").replace("http://127.0.0.1:8001", serve_graph["admin_url"])
    status, profile = run(command, {**os.environ, "MODERATION_ADMIN_TOKEN": token})
    assert status == 200 and profile["categories"]["weapon"]["enabled"] is True
