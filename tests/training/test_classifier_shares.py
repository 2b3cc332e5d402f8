"""The band's shares for the fine-tuned second stage (training/classifier_shares.py) and the sampled corpus of
Perspective's scale refit (training/perspective_scale.py): the rules, on small made-up inputs."""

from __future__ import annotations

import json

import pytest

from training.classifier_shares import chosen_share, one_share


def test_the_share_is_the_smallest_within_the_tolerance_of_every_text_sent_on():
    aucs = {"0.0": 0.70, "0.3": 0.74, "0.5": 0.795, "0.7": 0.80, "1.0": 0.80}
    assert chosen_share(aucs, tolerance=0.01) == 0.5
    assert chosen_share(aucs, tolerance=0.0) == 0.7


def test_a_language_the_second_stage_does_not_help_sends_nothing_on():
    assert chosen_share({"0.0": 0.81, "0.5": 0.80, "1.0": 0.805}, tolerance=0.01) == 0.0


def test_one_share_bounds_the_macro_over_languages_not_each_language():
    by_share = {"en": {"0.0": 0.80, "0.5": 0.85, "1.0": 0.85}, "hi": {"0.0": 0.60, "0.5": 0.62, "1.0": 0.66}}
    # each language alone would take 0.5 for en and 1.0 for hi; the macro (0.70, 0.735, 0.755) takes 1.0
    assert chosen_share(by_share["en"], tolerance=0.01) == 0.5
    assert one_share(by_share, tolerance=0.01) == 1.0
    assert one_share(by_share, tolerance=0.03) == 0.5


def test_the_served_default_routes_texts_told_no_decision_at_the_chosen_one_share():
    from models.text_cascade import SHARES_FILE
    from models.text_toxicity import DEFAULT_WEIGHTS
    from training.served_cascade import served_share, served_text_version

    document = json.loads(DEFAULT_WEIGHTS.with_name(SHARES_FILE).read_text())
    assert document["one_share"] == one_share(document["held_out_auc_by_share"])
    assert served_share(served_text_version()) == document["one_share"]


def test_the_shipped_shares_keep_the_chosen_languages_and_name_their_version():
    from models.text_cascade import SHARES_FILE, CascadeRouting
    from models.text_toxicity import DEFAULT_WEIGHTS

    document = json.loads(DEFAULT_WEIGHTS.with_name(SHARES_FILE).read_text())
    routing = CascadeRouting(document["default"], document["languages"])
    assert document["tag"] == routing.tag
    for language, aucs in document.get("held_out_auc_by_share", {}).items():
        assert document["languages"][language] == chosen_share(aucs)


def test_the_sampled_corpus_keeps_every_convabuse_row_and_caps_the_others(tmp_path):
    from training.perspective_scale import load_train_corpus
    from training.text_data import split_of

    rows = [{"text": f"comment number {i}", "label": 0, "lang": "en", "source": source}
            for i, source in enumerate(["convabuse(cercas-curry-2021)-train"] * 30 + ["davidson2017"] * 60)]
    rows = [r for r in rows if split_of(r["text"]) == "train"]
    (tmp_path / "en.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept = load_train_corpus(tmp_path, per_dataset=5)
    convabuse = [r for r in rows if r["source"].startswith("convabuse")]
    assert sum(r["source"].startswith("convabuse") for r in kept) == len(convabuse)
    assert sum(r["source"] == "davidson2017" for r in kept) == 5
    assert load_train_corpus(tmp_path, per_dataset=5) == kept  # deterministic
    assert len(load_train_corpus(tmp_path)) == len(rows)


def _fake_scores(texts):  # a stand-in for the served path's columns, inside this unit test only
    import numpy as np

    return {"usem3_toxic": np.array([float(len(t)) for t in texts]), "encoder": np.array("e"),
            "embedding": np.array([[len(t)] * 2 for t in texts], dtype=np.float16)}


def test_parts_scored_apart_are_put_back_in_row_order():
    from training.perspective_scale import _merge_parts

    texts = ["a" * n for n in range(1, 8)]
    out = _merge_parts([_fake_scores(texts[i::3]) for i in range(3)], len(texts), 3)
    assert out["usem3_toxic"].tolist() == [float(n) for n in range(1, 8)]
    assert out["embedding"][:, 0].tolist() == list(range(1, 8)) and str(out["encoder"]) == "e"


def test_parts_of_two_encoders_are_refused():
    import numpy as np

    from training.perspective_scale import _merge_parts

    other = {**_fake_scores(["b"]), "encoder": np.array("f")}
    with pytest.raises(RuntimeError, match="several encoders"):
        _merge_parts([_fake_scores(["a"]), other], 2, 2)
