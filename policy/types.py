"""The records the rules work with: plans, profiles, keys, review items.

Plain pydantic models with their validation rules, shared by the store, the decision
logic, the admin API and the config seeding. No Ray, no FastAPI, no Redis here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Scope = Literal["images", "text", "both"]
Mode = Literal["monitor", "review", "enforce"]
Action = Literal["allow", "review", "block"]
ReviewStatus = Literal["pending", "approved", "rejected"]
ReviewReason = Literal["model_flagged", "report_threshold", "audit"]
ContentKind = Literal["image", "text"]

# text_toxic: the words written on the image (read by models/image_text.py), scored by the text model as a comment:
# its strictest enabled text category, moved onto text_toxic's own thresholds (policy/decisions.py).
IMAGE_CATEGORIES = ("nsfw", "weapon", "violence", "text_toxic")
# violent_speech is text that threatens, plans or incites violence against a person or a group; `violence` is the
# image model's (a profile keys thresholds by category name, and the two models' scores are on different scales).
TEXT_CATEGORIES = ("toxic", "insult", "threat", "identity_attack", "sexual", "profanity", "self_harm", "violent_speech")
# Beta: too little real evaluation data to vouch for the scores; a profile must enable them.
BETA_CATEGORIES = ("weapon", "violence", "text_toxic", "sexual", "self_harm", "violent_speech")
# The image category that the text model scores (the words read on the image), not an image model.
IMAGE_TEXT_CATEGORY = "text_toxic"
# Always on: every image is scored for nsfw, every text for toxic.
PRIMARY_CATEGORIES = {"image": "nsfw", "text": "toxic"}

MIB = 1024 * 1024
# The largest input limits an operator may give a plan. Images: a phone photo is 3-8 MB, a 4K PNG screenshot up to
# about 25 MB; every upload is held in memory while it is checked and scored, so no more than this. Texts: a batch of
# them (at most ten times the limit, moderation/limits.py) must fit one message to the text model
# (moderation/model_messages.py), which `make serve` checks against the transport at start.
MAX_IMAGE_BYTES = 64 * MIB
MAX_TEXT_CHARS = 100_000
# The longest `reference` or `image_url`, in characters: what the API accepts and the review queue stores.
MAX_FIELD_CHARS = 4096
# The most of a text a review item keeps for the moderator (its start; the item records the whole text's length).
# A text's own limit is the plan's (up to MAX_TEXT_CHARS): kept whole, 10,000 pending items of one account could hold
# gigabytes. 4,096 characters cover a comment or a post, and bound an item's text to ~16 KB of UTF-8.
MAX_REVIEW_TEXT_CHARS = 4096


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _OperatorSet(_Strict):
    """What operators write (plans, profiles): every number finite. JSON has no inf or NaN (`1e999` parses as inf),
    pydantic would store one as null, and the record could never be read back (a plan's rate of inf took the
    plans and keys pages and every request on that plan down)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Plan(_OperatorSet):
    """What a key may do: content scope, monthly quota, rate limit, input limits and work in progress."""

    name: str = ""
    scope: Scope
    monthly_quota: int = Field(ge=0)
    rate_per_second: float = Field(gt=0)
    burst: int = Field(ge=1)
    image_max_bytes: int = Field(default=10 * MIB, ge=1, le=MAX_IMAGE_BYTES)
    image_max_pixels: int = Field(default=40_000_000, ge=1)
    text_max_chars: int = Field(default=20_000, ge=1, le=MAX_TEXT_CHARS)
    # Moderation requests of one account in progress at once, across every ingress replica (429 past it). Sized so
    # that ordinary traffic never meets it, and one account alone fills at most half of a model replica's queue.
    max_in_flight: int = Field(default=32, ge=1, le=1_000)

    def covers(self, kind: ContentKind) -> bool:
        return self.scope == "both" or self.scope == {"image": "images", "text": "text"}[kind]


