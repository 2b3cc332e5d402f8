"""Taking quota in tests through the store's one public step (store/keys/quota.py `QuotaStore.take`)."""

from __future__ import annotations

from store.keys.quota import QuotaStore, Taken


async def took(limits: QuotaStore, account: str, monthly_quota: int, now: float | None = None, units: int = 1) -> bool:
    """True when `units` were taken; False (nothing taken) when they do not fit."""
    return await limits.take(account, monthly_quota, now, units) is Taken.TAKEN
