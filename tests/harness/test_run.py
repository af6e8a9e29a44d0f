"""The evaluation as a library: the run's parts planned from the profile, each computed once into the record, what
failed kept with its cause, and a run that did not compute every part said to be partial."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fixtures.settings import Settings
from harness.options import OptionError
from harness.profile import load_profile
from harness.planning import parameters
from harness.run import RunBuilder, evaluate, settings_for
from harness.session import Evaluation
from reports.record_builder import RecordBuilder
from reports.run_record import RunRecord


def builder(tmp_path: Path, selected=lambda decl: True, profile: str = "embedded") -> RunBuilder:
    settings = Settings(splits=("test",), cache_dir=tmp_path / "cache", results_dir=tmp_path / "results")
    return RunBuilder(Evaluation(settings, load_profile(profile)), selected=selected)


def test_parts_are_planned_from_what_the_profile_declares(tmp_path: Path) -> None:
    run = builder(tmp_path)
    declared = parameters(run.ev.profile, run.ev.settings)
    rows = [k for k in run.calls if k[0] == "table2_row"]
    assert [k[2] for k in rows] == [d.name for d in run.ev.profile.ordered()] and {k[1] for k in rows} == {"test"}
    assert {k[2] for k in run.calls if k[0] == "h2"} == {p.id for p in declared["h2_claim"]}
    assert all(k[1] == "test" for k in run.calls)  # only the run's splits (pins of other splits are not planned)


def test_a_deselected_ranker_leaves_its_claims_untested_and_the_run_partial(tmp_path: Path) -> None:
    run = builder(tmp_path, selected=lambda decl: decl.name != "ce")
    assert ("test", "h2_ce_strict_gt_fusion") not in run.book.selected
    assert ("test", "h1_e0_strict_gt_fusion") in run.book.selected
    assert ("table2_row", "test", "ce") in run.deselected and ("table2_row", "test", "fusion") not in run.deselected
    record = run.run({run.key("margins", "test")})
    assert record.part("margins", "test").outcome == "computed" and not record.complete
    deselected, missing = record.partial
    assert deselected.endswith("part(s) need rankers this run does not compute (a -m selection or evaluate()'s "
                               "rankers): ['ce']")
    assert "part(s) of the run not computed" in missing and "manifest[test]" in missing
    with pytest.raises(KeyError, match="this run did not compute part manifest\\[test\\]"):
        record.part("manifest", "test")


def test_a_failing_part_keeps_its_cause_costs_only_its_own_rows_and_makes_the_run_partial(
        tmp_path: Path, monkeypatch) -> None:
    run = builder(tmp_path)
    monkeypatch.setattr(Evaluation, "row", lambda self, split, name: (_ for _ in ()).throw(
        RuntimeError(f"{name} cannot be ranked")))
    record = run.run({run.key("table2_row", "test", "bg8"), run.key("margins", "test")})
    outcome = record.part("table2_row", "test", "bg8")
    assert isinstance(outcome.error, RuntimeError) and outcome.outcome == "failed"
    assert record.part("margins", "test").outcome == "computed"
    assert record.failures.to_dict("records") == [{"split": "test", "part": "table2_row", "ranker": "bg8",
                                                   "outcome": "failed", "cause": "RuntimeError: bg8 cannot be ranked"}]
    assert record.partial[0] == "1 part(s) failed (the report lists each cause): table2_row[test-bg8]"
    assert [e.test for e in record.not_evaluated["test"]] == ["table2_row[test-bg8]"]
    with pytest.raises(KeyError, match="no part table2_row\\[test-nobody\\]"):
        run.key("table2_row", "test", "nobody")


def test_the_run_record_stacks_each_split_s_tables_and_reads_outcomes_through_their_seal(tmp_path: Path) -> None:
    from fixtures.artifacts import seal
    from reports.record import Artifact

    rec = RecordBuilder()
    for split, strict in (("test", 3), ("confirmation", 1)):
        rec.add("table2", split, {"ranker": "b", "strict": strict}, order=2)
        rec.add("table2", split, {"ranker": "a", "strict": strict + 1}, order=1)
        path = tmp_path / f"outcomes-{split}.parquet"
        pd.DataFrame({"qid": ["q1", "q2"], "strict": [True, False]}).to_parquet(path)
        seal(path)
        rec.artifact(split, Artifact("outcomes", path, "a"))
    record = RunRecord(rec.records())
    assert record.table2.to_dict("records") == [
        {"split": "confirmation", "ranker": "a", "strict": 2}, {"split": "confirmation", "ranker": "b", "strict": 1},
        {"split": "test", "ranker": "a", "strict": 4}, {"split": "test", "ranker": "b", "strict": 3}]
    assert list(record.failing("test", "a")["qid"]) == ["q2"]
    assert "preferred_pid" not in record.outcomes("test", "a")  # no population recorded: the outcomes alone
    population = tmp_path / "population-test.parquet"
    pd.DataFrame({"qid": ["q2", "q1"], "pair_id": ["p1", "p1"], "group": ["g", "g"], "query": ["x", "y"],
                  "preferred_pid": ["d2", "d1"], "counterpart_pid": ["d1", "d2"]}).to_parquet(population)
    seal(population)
    rec.artifact("test", Artifact("population", population))
    record = RunRecord(rec.records())
    outcomes = record.outcomes("test", "a")
    assert outcomes[["qid", "preferred_pid", "counterpart_pid"]].values.tolist() == [["q1", "d1", "d2"],
                                                                                     ["q2", "d2", "d1"]]
    assert record.failing("test", "a")[["qid", "preferred_pid", "query"]].values.tolist() == [["q2", "d2", "x"]]
    with pytest.raises(KeyError, match="no outcomes of ranker 'b'"):
        record.outcomes("test", "b")
    with pytest.raises(KeyError, match="split 'development' was not evaluated"):
        record["development"]


def test_options_are_checked_as_the_command_line_checks_them(tmp_path: Path) -> None:
    settings = settings_for("embedded", splits=["test"], subset_pairs=24, cache_dir=tmp_path / "c",
                            results_dir=tmp_path / "r")
    assert settings.splits == ("test",) and settings.subset_pairs == 24 and settings.run_scope().startswith("subset-24")
    with pytest.raises(OptionError, match="--subset-pairs must be >= 1"):
        settings_for("embedded", subset_pairs=0, cache_dir=tmp_path / "c", results_dir=tmp_path / "r")
    with pytest.raises(OptionError, match="unknown option\\(s\\) \\['subset'\\]"):
        settings_for("embedded", subset=24)
    with pytest.raises(OptionError, match="rankers \\['nobody'\\] are not declared"):
        evaluate("embedded", rankers=["nobody"], cache_dir=tmp_path / "c", results_dir=tmp_path / "r")


@pytest.mark.parametrize(("options", "message"), [
    ({"splits": "test"}, "splits must be a list of names, e.g. splits=\\['test'\\]"),
    ({"rankers": "fusion"}, "rankers must be a list of names"),
    ({"subset_pairs": "24"}, "subset_pairs must be a whole number >= 1, got '24' \\(str\\)"),
    ({"subset_pairs": 24.5}, "subset_pairs must be a whole number >= 1, got 24.5 \\(float\\)"),
    ({"grader_sample": True}, "grader_sample must be a whole number >= 0, got True"),
    ({"exclude_marks": ["llm", "fast"]}, "exclude_marks \\['fast'\\] are no ranker marks"),
    ({"add": {"fusion": object()}}, "declares a ranker named 'fusion' already"),
    ({"add": {"mine": object()}}, "none of what is accepted: an object with score"),
    ({"add": {"bad name": object()}}, "must be a portable identifier"),
])
def test_evaluate_refuses_a_bad_argument_by_name_before_any_work(tmp_path: Path, options, message) -> None:
    with pytest.raises(OptionError, match=message):
        evaluate("embedded", cache_dir=tmp_path / "c", results_dir=tmp_path / "r", **options)
    assert not (tmp_path / "c" / "pools").exists()  # nothing was computed


def test_an_added_object_is_declared_like_a_python_ranker_with_its_claims(tmp_path: Path) -> None:
    from harness.claims import h2_claims
    from harness.run import with_added
    from rankers.kinds.python import ADDED

    class Overlap:
        model_key = "overlap-v1"

        def score(self, inputs):
            return [float(len(set(q.split()) & set(p.split()))) for q, p in inputs]

    profile = with_added(load_profile("embedded"), {"mine": Overlap()})
    decl = profile.rankers["mine"]
    assert decl.kind == "python" and decl.is_window and decl.options[ADDED] == "mine"
    assert decl.order > max(d.order for n, d in profile.rankers.items() if n != "mine")
    assert {name for name, (ranker, *_) in h2_claims(profile).items() if ranker == "mine"} == {
        "h2_mine_strict_gt_fusion", "h2_mine_mrr_gt_fusion"}
