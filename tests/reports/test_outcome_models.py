"""The plan's power holds under each outcome model it prints (docs/statistics.md#outcome-models): for the plan's
own model, two rankers deciding pairs query-blind at different rates (baseline never / 60% query-blind), and units
resampled from a previous run's per-unit outcomes (here: a random window reranker against fusion on the frozen
pools' real ranks), the power ``reports.outcome_models`` predicts at the model's MDE agrees within 5 points with the
share of *holds* the shipped decision code (``group_effect``, ``decide_family``) gives on the same simulated
samples, and is 80% ± 5."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fixtures.pools import FROZEN_DIR, load_pool_parquet
from fixtures.samples import sampling_units
from fixtures.study import build_study
from harness.plan import main
from rankers.fusion import fusion_ranking
from rankers.window import WINDOW_K
from reports.claim_families import ClaimDefinition
from reports.claim_measures import ClaimTest
from reports.history import HISTORY
from reports.hypotheses import decide_family
from reports.outcome_models import PlanModel, ResampledModel, TwoBlindModel, draw_samples, model_mde, model_power
from reports.sequential import fixed_mde
from reports.stats import ALPHA, group_effect
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
    units = sampling_units(study.split("test"), "pairs")
    ranking = fusion_ranking(load_pool_parquet(FROZEN_DIR / "test.parquet")).frame
    index = pd.MultiIndex.from_frame(ranking[["qid", "pid"]])
    pos, neg = (index.get_indexer(pd.MultiIndex.from_arrays([units["qid"], units[c].astype(str)]))
                for c in ("preferred_pid", "counterpart_pid"))
    keep = (pos >= 0) & (neg >= 0)
    rank, k0 = ranking["rank"].to_numpy(float), ranking["k0"].to_numpy(float)
    rank_pos, rank_neg = rank[pos[keep]], rank[neg[keep]]
    fusion = (k0[pos[keep]] > k0[neg[keep]]).astype(float)
    rng = np.random.default_rng(3)
    in_pos, in_neg = rank_pos <= WINDOW_K, rank_neg <= WINDOW_K
    coin = (rng.random(len(fusion)) < 0.5).astype(float)  # both in the window: a random order decides
    random = np.where(in_pos & in_neg, coin, np.where(in_pos, 1.0, np.where(in_neg, 0.0, fusion)))
    return ResampledModel.of(random - fusion, units["group"].to_numpy()[keep], "a random reranker against fusion")


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


@pytest.mark.parametrize("which", ["plan", "two blind, baseline never", "two blind, baseline 60%", "resampled"])
def test_the_plans_power_holds_under_each_outcome_model(which, study, pair_sizes, capsys) -> None:
    model = {"plan": PlanModel(DISCORDANT, BLIND), "two blind, baseline never": TwoBlindModel(DISCORDANT, BLIND, 0.0),
             "two blind, baseline 60%": TwoBlindModel(DISCORDANT, BLIND, 0.6),
             "resampled": random_against_fusion(study) if which == "resampled" else None}[which]
    sizes = tuple(pair_sizes.tolist())
    mde = model_mde(model, sizes, FIXED, ALPHA / 2, RUNS, 0)
    predicted = model_power(model, pair_sizes, FIXED, ALPHA / 2, mde, RUNS, 0)
    drawn, d = draw_samples(model, pair_sizes, RUNS, 0, mde)
    shipped = shipped_holds(drawn, d, FIXED)
    with capsys.disabled():
        print(f"\noutcome models: {model.words}: MDE {100 * mde:.2f} pts on Test's 75 pairs (α/2), predicted power "
              f"{100 * predicted:.1f}%, the shipped code's {100 * shipped:.1f}% ({RUNS} samples)")
    assert abs(predicted - shipped) <= 0.05 and abs(predicted - 0.80) <= 0.05
    if which == "plan":  # the same numbers the plan's fixed design prints (reports.sequential.fixed_mde)
        assert mde == pytest.approx(fixed_mde(sizes, FIXED, ALPHA / 2, DISCORDANT, BLIND, None, 100.0, RUNS, 0) / 100)


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
    """``python -m harness.plan`` prints every model's MDE and power and the worst case; with a saved run of the
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
    lines = main(["--sample", "grader_pairs", "--effect", "20", "--runs", "60", "--previous", str(tmp_path)])
    text = "\n".join(lines)
    assert "the plan's model" in text and "two rankers query-blind on 30% / 0%" in text
    assert ("units resampled from run 20261205T100000.000000Z-abc-embedded-full-1 (grader_pairs_expected vs "
            "fusion, 300 directions)") in text
    assert lines[-1].startswith("worst case over the 4 models: MDE ")
    none = main(["--sample", "grader_pairs", "--effect", "20", "--runs", "60", "--previous", str(tmp_path / "no")])
    assert none[-2].startswith("worst case over the 3 models") and "no resampled model" in none[-1]
