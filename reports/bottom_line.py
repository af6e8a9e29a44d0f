"""report.md's first screen: each hypothesis in one sentence from its claims, then one verdict table (every claim with
its effect, decision interval, Holm p, verdict and n; each family's hypotheses listed once), and where the run departs
from the reference rows of its dataset (``reports.paper.reference_rows``): the NevIR paper's on NevIR, a ``[data]``
set's own declared rows, or none, which it says (docs/reference-results.md). Computed from the claims, never written
in.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from reports.claim_families import single_seed
from reports.decision_intervals import published
from reports.hypotheses import DIGITS, format_p
from reports.measures import PAIRED_MEASURES, paired_measure
from reports.paper import PAPER, ReferenceRows
from reports.render import md_code, md_escape

#: How a claim's measure reads in a sentence: a paired measure's words, and H3's share.
MEASURE_WORDS = {**{m.name: m.words for m in PAIRED_MEASURES if m.words},
                 "tie_branch_share": "equal-grade branch, share of non-successes minus share of directions"}


#: What each hypothesis says, for the bottom line (docs/statistics.md#claims).
HYPOTHESES = {"H1": "training moves preference and position apart",
              "H2": "window reranking raises preference and position over its baseline",
              "H3": "the equal-grade branch holds the failures",
              "beyond": "beyond the paper"}
#: Where the published values the bottom line compares with are listed, with their sources.
REFERENCE_PAGE = "docs/reference-results.md"
#: The manifest entries naming the models a ranker trains (``harness.models.manifest_entry``): ``model:<ranker>``.
MODEL = "model:"


def substitutions(entries: Mapping[str, Any], markdown: bool = True) -> list[str]:
    """One sentence per ranker that another model scored because the study's shipped judgments were refused (a
    model of its manifest entry ``model:<ranker>`` has ``refused``): the model used, its key, and why (markdown, or
    plain text for the terminal)."""
    text, code = (md_escape, md_code) if markdown else (str, str)
    out = []
    for key, models in sorted(entries.items()):
        if not str(key).startswith(MODEL) or not isinstance(models, Mapping):
            continue
        for value in models.values():
            if isinstance(value, Mapping) and value.get("refused"):
                out.append(f"{code(str(key)[len(MODEL):])} was scored by {text(value.get('model'))} (model key "
                           f"{code(value.get('model_key'))}; {text(value.get('source'))}), not by the study's "
                           f"shipped judgments, which were refused: {text(value['refused'])}")
    return out


#: The verdict table's columns: report.md's first screen (docs/outputs.md#reportmd).
VERDICT_COLUMNS = ("claim", "ranker vs baseline", "measure", "effect, decision interval", "Holm p (claimed / other)",
                   "verdict", "n")
#: What decides a verdict, said once above the verdict table (docs/statistics.md#decision-intervals).
DECIDES = ("What decides: each claim's decision test, one-sided on each side of 0 and Holm-corrected over both sides "
           "of every claim in its family (α = 0.05); its decision interval inverts that test at Holm's levels, so a "
           "claim holds exactly when the interval lies on its claimed side of 0, fails when it lies on the other and "
           "is inconclusive when it holds 0, while the bootstrap intervals elsewhere in this report describe the "
           "effects and decide nothing.")


def num(row: dict[str, Any], key: str) -> float:
    """A claims row's number, NaN where the row has none (claims.csv leaves cells empty)."""
    value = row.get(key)
    return float("nan") if value is None or pd.isna(value) else float(value)


def section_of(family: str) -> str:
    """The report section of a family: the study's hypothesis (``H2:<ranker>`` is H2's), else beyond the paper."""
    base = str(family).split(":")[0]
    return base if base in ("H1", "H2", "H3") else "beyond"


def measured_text(row: dict[str, Any]) -> str:
    """A row's ``measured`` text on one line, escaped for markdown."""
    return md_escape(" ".join(str(row.get("measured", "")).split()))


def _study_claims(claims: pd.DataFrame) -> list[dict[str, Any]]:
    """The hypothesis claims of a run (not gates or pins, not the single-seed replays), with ``family`` as text."""
    rows = []
    for r in claims.to_dict("records"):
        family = "" if r.get("family") is None or pd.isna(r.get("family")) else str(r["family"])
        if family in ("gate", "pin") or single_seed(r):
            continue
        rows.append({**r, "family": family})
    return rows


def _versus(row: dict[str, Any]) -> str:
    versus = row.get("versus")
    return "" if versus is None or pd.isna(versus) else str(versus)


