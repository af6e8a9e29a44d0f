"""The shared text-score cache: reuse, partial rescoring, unavailability, concurrency, interruption."""
from __future__ import annotations

import io
import multiprocessing as mp
import os
import re
import signal
import sqlite3
import struct
import warnings

import numpy as np
import pytest

from fixtures import progress
from fixtures.settings import Settings
from rankers.scorers.base import ScoreBatch
from rankers.scorers.cache import (SCHEMA_VERSION, CachedScore, ScoreCache, ScoreCacheWarning, capped,
                                   unavailable_cause, unavailable_causes)
from rankers.scorers.causes import exception_cause, host_of, server_cause
from rankers.scorers.pointwise import score_with_cache
from tests.support.score_cache import cache_key, delete_stored, stored_count, stored_errors


class CountingScorer:
    """Deterministic scorer (len(query) + len(passage)) that records every input it is asked for."""

    def __init__(self, model_key: str = "count-v1", fail_on: set[str] = frozenset(), raise_on_call: int | None = None):
        self.model_key = model_key
        self.fail_on = set(fail_on)
        self.raise_on_call = raise_on_call
        self.calls: list[list[tuple[str, str]]] = []

    def score(self, inputs):
        self.calls.append(list(inputs))
        if self.raise_on_call is not None and len(self.calls) == self.raise_on_call:
            raise RuntimeError("scorer crashed")
        scores = np.array([np.nan if p in self.fail_on else float(len(q) * 100 + len(p)) for q, p in inputs])
        errors = ["timeout" if p in self.fail_on else None for _, p in inputs]
        usage = [{"input_tokens": float(len(q) + len(p))} for q, p in inputs]
        return ScoreBatch(scores, errors, usage, [f"raw:{p}" for _, p in inputs])

    @property
    def seen(self) -> list[tuple[str, str]]:
        return [x for call in self.calls for x in call]


def make_inputs(n: int, qid: str = "q") -> list[tuple[str, str, str, str]]:
    return [(f"{qid}{i % 3}", f"p{i}", f"query {i % 3}", "passage " + "x" * i) for i in range(n)]


@pytest.fixture
def cache(tmp_path):
    with ScoreCache(tmp_path / "scores.sqlite") as c:
        yield c


def test_scores_are_aligned_and_a_rerun_scores_nothing(cache):
    inputs = make_inputs(10)
    first = CountingScorer()
    res = score_with_cache(first, inputs, cache, batch_size=3, progress=False)
    assert res.n_scored == 10 and res.n_cached == 0 and [len(c) for c in first.calls] == [3, 3, 3, 1]
    assert res.frame["score"].tolist() == [7.0 * 100 + 8 + i for i in range(10)]
    usage = res.frame["usage"][2]  # no time of its own: the chunk's wall-clock, shared over its 3 inputs
    assert usage["input_tokens"] == 7.0 + 10 and usage["seconds_shared"] == 1.0 and usage["seconds"] > 0
    assert res.frame["raw"][0] == "raw:passage "
    again = CountingScorer()
    res2 = score_with_cache(again, inputs, cache, batch_size=3, progress=False)
    assert again.calls == [] and res2.n_scored == 0 and res2.n_cached == 10
    assert res2.frame["score"].tolist() == res.frame["score"].tolist() and res2.frame["cached"].all()
    assert res2.scores[("q1", "p4")] == 712.0


def test_duplicates_are_scored_once(cache):
    inputs = make_inputs(4)
    # the same text input under another qid (e.g. pair-only and window, or a repeated query) shares the score
    dup = inputs + [inputs[0], ("other-qid", inputs[1][1], inputs[1][2], inputs[1][3])]
    scorer = CountingScorer()
    res = score_with_cache(scorer, dup, cache, batch_size=10, progress=False)
    assert len(scorer.seen) == 4 and res.n_unique == 4 and len(res.frame) == 6
    assert res.frame["score"].iloc[5] == res.frame["score"].iloc[1]


def test_deleting_half_rescores_exactly_that_half(cache):
    inputs = make_inputs(12)
    score_with_cache(CountingScorer(), inputs, cache, progress=False)
    gone = inputs[::2]
    assert delete_stored(cache, (cache_key("count-v1", p, q, t) for _, p, q, t in gone)) == 6
    scorer = CountingScorer()
    res = score_with_cache(scorer, inputs, cache, batch_size=4, progress=False)
    assert sorted(scorer.seen) == sorted((q, t) for _, _, q, t in gone)
    assert res.n_scored == 6 and res.frame["cached"].tolist() == [i % 2 == 1 for i in range(12)]


