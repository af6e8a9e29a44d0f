"""The report's tables as text: the terminal summary, Markdown (report.md) and LaTeX (table2.tex).

Every rendering of a value goes through here, so a cell reads the same in the terminal,
report.md and LaTeX: Table II's columns, headings and digits come from the measure registry
(``reports.measures``), text is escaped for the output it lands in, and an interval that
cannot be read as one carries its note (``reports.tables.interval_note``).
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from reports.claim_families import decided_in
from reports.measures import shown_in
from reports.columns import COUNT, POPULATION, BaselineMeasure, Measure, Output
from reports.record import NotEvaluated, endpoint_summary_of, unavailable_summary
from reports.tables import RELIABLE_N, interval_note

#: Columns shown in the terminal and in report.md for the wide tables (Table II's: those its registry shows there).
BRIEF_COLUMNS = {
    "table2": ["ranker", *(m.name for m in shown_in("brief"))],
    "claims": ["claim", "status", "decided_in", "expected", "measured"],
}
#: LaTeX's special characters and what stands for each in text.
TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
               "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}

#: Markdown's characters that could start markup (code, emphasis, links, raw HTML) or end a table cell (``|``);
#: each is backslash-escaped in a text report.md shows, so the text reads as it is.
MD_SPECIAL = frozenset("\\`*_[]<>|")


def brief(table: str, frame: pd.DataFrame) -> pd.DataFrame:
    """A wide table's brief columns; a claim's with the family that decided it and its size (``decided_in``)."""
    if table == "claims" and "family" in frame.columns:
        hypotheses = frame["family_hypotheses"] if "family_hypotheses" in frame.columns else [None] * len(frame)
        frame = frame.assign(decided_in=[decided_in(f, h) for f, h in zip(frame["family"], hypotheses)])
    cols = [c for c in BRIEF_COLUMNS.get(table, list(frame.columns)) if c in frame.columns]
    return frame[cols]


def terminal_tables(table: str, frame: pd.DataFrame) -> str:
    """Fixed-width text of a table for the pytest terminal summary."""
    return brief(table, frame).to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="–",
                                         max_colwidth=110)


def unavailable_lines(frame: pd.DataFrame) -> list[str]:
    """One line per ranker and scope with unavailable judgments or capped replies, causes counted, e.g.
    ``oa (window): 16 of 80 judgments unavailable — 16 ConnectError to 127.0.0.1:8011``."""
    lines = []
    for ranker, scopes in unavailable_summary(frame).items():
        for scope, entry in scopes.items():
            parts = []
            if entry["unavailable"]:
                causes = "; ".join(f"{n:,} {cause}" for cause, n in entry["causes"].items())
                parts.append(f"{entry['unavailable']:,} of {entry['inputs']:,} judgments unavailable — {causes}")
            if entry["replies_capped"]:
                rows = frame[(frame["ranker"] == ranker) & (frame["scope"] == scope) & (frame["issue"] == "capped")]
                parts.append(f"{entry['replies_capped']:,} replies {rows['cause'].iloc[0]}")
            lines.append(f"{ranker} ({scope}): " + "; ".join(parts))
    return lines


def endpoint_lines(frame: pd.DataFrame) -> list[str]:
    """One line per ranker and scope, e.g. ``g (window): 30 judgments made now — 16 http://127.0.0.1:8011/v1, 14 ...;
    taken out: http://127.0.0.1:8012/v1 (3 requests re-sent: RemoteProtocolError ...)``."""
    lines = []
    for ranker, scopes in endpoint_summary_of(frame).items():
        for scope, endpoints in scopes.items():
            total = sum(e["judgments"] for e in endpoints.values())
            made = ", ".join(f"{e['judgments']:,} {url}" for url, e in endpoints.items() if e["judgments"])
            line = f"{ranker} ({scope}): {total:,} judgments made now — {made or 'none'}"
            out = [f"{url} ({e['resent']:,} requests re-sent: {e['taken_out']})" for url, e in endpoints.items()
                   if e["taken_out"] is not None]
            lines.append(line + (f"; **taken out**: {'; '.join(out)}" if out else ""))
    return lines


