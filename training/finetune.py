"""Training loops for the text model: multi-label masked loss, a linear probe on frozen features, fine-tuning.

Labels come as a matrix Y (rows x categories) with a mask M: 1 where the label is known. Unknown fine labels
(a positive row whose source does not annotate that category) add nothing to the loss. Row weights W balance the
languages (a language's rows weigh in proportion to 1/sqrt(its row count)), so that Danish or Spanish are not
drowned by Turkish and Chinese.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F

from models.universal_sentence_encoder import pad_batch


def masked_bce(logits, y, m, w):
    loss = F.binary_cross_entropy_with_logits(logits, y, reduction="none") * m * w[:, None]
    return loss.sum() / (m * w[:, None]).sum().clamp_min(1e-6)


def language_weights(langs: list[str]) -> np.ndarray:
    counts = {lang: langs.count(lang) for lang in set(langs)}
    w = np.array([1.0 / math.sqrt(counts[lang]) for lang in langs])
    return w / w.mean()


def to_padded(tokens: list[list[int]], max_tokens: int, device):
    ids, lengths = pad_batch([t[:max_tokens] for t in tokens])
    return ids.to(device), lengths.to(device)


@torch.no_grad()
def embed(encoder, ids, lengths, batch=1024) -> torch.Tensor:
    encoder.eval()
    out = []
    for start in range(0, len(ids), batch):
        length = lengths[start:start + batch]
        out.append(encoder(ids[start:start + batch, :int(length.max())], length))
    return torch.cat(out)


def fit_linear(x, y, m, w, steps=400, lr=0.02, weight_decay=1e-4, seed=0) -> torch.nn.Linear:
    """Multi-label logistic regression on frozen features (full batch, Adam)."""
    torch.manual_seed(seed)
    x = x * 512 ** 0.5
    model = torch.nn.Linear(x.shape[1], y.shape[1]).to(x.device)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(steps):
        opt.zero_grad()
        masked_bce(model(x), y, m, w).backward()
        opt.step()
    return model


@torch.no_grad()
def predict_linear(model, x) -> np.ndarray:
    return torch.sigmoid(model(x * 512 ** 0.5)).cpu().numpy()


def finetune(classifier, ids, lengths, y, m, w, *, epochs, lr_encoder, lr_head, batch, seed, dev_score=None,
             log=print):
    """AdamW, linear warm-up then linear decay; embedding table frozen (it is a buffer, not a parameter).

    dev_score(classifier) -> float is called after each epoch; the best epoch's weights are kept.
    Returns (per-epoch dev scores, best epoch).
    """
    torch.manual_seed(seed)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    encoder_params = list(classifier.encoder.parameters())
    opt = torch.optim.AdamW([{"params": encoder_params, "lr": lr_encoder},
                             {"params": classifier.head.parameters(), "lr": lr_head}], weight_decay=0.01)
    steps_per_epoch = math.ceil(len(ids) / batch)
    total, warmup = epochs * steps_per_epoch, steps_per_epoch // 10
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, warmup)) * max(0.0, (total - s) / total))
    history, best, best_state = [], -1.0, None
    for epoch in range(epochs):
        classifier.train()
        started = time.time()
        order = torch.randperm(len(ids), generator=generator).to(ids.device)
        for start in range(0, len(ids), batch):
            rows = order[start:start + batch]
            length = lengths[rows]
            logits = classifier(ids[rows, :int(length.max())], length)
            loss = masked_bce(logits, y[rows], m[rows], w[rows])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(classifier.parameters(), 1.0)
            opt.step()
            schedule.step()
        classifier.eval()
        score = dev_score(classifier) if dev_score else float(epoch)
        history.append(score)
        log(f"  epoch {epoch + 1}/{epochs}: loss {loss.item():.4f}, dev {score:.4f}, {time.time() - started:.0f} s")
        if best_state is None or score > best:
            best = score
            best_state = {k: v.detach().clone() for k, v in classifier.state_dict().items()}
    classifier.load_state_dict(best_state)
    classifier.eval()
    return history, int(np.argmax(history)) + 1
