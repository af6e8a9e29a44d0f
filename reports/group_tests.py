"""Group-level tests: every p-value of the suite is one of these, with the source group as unit.

Directions of one source group share passages or queries, so their outcomes are
correlated; the group is the unit of every test here, exactly as it is the unit of the
bootstrap (``reports.bootstrap``). An effect is a scaled sum of per-group contributions
u_g (for a paired difference, D_g: the group's summed per-direction difference), and it
is tested by flipping the signs of the u_g (docs/statistics.md#sign-flip-test):

- exact when the groups that differ allow at most ``EXACT_LIMIT`` sign vectors, every
  vector enumerated; otherwise a seeded Monte Carlo sample with p = (1 + count) / (1 + R),
  never 0 and a valid p-value (Phipson & Smyth 2010);
- one-sided on either side (``p_greater``, ``p_less``) and two-sided, from the same
  sign vectors.

The sign-flip test is exact for the *sharp* null (the two rankers exchangeable within each
group); a claim is about the *mean*, and with skewed contributions (rare whole-group losses,
frequent small gains) the sign-flip distribution understates the chance of a large sum.
``mean_test`` is the test every decision reads (docs/statistics.md#weak-null): the larger of
the sign-flip p and Hall's skewness-corrected t p (read against Student's t on the effective number of groups) on
each side and, when fewer than
``MIN_DIFFERING`` groups differ, also of a bound-aware test (``bounded_mean_p``) that stays
valid for any mean-zero contributions no larger than the group's bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fixtures.settings import SEED

N_PERMUTATIONS = 10_000
#: Enumerate every sign vector when the groups that differ allow at most this many (2^16: 16 groups).
EXACT_LIMIT = 2 ** 16
#: Sign vectors drawn per block of the Monte Carlo test, to bound memory (block × ⌈groups/8⌉ bytes and floats).
_BLOCK = 2000
#: Fewer differing groups than this and the bound-aware test decides too (chosen by simulation:
#: docs/statistics.md#weak-null; tests/reports/test_calibration.py).
MIN_DIFFERING = 60
#: Bets of the bound-aware test's e-value mixture (each a fraction of the largest bet a bounded contribution allows).
BETS = 0.9 * 2.0 ** -np.arange(8)


@dataclass(frozen=True)
class GroupTest:
    """A test of Σ_g u_g = 0: the observed sum, its p-values on each side and two-sided, and the groups it counts."""

    statistic: float
    p_greater: float
    p_less: float
    p_two_sided: float
    n_groups: int


@dataclass(frozen=True)
class SignFlipTest(GroupTest):
    """Group sign-flip test of Σ_g u_g = 0, on both sides and two-sided, from one set of sign vectors.

    ``p_greater`` tests against Σ u_g > 0 (P(T* ≥ T)), ``p_less`` against Σ u_g < 0
    (P(T* ≤ T)), ``p_two_sided`` P(|T*| ≥ |T|). ``n_groups`` counts the groups with a non-zero
    contribution (the only ones whose sign matters); ``exact`` says whether all 2^n_groups sign
    vectors were enumerated (``n_permutations`` of them) or a seeded sample was drawn.
    """

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


def sign_flip_test(contributions: np.ndarray, n_permutations: int = N_PERMUTATIONS, seed: int = SEED,
                   exact_limit: int = EXACT_LIMIT) -> SignFlipTest:
    """p-values of T = Σ u_g under random sign flips of each group's contribution u_g (see the module doc)."""
    u_all = np.asarray(contributions, dtype=float)
    if u_all.ndim != 1 or not np.isfinite(u_all).all():
        raise ValueError(f"group contributions must be a finite 1-d array; got shape {u_all.shape}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1; got {n_permutations}")
    u = u_all[u_all != 0]
    observed = float(u.sum())
    m = len(u)
    if m == 0:
        return SignFlipTest(observed, 1.0, 1.0, 1.0, 0, True, 1)
    # Sums of the same numbers in another order may differ in the last bits; never count such a tie as smaller.
    tol = 1e-9 * float(np.abs(u).sum())
    if 2 ** m <= exact_limit:
        flipped = ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1).astype(float) @ u
        t = observed - 2.0 * flipped
        return SignFlipTest(observed, float((t >= observed - tol).mean()), float((t <= observed + tol).mean()),
                            float((np.abs(t) >= abs(observed) - tol).mean()), m, True, 2 ** m)
    table = _byte_table(u)
    columns = np.arange(table.shape[1])
    rng = np.random.default_rng(seed)
    greater = less = both = 0
    for start in range(0, n_permutations, _BLOCK):
        draws = rng.integers(0, 256, size=(min(_BLOCK, n_permutations - start), table.shape[1]), dtype=np.uint8)
        t = observed - 2.0 * table[draws, columns].sum(axis=1)
        greater += int((t >= observed - tol).sum())
        less += int((t <= observed + tol).sum())
        both += int((np.abs(t) >= abs(observed) - tol).sum())
    r = n_permutations + 1
    return SignFlipTest(observed, (1 + greater) / r, (1 + less) / r, (1 + both) / r, m, False, n_permutations)


