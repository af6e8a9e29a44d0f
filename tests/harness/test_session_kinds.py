"""A ranker kind is one object: a kind defined right here is declared, built, memoized and skipped like any other.

Nothing outside this file is touched to add the kind below: the profile check, the session and its
memo find it by name.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fixtures.settings import Settings, default_cache_dir
from harness.profile import load_profile
from harness.profile_records import ProfileError
from harness.session import Evaluation
from rankers.base import Ranking, single_score_ranking
from rankers.fusion import fusion_scores
from rankers.kinds import kind, kinds
from rankers.kinds.base import Context, DeclarationError, PoolKind, RankerDecl, Requirement, WindowKind
from rankers.scorers.cache import ScoredInputs
from tests.support.kinds import registered

SUBSET = {"subset_pairs": 24, "subset_seed": 0}  # the CI scope: its pools are in the shared cache after a CI run


class ReversedFusion(PoolKind):
    """Fusion upside down: a full-pool kind that exists only in this test module."""

    name = "test_reversed_fusion"
    options = {"flip": (bool,)}
    doc = "fusion's order reversed (a test kind)"
    calls: list[str] = []

    def check(self, options, where: str) -> None:
        if options.get("flip") is False:
            raise DeclarationError(f"{where}: flip = false is plain fusion; declare kind = 'fusion' instead")

    def requirements(self, options) -> tuple[Requirement, ...]:
        return (Requirement("a reversing machine", lambda: False, "this test's kind never runs"),)

    def rank(self, decl: RankerDecl, ctx: Context, split: str) -> Ranking:
        type(self).calls.append(split)
        pool = ctx.pool(split)
        return single_score_ranking(pool, -fusion_scores(pool), decl.name)


@pytest.fixture
def reversed_kind():
    ReversedFusion.calls = []
    with registered(ReversedFusion()) as kind:
        yield kind


def _profile(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "mine.toml"
    path.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                    f'[rankers.upside_down]\nkind = "{ReversedFusion.name}"\norder = 15\n{extra}', encoding="utf-8")
    return path


def _cache_sharing_pools(tmp_path: Path) -> Path:
    """A fresh cache folder (so the memo starts empty) that reads the shared pools and encodings."""
    cache = tmp_path / "cache"
    cache.mkdir()
    shared = default_cache_dir()
    for part in ("pools", "embeddings"):
        (shared / part).mkdir(parents=True, exist_ok=True)
        (cache / part).symlink_to(shared / part, target_is_directory=True)
    return cache


def test_the_shipped_kinds_are_found_by_name() -> None:
    assert {"fusion", "lambdamart", "trec_run", "python", "cross_encoder", "rerank_api", "llm_grader",
            "rerankers"} <= set(kinds())
    assert kind("lambdamart").options == {"background": (int,), "seeds": (int,)} and kind("no_such_kind") is None


def test_a_kind_defined_in_a_test_is_declared_checked_and_has_requirements(reversed_kind, tmp_path) -> None:
    decl = load_profile(str(_profile(tmp_path))).rankers["upside_down"]
    assert decl.ranker_kind is reversed_kind and not decl.is_window and decl.baseline == "fusion"
    assert [r.reason for r in decl.requirements()] == ["a reversing machine is not available here: this test's "
                                                       "kind never runs"]
    with pytest.raises(ProfileError, match=r"\[rankers.upside_down\]: flip = false is plain fusion"):
        load_profile(str(_profile(tmp_path, "flip = false\n")))
    with pytest.raises(ProfileError, match=r"\[rankers.upside_down\]: unknown key 'background'"):
        load_profile(str(_profile(tmp_path, "background = 1\n")))


def test_a_full_pool_kind_defined_in_a_test_is_memoized_on_a_warm_run(reversed_kind, tmp_path) -> None:
    settings = Settings(cache_dir=_cache_sharing_pools(tmp_path), results_dir=tmp_path / "results", **SUBSET)
    profile = load_profile(str(_profile(tmp_path)))
    cold = Evaluation(settings, profile).ranking("test", "upside_down")
    assert ReversedFusion.calls == ["test"]
    warm_session = Evaluation(settings, profile)  # a new run: nothing in memory, the memo on disk
    warm = warm_session.ranking("test", "upside_down")
    assert ReversedFusion.calls == ["test"], "the warm run ranked again instead of reading its memo"
    assert warm.frame.equals(cold.frame)
    fusion = warm_session.ranking("test", "fusion").frame.set_index(["qid", "pid"])["k0"]
    mine = warm.frame.set_index(["qid", "pid"])["k0"]
    np.testing.assert_allclose(mine.loc[fusion.index].to_numpy(), -fusion.to_numpy())
    key = warm_session.ranking_key("test", "upside_down")
    assert key["kind"] == ReversedFusion.name and key["code"] and key["pool"] == warm_session.pool_digest("test")


def test_a_failing_kind_is_reported_against_its_declaration(reversed_kind, tmp_path, monkeypatch) -> None:
    def broken(self, decl, ctx, split):
        raise RuntimeError("the reversing machine jammed")

    monkeypatch.setattr(ReversedFusion, "rank", broken)
    settings = Settings(cache_dir=_cache_sharing_pools(tmp_path), **SUBSET)
    evaluation = Evaluation(settings, load_profile(str(_profile(tmp_path))))
    with pytest.raises(Exception, match=r"mine.toml \[rankers.upside_down\]: cannot rank test: RuntimeError: the "
                                        r"reversing machine jammed"):
        evaluation.ranking("test", "upside_down")


class ReversedWindow(WindowKind):
    """A window kind that judges each query's ordered window in one call (as a listwise model would): the
    window's last passage first. Defined here to show that such a kind needs nothing of the harness."""

    name = "test_reversed_window"
    calls: list[int] = []

    def identity(self, decl: RankerDecl, ctx: Context) -> dict:
        return {"kind": self.name, **self.code()}

    def judge(self, decl: RankerDecl, ctx: Context, inputs, desc: str) -> ScoredInputs:
        frame = pd.DataFrame(list(inputs), columns=["qid", "pid", "query", "passage"])
        type(self).calls.append(int(frame["qid"].nunique()))  # one judgment per ordered window
        position = frame.groupby("qid", sort=False).cumcount().astype(float)
        out = frame[["qid", "pid"]].assign(score=position, error=None, usage=[{} for _ in range(len(frame))],
                                           raw=None, cached=False)
        return ScoredInputs(out, n_unique=len(frame), n_scored=len(frame), n_cached=0, model_key=self.name)


