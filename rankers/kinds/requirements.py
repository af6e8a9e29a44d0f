"""What a declared ranker needs to run: on this machine a package or a CUDA device; in the declared dataset the
splits it trains on.

A kind names its needs (``requirements``, ``trains_on``); the specs skip a ranker's rows with the reason when one is
missing: a machine's lack as "not available here", a dataset's as "not applicable".
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from fixtures.datasets.pairs import DataDecl, read_pair_set


@dataclass(frozen=True)
class Requirement:
    """Something this machine must have for a declared ranker to run; its absence skips the ranker's rows."""

    what: str
    met: Callable[[], bool]
    hint: str
    #: What the dataset lacks (not this machine): the ranker does not apply to it.
    of_data: bool = False

    @property
    def reason(self) -> str:
        if self.of_data:
            return f"not applicable: {self.what}: {self.hint}"
        return f"{self.what} is not available here: {self.hint}"


def needs_module(module: str, what: str, hint: str) -> Requirement:
    """An importable package (looked up, not imported)."""
    return Requirement(what, lambda: importlib.util.find_spec(module) is not None, hint)


def _cuda() -> bool:
    import torch  # heavy: only when a declared ranker needs CUDA

    return bool(torch.cuda.is_available())


CUDA = Requirement("a CUDA device", _cuda, "run on a machine with an NVIDIA GPU (torch.cuda.is_available() is False)")


@cache
def _splits(data: DataDecl) -> tuple[str, ...]:
    return read_pair_set(data).splits


def needs_splits(data: DataDecl, splits: tuple[str, ...]) -> Requirement:
    """The declared pair set holds every split of ``splits`` (NevIR holds them all)."""
    return Requirement(f"dataset {data.name!r} has no {' and '.join(splits)} split(s) ({data.pairs})",
                       lambda: data.kind != "pairs" or set(splits) <= set(_splits(data)),
                       "a learned ranker trains on Train and stops on development; give those splits in the "
                       "pairs file's 'split' field to evaluate it (docs/protocol.md#your-own-contrastive-pairs)",
                       of_data=True)
