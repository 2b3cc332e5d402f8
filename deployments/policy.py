"""Policy: the decision table as a Ray Serve deployment (logic in `policy.decisions`)."""

from __future__ import annotations

from ray import serve

from policy.decisions import Decision, decide
from policy.types import ContentKind, Profile


@serve.deployment(max_ongoing_requests=64)
class Policy:
    def decide(
        self, scores: dict[str, float], profile: Profile, kind: ContentKind, threshold: float | None
    ) -> Decision:
        return decide(scores, profile, kind, threshold)

    def model_versions(self) -> dict[str, str]:
        return {}
