"""The README stays true: every error code and every setting of the code is documented there."""

from __future__ import annotations

from serve_app import errors
from runtime.settings import PROJECT_ROOT, Settings

README = (PROJECT_ROOT / "README.md").read_text()


def test_every_error_code_is_in_the_error_table():
    answers = {(kind.status, kind.code) for kind in errors.every_error_kind()}
    assert sorted((status, code) for status, code in answers if f"| {status} | `{code}` |" not in README) == []


def test_every_setting_is_in_the_environment_table():
    names = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names.append(alias if isinstance(alias, str) else f"MODERATION_{name.upper()}")
    assert [name for name in names if f"`{name}`" not in README] == []
