"""The hash bank through the API (real decoding and PDQ, stub scores, a real store): a rejected image's re-upload is
blocked by hash, per account; a moderator can remove a hash; an operator can export and import the bank as CSV."""

from __future__ import annotations

import io

import numpy as np
import pytest
import skimage.data
from PIL import Image
from support.api import StubBackends, assert_error, seeded_api

from serve_app.services import Services
from store.hash_bank.csv_format import hashes_of_csv
from store.review.queue import ReviewRules


def _jpeg(pixels: np.ndarray, size: tuple[int, int] | None = None, quality: int = 90) -> bytes:
    image = Image.fromarray(pixels).convert("RGB")
    if size is not None:
        image = image.resize(size, Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


ASTRONAUT = skimage.data.astronaut()
ORIGINAL = _jpeg(ASTRONAUT)
RESIZED_RECOMPRESSED = _jpeg(ASTRONAUT, size=(300, 300), quality=60)


def _rejected(api, key, image: bytes = ORIGINAL) -> int:
    """Uploads an image the stub scores for review, and a moderator rejects it: its hash is banked."""
    api.backends.image_scores = {"nsfw": 0.5}
    review_id = api.moderate(key, image).json()["review_id"]
    decided = api.client.post(f"/admin/v1/reviews/{review_id}/decision", json={"status": "rejected"}, headers=api.admin)
    assert decided.status_code == 200 and len(decided.json()["pdq"]) == 64
    api.backends.image_scores = {"nsfw": 0.05}  # from now on the models would allow it
    return review_id


def test_a_rejected_images_resized_and_recompressed_reupload_is_blocked_by_hash(api, key):
    review_id = _rejected(api, key)
    answer = api.moderate(key, RESIZED_RECOMPRESSED).json()
    assert answer["decision"] == "block" and answer["recommended_action"] == "block"
    assert answer["blocked_by"] == ["hash_match"]
    assert answer["hash_match"]["review_id"] == review_id and 0 <= answer["hash_match"]["distance"] <= 31
    assert "review_id" not in answer  # blocked, not queued again
    other = api.moderate(key, _jpeg(skimage.data.chelsea())).json()
    assert other["decision"] == "allow" and "hash_match" not in other


def test_banks_are_per_account_and_an_approved_image_is_not_banked(api, key):
    _rejected(api, key)
    other_account = api.new_key(account="other-co")
    assert api.moderate(other_account, ORIGINAL).json()["decision"] == "allow"
    api.backends.image_scores = {"nsfw": 0.5}
    coffee = _jpeg(skimage.data.coffee())
    review_id = api.moderate(key, coffee).json()["review_id"]
    api.client.post(f"/admin/v1/reviews/{review_id}/decision", json={"status": "approved"}, headers=api.admin)
    api.backends.image_scores = {"nsfw": 0.05}
    assert api.moderate(key, coffee).json()["decision"] == "allow"


def test_a_monitor_profile_still_allows_but_recommends_the_block(api, key):
    _rejected(api, key)
    api.put_profile("watch", mode="monitor", categories={"nsfw": {"review": 0.4, "block": 0.8},
                                                         "toxic": {"review": 0.5, "block": 0.8}})  # fmt: skip
    watching = api.new_key(profile="watch")
    answer = api.moderate(watching, ORIGINAL).json()
    verdict = (answer["decision"], answer["recommended_action"], answer["blocked_by"])
    assert verdict == ("allow", "block", ["hash_match"])


def test_a_removed_hash_blocks_nothing_any_more(api, key):
    _rejected(api, key)
    [entry] = api.client.get("/admin/v1/accounts/acme/hash-bank", headers=api.admin).json()["entries"]
    removed = api.client.delete(f"/admin/v1/accounts/acme/hash-bank/{entry['hash']}", headers=api.admin)
    assert removed.status_code == 204
    assert api.moderate(key, ORIGINAL).json()["decision"] == "allow"
    assert_error(api.client.delete(f"/admin/v1/accounts/acme/hash-bank/{entry['hash']}", headers=api.admin), 404,
                 "not_found")  # fmt: skip
    assert_error(api.client.delete("/admin/v1/accounts/acme/hash-bank/XYZ", headers=api.admin), 400,
                 "invalid_request")  # fmt: skip


def test_a_featureless_image_is_neither_banked_nor_matched(api, key):
    flat = _jpeg(np.full((200, 200, 3), 128, dtype=np.uint8))
    api.backends.image_scores = {"nsfw": 0.5}
    review_id = api.moderate(key, flat).json()["review_id"]
    decided = api.client.post(f"/admin/v1/reviews/{review_id}/decision", json={"status": "rejected"}, headers=api.admin)
    assert decided.json().get("pdq") is None
    assert api.client.get("/admin/v1/accounts/acme/hash-bank", headers=api.admin).json()["count"] == 0


def test_the_bank_exports_as_hma_csv_and_an_import_into_another_account_blocks_there(api, key):
    review_id = _rejected(api, key)
    exported = api.client.get("/admin/v1/accounts/acme/hash-bank/export", headers=api.admin)
    assert exported.headers["content-type"].startswith("text/csv")
    [line] = exported.text.splitlines()
    pdq, item, stamp, tags = line.split(",")
    assert len(pdq) == 64 and item == str(review_id) and stamp.endswith("+0000") and tags == "rejected"
    body = "pdq,id,timestamp,tags\n" + exported.text + "not-a-hash,,,\n"
    imported = api.client.post("/admin/v1/accounts/peer-co/hash-bank/import", content=body, headers=api.admin)
    assert imported.json() == {"account": "peer-co", "added": 1, "skipped": 2, "count": 1}
    peer = api.new_key(account="peer-co")
    answer = api.moderate(peer, RESIZED_RECOMPRESSED).json()
    assert answer["decision"] == "block" and "review_id" not in answer["hash_match"]  # imported: no item here


def test_an_import_over_the_limit_is_a_413_and_adds_nothing(api):
    lines = "".join(f"{i:064x},,,\n" for i in range(100_001))
    response = api.client.post("/admin/v1/accounts/acme/hash-bank/import", content=lines, headers=api.admin)
    assert_error(response, 413, "import_too_large")
    assert api.client.get("/admin/v1/accounts/acme/hash-bank", headers=api.admin).json()["count"] == 0


def test_an_import_past_the_banks_cap_is_a_409_and_a_rejection_past_it_still_decides(redis_url):
    """The bank of an account holds at most MODERATION_HASH_BANK_MAX_PER_ACCOUNT hashes (2 here)."""
    backends = StubBackends()
    services = Services.connect(redis_url, backends, inference_timeout_s=2,
                                review_rules=ReviewRules(hash_bank_max_entries=2))  # fmt: skip
    with seeded_api(services, backends) as api:
        key = api.new_key()
        _rejected(api, key)
        three = "".join(f"{n:064x},,,\n" for n in range(3))
        refused = api.client.post("/admin/v1/accounts/acme/hash-bank/import", content=three, headers=api.admin)
        assert_error(refused, 409, "hash_bank_full")
        assert "holds 1 of its 2 hashes" in refused.json()["error"]["message"]
        one = api.client.post("/admin/v1/accounts/acme/hash-bank/import", content=three[:65], headers=api.admin)
        assert one.json()["count"] == 2
        # Full: the next rejection is decided (200, as ever) and its image not banked, which the listing counts.
        _rejected(api, key, _jpeg(skimage.data.coffee()))
        bank = api.client.get("/admin/v1/accounts/acme/hash-bank", headers=api.admin).json()
        assert (bank["count"], bank["max_entries"], bank["rejections_not_banked"]) == (2, 2, 1)


@pytest.mark.parametrize("text", ["", "\n\n", "pdq,id\n", "zz" * 32 + ",1\n"])
def test_an_import_without_hashes_adds_nothing(text):
    hashes, _ = hashes_of_csv(text)
    assert hashes == []


def test_a_mirrored_reupload_is_blocked_through_the_mirrored_hash(api, key):
    review_id = _rejected(api, key)
    mirrored = _jpeg(np.asarray(ASTRONAUT)[:, ::-1].copy())
    answer = api.moderate(key, mirrored).json()
    assert answer["decision"] == "block" and answer["hash_match"]["review_id"] == review_id


def test_a_block_by_hash_is_never_audited_while_other_allowed_images_are(api, key):
    # A block by the bank is a moderator's own decision already (moderation/flow.py, audits).
    api.put_profile("audited", mode="enforce", audit_rate=1.0,
                    categories={"nsfw": {"review": 0.4, "block": 0.8}, "toxic": {"review": 0.5, "block": 0.8}})
    audited = api.new_key(account="acme", profile="audited")
    _rejected(api, key)
    assert api.moderate(audited, RESIZED_RECOMPRESSED).json()["blocked_by"] == ["hash_match"]
    assert api.moderate(audited, _jpeg(skimage.data.chelsea())).json()["decision"] == "allow"
    pending = api.client.get("/admin/v1/reviews", params={"account": "acme", "status": "pending"},
                             headers=api.admin).json()["items"]
    assert [item["reason"] for item in pending] == ["audit"]  # the allowed chelsea only
