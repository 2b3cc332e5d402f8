"""The reason codes a moderator gives with a decision: stored on the item (`reason_code`) and in the dashboard."""

from __future__ import annotations

APPROVE_REASONS = {
    "not_a_violation": "Not a violation",
    "false_positive": "Model false positive",
    "allowed_context": "Allowed in context (news, art, education)",
}
REJECT_REASONS = {
    "sexual_content": "Sexual content",
    "violence_gore": "Violence or gore",
    "harassment": "Harassment or insult",
    "hate": "Hate or identity attack",
    "threat": "Threat",
    "spam": "Spam or scam",
    "other_policy": "Other policy violation",
}
REASONS = {"approved": APPROVE_REASONS, "rejected": REJECT_REASONS}
