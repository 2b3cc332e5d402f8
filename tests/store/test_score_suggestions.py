"""Score suggestions (comments:suggestscore) in the store: per account, newest first, capped, expiring."""

from __future__ import annotations

import pytest

from store import redis_keys
from store.score_suggestions import FEEDBACK_TTL_S, FeedbackStore, suggestion

pytestmark = pytest.mark.anyio


async def test_suggestions_are_kept_per_account_newest_first_capped_and_expiring(redis_client):
    store = FeedbackStore(redis_client, max_per_account=3)
    for number in range(5):
        await store.record("acme", [suggestion("TOXICITY", number / 10, f"t-{number}", now=float(number))])
    await store.record("other", [suggestion("INSULT", 1.0, None, now=9.0)])
    assert [s.client_token for s in await store.list("acme")] == ["t-4", "t-3", "t-2"]
    assert [s.attribute for s in await store.list("other")] == ["INSULT"]
    assert 0 < await redis_client.ttl(redis_keys.feedback("acme")) <= FEEDBACK_TTL_S


def test_a_suggestion_holds_a_bounded_token_and_a_score_in_0_1():
    with pytest.raises(ValueError):
        suggestion("TOXICITY", 1.5, None)
    with pytest.raises(ValueError):
        suggestion("TOXICITY", 0.5, "x" * 257)