def test_key_covers_model_and_texts(cache):
    inputs = make_inputs(3)
    score_with_cache(CountingScorer(), inputs, cache, progress=False)
    other_model = CountingScorer("count-v2")
    score_with_cache(other_model, inputs, cache, progress=False)
    assert len(other_model.seen) == 3
    # same pid and query, edited passage text: a new input
    edited = CountingScorer()
    score_with_cache(edited, [(*inputs[0][:3], inputs[0][3] + " edited")], cache, progress=False)
    assert edited.seen == [(inputs[0][2], inputs[0][3] + " edited")]
    assert stored_count(cache) == 7 and stored_count(cache, "count-v1") + stored_count(cache, "count-v2") == 7


def test_unavailable_results_are_retried_on_the_next_run_by_default(cache):
    inputs = make_inputs(6)
    bad = {inputs[1][3], inputs[4][3]}
    res = score_with_cache(CountingScorer(fail_on=bad), inputs, cache, progress=False)
    assert res.n_unavailable == 2 and res.frame["error"].tolist()[1] == "timeout"
    assert np.isnan(res.frame["score"][4]) and res.n_retried == 0
    # a rerun against a working scorer re-requests exactly the two unavailable inputs (a dead server must not stick)
    retry = CountingScorer()
    res = score_with_cache(retry, inputs, cache, progress=False)
    assert sorted(retry.seen) == sorted((inputs[i][2], inputs[i][3]) for i in (1, 4))
    assert (res.n_scored, res.n_retried, res.n_cached) == (2, 2, 4)
    assert res.n_unavailable == 0 and res.frame["error"].isna().all()
    assert res.frame["score"][4] == 700.0 + 8 + 4
    assert res.frame["cached"].tolist() == [True, False, True, True, False, True]
    again = CountingScorer()
    assert score_with_cache(again, inputs, cache, progress=False).n_retried == 0 and again.calls == []


def test_the_old_error_stays_stored_until_a_retry_replaces_it(cache):
    inputs = make_inputs(6)
    score_with_cache(CountingScorer(fail_on={inputs[1][3], inputs[4][3]}), inputs, cache, progress=False)
    crashing = CountingScorer(raise_on_call=1)
    with pytest.raises(RuntimeError, match="scorer crashed"):
        score_with_cache(crashing, inputs, cache, progress=False)
    assert sorted(crashing.seen) == sorted((inputs[i][2], inputs[i][3]) for i in (1, 4))
    # the crash replaced nothing: the two inputs still carry their recorded reason
    keys = [cache_key("count-v1", p, q, t) for _, p, q, t in inputs]
    assert [e or "" for e in stored_errors(cache, keys)] == ["", "timeout", "", "", "timeout", ""]


def test_non_finite_scores_become_unavailable_with_a_reason(cache):
    class Inf(CountingScorer):
        def score(self, inputs):
            return ScoreBatch(np.array([np.inf] * len(inputs)), [None] * len(inputs))
    res = score_with_cache(Inf(), make_inputs(2), cache, progress=False)
    assert res.frame["score"].isna().all() and res.frame["error"].tolist() == ["non-finite score"] * 2


def test_a_negative_zero_score_is_stored_as_zero_and_read_back_without_a_digest_failure(cache):
    """SQLite keeps a REAL -0.0 as 0.0: a row whose digest covered -0.0 failed its check on every read and was deleted
    and rescored each run, with a warning. -0.0 and 0.0 order alike, so the store keeps 0.0."""
    class SignedZero(CountingScorer):
        def score(self, inputs):
            self.calls.append(list(inputs))
            return ScoreBatch(np.array([-0.0] * len(inputs)), [None] * len(inputs))

    first = SignedZero()
    score_with_cache(first, make_inputs(2), cache, progress=False)
    again = SignedZero()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScoreCacheWarning)
        res = score_with_cache(again, make_inputs(2), cache, progress=False)
    assert again.calls == [] and res.n_cached == 2 and res.frame["score"].tolist() == [0.0, 0.0]


