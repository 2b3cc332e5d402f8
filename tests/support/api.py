"""Helpers for driving the FastAPI app in tests: stub backends, admin set-up, requests.

The backends here are fakes with scores the test chooses: they let one test drive
each rule of the decision table through HTTP. The real models are exercised through
the same app in test_real_models.py and through Ray Serve in tests/e2e/.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from fastapi.testclient import TestClient
from PIL import Image

from models.decode_pool import ImageDecoder
from models.image_scoring import ImageRequest, ImageScores
from models.image_upload import ImageUpload, ScoredImage, decode_and_score
from policy.decisions import decide
from models.text_scoring import TextRequest, TextScores
from runtime.bootstrap import load_plans, load_profiles
from runtime.settings import PROJECT_ROOT
from admin.app import create_admin_app
from models.image_text import ReadText
from serve_app.app import create_app
from serve_app.services import Services

ADMIN_TOKEN = "test-admin-token-0123456789abcdef"
# The tests pin the default profile's thresholds so they do not move when the shipped
# config is re-tuned from a model evaluation.
TEST_THRESHOLDS = {
    "nsfw": {"review": 0.4, "block": 0.8},
    "weapon": {"enabled": False, "review": 0.5, "block": 0.85},
    "violence": {"enabled": False, "review": 0.5, "block": 0.8},
    "toxic": {"review": 0.5, "block": 0.8},
}
CONFIG_DIR = PROJECT_ROOT / "config"


@dataclass
class StubBackends:
    """Answers with the scores a test sets; counts calls; can be made to fail."""

    image_scores: dict[str, float] = field(default_factory=lambda: {"nsfw": 0.05})
    toxic: float = 0.05
    text_scores: dict[str, float] = field(default_factory=dict)  # the other text categories
    failing: bool = False
    image_calls: list[ImageRequest] = field(default_factory=list)
    text_calls: list[str] = field(default_factory=list)
    text_requests: list[TextRequest] = field(default_factory=list)
    text_batches: list[int] = field(default_factory=list)  # texts per score_texts call
    decide_calls: int = 0
    # What the text reader reads on an image whose profile enables `text_toxic` (its lines joined by newlines).
    image_text: str = ""
    image_text_partial: bool = False
    # The real bounded decoder, as the model side runs it: the decoding rules are tested through this stub too.
    decoder: ImageDecoder = field(default_factory=ImageDecoder)

    async def score_upload(self, upload: ImageUpload) -> ScoredImage:
        return await decode_and_score(upload, self.decoder, lambda request: request, self.score_image, self.read)

    async def read(self, frames) -> ReadText:
        lines = self.image_text.count("\n") + 1 if self.image_text else 0
        return ReadText(self.image_text, lines, self.image_text_partial, "reader=stub-1")

    async def score_image(self, request: ImageRequest) -> ImageScores:
        self.image_calls.append(request)
        if self.failing:
            raise ConnectionError("model replica gone")
        scores = {c: self.image_scores.get(c, 0.0) for c in request.categories}
        return ImageScores(categories=scores, safe=1 - scores["nsfw"], model_version="nsfw=stub-1")

    async def score_text(self, request: TextRequest) -> TextScores:
        self.text_calls.append(request.text)
        self.text_requests.append(request)
        if self.failing:
            raise ConnectionError("model replica gone")
        scores = {c: self.toxic if c == "toxic" else self.text_scores.get(c, 0.0) for c in request.categories}
        return TextScores(categories=scores, model_version="stub-text-1")

    async def score_texts(self, requests: list[TextRequest]) -> list[TextScores]:
        self.text_batches.append(len(requests))
        return [await self.score_text(request) for request in requests]

    async def decide_many(self, items, profile, threshold):
        self.decide_calls += 1
        return [decide(scores, profile, kind, threshold) for scores, kind in items]

    async def model_versions(self) -> dict[str, str]:
        if self.failing:
            raise ConnectionError("not ready")
        return {"image.nsfw": "stub-1", "text.toxic": "stub-text-1"}


def public_and_admin(services: Services, admin_token: str = ADMIN_TOKEN):
    """One ASGI app for tests: `/admin/` paths go to the admin app, the rest to the public app.

    In the product they listen on different ports; one TestClient over both keeps the tests short.
    """
    public, admin = create_app(services), create_admin_app(services, admin_token)

    async def app(scope, receive, send):
        target = admin if scope.get("path", "").startswith("/admin/") else public
        await target(scope, receive, send)

    return app


class Api:
    """A TestClient with helpers to set up plans, profiles and keys through the admin API."""

    def __init__(self, client: TestClient, backends: StubBackends):
        self.client, self.backends = client, backends
        self.admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def seed(self) -> None:
        for plan in load_plans(CONFIG_DIR):
            self.put_plan(plan.name, **plan.model_dump(exclude={"name"}))
        for profile in load_profiles(CONFIG_DIR):
            self.put_profile(profile.name, **profile.model_dump(exclude={"name"}))
        self.put_profile("default", mode="enforce", report_threshold=3, categories=TEST_THRESHOLDS)

    def put_plan(self, name: str, **fields) -> None:
        response = self.client.put(f"/admin/v1/plans/{name}", json=fields, headers=self.admin)
        assert response.status_code == 200, response.text

    def put_profile(self, name: str, **fields) -> None:
        response = self.client.put(f"/admin/v1/profiles/{name}", json=fields, headers=self.admin)
        assert response.status_code == 200, response.text

    def new_key(self, *, account: str = "acme", profile: str = "default", plan: str = "default") -> dict:
        body = {"account": account, "profile": profile, "plan": plan}
        response = self.client.post("/admin/v1/keys", json=body, headers=self.admin)
        assert response.status_code == 201, response.text
        return {"Authorization": f"Bearer {response.json()['key']}"}

    def moderate(self, headers: dict, image: bytes | None = None, *, field: str = "image", params=None, **fields):
        files = {field: ("upload.bin", image if image is not None else photo_bytes(), "text/plain")}
        return self.client.post("/v1/moderate", headers=headers, files=files, data=fields, params=params)

    def moderate_text(self, headers: dict, text: str = "hello", params=None, **fields):
        return self.client.post("/v1/moderate-text", headers=headers, json={"text": text, **fields}, params=params)

    def report(self, headers: dict, reference: str, **fields):
        return self.client.post("/v1/report", headers=headers, files={"reference": (None, reference)}, data=fields)


@contextmanager
def seeded_api(services: Services, backends) -> Iterator[Api]:
    """An Api over both apps of `services`, with the shipped plans and profiles and the test profile in place."""
    with TestClient(public_and_admin(services), raise_server_exceptions=False) as client:
        api = Api(client, backends)
        api.seed()
        yield api


def photo_bytes(fmt: str = "JPEG", size: tuple[int, int] = (64, 48)) -> bytes:
    import numpy as np

    pixels = np.random.default_rng(0).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


def assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