def smallest_p(n_groups: int, n_permutations: int = N_PERMUTATIONS, exact_limit: int = EXACT_LIMIT) -> float:
    """The smallest one-sided p-value a sign-flip test over ``n_groups`` groups can give, whatever the data.

    2^-G when every sign vector is enumerated (only the all-same-sign outcome reaches it);
    1 / (R + 1) for a Monte Carlo test. It depends on the design alone (how many groups the
    sample holds), so a claim it rules out is set aside before any outcome is read.
    """
    if n_groups < 0:
        raise ValueError(f"n_groups must be >= 0; got {n_groups}")
    if n_groups == 0:
        return 1.0
    return 2.0 ** -n_groups if 2 ** n_groups <= exact_limit else max(2.0 ** -n_groups, 1.0 / (n_permutations + 1))


def smallest_decision_p(sizes, guarded: bool = True, n_permutations: int = N_PERMUTATIONS) -> float:
    """The smallest one-sided p ``mean_test`` can give on groups of these sizes (directions each, per-direction
    bound 1), whatever the outcomes: a design fact, so a claim it rules out is set aside before any outcome is read.

    With fewer groups than ``MIN_DIFFERING`` every outcome is guarded, and the bound-aware part's p is smallest when
    every group gains all it can (each factor 1 + λ n_g / max n at its largest): no outcome goes below it, nor below
    the sign flip's floor. With more groups the guard can be off and the sign flip's floor is the limit. Without
    the guard (``guarded`` False: H3) the sign flip's floor alone.
    """
    n = np.asarray(sizes, dtype=float)
    floor = smallest_p(len(n), n_permutations)
    if not guarded or len(n) == 0 or len(n) >= MIN_DIFFERING:
        return floor
    return max(floor, bounded_mean_p(n, float(n.max()))[0])


def skew_corrected_p(contributions: np.ndarray) -> tuple[float, float]:
    """One-sided p-values (greater, less) of the mean of the G group contributions, zeros included, from Hall's
    (1992) skewness-removing transform of the t statistic: T + γ̂T²/(3√G) + γ̂²T³/(27G) + γ̂/(6√G) ~ N(0, 1)
    to O(1/G) under a mean of 0, where the plain t (and the sign-flip sum) is off by O(γ̂/√G). The transform is
    read against Student's t on G* − 1 degrees of freedom (at least 1), G* = (Σ c_g²)² / Σ c_g⁴ with c_g the
    centred contributions: the groups the variance estimate rests on. Rare whole-group changes make G* small and
    the O(1/G) remainder large; the normal reference then said *holds* in 3% of weak-null samples with 75–130
    differing groups at α/2 (docs/statistics.md#the-band-above-the-guard)."""
    greater, less = skew_corrected_rows(np.asarray(contributions, dtype=float)[None, :])
    return float(greater[0]), float(less[0])


