"""Declared Python scorers: both shapes from real modules written to disk, and one clear error per bad declaration."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from rankers.scorers.base import TextScorer
from rankers.scorers.cache import ScoreCache
from rankers.scorers.pointwise import score_with_cache
from rankers.scorers.python_scorer import (PoolScorer, ScorerDeclarationError, _code_key, load_python_scorer,
                                           pool_ranking, pool_scores)

SOURCE = '''
import numpy as np
from rankers.scorers.base import ScoreBatch


class Overlap:
    """Counts query words found in the passage, times a weight."""

    def __init__(self, weight=1.0):
        self.weight = weight

    @property
    def model_key(self):
        return f"overlap-v1|w{self.weight}"

    def score(self, inputs):
        s = [self.weight * len(set(q.split()) & set(p.split())) for q, p in inputs]
        return ScoreBatch(np.array(s, dtype=float), [None] * len(s))


class Lengths:
    model_key = "length-v1"

    def score(self, inputs):
        return [float(len(p)) if p != "broken" else float("nan") for _, p in inputs]


class ByBM25:
    """Full-pool scorer: the BM25 route's score, 0 where BM25 did not return the passage."""

    def __init__(self, missing=0.0):
        self.missing = missing
        self.seen_columns = None

    @property
    def model_key(self):
        return f"bm25-copy|missing{self.missing}"

    def score_pool(self, pool, queries, corpus):
        self.seen_columns = list(pool.columns)
        return pool["bm25_score"].fillna(self.missing).to_numpy()


class Both(Overlap):
    def score_pool(self, pool, queries, corpus):
        return np.zeros(len(pool))


class Short(ByBM25):
    def score_pool(self, pool, queries, corpus):
        return np.zeros(len(pool) - 1)


class WithNaN(ByBM25):
    def score_pool(self, pool, queries, corpus):
        return pool["bm25_score"].to_numpy()


class Misaligned(Overlap):
    def score(self, inputs):
        return ScoreBatch(np.zeros(len(inputs) + 1), [None] * (len(inputs) + 1))


class Crashing(Overlap):
    def score(self, inputs):
        raise ZeroDivisionError("bug in my scorer")


class NoKey:
    model_key = ""

    def score(self, inputs):
        return []


def failing_factory(**options):
    raise RuntimeError("checkpoint not found: /nowhere")


def make_nothing():
    return 42


