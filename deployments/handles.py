"""The ingress's model backends under Ray Serve: calls to the deployments' handles.

How an upload reaches the ImageModel, by its size:
- up to INLINE_UPLOAD_MAX_BYTES (1 MiB: most uploads; the bench photos are 32-258 KB), inside the gRPC message that
  Serve's throughput mode uses between replicas, like a text: no copy into Ray's object store. Measured through the
  graph at 16 clients on the nsfw bench photos (2026-11-28): the ingress's CPU per image fell from 5.6 to 4.3 ms and
  a lone image's p50 by several ms against by reference.
- larger, by reference (`_by_reference=True`: a Ray actor call, the bytes through the object store). The gRPC message
  is capped at 4 MiB on the receiving replica (RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH), and a phone photo is 3-8
  MB: over the cap every upload failed as a 503. Raising the cap was measured against the object store
  (`python -m bench.experiments.transport`, docs/image-models.md, Transport): within a few milliseconds of each
  other either way, with the same memory; by reference needs no setting in every Ray process (a cap raised by
  `make serve` would be missing from a `serve run` or a KubeRay cluster, and the 503s would be back). 1 MiB stays
  far below the default cap.
Texts and decisions stay on gRPC: a request's texts fit the cap by construction (moderation/model_messages.py).
"""

from __future__ import annotations

import asyncio
import time

from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle

from deployments.metrics import record_call
from deployments.policy import decide_recorded

from models.image_upload import ImageUpload, ScoredImage, unwrapped
from policy.decisions import Decision
from policy.types import ContentKind, Profile
from models.text_scoring import TextRequest, TextScores
from moderation.errors import Overloaded


INLINE_UPLOAD_MAX_BYTES = 1024 * 1024  # see the module docstring


class ServeBackends:
    def __init__(
        self, image: DeploymentHandle, text: DeploymentHandle, policy: DeploymentHandle, *, policy_hop: bool = False
    ):
        """`policy_hop`: send each request's decisions to the Policy deployment (a Ray call); else decide here with
        the same function (deployments/policy.py says why that is the default)."""
        self._image, self._image_by_reference = image, image.options(_by_reference=True)
        self._text, self._policy, self._policy_hop = text, policy, policy_hop

    async def score_upload(self, upload: ImageUpload) -> ScoredImage:
        image = self._image if len(upload.data) <= INLINE_UPLOAD_MAX_BYTES else self._image_by_reference
        return unwrapped(await _unless_full(image.score_upload.remote(upload), "image"))

    async def score_text(self, request: TextRequest) -> TextScores:
        return await _unless_full(self._text.score.remote(request), "text")

    async def score_texts(self, requests: list[TextRequest]) -> list[TextScores]:
        return await _unless_full(self._text.score_many.remote(requests), "text")

    async def decide_many(
        self, items: list[tuple[dict[str, float], ContentKind]], profile: Profile, threshold: float | None
    ) -> list[Decision]:
        if not self._policy_hop:
            return decide_recorded(items, profile, threshold)
        return await _unless_full(self._policy.decide_many.remote(items, profile, threshold), "policy")

    async def model_versions(self) -> dict[str, str]:
        image, text, _ = await asyncio.gather(
            self._image.model_versions.remote(),
            self._text.model_versions.remote(),
            self._policy.model_versions.remote(),
        )
        return {**image, **text}


async def _unless_full(response, target: str):
    """A deployment whose queue is full (max_queued_requests) is a 503 `overloaded`, not a model failure; a call
    given up on is cancelled on the replica too.

    Each call's latency, as the ingress sees it (queue and hop included), goes to the metrics by outcome.
    """
    started, outcome = time.perf_counter(), "error"
    try:
        result = await response
        outcome = "ok"
        return result
    except BackPressureError as exc:
        outcome = "overloaded"
        raise Overloaded() from exc
    except asyncio.CancelledError:
        # The request timed out (the flow's inference deadline) or its client hung up: tell the replica, which drops
        # the call if it still waits in a queue or a batch, rather than spend a model's time on an answer no one reads.
        outcome = "cancelled"
        cancel = getattr(response, "cancel", None)
        if cancel is not None:
            cancel()
        raise
    finally:
        record_call(target, outcome, time.perf_counter() - started)
