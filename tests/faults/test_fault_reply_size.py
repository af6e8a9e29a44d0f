"""Failure 9: replies were stored without a size limit: 16 replies of 5 MB grew the score cache from 41 to
125 MB, plus a 42 MB write-ahead log.

The grader asks a loopback OpenAI-compatible server that answers every request with 5 MB (half a grade
followed by blanks, which parses, half plain text, which does not). The score cache grows by at most the
cap per reply, the scores are those of the full replies, and every capped reply is counted.
"""
from __future__ import annotations

from pathlib import Path

from rankers.scorers.cache import MAX_REPLY_CHARS, ScoreCache
from rankers.scorers.grader import LLMGrader
from rankers.scorers.llm import make_backend
from rankers.scorers.llm.generation import GenerationSettings
from rankers.scorers.pointwise import score_with_cache
from tests.support.faulty_chat_server import faulty_chat_server

REPLY_CHARS = 5_000_000
N = 16


def _files(cache: ScoreCache) -> int:
    return sum(p.stat().st_size for p in cache.path.parent.glob(cache.path.name + "*") if p.is_file())


def test_sixteen_replies_of_5_mb_grow_the_cache_by_at_most_the_cap_each(tmp_path: Path) -> None:
    inputs = [(f"q{i}", f"p{i}", f"query {i}", f"passage number {i}") for i in range(N)]
    kinds = {f"passage number {i}": "huge_grade" if i % 2 == 0 else "huge_text" for i in range(N)}
    with faulty_chat_server(lambda user: next(k for p, k in kinds.items() if f"{p}\n" in user),
                            huge_chars=REPLY_CHARS) as server:
        backend = make_backend("openai", model="faulty", base_url=server.base_url,
                               settings=GenerationSettings(thinking=False, concurrency=4, timeout_s=120))
        cache = ScoreCache(tmp_path / "scores.sqlite")
        cache.put_many([])  # the file and its schema exist before the measurement
        before = _files(cache)
        scored = score_with_cache(LLMGrader(backend), inputs, cache, progress=False)
        during = _files(cache)  # the database with its write-ahead log, as the run leaves them open
        cache.close()
    assert server.served["huge_grade"] == server.served["huge_text"] == N // 2
    after = _files(ScoreCache(tmp_path / "scores.sqlite"))
    limit = N * MAX_REPLY_CHARS * 2 + (1 << 20)  # the rows and their copy in the log, one MiB for pages and keys
    assert during - before <= limit, f"the cache grew by {during - before:,} bytes for {N} replies"
    assert after - before <= N * MAX_REPLY_CHARS + (1 << 20), f"{after - before:,} bytes after a checkpoint"
    frame = scored.frame.set_index("pid")
    assert all(len(raw) <= MAX_REPLY_CHARS for raw in frame["raw"])
    graded = [f"p{i}" for i in range(0, N, 2)]
    assert frame.loc[graded, "score"].tolist() == [3.0] * (N // 2)  # parsed from the full reply, then stored cut
    assert frame.drop(index=graded)["error"].str.startswith("parse: unparseable answer").all()
    assert scored.n_capped == N and all(u["reply_chars"] == REPLY_CHARS for u in frame["usage"])
