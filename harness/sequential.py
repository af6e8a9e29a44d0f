"""Sequential samples: judge whole source groups batch by batch until the claims are decided or the budget is spent.

A ``[samples.<name>] sequential = true`` sample (docs/statistics.md#sequential-samples) walks
the seeded group order of ``fixtures.samples.group_batches``. After each look (``batch`` more
groups), every ranker on the sample judges the look's directions (earlier ones are read from
the score cache, so a rerun or a larger budget continues where the last run stopped) and every
claim whose ranker runs on the sample gets its anytime-valid one-sided tests
(``reports.sequential``). The sample stops at the first look where Holm over both sides of each
claim's family (its members off the sample counted at p = 1) decides every claim it can test,
or when the budget is spent; the session then evaluates everything on the groups judged so far.

The session (``harness.session.Evaluation``) is handed in, never imported: it calls this driver.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fixtures.samples import group_batches, group_order, largest_group
from harness.claims import definitions, expected_grade_counts
from harness.profile_records import Budget
from reports.comparisons import group_labels
from reports.cost import stage_cost
from reports.claim_families import ClaimDefinition
from reports.hypotheses import format_interval, format_p
from reports.measures import paired_measure
from reports.outcomes import outcome_columns
from reports.sequential import SequentialTest, holm_decided, sequential_test

#: Judging cost columns summed over a look's distinct judgments (``reports.cost.stage_cost``).
COST_KEYS = ("judgments", "requests", "input_tokens", "output_tokens", "wall_s", "request_s")


@dataclass(frozen=True)
class Look:
    """The sample after one look: its size, what judging it cost, and which claims were decided."""

    groups: int
    directions: int
    cost: dict[str, float]
    decided: dict[str, bool]


@dataclass
class SequentialRun:
    """A sequential sample on one split: where it stopped (``stop``: decided, budget or exhausted), why, what it
    spent, and each claim's test there."""

    sample: str
    split: str
    qids: tuple[str, ...]
    stop: str
    reason: str
    looks: list[Look]
    tests: dict[str, SequentialTest]
    untested: dict[str, str]
    full: dict[str, int]
    seconds: float
    budget: Budget
    decided_at: dict[str, int] = field(default_factory=dict)

    @property
    def last(self) -> Look:
        return self.looks[-1]

    def cost_row(self) -> dict[str, object]:
        """The cost.csv row: groups, directions, judgments, tokens and seconds spent, their shares of the full split,
        and the stopping reason."""
        spent = self.last.cost
        share = {f"share_{k}": _share(v, self.full[k]) for k, v in
                 (("groups", self.last.groups), ("directions", self.last.directions),
                  ("judgments", spent["judgments"]))}
        return {"stage": f"{self.sample}_sequential", "groups": self.last.groups, "directions": self.last.directions,
                **spent, "looks": len(self.looks), "run_wall_s": round(self.seconds, 3), **share,
                "full_groups": self.full["groups"], "full_directions": self.full["directions"],
                "full_judgments": self.full["judgments"], "stop": self.stop, "stop_reason": self.reason,
                "budget": self.budget.describe()}

    def claim_rows(self, bootstrap: dict[str, tuple[float, float]] | None = None) -> list[dict[str, object]]:
        """One row per claim of the sample's rankers: the anytime-valid p-values and confidence sequence at the stop,
        beside the bootstrap interval (``bootstrap``: claim -> (lo, hi)), and where the sample stopped and which look
        decided the claim (``reports.sequential.STOP_COLUMNS``, read back as a ``StoppingPoint``)."""
        rows = []
        for name, test in self.tests.items():
            lo, hi = (bootstrap or {}).get(name, (float("nan"), float("nan")))
            rows.append({"claim": name, "sample": self.sample, "groups": test.n_groups, "directions": test.n,
                         "p_greater": float(test.p_greater[-1]) if len(test.p_greater) else 1.0,
                         "p_less": float(test.p_less[-1]) if len(test.p_less) else 1.0,
                         "cs_lo": test.lo, "cs_hi": test.hi, "boot_lo": lo, "boot_hi": hi,
                         **self._stop_columns(name), "note": ""})
        rows += [{"claim": name, "sample": self.sample, **self._stop_columns(name), "note": why}
                 for name, why in self.untested.items()]
        return rows

    def _stop_columns(self, name: str) -> dict[str, object]:
        """Where the sample stopped, and the first look whose Holm decided claim ``name`` (None: none did)."""
        k = next((i for i, look in enumerate(self.looks) if look.decided.get(name)), None)
        at = None if k is None else self.looks[k]
        return {"look": len(self.looks), "stop_groups": self.last.groups, "stop_directions": self.last.directions,
                "stop_judgments": int(self.last.cost["judgments"]), "stop": self.stop, "stop_reason": self.reason,
                "decided_look": None if at is None else k + 1,
                "decided_after_groups": None if at is None else at.groups,
                "decided_directions": None if at is None else at.directions,
                "decided_judgments": None if at is None else int(at.cost["judgments"])}

    def p_values(self, name: str) -> tuple[float, float]:
        """(p against Δ > boundary, p against Δ < boundary) of a claim at the stop, for its family's Holm."""
        test = self.tests[name]
        return (float(test.p_greater[-1]) if len(test.p_greater) else 1.0,
                float(test.p_less[-1]) if len(test.p_less) else 1.0)

    def note(self, name: str) -> str:
        """What a claim's verdict line says about its sequential test (claims.csv ``measured``)."""
        test = self.tests[name]
        at = self.decided_at.get(name)
        return (f"sequential sample {self.sample}: anytime-valid p {format_p(float(test.p_greater[-1]))} (>) / "
                f"{format_p(float(test.p_less[-1]))} (<), confidence sequence {format_interval(test.lo, test.hi)}; "
                + (f"decided after {at} groups; " if at else "")
                + f"stopped after {self.last.groups} groups, {self.last.directions} directions, "
                f"{self.last.cost['judgments']:.0f} judgments ({self.reason})")


