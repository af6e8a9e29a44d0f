"""Three-outcome decision of a hypothesis claim: holds, fails or inconclusive (SPEC §6, issue 14).

A claim states that an effect (e.g. Δ strict vs fusion, in points) lies on one side
of a boundary (usually 0). It is decided by the effect's 95% interval and by the
minimum detectable effect (MDE) of its sample:

- **holds**: the interval lies wholly on the claimed side (the boundary excluded)
  and the effect is at least the MDE beyond the boundary, on that side;
- **fails**: the same, on the other side;
- **inconclusive**: anything else. The interval contains the boundary, or the
  effect is smaller than what the sample could detect, or it was not measured.

A degenerate interval [0, 0] (no discordant direction: the two rankers agree on
every direction, so every resample gives Δ = 0) contains the boundary 0 and is
therefore inconclusive: the data hold no evidence either way, not evidence of
"no effect". Pass ``mde=0`` for a claim without a power analysis.

This module only decides and formats; asserting against a profile lives in the harness.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import pandas as pd

from reports.stats import holm

Status = Literal["holds", "fails", "inconclusive"]
Side = Literal[">", "<"]
#: Columns of a claims table row (``ClaimResult.row``).
CLAIM_COLUMNS = ("claim", "family", "expected", "measured", "status", "reason", "effect", "lo", "hi", "unit", "mde",
                 "n", "p_value", "p_holm")


def _check(lo: float, hi: float, side: str, mde: float) -> None:
    if side not in (">", "<"):
        raise ValueError(f"claimed side must be '>' or '<'; got {side!r}")
    if not math.isnan(lo) and not math.isnan(hi) and lo > hi:
        raise ValueError(f"interval [{lo}, {hi}] has lo > hi")
    if mde < 0:
        raise ValueError(f"minimum detectable effect must be >= 0; got {mde}")


def decide(effect: float, lo: float, hi: float, side: Side, mde: float, boundary: float = 0.0) -> Status:
    """holds / fails / inconclusive for the claim ``effect <side> boundary`` (see the module doc)."""
    _check(lo, hi, side, mde)
    if any(math.isnan(x) for x in (effect, lo, hi, mde, boundary)):
        return "inconclusive"
    above = lo > boundary and effect - boundary >= mde
    below = hi < boundary and boundary - effect >= mde
    if not (above or below):
        return "inconclusive"
    return "holds" if above == (side == ">") else "fails"


def _reason(effect: float, lo: float, hi: float, mde: float, boundary: float, unit: str) -> str:
    """Why a claim is inconclusive, in words ('' for a decisive one)."""
    if any(math.isnan(x) for x in (effect, lo, hi, mde)):
        return "not measured"
    if lo == hi == boundary:
        return f"interval [{lo:g}, {hi:g}]: no discordant direction"
    if lo <= boundary <= hi:
        return f"interval {format_interval(lo, hi)} contains {boundary:g}"
    if abs(effect - boundary) < mde:
        return f"|effect| {abs(effect - boundary):.2f} {unit} is below the MDE {mde:.2f} {unit}"
    return "effect lies outside its interval"


def format_interval(lo: float, hi: float, digits: int = 2) -> str:
    """``[+1.10, +5.30]``: signed, so a reader sees at once which side of 0 each end lies on."""
    return f"[{lo:+.{digits}f}, {hi:+.{digits}f}]"


def format_p(p: float) -> str:
    """A p-value to two significant digits, '<0.0001' below that, '—' when absent."""
    if math.isnan(p):
        return "—"
    return "<0.0001" if p < 1e-4 else f"{p:.2g}"


@dataclass(frozen=True)
class ClaimResult:
    """One claim's decision with the numbers it rests on (effect, interval and MDE share ``unit``)."""

    name: str
    family: str
    status: Status
    effect: float
    lo: float
    hi: float
    mde: float
    n: int
    side: Side
    boundary: float = 0.0
    unit: str = "pts"
    p_value: float = math.nan
    p_holm: float = math.nan
    measured: str = ""

    @property
    def expected(self) -> str:
        """The claim itself, e.g. ``> 0``."""
        return f"{self.side} {self.boundary:g}"

    @property
    def reason(self) -> str:
        """Why the claim is inconclusive ('' when decisive)."""
        if self.status != "inconclusive":
            return ""
        return _reason(self.effect, self.lo, self.hi, self.mde, self.boundary, self.unit)

    def summary(self) -> str:
        """One line for the terminal and report: status, effect, interval, MDE, n, p (Holm)."""
        text = (f"{self.status}: {self.effect:+.2f} {self.unit} {format_interval(self.lo, self.hi)} "
                f"(claimed {self.expected}; MDE {self.mde:.2f} {self.unit}; n={self.n}; "
                f"p={format_p(self.p_value)}, Holm {format_p(self.p_holm)})")
        if self.reason:
            text += f"; inconclusive: {self.reason}"
        return f"{text}; {self.measured}" if self.measured else text

    def row(self) -> dict[str, object]:
        """A claims-table row with ``CLAIM_COLUMNS`` (the measured text defaults to the summary)."""
        return {"claim": self.name, "family": self.family, "expected": self.expected,
                "measured": self.measured or self.summary(), "status": self.status, "reason": self.reason,
                "effect": self.effect, "lo": self.lo, "hi": self.hi, "unit": self.unit, "mde": self.mde, "n": self.n,
                "p_value": self.p_value, "p_holm": self.p_holm}


def claim(name: str, family: str, effect: float, lo: float, hi: float, side: Side, mde: float, n: int,
          boundary: float = 0.0, unit: str = "pts", p_value: float = math.nan, measured: str = "") -> ClaimResult:
    """Decide a claim and keep its numbers together (``p_holm`` is set per family by ``adjust_families``)."""
    status = decide(effect, lo, hi, side, mde, boundary)
    return ClaimResult(name, family, status, float(effect), float(lo), float(hi), float(mde), int(n), side,
                       float(boundary), unit, float(p_value), math.nan, measured)


def adjust_families(results: Sequence[ClaimResult]) -> list[ClaimResult]:
    """The same results, in order, with ``p_holm`` Holm-adjusted within each ``family``.

    Adjustment reports the family-wise error of the p-values; it never changes a
    status, which the interval and MDE decide.
    """
    out = list(results)
    for family in dict.fromkeys(r.family for r in results):
        index = [i for i, r in enumerate(results) if r.family == family]
        for i, p in zip(index, holm([results[i].p_value for i in index])):
            out[i] = replace(results[i], p_holm=float(p))
    return out


def holm_by_family(claims: pd.DataFrame) -> pd.DataFrame:
    """A claims table with ``p_holm`` filled within each family (rows come from separate specs, so the
    adjustment can only happen once the whole family is known: when the report is assembled)."""
    if "p_value" not in claims.columns or "family" not in claims.columns:
        return claims
    out = claims.copy()
    p = pd.to_numeric(out["p_value"], errors="coerce")
    out["p_holm"] = np.nan
    for _, index in out.groupby("family", sort=False).groups.items():
        out.loc[index, "p_holm"] = holm(p.loc[index].to_numpy(dtype=float))
    return out
