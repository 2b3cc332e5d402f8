"""The items of a request, built for the moderation flow: each one what its model takes, scored for the categories
the caller's profile enables (its kind's primary category always among them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from models.image_upload import ImageUpload
from models.text_scoring import TextRequest
from policy.types import PRIMARY_CATEGORIES, ContentKind, Plan, Profile


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

    @property
    def units(self) -> int:
        """The quota units the item costs: one, and one more for its spans (at most MAX_SPANS_PER_COMMENT of them,
        covering the text once: about the work of the text itself)."""
        return 2 if self.spans else 1

    def span_requests(self) -> list[TextRequest]:
        whole = self.content
        return [TextRequest(text=whole.text[begin:end], categories=whole.categories, answer_by=whole.answer_by)
                for begin, end in self.spans]  # fmt: skip


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
) -> Item:
    """A text, scored for the profile's categories and the `requested` ones (Perspective's attributes); `answer_by`:
    when its caller gives up (TextRequest.answer_by)."""
    request = TextRequest(text=text, categories=scored_categories(profile, "text", requested), answer_by=answer_by)
    return Item(kind="text", content=request, reference=reference, image_url=image_url, spans=tuple(spans))


def image_item(plan: Plan, profile: Profile, data: bytes, *, reference: str | None = None,
               image_url: str | None = None) -> Item:  # fmt: skip
    """An upload's bytes: decoded on the model side, after the quota unit is taken, within the plan's pixels."""
    upload = ImageUpload(data=data, max_pixels=plan.image_max_pixels, categories=scored_categories(profile, "image"))
    return Item(kind="image", content=upload, reference=reference, image_url=image_url)
