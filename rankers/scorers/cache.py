"""The persistent text-score cache shared by every judge (``docs/protocol.md#caches``): its public face.

A judgment is keyed by everything that determines it — the judge's ``model_key`` (model id, revision,
prompt/preprocessing version), the query text's sha256, and the passage id and text sha256 (for a pointwise
judgment; the ordered ones for a judgment of several passages, ``rankers.scorers.judgment_records``) — so
pair-only (L1) and window (L2) scoring share inputs, and a changed model, prompt or text can never reuse a
stale score.

The parts: the SQLite store with its row digests and recovery (``rankers.scorers.store``), the stored record,
its reply cap and a call's results (``rankers.scorers.results``), and the causes of unavailable judgments
(``rankers.scorers.causes``). What callers of the score cache import is listed in ``__all__``; judging what the
cache lacks is ``rankers.scorers.judgments`` (the loop) and ``rankers.scorers.pointwise`` (a run's inputs).
"""
from __future__ import annotations

from rankers.scorers.causes import unavailable_cause, unavailable_causes
from rankers.scorers.results import (MAX_REPLY_CHARS, CachedScore, CacheKey, ScoredInputs, capped, capped_replies,
                                     endpoint_summary)
from rankers.scorers.store import CACHE_FILE, SCHEMA_VERSION, ScoreCache, ScoreCacheWarning

__all__ = ["CACHE_FILE", "MAX_REPLY_CHARS", "SCHEMA_VERSION", "CacheKey", "CachedScore", "ScoreCache",
           "ScoreCacheWarning", "ScoredInputs", "capped", "capped_replies", "endpoint_summary",
           "unavailable_cause", "unavailable_causes"]
