"""The decision table: from scores and a profile to allow, review or block.

Per enabled category `c` the profile holds `review_c <= block_c`. A score at or above
`block_c` blocks, at or above `review_c` reviews, else allows. The strictest enabled
category decides. A per-request threshold replaces every block threshold and removes
the review band, so the answer is binary. The mode then turns the recommendation into
the decision the client acts on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from policy.types import PRIMARY_CATEGORIES, Action, ContentKind, Profile

_SEVERITY: dict[Action, int] = {"allow": 0, "review": 1, "block": 2}


HASH_MATCH = "hash_match"  # the `blocked_by` entry of a block by hash


@dataclass(frozen=True)
class Decision:
    decision: Action
    recommended_action: Action
    threshold: float
    blocked_by: list[str]
    mode: str
    profile: str
    # Each enabled, scored category's own recommendation (for the metrics); not a field of the client's answer.
    verdicts: dict[str, Action] = field(default_factory=dict)

    def answer_fields(self) -> dict:
        """The fields of the client's answer (docs/api.md)."""
        return {"decision": self.decision, "recommended_action": self.recommended_action, "threshold": self.threshold,
                "blocked_by": list(self.blocked_by), "mode": self.mode, "profile": self.profile}  # fmt: skip


def reaches_review(score: float, review: float) -> bool:
    """Whether a category's score reached its review threshold: the least score that is not allowed."""
    return score >= review


def recommend(score: float, review: float, block: float) -> Action:
    if score >= block:
        return "block"
    if reaches_review(score, review):
        return "review"
    return "allow"


def decide(
    scores: dict[str, float],
    profile: Profile,
    kind: ContentKind,
    threshold: float | None = None,
) -> Decision:
    """Decide on `scores` (category -> score) under `profile`.

    Only the profile's enabled categories of `kind` count; a category without a score
    is skipped. `threshold`, when given, is the binary override of the request.
    """
    primary = PRIMARY_CATEGORIES[kind]
    recommended: Action = "allow"
    deciding = primary
    blocked_by: list[str] = []
    verdicts: dict[str, Action] = {}
    for category in profile.enabled_categories(kind):
        if category not in scores:
            continue
        limits = profile.categories[category]
        block = limits.block if threshold is None else threshold
        review = limits.review if threshold is None else threshold
        action = verdicts[category] = recommend(scores[category], review, block)
        if action == "block":
            blocked_by.append(category)
        if _SEVERITY[action] > _SEVERITY[recommended]:
            recommended, deciding = action, category

    applied = profile.categories[deciding].block if threshold is None else threshold
    return Decision(
        decision=apply_mode(recommended, profile.mode, binary=threshold is not None),
        recommended_action=recommended,
        threshold=applied,
        blocked_by=blocked_by,
        mode=profile.mode,
        profile=profile.name,
        verdicts=verdicts,
    )


def on_scale_of(score: float, review: float, block: float, to_review: float, to_block: float) -> float:
    """`score`, judged at (`review`, `block`), moved onto another category's (`to_review`, `to_block`): piecewise
    linear through (0, 0), (review, to_review), (block, to_block), (1, 1), so that it reaches each of the other's
    thresholds exactly when it reached its own (the action is the same on either scale)."""
    if score >= block:
        moved = to_block + (score - block) / (1.0 - block) * (1.0 - to_block) if block < 1.0 else to_block
        return max(to_block, min(1.0, moved))
    below_block = math.nextafter(to_block, 0.0)
    if reaches_review(score, review):
        moved = to_review + (score - review) / (block - review) * (to_block - to_review)
        return min(below_block, max(to_review, moved))
    return min(math.nextafter(to_review, 0.0), below_block, score / review * to_review)


def strictest_text_score(scores: dict[str, float], profile: Profile, category: str,
                         threshold: float | None = None) -> float:  # fmt: skip
    """Text `scores` as one score of the profile's `category` (an image's `text_toxic`): each enabled text
    category's score moved onto `category`'s thresholds (`on_scale_of`), the highest. It recommends what the text's
    own decision under the profile recommends: the strictest text category decides either way. `threshold`: the
    request's binary override, for both scales."""
    own = profile.categories[category]
    to_review, to_block = (own.review, own.block) if threshold is None else (threshold, threshold)
    moved = [0.0]
    for name in profile.enabled_categories("text"):
        if name in scores:
            limits = profile.categories[name]
            review, block = (limits.review, limits.block) if threshold is None else (threshold, threshold)
            moved.append(on_scale_of(scores[name], review, block, to_review, to_block))
    return max(moved)


def blocked_by_hash(decision: Decision) -> Decision:
    """The decision for content a moderator already rejected (its PDQ hash matched the account's bank): block,
    whatever the models said. A profile in `monitor` mode still allows (it never blocks); in `review` mode it blocks
    too, since a human already decided."""
    return replace(
        decision,
        decision="allow" if decision.mode == "monitor" else "block",
        recommended_action="block",
        blocked_by=[HASH_MATCH, *decision.blocked_by],
    )


def apply_mode(recommended: Action, mode: str, *, binary: bool) -> Action:
    """Turn the model's recommendation into the client's decision under `mode`."""
    if mode == "monitor":
        return "allow"
    if mode == "review" and not binary:
        # Humans decide everything flagged: a block recommendation goes to review too.
        return "review" if recommended != "allow" else "allow"
    return recommended