def equal_numbers_note(row: Mapping[str, Any], other: Mapping[str, Any]) -> str:
    """report.md's word beside a claim whose numbers another family's claim shares with another verdict
    (``reports.claim_families.same_numbers_elsewhere``): which claim, its family and size, and why they differ."""
    status = str(other["status"])
    verdict = f"is **{md_escape(status)}**" if status == "inconclusive" else f"**{md_escape(status)}**"
    return (f"Equal numbers, another verdict: {md_code(other['claim'])} measures the same effect on the same "
            f"directions and {verdict} in family "
            f"{md_escape(decided_in(other['family'], other.get('family_hypotheses')))}, this one in "
            f"{md_escape(decided_in(row['family'], row.get('family_hypotheses')))}: Holm corrects each p for the size "
            "of its own family (docs/statistics.md#families).")


def needed_in_units(row: Mapping[str, Any], directions: float) -> str:
    """The directions an inconclusive claim needs (claims.csv ``directions_needed``) in the units its design draws,
    `` (about 600 complete pairs)``: what a user samples or collects more of; empty for single directions.

    Whole source groups are counted at the claim's own mean group size (``n`` / ``n_groups``)."""
    units, n, groups = row.get("units"), row.get("n"), row.get("n_groups")
    if units == "pairs":
        return f" (about {math.ceil(directions / 2):,} complete pairs)"
    if units == "groups" and n and groups and math.isfinite(float(n)) and math.isfinite(float(groups)):
        return f" (about {math.ceil(directions * float(groups) / float(n)):,} source groups)"
    return ""


def not_evaluated_lines(entries: Sequence[NotEvaluated]) -> list[str]:
    """report.md's list of what did not run to a result: one line per outcome and reason, naming every part it cost.

    A ranker that cannot run here, or does not apply to the dataset, costs every part that computes it (its row,
    its claims, their perturbed copies): one line each repeated its reason some thirty times."""
    parts: dict[tuple[str, str], list[str]] = {}
    for entry in entries:
        parts.setdefault((entry.outcome, entry.message), []).append(entry.test)
    return [f"{', '.join(md_code(t) for t in tests)} {md_escape(outcome)}: {md_escape(message)}"
            for (outcome, message), tests in parts.items()]


def _fmt(value: object, digits: int) -> str:
    return "--" if value is None or pd.isna(value) else f"{value:.{digits}f}"


def _ci(value: object, lo: object, hi: object, digits: int, n: object = None) -> str:
    """``value [lo, hi]``, with ``interval_note``'s note when the interval cannot be read as one."""
    if value is None or pd.isna(value):
        return "--"
    if lo is None or pd.isna(lo):
        return _fmt(value, digits)
    note = interval_note(n, lo, hi)
    return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]" + (f" {note}" if note else "")


def md_escape(text: object) -> str:
    """``text`` as Markdown text on one line (a table cell or prose): every ``MD_SPECIAL`` character escaped."""
    return "".join("\\" + ch if ch in MD_SPECIAL else ch for ch in " ".join(str(text).split()))


def md_code(text: object) -> str:
    """``text`` as a Markdown code span in prose, on one line: fenced by more backticks than any run it holds."""
    flat = " ".join(str(text).split())
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", flat)), default=0))
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def md_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell as Markdown text (``md_escape``); numbers and the suite's own headers as they
    are."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            out[column] = [md_escape(v) if isinstance(v, str) else v for v in out[column]]
    return out


def tex_escape(text: object) -> str:
    """``text`` as LaTeX text: every special character (``& % $ # _ { } ~ ^ \\``) stands for itself."""
    return "".join(TEX_SPECIAL.get(ch, ch) for ch in str(text))


def _with_baseline(columns: tuple[Measure, ...]) -> list[Measure | None]:
    """``columns`` with None (the row's ``compare_to`` baseline) before the first column comparing with it."""
    first = next((i for i, m in enumerate(columns) if isinstance(m, BaselineMeasure)), len(columns))
    return [*columns[:first], *([None] if first < len(columns) else []), *columns[first:]]


def _heading(m: Measure, output: Output) -> str:
    """A column's heading in report.md or LaTeX, saying when its interval is shown."""
    if output == "latex":
        return m.tex or tex_escape(m.label)
    return f"{m.label} [95% CI]" if m.bounds is not None and output not in m.bare else m.label


