"""The card's "Learning each site's line" (`reports/site-report.json`, training/eval_site.py), and splicing it
into a kept card."""

from __future__ import annotations

import json

from training.model_card.closing import THRESHOLDS_HEADING
from training.model_card.numbers import figure, percent


SITE_HEADING = "### Learning each site's line"


def site_section() -> str:
    """Per-account corrections and threshold backtests (adaptation/) replayed on each dataset as a site left
    out of training (`site-report.json`, training/eval_site.py); a line saying how to measure it when missing."""
    from training.eval_site import REPORT as SITE_REPORT

    if not SITE_REPORT.exists():
        return f"{SITE_HEADING}\n\nNot measured yet (`make eval-site`).\n\n"
    report = json.loads(SITE_REPORT.read_text(encoding="utf-8"))
    rows = []
    for n, s in report["sizes"].items():
        if not s.get("sites"):
            continue
        m = s["macro"]
        rows.append(f"| {n} | {s['sites']} | {m['taken']:.0f} | {percent(m['active'])} | {figure(m['base'])} | "
                    f"{figure(m['corrected'])} | {figure(m['served'])} | {s['gain_served']:+.3f} | "
                    f"{s['worst_site_served']['gain']:+.3f} ({s['worst_site_served']['dataset']}) | "
                    f"{percent(m['base_benign_flagged'])} / {percent(m['base_recall'])} | "
                    f"{percent(m['suggested_benign_flagged'])} (max {percent(s['max_site_suggested_benign_flagged'])}) / "
                    f"{percent(m['suggested_recall'])} |")
    top = report.get("ceiling")
    ceiling = "" if top is None else (
        f"At best (every history row labelled, {top['history_rows']:.0f} a site on average, no sampling and no queue "
        f"bias) the correction gains {top['gain_corrected']:+.3f} macro, {top['gain_served']:+.3f} gated: the "
        "ceiling of a linear correction on these sites. ")
    table = "\n".join(rows)
    return f"""{SITE_HEADING}

Each account can learn its moderators' line (`adaptation/`): a correction of the served score on the text's
embedding, fitted on its labels weighted by how they came to be seen, live only when a cross-validated check on its
own audited labels beats the served score by 0.01 AUC; and a backtest of its thresholds on the same labels, which
suggests a review threshold for a {report['target_benign_flagged']:.0%} benign-flagged share. Replayed
(`training/eval_site.py`, `make eval-site`) on every dataset as a site left out of training (LOSO recipe: base
score = the toxic head fitted without it, per-language review thresholds): its shuffled dev and test rows, the
first half the history whose flagged rows, {report['audit_rate']:.0%} audits of allowed rows and
{report['report_rate']:.0%} reports of unaudited misses give N labels, the second half the future scored.
{report['seeds']} seeds, L2 {report['l2']:g}; means per site, then over the sites whose history reached N labels.
"Corrected": the fitted correction whether live or not; "served": corrected only where the check let it live.
Benign flagged / recall on the future half at the base thresholds and at the suggested review threshold.

| labels | sites | history rows | live | base AUC | corrected | served | served gain | worst site (served - base) | base: benign flagged / recall | suggested: benign flagged / recall |
|---|---|---|---|---|---|---|---|---|---|---|
{table}

{ceiling}{site_targets(report)}

"""


def site_targets(report: dict) -> str:
    """The targets of learning a site's line (docs/site-adaptation.md, "How well it works"), each met or missed
    by how much."""
    sizes = {n: s for n, s in report["sizes"].items() if s.get("sites")}
    parts = []
    for n, want in (("50", 0.02), ("100", 0.02), ("200", 0.03)):
        if n in sizes:
            gain = sizes[n]["gain_served"]
            parts.append(f"{n} labels {gain:+.3f} ({'met' if gain >= want else f'missed by {want - gain:.3f}'})")
    worst = min((s["worst_site_served"]["gain"], n) for n, s in sizes.items())
    benign = max((s["macro"]["suggested_benign_flagged"], n) for n, s in sizes.items())
    high = max((s["max_site_suggested_benign_flagged"], n) for n, s in sizes.items())
    return (f"Targets: macro served gain at least +0.02 at 50 and 100 labels, +0.03 at 200: {'; '.join(parts)}. "
            f"No site below the base by more than 0.01: worst {worst[0]:+.3f} at {worst[1]} labels "
            f"({'met' if worst[0] >= -0.01 else f'missed by {-0.01 - worst[0]:.3f}'}). Suggested thresholds at most "
            f"10% benign flagged over the sites: at most {percent(benign[0])} "
            f"({'met' if benign[0] <= 0.10 else 'missed'}); none above 15%: at most {percent(high[0])} at {high[1]} "
            f"labels ({'met' if high[0] <= 0.15 else f'missed by {100 * (high[0] - 0.15):.1f} points'}).")


def splice_site(card: str) -> str:
    """`card` with its site section replaced by (or, where it has none, given before its thresholds) the one
    site-report.json makes now."""
    section = site_section()
    if SITE_HEADING in card:
        start = card.index(SITE_HEADING)
        end = card.index(THRESHOLDS_HEADING, start)
    else:
        start = end = card.index(THRESHOLDS_HEADING)
    return card[:start] + section + card[end:]
