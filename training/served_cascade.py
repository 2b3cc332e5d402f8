"""The text cascade that serve_config.yaml serves, loaded in process: what the training scripts measure "as served".

The scripts that score through the served path (Perspective's scale, the functional suite) read the routing from the
shipped config and the registry entry it names, so a change of the default's routing is measured without editing
each script.
"""

from __future__ import annotations

import re

import yaml

from models.registry import find_entry
from training.text_data import REPO_ROOT

SERVE_CONFIG = REPO_ROOT / "serve_config.yaml"


def served_text_version(config_text: str | None = None) -> str:
    """The `text.toxic` version of serve_config.yaml (or of `config_text`)."""
    config = yaml.safe_load(config_text if config_text is not None else SERVE_CONFIG.read_text(encoding="utf-8"))
    versions = [str(deployment["user_config"]["models"]["text.toxic"])
                for app in config["applications"] for deployment in app["deployments"]
                if "text.toxic" in deployment.get("user_config", {}).get("models", {})]
    if len(versions) != 1:
        raise ValueError(f"serve_config.yaml names text.toxic {len(versions)} times, not once")
    return versions[0]


def served_first_stage(threads: int = 1):
    """The served default's first stage (models.text_cascade.CascadeFirstStage), built from its registry entry."""
    from models.text_cascade import CascadeFirstStage

    entry = find_entry("text.toxic", served_text_version())
    if entry.loader != "use_cascade":
        raise ValueError(f"serve_config.yaml serves {entry.version}, not a text cascade")
    return CascadeFirstStage.load(entry.weights_path(), threads=threads, **entry.options)


def served_share(version: str) -> float | None:
    """The one share of every language in a cascade version (`...-c100dr<hash>gb<hash>`: 1.0), None for shares per
    language (`-cl<hash>`) or no cascade."""
    found = re.search(r"-c(\d+)(?:dr[0-9a-f]+)?gb[0-9a-f]+$", version)
    return int(found.group(1)) / 100 if found else None
