"""How this service's categories answer the OpenAI moderation and Perspective APIs (no HTTP here).

OpenAI: each of OpenAI's 13 categories is scored as the highest of its sources; a source is one of our
categories of one content kind, or two that must both hold (its score is then the lower of the two). A
category without a source scores 0: no model here backs it (self-harm/instructions, sexual/minors, illicit). Only what
the key's profile enables is scored (so a beta category left off scores 0), and a category is `true`
only when the request is flagged and one of its sources reached its review threshold in the profile. The words read
on an image (when the profile enables `text_toxic`) are that image's text sources: they count toward `harassment`,
`hate` and the rest as a text part's scores would, and the category's applied input type is `image`.

Perspective: the six production attributes and SEXUALLY_EXPLICIT have a model behind them and are served in every
language (the text model is multilingual, and the text's language is detected anyway); an experimental attribute
has none and is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from policy.decisions import reaches_review
from policy.types import Profile

# OpenAI category -> sources: (content kind, our categories that must all hold).
OPENAI_SOURCES: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "harassment": (("text", ("toxic",)), ("text", ("insult",))),
    "harassment/threatening": (("text", ("threat",)),),
    "hate": (("text", ("identity_attack",)),),
    "hate/threatening": (("text", ("identity_attack", "threat")),),
    "illicit": (),
    "illicit/violent": (),
    "self-harm": (("text", ("self_harm",)),),
    "self-harm/intent": (("text", ("self_harm",)),),
    "self-harm/instructions": (),
    "sexual": (("text", ("sexual",)), ("image", ("nsfw",))),
    "sexual/minors": (),
    "violence": (("text", ("threat",)), ("text", ("violent_speech",)), ("image", ("violence",))),
    "violence/graphic": (("image", ("violence",)),),
}
OPENAI_MODELS = (
    "omni-moderation-latest", "omni-moderation-2024-09-26",
    "text-moderation-latest", "text-moderation-stable", "text-moderation-007",
)  # fmt: skip
DEFAULT_OPENAI_MODEL = "omni-moderation-latest"


@dataclass(frozen=True)
class Part:
    """One moderated part of an OpenAI input: its kind, its scores and the profile's decision on it."""

    kind: str
    scores: dict[str, float]
    decision: str
    # An image's: the text model's scores of the words read on it (None: nothing read, or not asked).
    read_scores: dict[str, float] | None = None

    def sources(self, kind: str) -> dict[str, float] | None:
        """Its scores as a source of `kind`: its own, or an image's read text as a text source."""
        if kind == self.kind:
            return self.scores
        if kind == "text" and self.kind == "image":
            return self.read_scores
        return None


def _reached(profile: Profile, category: str, scores: dict[str, float]) -> bool:
    limits = profile.categories.get(category)
    return limits is not None and limits.enabled and reaches_review(scores.get(category, 0.0), limits.review)


def openai_result(parts: Iterable[Part], profile: Profile) -> dict:
    """One entry of OpenAI's `results`: flagged, categories, category_scores, category_applied_input_types."""
    parts = list(parts)
    flagged = any(part.decision != "allow" for part in parts)  # monitor mode never flags
    categories, scores, applied = {}, {}, {}
    for name, sources in OPENAI_SOURCES.items():
        score, hit, kinds = 0.0, False, set()
        for kind, needed in sources:
            for part in parts:
                given = part.sources(kind)
                if given is None or not all(c in given for c in needed):
                    continue
                kinds.add(part.kind)
                score = max(score, min(given[c] for c in needed))
                hit = hit or all(_reached(profile, c, given) for c in needed)
        categories[name], scores[name], applied[name] = flagged and hit, score, sorted(kinds, reverse=True)
    return {"flagged": flagged, "categories": categories, "category_scores": scores,
            "category_applied_input_types": applied}  # fmt: skip


# Perspective attribute -> the text category it reads. SEVERE_TOXICITY reads several, and every attribute's score is
# mapped onto Perspective's scale (moderation/perspective_scale.py).
PERSPECTIVE_ATTRIBUTES = {
    "TOXICITY": "toxic", "INSULT": "insult", "IDENTITY_ATTACK": "identity_attack",
    "PROFANITY": "profanity", "THREAT": "threat", "SEXUALLY_EXPLICIT": "sexual",
}  # fmt: skip
# Every served attribute is scored in any language, whatever a request's `languages` say: a client that gets an
# error publishes the comment unmoderated. Any other name is refused (serve_app/routes_perspective.py). What was
# measured per attribute and language is in docs/compat-clients.md, "Languages: what was measured".
_VERSIONED = re.compile(r"^([A-Za-z_]+?)(?:_EXPERIMENTAL)?(?:@[\w.-]+)?$")


def base_attribute(name: str) -> str:
    """`TOXICITY`, `TOXICITY@v6`, `SEVERE_TOXICITY_EXPERIMENTAL`, `toxicity` -> `TOXICITY`, ..., `SEVERE_TOXICITY`:
    the attribute a client's name means (Perspective's versioned and experimental spellings; n8n's lower case)."""
    match = _VERSIONED.match(name.strip())
    return (match.group(1) if match else name).upper()


def language_code(tag: str) -> str:
    """`en-US`, `EN`, `pt_BR` -> `en`, `en`, `pt` (the primary subtag of an ISO or BCP-47 code)."""
    return re.split(r"[-_]", tag.strip(), maxsplit=1)[0].lower()


_SENTENCE = re.compile(r"[^.!?…。！？\n]*(?:[.!?…。！？]+|\n|$)")


def sentence_spans(text: str, max_chars: int, max_spans: int) -> list[tuple[int, int]]:
    """(begin, end) character offsets of the sentences of `text`, blanks left out; a sentence longer than
    `max_chars` is cut into pieces of at most that. Past `max_spans` pieces, consecutive ones are grouped into at
    most `max_spans` spans of whole pieces: 10,000 one-word sentences must not become 10,000 model inputs."""
    pieces = []
    for match in _SENTENCE.finditer(text):
        begin, end = match.span()
        while begin < end and text[begin].isspace():
            begin += 1
        while end > begin and text[end - 1].isspace():
            end -= 1
        for start in range(begin, end, max_chars):
            pieces.append((start, min(start + max_chars, end)))
    if len(pieces) <= max_spans:
        return pieces
    per_span = -(-len(pieces) // max_spans)
    return [(pieces[first][0], pieces[min(first + per_span, len(pieces)) - 1][1])
            for first in range(0, len(pieces), per_span)]  # fmt: skip