def _share(part: float, whole: float) -> float:
    return float(part) / whole if whole else float("nan")


def sample_claims(profile, name: str) -> dict[str, ClaimDefinition]:
    """The claims whose rankers run on sample ``name`` (the ranker, or for H3x its argmax twin, on it)."""
    on = {d.name for d in profile.rankers.values() if d.population == name}
    return {n: d for n, d in definitions(profile).items() if d.ranker in on or d.versus in on}


def family_sizes(profile) -> dict[str, int]:
    """Hypotheses per family (two per claim), the family as declared."""
    sizes: dict[str, int] = {}
    for d in definitions(profile).values():
        sizes[d.family] = sizes.get(d.family, 0) + 2
    return sizes


def contributions(ev, split: str, d: ClaimDefinition, order: list[str]) -> tuple[np.ndarray, np.ndarray, float] | None:
    """(D_g, n_g) of a claim in the sampling order of ``order``'s groups, and the measure's scale; None for a claim
    without group-sum contributions (H3's tie-branch share: its estimating equation is centred on the whole sample)."""
    if d.kind == "tie_branch":
        return None
    if d.kind == "tie_resolution":
        per, _ = expected_grade_counts(ev, split, d.ranker, d.versus)
        qids = per.loc[per["branch"] == "equal_score", "qid"]
        first, directions = ev.outcomes_on(split, d.ranker, qids), ev.directions_for(split, d.versus)
    else:
        first, directions = ev.outcomes(split, d.ranker), ev.directions_for(split, d.ranker)
    second = ev.outcomes_on(split, d.versus, first["qid"])
    measure = paired_measure(d.measure)
    a, b = outcome_columns(first), outcome_columns(second)
    if measure.position and not ("rank_pos" in a and "rank_pos" in b):
        return None
    diff = measure.values(a) - measure.values(b)
    labels = group_labels(first, directions) if len(first) else np.array([], dtype=object)
    frame = pd.DataFrame({"group": labels, "d": diff, "n": 1.0}).groupby("group")[["d", "n"]].sum()
    frame = frame.reindex(order, fill_value=0.0)
    return frame["d"].to_numpy(), frame["n"].to_numpy(), measure.scale


def _judging(profile, name: str) -> dict[tuple, tuple[str, str]]:
    """One ranker per distinct set of judgments on the sample (twins read the same) -> (ranker, scope)."""
    out: dict[tuple, tuple[str, str]] = {}
    for decl in profile.ordered():
        if decl.population != name or not decl.is_window:
            continue
        scope = "pair" if decl.designated_only else "window"
        key = (decl.kind, repr(sorted(decl.scorer_options.items())), scope,
               None if scope == "pair" else (decl.reference, decl.tie_breaker))
        out.setdefault(key, (decl.name, scope))
    return out


def _cost(view, split: str, judging: dict[tuple, tuple[str, str]]) -> dict[str, float]:
    total = dict.fromkeys(COST_KEYS, 0.0)
    for ranker, scope in judging.values():
        scored = view.text_scores(split, ranker, scope)
        row = stage_cost(f"{ranker}_{scope}", scored.frame, scored.calls)
        for key in COST_KEYS:
            total[key] += float(row[key])
    return total


