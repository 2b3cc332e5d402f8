"""Everything a request handler reaches: the stores, the moderation flow, the model backends."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from models.text_scoring import TextRequest
from moderation.backends import ModelBackends
from moderation.flow import Caller, Item, ModerationFlow, TextBatch, ready
from policy.feedback import FeedbackStore
from policy.limits import Limits
from policy.review_queue import ReviewQueue, ReviewRules
from policy.store import ConfigStore
from serve_app.deadlines import TimeLimits


@dataclass
class Services:
    config: ConfigStore
    limits: Limits
    reviews: ReviewQueue
    backends: ModelBackends | None  # None in the admin app, which scores nothing
    flow: ModerationFlow
    time_limits: TimeLimits = TimeLimits()
    feedback: FeedbackStore | None = None  # score suggestions of the Perspective-compatible API

    def text_item(
        self,
        caller: Caller,
        text: str,
        categories: tuple[str, ...] = (),
        batch: TextBatch | None = None,
        **where: str | None,
    ) -> Item:
        """A text for the flow, scored for the profile's categories and `categories`; `where`: reference, image_url.

        `batch`: the request's other texts go with it in one model call (`text_batch()`); without, the text is
        scored alone, batched by the model deployment with other requests' texts.
        """
        wanted = dict.fromkeys((*caller.profile.enabled_categories("text"), *categories))
        request = TextRequest(text=text, categories=tuple(wanted))
        score = batch.scorer(request) if batch else self.backends.score_text
        return Item(kind="text", prepare=ready(request), score=score, **where)

    def text_batch(self, texts: int) -> TextBatch | None:
        """One model call for a request's `texts` texts, when there are several."""
        return TextBatch(self.backends.score_texts) if texts > 1 else None

    def image_item(self, caller: Caller, data: bytes, **where: str | None) -> Item:
        """An image for the flow: its bytes go to the model side, decoded there (bounded) after the unit is taken,
        and scored for the profile's categories."""
        from models.image_upload import ImageUpload  # Pillow: only where images are handled

        upload = ImageUpload(
            data=data,
            max_pixels=caller.plan.image_max_pixels,
            categories=tuple(caller.profile.enabled_categories("image")),
        )
        return Item(kind="image", prepare=ready(upload), score=self.backends.score_upload, **where)

    @classmethod
    def connect(
        cls,
        redis_url: str,
        backends: ModelBackends | None,
        *,
        inference_timeout_s: float = 30.0,
        time_limits: TimeLimits = TimeLimits(),
        review_rules: ReviewRules | None = None,
        redis_password: str | None = None,
    ) -> Services:
        """`redis_password`: given apart from the URL when the URL must not carry it (None: the URL's own)."""
        redis = Redis.from_url(
            redis_url, password=redis_password, decode_responses=True, socket_timeout=5, socket_connect_timeout=2
        )
        limits, reviews = Limits(redis), ReviewQueue(redis, review_rules)
        return cls(
            config=ConfigStore(redis),
            limits=limits,
            reviews=reviews,
            backends=backends,
            flow=ModerationFlow(limits, reviews, backends, inference_timeout_s),
            feedback=FeedbackStore(redis),
            time_limits=time_limits,
        )