def test_a_scorer_raising_mid_run_keeps_earlier_batches(cache):
    inputs = make_inputs(10)
    crashing = CountingScorer(raise_on_call=3)
    with pytest.raises(RuntimeError, match="scorer crashed"):
        score_with_cache(crashing, inputs, cache, batch_size=3, progress=False)
    assert stored_count(cache, "count-v1") == 6
    resume = CountingScorer()
    res = score_with_cache(resume, inputs, cache, batch_size=3, progress=False)
    assert len(resume.seen) == 4 and res.n_cached == 6


def test_misaligned_batches_are_refused(cache):
    class Short(CountingScorer):
        def score(self, inputs):
            return ScoreBatch(np.zeros(len(inputs) - 1), [None] * (len(inputs) - 1))
    with pytest.raises(ValueError, match="returned 2 scores / 2 errors for 3 inputs"):
        score_with_cache(Short(), make_inputs(3), cache, progress=False)
    assert stored_count(cache) == 0


def _writer(path: str, worker: int, out) -> None:
    with ScoreCache(path) as c:
        # overlapping inputs: every worker scores the shared 0..29 plus 10 of its own
        inputs = make_inputs(30) + [(f"w{worker}", f"own{worker}-{i}", "q", f"t{worker}-{i}") for i in range(10)]
        res = score_with_cache(CountingScorer(), inputs, c, batch_size=4, progress=False)
        out.put((worker, int(res.frame["score"].notna().sum())))


def test_concurrent_writers_share_one_cache(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, w, out)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert sorted(out.get(timeout=5) for _ in procs) == [(w, 40) for w in range(4)]
    with ScoreCache(tmp_path / "shared.sqlite") as c:
        assert stored_count(c, "count-v1") == 30 + 4 * 10


def test_settings_location(tmp_path):
    with ScoreCache.in_folder(Settings(cache_dir=tmp_path).cache("scores")) as c:
        assert c.path == tmp_path / "scores" / f"text_scores.v{SCHEMA_VERSION}.sqlite"
        assert c._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


class FractionalScorer(CountingScorer):
    """Scores with a fractional part, so SQLite stores each as an 8-byte IEEE double findable in the file."""

    def score(self, inputs):
        batch = super().score(inputs)
        return ScoreBatch(batch.scores + 0.123456789, batch.errors, batch.usage, batch.raw)


def _flip_once(path, needle: bytes, offset: int) -> None:
    """Flip one byte of the only occurrence of ``needle`` in a closed (checkpointed) SQLite file."""
    data = bytearray(path.read_bytes())
    assert data.count(needle) == 1
    data[data.index(needle) + offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("field", ["score", "raw"])
def test_a_flipped_byte_in_a_stored_row_is_named_deleted_and_rescored(tmp_path, field):
    path = tmp_path / "scores.sqlite"
    inputs = make_inputs(8)
    with ScoreCache(path) as c:
        first = score_with_cache(FractionalScorer(), inputs, c, progress=False)
    # p7 is the only input whose raw text holds seven x's; flip its score's last mantissa byte or a raw letter
    needle = struct.pack(">d", first.frame["score"][7]) if field == "score" else b"raw:passage " + b"x" * 7
    _flip_once(path, needle, 7 if field == "score" else 4)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]  # SQLite itself sees nothing
    with ScoreCache(path) as c:
        rescorer = FractionalScorer()
        with pytest.warns(ScoreCacheWarning) as caught:
            res = score_with_cache(rescorer, inputs, c, progress=False)
        message = str(caught[0].message)
        assert str(path) in message and "'count-v1'" in message and "'p7'" in message and "digest" in message
        assert rescorer.seen == [(inputs[7][2], inputs[7][3])]
        assert res.n_rejected == 1 and res.n_scored == 1 and res.frame["cached"].sum() == 7
        assert res.frame["score"].tolist() == first.frame["score"].tolist()
        assert res.frame["raw"].tolist() == first.frame["raw"].tolist()
        calm = FractionalScorer()
        assert score_with_cache(calm, inputs, c, progress=False).n_rejected == 0 and calm.calls == []


