"""The rooms of the store and the homes of the rules, so that a newcomer's first guess keeps finding them.

- `store/` is a map: its opening lines name every room and module, each room's opening lines name its files, and a
  room imports only `redis_keys` and the rooms it builds on. Lua lives only in a room's `lua.py`; the store knows
  nothing of HTTP.
- `webhooks/` names, in its opening lines, every file of the service that deals with webhooks, wherever it lives.
- A rule spread over several files has one home that names every part (`HOMES`): each part named there exists, and
  the home names it. The table of rules in docs/architecture.md lists each rule's home.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STORE = ROOT / "store"
# Which rooms each room of the store may import (every room may import `store.redis_keys`).
ROOM_IMPORTS: dict[str, set[str]] = {
    "keys": set(),
    "review": {"webhooks", "hash_bank", "labels"},
    "labels": set(),
    "webhooks": set(),
    "people": set(),
    "hash_bank": set(),
    "widget": {"keys"},
}


def docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def rooms() -> list[str]:
    return sorted(p.parent.name for p in STORE.glob("*/__init__.py"))


def test_the_store_rooms_are_the_known_ones():
    assert rooms() == sorted(ROOM_IMPORTS)


def test_the_store_map_names_every_room_and_module():
    opening = docstring(STORE / "__init__.py")
    named = [f"`{room}/`" for room in rooms()] + [f"`{p.name}`" for p in STORE.glob("*.py") if p.name != "__init__.py"]
    assert [name for name in named if name not in opening] == []


@pytest.mark.parametrize("room", sorted(ROOM_IMPORTS))
def test_each_room_names_its_files(room):
    opening = docstring(STORE / room / "__init__.py")
    files = sorted(p.name for p in (STORE / room).glob("*.py") if p.name != "__init__.py")
    assert [name for name in files if f"`{name}`" not in opening] == []


def _store_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "store":
            parts = node.module.split(".")
            found |= {parts[1]} if len(parts) > 1 else {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("store.")}
    return found


@pytest.mark.parametrize("room", sorted(ROOM_IMPORTS))
def test_a_room_imports_only_the_rooms_it_builds_on(room):
    wrong = {
        f"{path.relative_to(ROOT)} imports store.{other}"
        for path in (STORE / room).glob("*.py")
        for other in _store_imports(path) - {room, "redis_keys"} - ROOM_IMPORTS[room]
    }
    assert sorted(wrong) == []


def test_the_top_level_store_modules_import_no_room():
    wrong = {f"{p.name}: {sorted(_store_imports(p) - {'redis_keys'})}" for p in STORE.glob("*.py")
             if _store_imports(p) - {"redis_keys"}}  # fmt: skip
    assert sorted(wrong) == []


def test_lua_lives_only_in_a_rooms_lua_py():
    strays = [
        str(path.relative_to(ROOT))
        for path in STORE.rglob("*.py")
        if path.name != "lua.py" and "redis.call(" in path.read_text()
    ]
    assert strays == []


def test_the_store_knows_nothing_of_http():
    text = {str(p.relative_to(ROOT)): p.read_text() for p in STORE.rglob("*.py")}
    assert [where for where, source in text.items() if re.search(r"request\.state|fastapi|starlette", source)] == []


def test_webhooks_opening_lines_name_every_webhook_file():
    opening = docstring(ROOT / "webhooks" / "__init__.py")
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = [
        name for name in listed.split()
        if "webhook" in name and not name.startswith("tests/") and not name.endswith("__init__.py")
    ]  # fmt: skip
    assert files and [name for name in files if name not in opening] == []


# A rule spread over several files: its home, and each part as (file, the name defined there). The home's opening
# lines name every part's file (unless it is the home) and name.
HOMES: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "an API key's rate limit": ("store/keys/rate_limit.py", [
        ("config/plans.yaml", "rate_per_second"),
        ("policy/types.py", "Plan.rate_per_second"),
        ("policy/types.py", "Plan.burst"),
        ("store/redis_keys.py", "RATE_BUCKET_PREFIX"),
        ("store/keys/lua.py", "TAKE_RATE_TOKEN"),
        ("store/keys/lua.py", "AUTHORIZE"),
        ("store/keys/config.py", "ConfigStore.authorize"),
        ("serve_app/auth.py", "_caller"),
        ("serve_app/errors.py", "RateLimited"),
        ("serve_app/services.py", "count_rate_refusal"),
        ("store/keys/rate_limit.py", "RateRefusals"),
        ("policy/widget_tokens.py", "ADDRESS_RATE_PER_S"),
        ("store/widget/lua.py", "WIDGET_AUTHORIZE"),
        ("runtime/haproxy_rules.py", "SourceLimits"),
    ]),
    "session expiry": ("store/people/sessions.py", [
        ("store/people/sessions.py", "SESSION_TTL_S"),
        ("store/people/sessions.py", "SessionStore.create"),
        ("store/people/sessions.py", "SessionStore.end"),
        ("dashboard/auth.py", "set_session_cookie"),
        ("dashboard/auth.py", "signed_in"),
        ("dashboard/routes_login.py", "logout"),
    ]),
    "CSRF": ("dashboard/csrf.py", [
        ("dashboard/auth.py", "set_cookie"),
        ("store/people/sessions.py", "Session.csrf_token"),
        ("store/people/sessions.py", "SessionStore.create"),
        ("dashboard/pages.py", "render"),
        ("dashboard/csrf.py", "checked_form"),
        ("dashboard/csrf.py", "LOGIN_COOKIE"),
        ("dashboard/csrf.py", "check_login_token"),
    ]),
    "an upload's limits": ("models/image_upload.py", [
        ("config/plans.yaml", "image_max_bytes"),
        ("config/plans.yaml", "image_max_pixels"),
        ("policy/types.py", "Plan.image_max_bytes"),
        ("policy/types.py", "Plan.image_max_pixels"),
        ("policy/types.py", "MAX_IMAGE_BYTES"),
        ("models/image_decoding.py", "MAX_TOTAL_PIXELS"),
        ("models/image_decoding.py", "MAX_SCAN_FRAMES"),
        ("models/image_decoding.py", "MAX_FRAMES"),
        ("serve_app/bodies.py", "read_image_form"),
        ("serve_app/bodies.py", "image_too_large"),
        ("serve_app/form_reader.py", "read_form"),
        ("serve_app/form_reader.py", "FORM_OVERHEAD_BYTES"),
        ("serve_app/form_reader.py", "PartTooLarge"),
        ("serve_app/routes_openai.py", "_image_bytes"),
        ("serve_app/routes_openai.py", "body_limit"),
        ("moderation/errors.py", "UploadTooLarge"),
        ("moderation/items.py", "image_item"),
        ("models/image_upload.py", "ImageUpload.max_pixels"),
        ("models/image_decoding.py", "decode_image"),
        ("models/image_decoding.py", "_walk_structure"),
        ("models/image_decoding.py", "ImageTooLarge"),
        ("serve_app/errors.py", "_IMAGE_TOO_LARGE"),
    ]),
    "the per-account correction": ("adaptation/correction.py", [
        ("adaptation/labels.py", "Label"),
        ("moderation/label_evidence.py", "label_evidence"),
        ("store/labels/labels.py", "LabelStore"),
        ("store/labels/lua.py", "KEEP_DECIDED_LABEL"),
        ("adaptation/correction.py", "fit_correction"),
        ("adaptation/correction.py", "MIN_AUDITED_PER_CLASS"),
        ("adaptation/correction.py", "Correction.score"),
        ("moderation/site_adaptation.py", "SiteAdaptation.refit"),
        ("moderation/site_adaptation.py", "refit_due_accounts"),
        ("runtime/admin_server.py", "BackgroundRefits"),
        ("store/labels/corrections.py", "CorrectionStore"),
        ("moderation/text_correction.py", "AccountCorrections.live"),
        ("moderation/text_correction.py", "corrected"),
        ("moderation/flow.py", "ModerationFlow._corrected"),
        ("admin/routes_adaptation.py", "adaptation_status"),
        ("admin/routes_adaptation.py", "refit"),
        ("admin/routes_adaptation.py", "reset"),
        ("dashboard/routes_adaptation.py", "adaptation_page"),
        ("dashboard/routes_adaptation.py", "refit"),
        ("dashboard/routes_adaptation.py", "reset"),
        ("runtime/cli.py", "ADAPTATION_COMMANDS"),
        ("bench/adaptation.py", "measure"),
        ("training/eval_site.py", "simulate"),
    ]),
    "the login brake": ("store/people/login_brake.py", [
        ("store/people/login_brake.py", "MAX_FAILURES_PER_ADDRESS"),
        ("store/people/login_brake.py", "MAX_FAILURES_PER_NAME"),
        ("store/people/login_brake.py", "MAX_WRONG_CURRENT_PASSWORDS"),
        ("store/people/login_brake.py", "LOGIN_WINDOW_S"),
        ("store/people/login_brake.py", "LoginBrake.take"),
        ("store/people/login_brake.py", "LoginBrake.succeeded"),
        ("store/people/login_brake.py", "LoginBrake.give_back"),
        ("store/people/login_brake.py", "LoginBrake.take_password_check"),
        ("store/people/login_brake.py", "LoginBrake.give_back_password_check"),
        ("store/people/lua.py", "TAKE_LOGIN_ATTEMPT"),
        ("store/people/lua.py", "TAKE_PASSWORD_CHECK"),
        ("store/people/lua.py", "GIVE_BACK_GUESSES"),
        ("store/redis_keys.py", "login_failures"),
        ("store/redis_keys.py", "login_failures_from"),
        ("store/redis_keys.py", "password_check_failures"),
        ("store/people/users.py", "valid_login_name"),
        ("store/people/hash_pool.py", "HashesBusy"),
        ("dashboard/routes_login.py", "login"),
        ("dashboard/routes_login.py", "client_address"),
        ("dashboard/routes_login.py", "BRAKE_MESSAGES"),
        ("dashboard/routes_login.py", "_failed"),
        ("dashboard/routes_people.py", "_check_current_password"),
        ("dashboard/stores.py", "DashboardStores.login_brake"),
    ]),
    "quota refunds": ("store/keys/quota.py", [
        ("moderation/flow.py", "_Charged"),
        ("moderation/flow.py", "first_unit_held"),
        ("moderation/flow.py", "give_back_first_unit"),
        ("moderation/flow.py", "_give_back_units"),
        ("serve_app/auth.py", "admitted_caller"),
        ("serve_app/auth.py", "_caller"),
        ("store/keys/quota.py", "QuotaStore.give_back_quota"),
        ("store/keys/quota.py", "month_of"),
        ("store/keys/quota.py", "QuotaStore.release_slot"),
        ("store/keys/lua.py", "GIVE_BACK_QUOTA"),
        ("store/keys/lua.py", "LET_THROUGH_WHEN_FULL"),
    ]),
}  # fmt: skip


def _defined(tree: ast.Module, dotted: str) -> bool:
    """Whether `dotted` ("name" or "Class.member") is defined at the top of `tree`."""
    scope: list[ast.stmt] = tree.body
    for part in dotted.split("."):
        found = None
        for node in scope:
            names = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            if part in names:
                found = node
                break
        if found is None:
            return False
        scope = getattr(found, "body", [])
    return True


@pytest.mark.parametrize("rule", sorted(HOMES))
def test_each_part_named_by_a_rules_home_exists(rule):
    _, parts = HOMES[rule]
    missing = []
    for where, name in parts:
        path = ROOT / where
        if not path.exists():
            missing.append(f"{where} (no such file)")
        elif where.endswith(".py") and not _defined(ast.parse(path.read_text()), name):
            missing.append(f"{where} {name}")
        elif not where.endswith(".py") and name not in path.read_text():
            missing.append(f"{where} {name}")
    assert missing == []


@pytest.mark.parametrize("rule", sorted(HOMES))
def test_a_rules_home_names_every_part(rule):
    home, parts = HOMES[rule]
    opening = docstring(ROOT / home)
    unnamed = [
        f"{where} {name}" for where, name in parts
        if (where != home and where not in opening) or name.split(".")[-1] not in opening
    ]  # fmt: skip
    assert unnamed == []


def test_the_architecture_page_lists_each_rules_home():
    page = (ROOT / "docs" / "architecture.md").read_text()
    rows = {row.split("|")[1].strip(): row for row in page.splitlines() if row.startswith("| ") and row.count("|") >= 3}
    assert [rule for rule, (home, _) in HOMES.items() if f"`{home}`" not in rows.get(rule, "")] == []


def test_the_layout_tables_name_every_room_of_the_store():
    for document in ("README.md", "docs/architecture.md"):
        row = next(line for line in (ROOT / document).read_text().splitlines() if line.startswith("| `store/` |"))
        assert [room for room in rooms() if f"`{room}/`" not in row] == [], document
