"""Local Hugging Face directories as models, with tiny random-weight models each test run builds itself."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from PIL import Image
from transformers import (
    BertForSequenceClassification,
    BertTokenizer,
    ViTConfig,
    ViTForImageClassification,
    ViTImageProcessorPil,
)

from support.tiny_models import SPECIAL_TOKENS, TINY, WINDOW, tiny_bert

from models.hf_loader import TransformersImageModel, TransformersTextModel
from models.registry import UnknownModel, find_entry, load_model

@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="module")
def vit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("vit")
    config = ViTConfig(
        image_size=32,
        patch_size=8,
        id2label={0: "normal", 1: "nsfw"},
        label2id={"normal": 0, "nsfw": 1},
        **TINY,
    )
    ViTForImageClassification(config).save_pretrained(directory)
    ViTImageProcessorPil(size={"height": 32, "width": 32}).save_pretrained(directory)
    return directory


def reference_probabilities(directory: Path, input_ids: list[int]) -> torch.Tensor:
    """A plain forward pass over one window of token ids, outside the code under test."""
    model = BertForSequenceClassification.from_pretrained(directory, local_files_only=True).eval()
    with torch.inference_mode():
        return model(input_ids=torch.tensor([input_ids])).logits[0]


def token_ids(directory: Path, text: str) -> list[int]:
    return BertTokenizer.from_pretrained(directory, local_files_only=True)(text, add_special_tokens=False)["input_ids"]


def with_specials(ids: list[int]) -> list[int]:
    return [SPECIAL_TOKENS.index("[CLS]"), *ids, SPECIAL_TOKENS.index("[SEP]")]


def test_text_model_loads_offline_and_reports_mapped_categories(bert_dir: Path) -> None:
    model = TransformersTextModel.load(str(bert_dir), labels={"toxic": ["toxic"]})

    (scores,) = model.predict(["you are very rude"])

    assert set(scores) == {"toxic"}
    assert 0.0 <= scores["toxic"] <= 1.0


def test_single_label_category_sums_the_softmax_of_its_labels(bert_dir: Path) -> None:
    model = TransformersTextModel.load(
        str(bert_dir), labels={"toxic": ["toxic"], "clean": ["non-toxic"], "either": ["toxic", "non-toxic"]}
    )
    logits = reference_probabilities(bert_dir, with_specials(token_ids(bert_dir, "the cat is kind")))
    expected = logits.softmax(dim=-1)

    (scores,) = model.predict(["the cat is kind"])

    assert scores["toxic"] == pytest.approx(float(expected[1]), abs=1e-6)
    assert scores["clean"] == pytest.approx(float(expected[0]), abs=1e-6)
    assert scores["either"] == pytest.approx(1.0, abs=1e-6)


def test_multi_label_model_uses_one_sigmoid_per_label(tmp_path: Path) -> None:
    directory = tiny_bert(tmp_path, problem_type="multi_label_classification")
    model = TransformersTextModel.load(str(directory), labels={"toxic": ["toxic"], "either": ["toxic", "non-toxic"]})
    expected = reference_probabilities(directory, with_specials(token_ids(directory, "hate"))).sigmoid()

    (scores,) = model.predict(["hate"])

    assert scores["toxic"] == pytest.approx(float(expected[1]), abs=1e-6)
    assert scores["either"] == pytest.approx(float(expected.sum()), abs=1e-6)


def test_text_batches_score_like_single_texts(bert_dir: Path) -> None:
    texts = ["you are rude", "", "the dog is very very nice", "hate " * 30, "love"]
    model = TransformersTextModel.load(str(bert_dir), labels={"toxic": ["toxic"]}, batch_size=2)

    batched = model.predict(texts)

    assert len(batched) == len(texts)
    for text, scores in zip(texts, batched):
        assert scores["toxic"] == pytest.approx(model.predict([text])[0]["toxic"], abs=1e-5)


def test_long_text_scores_its_worst_window(bert_dir: Path) -> None:
    text = " ".join(["the cat is kind"] * 5 + ["you are very rude and bad"] * 4)
    ids = token_ids(bert_dir, text)
    # Windows of 16 tokens ([CLS] + 14 + [SEP]) overlapping by 16 // 4 = 4 tokens.
    windows, start = [], 0
    while True:
        windows.append(ids[start : start + WINDOW - 2])
        if start + WINDOW - 2 >= len(ids):
            break
        start += WINDOW - 2 - WINDOW // 4
    window_scores = [float(reference_probabilities(bert_dir, with_specials(w)).softmax(-1)[1]) for w in windows]
    model = TransformersTextModel.load(str(bert_dir), labels={"toxic": ["toxic"]})

    (scores,) = model.predict([text])

    assert len(windows) > 2
    assert max(window_scores) > window_scores[0]  # the check would miss truncation otherwise
    assert scores["toxic"] == pytest.approx(max(window_scores), abs=1e-6)


def test_max_length_option_narrows_the_window(bert_dir: Path) -> None:
    text = "the cat is kind and the dog is nice"
    ids = token_ids(bert_dir, text)
    model = TransformersTextModel.load(str(bert_dir), labels={"toxic": ["toxic"]}, max_length=len(ids) + 2)

    (scores,) = model.predict([text])

    expected = reference_probabilities(bert_dir, with_specials(ids)).softmax(-1)[1]
    assert scores["toxic"] == pytest.approx(float(expected), abs=1e-6)


def test_mapped_label_missing_from_the_model_fails_at_load(bert_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"'toxicity'.*labels, from config.id2label: \['non-toxic', 'toxic'\]"):
        TransformersTextModel.load(str(bert_dir), labels={"toxic": ["toxicity"]})


def test_weights_must_be_a_local_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="local model directory"):
        TransformersTextModel.load(str(tmp_path / "absent"), labels={"toxic": ["toxic"]})


def frames() -> list[Image.Image]:
    """Frames of different sizes and modes: the processor resizes them, the model converts them to RGB."""
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (240, 200, 180), (10, 10, 10)]
    coloured = [Image.new("RGB", (40 + 7 * i, 30), colour) for i, colour in enumerate(colours)]
    return [*coloured, Image.new("L", (32, 32), 128)]


def test_image_model_scores_mapped_labels_and_derives_safe(vit_dir: Path) -> None:
    model = TransformersImageModel.load(str(vit_dir), labels={"nsfw": ["nsfw"]})
    frame = frames()[3]
    processor = ViTImageProcessorPil.from_pretrained(vit_dir, local_files_only=True)
    reference = ViTForImageClassification.from_pretrained(vit_dir, local_files_only=True).eval()
    with torch.inference_mode():
        logits = reference(pixel_values=processor(images=[frame], return_tensors="pt")["pixel_values"]).logits[0]

    (scores,) = model.predict([frame])

    assert set(scores) == {"nsfw", "safe"}
    assert scores["nsfw"] == pytest.approx(float(logits.softmax(-1)[1]), abs=1e-6)
    assert scores["safe"] == pytest.approx(1.0 - scores["nsfw"], abs=1e-9)


def test_image_model_keeps_a_mapped_safe_category(vit_dir: Path) -> None:
    model = TransformersImageModel.load(str(vit_dir), labels={"nsfw": ["nsfw"], "safe": ["normal"], "any": ["nsfw"]})

    (scores,) = model.predict([frames()[0]])

    assert set(scores) == {"nsfw", "safe", "any"}


def test_image_batches_score_like_single_frames(vit_dir: Path) -> None:
    model = TransformersImageModel.load(str(vit_dir), labels={"nsfw": ["nsfw"]}, batch_size=4)

    batched = model.predict(frames())

    assert len(batched) == len(frames())
    for frame, scores in zip(frames(), batched):
        assert scores == pytest.approx(model.predict([frame])[0], abs=1e-6)


def test_registry_entry_loads_a_transformers_text_model(bert_dir: Path, tmp_path: Path) -> None:
    registry = tmp_path / "models.yaml"
    entry = {
        "task": "text.toxic",
        "version": "tiny-bert-test-1",
        "loader": "transformers_text",
        "weights": str(bert_dir),
        "options": {"labels": {"toxic": ["toxic"]}},
    }
    registry.write_text(yaml.safe_dump({"models": [entry]}))

    found = find_entry("text.toxic", "tiny-bert-test-1", registry)
    (scores,) = load_model(found).predict(["you are rude"])

    assert found.version == "tiny-bert-test-1"
    assert set(scores) == {"toxic"}
    with pytest.raises(UnknownModel):
        find_entry("text.toxic", "tiny-bert-test-2", registry)
