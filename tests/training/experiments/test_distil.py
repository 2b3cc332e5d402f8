"""The distillation experiment (training/experiments/distil.py): which windows it trains on with which labels, and that its
loss pulls the student towards the teacher's geometry."""

from __future__ import annotations

import argparse

import numpy as np
import torch

from models.text_toxicity import split_windows
from training import loso
from training.experiments import distil
from training.fit_gemma_blend import text_key
from training.text_data import REPO_ROOT, Comment

WINDOW = 40
LONG = "first sentence of a long text here. " + "a second part that is plain and long enough. " * 3


def _rows(comments, cached_texts):
    gemma = {text_key(t): np.ones(768, dtype=np.float16) for t in cached_texts}
    return distil.training_rows(comments, WINDOW, gemma)


def test_datasets_the_served_encoder_never_trained_on_stay_out():
    clean = loso.SERVED_TRAINING_EXCLUDES[0]
    comments = [Comment("you are an idiot", 1, "en", clean), Comment("you are an idiot", 1, "en", "davidson")]
    rows = _rows(comments, ["you are an idiot"])
    assert len(rows) == 1 and rows[0]["labels"][0] is True


def test_a_first_window_keeps_its_labels_and_a_later_one_only_a_benign_rows():
    toxic, benign = Comment(LONG, 1, "en", "davidson"), Comment(LONG + " ", 0, "en", "davidson")
    windows = split_windows(LONG, WINDOW)
    assert len(windows) >= 3
    rows = _rows([toxic, benign], windows[1:2])  # Gemma's cache holds one later window only
    by_owner = [rows[:2], rows[2:]]
    for owner, row_set in zip((toxic, benign), by_owner):
        first, later = row_set
        assert first["text"] == windows[0] and first["target"] is None
        assert first["labels"] == [owner.known(cat) for cat in distil.CATEGORIES]
        assert later["text"] == windows[1] and later["target"] is not None
    assert by_owner[0][1]["labels"] == [None] * len(distil.CATEGORIES)  # the insult may sit in another window
    assert by_owner[1][1]["labels"] == [False] * len(distil.CATEGORIES)  # every window of a benign text is benign


def test_training_moves_the_student_towards_the_teacher():
    torch.manual_seed(0)
    texts = [f"comment number {i} about the weather and trains" for i in range(48)]
    teacher = torch.nn.functional.normalize(torch.randn(768), dim=0).numpy()
    rows = [{"text": t, "lang": "en", "labels": [None] * len(distil.CATEGORIES), "target": teacher} for t in texts]
    student, projection = distil.build_student(), torch.nn.Linear(512, 768)
    args = argparse.Namespace(epochs=6, batch=16, lr_encoder=1e-4, lr_head=3e-4, distil_weight=1.0)

    def cosine() -> float:
        with torch.no_grad():
            ids, lengths = distil.to_padded(distil.tokenize(distil.load_tokenizer(), texts), 64, "cpu")
            out = projection(student.encoder(ids, lengths))
        return float(torch.nn.functional.cosine_similarity(out, torch.from_numpy(teacher)[None]).mean())

    before = cosine()
    distil.train(student, projection, rows, args, print)
    assert cosine() > before + 0.3


def test_the_distillation_figures_quoted_in_the_docs_are_the_committed_report():
    import json

    runs = json.loads(distil.REPORT.read_text(encoding="utf-8"))["runs"]
    lines = (REPO_ROOT / "docs" / "text-model.md").read_text(encoding="utf-8").splitlines()
    rows = {line.split("|")[1].strip(): line for line in map(str.strip, lines) if line.startswith("| ")}
    for name, key in (("served encoder", ("student", "served")), ("control", ("control", "student")),
                      ("student", ("student", "student")), ("strong", ("strong", "student"))):
        figures = runs[key[0]][key[1]]
        blend = runs[key[0]][f"{key[1]}_blend"]
        assert f"| {figures['macro_languages']:.3f} | {figures['macro_clean']:.3f} |" in rows[name]
        assert rows[name].endswith(f"| {blend['macro_languages']:.3f} |")
