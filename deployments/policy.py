"""Policy: the decision table as a Ray Serve deployment (logic in `policy.decisions`)."""

from __future__ import annotations

from ray import serve

from deployments.metrics import record_decision
from policy.decisions import Decision, decide
from policy.types import ContentKind, Profile


@serve.deployment(max_ongoing_requests=64)
class Policy:
    def decide_many(
        self, items: list[tuple[dict[str, float], ContentKind]], profile: Profile, threshold: float | None
    ) -> list[Decision]:
        """One call per request: a batch of 100 texts costs one Policy hop, not 100."""
        decisions = []
        for scores, kind in items:
            decision = decide(scores, profile, kind, threshold)
            record_decision(kind, decision.decision, decision.recommended_action, decision.mode, decision.verdicts)
            decisions.append(decision)
        return decisions

    def model_versions(self) -> dict[str, str]:
        return {}

