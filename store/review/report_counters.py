"""How many report counters one account keeps: at most `ReviewRules.report_counters_per_account`.

A counter (`mod:reports:ref:{sha256}:{account}`, about 210 bytes) lives 30 days after its reference's last report,
and an account may report 10,000 references a day: without a cap, 300,000 counters, about 63 MB of one account in a
512 MiB store. Each counter is also in its account's index (`mod:reports:refs:{account}`, scored by when the counter
expires): about 340 bytes a counter with its place there, measured. Right after a report counts, past the cap the
counters nearest their end go (`TRACK_REPORT_COUNTER` in store/review/lua.py): the account's least recently reported
references count afresh from 1, as after their 30 days. At the default of 50,000, one account holds at most about
17 MB of counters. A flood of reports costs the flooding account its own oldest counts, never another account's, and
never refuses a report.

The step runs after the report's own (`ReviewQueue.report`), not in it: a counter whose step never ran (the store
failed between the two) is not in the index and still goes at its expiry.
"""

from __future__ import annotations

from redis.asyncio import Redis

from store import redis_keys
from store.review import lua

# About 17 MB per account. An account reporting the most references a day (MODERATION_REPORTS_PER_DAY, 10,000) keeps
# five days of counts, time enough for a reference to reach its threshold.
COUNTERS_PER_ACCOUNT = 50_000


class ReportCounters:
    def __init__(self, redis: Redis, max_per_account: int, ttl_s: int):
        self.max_per_account, self.ttl_s = max_per_account, ttl_s
        self._track = redis.register_script(lua.TRACK_REPORT_COUNTER)

    async def track(self, account: str, reference: str) -> int:
        """Puts the reference's counter in its account's index and trims the index to the cap; returns how many
        counters went."""
        keys = [redis_keys.report_counters_of(account), redis_keys.report_counter(account, reference)]
        args = [redis_keys.reference_sha256_hex(reference), self.ttl_s, self.max_per_account,
                redis_keys.REPORT_COUNTER_PREFIX, account]  # fmt: skip
        return int(await self._track(keys=keys, args=args))