def seeds_of(row: Mapping[str, Any]) -> str:
    """Which training seeds a claim's numbers are from (``mean of seeds 13–17``, ``seed 13``), "" for the others."""
    seeds = row.get("seeds")
    return seeds if isinstance(seeds, str) else ""


def effect_words(row: Mapping[str, Any], decision: bool = False) -> str:
    """``-4.64 pts``, with the seeds it is from beside it (``-0.48 pts, mean of seeds 13–17``) and, with
    ``decision``, its decision interval; what was measured when the claim has no effect."""
    effect = num(row, "effect")
    if pd.isna(effect):
        return measured_text(row) or "not measured"
    unit = str(row.get("unit") or "")
    digits = DIGITS.get(unit, 2)
    words = f"{effect:+.{digits}f} {unit}" + (f", {seeds_of(row)}" if seeds_of(row) else "")
    return words + (f" {published(row).text(digits)}" if decision and published(row).defined else "")


def subject_of(row: Mapping[str, Any]) -> tuple[str, str]:
    """(who vs whom, on what) of a claim: ``(`e0` vs `fusion`, strict preference)``; a claim naming no ranker is
    named by itself."""
    measure = MEASURE_WORDS.get(str(row.get("measure")), str(row.get("measure")))
    versus = _versus(row)
    if str(row.get("family", "")).startswith("H3x"):
        measure += f" on the equal-grade directions of {md_code(versus)}"
    ranker = row.get("ranker")
    if ranker is None or pd.isna(ranker) or not str(ranker):
        return md_code(str(row.get("claim", ""))), ""
    return (f"{md_code(str(ranker))} vs {md_code(versus)}" if versus else md_code(str(ranker))), measure


def _claim_brief(row: dict[str, Any]) -> str:
    """A claim in a clause: who vs whom, on what, its status and its effect (with the seeds it is from)."""
    who, measure = subject_of(row)
    subject = f"{who}, {measure}" if measure else who
    return f"{subject} **{md_escape(str(row.get('status', '')))}** ({effect_words(row)})"


def _measured_side(row: dict[str, Any]) -> str | None:
    """The side of 0 the run decided the effect on: the claimed side when it holds, the other when it fails."""
    claimed = str(row.get("claimed") or "").strip()[:1]
    if claimed not in (">", "<") or row.get("status") not in ("holds", "fails"):
        return None
    return claimed if row["status"] == "holds" else {">": "<", "<": ">"}[claimed]


@dataclass(frozen=True)
class PaperContrast:
    """This run's comparison claims against the direction of the paper's published values (``reports.paper``)."""

    departs: tuple[str, ...]  # decided on the other side of 0 than the paper's values
    undecided: tuple[str, ...]  # the paper has a direction; this run decides none
    agrees: int  # decided the paper's way


def paper_contrast(claims: pd.DataFrame, reference: ReferenceRows | None) -> PaperContrast | None:
    """Each comparison claim whose two rankers the reference reports on the claim's measure, against the sign of
    their published difference (the reference's direction); None without reference rows for the split."""
    if reference is None:
        return None
    published = reference.frame.set_index("ranker")
    departs, undecided, agrees = [], [], 0
    for row in _study_claims(claims):
        versus = _versus(row)
        try:
            column = paired_measure(str(row.get("measure"))).of
        except KeyError:
            continue
        if not versus or column not in published.columns or not {row.get("ranker"), versus} <= set(published.index):
            continue
        mine, theirs = published.at[row["ranker"], column], published.at[versus, column]
        if pd.isna(mine) or pd.isna(theirs) or mine == theirs:
            continue
        side = ">" if mine > theirs else "<"
        words = {">": "above", "<": "below"}
        digits = DIGITS.get(str(row.get("unit") or ""), 2)
        said = (f"{reference.short} has {md_code(row['ranker'])} {words[side]} {md_code(versus)} "
                f"({float(mine):.{digits}f} vs {float(theirs):.{digits}f})")
        measured = _measured_side(row)
        if measured is None:
            undecided.append(f"{_claim_brief(row)}: {said}; this run does not decide it.")
        elif measured != side:
            departs.append(f"{_claim_brief(row)}: {said}; this run has it {words[measured]}.")
        else:
            agrees += 1
    return PaperContrast(tuple(departs), tuple(undecided), agrees)


