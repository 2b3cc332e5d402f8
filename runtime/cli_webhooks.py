"""The `webhooks` and `hashbank` commands of `moderation-admin` (runtime/cli.py): their arguments and requests.

    moderation-admin webhooks create acme https://hooks.example/moderation [--events review.decided ...]
    moderation-admin webhooks list acme
    moderation-admin webhooks get|enable|disable|delete|rotate-secret|deliveries whk_...
    moderation-admin webhooks redeliver whk_... msg_..._1
    moderation-admin hashbank list acme [--limit 100]
    moderation-admin hashbank remove acme <64 hex digits>
    moderation-admin hashbank export acme > bank.csv
    moderation-admin hashbank import acme bank.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

from store.webhooks.endpoints import EVENT_TYPES

_BY_ID = ("get", "enable", "disable", "delete", "rotate-secret", "deliveries")


def add_webhook_commands(groups: argparse._SubParsersAction) -> None:
    hooks = groups.add_parser("webhooks", help="an account's webhook endpoints").add_subparsers(
        dest="action", required=True
    )
    create = hooks.add_parser("create", help="a new endpoint; its secret is shown only now")
    create.add_argument("account")
    # Positional, and not `url`: the top-level --url is the admin listener's address.
    create.add_argument("endpoint_url", metavar="URL")
    create.add_argument("--events", nargs="+", choices=EVENT_TYPES, default=list(EVENT_TYPES))
    create.add_argument("--description", default="")
    hooks.add_parser("list").add_argument("account")
    for action in _BY_ID:
        hooks.add_parser(action).add_argument("id")
    redeliver = hooks.add_parser("redeliver", help="send an event to the endpoint again")
    redeliver.add_argument("id")
    redeliver.add_argument("event_id")


def add_hash_bank_commands(groups: argparse._SubParsersAction) -> None:
    bank = groups.add_parser("hashbank", help="an account's bank of rejected images' PDQ hashes").add_subparsers(
        dest="action", required=True
    )
    listing = bank.add_parser("list")
    listing.add_argument("account")
    listing.add_argument("--limit", type=int, default=100)
    remove = bank.add_parser("remove", help="take a hash out: the image is judged by the models again")
    remove.add_argument("account")
    remove.add_argument("hash")
    bank.add_parser("export", help="HMA's CSV on stdout").add_argument("account")
    load = bank.add_parser("import", help="HMA's CSV from a file")
    load.add_argument("account")
    load.add_argument("file", type=Path)


def hash_bank_request(args: argparse.Namespace) -> tuple[str, str, dict]:
    path = f"/admin/v1/accounts/{args.account}/hash-bank"
    if args.action == "list":
        return "GET", path, {"params": {"limit": args.limit}}
    if args.action == "remove":
        return "DELETE", f"{path}/{args.hash}", {}
    if args.action == "export":
        return "GET", f"{path}/export", {}
    return "POST", f"{path}/import", {"content": args.file.read_bytes(), "headers": {"content-type": "text/csv"}}


def webhook_request(args: argparse.Namespace) -> tuple[str, str, dict]:
    """The (method, path, httpx keyword arguments) of a `webhooks` command."""
    action = args.action
    if action == "create":
        body = {"url": args.endpoint_url, "events": args.events, "description": args.description}
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