def _cell(m: Measure, row: dict[str, Any], output: Output) -> str:
    """A Table II value as an output shows it: with its interval (and note) where shown, a population with thousands
    separators, a count whole, a rate or mean with its record's digits; ``--`` when missing."""
    value = row.get(m.name)
    if m.bounds is not None and output not in m.bare:
        lo, hi = m.bounds
        return _ci(value, row.get(lo), row.get(hi), m.digits, row.get("n"))
    if value is None or pd.isna(value):
        return "--"
    if m.unit == POPULATION:
        return f"{int(value):,}"
    return f"{int(value)}" if m.unit == COUNT else _fmt(value, m.digits)


def table2_latex(frame: pd.DataFrame, split: str, profile: str, commit: str) -> str:
    """Table II as a booktabs table with readable headers, n per row, intervals, each row's Δ baseline and label,
    and a caption naming split, profile and commit; the columns are those the registry shows in LaTeX."""
    def text(row: dict[str, Any], name: str, default: object = "") -> str:
        value = row.get(name)
        return tex_escape(value if value is not None and pd.notna(value) and value != "" else default)

    columns = _with_baseline(shown_in("latex"))
    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             r"\begin{tabular}{l" + "".join("l" if m is None else "r" for m in columns) + r"p{4cm}}", r"\toprule",
             " & ".join(["Ranker", *("Baseline" if m is None else _heading(m, "latex") for m in columns), "Label"])
             + r" \\",
             r"\midrule"]
    for row in frame.to_dict("records"):
        lines.append(" & ".join([
            tex_escape(row["ranker"]),
            *(text(row, "compare_to") if m is None else tex_escape(_cell(m, row, "latex")) for m in columns),
            text(row, "label", row["ranker"]) + (f" ({tex_escape(row['seeds'])})" if isinstance(row.get("seeds"), str)
                                                 and row["seeds"] else ""),
        ]) + r" \\")
    caption = (f"Preference and position on NevIR {tex_escape(split)} (profile {tex_escape(profile)}, commit "
               f"{tex_escape(commit)}). "
               r"Intervals: 95\% source-group bootstrap (2,000 resamples), marked unreliable over fewer than "
               f"{RELIABLE_N} directions or when of zero width. "
               r"$\Delta$ strict: each row against its own \texttt{compare\_to} baseline (column Baseline; rows "
               r"may have different baselines), paired on that row's $n$ directions.")
    label = "".join(ch if ch.isalnum() else "-" for ch in split)
    lines += [r"\bottomrule", r"\end{tabular}", f"\\caption{{{caption}}}", f"\\label{{tab:table2-{label}}}",
              r"\end{table}", ""]
    return "\n".join(lines)


def table2_markdown(table2: pd.DataFrame, labels: dict[str, str]) -> str:
    """Table II for report.md: label beside each ranker (with the seed its row is, for a ranker trained with several:
    ``(seed 13)``, in the words every output uses), then every column the registry shows there, a rate with its
    interval (and note), and the row's own baseline (``Δ vs``) before the Δ columns."""
    out = []
    for row in table2.to_dict("records"):
        name = str(row["ranker"])
        seeds = row.get("seeds")
        seed = f" ({seeds})" if isinstance(seeds, str) and seeds else ""
        shown = {"ranker": md_escape(name), "label": md_escape(labels.get(name, name) + seed)}
        for m in _with_baseline(shown_in("report")):
            if m is None:
                baseline = row.get("compare_to")
                shown["Δ vs"] = "" if baseline is None or pd.isna(baseline) else md_escape(baseline)
            else:
                shown[_heading(m, "report")] = _cell(m, row, "report")
        out.append(shown)
    return pd.DataFrame(out).to_markdown(index=False, disable_numparse=True)


def with_label_column(frame: pd.DataFrame, key: str, labels: dict[str, str]) -> pd.DataFrame:
    """``frame`` with a ``label`` column right after its ranker column (``key``)."""
    out = frame.copy()
    out.insert(list(out.columns).index(key) + 1, "label", [labels.get(str(v), str(v)) for v in out[key]])
    return out
