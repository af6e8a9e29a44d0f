"""The sequential driver's bookkeeping: which budget is spent, the cost row's shares, the claims of a sample, and
the planning helper's report (docs/statistics.md#sequential-samples)."""
from __future__ import annotations

import numpy as np

from harness import sequential
from harness.plan import judgments_per_direction, main
from harness.profile import Budget, load_profile
from reports.sequential import sequential_test


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


def test_a_samples_claims_and_the_plan() -> None:
    profile = load_profile("embedded")
    claims = sequential.sample_claims(profile, "grader_pairs")
    assert "h2_grader_pairs_expected_strict_gt_fusion" in claims and "h2_ce_strict_gt_fusion" not in claims
    assert "h3_grader_pairs_tie_branch_concentrates_failures" in claims
    assert sequential.family_sizes(profile)["H2"] >= 2 * sum(d.family == "H2" for d in claims.values())
    assert judgments_per_direction(profile, "grader_pairs") == 2  # three twins read one set of pair judgments
    assert judgments_per_direction(profile, "grader_windows") == 0  # its rankers are declared, not enabled
    assert judgments_per_direction(load_profile("paper"), "grader_windows") == 20
    lines = main(["--sample", "grader_pairs", "--effect", "30", "--runs", "60"])
    assert "grader_pairs" in lines[0] and "2 judgments a direction" in lines[0]
    assert "+30 pts" in lines[1] and "fixed" in lines[1] and "MDE" in lines[1]
