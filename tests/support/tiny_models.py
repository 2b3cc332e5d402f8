"""Tiny random-weight Hugging Face models that tests build themselves (nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

WORDS = "the a you are is very cat dog good bad nice ugly love hate kind rude".split()
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WINDOW = 16  # the tiny tokenizer's model_max_length
TINY = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}


def tiny_bert(directory: Path, problem_type: str | None = None) -> Path:
    torch.manual_seed(0)
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + WORDS)}
    tokenizer = BertTokenizer(vocab=vocab, model_max_length=WINDOW)
    config = BertConfig(
        vocab_size=len(vocab),
        max_position_embeddings=64,
        id2label={0: "non-toxic", 1: "toxic"},
        label2id={"non-toxic": 0, "toxic": 1},
        problem_type=problem_type,
        **TINY,
    )
    BertForSequenceClassification(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