def test_a_kind_judging_whole_windows_plugs_into_the_window_rule_unchanged(tmp_path) -> None:
    ReversedWindow.calls = []
    path = tmp_path / "mine.toml"
    path.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                    f'[rankers.reversed_window]\nkind = "{ReversedWindow.name}"\norder = 45\n', encoding="utf-8")
    with registered(ReversedWindow()):
        evaluation = Evaluation(Settings(cache_dir=_cache_sharing_pools(tmp_path), **SUBSET), load_profile(str(path)))
        ranking = evaluation.ranking("test", "reversed_window").frame
        fusion = evaluation.ranking("test", "fusion").frame
    assert ReversedWindow.calls == [fusion["qid"].nunique()]
    for qid in fusion["qid"].unique()[:5]:
        head = fusion[(fusion["qid"] == qid) & (fusion["rank"] <= 20)].sort_values("rank")["pid"].tolist()
        mine = ranking[ranking["qid"] == qid].sort_values("rank")["pid"].tolist()
        assert mine[:len(head)] == head[::-1] and mine[len(head):] == fusion[(fusion["qid"] == qid) & (
            fusion["rank"] > 20)].sort_values("rank")["pid"].tolist()


def test_a_python_window_scorer_edited_under_the_same_model_key_is_scored_again(tmp_path, monkeypatch) -> None:
    import sys

    from fixtures import code

    name = f"weighted_{tmp_path.name}"  # a module name no other test imported
    source = tmp_path / f"{name}.py"

    def write(weight: int) -> None:
        source.write_text(f"class S:\n    model_key = 'same-key'\n\n    def score(self, inputs):\n"
                          f"        return [{weight} * len(p) for _, p in inputs]\n\n\ndef make():\n    return S()\n",
                          encoding="utf-8")

    def scores() -> tuple[dict, int]:
        """A new run: a new session, the module imported afresh, no digest computed yet."""
        monkeypatch.delitem(sys.modules, name, raising=False)
        for cached in (code.code_digest, code._closure, code._imports):
            cached.cache_clear()
        evaluation = Evaluation(settings, load_profile(str(path)))
        return evaluation.window_scores("test", "mine"), evaluation.text_scores("test", "mine", "window").n_scored

    path = tmp_path / "mine.toml"
    path.write_text('[profile]\nname = "mine"\nextends = "embedded"\n'
                    f'[rankers.mine]\nkind = "python"\nfactory = "{name}:make"\norder = 45\n', encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))  # what the run does with the profile's pythonpath
    settings = Settings(cache_dir=_cache_sharing_pools(tmp_path), **SUBSET)
    write(1)
    first, scored = scores()
    assert scored == len(first) > 0
    assert scores() == (first, 0)  # unchanged code: every score read from the cache
    write(2)
    second, scored = scores()
    assert scored == len(first), "an edited scorer under the same model_key reused its old scores"
    assert second == {k: 2 * v for k, v in first.items()}
