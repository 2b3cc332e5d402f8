"""What the moderation flow needs from the models and the policy, whoever runs them.

Under Ray Serve these calls go to the ImageModel, TextModel and Policy deployments
(`deployments/handles.py`); in tests, benchmarks and tools they run in-process
(`moderation/local_backends.py`). The flow only sees this protocol.
"""

from __future__ import annotations

from typing import Protocol

from models.image_upload import ImageUpload, ScoredImage
from models.text_scoring import TextRequest, TextScores
from policy.decisions import Decision
from policy.types import ContentKind, Profile


class ModelBackends(Protocol):
    async def score_upload(self, upload: ImageUpload) -> ScoredImage:
        """Decode the upload's bytes (bounded; raises its ImageRefused errors), then score it."""
        ...

    async def score_text(self, request: TextRequest) -> TextScores:
        """A request's only text; under Ray, batched with other requests' texts (@serve.batch)."""
        ...

    async def score_texts(self, requests: list[TextRequest]) -> list[TextScores]:
        """The texts of one request (a batch's, or a text with its spans), in one model call: a request takes one
        place in the model's queue however many texts it holds."""
        ...

    async def decide_many(
        self, items: list[tuple[dict[str, float], ContentKind]], profile: Profile, threshold: float | None
    ) -> list[Decision]:
        """A decision per (scores, kind), in one call: one Policy hop per request, however many items."""
        ...

    async def model_versions(self) -> dict[str, str]:
        """The loaded model versions; raises when a model is not ready."""
        ...
