"""The pointwise text-scorer interface shared by the cross-encoder and the LLM grader.

A scorer sees (query text, passage text) and nothing else: no pair identity, label
or other candidate (``docs/protocol.md#window-rule``). Unavailable scores are NaN with a reason, never
silently dropped.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class ScoreBatch:
    """Scores for a batch of inputs, aligned with the inputs.

    ``scores[i]`` is NaN when input i is unavailable; ``errors[i]`` then says why.
    ``usage`` holds per-input accounting (input/output tokens, latency, truncation).
    """

    scores: np.ndarray
    errors: list[str | None]
    usage: list[dict[str, float]] = field(default_factory=list)
    raw: list[str | None] = field(default_factory=list)


def by_query(inputs: Sequence[tuple[str, str]]) -> dict[str, dict[str, list[int]]]:
    """Inputs grouped by query text, then by distinct passage text, each with the input positions it answers: what
    a reranker that ranks a query's passages in one call (a rerank server, the rerankers library) sends, each
    repeated input once."""
    groups: dict[str, dict[str, list[int]]] = {}
    for i, (query, passage) in enumerate(inputs):
        groups.setdefault(query, {}).setdefault(passage, []).append(i)
    return groups


def score_replies(scores: np.ndarray) -> list[str | None]:
    """The reply stored for scores a reranker returned as numbers: each one's repr (None where unavailable)."""
    return [None if np.isnan(s) else repr(float(s)) for s in scores]


@runtime_checkable
class TextScorer(Protocol):
    """Scores (query, passage) inputs independently; ``model_key`` identifies the scores in caches."""

    @property
    def model_key(self) -> str:
        """Model id, revision and preprocessing/prompt version: everything that changes a score."""
        ...

    def score(self, inputs: Sequence[tuple[str, str]]) -> ScoreBatch:
        ...


class DeclaredKey:
    """``model_key`` from declared parts: ``key_parts`` names every part that changes a judgment, in the key's
    order, and the key joins their values with ``|`` (``docs/protocol.md#caches``). The names say what each part is
    where it is built; only the values enter the key, so a key stays what the stored judgments were filed under."""

    def key_parts(self) -> dict[str, str]:
        raise NotImplementedError

    @property
    def model_key(self) -> str:
        return "|".join(self.key_parts().values())


class Batched(Protocol):
    """What the score cache asks of anything that judges: ``model_key`` names everything that changes a judgment
    (it keys the stored ones); ``chunk_size`` is how many inputs one call takes."""

    @property
    def model_key(self) -> str:
        ...

    @property
    def chunk_size(self) -> int:
        ...


def streams(call: Callable[..., Any]) -> bool:
    """Whether ``call`` takes ``done``: a callback it calls with (index, result) as each input finishes, so the
    caller commits every finished judgment at once rather than at the end of the call
    (docs/protocol.md#judging-cost). Scorers that do not (a user's ``score``) are committed call by call."""
    try:
        return "done" in inspect.signature(call).parameters
    except (TypeError, ValueError):  # a builtin or C callable without a signature
        return False
