"""How a site's queue labels its history (training/label_walk.py): every flagged row, audits of the allowed ones at
their rate, reports of the unaudited misses only; the halves and the replay every site simulation shares."""

from __future__ import annotations

import numpy as np

from training import label_walk


def _site(n: int = 600, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    harmful = rng.random(n) < 0.3
    flagged = harmful & (rng.random(n) < 0.6) | (rng.random(n) < 0.05)
    return flagged, harmful


def test_every_flagged_row_is_labelled_allowed_ones_are_audited_and_only_unaudited_misses_reported():
    flagged, harmful = _site()
    history = np.arange(400)
    walked = label_walk.walk(flagged, harmful, history, 10_000, np.random.default_rng(1))
    assert walked.taken == 400
    seen = dict(zip(walked.rows, zip(walked.seen, walked.rates)))
    assert {i for i, (how, _) in seen.items() if how == "flagged"} == {int(i) for i in history if flagged[i]}
    assert all(rate == 1.0 for how, rate in seen.values() if how == "flagged")
    assert all(rate == label_walk.AUDIT_RATE for how, rate in seen.values() if how == "audit")
    assert all(harmful[i] and not flagged[i] and rate == 1.0 for i, (how, rate) in seen.items() if how == "report")
    allowed = int((~flagged[history]).sum())
    assert 0.04 * allowed < walked.seen.count("audit") < 0.2 * allowed


def test_the_walk_stops_at_n_labels_and_says_where_each_was_taken():
    flagged, harmful = _site()
    walked = label_walk.walk(flagged, harmful, np.arange(600), 50, np.random.default_rng(2))
    assert len(walked.rows) == 50 and walked.taken < 600 and walked.at[-1] == walked.taken
    assert walked.at == sorted(walked.at) and all(int(np.arange(600)[at - 1]) == row
                                                  for row, at in zip(walked.rows, walked.at))


def test_the_halves_split_a_sites_shuffled_rows_in_two():
    rows = np.arange(11) * 3
    history, future = label_walk.halves(rows, seed=4)
    assert len(history) == 5 and sorted(np.r_[history, future].tolist()) == rows.tolist()
    assert (history == label_walk.halves(rows, seed=4)[0]).all()


def test_a_site_short_of_n_labels_does_not_count_for_that_n():
    flagged, harmful = _site(n=200)
    sites = {"a": np.arange(100), "b": np.arange(100, 200)}

    def site_run(history, future, n, seed):
        walked = label_walk.walk(flagged, harmful, history, n, label_walk.walk_rng(seed))
        return {"labels": len(walked.rows)} if len(walked.rows) == n else None

    done = []
    runs = label_walk.replay(sites, 2, (5, 10_000), site_run, lambda name, rows, seconds: done.append(name))
    assert runs[10_000] == {} and {name: len(r) for name, r in runs[5].items()} == {"a": 2, "b": 2}
    assert done == ["a", "b"]
