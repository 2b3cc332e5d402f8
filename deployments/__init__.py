"""The Ray Serve graph: thin shells over the layers below, the handles between them, and the builder that composes
them. It sits on top and may import every other layer (tests/test_layering.py); nothing imports it, `runtime/`
starts it by the import path in serve_config.yaml.

- `builder.py`: the application builder serve_config.yaml names; composition happens here and only here, and the
  settings are read once, here.
- The shells: `ingress.py` (ModerationIngress, serve_app's FastAPI app as the HTTP entry point), `image_model.py`
  (ImageModel: decoding and image scoring, batched), `image_text_model.py` (ImageTextModel: the words on an image
  read, for the profiles that enable `text_toxic`), `text_model.py` (TextModel: text scoring in two lanes, short and
  long), `gemma_model.py` (GemmaModel: the text cascade's second stage as a deployment of its own) and `policy.py`
  (Policy: the decision table as a deployment, and the same decisions made in the calling process).
- What the shells share: `model_shell.py` (what ImageModel and TextModel share: the model set, the batch queue,
  `reconfigure`), `batching.py` (batch size and wait from `user_config`, tunable without a redeploy), `threads.py`
  (one compute thread per replica; the second stage's at a lower priority) and `handles.py` (the ingress's model
  backends as calls to the deployments' handles; an upload inline or by reference, by its size).
- `metrics.py`: the service's own Prometheus metrics, defined in one place and recorded only from these shells.
"""
