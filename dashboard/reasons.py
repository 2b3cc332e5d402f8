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
# The reject reason the item page preselects from the item's highest-scoring category, so that `r` alone usually
# records the right one; the moderator changes it in the list when it is not.
CATEGORY_REJECT_REASONS = {
    "nsfw": "sexual_content", "sexual": "sexual_content", "violence": "violence_gore", "weapon": "violence_gore",
    "toxic": "harassment", "insult": "harassment", "profanity": "harassment", "identity_attack": "hate",
    "threat": "threat",
}  # fmt: skip


def preselected(status: str, top_category: str | None) -> str:
    """The reason the item page's list for `status` starts on."""
    if status == "rejected" and top_category in CATEGORY_REJECT_REASONS:
        return CATEGORY_REJECT_REASONS[top_category]
    return next(iter(REASONS[status]))
