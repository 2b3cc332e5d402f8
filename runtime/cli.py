"""`moderation-admin`: the admin API from a terminal.

    moderation-admin keys create --account acme --profile default --plan default
    moderation-admin keys revoke key_0123456789abcdef0123456789abcdef
    moderation-admin keys widget-origins key_0123... https://www.example.com   (none: the widget off for the key)
    moderation-admin keys widget key_0123...       (the key's widget origins and this month's widget use)
    moderation-admin plans get default
    moderation-admin plans put gold --file gold.yaml
    moderation-admin profiles put site-b --file site-b.yaml
    moderation-admin reviews list --status pending
    moderation-admin reviews decide 17 rejected
    moderation-admin usage acme
    moderation-admin feedback acme --limit 20
    moderation-admin audit --limit 50 [--before 1764043200000-0]
    moderation-admin adaptation acme                 (the account's correction: live or not, why, its labels)
    moderation-admin refit acme [--profile site-b]   (fits it now; answers it with the profile's backtest)
    moderation-admin backtest acme site-b            (the profile's recall and benign-flagged share on acme's labels)
    moderation-admin apply-thresholds acme site-b    (writes the backtest's suggested thresholds into site-b)
    moderation-admin reset-adaptation acme           (erases acme's labels and correction)
    moderation-admin webhooks create acme https://hooks.example/moderation         (runtime/cli_webhooks.py)
    moderation-admin hashbank export acme > bank.csv                              (runtime/cli_webhooks.py)
    moderation-admin users create alice --role operator      (asks for the password; or MODERATION_USER_PASSWORD)
    moderation-admin users create bob --account site-a --account site-b      (a moderator of two accounts)
    moderation-admin users assign bob --account site-a       (sets bob's accounts; --role changes the role)
    moderation-admin users list
    moderation-admin users delete alice

The admin listener's address comes from --url or MODERATION_ADMIN_URL (default http://127.0.0.1:8001),
the token from MODERATION_ADMIN_TOKEN. Answers are printed as JSON; a refused call
prints the API's error and exits with 1.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from pathlib import Path

import httpx
import yaml

from runtime.cli_webhooks import add_hash_bank_commands, add_webhook_commands, hash_bank_request, webhook_request

ADAPTATION_COMMANDS = ("adaptation", "refit", "backtest", "apply-thresholds", "reset-adaptation")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="moderation-admin", description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("MODERATION_ADMIN_URL", "http://127.0.0.1:8001"))
    groups = parser.add_subparsers(dest="group", required=True)

    keys = groups.add_parser("keys").add_subparsers(dest="action", required=True)
    create = keys.add_parser("create", help="create a key; its secret is shown only now")
    create.add_argument("--account", required=True)
    create.add_argument("--profile", default="default")
    create.add_argument("--plan", default="default")
    keys.add_parser("revoke").add_argument("id")
    keys.add_parser("get").add_argument("id")
    keys.add_parser("widget", help="a key's widget origins and this month's widget use").add_argument("id")
    origins = keys.add_parser("widget-origins", help="the page origins a key allows for the widget (none: off)")
    origins.add_argument("id")
    origins.add_argument("origins", nargs="*")

    for name in ("plans", "profiles"):
        group = groups.add_parser(name).add_subparsers(dest="action", required=True)
        group.add_parser("get").add_argument("name")
        put = group.add_parser("put", help="create or replace from a YAML or JSON file")
        put.add_argument("name")
        put.add_argument("--file", type=Path, required=True)

    groups.add_parser("usage", help="quota units an account used this month").add_argument("account")
    feedback = groups.add_parser("feedback", help="score suggestions an account sent (comments:suggestscore)")
    feedback.add_argument("account")
    feedback.add_argument("--limit", type=int, default=100)

    audit = groups.add_parser("audit", help="the admin audit log, newest first")
    audit.add_argument("--limit", type=int, default=100)
    audit.add_argument("--before", help="next_before of the previous page")

    _add_adaptation_commands(groups)

    users = groups.add_parser("users", help="dashboard users").add_subparsers(dest="action", required=True)
    new_user = users.add_parser("create", help="a dashboard user; the password is asked for, never an argument")
    new_user.add_argument("name")
    new_user.add_argument("--role", choices=["moderator", "operator"], default="moderator")
    new_user.add_argument("--account", action="append", default=[], help="an account the moderator works on")
    assign = users.add_parser("assign", help="set a user's accounts (all of them) or role")
    assign.add_argument("name")
    assign.add_argument("--role", choices=["moderator", "operator"])
    assign.add_argument("--account", action="append", help="an account the moderator works on (repeat)")
    users.add_parser("list")
    users.add_parser("delete").add_argument("name")

    reviews = groups.add_parser("reviews").add_subparsers(dest="action", required=True)
    listing = reviews.add_parser("list")
    listing.add_argument("--status", choices=["pending", "approved", "rejected"])
    listing.add_argument("--account")
    decide = reviews.add_parser("decide")
    decide.add_argument("id", type=int)
    decide.add_argument("status", choices=["approved", "rejected"])
    add_webhook_commands(groups)
    add_hash_bank_commands(groups)
    return parser


def _add_adaptation_commands(groups: argparse._SubParsersAction) -> None:
    """Each account's correction and a profile's threshold backtest on its labels (docs/configuration.md)."""
    groups.add_parser("adaptation", help="an account's correction: live or not, why, its labels").add_argument(
        "account")
    refit = groups.add_parser("refit", help="fit an account's correction now, on all its labels")
    refit.add_argument("account")
    refit.add_argument("--profile", help="the profile to backtest (default: the one that served most labels)")
    for name, help_text in (("backtest", "a profile's recall and benign-flagged share on an account's labels"),
                            ("apply-thresholds", "write the backtest's suggested thresholds into the profile")):
        command = groups.add_parser(name, help=help_text)
        command.add_argument("account")
        command.add_argument("profile")
    groups.add_parser("reset-adaptation", help="erase an account's labels and correction").add_argument("account")


def _adaptation_request(args: argparse.Namespace) -> tuple[str, str, dict]:
    account = f"/admin/v1/accounts/{args.account}"
    if args.group == "adaptation":
        return "GET", f"{account}/text-adaptation", {}
    if args.group == "refit":
        return "POST", f"{account}/text-adaptation/refit", {"params": {"profile": args.profile}} if args.profile else {}
    if args.group == "reset-adaptation":
        return "DELETE", f"{account}/text-adaptation", {}
    backtest = f"{account}/profiles/{args.profile}/backtest"
    return ("GET", backtest, {}) if args.group == "backtest" else ("POST", f"{backtest}/apply", {})


def _request(args: argparse.Namespace) -> tuple[str, str, dict]:
    """The (method, path, httpx keyword arguments) of a parsed command."""
    group, action = args.group, getattr(args, "action", None)
    if group in ADAPTATION_COMMANDS:
        return _adaptation_request(args)
    if group == "webhooks":
        return webhook_request(args)
    if group == "hashbank":
        return hash_bank_request(args)
    if group == "usage":
        return "GET", f"/admin/v1/accounts/{args.account}/usage", {}
    if group == "feedback":
        return "GET", f"/admin/v1/accounts/{args.account}/feedback", {"params": {"limit": args.limit}}
    if group == "audit":
        params = {"limit": args.limit, **({"before": args.before} if args.before else {})}
        return "GET", "/admin/v1/audit", {"params": params}
    if group == "keys":
        if action == "create":
            body = {"account": args.account, "profile": args.profile, "plan": args.plan}
            return "POST", "/admin/v1/keys", {"json": body}
        if action == "widget-origins":
            return "PUT", f"/admin/v1/keys/{args.id}/widget", {"json": {"origins": args.origins}}
        if action == "widget":
            return "GET", f"/admin/v1/keys/{args.id}/widget", {}
        return ("DELETE" if action == "revoke" else "GET"), f"/admin/v1/keys/{args.id}", {}
    if group == "users":
        return _user_request(args)
    if group in ("plans", "profiles"):
        path = f"/admin/v1/{group}/{args.name}"
        if action == "get":
            return "GET", path, {}
        return "PUT", path, {"json": yaml.safe_load(args.file.read_text())}
    if action == "list":
        params = {k: v for k, v in (("status", args.status), ("account", args.account)) if v}
        return "GET", "/admin/v1/reviews", {"params": params}
    return "POST", f"/admin/v1/reviews/{args.id}/decision", {"json": {"status": args.status}}


def _user_request(args: argparse.Namespace) -> tuple[str, str, dict]:
    if args.action == "list":
        return "GET", "/admin/v1/users", {}
    if args.action == "delete":
        return "DELETE", f"/admin/v1/users/{args.name}", {}
    if args.action == "assign":
        body = {"role": args.role, "accounts": args.account}
        return "PATCH", f"/admin/v1/users/{args.name}", {"json": {k: v for k, v in body.items() if v is not None}}
    # Never a command-line argument: those are visible to every user of the machine (ps) and kept in shell history.
    password = os.environ.get("MODERATION_USER_PASSWORD") or getpass.getpass(f"Password for {args.name}: ")
    body = {"name": args.name, "role": args.role, "password": password, "accounts": args.account}
    return "POST", "/admin/v1/users", {"json": body}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    token = os.environ.get("MODERATION_ADMIN_TOKEN")
    if not token:
        print("MODERATION_ADMIN_TOKEN is not set.", file=sys.stderr)
        return 2
    method, path, options = _request(args)
    headers = {"Authorization": f"Bearer {token}", **options.pop("headers", {})}
    try:
        response = httpx.request(method, args.url.rstrip("/") + path, headers=headers, timeout=30, **options)
    except httpx.HTTPError as exc:
        print(f"cannot reach {args.url}: {exc}", file=sys.stderr)
        return 1
    if response.status_code == 204:
        print(json.dumps({"ok": True}))
    elif response.headers.get("content-type", "").startswith("text/csv"):
        print(response.text, end="")  # a hash bank export, as it is
    else:
        print(json.dumps(response.json(), indent=2))
    return 0 if response.is_success else 1


if __name__ == "__main__":
    sys.exit(main())
