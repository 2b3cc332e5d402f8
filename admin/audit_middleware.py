"""Writes the admin audit log (store/people/audit_log.py): one entry per admin change and per refused admin token.

An ASGI middleware of the admin app. It reads only the request's method, its matched route template, the route's
path parameters, the client address and the status answered: never headers, query or bodies, so neither the admin
token nor a created key's secret can reach the log. The entry is written when the response starts, before the
client sees it: a change the operator was told about is in the log (unless the store refused the write too, which
is logged here, without the entry's values beyond method and route).

Not written: reads with the right token (GET/HEAD, or the log would mostly record itself being read), calls that
never reached the token check (an unknown path, a wrong method: nobody was authenticated, and nothing changed),
and 429s (a throttled source's tokens are refused without a new entry, so a guesser cannot push real entries out
of the bounded log; its first `max_failures` per window are there as 401s), and requests whose route asked to be
left out (SKIP_STATE: a dashboard login's wrong password that engaged no brake).
"""

from __future__ import annotations

import logging

from redis.exceptions import RedisError

from serve_app.response_start import NotingSend
from store.people.audit_log import AuditLog
from serve_app.audit_names import ACCOUNT_STATE, ACTOR_STATE, SKIP_STATE, TARGET_STATE

log = logging.getLogger("moderation.admin.audit")

READS = frozenset({"GET", "HEAD", "OPTIONS"})
# Path parameters that name what a route acts on, in the order they are looked for.
TARGET_PARAMS = ("name", "key_id", "account", "item_id", "endpoint_id")


def actor_of(scope: dict, method: str, status: int) -> str | None:
    """Who to record the request as, or None when it is not recorded."""
    if (scope.get("state") or {}).get(SKIP_STATE):
        return None
    if status == 401:
        return "unauthenticated"
    actor = (scope.get("state") or {}).get(ACTOR_STATE)
    return actor if actor and method not in READS else None


def target_of(scope: dict) -> str:
    from_route = (scope.get("state") or {}).get(TARGET_STATE)
    if from_route:
        return str(from_route)
    params = scope.get("path_params") or {}
    return next((str(params[name]) for name in TARGET_PARAMS if name in params), "")


def action_of(scope: dict) -> str:
    route = scope.get("route")
    return f"{scope.get('method', '?')} {getattr(route, 'path', None) or '(no route)'}"


class AdminAuditMiddleware:
    def __init__(self, app, audit: AuditLog):
        self.app, self.audit = app, audit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def record(message):
            await self._record(scope, message["status"])

        await self.app(scope, receive, NotingSend(send, record))

    async def _record(self, scope: dict, status: int) -> None:
        actor = actor_of(scope, scope.get("method", "?"), status)
        if actor is None:
            return
        client = scope.get("client")
        action = action_of(scope)
        try:
            await self.audit.append(
                actor=actor,
                source=client[0] if client else "unknown",
                action=action,
                target=target_of(scope),
                status=status,
                account=str((scope.get("state") or {}).get(ACCOUNT_STATE) or ""),
            )
        except RedisError as exc:
            log.warning("audit entry for %s (status %s) not written: %s", action, status, type(exc).__name__)
