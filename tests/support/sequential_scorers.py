"""Text scorers whose effect is known, for the sequential-sample end-to-end test (``kind = "python"``).

``answers`` maps a query to its preferred passage's text (NevIR: q1 -> doc1, q2 -> doc2), read from NevIR
itself. ``knows`` scores the preferred passage 1 and any other 0 (every designated pair right); ``mixes_up``
the reverse (every one wrong): a large effect. ``coin`` scores by a salted hash of the texts: two salts give two
rankers with no effect between them, whose disagreements are noise. ``flat`` scores every passage alike, so a window
it reranks keeps its reference's order: a copy of fusion.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from fixtures.data import load_split
from rankers.scorers.base import ScoreBatch


def answers() -> dict[str, str]:
    out: dict[str, str] = {}
    for split in ("train", "validation", "test"):
        for pair in load_split(split).pairs:
            out[pair.q1], out[pair.q2] = pair.doc1, pair.doc2
    return out


class KnownAnswer:
    """1 for the query's preferred passage, 0 otherwise (``right = False``: the other way round)."""

    def __init__(self, right: bool) -> None:
        self.right = right
        self.answers = answers()

    @property
    def model_key(self) -> str:
        return f"known-answer|right={self.right}|v1"

    def score(self, inputs: Sequence[tuple[str, str]]) -> ScoreBatch:
        scores = np.array([float((self.answers.get(q) == p) == self.right) for q, p in inputs])
        return ScoreBatch(scores, [None] * len(inputs), [{} for _ in inputs], [repr(float(s)) for s in scores])


class Coin:
    """A deterministic pseudo-random score per (salt, query, passage)."""

    def __init__(self, salt: str) -> None:
        self.salt = salt

    @property
    def model_key(self) -> str:
        return f"coin|{self.salt}|v1"

    def score(self, inputs: Sequence[tuple[str, str]]) -> ScoreBatch:
        scores = np.array([int.from_bytes(hashlib.sha256(f"{self.salt}\0{q}\0{p}".encode()).digest()[:4], "big")
                           / 2 ** 32 for q, p in inputs])
        return ScoreBatch(scores, [None] * len(inputs), [{} for _ in inputs], [repr(float(s)) for s in scores])


class Flat:
    """The same score for every passage: the window's tie-break (its reference ranker's order) decides."""

    model_key = "flat|v1"

    def score(self, inputs: Sequence[tuple[str, str]]) -> ScoreBatch:
        scores = np.zeros(len(inputs))
        return ScoreBatch(scores, [None] * len(inputs), [{} for _ in inputs], ["0.0"] * len(inputs))


def flat() -> Flat:
    return Flat()


def knows() -> KnownAnswer:
    return KnownAnswer(True)


def mixes_up() -> KnownAnswer:
    return KnownAnswer(False)


def coin(salt: str = "a") -> Coin:
    return Coin(salt)
