"""Hand-written cases for the served text model: clear insults and threats it must block, hard benign texts it must
leave below review. A rule test, never evidence of quality (the real held-out and leave-one-source-out figures are).

A case the served model fails is kept, never deleted: `KNOWN_FAILURES` names it with the served score that fails,
tests/models/test_text_toxicity.py marks it a strict xfail (so a retrained model that passes it must drop the entry),
and `make eval-text` counts passes and known failures in the model card.
"""

from __future__ import annotations

CLEAR_INSULTS = [
    "Shut up, you pathetic worthless idiot.",
    "Eres un imbécil y un inútil, cállate de una vez.",
    "Ferme ta gueule, espèce de connard.",
    "Halt die Fresse, du dummes Arschloch.",
    "Vai tomar no cu, seu idiota de merda.",
    "Sei un coglione, stai zitto.",
    "Заткнись, тупой урод.",
    "Kapa çeneni, aptal herif.",
]
CLEAR_THREATS = [
    "I will find you and kill you.",
    "Voy a matarte cuando salgas del trabajo.",
]
# Cheerful swearing, news and game violence, medical words, counter-speech, harsh reviews of things, not people.
HARD_BENIGN = [
    "This update is terrible, the app crashes every time I open it.",
    "Fucking brilliant performance last night, well done everyone!",
    "Five people were killed when a gunman opened fire at a shopping centre, police said.",
    "In the game you sneak behind the guard and stab him to take his keys.",
    "Calling people slurs because of their religion is wrong and we removed those comments.",
    "The biopsy showed a tumour in the patient's testicle.",
    "Quel film de merde, j'ai failli m'endormir.",
    "Die Polizei meldet drei Tote nach einer Messerattacke in der Innenstadt.",
    "Esta serie es una basura, no entiendo por qué tiene tan buenas críticas.",
    "Врач сказал, что у меня воспаление мочевого пузыря.",
    "Thanks for the recipe, my kids loved it!",
]
# Served scores of usem3-ft-ml6-w160-9d0cc3af1d18-sh409c6866 (calibrated), thresholds of thresholds.json.
KNOWN_FAILURES: dict[str, str] = {
    "Voy a matarte cuando salgas del trabajo.":
        "served toxic 0.219 < block 0.842 (threat 0.087 does reach its review 0.019: sent to review, not blocked); "
        "Spanish threats without an insult word are rare in the training data",
    "Fucking brilliant performance last night, well done everyone!":
        "served toxic 0.984 >= review 0.568: cheerful swearing; OffensEval tr/da, GermEval and ToLD-Br label "
        "untargeted swearing offensive",
    "In the game you sneak behind the guard and stab him to take his keys.":
        "served toxic 0.890 >= review 0.568: game violence reads as violent speech; no source labels fiction benign",
    "Calling people slurs because of their religion is wrong and we removed those comments.":
        "served toxic 0.966 >= review 0.568: counter-speech that names the attack scores as the attack",
}


def passes(kind: str, scores: dict[str, float], thresholds: dict) -> bool:
    """insult: toxic at block and insult at review; threat: toxic at block and threat at review; benign: toxic
    below review. `scores` are the served (calibrated) ones; `thresholds` is thresholds.json's `categories`."""
    toxic = scores["toxic"]
    if kind == "benign":
        return toxic < thresholds["toxic"]["review"]
    return toxic >= thresholds["toxic"]["block"] and scores[kind] >= thresholds[kind]["review"]


def cases() -> list[tuple[str, str]]:
    """(kind, text) for every case."""
    return ([("insult", t) for t in CLEAR_INSULTS] + [("threat", t) for t in CLEAR_THREATS]
            + [("benign", t) for t in HARD_BENIGN])


def evaluate(model, thresholds: dict) -> dict:
    """Each case through `model.predict` (the served path), and the counts the model card prints."""
    rows = []
    for (kind, text), scores in zip(cases(), model.predict([text for _, text in cases()])):
        rows.append({"kind": kind, "text": text, "passed": passes(kind, scores, thresholds),
                     "known_failure": text in KNOWN_FAILURES, "toxic": scores["toxic"],
                     "category": scores[kind] if kind != "benign" else None})
    return {"cases": rows, "passes": sum(r["passed"] for r in rows),
            "known_failures": sum(r["known_failure"] for r in rows),
            "unexpected": [r["text"] for r in rows if r["passed"] == r["known_failure"]]}
