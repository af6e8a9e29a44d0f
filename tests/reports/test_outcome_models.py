"""The plan's printed powers are the shipped decision code's under each outcome model it prints
(docs/statistics.md#outcome-models): for the plan's own model, two rankers deciding pairs query-blind at different
rates, two correlated rankers of which the candidate decides whole units (outside the query-blind family), and units
resampled from a previous run's per-unit outcomes (here: a random window reranker against fusion on the frozen
pools' real ranks), the power ``reports.outcome_models.family_power`` prints at the model's MDE agrees within 2
points with the share of *holds* the shipped decision code (``group_effect``, ``decide_family``) gives on the first
samples of the same simulation; ``python -m harness.plan``'s first line is the worst case over them."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fixtures.samples import sampling_units
from fixtures.study import build_study
from harness.plan import main
from reports.claim_families import ClaimDefinition
from reports.claim_measures import ClaimTest
from reports.history import HISTORY
from reports.hypotheses import decide_family
from reports.outcome_models import (BLOCK, PlanModel, ResampledModel, TwoBlindModel, WholeUnitModel, draw_samples,
                                    family_power, fixed_holds, model_mde, model_power)
from reports.stats import ALPHA, group_effect
from tests.support.frozen_ranks import Split
from tests.support.saved_runs import seal_entry

CLAIM = ClaimDefinition("simulated_strict_gt_baseline", "simulated", "comparison", "candidate", "baseline", "strict")
#: The embedded grader's fixed sample on Test (75 complete pairs) and the plan's default model.
FIXED, DISCORDANT, BLIND, RUNS = 150, 0.45, 0.3, 400


@pytest.fixture(scope="module")
def study():
    return build_study()


@pytest.fixture(scope="module")
def pair_sizes(study) -> np.ndarray:
    return sampling_units(study.split("test"), "pairs").groupby("group").size().to_numpy()


def random_against_fusion(study) -> ResampledModel:
    """A previous run's per-pair differences: a random window reranker (fusion's top 20 in a random order) against
    fusion, strict preference, on Test's frozen pool."""
    split = Split(study, "test")
    everything = np.ones(len(split.directions), dtype=bool)
    random = split.random_window(np.random.default_rng(3), everything)[0]
    units = sampling_units(split.directions, "pairs")
    return ResampledModel.of(random - split.strict, units["group"].to_numpy(), "a random reranker against fusion")


def shipped_holds(drawn: np.ndarray, d: np.ndarray, fixed: int) -> float:
    """The share of runs in which the shipped decision code says *holds* (one claim: one-sided α/2) on each run's
    first units within ``fixed`` directions; a unit's sum D_u becomes |D_u| directions of its sign (a fraction on
    one of them), the rest 0."""
    holds = 0
    for i, (sizes, sums) in enumerate(zip(drawn, d)):
        g = max(1, int((np.cumsum(sizes) <= fixed).sum()))
        values, labels = [], []
        for k, (n_u, s) in enumerate(zip(sizes[:g], sums[:g])):
            whole, part = int(abs(s)), abs(s) % 1
            row = [np.sign(s)] * whole + ([part * np.sign(s)] if whole < n_u else []) + [0.0] * int(n_u)
            values += row[:int(n_u)]
            labels += [k] * int(n_u)
        tested = group_effect(np.array(values), np.array(labels), 100.0 / len(values), seed=i)
        test = ClaimTest(CLAIM, tested.effect, math.nan, math.nan, tested.null_sd, tested.test.p_greater,
                         tested.test.p_less, len(values), tested.n_groups, "pts",
                         differing_groups=tested.differing, guarded=tested.test.guarded)
        holds += decide_family([test])[0].status == "holds"
    return holds / len(drawn)




