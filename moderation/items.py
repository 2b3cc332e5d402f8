"""The items of a request, built for the moderation flow: each one what its model takes, scored for the categories
the caller's profile enables (its kind's primary category always among them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from models.decision_route import DECIDES_NOTHING, CategoryLimits, DecidingLimits
from models.image_upload import ImageUpload
from models.text_scoring import TextRequest
from policy.types import IMAGE_TEXT_CATEGORY, PRIMARY_CATEGORIES, ContentKind, Plan, Profile


@dataclass(frozen=True)
class Item:
    """One piece of content of a request: its model's input, and what a review item records of it."""

    kind: ContentKind
    content: TextRequest | ImageUpload
    reference: str | None = None
    image_url: str | None = None
    # Text only: (begin, end) parts of the text scored as well (Perspective's span annotations), in the same model
    # call as the whole; they get no decision. Together they are the text again, so they cost one unit more.
    spans: tuple[tuple[int, int], ...] = ()
    # Text only: whether the caller is told a decision on it. Perspective's clients get scores and apply their own
    # cuts, so the cascade cannot route their texts by the profile's thresholds (models/decision_route.py).
    decided: bool = True

    @property
    def units(self) -> int:
        """The quota units the item costs: one, and one more for its spans (at most MAX_SPANS_PER_COMMENT of them,
        covering the text once: about the work of the text itself)."""
        return 2 if self.spans else 1

    def span_requests(self) -> list[TextRequest]:
        """Its spans' requests: scores only, deciding nothing (the cascade answers them with its first stage), the
        whole text's deadline and account."""
        whole = self.content
        return [TextRequest(text=whole.text[begin:end], categories=whole.categories, answer_by=whole.answer_by,
                            limits=DECIDES_NOTHING, account=whole.account) for begin, end in self.spans]  # fmt: skip

    def routed_for(self, account: str, limits: DecidingLimits) -> "Item":
        """A text item with whose it is and, when its caller is told a decision, the thresholds deciding it (the
        cascade routes it by them); any other item as it is."""
        if self.kind != "text":
            return self
        content = replace(self.content, account=account, limits=limits if self.decided else None)
        return replace(self, content=content)


def read_text_request(profile: Profile, text: str, account: str, threshold: float | None = None) -> TextRequest:
    """The words read on an image, as a text request: a comment's, scored for the profile's text categories and its
    cascade routed by their thresholds (`text_toxic` is the strictest of them, moved onto its own thresholds)."""
    return TextRequest(text=text, categories=scored_categories(profile, "text"),
                       limits=deciding_limits(profile, threshold), account=account)  # fmt: skip


def deciding_limits(profile: Profile, threshold: float | None = None) -> DecidingLimits:
    """The thresholds that decide a text under `profile`: each enabled text category's review and block, both
    `threshold` when the request gives one (policy/decisions.py's binary override)."""
    limits = []
    for category in profile.enabled_categories("text"):
        own = profile.categories[category]
        review, block = (own.review, own.block) if threshold is None else (threshold, threshold)
        limits.append(CategoryLimits(category, float(review), float(block)))
    return tuple(limits)


def scored_categories(profile: Profile, kind: ContentKind, requested: Iterable[str] = ()) -> tuple[str, ...]:
    """The primary category of `kind`, the profile's enabled ones, then `requested` ones not among them, once each."""
    return tuple(dict.fromkeys((PRIMARY_CATEGORIES[kind], *profile.enabled_categories(kind), *requested)))


def text_item(
    profile: Profile,
    text: str,
    *,
    requested: Iterable[str] = (),
    spans: Iterable[tuple[int, int]] = (),
    reference: str | None = None,
    image_url: str | None = None,
    answer_by: float | None = None,
    decided: bool = True,
) -> Item:
    """A text, scored for the profile's categories and the `requested` ones (Perspective's attributes); `answer_by`:
    when its caller gives up (TextRequest.answer_by); `decided`: whether its caller is told a decision (Item)."""
    request = TextRequest(text=text, categories=scored_categories(profile, "text", requested), answer_by=answer_by)
    return Item(kind="text", content=request, reference=reference, image_url=image_url, spans=tuple(spans),
                decided=decided)


def image_item(plan: Plan, profile: Profile, data: bytes, *, reference: str | None = None,
               image_url: str | None = None) -> Item:  # fmt: skip
    """An upload's bytes: decoded on the model side, after the quota unit is taken, within the plan's pixels; the
    words on it read when the profile enables `text_toxic` (scored by the text model in the flow, not an image
    model's category)."""
    image_models = tuple(c for c in scored_categories(profile, "image") if c != IMAGE_TEXT_CATEGORY)
    upload = ImageUpload(data=data, max_pixels=plan.image_max_pixels, categories=image_models,
                         read_text=profile.reads_image_text)  # fmt: skip
    return Item(kind="image", content=upload, reference=reference, image_url=image_url)
