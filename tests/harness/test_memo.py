"""Content-keyed memos and the lazy scorer stand-in: what lets a warm run skip models entirely."""
from __future__ import annotations

import hashlib
import pickle
import stat
import warnings
from pathlib import Path

import pytest

from fixtures.identity import items_digest, parts_digest as digest, texts_digest
from harness.memo import KEY_ENV, MAGIC, Memo, MemoKeyError, MemoWarning, memo_key
from rankers.kinds.base import LazyScorer


@pytest.fixture(autouse=True)
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A memo key of the test's own, outside its cache folder."""
    path = tmp_path / "config" / "memo.key"
    monkeypatch.setenv(KEY_ENV, str(path))
    return path


def test_a_memo_computes_once_per_key_and_recomputes_an_altered_value(tmp_path: Path) -> None:
    memo, calls = Memo(tmp_path / "cache" / "memo"), []

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
    with pytest.warns(MemoWarning, match=f"memo row {path}: its HMAC does not verify"):
        assert memo.get("row", {"pool": "abc"}, compute) == {"strict": 1387}
    assert len(calls) == 3


class Planted:
    """A value whose unpickling creates a marker file: what an attacker who can write the cache would plant."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("forge", ["bare pickle", "forged header", "another key's memo"])
def test_a_planted_memo_is_never_unpickled_but_named_and_recomputed(tmp_path: Path, key_file: Path,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    forge: str) -> None:
    """A memo whose HMAC does not verify under this user's key is refused before any byte is unpickled: a planted
    file (with or without the format's header, or one sealed under someone else's key) runs no code."""
    marker, cache = tmp_path / "executed", tmp_path / "cache" / "memo"
    memo = Memo(cache)
    path = memo.path("ranking", {"k": 1})
    payload = pickle.dumps(Planted(marker))
    if forge == "bare pickle":
        data = payload
    elif forge == "forged header":
        data = MAGIC + hashlib.sha256(payload).digest() + payload
    else:  # sealed correctly, but under another user's key
        monkeypatch.setenv(KEY_ENV, str(tmp_path / "other" / "memo.key"))
        other = Memo(cache)
        data = MAGIC + other._tag(path, payload) + payload
        monkeypatch.setenv(KEY_ENV, str(key_file))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    with pytest.warns(MemoWarning) as caught:
        assert memo.get("ranking", {"k": 1}, lambda: "recomputed") == "recomputed"
    assert not marker.exists(), "the planted memo ran code"
    [warning] = caught
    assert str(path) in str(warning.message) and "\n" not in str(warning.message)
    assert memo.get("ranking", {"k": 1}, lambda: "not again") == "recomputed"  # kept, under this user's HMAC
    assert not marker.exists()


def test_the_memo_key_is_private_made_once_and_kept_outside_the_cache(tmp_path: Path, key_file: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    key = memo_key(cache)
    assert Memo(cache / "memo").key == key
    assert key_file.read_bytes() == key and len(key) == 32 and memo_key(cache) == key  # made once, then read
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    folder = Memo(cache / "memo").folder
    assert folder.parent == cache / "memo" and key.hex()[:16] not in folder.name
    key_file.chmod(0o644)
    with pytest.raises(MemoKeyError, match=f"memo key {key_file} .*mode 0600 .*mode 644"):
        memo_key(cache)
    monkeypatch.setenv(KEY_ENV, str(cache / "memo.key"))
    with pytest.raises(MemoKeyError, match="lies inside the cache"):
        memo_key(cache)
    with pytest.raises(MemoKeyError, match="lies inside the cache"):
        Memo(cache / "memo").get("row", {}, lambda: "never kept")
    assert not (cache / "memo.key").exists()


def test_users_sharing_a_cache_keep_their_own_memos_without_warnings(tmp_path: Path, key_file: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache" / "memo"
    assert Memo(cache).get("row", {}, lambda: "mine") == "mine"
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "other" / "memo.key"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Memo(cache).get("row", {}, lambda: "theirs") == "theirs"
    monkeypatch.setenv(KEY_ENV, str(key_file))
    assert Memo(cache).get("row", {}, lambda: "recomputed") == "mine"


def test_a_value_its_keep_test_refuses_is_returned_but_not_kept(tmp_path: Path) -> None:
    memo, calls = Memo(tmp_path / "cache" / "memo"), []

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
