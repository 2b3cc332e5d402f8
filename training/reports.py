"""Where the text model's figures are kept: `models/weights/text/reports/`, beside the served files and apart from
them. No loader reads them and the wheel leaves them out (pyproject.toml takes `weights/text/*.json` and `*.pt`
only); the scripts that write them (the index: training/__init__.py) and the model card read them from here."""

from __future__ import annotations

from models.text_toxicity import WEIGHTS_DIR

REPORTS_DIR = WEIGHTS_DIR / "reports"
MODEL_CARD = REPORTS_DIR / "model-card.md"
# The cascade's quality as served under load: written by bench/served_quality.py (`make served-quality`).
SERVED_QUALITY_REPORT = REPORTS_DIR / "served-quality.json"
