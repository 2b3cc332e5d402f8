"""Two fine-tuned second stages averaged into one (a "model soup"): whether averaging the weights of two trainings
carries their out-of-source strengths at no serving cost. An experiment kept as a record; its figures:
docs/text-model.md, "What more data, a soup and a third epoch did".

Why this shape: the two trainings started from different random adapters and heads, so averaging the A and B
matrices would mix unrelated subspaces. What is averaged is each weight's delta, s B A: the mean of two deltas is
the rank-2r adapter A = [A1; A2], B = [s1 B1, s2 B2] / 2 with scale 1, which `gemma_lora.merge_adapter` folds like
any other (the exported graph keeps the frozen model's shape and cost). The heads are averaged as they stand.

    python -m training.experiments.adapter_soup FIRST_DIR SECOND_DIR OUT_DIR

Each directory holds a `gemma-classifier-adapter.safetensors` and a `gemma-classifier.json` (as training/
gemma_classifier.py writes them). To measure the soup, OUT_DIR is a worktree's `models/weights/text`, and there
`training.embeddinggemma_setup`, `training.fit_classifier_blend` and `training.eval_gemma_classifier
--skip-functional` run as `make gemma-classifier` runs them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from training.gemma_classifier import ADAPTER_FILE, HEAD_FILE


def soup_adapters(first: dict, second: dict) -> dict:
    """The adapter whose delta on every matrix is the mean of the two adapters' deltas."""
    import torch

    out = {}
    for name in sorted({key.rsplit(".", 1)[0] for key in first}):
        s1, s2 = float(first[f"{name}.scale"][0]), float(second[f"{name}.scale"][0])
        out[f"{name}.a"] = torch.cat([first[f"{name}.a"], second[f"{name}.a"]], 0).contiguous()
        out[f"{name}.b"] = torch.cat([first[f"{name}.b"] * s1 / 2, second[f"{name}.b"] * s2 / 2], 1).contiguous()
        out[f"{name}.scale"] = torch.tensor([1.0])
    return out


def soup_heads(first: dict, second: dict) -> dict:
    document = dict(first)
    document["coef"] = [[round((a + b) / 2, 6) for a, b in zip(r1, r2)] for r1, r2 in zip(first["coef"], second["coef"])]
    document["bias"] = [round((a + b) / 2, 6) for a, b in zip(first["bias"], second["bias"])]
    document["rank"] = first["rank"] + second["rank"]
    document["soup_of"] = [first["adapter_sha256"], second["adapter_sha256"]]
    return document


def main(argv: list[str] | None = None) -> None:
    from safetensors.torch import load_file, save_file

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    adapter = soup_adapters(load_file(str(args.first / ADAPTER_FILE)), load_file(str(args.second / ADAPTER_FILE)))
    save_file(adapter, str(args.out / ADAPTER_FILE))
    heads = [json.loads((d / HEAD_FILE).read_text(encoding="utf-8")) for d in (args.first, args.second)]
    document = soup_heads(*heads)
    document["adapter_sha256"] = hashlib.sha256((args.out / ADAPTER_FILE).read_bytes()).hexdigest()
    (args.out / HEAD_FILE).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"wrote the soup of {args.first} and {args.second} into {args.out}")


if __name__ == "__main__":
    main()
