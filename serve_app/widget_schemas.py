"""The browser widget's request and answer bodies (serve_app/routes_widget.py), and how the OpenAPI document states
the bodies the handlers read themselves."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from policy import widget_tokens
from policy.types import Action, ContentKind

# A token request or a redemption is a few small fields; a verdict is about 400 characters.
SMALL_BODY_BYTES = 4096
MAX_VERDICT_CHARS = 2048
SHA256_PATTERN = "^[0-9a-fA-F]{64}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TokenRequest(_Strict):
    minutes: int = Field(default=widget_tokens.DEFAULT_TOKEN_MINUTES, ge=1, le=widget_tokens.MAX_TOKEN_MINUTES)
    uses: int = Field(default=widget_tokens.DEFAULT_TOKEN_USES, ge=1, le=widget_tokens.MAX_TOKEN_USES)


class WidgetToken(BaseModel):
    token: str = Field(description="The page's check-only credential (`wt_...`); never the API key.")
    expires_at: float
    uses: int
    origins: list[str] = Field(description="The page origins the key allows; a check from any other is refused.")


class WidgetCheck(BaseModel):
    decision: Action
    may_post: bool = Field(description="Whether the widget offers to post the content as it is.")
    verdict: str = Field(description="The signed verdict the site's backend redeems once.")
    verdict_expires_at: float
    uses_left: int


class RedeemRequest(_Strict):
    verdict: str = Field(min_length=1, max_length=MAX_VERDICT_CHARS)
    # Required, so that no backend forgets it: bytes checked as a text prove nothing about the same bytes as a photo.
    kind: ContentKind = Field(description="What the backend received the content as: `text` or `image`.")
    content_sha256: str = Field(pattern=SHA256_PATTERN)


class RedeemedVerdict(BaseModel):
    decision: Action
    kind: ContentKind
    issued_at: float
    origin: str


def _json_body(model: type[BaseModel], required: bool) -> dict:
    return {"requestBody": {"required": required,
                            "content": {"application/json": {"schema": model.model_json_schema()}}}}  # fmt: skip


TOKEN_BODY = _json_body(TokenRequest, required=False)
REDEEM_BODY = _json_body(RedeemRequest, required=True)
CHECK_TEXT_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "additionalProperties": False, "required": ["text"],
    "properties": {"text": {"type": "string", "description": "The text; at most the plan's characters (413 above)."}},
}}}}}  # fmt: skip
CHECK_IMAGE_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["image"],
    "properties": {"image": {"type": "string", "format": "binary", "description": "The photo."}},
}}}}}  # fmt: skip
