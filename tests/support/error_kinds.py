"""Every error kind the API answers with: those serve_app/errors.py defines and the domain errors' (README's error
table lists each)."""

from __future__ import annotations

from serve_app import errors


def every_error_kind() -> set[errors.ErrorKind]:
    return {value for value in vars(errors).values() if isinstance(value, errors.ErrorKind)} | set(
        errors.DOMAIN_ERRORS.values()
    )
