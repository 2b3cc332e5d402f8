"""The cascade's share per language for the fine-tuned second stage (`cascade-shares.json`), chosen out of source.

The band sends on the texts nearest even odds that hold a share of a language's dev comments; under the registry's
`cl<hash>` entries, Perspective's requests (no thresholds of ours) route by it alone. training/loso_cascade.py chose the shares for the frozen blend (English,
Arabic and Chinese 0: it added nothing there). For the classifier the same rule is applied to what it never trained
on: training/eval_gemma_classifier.py replays the held-out sources at every share (`cascade_auc_by_share`), and
each language with held-out comments gets the smallest share whose toxic ROC AUC is within TOLERANCE of sending
every text on. A language without held-out comments for the classifier keeps the share it had, and says so.

That table is a lever (the registry's `cl<hash>` entries), not the default. Each language's choice rests on one
held-out source (two for English), and a choice made per language on one source's estimate is noise: on the
functional suite, which no routing choice saw, the per-language shares scored a macro ROC AUC of 0.820 where every
text sent on scored 0.852 through the same Perspective scale (Hindi 0.635 against 0.754, English 0.837 against
0.924). The rule as the cascade issue states it is one bound on the macro: `one_share` is the smallest share whose
macro over the held-out languages is within TOLERANCE of every text sent on. The default serves it for every text
its caller is told no decision on (Perspective's scores; serve_config.yaml's `-c<share>dr<hash>` version, which
tests/training/test_classifier_shares.py holds to it).

    python -m training.classifier_shares        # after `eval_gemma_classifier --name finetuned`; seconds
"""

from __future__ import annotations

import json

from models.text_cascade import SHARES_FILE, CascadeRouting
from training.eval_gemma_classifier import REPORT, WEIGHTS_DIR

TOLERANCE = 0.005  # the cascade issue's own bound: macro ROC AUC within 0.005 of the second stage on every text


def chosen_share(auc_by_share: dict[str, float], tolerance: float = TOLERANCE) -> float:
    """The smallest share whose AUC is within `tolerance` of share 1's."""
    every = auc_by_share["1.0"]
    return min(float(share) for share, auc in auc_by_share.items() if auc >= every - tolerance)


def one_share(by_share: dict[str, dict[str, float]], tolerance: float = TOLERANCE) -> float:
    """The smallest share whose macro ROC AUC over the languages of `by_share` is within `tolerance` of share 1's."""
    shares = next(iter(by_share.values())).keys()
    macro = {share: sum(aucs[share] for aucs in by_share.values()) / len(by_share) for share in shares}
    return chosen_share(macro, tolerance)


def main() -> None:
    path = WEIGHTS_DIR / SHARES_FILE
    before = json.loads(path.read_text(encoding="utf-8"))
    by_share = json.loads(REPORT.read_text(encoding="utf-8"))["finetuned"]["held_out"]["cascade_auc_by_share"]
    languages = dict(before["languages"])
    chosen = {language: chosen_share(aucs) for language, aucs in by_share.items()}
    languages.update(chosen)
    routing = CascadeRouting(float(before["default"]), languages)
    document = {
        "model_version": before["model_version"], "default": routing.default,
        "languages": dict(sorted(languages.items())), "tag": routing.tag,
        "source": (f"training/classifier_shares.py: languages {sorted(chosen)} chosen on the held-out sources of the "
                   f"fine-tuned second stage (the smallest share within {TOLERANCE} ROC AUC of every text sent on); "
                   f"{sorted(set(languages) - set(chosen))} and the default kept from training/loso_cascade.py"),
        "held_out_auc_by_share": by_share,
        "one_share": one_share(by_share),
        "one_share_source": (f"the smallest share whose macro ROC AUC over {sorted(by_share)} is within {TOLERANCE} "
                             "of every text sent on; the default's share for texts told no decision"),
    }
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"shares {document['languages']} ({routing.tag}); one share {document['one_share']}")


if __name__ == "__main__":
    main()
