"""The depth experiment (training/experiments/gemma_depth.py): the figures docs/text-model.md quotes are its kept
report's."""

from __future__ import annotations

import json

from training.experiments import gemma_depth
from training.text_data import REPO_ROOT


def test_the_depth_figures_quoted_in_the_docs_are_the_committed_reports():
    report = json.loads(gemma_depth.REPORT.read_text(encoding="utf-8"))
    doc = (REPO_ROOT / "docs" / "text-model.md").read_text(encoding="utf-8")
    doc = " ".join(doc.split())
    candidates = report["candidates"]
    assert f"served encoder scores {report['served_encoder']['macro_languages']:.3f}" in doc
    assert f"full blend {candidates['full int8 (24 layers)']['blend']:.3f}" in doc
    for depth in (2, 4, 6, 8, 12):
        assert f"{candidates[f'first {depth} layers']['blend']:.3f} ({depth}" in doc or \
            f"{candidates[f'first {depth} layers']['blend']:.3f} (k = {depth})" in doc