@pytest.mark.parametrize("damage", ["truncated", "header overwritten"])
def test_an_unreadable_cache_file_is_moved_aside_and_rescored(tmp_path, damage):
    path = tmp_path / "scores.sqlite"
    inputs = make_inputs(400)
    with ScoreCache(path) as c:
        score_with_cache(CountingScorer(), inputs, c, progress=False)
    data = path.read_bytes()
    damaged = data[:len(data) // 2] if damage == "truncated" else b"\x00" * 100 + data[100:]
    path.write_bytes(damaged)
    with pytest.warns(ScoreCacheWarning, match=f"score cache {re.escape(str(path))} is unusable .*moved it aside to "
                                               r"scores\.sqlite\.corrupt-\d{8}T\d{6}\.\d+Z .*recomputed"):
        c = ScoreCache(path)
    with c:
        aside = list(tmp_path.glob("scores.sqlite.corrupt-*"))
        assert len(aside) == 1 and aside[0].read_bytes() == damaged  # kept for inspection, not deleted
        scorer = CountingScorer()
        res = score_with_cache(scorer, inputs, c, progress=False)
        assert len(scorer.seen) == 400 and res.n_scored == 400 and stored_count(c) == 400


def test_a_cache_damaged_while_open_recovers_mid_run(tmp_path):
    path = tmp_path / "scores.sqlite"
    inputs = make_inputs(3000)
    with ScoreCache(path) as c:
        score_with_cache(CountingScorer(), inputs, c, batch_size=500, progress=False)
    with ScoreCache(path) as c:
        with open(path, "r+b") as fh:  # torn underneath an open connection (a disk fault, a careless copy)
            fh.truncate(path.stat().st_size // 3)
        scorer = CountingScorer()
        with pytest.warns(ScoreCacheWarning, match="is unusable"):
            res = score_with_cache(scorer, inputs, c, batch_size=500, progress=False)
        assert res.n_scored == 3000 and res.frame["score"].notna().all() and stored_count(c) == 3000
    assert len(list(tmp_path.glob("scores.sqlite.corrupt-*"))) == 1


def test_a_cache_of_another_layout_is_moved_aside_not_misread(tmp_path):
    path = tmp_path / "scores.sqlite"
    with sqlite3.connect(path) as old:  # schema v1: no digest column, no user_version
        old.execute("CREATE TABLE scores (model_key TEXT, query_sha TEXT, pid TEXT, passage_sha TEXT, score REAL, "
                    "error TEXT, usage TEXT, raw TEXT, created REAL, "
                    "PRIMARY KEY (model_key, query_sha, pid, passage_sha))")
        key = cache_key("count-v1", "p0", "query 0", "passage ")
        old.execute("INSERT INTO scores VALUES (?, ?, ?, ?, 1e9, NULL, '{}', NULL, 0)", key)
    with pytest.warns(ScoreCacheWarning, match=f"layout differs from schema v{SCHEMA_VERSION}"):
        c = ScoreCache(path)
    with c:
        scorer = CountingScorer()
        res = score_with_cache(scorer, make_inputs(1), c, progress=False)
        assert scorer.seen == [("query 0", "passage ")] and res.frame["score"].tolist() == [708.0]
    assert len(list(tmp_path.glob("scores.sqlite.corrupt-*"))) == 1


def _open_and_score(path: str, worker: int, out) -> None:
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with ScoreCache(path) as c:
            inputs = [(f"w{worker}", f"own{worker}-{i}", "q", f"t{worker}-{i}") for i in range(10)]
            score_with_cache(CountingScorer(), inputs, c, progress=False)
    out.put(worker)


def test_concurrent_openers_of_a_corrupt_cache_recover_it_once(tmp_path):
    path = tmp_path / "shared.sqlite"
    path.write_bytes(b"this is not a database" * 500)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_open_and_score, args=(str(path), w, out)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert len(list(tmp_path.glob("shared.sqlite.corrupt-*"))) == 1  # one process moved it; the rest used the fresh one
    with ScoreCache(path) as c:
        assert stored_count(c, "count-v1") == 40


class LengthSortedScorer(CountingScorer):
    """A scorer that asks for inputs ordered by passage length, in chunks of its own size."""

    chunk_size = 4

    def sort_key(self, query: str, passage: str) -> int:
        return len(passage)


def test_inputs_to_score_are_sorted_by_the_scorers_key_and_sent_in_its_chunks(cache):
    order = [7, 2, 9, 0, 5, 3, 8, 1, 6, 4]
    inputs = [make_inputs(10)[i] for i in order]
    score_with_cache(CountingScorer(), inputs[:3], cache, progress=False)  # 7, 2 and 9 are cached already
    scorer = LengthSortedScorer()
    res = score_with_cache(scorer, inputs, cache, batch_size=64, progress=False)
    assert [len(call) for call in scorer.calls] == [4, 3]
    assert [len(p) - len("passage ") for _, p in scorer.seen] == [0, 1, 3, 4, 5, 6, 8]
    # results stay aligned with the caller's order
    assert res.frame["pid"].tolist() == [f"p{i}" for i in order]
    assert res.frame["score"].tolist() == [708.0 + i for i in order]


def test_progress_is_a_stage_with_rate_eta_and_unavailable_count(cache, monkeypatch):
    lines = io.StringIO()
    monkeypatch.setattr(progress._CONFIG, "stream", lines)
    monkeypatch.setattr(progress._CONFIG, "enabled", True)
    monkeypatch.setattr(progress._CONFIG, "interval_s", 0.0)
    monkeypatch.setattr(progress._CONFIG, "prefix", "")
    inputs = make_inputs(6)
    score_with_cache(CountingScorer(fail_on={inputs[1][3], inputs[4][3]}), inputs, cache, batch_size=3,
                     desc="ce window test")
    out = lines.getvalue().splitlines()
    assert out[0] == "ce window test ... started (6 inputs)"
    assert re.fullmatch(r"ce window test: 3/6 inputs \(50%\), \S+ inputs/s, ETA \S+ \S+, unavailable 1", out[1])
    assert re.fullmatch(r"ce window test: done, 6 inputs in \S+ s \(\S+ inputs/s\), unavailable 2", out[-1])
    score_with_cache(CountingScorer(), inputs, cache, batch_size=3, desc="ce window test")  # retries the two
    lines.seek(0)
    lines.truncate(0)
    score_with_cache(CountingScorer(), inputs, cache, batch_size=3, desc="ce window test")
    assert lines.getvalue() == ""  # nothing to score: no stage


class KilledScorer(CountingScorer):
    """Dies by SIGKILL (no cleanup, no exception handling) when asked for its third chunk."""

    def score(self, inputs):
        if len(self.calls) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().score(inputs)


def _score_until_killed(path: str) -> None:
    with ScoreCache(path) as c:
        score_with_cache(KilledScorer(), make_inputs(10), c, batch_size=3, progress=False)


def test_a_run_killed_mid_scoring_keeps_committed_chunks_and_resumes(tmp_path):
    path = tmp_path / "scores.sqlite"
    child = mp.get_context("fork").Process(target=_score_until_killed, args=(str(path),))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file is sound: no row or file is discarded
        with ScoreCache(path) as c:
            assert stored_count(c, "count-v1") == 6
            resume = CountingScorer()
            res = score_with_cache(resume, make_inputs(10), c, batch_size=3, progress=False)
    assert len(resume.seen) == 4 and res.n_cached == 6 and res.frame["score"].notna().all()


class LazyScorer(CountingScorer):
    """Stands for a scorer whose model loads on first use: a warm run must not touch it."""

    @property
    def chunk_size(self) -> int:
        raise AssertionError("a warm run asked for the chunk size")

    def sort_key(self, query: str, passage: str) -> int:
        raise AssertionError("a warm run sorted inputs")

    def score(self, inputs):
        raise AssertionError("a warm run called the scorer")


def test_a_warm_run_touches_only_the_model_key(cache):
    inputs = make_inputs(5)
    score_with_cache(CountingScorer(), inputs, cache, progress=False)
    res = score_with_cache(LazyScorer(), inputs, cache, progress=False)
    assert res.n_cached == 5 and res.n_scored == 0 and res.frame["score"].notna().all()


# ----------------------------------------------------------------------------- reply cap and causes


class TalkativeScorer(CountingScorer):
    """Answers each passage with a reply as long as the passage says (``"<n>:..."``) and a reason when it fails."""

    def score(self, inputs):
        batch = super().score(inputs)
        raw = ["r" * int(p.split(":")[0]) for _, p in inputs]
        errors = [None if e is None else "e" * int(p.split(":")[0]) for (_, p), e in zip(inputs, batch.errors)]
        return ScoreBatch(batch.scores, errors, batch.usage, raw)


def test_replies_and_reasons_are_stored_cut_to_the_cap_and_counted(cache):
    inputs = [("q", "p1", "query", "10:a"), ("q", "p2", "query", "200:b"), ("q", "p3", "query", "300:c")]
    scorer = TalkativeScorer(fail_on={"300:c"})
    first = score_with_cache(scorer, inputs, cache, progress=False, max_reply_chars=100)
    again = score_with_cache(TalkativeScorer(), inputs[:2], cache, progress=False, max_reply_chars=100)
    for frame in (first.frame.set_index("pid"), again.frame.set_index("pid")):  # cold returns what warm reads
        assert frame.loc["p1", "raw"] == "r" * 10 and "reply_chars" not in frame.loc["p1", "usage"]
        cut = frame.loc["p2", "raw"]
        assert len(cut) == 100 and cut.startswith("r" * 60) and cut.endswith("…[cut: 200 characters]")
        assert frame.loc["p2", "usage"]["reply_chars"] == 200
        assert frame.loc["p2", "score"] == float(len("query") * 100 + len("200:b"))  # the score is untouched
    assert first.n_capped == 2 and again.n_capped == 1 and again.n_scored == 0
    failed = first.frame.set_index("pid").loc["p3"]
    assert len(failed["error"]) == 100 and np.isnan(failed["score"])


@pytest.mark.parametrize("limit", [0, -1, 1.5, True])
def test_the_cap_is_a_positive_integer(limit):
    with pytest.raises(ValueError, match="max_reply_chars"):
        capped(CachedScore(1.0, None, {}, "x"), limit)


@pytest.mark.parametrize("error, cause", [
    ("ConnectError: [Errno 111] Connection refused (http://127.0.0.1:8011/v1/rerank)",
     "ConnectError to 127.0.0.1:8011"),
    ("backend: HTTP 500 (http://127.0.0.1:8011/v1/chat/completions): {\"error\": \"boom\"}",
     "HTTP 500 from 127.0.0.1:8011"),
    ("timeout after 60s (http://10.0.0.2:8000/v1/rerank)", "timeout after 60s to 10.0.0.2:8000"),
    ("backend: malformed response (http://h:1/v1/chat/completions): JSONDecodeError: Expecting value: line 1",
     "JSONDecodeError from h:1"),
    ("malformed response (http://h:1/v1/rerank): ValueError: result index 5 out of range for 3 documents",
     "malformed reply from h:1"),
    ("parse: unparseable answer '3 because it is'", "unparseable answer"),
    ("parse: empty answer", "empty answer"),
    ("non-finite score", "non-finite score"), ("non-finite score inf from mypkg:make", "non-finite score"),
    ("server returned no score for this document (index 3 of 20)", "no score for a document"),
    ("backend: RuntimeError: llama_decode returned -1", "RuntimeError: llama_decode returned -N"),
    ("", "no reason recorded"), (None, "no reason recorded"),
])
def test_a_stored_reason_reads_as_a_short_cause(error, cause):
    assert unavailable_cause(error) == cause


def test_causes_count_unique_unavailable_inputs_most_frequent_first(cache):
    inputs = make_inputs(6) + make_inputs(6)  # duplicates count once
    scorer = CountingScorer(fail_on={"passage " + "x" * i for i in (1, 2, 4)})
    scored = score_with_cache(scorer, inputs, cache, progress=False)
    assert unavailable_causes(scored.frame) == {"timeout": 3}
    assert scored.n_unavailable == 3


class CausingScorer(CountingScorer):
    """Fails on some passages with a reason and, on some, the cause it found (the rest say no cause)."""

    def score(self, inputs):
        batch = super().score(inputs)
        usage = [{**u, "cause": "server overloaded"} if p.endswith("xx") and np.isnan(s) else u
                 for u, (_, p), s in zip(batch.usage, inputs, batch.scores)]
        scores = np.where([p == "passage " for _, p in inputs], np.inf, batch.scores)  # inf: the suite's own reason
        return ScoreBatch(scores, batch.errors, usage, batch.raw)


def test_a_cause_found_with_the_failure_is_stored_and_counted_and_a_reason_without_one_is_read(cache):
    inputs = make_inputs(6)  # passages "passage " + "x" * i, i = 0..5
    scorer = CausingScorer(fail_on={"passage " + "x" * i for i in (1, 2, 4)})
    scored = score_with_cache(scorer, inputs, cache, progress=False)
    by_pid = dict(zip(scored.frame["pid"], scored.frame["usage"]))
    assert by_pid["p2"]["cause"] == by_pid["p4"]["cause"] == "server overloaded"  # stored, though its reason is
    assert "cause" not in by_pid["p1"] and "cause" not in by_pid["p3"]           # "timeout" in all three
    assert by_pid["p0"]["cause"] == "non-finite score"
    assert unavailable_causes(scored.frame) == {"server overloaded": 2, "non-finite score": 1, "timeout": 1}


def test_exception_and_server_causes_name_the_failure_and_where():
    assert exception_cause(ConnectionRefusedError(111, "Connection refused"), "127.0.0.1:8011") == \
        "ConnectionRefusedError to 127.0.0.1:8011"
    assert exception_cause(RuntimeError("llama_decode returned -1")) == "RuntimeError: llama_decode returned -N"
    assert exception_cause(ValueError()) == "ValueError"
    assert server_cause("HTTP 503", "h:1") == "HTTP 503 from h:1" and server_cause("HTTP 503", "") == "HTTP 503"
    assert host_of("http://127.0.0.1:8011/v1/rerank") == "127.0.0.1:8011"


def test_a_dead_server_reads_as_a_connection_error_to_its_address(cache):
    from rankers.scorers.rerank_api import RerankAPIScorer
    from tests.support.loopback import free_port

    port = free_port()
    scored = score_with_cache(RerankAPIScorer(f"http://127.0.0.1:{port}", "m", timeout_s=5),
                              make_inputs(4), cache, progress=False)
    assert unavailable_causes(scored.frame) == {f"ConnectError to 127.0.0.1:{port}": 4}
    assert {u["cause"] for u in scored.frame["usage"]} == {f"ConnectError to 127.0.0.1:{port}"}  # stored, not read


def test_the_generation_changes_with_every_change_to_the_stored_scores_and_only_then(tmp_path):
    """What a memo of judgments read whole from the store is keyed by: reads leave it, any write moves it, even one
    made by another program on its own connection; a new file is another store."""
    path = tmp_path / "scores.sqlite"
    with ScoreCache(path) as cache:
        empty = cache.generation()
        inputs = make_inputs(4)
        score_with_cache(CountingScorer(), inputs, cache, progress=False)
        written = cache.generation()
        assert written[0] == empty[0] and written[1] > empty[1]
        score_with_cache(CountingScorer(), inputs, cache, progress=False)  # every input read from the store
        assert cache.generation() == written
        with ScoreCache(path) as other:  # another process's view of the same file
            assert other.generation() == written
        assert delete_stored(cache, [cache_key("count-v1", "p0", "query 0", "passage ")]) == 1
        deleted = cache.generation()
        assert deleted[1] > written[1]
        with sqlite3.connect(path) as conn:  # not through the suite: SQLite's triggers still count it
            conn.execute("UPDATE scores SET score = score + 1 WHERE pid = 'p1'")
        assert cache.generation()[1] > deleted[1]
    path.unlink()
    for extra in tmp_path.glob("scores.sqlite-*"):
        extra.unlink()
    with ScoreCache(path) as fresh:
        assert fresh.generation()[0] != written[0]  # a store made anew, whatever its count


def test_every_open_and_recovery_of_the_file_holds_its_lock(tmp_path, monkeypatch):
    """Four processes opening one corrupt cache: an unlocked open beside another's recovery met the files being
    moved aside ('disk I/O error'), and two first opens raced to switch the file to WAL, which SQLite refuses with
    SQLITE_BUSY at once (each about once in 150 loaded runs of the test above). Every connect, the first open's and a
    recovery's alike, now happens while the file's lock is held: checked by trying the lock from another handle."""
    from filelock import FileLock, Timeout

    from rankers.scorers import store

    real, held = store.ScoreCache._connect, []

    def connect_and_check_the_lock(self):
        other = FileLock(str(self.path.with_name(self.path.name + ".lock")), timeout=0)
        try:
            other.acquire()
            other.release()
            held.append(False)
        except Timeout:
            held.append(True)
        return real(self)

    monkeypatch.setattr(store.ScoreCache, "_connect", connect_and_check_the_lock)
    with ScoreCache(tmp_path / "scores.sqlite") as c:
        score_with_cache(CountingScorer(), make_inputs(2), c, progress=False)
    (tmp_path / "corrupt.sqlite").write_bytes(b"this is not a database" * 500)
    with pytest.warns(ScoreCacheWarning, match="unusable"), ScoreCache(tmp_path / "corrupt.sqlite") as c:
        assert stored_count(c) == 0
    assert held == [True, True, True]  # the fresh file's open; the corrupt one's, and its replacement's
