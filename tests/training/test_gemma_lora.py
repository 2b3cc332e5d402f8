"""The classifier's low-rank adapters (training/gemma_lora.py): they start as the frozen model, train only their own
numbers, and merged into the weights give what the adapted model gave (so the export is the trained model)."""

from __future__ import annotations

import pytest
import torch

from training.gemma_lora import LoRALinear, adapter_tensors, add_lora, merge_adapter


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = torch.nn.Linear(6, 4, bias=False)
        self.down_proj = torch.nn.Linear(6, 6, bias=False)


class _Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = _Block()
        self.mlp = _Block()

    def forward(self, x):
        return self.mlp.down_proj(x) + torch.nn.functional.pad(self.self_attn.q_proj(x), (0, 2))


class _Model(torch.nn.Module):
    def __init__(self, layers: int = 3):
        super().__init__()
        self.layers = torch.nn.ModuleList(_Layer() for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_an_adapter_starts_as_the_frozen_matrix_and_trains_only_its_own_numbers():
    torch.manual_seed(0)
    base = torch.nn.Linear(5, 3, bias=False)
    adapted = LoRALinear(base, rank=2, alpha=4)
    x = torch.randn(7, 5)
    assert torch.equal(adapted(x), base(x))  # B starts at zero
    assert [name for name, p in adapted.named_parameters() if p.requires_grad] == ["a", "b"]


def test_only_the_top_layers_are_wrapped_and_named_as_in_the_full_model():
    model = _Model()
    adapters = add_lora(model.layers[1:], 1, rank=2, alpha=4)
    assert sorted(adapters) == sorted(f"layers.{i}.{block}.{name}" for i in (1, 2)
                                      for block in ("self_attn", "mlp") for name in ("q_proj", "down_proj"))
    assert isinstance(model.layers[0].mlp.q_proj, torch.nn.Linear)  # the bottom layer is untouched


def test_the_merged_weights_give_what_the_trained_adapters_gave(tmp_path):
    from safetensors.torch import save_file

    torch.manual_seed(1)
    trained, plain = _Model(), _Model()
    plain.load_state_dict(trained.state_dict())
    adapters = add_lora(trained.layers[1:], 1, rank=2, alpha=4)
    for module in adapters.values():  # as if trained: B away from zero
        torch.nn.init.normal_(module.b)
    x = torch.randn(4, 6)
    expected = trained(x)
    assert not torch.allclose(expected, plain(x))
    save_file(adapter_tensors(adapters), str(tmp_path / "adapter.safetensors"))
    assert merge_adapter(plain, tmp_path / "adapter.safetensors") == len(adapters)
    assert torch.allclose(plain(x), expected, atol=1e-5)


def test_an_adapter_that_does_not_fit_the_weights_is_refused(tmp_path):
    from safetensors.torch import save_file

    save_file({"layers.0.mlp.q_proj.a": torch.zeros(2, 5), "layers.0.mlp.q_proj.b": torch.zeros(4, 2),
               "layers.0.mlp.q_proj.scale": torch.tensor([1.0])}, str(tmp_path / "adapter.safetensors"))
    with pytest.raises(ValueError, match="does not fit"):
        merge_adapter(_Model(), tmp_path / "adapter.safetensors")
