"""Paired comparison of rankers on the same directions: Δ with intervals, p-values, Holm, MDE (issue 12).

Two rankers evaluated on the same directions are compared direction by direction
(Δ strict in points, Δ reciprocal rank), with the source-group bootstrap interval of
``reports.bootstrap`` and a two-sided p-value from a **group sign-flip test**:

- Directions of one source group share passages or queries, so their outcome
  differences are correlated; McNemar's test or a paired t-test over directions
  would treat them as independent and overstate the evidence. The group is the
  unit of the bootstrap, and it is the unit here too.
- Under H0 the two rankers are exchangeable within each group: swapping their
  labels in a group flips the sign of that group's summed difference. The
  statistic is |Σ_g D_g| (n × |Δ|, n fixed), so large groups weigh by their size
  exactly as in the pooled Δ. This is the per-topic randomization test IR uses
  for system comparisons (Smucker, Allan & Carterette, CIKM 2007), with the
  source group as the topic.
- It is exact, not asymptotic: with few groups that differ (a 16-direction
  grader sample) every sign vector is enumerated (groups with D_g = 0 flip to
  the same value and are left out, which does not change the p-value); otherwise
  a seeded Monte Carlo sample gives p = (1 + #{|T*| ≥ |T|}) / (1 + R), which is
  never 0 and is a valid p-value (Phipson & Smyth 2010).

Holm's step-down adjustment controls the family-wise error over a family of
claims or comparisons without assuming independence between them.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from fixtures.populations import eligible_directions
from fixtures.settings import SEED
from reports.bootstrap import N_RESAMPLES, Ratio, group_bootstrap, paired_mde
from reports.measures import outcome_columns

N_PERMUTATIONS = 10_000
#: Enumerate every sign vector when the groups that differ allow at most this many (2^16: 16 groups).
EXACT_LIMIT = 2 ** 16
#: Sign vectors drawn per block of the Monte Carlo test, to bound memory (block × ⌈groups/8⌉ bytes and floats).
_BLOCK = 2000

#: A comparison row: the two rankers (Δ = first − second), directions, groups, directions whose strict outcome
#: differs, Δ strict in points with its 95% interval, bootstrap SE and MDE (80% power, two-sided α 0.05), the
#: sign-flip p-value, and the same for Δ MRR (NaN without full-pool ranks). ``pairwise_table`` adds Holm columns.
COMPARISON_COLUMNS = (
    "first", "second", "n", "n_groups", "discordant", "delta_pts", "delta_lo", "delta_hi", "se_delta_pts",
    "mde_pts", "p_strict", "delta_mrr", "delta_mrr_lo", "delta_mrr_hi", "se_delta_mrr", "mde_mrr", "p_mrr",
)
PAIRWISE_COLUMNS = (*COMPARISON_COLUMNS, "p_strict_holm", "p_mrr_holm")


@dataclass(frozen=True)
class SignFlipTest:
    """Two-sided group sign-flip test of Σ_g D_g = 0.

    ``n_groups`` counts the groups with a non-zero difference (the only ones whose
    sign matters); ``exact`` says whether all 2^n_groups sign vectors were
    enumerated (``n_permutations`` of them) or a seeded sample was drawn.
    """

    statistic: float
    p_value: float
    n_groups: int
    exact: bool
    n_permutations: int


def _byte_table(d: np.ndarray) -> np.ndarray:
    """(256, ⌈m/8⌉) table: entry [v, j] is the sum of d over the bits set in byte v for groups 8j..8j+7.

    A random sign vector is drawn as bytes, so its flipped part Σ_{flipped} d_g is a
    gather of ⌈m/8⌉ table entries instead of m multiplications.
    """
    padded = np.zeros(-(-len(d) // 8) * 8)
    padded[:len(d)] = d
    bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(float)  # MSB first, as unpackbits
    return bits @ padded.reshape(-1, 8).T


def sign_flip_test(group_differences: np.ndarray, n_permutations: int = N_PERMUTATIONS, seed: int = SEED,
                   exact_limit: int = EXACT_LIMIT) -> SignFlipTest:
    """p-value of |Σ D_g| under random sign flips of each group's summed difference D_g (see the module doc)."""
    d_all = np.asarray(group_differences, dtype=float)
    if d_all.ndim != 1 or not np.isfinite(d_all).all():
        raise ValueError(f"group differences must be a finite 1-d array; got shape {d_all.shape}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1; got {n_permutations}")
    d = d_all[d_all != 0]
    observed = float(d.sum())
    m = len(d)
    if m == 0:
        return SignFlipTest(observed, 1.0, 0, True, 1)
    # Sums of the same numbers in another order may differ in the last bits; never count such a tie as smaller.
    threshold = abs(observed) - 1e-9 * float(np.abs(d).sum())
    if 2 ** m <= exact_limit:
        flipped = ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1).astype(float) @ d
        extreme = np.abs(observed - 2.0 * flipped) >= threshold
        return SignFlipTest(observed, float(extreme.mean()), m, True, 2 ** m)
    table = _byte_table(d)
    columns = np.arange(table.shape[1])
    rng = np.random.default_rng(seed)
    count = 0
    for start in range(0, n_permutations, _BLOCK):
        draws = rng.integers(0, 256, size=(min(_BLOCK, n_permutations - start), table.shape[1]), dtype=np.uint8)
        flipped = table[draws, columns].sum(axis=1)
        count += int((np.abs(observed - 2.0 * flipped) >= threshold).sum())
    return SignFlipTest(observed, (1 + count) / (1 + n_permutations), m, False, n_permutations)


