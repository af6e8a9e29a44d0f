"""What a kind finds before any work (a factory's module, a run file, a model folder), and a TREC run's split
checks and coverage counts as the trec_run kind applies them."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from rankers.base import single_score_ranking
from rankers.kinds.base import DeclarationError, KindBuildError
from rankers.declarations import parse_declaration
from rankers.scorers.python_scorer import factory_problem

WHERE = "mine.toml [rankers.x]"


def decl(table: dict, name: str = "x"):
    return parse_declaration(name, table, WHERE)


# ---- python factories: found without running them ---------------------------------------------------------


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("fh_")]:
        monkeypatch.delitem(sys.modules, name)
    return tmp_path


@pytest.mark.parametrize("source, spec, words", [
    ("def make():\n    return 1\n", "fh_good:make", None),
    ("import os\ntry:\n    import fh_not_installed_pkg\nexcept ImportError:\n    pass\nclass Make:\n    pass\n",
     "fh_guarded:Make", None),  # a guarded optional import is the module's business
    ("def make(:\n", "fh_syntax:make", r"fh_syntax\.py:1: syntax error"),
    ("def other():\n    pass\n", "fh_noattr:make", r"fh_noattr\.py defines no 'make' at its top level"),
    ("import fh_not_installed_pkg\ndef make():\n    pass\n", "fh_missing_dep:make",
     r"fh_missing_dep\.py:1 imports 'fh_not_installed_pkg', which is not installed"),
])
def test_a_factory_is_checked_from_its_source_without_running_it(on_path: Path, source, spec, words) -> None:
    module = spec.split(":")[0]
    (on_path / f"{module}.py").write_text(source + "raise SystemExit('executed')\n", encoding="utf-8")
    problem = factory_problem(spec)
    assert (problem is None) if words is None else re.search(words, problem), problem
    assert module not in sys.modules  # looked up, never imported


def test_a_missing_module_or_a_malformed_factory_is_named() -> None:
    assert "must look like 'package.module:factory'" in factory_problem("no_colon_here")
    assert re.search(r"module 'fh_absent_module' is not found on sys\.path; name the folder .* pythonpath",
                     factory_problem("fh_absent_module:make"))
    assert "module 'fh_absent_pkg.sub' is not found" in factory_problem("fh_absent_pkg.sub:make")
    assert decl({"kind": "python", "factory": "fh_absent_module:make"}).ranker_kind.preflight(
        {"factory": "fh_absent_module:make"}, ("test",))


# ---- files and models ----------------------------------------------------------------------------------------


def test_a_run_file_is_checked_for_every_evaluated_split(tmp_path: Path) -> None:
    (tmp_path / "test.trec").write_text("q1 Q0 a 1 1.0 s\n")
    d = decl({"kind": "trec_run", "path": str(tmp_path / "{split}.trec")})
    assert d.ranker_kind.preflight(d.options, ("test",)) == []
    problems = d.ranker_kind.preflight(d.options, ("test", "confirmation"))
    assert len(problems) == 1 and str(tmp_path / "confirmation.trec") in problems[0]


def test_a_model_folder_that_does_not_exist_is_named(tmp_path: Path) -> None:
    d = decl({"kind": "cross_encoder", "model": str(tmp_path / "my-ce")})
    assert d.ranker_kind.preflight(d.options, ("test",)) == [
        f"cross_encoder model folder {tmp_path / 'my-ce'} does not exist (model paths resolve relative to the "
        "profile file)"]
    (tmp_path / "my-ce").mkdir()
    assert d.ranker_kind.preflight(d.options, ("test",)) == []
    trained = decl({"kind": "cross_encoder", "model": "trained"})
    assert trained.ranker_kind.models(trained.options) == ()  # trained here: nothing to resolve


def test_a_hub_model_offline_and_uncached_is_named_with_both_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    d = decl({"kind": "rerankers", "model": "no-such-org/no-such-reranker", "model_type": "cross-encoder"})
    [problem] = d.ranker_kind.preflight(d.options, ("test",))
    assert re.search(r"rerankers model 'no-such-org/no-such-reranker' .*huggingface-cli download "
                     r"no-such-org/no-such-reranker.*allow the hub", problem)
    api = decl({"kind": "rerankers", "model": "cohere", "model_type": "api"})
    assert api.ranker_kind.preflight(api.options, ("test",)) == []  # an API name is the library's business


# ---- server grading options ------------------------------------------------------------------------------------


def test_logprobs_true_means_five_alternatives_and_shares_the_cache_key_with_five() -> None:
    base = {"kind": "llm_grader", "backend": "openai", "url": "http://127.0.0.1:8000/v1", "model": "grader"}
    assert decl({**base, "logprobs": True}).scorer_options["logprobs"] == 5
    assert decl({**base, "logprobs": True}).scorer_options == decl({**base, "logprobs": 5}).scorer_options
    assert decl({**base, "logprobs": False}).scorer_options["logprobs"] == 0
    with pytest.raises(DeclarationError, match=r"logprobs is the number of top alternatives per generated token .*"
                                               r"true = 5.*got 50"):
        decl({**base, "logprobs": 50})
    with pytest.raises(DeclarationError, match=r"model is the name the server serves the model under \(its alias, "
                                               r"as GET <url>/models lists it\), not a file"):
        decl({**base, "model": "/models/qwen.gguf"})


# ---- a TREC run's qids against the split --------------------------------------------------------------------------

REFERENCE = single_score_ranking(pd.DataFrame({"qid": ["q1"] * 3 + ["q2"] * 2, "pid": list("abcde")}),
                                 np.array([0.9, 0.8, 0.7, 0.9, 0.1]), "fusion")
DIRECTIONS = pd.DataFrame({"qid": ["q1", "q2", "q9", "c1"], "split": ["test", "test", "test", "confirmation"]})


def rank(tmp_path: Path, text: str, **options):
    run = tmp_path / "run.trec"
    run.write_text(text)
    d = decl({"kind": "trec_run", "path": str(run), **options})
    ctx = SimpleNamespace(study=SimpleNamespace(directions=DIRECTIONS), ranking=lambda split, name: REFERENCE,
                          resolve_path=Path, where=lambda decl: WHERE)
    return d.ranker_kind.rank(d, ctx, "test")


def test_qids_outside_the_subset_sample_are_dropped_and_counted(tmp_path: Path) -> None:
    ranking = rank(tmp_path, "q1 Q0 b 1 2.0 s\nq1 Q0 zz 2 1.0 s\nq9 Q0 a 1 1.0 s\nq9 Q0 b 2 0.5 s\n")
    assert {k: ranking.info["coverage"][k] for k in ("pool_queries", "pool_passages", "ranked_in_pool",
                                                     "unranked_in_pool", "ranked_outside_pool", "uncovered_queries",
                                                     "outside_sample_qids", "outside_sample_lines",
                                                     "other_split_qids")} == {
        "pool_queries": 2, "pool_passages": 5, "ranked_in_pool": 1, "unranked_in_pool": 4, "ranked_outside_pool": 1,
        "uncovered_queries": 1, "outside_sample_qids": 1, "outside_sample_lines": 2, "other_split_qids": 0}


def test_qids_of_other_splits_are_an_error_unless_declared(tmp_path: Path) -> None:
    text = "q1 Q0 b 1 2.0 s\nc1 Q0 a 1 1.0 s\n"
    with pytest.raises(KindBuildError, match=r"\[rankers\.x\]: run file .*run\.trec:2: qid 'c1' is a direction of "
                                             r"split 'confirmation', but the file is read for split 'test' \(1 "
                                             r"qid\(s\) of other splits \['confirmation'\]\).*other_splits"):
        rank(tmp_path, text)
    coverage = rank(tmp_path, text, other_splits="ignore").info["coverage"]
    assert coverage["other_split_qids"] == 1 and coverage["other_split_lines"] == 1
    with pytest.raises(DeclarationError, match="other_splits must be one of"):
        decl({"kind": "trec_run", "path": "x", "other_splits": "drop"})


def test_a_run_without_any_qid_of_the_split_is_an_error_naming_file_and_split(tmp_path: Path) -> None:
    with pytest.raises(KindBuildError, match=r"run file .*run\.trec holds no qid of split 'test'"):
        rank(tmp_path, "c1 Q0 a 1 1.0 s\n", other_splits="ignore")
    with pytest.raises(KindBuildError, match=r"run\.trec:2: qid 'nope' is no NevIR direction of any split \(1 such"):
        rank(tmp_path, "q1 Q0 a 1 1.0 s\nnope Q0 a 1 1.0 s\n")



# ---- the same checks before any work ---------------------------------------------------------------------------

def preflight(tmp_path: Path, files: dict[str, str], splits=("test", "confirmation"), **options) -> list[str]:
    for split, text in files.items():
        (tmp_path / f"{split}.trec").write_text(text)
    d = decl({"kind": "trec_run", "path": str(tmp_path / "{split}.trec"), **options})
    loads = []

    def study():
        loads.append(1)
        return SimpleNamespace(directions=DIRECTIONS)

    problems = d.ranker_kind.preflight(d.options, splits) or d.ranker_kind.preflight_data(d.options, splits, study)
    assert len(loads) <= 1
    return problems


def test_a_run_file_s_qids_are_checked_against_every_split_before_any_work(tmp_path: Path) -> None:
    """A run of another split used to fail only after the pools were built, as four tracebacks; now one sentence per
    file names it, its first offending line and that qid."""
    good = {"test": "q1 Q0 a 1 1.0 s\nq2 Q0 d 1 1.0 s\n", "confirmation": "c1 Q0 a 1 1.0 s\n"}
    assert preflight(tmp_path, good) == []
    problems = preflight(tmp_path, {**good, "test": "q1 Q0 a 1 1.0 s\n\nq1 Q0 b 2 0.5 s\nc1 Q0 a 1 1.0 s\n"})
    assert problems == [f"run file {tmp_path / 'test.trec'}:4: qid 'c1' is a direction of split 'confirmation', but "
                        "the file is read for split 'test' (1 qid(s) of other splits ['confirmation']); use one file "
                        "per split ({split} in path), or declare other_splits = \"ignore\" to drop them (counted)"]
    assert preflight(tmp_path, {**good, "test": "q1 Q0 a 1 1.0 s\nc1 Q0 a 1 1.0 s\n"}, other_splits="ignore") == []
    problems = preflight(tmp_path, {**good, "confirmation": "c1 Q0 a 1 1.0 s\nzz_q1 Q0 a 1 1.0 s\nq1 Q0 a 1 1 s\n"})
    assert len(problems) == 1 and problems[0].startswith(
        f"run file {tmp_path / 'confirmation.trec'}:2: qid 'zz_q1' is no NevIR direction of any split (1 such")
    problems = preflight(tmp_path, {**good, "confirmation": "q1 Q0 a 1 1.0 s\n"}, other_splits="ignore")
    assert problems == [f"run file {tmp_path / 'confirmation.trec'} holds no qid of split 'confirmation': every "
                        "direction would be a tie"]


def test_lines_that_are_no_run_lines_are_left_to_the_reader(tmp_path: Path) -> None:
    """Only six-field lines are run lines; the reader names a malformed one, with its line, when the run is read."""
    assert preflight(tmp_path, {"test": "this is not a TREC run line\n"}, splits=("test",)) == []
    assert preflight(tmp_path, {}, splits=("confirmation",))[0].startswith("run file(s) not found")  # files first
