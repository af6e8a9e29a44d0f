"""The proof that verdicts mean what they say: the suite's own decision code on simulated NevIR-shaped data.

Paired outcomes of two rankers are simulated on the real Test source groups (docs/statistics.md#calibration):
pairs of two directions in groups of one or two pairs, as the Test study holds them; a group effect shared by
both rankers; pair directions negatively correlated (a ranker that prefers one passage of a pair regardless of
the query gets one direction right and the other wrong); and the two rankers disagreeing on a share of
directions like the embedded run's (E0 or the cross-encoder against fusion). Then, thousands of times, the
decision code that decides every claim (``reports.stats.group_effect`` and ``reports.hypotheses.decide_family``):

- with no effect, holds + fails stays at or below α (within three simulation standard errors), and the
  one-sided sign-flip p-values are uniform (Kolmogorov–Smirnov);
- with a true effect equal to the reported MDE, the claim holds in 80% ± 3 points of runs;
- the H3 test (tie branch against failures) keeps its false-claim rate on a grader-sized sample;
- identical outcomes read "unchanged" by the two one-sided tests.

The rates are printed to the terminal (visible in CI logs), and the sample design's unbiasedness is checked on
the real outcomes of the session's fusion ranker.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kstest

from fixtures.populations import eligible_directions
from fixtures.samples import group_sample, groups_for, ratio_bias
from fixtures.settings import SEED
from fixtures.study import build_study
from reports.history import decide_change
from reports.hypotheses import ClaimDefinition, ClaimTest, decide_family
from reports.stats import ALPHA, equivalence, group_effect, paired_difference

#: Simulated runs per scenario: the false-claim rate's SE is sqrt(0.05 × 0.95 / 1500) ≈ 0.56 points.
RUNS = 1500
#: Share of pairs on which a ranker prefers one passage whatever the query (one direction right, one wrong).
QUERY_BLIND = 0.6
#: The embedded run's discordance (share of Test directions on which two rankers' strict outcomes differ,
#: corrections + regressions over n, measured 2026-12-01), and the probability that a simulated ranker decides a
#: pair on its own that reproduces it (20 simulated Test samples each: 13.4%, 35.0%, 47.9%).
DISCORDANCE = {"bg8 vs fusion, 13%": 0.145, "E0 vs fusion, 35%": 0.475, "cross-encoder vs fusion, 48%": 0.90}
PRIMARY = "E0 vs fusion, 35%"
CLAIM = ClaimDefinition("simulated_strict_gt_baseline", "simulated", "comparison", "candidate", "baseline", "strict")


@dataclass(frozen=True)
class Design:
    """Pairs (two directions each) in source groups, as a split of the study holds them."""

    pair_group: np.ndarray  # group code of every pair
    n_groups: int

    @property
    def direction_group(self) -> np.ndarray:
        return np.repeat(self.pair_group, 2)


def design_of(pairs_per_group: pd.Series) -> Design:
    codes = np.repeat(np.arange(len(pairs_per_group)), pairs_per_group.to_numpy())
    return Design(codes, len(pairs_per_group))


@pytest.fixture(scope="module")
def nevir_test() -> Design:
    """The real Test split's source groups and their pairs (1–2 pairs per group)."""
    d = build_study().split("test")
    return design_of(d.drop_duplicates("pair_id").groupby("group").size())


def _pair_outcomes(rng: np.random.Generator, p_direction: np.ndarray) -> np.ndarray:
    """One ranker's outcomes on every pair: query-blind pairs get (1, 0) or (0, 1), others two independent draws."""
    n = len(p_direction)
    blind = rng.random(n) < QUERY_BLIND
    first = rng.random(n) < 0.5
    indep = rng.random((n, 2)) < p_direction[:, None]
    out = np.where(blind[:, None], np.column_stack([first, ~first]), indep)
    return out.ravel().astype(float)


def simulate(design: Design, rng: np.random.Generator, effect: float = 0.0,
             redecide: float = DISCORDANCE[PRIMARY]) -> tuple[np.ndarray, np.ndarray]:
    """(candidate, baseline) outcomes per direction; ``effect`` is the true Δ strict (rate units).

    A common latent ranking decides each pair; each ranker re-decides a pair on its own with probability
    ``redecide`` (independently, so the two are exchangeable: no effect), which sets how often they disagree. The effect turns each of the candidate's failures into a success with
    probability 2 × effect (its success rate is one half), so E[candidate − baseline] = effect.
    """
    group_logit = rng.normal(0.0, 1.0, design.n_groups)
    p = 1.0 / (1.0 + np.exp(-group_logit[design.pair_group]))
    latent = _pair_outcomes(rng, p)
    outcomes = []
    for _ in range(2):
        own = np.repeat(rng.random(len(p)) < redecide, 2)
        outcomes.append(np.where(own, _pair_outcomes(rng, p), latent))
    candidate, baseline = outcomes
    if effect:
        candidate = np.maximum(candidate, (rng.random(len(candidate)) < 2.0 * effect).astype(float))
    return candidate, baseline