def skew_corrected_rows(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``skew_corrected_p`` of every row of ``u`` (samples × groups) at once: the power simulations test
    thousands of samples with the same code (``reports.power``)."""
    rows, g = u.shape
    if g < 3:
        return np.ones(rows), np.ones(rows)
    mean = u.mean(axis=1)
    c = u - mean[:, None]
    second = (c ** 2).mean(axis=1)
    sd = np.sqrt(second * g / (g - 1))
    alike = sd <= 1e-12 * np.maximum(1.0, np.abs(u).max(axis=1))  # every group alike: the mean is known
    safe = np.where(alike, 1.0, sd)
    skew = (c ** 3).mean(axis=1) / np.where(alike, 1.0, second) ** 1.5
    t = math.sqrt(g) * mean / safe
    a = skew / (3 * math.sqrt(g))
    transformed = t + a * t ** 2 + a ** 2 * t ** 3 / 3 + skew / (6 * math.sqrt(g))
    fourth = (c ** 4).sum(axis=1)
    df = np.maximum(1.0, (c ** 2).sum(axis=1) ** 2 / np.where(alike, 1.0, fourth) - 1.0)
    from scipy.special import stdtr  # Student's t CDF without scipy.stats (1 s); a warm run never gets here

    greater, less = stdtr(df, -transformed), stdtr(df, transformed)
    known_greater = np.where(mean > 0, 0.0, 1.0)
    known_less = np.where(mean < 0, 0.0, 1.0)
    return np.where(alike, known_greater, greater), np.where(alike, known_less, less)


def bounded_mean_p(contributions: np.ndarray, bound: float) -> tuple[float, float]:
    """One-sided p-values (greater, less) valid for *any* independent contributions with mean 0 and |u_g| ≤ bound.

    With x_g = u_g / bound ∈ [−1, 1], each Π_g (1 + λ x_g) (λ in ``BETS``) has expectation ≤ 1 when
    E x_g ≤ 0, so their mean E is an e-value and 1/E a p-value (Markov; Waudby-Smith & Ramdas 2024).
    A group that does not differ multiplies by 1: it neither helps nor hurts, and a few small gains
    cannot rule out a rare loss as large as a whole group (docs/statistics.md#weak-null).
    """
    if not bound > 0:
        raise ValueError(f"a contribution bound must be > 0; got {bound}")
    x = np.asarray(contributions, dtype=float) / bound
    if (np.abs(x) > 1 + 1e-9).any():
        raise ValueError(f"contributions exceed their bound {bound:g}: max |u| = {np.abs(x).max() * bound:g}")
    greater, less = bounded_rows(x[None, :])
    return float(greater[0]), float(less[0])


def bounded_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``bounded_mean_p`` of every row of ``x`` (samples × groups, already divided by the bound) at once."""
    x = np.clip(x, -1.0, 1.0)
    out = []
    for sign in (1.0, -1.0):
        log_e = np.log1p(sign * x[..., None] * BETS).sum(axis=-2)  # (samples, bets); a zero multiplies by 1
        out.append(np.minimum(1.0, 1.0 / np.exp(log_e).mean(axis=-1)))
    return out[0], out[1]


@dataclass(frozen=True)
class MeanTest(GroupTest):
    """The decision test of Σ_g u_g = 0 (see the module doc): each p is the largest of its parts.

    ``n_groups`` counts every group of the sample, ``differing`` those with u_g ≠ 0 (the effective
    sample: only they carry signs); ``guarded`` says the bound-aware test took part
    (``differing`` < ``MIN_DIFFERING``); ``sign_flip`` is the sign-flip test alone.
    """

    differing: int
    guarded: bool
    sign_flip: SignFlipTest


def mean_test(contributions: np.ndarray, bound: float, n_permutations: int = N_PERMUTATIONS, seed: int = SEED,
              min_differing: int = MIN_DIFFERING) -> MeanTest:
    """Test Σ_g u_g = 0 for the mean (the weak null), ``bound`` the largest |u_g| a group of the sample could have."""
    u = np.asarray(contributions, dtype=float)
    flip = sign_flip_test(u, n_permutations, seed)
    sides = [(flip.p_greater, flip.p_less), skew_corrected_p(u)]
    guarded = 0 < flip.n_groups < min_differing
    if guarded:
        sides.append(bounded_mean_p(u, bound))
    greater, less = (max(p[i] for p in sides) for i in (0, 1))
    two_sided = max(flip.p_two_sided, *(min(1.0, 2 * min(p)) for p in sides[1:]))
    return MeanTest(flip.statistic, greater, less, two_sided, len(u), flip.n_groups, guarded, flip)


#: The power simulations read the sign-flip part of samples with at least this many differing groups from its normal
#: limit (a Rademacher sum of that many terms: far inside the simulation's own error), fewer from shared sign vectors.
NORMAL_FROM = 100


def mean_test_rows(u: np.ndarray, bound: float, n_permutations: int = 1000, seed: int = SEED,
                   min_differing: int = MIN_DIFFERING) -> tuple[np.ndarray, np.ndarray]:
    """One-sided p-values (greater, less) of ``mean_test`` for every row of ``u`` (samples × groups) at once.

    The skew-corrected and bound-aware parts are ``mean_test``'s own; the sign-flip part draws ``n_permutations``
    seeded sign vectors shared by all rows (where ``mean_test`` would enumerate few groups exactly) and, for rows
    with at least ``NORMAL_FROM`` differing groups, reads its normal limit. For power and planning
    (``reports.power``), never for a decision.
    """
    u = np.atleast_2d(np.asarray(u, dtype=float))
    rows = len(u)
    differing = (u != 0).sum(axis=1)
    observed = u.sum(axis=1)
    greater, less = np.ones(rows), np.ones(rows)
    big = differing >= max(NORMAL_FROM, min_differing)
    if big.any():
        from scipy.special import ndtr  # as in skew_corrected_rows: scipy only where a test needs it

        z = observed[big] / np.sqrt((u[big] ** 2).sum(axis=1))
        greater[big], less[big] = ndtr(-z), ndtr(z)
    small = (differing > 0) & ~big
    parts = [(greater, less), skew_corrected_rows(u)]
    if small.any():
        width = int(differing[small].max())
        packed = np.take_along_axis(u[small], np.argsort(u[small] == 0, axis=1, kind="stable")[:, :width], axis=1)
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(n_permutations, width))
        t = packed @ signs.T  # (rows, vectors): zeros past a row's differing groups do not move its sums
        tol = 1e-9 * np.abs(packed).sum(axis=1, keepdims=True)
        obs = observed[small][:, None]
        greater[small] = (1 + (t >= obs - tol).sum(axis=1)) / (n_permutations + 1)
        less[small] = (1 + (t <= obs + tol).sum(axis=1)) / (n_permutations + 1)
        guarded = differing[small] < min_differing
        if guarded.any():
            bounded = np.zeros(rows), np.zeros(rows)  # no part for the rows the guard leaves out
            at = np.flatnonzero(small)[guarded]
            bounded[0][at], bounded[1][at] = bounded_rows(packed[guarded] / bound)
            parts.append(bounded)
    return tuple(np.max([p[i] for p in parts], axis=0) for i in (0, 1))
