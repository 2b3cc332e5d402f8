"""The text model card (`models/weights/text/reports/model-card.md`) and the evaluation block of docs/text-model.md,
from the figures `training/eval_text.py` measured and the reports the other scripts keep. One module a section, in
the card's order:

- `header.py`: the title and the headline bullets;
- `data.py`: "Data", the sources and their licences;
- `evaluation.py`: "Evaluation on the real held-out test split", with leave-one-source-out from `out_of_source.py`
  (and its "Candidate encoders" from `candidates.py`);
- `comparison.py`: "Model comparison", EmbeddingGemma measured here;
- `cascade.py`: "Cascade: quality against cost", and the served-default headline;
- `classifier.py`: "Fine-tuned second stage", the functional suite and the held-out sources;
- `site.py`: "Learning each site's line";
- `closing.py`: thresholds, side heads, the hand-written rule tests, known weaknesses.

`docs_block.py` writes the docs block, `numbers.py` how a figure is printed; `python -m training.model_card
--cascade` / `--classifier` / `--site` (`__main__.py`) rewrites one section of the kept card from the reports.
"""

from __future__ import annotations

from training.model_card.cascade import cascade_section
from training.model_card.classifier import classifier_section
from training.model_card.closing import closing_sections
from training.model_card.comparison import comparison_section
from training.model_card.data import data_section
from training.model_card.docs_block import evaluation_block
from training.model_card.evaluation import evaluation_section
from training.model_card.header import header
from training.model_card.site import site_section

__all__ = ["evaluation_block", "render"]


def render(model, thresholds, report, figures) -> str:
    """The card, section by section."""
    return (header(model, report, figures) + data_section(report) + evaluation_section(thresholds, report, figures)
            + comparison_section(report, figures) + cascade_section() + classifier_section()
            + site_section()
            + closing_sections(thresholds, figures))
