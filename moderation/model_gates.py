"""The model gates: in front of each model, at most a few calls at once, the rest waiting their turn by account, and
the excess refused early. (Not a request's admission, its first quota unit and work slot taken with its key in one
store step: store/keys/quota.py `Admission`.)

Past saturation, more calls in flight to a model do not make more answers. Serve's router keeps the calls a replica
cannot take yet and retries them against the replicas, which costs CPU on both sides for every waiting call: measured
on two cores, the model replica spent 7 ms of CPU per short text at 16 concurrent clients and 10-15 ms at 64, and the
graph's short-text throughput fell to about 70% of its peak. Waiting here costs a future.

So each ingress replica lets at most `max_active` calls go to a model at once. A call past that waits in this
process, and the waiting calls are let through account by account in turn (round robin), so one account's flood
waits behind its own calls, not in front of another's. A call is refused at once, before any model time is spent on
it, when its expected wait is over `max_wait_s` (the calls its turn comes after, in rounds of `max_active`, times how
long a call takes: a moving average): with `TooManyInFlight` (429) when its own account has calls waiting already
(that account's flood is what would make it wait), with `Overloaded` (503, Retry-After) when it has none (the model
is overloaded for everyone); and with `Overloaded` past `max_waiting` waiting calls. The excess is shed early, its
own tenant's first, and the calls let through keep the peak throughput.

Pure asyncio, one event loop: nothing here is thread-safe, and nothing needs to be.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from moderation.errors import Overloaded, TooManyInFlight

# How much of each finished call's duration the moving average takes: the last few dozen calls weigh most.
DURATION_SMOOTHING = 0.1


@dataclass(frozen=True)
class GateRules:
    """One model's gate: calls at once, calls waiting at most, and the longest expected wait let through."""

    max_active: int
    max_waiting: int = 256
    max_wait_s: float = 10.0

    def __post_init__(self) -> None:
        if self.max_active < 1 or self.max_waiting < 0 or self.max_wait_s <= 0:
            raise ValueError("a gate needs max_active >= 1, max_waiting >= 0 and max_wait_s > 0")


class FairGate:
    def __init__(self, rules: GateRules, clock: Callable[[], float] = time.monotonic):
        self.rules, self._clock = rules, clock
        self.active = 0
        self._waiting: OrderedDict[str, deque[asyncio.Future]] = OrderedDict()  # by account, in turn order
        self._waiting_count = 0
        self.mean_call_s: float | None = None  # none measured yet: only the count bound refuses

    @property
    def waiting(self) -> int:
        return self._waiting_count

    def ahead_of_next_call(self, account: str) -> int:
        """The waiting calls a new call of `account` would be let through after: its account's own, and for every
        other account as many as take their turns first (one per round, up to the new call's round)."""
        own = len(self._waiting.get(account, ()))
        return own + sum(min(len(turns), own + 1) for other, turns in self._waiting.items() if other != account)

    def expected_wait_s(self, ahead: int) -> float:
        """How long a call with `ahead` calls to be let through before it should wait: rounds of `max_active`."""
        if self.mean_call_s is None:
            return 0.0
        return (ahead // self.rules.max_active + 1) * self.mean_call_s

    @asynccontextmanager
    async def passed(self, account: str) -> AsyncIterator[None]:
        """Holds one of the model's places for the body of the `async with`; raises Overloaded instead of waiting
        past the rules."""
        await self._enter(account)
        started = self._clock()
        try:
            yield
        finally:
            self._measured(self._clock() - started)
            self._leave()

    async def _enter(self, account: str) -> None:
        if self.active < self.rules.max_active and not self._waiting_count:
            self.active += 1
            return
        if self._waiting_count >= self.rules.max_waiting:
            raise Overloaded()
        if self.expected_wait_s(self.ahead_of_next_call(account)) > self.rules.max_wait_s:
            raise TooManyInFlight() if account in self._waiting else Overloaded()
        turn = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(account, deque()).append(turn)
        self._waiting_count += 1
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._leave()  # the place was handed over just as the caller gave up: pass it on
            else:
                self._forget(account, turn)
            raise

    def _leave(self) -> None:
        self.active -= 1
        while self.active < self.rules.max_active and self._waiting:
            account, turns = next(iter(self._waiting.items()))
            turn = turns.popleft()
            self._waiting_count -= 1
            if turns:
                self._waiting.move_to_end(account)  # this account's next call waits for every other account's turn
            else:
                del self._waiting[account]
            if not turn.done():
                turn.set_result(None)
                self.active += 1

    def _forget(self, account: str, turn: asyncio.Future) -> None:
        turns = self._waiting.get(account)
        if turns is not None and turn in turns:
            turns.remove(turn)
            self._waiting_count -= 1
            if not turns:
                del self._waiting[account]

    def _measured(self, seconds: float) -> None:
        if self.mean_call_s is None:
            self.mean_call_s = seconds
        else:
            self.mean_call_s += DURATION_SMOOTHING * (seconds - self.mean_call_s)


# The gates' defaults, per kind of model work (runtime/settings.py reads them from here). Each is what the model
# deployment takes at once without turning calls away to the router (serve_config.yaml's max_ongoing_requests: 16
# for a TextModel or ImageModel replica), and for long text work the replicas' long lanes (a thread each, at most
# two replicas). Measured on two cores at 64 clients of short texts: with the gate at 16 the TextModel spent 7.7 ms
# of CPU per text (7.1 at 16 clients), without it 10-15 ms; at 8, throughput was lower (docs/operating.md, Overload).
DEFAULT_GATES = {
    "text": GateRules(max_active=16),
    # A call of long text work takes seconds by itself (the plan allows ten texts of 20,000 characters in one
    # request: three accounts sending that allowance at once kept the two long lanes busy for about 30 s with one of
    # two cores taken by another job), so at the short work's 10 s bound a call with two such calls ahead of it is
    # refused while it would still be answered in time. 20 s leaves the call's own run inside
    # MODERATION_INFERENCE_TIMEOUT_S (30 s), which counts its wait too.
    "long_text": GateRules(max_active=2, max_wait_s=20.0),
    "image": GateRules(max_active=16),
    # Images whose text is read (a profile with `text_toxic`): about a second of the ImageTextModel's CPU each, so a
    # few at once keep its two replicas busy, and one account's flood of them waits behind its own turn.
    "image_text": GateRules(max_active=4),
}


class ModelGates:
    """A gate per kind of model work the flow calls for: short text work, long text work (the TextModel runs the two
    on lanes of their own, so neither waits behind the other here either), images, and images whose text is read
    (their reader is a deployment of its own, at about a second an image). The Policy is cheap and
    called once per request, after scoring: no gate."""

    def __init__(self, rules: dict[str, GateRules] = DEFAULT_GATES):
        self.gates = {kind: FairGate(kind_rules) for kind, kind_rules in rules.items()}

    def passed(self, kind: str, account: str):
        return self.gates[kind].passed(account)
