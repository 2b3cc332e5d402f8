"""The moderation flow: what happens to a valid request, free of HTTP and of Ray. It builds on `models`, `policy`,
`store` and `adaptation` only (tests/test_layering.py); the public routes call it and answer its errors.

- `flow.py`: the steps every moderation request takes, one item or a batch: charge its quota units, score, decide,
  queue a `review` decision, and refund the units if the request then fails.
- `items.py`: a request's items, built for the flow: each one what its model takes, scored for the profile's
  categories.
- `limits.py`: what one request may ask for (the plan's scope, its texts, batches, a threshold override), checked
  before any quota unit is taken; the rule's home.
- `model_gates.py`: each model's gate in front of the flow: a few calls at once, the rest waiting by account in
  turn, the excess refused early. Not a request's admission, which is the store's quota step (store/keys/quota.py).
- `hash_matching.py`: the hash-bank match that blocks a rejected image's re-upload, its step in the flow, and each
  replica's packed copy of the account's bank.
- `text_correction.py`: the account's live correction applied to a text's served score (the correction's home, its
  fit included: adaptation/correction.py).
- `site_adaptation.py`: each site's own line from its labels: the correction's refits (on demand and in the
  background) and a profile's threshold backtest, with their store reads and writes.
- `label_evidence.py`: what a queued or reported text keeps to become a label of its account (never the text).
- `compat_mapping.py`: how this service's categories answer the OpenAI moderation and Perspective APIs.
- `perspective_scale.py`: the text scores mapped onto Perspective's scale (the share of raters its clients cut at),
  per attribute, SEVERE_TOXICITY's composition included (docs/perspective-scale.md).
- `model_messages.py`: how large one request's message to the text model can grow, so its transport can be checked.
- `errors.py`: why the flow refuses or fails a request, as plain exceptions (serve_app/errors.py makes the answers).
- `backends.py`: what the flow needs from the models and the policy, whoever runs them (the protocol);
  `local_backends.py`: those backends in this process, the real models without Ray (tests, benchmarks, tools).
"""