def holm(p_values: np.ndarray | list[float]) -> np.ndarray:
    """Holm step-down adjusted p-values: sorted p_(i) × (m − i + 1), made monotone, capped at 1.

    NaN entries (comparisons that could not be made) are left out of the family and stay NaN.
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p-values must be 1-d; got shape {p.shape}")
    valid = ~np.isnan(p)
    if ((p[valid] < 0) | (p[valid] > 1)).any():
        raise ValueError(f"p-values must lie in [0, 1]; got {p[valid][(p[valid] < 0) | (p[valid] > 1)][:3].tolist()}")
    out = np.full(p.shape, np.nan)
    q = p[valid]
    order = np.argsort(q, kind="stable")
    m = len(q)
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * q[order]))
    inverse = np.empty(m, dtype=float)
    inverse[order] = adjusted
    out[valid] = inverse
    return out


def _groups_of(outcomes: pd.DataFrame, directions_annotated: pd.DataFrame, groups: str) -> np.ndarray:
    q = eligible_directions(directions_annotated)
    if groups not in q.columns:
        raise ValueError(f"directions frame has no bootstrap group column {groups!r}")
    where = pd.Index(q["qid"]).get_indexer(outcomes["qid"])
    if (where < 0).any():
        raise ValueError(f"outcomes hold qids outside Q_c, e.g. {outcomes['qid'][where < 0].head(3).tolist()}")
    return q[groups].to_numpy()[where]


def compare(first: pd.DataFrame, second: pd.DataFrame, directions_annotated: pd.DataFrame, groups: str = "group",
            n_resamples: int = N_RESAMPLES, n_permutations: int = N_PERMUTATIONS, seed: int = SEED,
            names: tuple[str, str] | None = None) -> dict[str, object]:
    """One row of ``COMPARISON_COLUMNS``: ``first`` minus ``second`` over their common directions.

    Both outcomes (``direction_outcomes`` frames, or pair-only ones without ranks)
    must cover exactly the same qids. Δ strict is in points with its bootstrap
    interval, SE and MDE; Δ MRR is NaN when either ranker lacks full-pool ranks.
    Both p-values come from the group sign-flip test.
    """
    a_name, b_name = names if names is not None else (first.attrs.get("ranker"), second.attrs.get("ranker"))
    if a_name is None or b_name is None:
        raise ValueError("compare needs both ranker names: pass names= or outcomes from direction_outcomes")
    for name, frame in ((a_name, first), (b_name, second)):
        if frame["qid"].duplicated().any():
            raise ValueError(f"outcomes of {name!r} repeat qids, e.g. {frame['qid'][frame['qid'].duplicated()].head(3).tolist()}")
    where = pd.Index(second["qid"]).get_indexer(first["qid"])
    if (where < 0).any() or len(first) != len(second):
        only = sorted(set(first["qid"]) ^ set(second["qid"]))[:3]
        raise ValueError(f"{a_name!r} and {b_name!r} are not evaluated on the same directions "
                         f"({len(first)} vs {len(second)}; e.g. {only} in one only)")
    labels = _groups_of(first, directions_annotated, groups)
    a = outcome_columns(first, f"outcomes of {a_name!r}")
    b = outcome_columns(second.iloc[where], f"outcomes of {b_name!r}")
    values = {"n": a["n"], "d_strict": a["strict"] - b["strict"]}
    statistics = {"strict": Ratio("d_strict", "n")}
    if "rank_pos" in a and "rank_pos" in b:
        values["d_rr"] = 1.0 / a["rank_pos"] - 1.0 / b["rank_pos"]
        statistics["mrr"] = Ratio("d_rr", "n")
    boot = group_bootstrap(values, labels, statistics, n_resamples, seed)
    codes, uniques = pd.factorize(labels, sort=True)

    def p_value(column: str) -> float:
        sums = np.bincount(codes, weights=values[column], minlength=len(uniques))
        return sign_flip_test(sums, n_permutations, seed).p_value

    s = boot["strict"]
    row: dict[str, object] = {
        "first": a_name, "second": b_name, "n": len(first), "n_groups": len(uniques),
        "discordant": int((values["d_strict"] != 0).sum()),
        "delta_pts": 100 * s.point, "delta_lo": 100 * s.lo, "delta_hi": 100 * s.hi, "se_delta_pts": 100 * s.se,
        "mde_pts": 100 * paired_mde(s.se, values["d_strict"]), "p_strict": p_value("d_strict"),
        **dict.fromkeys(("delta_mrr", "delta_mrr_lo", "delta_mrr_hi", "se_delta_mrr", "mde_mrr", "p_mrr"), float("nan")),
    }
    if "mrr" in boot:
        r = boot["mrr"]
        row.update({"delta_mrr": r.point, "delta_mrr_lo": r.lo, "delta_mrr_hi": r.hi, "se_delta_mrr": r.se,
                    "mde_mrr": paired_mde(r.se, values["d_rr"]), "p_mrr": p_value("d_rr")})
    return row


def pairwise_table(outcomes_by_ranker: Mapping[str, pd.DataFrame], directions_annotated: pd.DataFrame,
                   groups: str = "group", n_resamples: int = N_RESAMPLES, n_permutations: int = N_PERMUTATIONS,
                   seed: int = SEED) -> pd.DataFrame:
    """Every pair of rankers (in the given order, first before second) evaluated on identical direction sets.

    Pairs on different directions (a sampled ranker against a full-Q_c one) are left
    out. The table is one family per measure: ``p_strict_holm`` and ``p_mrr_holm``
    are Holm-adjusted over all of its rows.
    """
    rows = [compare(outcomes_by_ranker[a], outcomes_by_ranker[b], directions_annotated, groups, n_resamples,
                    n_permutations, seed, names=(a, b))
            for a, b in combinations(outcomes_by_ranker, 2)
            if len(outcomes_by_ranker[a]) == len(outcomes_by_ranker[b])
            and set(outcomes_by_ranker[a]["qid"]) == set(outcomes_by_ranker[b]["qid"])]
    table = pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
    table["p_strict_holm"] = holm(table["p_strict"].to_numpy(dtype=float))
    table["p_mrr_holm"] = holm(table["p_mrr"].to_numpy(dtype=float))
    return table[list(PAIRWISE_COLUMNS)]
