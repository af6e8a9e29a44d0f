"""report.md's bottom line: each hypothesis in one sentence from its claims, and where the run departs from the
reference rows of its dataset (``reports.paper.reference_rows``): the NevIR paper's on NevIR, a ``[data]`` set's own
declared rows, or none, which it says (docs/reference-results.md). Computed from the claims, never written in.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from reports.hypotheses import DIGITS, format_interval
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
        if family in ("gate", "pin") or str(r.get("estimand") or "").startswith("single seed"):
            continue
        rows.append({**r, "family": family})
    return rows


def _versus(row: dict[str, Any]) -> str:
    versus = row.get("versus")
    return "" if versus is None or pd.isna(versus) else str(versus)


def _effect_words(row: dict[str, Any]) -> str:
    """``-4.64 pts [-6.36, -2.91]``, or what was measured when the claim has no effect."""
    effect = num(row, "effect")
    if pd.isna(effect):
        return measured_text(row) or "not measured"
    unit = str(row.get("unit") or "")
    digits = DIGITS.get(unit, 2)
    return f"{effect:+.{digits}f} {unit} {format_interval(num(row, 'lo'), num(row, 'hi'), digits)}"


def _claim_brief(row: dict[str, Any]) -> str:
    """A claim in a clause: who vs whom, on what, its status and its effect with the interval."""
    measure = MEASURE_WORDS.get(str(row.get("measure")), str(row.get("measure")))
    versus = _versus(row)
    if str(row.get("family", "")).startswith("H3x"):
        measure += f" on the equal-grade directions of {md_code(versus)}"
    ranker = row.get("ranker")
    if ranker is None or pd.isna(ranker) or not str(ranker):
        subject = md_code(str(row.get("claim", "")))  # a claim that names no ranker is named by itself
    else:
        subject = f"{md_code(str(ranker))} vs {md_code(versus)}, {measure}" if versus else \
            f"{md_code(str(ranker))}, {measure}"
    return f"{subject} **{md_escape(str(row.get('status', '')))}** ({_effect_words(row)})"


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


def bottom_line(claims: pd.DataFrame, reference: ReferenceRows | None, dataset: Mapping[str, Any] | None = None,
                substituted: Sequence[str] = ()) -> list[str]:
    """report.md's first section: which rows another model scored because a shipped one was refused
    (``substitutions``), per hypothesis one sentence from its claims (status, effect, interval), then where the
    run departs from its dataset's reference rows (``reports.paper.reference_rows``: the paper's on NevIR, a
    ``[data]`` set's own declared rows, or none, which it says), computed, never written in."""
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
    dataset = dict(dataset or {})
    if dataset.get("kind", "nevir") != "nevir" and not dataset.get("reference"):
        name = md_code(str(dataset.get("name", "this dataset")))
        return lines + ["", f"No reference results: the dataset {name} declares none (`[data] reference`), and the "
                        "NevIR paper's values are about NevIR, so this run is compared with none.", ""]
    contrast = paper_contrast(claims, reference)
    if contrast is None or not (contrast.departs or contrast.undecided or contrast.agrees):
        return lines + [""]
    total = contrast.agrees + len(contrast.departs) + len(contrast.undecided)
    source = md_escape(reference.source) + (f"; sources and why the measures differ: {md_code(REFERENCE_PAGE)}"
                                            if reference.source == PAPER else "")
    if not (contrast.departs or contrast.undecided):
        return lines + ["", f"Against {reference.short} ({source}): all {total} claims its values give a direction "
                        "for are decided its way.", ""]
    return lines + ["", f"Against {reference.short} ({source}): of the {total} claims its values give a direction "
                    f"for, this run decides {contrast.agrees} its way, {len(contrast.departs)} the other way and "
                    f"{len(contrast.undecided)} not at all. {reference.caveat}", "",
                    *[f"- {line}" for line in (*contrast.departs, *contrast.undecided)], ""]
