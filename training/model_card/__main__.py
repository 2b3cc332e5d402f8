"""`python -m training.model_card --cascade` / `--site`: rewrite one section of the card in place."""

from __future__ import annotations

import argparse

from training.model_card.cascade import splice_cascade
from training.model_card.site import splice_site
from training.reports import MODEL_CARD


def main() -> None:
    """`python -m training.model_card --cascade` / `--site`: rewrite only the card's cascade section (and headline) or
    its site section from the reports, without the evaluation `make eval-text` runs (whose kept figures the rest of
    the card comes from)."""
    parser = argparse.ArgumentParser(prog="python -m training.model_card")
    parser.add_argument("--cascade", action="store_true")
    parser.add_argument("--site", action="store_true")
    args = parser.parse_args()
    if not (args.cascade or args.site):
        parser.error("say which section to rewrite: --cascade, --site or both")
    card = MODEL_CARD.read_text(encoding="utf-8")
    card = splice_cascade(card) if args.cascade else card
    card = splice_site(card) if args.site else card
    MODEL_CARD.write_text(card, encoding="utf-8")
    print(f"rewrote the {' and '.join(k for k in ('cascade', 'site') if getattr(args, k))} section of {MODEL_CARD}")


if __name__ == "__main__":
    main()
