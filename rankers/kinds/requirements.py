"""What this machine must have for a declared ranker to run: a package, a CUDA device.

A kind names its needs (``requirements``); the specs skip a ranker's rows with the reason when one is missing.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Requirement:
    """Something this machine must have for a declared ranker to run; its absence skips the ranker's rows."""

    what: str
    met: Callable[[], bool]
    hint: str

    @property
    def reason(self) -> str:
        return f"{self.what} is not available here: {self.hint}"


def needs_module(module: str, what: str, hint: str) -> Requirement:
    """An importable package (looked up, not imported)."""
    return Requirement(what, lambda: importlib.util.find_spec(module) is not None, hint)


def _cuda() -> bool:
    import torch  # heavy: only when a declared ranker needs CUDA

    return bool(torch.cuda.is_available())


CUDA = Requirement("a CUDA device", _cuda, "run on a machine with an NVIDIA GPU (torch.cuda.is_available() is False)")
