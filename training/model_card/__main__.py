"""`python -m training.model_card --cascade` / `--classifier` / `--site`: rewrite sections of the card in place."""

from __future__ import annotations

import argparse

from training.model_card.cascade import splice_cascade
from training.model_card.classifier import splice_classifier
from training.model_card.site import splice_site
from training.reports import MODEL_CARD


def main() -> None:
    """`python -m training.model_card --cascade` / `--site`: rewrite only the card's cascade section (and headline) or
    its site section from the reports, without the evaluation `make eval-text` runs (whose kept figures the rest of
    the card comes from)."""
    parser = argparse.ArgumentParser(prog="python -m training.model_card")
    parser.add_argument("--cascade", action="store_true")
    parser.add_argument("--classifier", action="store_true")
    parser.add_argument("--site", action="store_true")
    args = parser.parse_args()
    sections = [k for k in ("cascade", "classifier", "site") if getattr(args, k)]
    if not sections:
        parser.error("say which sections to rewrite: --cascade, --classifier, --site")
    card = MODEL_CARD.read_text(encoding="utf-8")
    card = splice_cascade(card) if args.cascade else card
    card = splice_classifier(card) if args.classifier else card
    card = splice_site(card) if args.site else card
    MODEL_CARD.write_text(card, encoding="utf-8")
    print(f"rewrote the {' and '.join(sections)} section of {MODEL_CARD}")


if __name__ == "__main__":
    main()
