"""Fair batching for a queue many accounts share: one account's flood never times out the others' items.

The text cascade's second stage (deployments/gemma_model.py) is asked one text a call by every TextModel replica,
and each caller waits at most its timeout (models/text_cascade_completion.py) before it answers with the first
stage's score. In a plain FIFO (models/batch_queue.py) an account that floods in-band texts fills the queue, and every
other account's texts wait behind the flood until they time out; a 100-text request's texts likewise queue ahead of
every single-text caller.

Here the waiting items are kept per account (`key`), and:
- A batch takes them round-robin across accounts: one from each in turn, the account served least recently first (one
  never served before all), so a newcomer's item goes in the next batch however much another account has waiting.
  Within an account, by `priority`: single texts before a many-text request's (that caller is answered when its last
  text is, so one of its texts waiting costs it less than a lone text waiting costs its caller), then the higher
  `change_chance` (the answer most likely to change the caller's decision), then in order of arrival.
- At most `capacity` items wait. When full, a newcomer takes the place of the least deserving item of the account
  that holds the most (a many-text request's before a single text, then the lowest change_chance, then the newest)
  when its own account holds fewer; else it is refused at once. An account holding most of the places loses them to
  the others' arrivals, never the reverse.
- A refused or evicted caller gets `QueueFull`: the queue was busy, neither its item nor the model failed (the
  deployment answers it as refused, and its caller keeps the first stage's score).

The worker, the wait for company, the setters and the dropping of an item whose caller gave up are BatchQueue's: only
what waits, and the order it leaves in, differ. Pure asyncio on one event loop (the replica's).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic

from models.batch_queue import BatchQueue, Item, Result


class QueueFull(Exception):
    """The item has no place in the queue: refused on arrival, or its place given to another account's item."""


def account_of(item: Any) -> str:
    """The default `key`: the item's account (SecondStageItem.account); "" for an item that names none."""
    return getattr(item, "account", "")


def second_stage_priority(item: Any) -> tuple[bool, float]:
    """The default `priority`, lower first: a single text before a many-text request's, then the higher change_chance
    (SecondStageItem's fields; an item without them counts as a single text whose answer is sure to matter)."""
    return getattr(item, "from_batch", False), -getattr(item, "change_chance", 1.0)


class FairBatchQueue(BatchQueue[Item, Result]):
    def __init__(
        self,
        run: Callable[[list[Item]], Awaitable[list[Result]]],
        max_batch_size: int,
        batch_wait_timeout_s: float,
        *,
        capacity: int,
        key: Callable[[Item], str] = account_of,
        priority: Callable[[Item], Any] = second_stage_priority,
    ) -> None:
        """As BatchQueue's; `capacity`: the most items waiting in all (the running batch not counted). `key(item)`:
        whose it is. `priority(item)`: a sort key, lower first: served sooner within its account, evicted later.
        `submit` raises QueueFull for an item refused or evicted."""
        super().__init__(run, max_batch_size, batch_wait_timeout_s)
        self._waiting = FairWaiting(capacity, key, priority)

    @property
    def capacity(self) -> int:
        return self._waiting.capacity

    def waiting_by_account(self) -> dict[str, int]:
        """How many items each account has waiting (accounts with none left out)."""
        return self._waiting.by_account()


@dataclass(eq=False)
class _Entry:
    item: Any
    future: asyncio.Future
    account: str
    rank: tuple  # (priority, arrival): lower is served sooner and evicted later


class FairWaiting(Generic[Item]):
    """What waits in a FairBatchQueue. BatchQueue's worker uses it as its deque: `append` admits an item (evicting
    another's, or raising QueueFull), `popleft` hands out the next in round-robin order, and its length counts only
    the callers still waiting."""

    def __init__(self, capacity: int, key: Callable[[Item], str], priority: Callable[[Item], Any]) -> None:
        if capacity < 1:
            raise ValueError("a queue holds at least one item")
        self.capacity, self._key, self._priority = capacity, key, priority
        self._accounts: dict[str, list[_Entry]] = {}  # only accounts with items waiting
        self._served: dict[str, int] = {}  # the turn each account was last served at
        self._arrivals, self._turns = itertools.count(), itertools.count()

    def __len__(self) -> int:
        return sum(self.by_account().values())

    def by_account(self) -> dict[str, int]:
        counts = {account: sum(not e.future.done() for e in entries) for account, entries in self._accounts.items()}
        return {account: count for account, count in counts.items() if count}

    def append(self, waiting: tuple[Item, asyncio.Future]) -> None:
        item, future = waiting
        self._drop_given_up()
        account = self._key(item)
        if sum(map(len, self._accounts.values())) >= self.capacity:
            self._make_room_for(account)
        entry = _Entry(item, future, account, (self._priority(item), next(self._arrivals)))
        self._accounts.setdefault(account, []).append(entry)

    def popleft(self) -> tuple[Item, asyncio.Future]:
        self._drop_given_up()
        if not self._accounts:
            raise IndexError("nothing waits")
        account = min(self._accounts, key=self._turn_order)
        entries = self._accounts[account]
        entry = min(entries, key=lambda e: e.rank)
        entries.remove(entry)
        if not entries:
            del self._accounts[account]
        self._served[account] = next(self._turns)
        self._forget_old_turns()
        return entry.item, entry.future

    def _turn_order(self, account: str) -> tuple[int, int]:
        """Least recently served first; among accounts never served (-1), the one waiting longest."""
        return self._served.get(account, -1), min(e.rank[1] for e in self._accounts[account])

    def _make_room_for(self, account: str) -> None:
        """Evict the least deserving item of the largest account for `account`'s, if it holds fewer; else refuse."""
        size = {name: len(entries) for name, entries in self._accounts.items()}
        entries = (e for account_entries in self._accounts.values() for e in account_entries)
        victim = max(entries, key=lambda e: (size[e.account], e.rank))
        if size.get(account, 0) >= size[victim.account]:
            raise QueueFull(f"{self.capacity} items wait and this item's account holds as many as any")
        self._accounts[victim.account].remove(victim)
        if not self._accounts[victim.account]:
            del self._accounts[victim.account]
        victim.future.set_exception(QueueFull("its place was given to an item of an account with fewer waiting"))

    def _drop_given_up(self) -> None:
        """Items whose caller was cancelled (or evicted) hold no place."""
        for account in list(self._accounts):
            entries = [e for e in self._accounts[account] if not e.future.done()]
            if entries:
                self._accounts[account] = entries
            else:
                del self._accounts[account]

    def _forget_old_turns(self) -> None:
        """Forget the turns of accounts with nothing waiting that were served before every account still waiting:
        come back, such an account is ordered as one never served, before those same accounts, as it was. So the
        record stays as small as the accounts in play, however many have ever called."""
        if not self._accounts:
            return
        oldest = min(self._served.get(account, -1) for account in self._accounts)
        self._served = {a: turn for a, turn in self._served.items() if a in self._accounts or turn > oldest}
