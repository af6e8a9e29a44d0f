"""Judge a fixed set of inputs with one LLM judge kind through an OpenAI-compatible server, in a process of its own.

``python -m tests.support.judging_run KIND URL CACHE_DIR`` judges :func:`inputs` with ``kind`` (``llm_grader``,
``llm_listwise`` or ``llm_pairwise``, ``backend = "openai"``, two requests in flight) and a hand-built context: what a
fault test interrupts mid-judging and then reruns in-process (:func:`judge`). Test-only code.
"""
from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from fixtures.study import build_study
from rankers.kinds.base import Context
from rankers.declarations import parse_declaration

WHERE = "judging.toml [rankers.judge]"
#: Windows judged (Test directions: the kinds read the data to find a qid's split) and passages per window.
WINDOWS, PASSAGES = 4, 3


class _Ranking:
    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame


def inputs() -> list[tuple[str, str, str, str]]:
    """(qid, pid, query, passage): ``WINDOWS`` windows of ``PASSAGES`` passages each."""
    qids = sorted(build_study().split("test")["qid"])[:WINDOWS]
    return [(q, f"p{i}", f"query of {q}", f"passage {i} of {q}") for q in qids for i in range(PASSAGES)]


def context(cache: Path) -> Context:
    """What the kinds read: the data, the reference's ranks (input order) and a cache folder."""
    rows = inputs()
    frame = pd.DataFrame([{"qid": q, "pid": p, "rank": i % PASSAGES + 1} for i, (q, p, _, _) in enumerate(rows)])
    shared: dict = {}

    def unused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the kind read something it should not need")

    return Context(study=build_study(), pool=unused, pool_digest=unused, population=unused, queries=unused,
                   ranking=lambda split, name: _Ranking(frame), ranking_key=unused, resolve_path=unused,
                   cache=lambda *parts: cache.joinpath(*parts), shared=lambda k, b: shared.setdefault(k, b()),
                   memo=lambda label, key, compute: compute(), forget=unused, stage=unused, where=lambda d: WHERE,
                   seed=0, subset=True)


def declaration(kind: str, url: str):
    extra = {"llm_listwise": {"window": PASSAGES}, "llm_pairwise": {"mode": "designated"}}.get(kind, {})
    return parse_declaration("judge", {"kind": kind, "backend": "openai", "url": url, "model": "m",
                                       "thinking": False, "concurrency": 2, **extra}, WHERE)


def judge(kind: str, url: str, cache: Path, desc: str = "score judge window test") -> Any:
    decl = declaration(kind, url)
    rows = inputs()
    if decl.designated_only:  # the designated pair of each window: its first two passages
        rows = [r for r in rows if r[1] in ("p0", "p1")]
    return decl.ranker_kind.judge(decl, context(cache), rows, desc)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job's child may inherit SIGINT ignored
    judge(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
