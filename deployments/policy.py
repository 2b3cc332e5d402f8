"""Policy: the decision table as a Ray Serve deployment (logic in `policy.decisions`), and the same decisions made
in the calling process.

Who decides is the operator's choice (MODERATION_POLICY_HOP, docs/operating.md): by default the ingress decides
itself with `decide_recorded`, since a decision is a table lookup of microseconds and a call to this deployment cost
more CPU than it (`make bench`, docs/benchmarks.md: a Ray call per request, a Python process woken up for it, its
metrics); with the hop on, every request's decisions go to the Policy replicas in one call. Either way the same
function decides and records the same metrics.
"""

from __future__ import annotations

from ray import serve

from deployments.metrics import record_decision
from policy.decisions import Decision, decide
from policy.types import ContentKind, Profile


def decide_recorded(
    items: list[tuple[dict[str, float], ContentKind]], profile: Profile, threshold: float | None
) -> list[Decision]:
    """A decision per (scores, kind), each counted in the decision metrics of the process that made it."""
    decisions = []
    for scores, kind in items:
        decision = decide(scores, profile, kind, threshold)
        record_decision(kind, decision.decision, decision.recommended_action, decision.mode, decision.verdicts)
        decisions.append(decision)
    return decisions


@serve.deployment(max_ongoing_requests=64)
class Policy:
    def decide_many(
        self, items: list[tuple[dict[str, float], ContentKind]], profile: Profile, threshold: float | None
    ) -> list[Decision]:
        """One call per request: a batch of 100 texts costs one Policy hop, not 100."""
        return decide_recorded(items, profile, threshold)

    def model_versions(self) -> dict[str, str]:
        return {}