NOT_CALLABLE = 3
'''

_names = itertools.count()


@pytest.fixture
def module(tmp_path, monkeypatch):
    """A fresh, uniquely named module holding SOURCE, importable for this test only."""
    name = f"my_rankers_{next(_names)}"
    (tmp_path / f"{name}.py").write_text(SOURCE)
    (tmp_path / f"{name}_broken.py").write_text("import not_a_real_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


POOL = pd.DataFrame({
    "qid": ["q1", "q1", "q1", "q2", "q2"],
    "pid": ["a", "b", "c", "a", "d"],
    "dense_score": [0.5, 0.4, np.nan, 0.9, 0.1], "dense_rank": [1, 2, np.nan, 1, 2],
    "sparse_score": np.nan, "sparse_rank": np.nan,
    "bm25_score": [1.0, 3.0, 2.0, np.nan, 5.0], "bm25_rank": [3, 1, 2, np.nan, 1],
    "preferred": [True, False, False, True, False],  # must never reach a declared scorer
})
QUERIES = {"q1": "who was born in paris", "q2": "which film won"}
CORPUS = {"a": "born in lyon", "b": "born in paris", "c": "x", "d": "the film won"}


def test_text_scorer_is_a_window_scorer_with_options_and_a_full_key(module):
    loaded = load_python_scorer(f"{module}:Overlap", {"weight": 2.0}, ranker="mine")
    assert loaded.is_window and isinstance(loaded.scorer, TextScorer)
    batch = loaded.scorer.score([("born in paris", "born in lyon"), ("film", "the film won"), ("a", "b")])
    np.testing.assert_array_equal(batch.scores, [4.0, 2.0, 0.0])  # 2 words x 2, 1 word x 2, none
    code = _code_key(f"{module}:Overlap")
    assert loaded.model_key == f'python|{module}:Overlap|{{"weight":2.0}}|code:{code}|overlap-v1|w2.0'
    assert load_python_scorer(f"{module}:Overlap").model_key != loaded.model_key


def test_plain_float_lists_are_accepted_and_nan_gets_a_reason(module, tmp_path):
    loaded = load_python_scorer(f"{module}:Lengths")
    with ScoreCache(tmp_path / "s.sqlite") as cache:
        scored = score_with_cache(loaded.scorer, [("q", "p1", "query", "abc"), ("q", "p2", "query", "broken")], cache,
                                  progress=False)
    assert scored.frame["score"].iloc[0] == 3.0 and np.isnan(scored.frame["score"].iloc[1])
    assert "non-finite score nan" in scored.frame["error"].iloc[1] and module in scored.frame["error"].iloc[1]


def test_pool_scorer_ranks_the_pool_and_never_sees_labels(module):
    loaded = load_python_scorer(f"{module}:ByBM25", {"missing": -1.0})
    assert not loaded.is_window and isinstance(loaded.scorer, PoolScorer)
    ranking = pool_ranking(loaded, POOL, QUERIES, CORPUS, "bm25copy")
    order = ranking.frame.groupby("qid")["pid"].apply(list).to_dict()
    assert order == {"q1": ["b", "c", "a"], "q2": ["d", "a"]}  # bm25 3 > 2 > 1; 5 > missing (-1)
    assert ranking.frame.set_index(["qid", "pid"]).loc[("q2", "a"), "k0"] == -1.0
    assert "preferred" not in loaded.scorer.seen_columns and "bm25_rank" in loaded.scorer.seen_columns
    code = _code_key(f"{module}:ByBM25")
    assert ranking.info["model_key"] == f'python|{module}:ByBM25|{{"missing":-1.0}}|code:{code}|bm25-copy|missing-1.0'


@pytest.mark.parametrize("spec", ["nomodule", "pkg.mod:", ":factory", "my mod:f", "a:b:c", "a.:f", "1abc:f"])
def test_malformed_declarations(spec):
    with pytest.raises(ScorerDeclarationError, match="must look like 'package.module:factory'") as info:
        load_python_scorer(spec, ranker="mine")
    assert f"python ranker 'mine' ({spec!r})" in str(info.value)


def test_import_failures_name_the_declaration_and_the_cause(module):
    with pytest.raises(ScorerDeclarationError, match=r"module 'no_such_pkg_xyz\.sub' not found"):
        load_python_scorer("no_such_pkg_xyz.sub:f")
    with pytest.raises(ScorerDeclarationError, match=rf"importing '{module}_broken' failed.*not_a_real_dependency_xyz"):
        load_python_scorer(f"{module}_broken:f")
    with pytest.raises(ScorerDeclarationError, match=rf"'{module}' has no attribute 'Missing'"):
        load_python_scorer(f"{module}:Missing")
    with pytest.raises(ScorerDeclarationError, match=rf"'{module}.Overlap' has no attribute 'nope'"):
        load_python_scorer(f"{module}:Overlap.nope")
    with pytest.raises(ScorerDeclarationError, match="is a int, not a callable factory"):
        load_python_scorer(f"{module}:NOT_CALLABLE")


def test_factory_errors_keep_the_original_exception(module):
    with pytest.raises(ScorerDeclarationError, match="factory raised RuntimeError: checkpoint not found") as info:
        load_python_scorer(f"{module}:failing_factory", ranker="mine")
    assert isinstance(info.value.__cause__, RuntimeError) and "'mine'" in str(info.value)
    with pytest.raises(ScorerDeclarationError, match="factory raised TypeError") as info:
        load_python_scorer(f"{module}:Overlap", {"wieght": 2.0})  # a typo in the profile's options
    assert isinstance(info.value.__cause__, TypeError)


@pytest.mark.parametrize("factory, words", [
    ("make_nothing", "a builtins.int is none of what is accepted: an object with score"),
    ("Both", r"with both score\(\) and score_pool\(\)"),
    ("NoKey", "model_key must be a non-empty string"),
])
def test_returned_objects_of_no_usable_shape(module, factory, words):
    with pytest.raises(ScorerDeclarationError, match=words):
        load_python_scorer(f"{module}:{factory}")


def test_bad_pool_scores_and_misaligned_batches(module):
    with pytest.raises(ScorerDeclarationError, match=r"returned shape \(4,\) for 5 pool rows"):
        pool_scores(load_python_scorer(f"{module}:Short"), POOL, QUERIES, CORPUS)
    with pytest.raises(ScorerDeclarationError, match=r"1 non-finite scores, e.g. \[\{'qid': 'q2', 'pid': 'a'\}\]"):
        pool_scores(load_python_scorer(f"{module}:WithNaN"), POOL, QUERIES, CORPUS)
    with pytest.raises(KeyError, match="1 pool pids lack passage text"):
        without_d = {k: v for k, v in CORPUS.items() if k != "d"}
        pool_scores(load_python_scorer(f"{module}:ByBM25"), POOL, QUERIES, without_d)
    with pytest.raises(ScorerDeclarationError, match=r"returned \(3,\) scores and 3 errors for 2 inputs"):
        load_python_scorer(f"{module}:Misaligned").scorer.score([("q", "a"), ("q", "b")])
    with pytest.raises(ScorerDeclarationError, match="score\\(\\) raised ZeroDivisionError: bug in my scorer") as info:
        load_python_scorer(f"{module}:Crashing").scorer.score([("q", "a")])
    assert isinstance(info.value.__cause__, ZeroDivisionError)


class Returns:
    """A pool scorer returning whatever it is given (the pool's length decides nothing)."""

    model_key = "returns"

    def __init__(self, make):
        self.make = make

    def score_pool(self, pool, queries, corpus):
        return self.make(pool)


def _returning(make):
    from rankers.scorers.python_scorer import LoadedScorer

    return LoadedScorer("mod:f", False, Returns(make), {}, "python ranker 'mine' ('mod:f')", "code")


@pytest.mark.parametrize("make, words", [
    (lambda pool: pool[["bm25_score"]].fillna(0), r"returned a DataFrame; return one number per pool row"),
    (lambda pool: {i: 1.0 for i in pool.index}, r"returned a dict; return one number per pool row"),
    (lambda pool: None, r"returned a NoneType; return one number per pool row"),
    (lambda pool: ["high"] * len(pool), r"returned a list of <U4 values, not numbers"),
    (lambda pool: np.zeros((len(pool), 1)), r"returned shape \(5, 1\) for 5 pool rows"),
    (lambda pool: pd.Series(1.0, index=pool["pid"]), r"returned a Series whose index is not the pool's \(0\.\.4\)"),
])
def test_a_pool_scorer_returning_something_else_is_told_what_was_wrong(make, words):
    with pytest.raises(ScorerDeclarationError, match=rf"^python ranker 'mine' \('mod:f'\): score_pool\(\) {words}"):
        pool_scores(_returning(make), POOL, QUERIES, CORPUS)


def test_a_pool_scorer_series_on_the_pool_index_is_read_by_index_not_position():
    scores = pool_scores(_returning(lambda pool: pd.Series([10.0, 20.0, 30.0, 40.0, 50.0])[::-1]), POOL, QUERIES,
                         CORPUS)
    np.testing.assert_array_equal(scores, [10.0, 20.0, 30.0, 40.0, 50.0])  # reversed Series, same labels
    ints = pool_scores(_returning(lambda pool: [3, 1, 2, 5, 4]), POOL, QUERIES, CORPUS)
    assert ints.dtype == float and ints.tolist() == [3.0, 1.0, 2.0, 5.0, 4.0]


def test_the_documented_full_pool_example_keeps_the_contract(tmp_path, monkeypatch):
    import re

    from fixtures.settings import PROJECT_ROOT

    readme = (PROJECT_ROOT / "docs" / "kinds.md").read_text(encoding="utf-8")
    [example] = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "def score_pool" in b]
    name = f"readme_pool_{next(_names)}"
    (tmp_path / f"{name}.py").write_text(example + "\n\ndef make():\n    return BM25Only()\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded = load_python_scorer(f"{name}:make")
    assert not loaded.is_window
    np.testing.assert_array_equal(pool_scores(loaded, POOL, QUERIES, CORPUS), [1.0, 3.0, 2.0, -1.0, 5.0])
