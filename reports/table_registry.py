"""The registry of the published tables (docs/protocol.md#outputs): each table is one record saying its file stem,
title, identifying columns, whether the terminal summary shows it, its CSV's columns in order and the 95% intervals
among them.

In the spirit of ir_measures, a table is a named object and the single source of its columns: the record builder
lays every recorded frame out in its table's columns (``reports.record_builder``), and the modules that compute a
whole frame (pairwise, the comparison with a saved run) take their column lists from here. Table II, Table III and
nevir_paired derive theirs from their measure records (``reports.measures``), which stay the source of those.
A table whose rows differ in what they hold (claims, cost, order bias) declares every column any of its rows can
hold; a file has those its rows hold, in this order.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from reports.columns import Measure
from reports.measures import (CHANGE_COLUMNS, NEVIR_PAIRED, NEVIR_PAIRED_COLUMNS, PAIRED_MEASURES, TABLE2,
                              TABLE2_ROW_COLUMNS, TABLE3_COLUMNS)
from reports.order_bias import REPAIRS


@dataclass(frozen=True)
class Interval:
    """A 95% interval a table publishes: ``name`` is the column it bounds where it bounds one (``effect``), else
    what it is (``cs``: a confidence sequence); ``lo`` and ``hi`` are the columns holding its ends."""

    name: str
    lo: str
    hi: str


@dataclass(frozen=True)
class Table:
    """A published table: ``<stem>.csv`` and ``<stem>.json``, headed ``title`` in report.md (and in the terminal
    summary where ``terminal``). ``keys`` identify a row (a later row with the same identity replaces it);
    ``columns`` are the CSV's, in order; ``intervals`` the 95% intervals among them."""

    stem: str
    title: str
    keys: tuple[str, ...]
    terminal: bool
    columns: tuple[str, ...]
    intervals: tuple[Interval, ...] = ()

    def __post_init__(self) -> None:
        twice = sorted({c for c in self.columns if self.columns.count(c) > 1})
        bounds = [b for i in self.intervals for b in (i.lo, i.hi)]
        unknown = sorted({*self.keys, *bounds} - set(self.columns))
        if twice or unknown:
            raise ValueError(f"table {self.stem!r}: columns named twice {twice}, keys or interval ends that are not "
                             f"columns {unknown}")

    def ordered(self, present: Iterable[str]) -> list[str]:
        """The columns a frame of this table holds, in the table's order; a column the table does not declare (a
        hand-made row's) follows them, in the frame's order, so it is never lost."""
        held = list(present)
        return [c for c in self.columns if c in held] + [c for c in held if c not in self.columns]


def _intervals(measures: Iterable[Measure]) -> tuple[Interval, ...]:
    """The intervals of measure records, named for the column each bounds."""
    return tuple(Interval(m.name, *m.bounds) for m in measures if m.bounds is not None)


#: A pair of rankers compared (``reports.comparisons.compare``): the two rankers (Δ = first − second), directions,
#: groups, groups whose strict outcomes differ in sum, directions whose strict outcome differs, then per measure
#: with Table II Δ columns its Δ, 95% interval, bootstrap SE, MDE and two-sided group sign-flip p-value.
PAIRED_DIFFERENCE_COLUMNS = ("first", "second", "n", "n_groups", "differing_groups", "discordant",
                             *(c for m in PAIRED_MEASURES if m.delta_columns for c in (*m.delta_columns, m.p_column)))
#: Where a claim's sequential sample stopped (``reports.sequential.StoppingPoint``), besides ``claim``.
STOP_COLUMNS = ("sample", "look", "stop_groups", "stop_directions", "stop_judgments", "stop", "stop_reason",
                "decided_look", "decided_after_groups", "decided_directions", "decided_judgments")
#: A measure of a ranker compared with a saved run (``reports.run_comparison.compare_tables``).
COMPARISON_COLUMNS = ("ranker", "measure", "now", "then", "delta", "delta_lo", "delta_hi", "p_changed",
                      "p_unchanged", "margin", "certifiable_margin", "decision", "basis", "n", "differing_groups",
                      "discordant", "paper")

