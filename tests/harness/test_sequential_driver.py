"""The sequential driver's bookkeeping: which budget is spent, the cost row's shares, the claims of a sample, and
the planning helper's report (docs/statistics.md#sequential-samples)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from harness import sequential
from harness.plan import judgments_per_direction, main
from harness.profile import load_profile
from harness.profile_records import Budget
from reports.sequential import STOP_COLUMNS, StoppingPoint, sequential_test, stop_lines, stopping_points


def _cost(judgments: float = 0, tokens: float = 0, seconds: float = 0) -> dict[str, float]:
    return {"judgments": judgments, "requests": judgments, "input_tokens": tokens, "output_tokens": 0.0,
            "wall_s": seconds}


def test_the_first_budget_spent_is_named() -> None:
    budget = Budget(max_directions=100, judgments=50, tokens=1000, seconds=60.0)
    assert sequential._over(budget, _cost(10, 10, 1)) is None
    assert "of 50 judgments" in sequential._over(budget, _cost(50))
    assert "of 1,000 tokens" in sequential._over(budget, _cost(10, 1000))
    assert "of 60 seconds" in sequential._over(budget, _cost(10, 10, 61))
    assert sequential._over(Budget(max_directions=10), _cost(10 ** 6, 10 ** 9, 10 ** 6)) is None


def test_the_cost_row_states_spending_as_shares_of_the_full_split() -> None:
    test = sequential_test(np.full(6, 4.0), np.full(6, 4), bound=4, scale=100)
    look = sequential.Look(6, 24, _cost(48), {"h2_x": True})
    run = sequential.SequentialRun("s", "test", tuple(f"q{i}" for i in range(24)), "decided",
                                   "every claim decided after 6 groups", [look], {"h2_x": test}, {"h3_x": "no test"},
                                   {"groups": 60, "directions": 240, "judgments": 480}, 1.5, Budget(100, 200),
                                   {"h2_x": 6})
    row = run.cost_row()
    assert (row["groups"], row["directions"], row["judgments"]) == (6, 24, 48)
    assert (row["share_groups"], row["share_directions"], row["share_judgments"]) == (0.1, 0.1, 0.1)
    assert row["stop"] == "decided" and row["budget"] == "100 directions, 200 judgments"
    rows = {r["claim"]: r for r in run.claim_rows({"h2_x": (90.0, 100.0)})}
    assert rows["h2_x"]["boot_lo"] == 90.0 and rows["h2_x"]["decided_after_groups"] == 6
    assert rows["h3_x"]["note"] == "no test"
    assert run.p_values("h2_x") == (float(test.p_greater[-1]), 1.0)
    assert "decided after 6 groups" in run.note("h2_x")


def test_each_claim_row_says_where_the_sample_stopped_and_which_look_decided_it() -> None:
    test = sequential_test(np.full(9, 4.0), np.full(9, 4), bound=4, scale=100)
    looks = [sequential.Look(3, 12, _cost(24), {"h2_x": False}), sequential.Look(6, 24, _cost(48), {"h2_x": True}),
             sequential.Look(9, 36, _cost(72), {"h2_x": True})]
    run = sequential.SequentialRun("s", "test", (), "budget", "budget spent: 72 of 72 judgments", looks,
                                   {"h2_x": test}, {"h3_x": "no test"}, {"groups": 60, "directions": 240,
                                                                         "judgments": 480}, 1.5, Budget(100, 72),
                                   {"h2_x": 6})
    rows = {r["claim"]: r for r in run.claim_rows()}
    where = {k: rows["h2_x"][k] for k in STOP_COLUMNS}
    assert where == {"sample": "s", "look": 3, "stop_groups": 9, "stop_directions": 36, "stop_judgments": 72,
                     "stop": "budget", "stop_reason": "budget spent: 72 of 72 judgments", "decided_look": 2,
                     "decided_after_groups": 6, "decided_directions": 24, "decided_judgments": 48}
    assert rows["h3_x"]["look"] == 3 and rows["h3_x"]["decided_look"] is None
    points = stopping_points(pd.DataFrame(run.claim_rows()))  # read back as sequential.csv holds them
    assert points["h2_x"] == StoppingPoint("s", 3, 9, 36, 72, "budget", "budget spent: 72 of 72 judgments", 2, 6, 24,
                                           48)
    assert points["h2_x"].words() == ("sequential sample s stopped at look 3: 9 groups, 36 directions, 72 judgments "
                                      "(budget spent: 72 of 72 judgments); decided at look 2 (6 groups, 24 "
                                      "directions, 48 judgments)")
    assert points["h3_x"].decided_look is None and points["h3_x"].words().endswith("(budget spent: 72 of 72 judgments)")
    one = StoppingPoint("s", 1, 1, 4, 1, "budget", "budget spent", 1, 1, 1, 8)
    assert one.words() == ("sequential sample s stopped at look 1: 1 group, 4 directions, 1 judgment (budget spent); "
                           "decided at look 1 (1 group, 1 direction, 8 judgments)")
    assert stop_lines(pd.DataFrame(run.claim_rows()), pd.DataFrame({"claim": ["h2_x"], "status": ["holds"]}))[0] \
        .startswith("h2_x (holds): sequential sample s stopped at look 3")
    assert stopping_points(pd.DataFrame({"claim": ["h2_x"], "sample": ["s"]})) == {}  # written before the columns


def test_a_samples_claims_and_the_plan(tmp_path) -> None:
    profile = load_profile("embedded")
    claims = sequential.sample_claims(profile, "grader_pairs")
    assert "h2_grader_pairs_expected_strict_gt_fusion" in claims and "h2_ce_strict_gt_fusion" not in claims
    assert "h3_grader_pairs_tie_branch_concentrates_failures" in claims
    assert sequential.family_sizes(profile)["H2"] >= 2 * sum(d.family == "H2" for d in claims.values())
    assert judgments_per_direction(profile, "grader_pairs") == 2  # three twins read one set of pair judgments
    assert judgments_per_direction(profile, "grader_windows") == 0  # its rankers are declared, not enabled
    assert judgments_per_direction(load_profile("paper"), "grader_windows") == 20
    # No saved run to resample (an earlier run's results/ would add a sixth model: tested in test_outcome_models).
    lines = main(["--sample", "grader_pairs", "--effect", "30", "--runs", "60", "--model-runs", "200",
                  "--previous", str(tmp_path)])
    assert lines[0].startswith("worst case over 5 outcome models") and "MDE" in lines[0] and "+30 pts" in lines[0]
    assert "grader_pairs" in lines[1] and "2 judgments a direction" in lines[1]
    assert "+30 pts" in lines[2] and "sequential decides" in lines[2]


def test_each_look_of_a_sequential_sample_reads_its_own_tie_branch_frame(monkeypatch) -> None:
    """The looks of a sequential sample are views sharing the session's objects: the H3 frame of one look (its tied
    and failed directions) must not serve a later look or the stopped sample (it did, keyed without the sample)."""
    from harness import claims as claim_module

    built: list[tuple[str, ...]] = []

    def frame(view, split: str, name: str) -> pd.DataFrame:
        built.append(view.drawn)
        return pd.DataFrame({"qid": list(view.drawn)})

    monkeypatch.setattr(claim_module, "_tie_branch_frame", frame)
    shared: dict[tuple, object] = {}

    class Look:
        """The parts of a session ``tie_branch_frame`` reads, for one look of the sample ``grader_pairs``."""

        def __init__(self, drawn: tuple[str, ...]) -> None:
            self.drawn = drawn

        def decl(self, name: str) -> SimpleNamespace:
            return SimpleNamespace(population="grader_pairs")

        def sample(self, split: str, population: str) -> tuple[str, ...]:
            return self.drawn

        def shared(self, key: tuple, build):
            return shared[key] if key in shared else shared.setdefault(key, build())

    first = claim_module.tie_branch_frame(Look(("a",)), "test", "grader")
    later = claim_module.tie_branch_frame(Look(("a", "b")), "test", "grader")
    again = claim_module.tie_branch_frame(Look(("a", "b")), "test", "grader")
    assert first["qid"].tolist() == ["a"] and later["qid"].tolist() == again["qid"].tolist() == ["a", "b"]
    assert built == [("a",), ("a", "b")]  # once per sample, not once per session
