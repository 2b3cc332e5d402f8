"""The `webhooks` and `hashbank` commands of `moderation-admin` (runtime/cli.py): their arguments and requests.

    moderation-admin webhooks create acme --url https://hooks.example/moderation [--events review.decided ...]
    moderation-admin webhooks list acme
    moderation-admin webhooks get|enable|disable|delete|rotate-secret|deliveries whk_...
    moderation-admin webhooks redeliver whk_... msg_..._1
"""

from __future__ import annotations

import argparse

from policy.webhooks import EVENT_TYPES

_BY_ID = ("get", "enable", "disable", "delete", "rotate-secret", "deliveries")


def add_webhook_commands(groups: argparse._SubParsersAction) -> None:
    hooks = groups.add_parser("webhooks", help="an account's webhook endpoints").add_subparsers(
        dest="action", required=True
    )
    create = hooks.add_parser("create", help="a new endpoint; its secret is shown only now")
    create.add_argument("account")
    create.add_argument("--url", required=True)
    create.add_argument("--events", nargs="+", choices=EVENT_TYPES, default=list(EVENT_TYPES))
    create.add_argument("--description", default="")
    hooks.add_parser("list").add_argument("account")
    for action in _BY_ID:
        hooks.add_parser(action).add_argument("id")
    redeliver = hooks.add_parser("redeliver", help="send an event to the endpoint again")
    redeliver.add_argument("id")
    redeliver.add_argument("event_id")


def webhook_request(args: argparse.Namespace) -> tuple[str, str, dict]:
    """The (method, path, httpx keyword arguments) of a `webhooks` command."""
    action = args.action
    if action == "create":
        body = {"url": args.url, "events": args.events, "description": args.description}
        return "POST", f"/admin/v1/accounts/{args.account}/webhooks", {"json": body}
    if action == "list":
        return "GET", f"/admin/v1/accounts/{args.account}/webhooks", {}
    path = f"/admin/v1/webhooks/{args.id}"
    if action in ("enable", "disable"):
        return "PATCH", path, {"json": {"enabled": action == "enable"}}
    if action == "redeliver":
        return "POST", f"{path}/deliveries/{args.event_id}/redeliver", {}
    return {
        "get": ("GET", path, {}),
        "delete": ("DELETE", path, {}),
        "rotate-secret": ("POST", f"{path}/rotate-secret", {}),
        "deliveries": ("GET", f"{path}/deliveries", {}),
    }[action]