def _planned(view, split: str, judging: dict[tuple, tuple[str, str]]) -> int:
    """Inputs the look's rankers judge (known before any judgment)."""
    return sum(len(view.inputs(split, ranker, scope)) for ranker, scope in judging.values())


def _over(budget: Budget, cost: dict[str, float]) -> str | None:
    """The budget a look's cost has spent, named, or None."""
    tokens = cost["input_tokens"] + cost["output_tokens"]
    for what, limit, spent in (("judgments", budget.judgments, cost["judgments"]), ("tokens", budget.tokens, tokens),
                               ("seconds", budget.seconds, cost["wall_s"])):
        if limit is not None and spent >= limit:
            return f"budget spent: {spent:,.0f} of {limit:,.0f} {what}"
    return None


def max_directions(ev, name: str) -> int:
    """The sample's direction budget, capped by ``--grader-sample N`` as a fixed sample is (N = 0: no cap)."""
    limit, cap = ev.profile.samples[name].budget.max_directions, ev.settings.grader_sample
    return limit if not cap else min(limit, cap)


def run_sequential(ev, split: str, name: str) -> SequentialRun:
    """Judge sample ``name`` on ``split`` look by look until its claims are decided or its budget is spent."""
    started = time.perf_counter()
    spec = ev.profile.samples[name]
    budget = spec.budget
    q = ev.sample_units(split, name)
    seed = ev.sample_seed(name)
    looks = group_batches(q, seed, spec.batch, max_directions(ev, name))
    order = group_order(q, seed)
    bound = float(largest_group(q))
    claims = sample_claims(ev.profile, name)
    sizes = family_sizes(ev.profile)
    judging = _judging(ev.profile, name)
    full_view = ev.prefix_view(split, name, tuple(sorted(q["qid"])))
    full = {"groups": int(q["group"].nunique()), "directions": len(q), "judgments": _planned(full_view, split, judging)}
    done: list[Look] = []
    tests: dict[str, SequentialTest] = {}
    untested: dict[str, str] = {}
    decided_at: dict[str, int] = {}
    stop, qids = "exhausted", ()
    reason = f"budget spent: every group within {max_directions(ev, name)} directions judged"
    for k, look in enumerate(looks):
        view = ev.prefix_view(split, name, look)
        if done and budget.judgments is not None and _planned(view, split, judging) > budget.judgments:
            stop, reason = "budget", (f"budget spent: the next look needs {_planned(view, split, judging):,} "
                                      f"judgments, over the {budget.judgments:,} allowed")
            break
        qids = look
        with ev.stage(split, f"sequential_{name}", look=k + 1, directions=len(look)):
            cost = _cost(view, split, judging)
        judged = set(q.loc[q["qid"].isin(look), "group"])
        in_order = [g for g in order if g in judged]
        for claim, d in claims.items():
            got = contributions(view, split, d, in_order)
            if got is None:
                untested[claim] = ("no anytime-valid test of this claim's measure: it is evaluated on the stopped "
                                   "sample without a verdict (docs/statistics.md#sequential-samples)")
                continue
            tests[claim] = sequential_test(got[0], got[1], bound, got[2])  # every claim is about the side of 0
        decided = _decided(claims, tests, sizes)
        for claim, yes in decided.items():
            if yes and claim not in decided_at:
                decided_at[claim] = len(in_order)
        done.append(Look(len(in_order), len(look), cost, decided))
        if decided and all(decided.values()):
            stop, reason = "decided", f"every claim decided after {len(in_order)} groups"
            break
        spent = _over(budget, cost)
        if spent is not None:
            stop, reason = "budget", spent
            break
    return SequentialRun(name, split, qids, stop, reason, done, tests, untested, full,
                         time.perf_counter() - started, budget, decided_at)


def _decided(claims: dict[str, ClaimDefinition], tests: dict[str, SequentialTest], sizes: dict[str, int]
             ) -> dict[str, bool]:
    """Per tested claim, whether Holm over its family (members without a test here at p = 1) decides it."""
    out: dict[str, bool] = {}
    by_family: dict[str, list[str]] = {}
    for claim in tests:
        by_family.setdefault(claims[claim].family, []).append(claim)
    for family, members in by_family.items():
        claimed = [_p(tests[c], claims[c], True) for c in members]
        opposite = [_p(tests[c], claims[c], False) for c in members]
        for c, yes in zip(members, holm_decided(claimed, opposite, sizes[family])):
            out[c] = bool(yes)
    return out


def _p(test: SequentialTest, d: ClaimDefinition, claimed: bool) -> float:
    """The anytime-valid p of the claimed side (or the other) at the last look."""
    greater = (d.side == ">") == claimed
    series = test.p_greater if greater else test.p_less
    return float(series[-1]) if len(series) else 1.0

