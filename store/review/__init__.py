"""The human review queue and the content reports that feed it.

- `queue.py`: items and reports, their caps and retention (`ReviewRules`), decisions (`ReviewQueue`).
- `browse.py`: the moderators' view: pending items oldest first, filtered by account and scope.
- `claims.py`: who is working on which item (a few minutes' claim).
- `stats.py` and `decision_counts.py`: the queue's health in numbers (pending, oldest, decisions per hour).
- `lua.py`: the queue's scripts (creation, report, decision, pruning, claim, backfill); they write the item's webhook
  deliveries in the same step (store/webhooks/lua.py).
"""
