"""Policy: the decision table as a Ray Serve deployment (logic in `policy.decisions`)."""

from __future__ import annotations

from ray import serve

from deployments.metrics import record_decision
from policy.decisions import Decision, decide, recommend
from policy.types import ContentKind, Profile


@serve.deployment(max_ongoing_requests=64)
class Policy:
    def decide(
        self, scores: dict[str, float], profile: Profile, kind: ContentKind, threshold: float | None
    ) -> Decision:
        decision = decide(scores, profile, kind, threshold)
        record_decision(
            kind, decision.decision, decision.recommended_action, decision.mode, _verdicts(scores, profile, kind, threshold)
        )
        return decision

    def model_versions(self) -> dict[str, str]:
        return {}


def _verdicts(scores: dict[str, float], profile: Profile, kind: ContentKind, threshold: float | None) -> dict[str, str]:
    """Each enabled, scored category's own recommendation, as `decide` weighs them (for the metrics)."""
    verdicts = {}
    for category in profile.enabled_categories(kind):
        if category in scores:
            limits = profile.categories[category]
            review, block = (limits.review, limits.block) if threshold is None else (threshold, threshold)
            verdicts[category] = recommend(scores[category], review, block)
    return verdicts