def bottom_line(claims: pd.DataFrame, substituted: Sequence[str] = ()) -> list[str]:
    """report.md's first section: which rows another model scored because a shipped one was refused
    (``substitutions``), then per hypothesis one sentence from its claims (who vs whom, status, effect with the seeds
    it is from); the verdict table below holds their intervals and p-values."""
    rows = _study_claims(claims)
    if not rows and not substituted:
        return []
    lines = ["## Bottom line", "", *[f"- **Another model scored this row**: {line}." for line in substituted]]
    if not rows:
        return lines + [""]
    for section, words in HYPOTHESES.items():
        members = [r for r in rows if section_of(r["family"]) == section]
        if members:
            name = "Beyond the paper" if section == "beyond" else f"{section} ({words})"
            lines.append(f"- **{name}**: " + "; ".join(_claim_brief(r) for r in members) + ".")
    return lines + [""]


def verdict_table(claims: pd.DataFrame) -> list[str]:
    """report.md's verdict table: one row per claim (claim, ranker vs baseline, measure, effect with its decision
    interval, Holm p on each side, verdict, n), under the one sentence saying what decides, and each family's
    hypotheses listed once beneath it."""
    rows = _study_claims(claims)
    if not rows:
        return []
    table = []
    for r in rows:
        who, measure = subject_of(r)
        p, q = num(r, "p_adjusted"), num(r, "p_opposite_adjusted")
        table.append({
            "claim": md_code(str(r.get("claim", ""))), "ranker vs baseline": who,
            "measure": f"{measure} ({md_escape(str(r.get('claimed') or ''))})" if measure else "",
            "effect, decision interval": effect_words(r, decision=True),
            "Holm p (claimed / other)": "— (unable to decide)" if pd.isna(p) else f"{format_p(p)} / {format_p(q)}",
            "verdict": f"**{md_escape(str(r.get('status', '')))}**", "n": _sample_words(r)})
    families: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        families.setdefault(r["family"], r)
    listed = [f"- {md_escape(f)} ({_count(r, 'family_hypotheses')} hypotheses): {md_escape(r.get('family_members'))}"
              if num(r, "family_hypotheses") else f"- {md_escape(f)}: no claim its sample can decide (0 hypotheses)"
              for f, r in families.items() if isinstance(r.get("family_members"), str) and r["family_members"]]
    return ["## Verdicts", "", DECIDES, "",
            pd.DataFrame(table, columns=list(VERDICT_COLUMNS)).to_markdown(index=False, disable_numparse=True), "",
            *(["Holm families (both sides of every claim in each):", "", *listed, ""] if listed else [])]


def _count(row: Mapping[str, Any], key: str) -> str:
    value = num(row, key)
    return "?" if pd.isna(value) else f"{int(value):,}"


def _sample_words(row: Mapping[str, Any]) -> str:
    """``2,735 (699 groups)``, ``150 (75 pairs)``, ``150 (single directions)``: n in the design's units."""
    n, groups, units = num(row, "n"), num(row, "n_groups"), row.get("units")
    if pd.isna(n):
        return ""
    if units == "directions" or pd.isna(groups):
        return f"{int(n):,}" + (" (single directions)" if units == "directions" else "")
    unit = units if isinstance(units, str) and units else "groups"
    return f"{int(n):,} ({int(groups):,} {unit[:-1] if groups == 1 else unit})"


def reference_lines(claims: pd.DataFrame, reference: ReferenceRows | None, dataset: Mapping[str, Any] | None = None
                    ) -> list[str]:
    """Where the run departs from its dataset's reference rows (``reports.paper.reference_rows``: the paper's on
    NevIR, a ``[data]`` set's own declared rows, or none, which it says), computed, never written in."""
    if not _study_claims(claims):
        return []
    dataset = dict(dataset or {})
    if dataset.get("kind", "nevir") != "nevir" and not dataset.get("reference"):
        name = md_code(str(dataset.get("name", "this dataset")))
        return [f"No reference results: the dataset {name} declares none (`[data] reference`), and the NevIR paper's "
                "values are about NevIR, so this run is compared with none.", ""]
    contrast = paper_contrast(claims, reference)
    if contrast is None or not (contrast.departs or contrast.undecided or contrast.agrees):
        return []
    total = contrast.agrees + len(contrast.departs) + len(contrast.undecided)
    source = md_escape(reference.source) + (f"; sources and why the measures differ: {md_code(REFERENCE_PAGE)}"
                                            if reference.source == PAPER else "")
    if not (contrast.departs or contrast.undecided):
        return [f"Against {reference.short} ({source}): all {total} claims its values give a direction for are "
                "decided its way.", ""]
    return [f"Against {reference.short} ({source}): of the {total} claims its values give a direction for, this run "
            f"decides {contrast.agrees} its way, {len(contrast.departs)} the other way and {len(contrast.undecided)} "
            f"not at all. {reference.caveat}", "", *[f"- {line}" for line in (*contrast.departs, *contrast.undecided)],
            ""]
