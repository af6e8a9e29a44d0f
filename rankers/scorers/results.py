"""A stored judgment as a record, how its reply is capped, and the results of one scoring call.

Size: a stored reply (``raw``) and reason (``error``) are capped at ``max_reply_chars``
characters (:data:`MAX_REPLY_CHARS` unless a declaration says otherwise); a capped row keeps
its score, records the reply's full length in ``usage["reply_chars"]`` and is counted
(``ScoredInputs.n_capped``), so a server that answers megabytes cannot grow the cache by more
than the cap per input (``docs/protocol.md#caches``).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

#: Identity of one score: (model_key, query sha256, pid, passage sha256).
CacheKey = tuple[str, str, str, str]
#: Characters of a reply or reason stored per input unless a declaration says otherwise (``max_reply_chars``):
#: 64 Ki, ten times a thinking model's 6,144-token output at ~4 characters per token, far above a grade.
MAX_REPLY_CHARS = 65_536

class CachedScore(NamedTuple):
    """A stored result: ``score`` is None when the input was unavailable, ``error`` then says why.

    A tuple rather than a dataclass: a warm run builds tens of thousands of them per lookup.
    """

    score: float | None
    error: str | None
    usage: dict[str, float]
    raw: str | None

    @property
    def available(self) -> bool:
        return self.score is not None and bool(np.isfinite(self.score))


def finite_or_none(score: float | None) -> float | None:
    """A score as the store keeps it: None when absent or not finite, and -0.0 as 0.0 (SQLite's REAL drops the sign
    of zero, so a row digested with -0.0 would fail its check when read back; the two order alike)."""
    if score is None:
        return None
    score = float(score) + 0.0
    return score if np.isfinite(score) else None


def _cut(text: str | None, limit: int) -> str | None:
    """``text`` cut to at most ``limit`` characters, the cut marked at its end."""
    if text is None or len(text) <= limit:
        return text
    mark = f"…[cut: {len(text):,} characters]"
    return text[:max(limit - len(mark), 0)] + mark[:limit]


def capped(result: CachedScore, max_reply_chars: int = MAX_REPLY_CHARS) -> CachedScore:
    """``result`` with its reply and reason cut to ``max_reply_chars`` characters each; a cut reply's full
    length goes to ``usage["reply_chars"]`` (how ``n_capped`` counts it). The score is never touched."""
    if isinstance(max_reply_chars, bool) or not isinstance(max_reply_chars, int) or max_reply_chars < 1:
        raise ValueError(f"max_reply_chars must be a positive integer, got {max_reply_chars!r}")
    raw, error = _cut(result.raw, max_reply_chars), _cut(result.error, max_reply_chars)
    if raw is result.raw and error is result.error:
        return result
    usage = dict(result.usage)
    if raw is not result.raw:
        usage["reply_chars"] = float(len(result.raw))
    return CachedScore(result.score, error, usage, raw)


@dataclass(frozen=True)
class ScoredInputs:
    """Results aligned with the caller's inputs, plus what this call had to compute.

    ``frame``: one row per input (duplicates kept) with qid, pid, score (NaN when
    unavailable), error, usage (dict), raw, cached (True when read from the cache).
    Counts are over unique inputs: ``n_scored`` sent to the scorer by this call, of which
    ``n_retried`` had a stored unavailable result; ``n_cached`` used as stored;
    ``n_rejected`` stored rows that failed their digest (deleted, hence among ``n_scored``).
    A listwise or pairwise judge's results count judgments instead of inputs and carry ``calls`` and
    ``windows`` (see ``rankers.scorers.judgments``).
    """

    frame: pd.DataFrame
    n_unique: int
    n_scored: int
    n_cached: int
    model_key: str
    n_retried: int = 0
    n_rejected: int = 0
    stats: dict[str, float] = field(default_factory=dict)
    #: For judges that judge several passages at once (``rankers.scorers.judgments``): one row per model
    #: judgment used (its tokens, latency, reading) and one row per judged window; None for pointwise scorers.
    calls: pd.DataFrame | None = None
    windows: pd.DataFrame | None = None

    @property
    def scores(self) -> dict[tuple[str, str], float]:
        """(qid, pid) -> score (NaN when unavailable), the mapping ``window_rerank`` reads."""
        f = self.frame
        return dict(zip(zip(f["qid"].tolist(), f["pid"].tolist()), f["score"].astype(float).tolist()))

    @property
    def judged(self) -> pd.DataFrame:
        """One row per distinct judgment with its ``score`` (NaN when unavailable), ``error`` and ``usage`` (where an
        unavailable one's cause is stored, ``rankers.scorers.causes``): the unique inputs
        of a pointwise scorer, the distinct model judgments (lists, comparisons) of a judge with ``calls``, so
        unavailable judgments are counted in judgments, never in the passage rows a failed window spans."""
        if self.calls is None:
            return self.frame.drop_duplicates(["qid", "pid"])
        unique = self.calls.drop_duplicates("key")
        return pd.DataFrame({"qid": unique["qid"].to_numpy(), "pid": unique["key"].to_numpy(),
                             "score": np.where(unique["available"].astype(bool), 1.0, np.nan),
                             "error": unique["error"].to_numpy(), "usage": unique["usage"].to_numpy()})

    @property
    def n_unavailable(self) -> int:
        """Distinct judgments unavailable (``judged``)."""
        return int(self.judged["score"].isna().sum())

    @property
    def n_capped(self) -> int:
        """Unique inputs whose stored reply was cut to the cap."""
        return capped_replies(self.frame)


def capped_replies(frame: pd.DataFrame) -> int:
    """Unique inputs of a scored frame whose stored reply was cut to the cap (``usage["reply_chars"]``)."""
    if "usage" not in frame:
        return 0
    unique = frame.drop_duplicates(["qid", "pid"])
    return int(sum(isinstance(u, dict) and "reply_chars" in u for u in unique["usage"]))


def endpoint_summary(usage: Iterable[object], cached: Iterable[bool]) -> dict[str, dict[str, object]]:
    """Per server endpoint (``docs/protocol.md#endpoints``): ``judgments`` it made in this run, ``resent`` requests
    taken from it to another one and ``taken_out`` (why, or None), read from the judgments' stored usage.

    Only judgments made now count (``cached`` False): a warm run names no endpoint it did not contact.
    Endpoints are listed in the order first seen; judgments without an endpoint (in-process runtimes) are ignored.
    """
    out: dict[str, dict[str, object]] = {}

    def entry(url: str) -> dict[str, object]:
        return out.setdefault(url, {"judgments": 0, "resent": 0, "taken_out": None})

    for u, was_cached in zip(usage, cached):
        if was_cached or not isinstance(u, dict):
            continue
        for url, reason in (u.get("resent_from") or {}).items():
            e = entry(str(url))
            e["resent"] = int(e["resent"]) + 1
            e["taken_out"] = e["taken_out"] or str(reason)
        if isinstance(u.get("endpoint"), str):
            e = entry(u["endpoint"])
            e["judgments"] = int(e["judgments"]) + 1
    return out
