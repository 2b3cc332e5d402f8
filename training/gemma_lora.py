"""Low-rank adapters (LoRA) on EmbeddingGemma's top layers: what the second-stage classifier trains, and how its
trained adapter is folded back into the weights before export.

Why by hand: it is a few lines (W x + s B A x, B starting at zero, so training starts from the frozen model), and
`peft` would add accelerate and a lock's worth of packages for them. The adapter file holds, per adapted matrix,
A (rank x in) and B (out x rank) and the scale; `merge_adapter` adds s B A to each weight, so the exported model has
the frozen model's shape and cost exactly.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

# Every matrix of a decoder layer: attention's four and the MLP's three.
ADAPTED = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class LoRALinear(torch.nn.Module):
    def __init__(self, base: torch.nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base = base
        for parameter in base.parameters():
            parameter.requires_grad_(False)
        self.a = torch.nn.Parameter(torch.empty(rank, base.in_features))
        self.b = torch.nn.Parameter(torch.zeros(base.out_features, rank))
        torch.nn.init.kaiming_uniform_(self.a, a=math.sqrt(5))
        self.scale = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + (x @ self.a.T @ self.b.T) * self.scale


def add_lora(layers: torch.nn.ModuleList, first_layer: int, rank: int, alpha: float) -> dict[str, LoRALinear]:
    """Wrap every ADAPTED matrix of `layers` (the model's layers from `first_layer` on); returns them by their
    name in the full model (`layers.<i>.self_attn.q_proj`)."""
    adapters = {}
    for offset, layer in enumerate(layers):
        for block_name in ("self_attn", "mlp"):
            block = getattr(layer, block_name)
            for name in ADAPTED:
                if hasattr(block, name):
                    wrapped = LoRALinear(getattr(block, name), rank, alpha)
                    setattr(block, name, wrapped)
                    adapters[f"layers.{first_layer + offset}.{block_name}.{name}"] = wrapped
    return adapters


def adapter_tensors(adapters: dict[str, LoRALinear]) -> dict[str, torch.Tensor]:
    """What the adapter file stores: `<name>.a`, `<name>.b` and `<name>.scale` per adapted matrix."""
    out = {}
    for name, module in adapters.items():
        out[f"{name}.a"] = module.a.detach().contiguous().clone()
        out[f"{name}.b"] = module.b.detach().contiguous().clone()
        out[f"{name}.scale"] = torch.tensor([module.scale])
    return out


class NormedOutput(torch.nn.Module):
    """A decoder layer whose output goes through the model's final RMSNorm (the same module, so the same weights).

    Why: the classifier's cached states are what transformers returns as the input to the first trained layer when
    the model is cut there, and a cut model's last hidden state has its final norm applied. So the top layers were
    trained on normed states, and the served graph must give them normed states too (without it their input is the
    raw residual stream, up to 10^5 in size, and the trained layers read nonsense: dev macro ROC AUC 0.64 instead of
    0.82, measured). One more RMSNorm per text: no measurable cost."""

    def __init__(self, layer: torch.nn.Module, norm: torch.nn.Module):
        super().__init__()
        self.layer, self.norm = layer, norm

    def forward(self, *args, **kwargs):
        return self.norm(self.layer(*args, **kwargs))


def norm_before(model: torch.nn.Module, first_trained_layer: int) -> None:
    """Put the model's final norm after the last frozen layer, as the classifier was trained (NormedOutput)."""
    model.layers[first_trained_layer - 1] = NormedOutput(model.layers[first_trained_layer - 1], model.norm)


@torch.no_grad()
def merge_adapter(model: torch.nn.Module, path: Path) -> int:
    """Add each stored s B A to its weight of `model` (a transformers Gemma3TextModel); returns how many."""
    from safetensors.torch import load_file

    tensors = load_file(str(path))
    names = sorted({key.rsplit(".", 1)[0] for key in tensors})
    for name in names:
        linear = model.get_submodule(name)
        delta = tensors[f"{name}.b"].float() @ tensors[f"{name}.a"].float() * float(tensors[f"{name}.scale"][0])
        if delta.shape != linear.weight.shape:
            raise ValueError(f"adapter {name}: {tuple(delta.shape)} does not fit {tuple(linear.weight.shape)}")
        linear.weight += delta
    return len(names)