class CategoryThresholds(_OperatorSet):
    """Review and block thresholds of one category; `review <= block`."""

    enabled: bool = True
    review: float = Field(ge=0, le=1)
    block: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _review_not_above_block(self) -> CategoryThresholds:
        if self.review > self.block:
            raise ValueError("review threshold must not be above the block threshold")
        return self


class Profile(_OperatorSet):
    """A moderation policy pinned to keys: mode, per-category thresholds, report threshold."""

    name: str = ""
    mode: Mode
    report_threshold: int = Field(default=3, ge=0)
    categories: dict[str, CategoryThresholds]
    # A text queued for review keeps its text for the moderator for as long as the item is kept; False keeps none
    # (the moderator then sees only the reference). Images are never stored, whatever this says.
    keep_review_text: bool = True
    # The browser widget's warnings after which the person may still post ("post anyway"); after the others they can
    # only edit. The site's backend decides in the end: it sees the decision in the verdict it redeems.
    widget_post_anyway: list[Literal["review", "block"]] = Field(default_factory=lambda: ["review"])
    # Audits: this share of the texts and images the profile allows or the models block is queued for review with
    # reason `audit`, the client's answer unchanged. Moderators otherwise see only what the model flagged; a random
    # sample of the rest is what lets an account's backtest count misses and false blocks, and its correction learn
    # without learning the model's own flags.
    audit_rate: float = Field(default=0.0, ge=0, le=1)
    # Whether an image's answer says the words read on it (`text_read.text`, when `text_toxic` is enabled). Off by
    # default: what was read is content, as a comment's text is; its review item keeps it as `keep_review_text` says.
    answer_image_text: bool = False
    # The share of benign texts that the backtest's suggested thresholds may send to review (adaptation/backtest.py).
    target_benign_flagged: float = Field(default=0.10, gt=0, lt=1)

    @model_validator(mode="after")
    def _known_categories(self) -> Profile:
        known = set(IMAGE_CATEGORIES) | set(TEXT_CATEGORIES)
        unknown = set(self.categories) - known
        if unknown:
            raise ValueError(f"unknown categories: {sorted(unknown)}")
        for required in PRIMARY_CATEGORIES.values():
            if required not in self.categories:
                raise ValueError(f"category {required!r} is required")
            if not self.categories[required].enabled:
                raise ValueError(f"category {required!r} cannot be disabled")
        return self

    def enabled_categories(self, kind: ContentKind) -> list[str]:
        names = IMAGE_CATEGORIES if kind == "image" else TEXT_CATEGORIES
        return [c for c in names if c in self.categories and self.categories[c].enabled]

    @property
    def reads_image_text(self) -> bool:
        return IMAGE_TEXT_CATEGORY in self.enabled_categories("image")


class ApiKey(_Strict):
    """A stored key; the secret itself is never stored, only its SHA-256."""

    id: str
    account: str
    profile: str
    plan: str
    created_at: float
    revoked: bool = False


class ReviewItem(_Strict):
    """An item of the human review queue."""

    id: int
    account: str
    status: ReviewStatus
    reason: ReviewReason
    kind: ContentKind | None = None  # None for items escalated by reports
    reference: str | None = None
    image_url: str | None = None
    scores: dict[str, float] = Field(default_factory=dict)
    model_version: str | None = None
    created_at: float
    decided_at: float | None = None
    pdq: str | None = None  # an image item's PDQ hash (64 hex digits), never the image: the hash bank learns it
    # A text item's text (its first MAX_REVIEW_TEXT_CHARS characters), unless its profile keeps none
    # (`Profile.keep_review_text`); `text_chars`: the whole text's length, so a cut one says so.
    text: str | None = None
    text_chars: int | None = None
    profile: str | None = None  # the profile that decided it, for the thresholds the moderator is shown
    decided_by: str | None = None  # who decided: a dashboard user's name, or "admin-token"
    reason_code: str | None = None  # why, as the moderator chose it (dashboard/reasons.py)
