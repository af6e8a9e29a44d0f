"""Content-keyed memos and the lazy scorer stand-in: what lets a warm run skip models entirely."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from harness.memo import Memo, MemoWarning, digest, items_digest, texts_digest
from rankers.kinds.base import LazyScorer


def test_a_memo_computes_once_per_key_and_recomputes_an_altered_value(tmp_path: Path) -> None:
    memo, calls = Memo(tmp_path), []

    def compute() -> dict:
        calls.append(1)
        return {"strict": 1387}

    assert memo.get("row", {"pool": "abc"}, compute) == {"strict": 1387}
    assert memo.get("row", {"pool": "abc"}, compute) == {"strict": 1387} and len(calls) == 1
    memo.get("row", {"pool": "abd"}, compute)
    assert len(calls) == 2  # another input, another key
    path = memo.path("row", {"pool": "abc"})
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.warns(MemoWarning, match="memo row"):
        assert memo.get("row", {"pool": "abc"}, compute) == {"strict": 1387}
    assert len(calls) == 3


def test_a_value_its_keep_test_refuses_is_returned_but_not_kept(tmp_path: Path) -> None:
    memo, calls = Memo(tmp_path), []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert memo.get("judgments", {"k": 1}, compute, keep=lambda v: v >= 2) == 1  # not final: computed again
    assert memo.get("judgments", {"k": 1}, compute, keep=lambda v: v >= 2) == 2
    assert memo.get("judgments", {"k": 1}, compute, keep=lambda v: v >= 2) == 2 and len(calls) == 2


def test_texts_digest_follows_every_text_and_the_row_boundaries() -> None:
    rows = [("q1", "p1", "query", "passage a"), ("q1", "p2", "query", "passage b")]
    assert texts_digest(rows) == texts_digest(list(rows))
    assert texts_digest(rows) != texts_digest([rows[0], ("q1", "p2", "query", "passage c")])
    assert texts_digest(rows) != texts_digest(rows[::-1])  # order is part of what a stage judges
    assert texts_digest([("ab", "c")]) != texts_digest([("a", "bc")])
    # the stream digested: each text's UTF-8 bytes and NUL, then SOH after each row (by hand)
    stream = b"q1\0\xc3\xbc\0\1q2\0\0\1"
    assert texts_digest([("q1", "\u00fc"), ("q2", "")]) == hashlib.sha256(stream).hexdigest()[:24]


def test_digests_ignore_order_where_order_means_nothing() -> None:
    assert digest({"a": 1, "b": 2}) == digest({"b": 2, "a": 1})
    assert items_digest([("q1", "p1", "0.5"), ("q2", "p2", "1.0")]) == items_digest([("q2", "p2", "1.0"),
                                                                                     ("q1", "p1", "0.5")])
    assert items_digest([("q1", "p1", "0.5")]) != items_digest([("q1", "p1", "0.6")])


class Scorer:
    built = 0

    def __init__(self, key: str) -> None:
        Scorer.built += 1
        self.model_key = key

    def score(self, inputs):
        return [1.0] * len(inputs)


def test_the_lazy_scorer_builds_only_when_asked_to_score() -> None:
    Scorer.built, forgotten = 0, []
    lazy = LazyScorer("ce|v1", lambda: Scorer("ce|v1"), lambda: forgotten.append(1))
    assert lazy.model_key == "ce|v1" and Scorer.built == 0  # a warm cache lookup needs only the key
    assert lazy.score([("q", "p")]) == [1.0] and Scorer.built == 1
    stale = LazyScorer("ce|v1", lambda: Scorer("ce|v2"), lambda: forgotten.append(1))
    with pytest.raises(RuntimeError, match="cache key changed from 'ce\\|v1' to 'ce\\|v2'"):
        stale.score([("q", "p")])
    assert forgotten == [1]
