"""A tiny real checkpoint: a seeded 2-layer BERT sequence classifier on the SPLADE-tiny package's tokenizer, saved as
a local model folder (what a user's fine-tuned cross-encoder looks like to the libraries that load one)."""
from __future__ import annotations

from pathlib import Path


def tiny_checkpoint(path: Path, num_labels: int, seed: int) -> Path:
    """Save the seeded classifier (``num_labels`` logits) and its tokenizer at ``path``; returns ``path``."""
    import torch  # heavy: only for the tests that need a checkpoint
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from fixtures.models import splade_tiny_path

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(splade_tiny_path())
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, num_labels=num_labels)
    BertForSequenceClassification(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path
