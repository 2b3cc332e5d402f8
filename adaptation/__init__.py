"""Each account's own line, learned from its moderators' decisions: pure logic, numpy only (no Ray, no HTTP, no Redis).

- `labels.py`: a kept label (what a refit needs of a decided text: the served encoder's embedding, the served score,
  the label, how it was seen and how likely that was), and its stored form.
- `correction.py`: the per-account correction of the served score (a residual on the embedding, fitted on the
  account's labels weighted by how they came to be seen) and the cross-validated check that lets it go live; the
  correction's home, whose opening lines name every part of it, fitted here and applied in moderation/.
- `backtest.py`: a profile's estimated recall and benign-flagged share at its thresholds on the account's labels,
  and the thresholds that would meet a target benign-flagged share.
"""
