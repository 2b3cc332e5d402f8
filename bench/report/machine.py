"""The page's "Machine" section: this machine's cores, memory, system and versions; and its load average, which
"Observed during the run" shows before and after."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def section() -> list[str]:
    return ["## Machine", "", *[f"- {fact}" for fact in machine_facts()], ""]


def machine_facts() -> list[str]:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), "?")
    memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return [
        f"{os.cpu_count()} cores visible, CPU model: {model}",
        f"{memory_kib / 1024 / 1024:.1f} GiB memory; {platform.system()} {platform.release()}",
        f"Python {platform.python_version()}; {_versions()}",
    ]


def load_average() -> str:
    return "/".join(f"{load:.2f}" for load in os.getloadavg())


def _versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{name} {version(name)}" for name in ("ray", "torch", "onnxruntime", "fastapi", "uvicorn", "httpx"))
