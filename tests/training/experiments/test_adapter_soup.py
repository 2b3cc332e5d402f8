"""The soup of two fine-tuned second stages (training/experiments/adapter_soup.py): the adapter it writes folds into
the mean of the two adapters' weight deltas, whatever their ranks and scales, and the head is the mean head."""

from __future__ import annotations

import torch

from training.experiments.adapter_soup import soup_adapters, soup_heads


def _delta(tensors: dict, name: str) -> torch.Tensor:
    return tensors[f"{name}.b"] @ tensors[f"{name}.a"] * float(tensors[f"{name}.scale"][0])


def _adapter(rank: int, scale: float, generator: torch.Generator) -> dict:
    name = "layers.20.mlp.up_proj"
    return {f"{name}.a": torch.randn(rank, 6, generator=generator),
            f"{name}.b": torch.randn(5, rank, generator=generator),
            f"{name}.scale": torch.tensor([scale])}


def test_the_soup_folds_into_the_mean_of_the_two_deltas():
    generator = torch.Generator().manual_seed(0)
    first, second = _adapter(4, 2.0, generator), _adapter(3, 0.5, generator)
    soup = soup_adapters(first, second)
    name = "layers.20.mlp.up_proj"
    expected = (_delta(first, name) + _delta(second, name)) / 2
    assert torch.allclose(_delta(soup, name), expected, atol=1e-5)
    assert not torch.allclose(_delta(soup, name), _delta(first, name), atol=1e-3)
    assert soup[f"{name}.a"].shape == (7, 6)


def test_the_soup_head_is_the_mean_head_and_names_both_trainings():
    first = {"coef": [[1.0, -2.0]], "bias": [0.5], "rank": 16, "adapter_sha256": "aa"}
    second = {"coef": [[3.0, 0.0]], "bias": [-0.5], "rank": 16, "adapter_sha256": "bb"}
    head = soup_heads(first, second)
    assert head["coef"] == [[2.0, -1.0]] and head["bias"] == [0.0]
    assert head["rank"] == 32 and head["soup_of"] == ["aa", "bb"]