def claim_test(candidate: np.ndarray, baseline: np.ndarray, design: Design, seed: int) -> ClaimTest:
    """The claim "candidate's strict preference exceeds baseline's" measured as every comparison claim is."""
    tested = group_effect(candidate - baseline, design.direction_group, 100.0 / len(candidate), seed=seed)
    return ClaimTest(CLAIM, tested.effect, math.nan, math.nan, tested.null_sd, tested.test.p_greater,
                     tested.test.p_less, len(candidate), tested.n_groups, "pts")


def run(design: Design, effect: float, seed: int, runs: int = RUNS,
        redecide: float = DISCORDANCE[PRIMARY]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Verdicts, claimed-side p-values and reported MDEs (points) of ``runs`` simulated samples."""
    rng = np.random.default_rng(seed)
    verdicts, p_values, mdes = [], [], []
    for i in range(runs):
        test = claim_test(*simulate(design, rng, effect, redecide), design, seed + i)
        result = decide_family([test])[0]
        verdicts.append(result.status)
        p_values.append(test.p_claimed)
        mdes.append(result.mde)
    return verdicts, np.array(p_values), np.array(mdes)


def show(capsys: pytest.CaptureFixture, line: str) -> None:
    """A calibration number on the terminal, past pytest's capture (so CI logs keep it)."""
    with capsys.disabled():
        print(f"\ncalibration: {line}")


@pytest.fixture(scope="module")
def null_runs(nevir_test: Design):
    return run(nevir_test, 0.0, SEED)


def test_no_effect_rarely_gives_a_verdict(null_runs, capsys) -> None:
    verdicts, p_values, _ = null_runs
    rate = np.mean([v != "inconclusive" for v in verdicts])
    ks = kstest(p_values, "uniform")
    show(capsys, f"no effect, 699-group Test design ({PRIMARY} discordant), {RUNS} runs: holds + fails in "
                 f"{100 * rate:.2f}% (α {100 * ALPHA:g}%); KS test of the one-sided p-values against uniform: "
                 f"p = {ks.pvalue:.3f}")
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)
    assert ks.pvalue > 0.001, f"sign-flip p-values are not uniform under the null (KS p {ks.pvalue:.2g})"


@pytest.mark.parametrize("shape", [k for k in DISCORDANCE if k != PRIMARY])
def test_no_effect_at_the_other_observed_discordances(nevir_test: Design, shape: str, capsys) -> None:
    runs = RUNS * 2 // 5
    verdicts, _, _ = run(nevir_test, 0.0, SEED + 6, runs, DISCORDANCE[shape])
    rate = np.mean([v != "inconclusive" for v in verdicts])
    show(capsys, f"no effect, Test design ({shape} discordant), {runs} runs: holds + fails in {100 * rate:.2f}%")
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


def test_an_effect_of_the_reported_mde_holds_with_80_percent_power(null_runs, nevir_test: Design, capsys) -> None:
    """The MDE a run reports is read from its own data, effect included (an effect adds disagreement, so a
    sample with the effect reports a slightly larger MDE than one without): the effect tested is the MDE that
    samples *with that effect* report, found from the no-effect MDE in one step of 300 runs."""
    start = float(np.nanmean(null_runs[2]))
    reported = float(np.nanmean(run(nevir_test, start / 100.0, SEED + 5, runs=300)[2]))
    verdicts, _, mdes = run(nevir_test, reported / 100.0, SEED + 1)
    power = np.mean([v == "holds" for v in verdicts])
    show(capsys, f"true effect = the reported MDE ({reported:.2f} pts; {np.nanmean(mdes):.2f} reported at it, "
                 f"{start:.2f} without an effect), {RUNS} runs: holds in {100 * power:.1f}% (planned 80%)")
    assert abs(power - 0.80) <= 0.03