@pytest.mark.parametrize("which", ["plan", "two blind, baseline never", "whole units, baseline never", "resampled"])
def test_the_plans_printed_power_is_the_shipped_codes(which, study, pair_sizes, capsys) -> None:
    model = {"plan": PlanModel(DISCORDANT, BLIND), "two blind, baseline never": TwoBlindModel(DISCORDANT, BLIND, 0.0),
             "whole units, baseline never": WholeUnitModel(DISCORDANT, 0.0),
             "resampled": random_against_fusion(study) if which == "resampled" else None}[which]
    row, = family_power([model], pair_sizes, FIXED, ALPHA / 2, [], 100.0)
    # The printed power's first block of samples (seed 0 + 1, block 0), decided by the shipped code: the difference
    # from the printed power has SE 0.8 points (2,000 of its 10,000 samples).
    drawn, d = draw_samples(model, pair_sizes, BLOCK, (1, 0), row.mde / 100, FIXED)
    shipped = shipped_holds(drawn, d, FIXED)
    parts = fixed_holds(drawn, d, FIXED, ALPHA / 2).mean()
    with capsys.disabled():
        print(f"\noutcome models: {model.words}: MDE {row.mde:.2f} pts on Test's 75 pairs (α/2), printed power there "
              f"{100 * row.power_at_mde:.1f} ± {100 * row.se(row.power_at_mde):.1f}% ({row.runs:,} samples), the "
              f"shipped code's {100 * shipped:.1f}% on the first {BLOCK:,} (the plan's parts: {100 * parts:.1f}%)")
    assert abs(row.power_at_mde - shipped) <= 0.02 and abs(parts - shipped) <= 0.005
    assert abs(row.power_at_mde - 0.80) <= 0.03


def test_the_plans_mde_over_promises_under_another_model(pair_sizes, capsys) -> None:
    """Why the plan prints every model: at the plan model's MDE a baseline that never decides query-blind (more
    units differ) leaves the decision test well short of 80%."""
    sizes = tuple(pair_sizes.tolist())
    mde = model_mde(PlanModel(DISCORDANT, BLIND), sizes, FIXED, ALPHA / 2, RUNS, 0)
    other = model_power(TwoBlindModel(DISCORDANT, BLIND, 0.0), pair_sizes, FIXED, ALPHA / 2, mde, RUNS, 0)
    with capsys.disabled():
        print(f"\noutcome models: at the plan's MDE {100 * mde:.2f} pts, two rankers query-blind on 30% / 0% of pairs "
              f"give {100 * other:.1f}%")
    assert other < 0.75


def test_the_plan_prints_its_models_and_resamples_a_previous_run(study, tmp_path, capsys) -> None:
    """``python -m harness.plan``'s first line is the worst case over every model it prints, each with its MDE and
    powers and their simulation SEs; with a saved run of the
    profile holding the sample's rankers (here grader_pairs_expected against fusion, built by hand) it adds the
    resampled model."""

    units = sampling_units(study.split("test"), "pairs").head(300)
    rng = np.random.default_rng(1)
    rows = [pd.DataFrame({"ranker": ranker, "qid": units["qid"], "group": units["group"],
                          "strict": rng.random(len(units)) < p, "rank_pos": 1, "rank_neg": 2, "tie": False,
                          "fallback": False}) for ranker, p in (("grader_pairs_expected", 0.7), ("fusion", 0.5))]
    folder = tmp_path / HISTORY / "20261205T100000.000000Z-abc-embedded-full-1" / "test"
    folder.mkdir(parents=True)
    pd.concat(rows).to_parquet(folder / "outcomes.parquet", index=False)
    (folder / "manifest.json").write_text('{"scope": "full", "profile": {"name": "embedded"}}', encoding="utf-8")
    seal_entry(tmp_path, folder.parent.name)
    quick = ["--sample", "grader_pairs", "--effect", "20", "--runs", "60", "--model-runs", "200"]
    lines = main([*quick, "--previous", str(tmp_path)])
    text = "\n".join(lines)
    assert "the plan's model" in text and "two rankers query-blind on 30% / 0%" in text
    assert "two correlated rankers: the candidate decides 90% of units as a whole" in text
    assert ("units resampled from run 20261205T100000.000000Z-abc-embedded-full-1 (grader_pairs_expected vs "
            "fusion, 300 directions)") in text
    assert lines[0].startswith("worst case over 6 outcome models, the fixed 150-direction sample")
    rows = [line for line in lines if line.startswith("  ")]
    mdes = [float(line.split(": MDE ")[1].split(" pts")[0]) for line in rows if " pts (power there" in line]
    assert len(rows) == 6 and f"MDE {max(mdes):.2f} pts" in lines[0]  # the headline is the largest MDE printed
    assert all(" ± " in line for line in rows)  # every power with its simulation SE
    (folder / "manifest.json").write_text('{"scope": "subset-24-seed0-sample4", "profile": {"name": "embedded"}}',
                                          encoding="utf-8")
    seal_entry(tmp_path, folder.parent.name)
    subset = main([*quick, "--previous", str(tmp_path)])  # a CI subset run's few units are not resampled
    assert subset[0].startswith("worst case over 5 outcome models") and "units resampled" not in "\n".join(subset)
    none = main([*quick, "--previous", str(tmp_path / "no")])
    assert none[0].startswith("worst case over 5 outcome models") and "no resampled model" in none[-1]
