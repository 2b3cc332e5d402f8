"""How an upload's bytes reach the ImageModel (deployments/handles.py): up to INLINE_UPLOAD_MAX_BYTES inside Serve's
own call message (no copy through the object store), larger ones by reference, which has no size cap."""

from __future__ import annotations

import pytest

from deployments.handles import INLINE_UPLOAD_MAX_BYTES, ServeBackends
from models.image_scoring import ImageScores
from models.image_upload import ImageUpload, ScoredImage

SCORED = ScoredImage(ImageScores({"nsfw": 0.1}, 0.9, "nsfw=v"), "JPEG", 10, 10)


class ImageHandle:
    """A handle and its by-reference twin (`options(_by_reference=True)`), each recording the uploads it was sent."""

    def __init__(self, by_reference: bool = False):
        self.by_reference, self.sent = by_reference, []
        self.twin = self if by_reference else ImageHandle(by_reference=True)
        self.score_upload = self

    def options(self, _by_reference: bool = False):
        return self.twin if _by_reference else self

    def remote(self, upload: ImageUpload):
        self.sent.append(len(upload.data))

        async def answered():
            return SCORED

        return answered()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "size, by_reference",
    [(70_000, False), (INLINE_UPLOAD_MAX_BYTES, False), (INLINE_UPLOAD_MAX_BYTES + 1, True), (8 * 2**20, True)],
)
async def test_small_uploads_travel_inline_and_large_ones_by_reference(size, by_reference):
    image = ImageHandle()
    backends = ServeBackends(image, object(), object())
    assert await backends.score_upload(ImageUpload(b"x" * size, 1_000_000, ("nsfw",))) == SCORED
    assert (image.twin.sent if by_reference else image.sent) == [size]
    assert (image.sent if by_reference else image.twin.sent) == []


def test_inline_uploads_fit_rays_default_message_cap_with_room_to_spare():
    # Serve's replicas refuse a call message over 4 MiB unless RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH raises it,
    # which `serve run` or a KubeRay pod would not set: an inline upload and its envelope must stay well below.
    assert INLINE_UPLOAD_MAX_BYTES <= 4 * 2**20 // 2