def test_a_grader_sized_sample_keeps_its_level(nevir_test: Design, capsys) -> None:
    """150 directions in whole groups (as the grader's sample): 38 groups, still at most α false verdicts."""
    rng = np.random.default_rng(SEED + 2)
    false, runs = 0, RUNS * 2 // 5
    for i in range(runs):
        keep = np.sort(rng.choice(nevir_test.n_groups, 38, replace=False))
        pairs = np.isin(nevir_test.pair_group, keep)
        design = Design(np.searchsorted(keep, nevir_test.pair_group[pairs]), len(keep))
        false += decide_family([claim_test(*simulate(design, rng), design, SEED + i)])[0].status != "inconclusive"
    show(capsys, f"no effect, 150-direction sample (38 groups), {runs} runs: holds + fails in "
                 f"{100 * false / runs:.2f}%")
    assert false / runs <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


def test_h3_tie_branch_test_keeps_its_level(nevir_test: Design, capsys) -> None:
    """H3 on a grader-sized sample with the tie branch independent of failure (its share difference is 0).

    Ties cluster by group (a group's passages are alike) and failures follow the pair model, so both vary
    between groups; neither depends on the other, so every verdict is a false one.
    """
    from reports.hypotheses import measure_tie_branch

    h3 = ClaimDefinition("simulated_h3", "simulated", "tie_branch", "grader", measure="tie_branch_share")
    rng = np.random.default_rng(SEED + 3)
    false = 0
    for i in range(RUNS // 3):
        keep = np.sort(rng.choice(nevir_test.n_groups, 38, replace=False))
        pairs = np.isin(nevir_test.pair_group, keep)
        design = Design(np.searchsorted(keep, nevir_test.pair_group[pairs]), len(keep))
        groups = design.direction_group
        tie_rate = rng.beta(6, 2, design.n_groups)[groups]  # ~75% equal grades, varying by group
        failed = 1.0 - _pair_outcomes(rng, 1.0 / (1.0 + np.exp(-rng.normal(0, 1, design.n_groups)[design.pair_group])))
        per = pd.DataFrame({"branch": np.where(rng.random(len(groups)) < tie_rate, "equal_score", "different_score"),
                            "strict": failed == 0})
        test = measure_tie_branch(h3, per, groups, SEED + i)
        false += decide_family([test])[0].status != "inconclusive"
    runs = RUNS // 3
    show(capsys, f"H3, no association, 150-direction sample, {runs} runs: holds + fails in {100 * false / runs:.2f}%")
    assert false / runs <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


def test_identical_outcomes_read_unchanged(nevir_test: Design, capsys) -> None:
    outcomes, _ = simulate(nevir_test, np.random.default_rng(SEED + 4))
    groups = nevir_test.direction_group
    changed = paired_difference(outcomes, outcomes, groups, 100.0).test.p_two_sided
    unchanged = equivalence(outcomes, outcomes, groups, margin=1.0, scale=100.0).p
    show(capsys, f"identical runs: paired p {changed:.2g}, TOST p {unchanged:.2g} within ±1 pt -> "
                 f"{decide_change(changed, unchanged)}")
    assert decide_change(changed, unchanged) == "unchanged"


def test_samples_estimate_the_population_rate(evaluation, split, capsys) -> None:
    """Every declared sample design, redrawn with 1,000 seeds on the real population and the session's fusion
    outcomes: the mean sample strict rate equals the population's, plus the ratio estimator's first-order bias,
    within 3 simulation SEs (docs/statistics.md#samples)."""
    q = eligible_directions(evaluation.population(split))
    strict = evaluation.outcomes(split, "fusion").set_index("qid")["strict"].astype(float)
    index, values = pd.Index(strict.index), strict.to_numpy()
    population = float(values.mean())
    for name in evaluation.profile.samples:
        size = evaluation.sample_size(name)
        if not size or size >= len(q):
            continue
        rates = np.array([values[index.get_indexer(group_sample(q, size, seed))].mean() for seed in range(1000)])
        se, bias = rates.std(ddof=1) / math.sqrt(len(rates)), ratio_bias(q, strict, size)
        show(capsys, f"{split} sample {name!r} ({groups_for(q, size)} whole groups of {q['group'].nunique()}): mean "
                     f"rate over 1,000 seeds {100 * rates.mean():.2f}% vs population {100 * population:.2f}% "
                     f"(ratio bias {100 * bias:+.3f} pts, simulation SE {100 * se:.2f} pts)")
        assert abs(rates.mean() - population - bias) <= 3 * se + 1e-12