_TABLES = (
    Table("table1", "Table I: populations", ("population",), True,
          ("population", "split", "planned_directions", "planned_pairs", "conflicts", "planned_groups", "covered",
           "eligible", "groups", "complete_pairs", "incomplete_eligible", "group_rules")),
    # The writer adds each ranker's declared label and compare_to after the measures (docs/outputs.md).
    Table("table2", "Table II: preference and position per ranker", ("ranker",), True,
          (*TABLE2_ROW_COLUMNS, *CHANGE_COLUMNS, "label", "compare_to", "seeds"), _intervals(TABLE2)),
    Table("seeds", "Training seeds: each measure of a seeded ranker across its seeds (Table II is the run's own seed)",
          ("ranker", "measure"), True,
          ("ranker", "measure", "seeds", "seed_values", "single_seed", "mean", "sd", "min", "max")),
    Table("perturbation", "Trained rankers retrained on route scores moved by one part in 10^7: claims and measures "
          "before and after", ("subject", "measure"), False,
          ("subject", "measure", "unperturbed", "perturbed", "change", "relative_noise")),
    Table("table3", "Table III: pair-only scoring (L1) vs window reranking (L2)", ("scorer",), True, TABLE3_COLUMNS),
    Table("nevir_paired", "NevIR paired accuracy on the given pair (L1), ties as failures and ordered by passage id "
          "(trec_eval, as MTEB's NevIR task); published figures in report.md", ("scorer",), True, NEVIR_PAIRED_COLUMNS, _intervals(NEVIR_PAIRED)),
    Table("tie_branch", "Tie-branch analysis (window scorers: equal vs different text scores)", ("scorer", "branch"),
          True, ("scorer", "branch", "parent", "directions", "of_directions", "directions_pct", "non_successes",
                 "of_non_successes", "non_successes_pct", "accuracy_pct", "tie_break_accuracy_pct", "double_max",
                 "double_max_pct")),
    # Holm-adjusted p-values over the table, then the ranked population the part compared on.
    Table("pairwise", "Paired differences between rankers on the same directions", ("first", "second"), True,
          (*PAIRED_DIFFERENCE_COLUMNS, *(f"{m.p_column}_holm" for m in PAIRED_MEASURES if m.p_column), "population"),
          tuple(Interval(*m.delta_columns[:3]) for m in PAIRED_MEASURES if m.delta_columns)),
    # A judging stage's cost (reports.cost.stage_cost, judgment_cost, ranking_cost), a K-window replay's, then a
    # sequential sample's (docs/protocol.md#judging-cost).
    Table("cost", "Cost per stage", ("stage",), True,
          ("stage", "judgments", "requests", "input_tokens", "output_tokens", "wall_s", "request_s", "unavailable",
           "truncated", "missing_usage", "timed_by_suite", "windows", "wall_s_per_window", "wall_s_per_judgment",
           "fallback_windows", "strict", "n", "judgments_saved_pct", "groups", "directions", "looks", "run_wall_s",
           "share_groups", "share_directions", "share_judgments", "full_groups", "full_directions",
           "full_judgments", "stop", "stop_reason", "budget")),
    Table("unavailable", "Unavailable judgments by cause, and replies stored capped", ("ranker", "scope", "issue",
                                                                                        "cause"), False,
          ("ranker", "scope", "inputs", "issue", "cause", "count")),
    # A listwise judge's repairs, a pairwise judge's inconsistent pairs, then the reversed-order check.
    Table("order_bias", "Listwise and pairwise judges: repairs and position bias", ("ranker", "scope"), True,
          ("ranker", "scope", "windows", "fallback_windows", "judgments", "unusable_judgments",
           *(f"windows_with_{name}" for name in REPAIRS), "pairs", "inconsistent_pairs", "inconsistent_pct",
           "first_shown_chosen_pct", "order_checked", "order_checked_with_pair", "order_changed",
           "order_changed_pct", "order_kendall_tau")),
    Table("endpoints", "Server endpoints: judgments each made in this run, and endpoints taken out",
          ("ranker", "scope", "endpoint"), True,
          ("ranker", "scope", "endpoint", "judgments", "resent", "taken_out")),
    # Gates and pins fill the first eleven; a claim's verdict (reports.hypotheses.ClaimResult.row) the rest.
    Table("claims", "Hypothesis claims", ("claim",), True,
          ("claim", "family", "status", "expected", "measured", "profile", "scope", "ranker", "declaration",
           "declared_in", "check", "versus", "measure", "claimed", "reason", "effect", "seeds", "decision_lo",
           "decision_hi", "decision_level", "lo", "hi", "unit", "p_value", "p_adjusted", "p_opposite",
           "p_opposite_adjusted", "mde", "mde_level", "mde_test", "directions_needed", "n", "n_groups", "units",
           "differing_groups", "discordant", "family_hypotheses", "family_members", "estimand"),
          # The decision interval decides with the verdict; the bootstrap interval (lo, hi) only describes the effect
          # (docs/statistics.md#decision-intervals).
          (Interval("decision", "decision_lo", "decision_hi"), Interval("effect", "lo", "hi"))),
    Table("sequential", "Sequential samples: anytime-valid tests and confidence sequences at the stop",
          ("sample", "claim"), True,
          ("claim", STOP_COLUMNS[0], "groups", "directions", "p_greater", "p_less", "cs_lo", "cs_hi", "boot_lo",
           "boot_hi", *STOP_COLUMNS[1:], "note"),
          (Interval("cs", "cs_lo", "cs_hi"), Interval("boot", "boot_lo", "boot_hi"))),
    # What a TREC run ranked in the pool (rankers.kinds.trec_run), then its eligible directions' designated passages.
    Table("coverage", "TREC-run coverage: what each run ranked in the pool, what was dropped, ties by cause",
          ("ranker",), True,
          ("ranker", "run_file", "run_sha256", "pool_queries", "pool_passages", "ranked_in_pool", "unranked_in_pool",
           "ranked_outside_pool", "uncovered_queries", "extra_qids", "extra_qid_lines", "other_split_qids",
           "other_split_lines", "outside_sample_qids", "outside_sample_lines", "unknown_qids", "directions",
           "both_ranked", "preferred_only_ranked", "counterpart_only_ranked", "neither_ranked", "ties",
           "ties_both_unranked", "ties_equal_score")),
    # Which rankers both runs hold (side), then each measure compared, then what the whole comparison stands on.
    Table("comparison", "Comparison with a saved run (--compare-to): rankers matched by name", ("ranker", "measure"),
          False, (COMPARISON_COLUMNS[0], "side", *COMPARISON_COLUMNS[1:], "versions_differ", "saved_partial"),
          (Interval("delta", "delta_lo", "delta_hi"),)),
)
#: Every published table by its file stem, in report.md's order.
TABLES: dict[str, Table] = {t.stem: t for t in _TABLES}
