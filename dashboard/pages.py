"""Renders the dashboard's Jinja2 templates (dashboard/templates), autoescaped, with what every page
shows: the signed-in user, the CSRF token for its forms, the navigation of the user's role."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import jinja2
from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import Response

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=True, undefined=jinja2.StrictUndefined
)


def _when(at: float | None) -> str:
    return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if at else ""


def _age(at: float | None) -> str:
    if not at:
        return ""
    seconds = max(0, int(time.time() - at))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


_env.filters["when"] = _when
_env.filters["age"] = _age
templates = Jinja2Templates(env=_env)


def render(request: Request, template: str, status: int = 200, **context) -> Response:
    viewer = getattr(request.state, "viewer", None)
    context.setdefault("viewer", viewer)
    context.setdefault("csrf_token", viewer.session.csrf_token if viewer else "")
    context.setdefault("notice", "")
    return templates.TemplateResponse(request, template, context, status_code=status)
