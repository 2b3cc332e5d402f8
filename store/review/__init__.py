"""The human review queue and the content reports that feed it.

- `queue.py`: items and reports, their caps and retention (`ReviewRules`), decisions (`ReviewQueue`).
- `report_counters.py`: the cap of report counters one account keeps.
- `browse.py`: the moderators' view: pending items oldest first, filtered by account and scope, and an operator's
  queue round the accounts, so that one account's flood hides no other's.
- `queue_order.py`: the two orders that view walks: some accounts' queues merged oldest first, or round by round.
- `claims.py`: who is working on which item (a few minutes' claim).
- `stats.py` and `decision_counts.py`: the queue's health in numbers (pending, oldest, decisions per hour).
- `lua.py`: the queue's scripts (creation, report, decision, pruning, claim, adding old items to newer indexes); they
  write the item's webhook deliveries in the same step (store/webhooks/lua.py).
"""
