"""Resident memory of processes, read from /proc (Linux only; no psutil needed).

RSS counts shared pages (libraries, Ray's object store) in every process that maps them, so a sum of RSS
over-counts; PSS splits each shared page between its users, so a sum of PSS is the honest total.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KIB_PER_MIB = 1024


@dataclass(frozen=True)
class ProcessMemory:
    pid: int
    title: str  # the command line; Ray workers carry the actor's name there (e.g. "ray::ServeReplica:...")
    rss_mib: float
    pss_mib: float


def process_memory(pid: int) -> ProcessMemory:
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        fields[name.rstrip(":")] = int(value)
    title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    return ProcessMemory(pid, title, fields.get("Rss", 0) / KIB_PER_MIB, fields.get("Pss", 0) / KIB_PER_MIB)


def descendants(root: int | None = None) -> list[int]:
    """Every live process below `root` (default: this one): what this run started, and nothing else."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return sorted(found)


def memory_of_descendants() -> list[ProcessMemory]:
    result = []
    for pid in descendants():
        try:
            result.append(process_memory(pid))
        except OSError:
            continue
    return result
